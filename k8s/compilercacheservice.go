package k8s

import (
	"fmt"
	"maps"
	"slices"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// CompilerCacheArgs are the compiler cache's servers (compilercache.go) and what they need.
type CompilerCacheArgs struct {
	Services []config.CompilerCacheService
	// Bucket is the bucket's name; Region its region.
	Bucket pulumi.StringInput
	Region string
	// Gpuci is what each server's gate runs (none: no gate, and no write).
	Gpuci Gpuci
	// DependsOn are the bucket and the servers' roles and Pod Identity associations
	// (infra.CompilerCache): a server must get its credentials when it starts.
	DependsOn  []pulumi.Resource
	ImageCache ImageCache
	// SkipAwait creates the servers without waiting for them to run (clusters without a
	// kubelet, such as the e2e API server); otherwise a scale set starts once its server runs.
	SkipAwait bool
}

// skipAwaitAnnotation tells pulumi-kubernetes not to wait for an object to be ready.
const skipAwaitAnnotation = "pulumi.com/skipAwait"

// CompilerCache is the servers' namespace, its network policies, and per server its
// ServiceAccount, Deployment and Service (and, read-only, its password file).
type CompilerCache struct {
	pulumi.ResourceState

	// Resources are everything a job's build reaches the cache through: the scale sets
	// depend on them, so no runner starts before its server and none outlives it.
	Resources []pulumi.Resource

	services []config.CompilerCacheService
	gated    bool
	parent   pulumi.ResourceOption
	accounts map[string]pulumi.Resource // by service
}

// NewCompilerCache declares the servers; with none, nothing.
func NewCompilerCache(ctx *pulumi.Context, name string, args *CompilerCacheArgs, opts ...pulumi.ResourceOption) (*CompilerCache, error) {
	if len(args.Services) == 0 {
		return &CompilerCache{}, nil
	}
	c := &CompilerCache{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:k8s:CompilerCache", name, c, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(c)
	var made []pulumi.Resource
	ns, err := corev1.NewNamespace(ctx, name, &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.CompilerCacheNamespace), Labels: pulumi.ToStringMap(CompilerCacheNamespaceLabels())},
	}, parent)
	if err != nil {
		return nil, err
	}
	made = append(made, ns)
	inNS := []pulumi.ResourceOption{parent, pulumi.DependsOn([]pulumi.Resource{ns})}
	for _, np := range CompilerCacheNetworkPolicies(args.Services) {
		r, err := newObject(ctx, name+"-"+np.Name, np.TypeMeta, np.ObjectMeta, np, inNS...)
		if err != nil {
			return nil, fmt.Errorf("compiler cache network policy %s: %w", np.Name, err)
		}
		made = append(made, r)
	}
	bucket, err := corev1.NewConfigMap(ctx, name+"-bucket", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(CompilerCacheBucketConfigMap), Namespace: pulumi.String(wellknown.CompilerCacheNamespace)},
		Data:     pulumi.StringMap{CompilerCacheBucketKey: args.Bucket},
	}, inNS...)
	if err != nil {
		return nil, err
	}
	made = append(made, bucket)
	for _, svc := range args.Services {
		n := wellknown.CompilerCacheName(svc.Name)
		sa, err := corev1.NewServiceAccount(ctx, name+"-"+n, &corev1.ServiceAccountArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(n), Namespace: pulumi.String(wellknown.CompilerCacheNamespace)},
		}, inNS...)
		if err != nil {
			return nil, err
		}
		deps := append([]pulumi.Resource{ns, sa, bucket}, args.DependsOn...)
		if !svc.Writes() || !args.Gpuci.Available() {
			f := CompilerCacheNoWriterFile(svc)
			cm, err := newObject(ctx, name+"-"+n+"-no-writer", f.TypeMeta, f.ObjectMeta, f, inNS...)
			if err != nil {
				return nil, err
			}
			deps = append(deps, cm)
		}
		d := CompilerCacheServer(svc, args.Region, args.ImageCache, args.Gpuci)
		if args.SkipAwait {
			d.Annotations = map[string]string{skipAwaitAnnotation: "true"}
		}
		server, err := newObject(ctx, name+"-"+n, d.TypeMeta, d.ObjectMeta, d, parent, pulumi.DependsOn(deps))
		if err != nil {
			return nil, fmt.Errorf("compiler cache server %s: %w", n, err)
		}
		s := CompilerCacheService(svc)
		if args.SkipAwait {
			s.Annotations = map[string]string{skipAwaitAnnotation: "true"} // it waits for endpoints
		}
		service, err := newObject(ctx, name+"-"+n+"-service", s.TypeMeta, s.ObjectMeta, s, inNS...)
		if err != nil {
			return nil, err
		}
		made = append(made, sa, server, service)
		if c.accounts == nil {
			c.accounts = map[string]pulumi.Resource{}
		}
		c.accounts[svc.Name] = sa
	}
	c.Resources = made
	c.services, c.gated, c.parent = args.Services, args.Gpuci.Available(), parent
	return c, ctx.RegisterResourceOutputs(c, pulumi.Map{})
}

// LetGatesRead grants each server's gate its reads (CompilerCacheGateRules) in the runners'
// and jobs' namespaces (namespaces: Runners.PodNamespaces). Until the grants exist a gate
// refuses every request: a build misses, and nothing is written.
func (c *CompilerCache) LetGatesRead(ctx *pulumi.Context, name string, namespaces []pulumi.Resource) error {
	if !c.gated {
		return nil
	}
	for _, svc := range c.services {
		account := wellknown.CompilerCacheName(svc.Name)
		rules := CompilerCacheGateRules(svc)
		for _, ns := range slices.Sorted(maps.Keys(rules)) {
			if _, err := newAccountRoleOf(ctx, name+"-"+account+"-"+ns, account, wellknown.CompilerCacheNamespace, ns, rules[ns], c.accounts[svc.Name],
				c.parent, pulumi.DependsOn(namespaces)); err != nil {
				return err
			}
		}
	}
	return nil
}
