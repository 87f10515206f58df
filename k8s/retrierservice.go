package k8s

import (
	"maps"
	"slices"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// RetrierArgs are the in-cluster retrier (retrier.go) and what it is given.
type RetrierArgs struct {
	Retrier    config.Retrier
	GitHub     config.GitHub
	Pools      []config.GPUPool
	ImageCache ImageCache
	// RunnerNamespaces are where the runner and job pods run (Runners.PodNamespaces): the
	// account's Roles there need them, and on destroy the retrier goes before them (and so
	// before ARC's controller, which the runners' namespace outlives). The namespaces, not
	// the Runners component: a dependency on a component is expanded to the children
	// registered so far, which can race its last ones (infra.created).
	RunnerNamespaces []pulumi.Resource
	// Gpuci is what it runs; Bucket the stack's bucket, where a stored gpuci is, and
	// Lifelines the role and association that read it (infra.CompilerCache); Region the
	// bucket's.
	Gpuci     Gpuci
	Bucket    pulumi.StringInput
	Lifelines []pulumi.Resource
	Region    string
}

// Retrier is the retrier's namespace, account, Roles, token and Deployment.
type Retrier struct {
	pulumi.ResourceState
}

// NewRetrier declares the in-cluster retrier; with none configured, nothing.
func NewRetrier(ctx *pulumi.Context, name string, args *RetrierArgs, opts ...pulumi.ResourceOption) (*Retrier, error) {
	if !args.Retrier.Enabled() {
		return &Retrier{}, nil
	}
	r := &Retrier{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:k8s:Retrier", name, r, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(r)
	ns, err := corev1.NewNamespace(ctx, name, &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.RetrierNamespace), Labels: pulumi.ToStringMap(RetrierNamespaceLabels())},
	}, parent)
	if err != nil {
		return nil, err
	}
	inNS := []pulumi.ResourceOption{parent, pulumi.DependsOn([]pulumi.Resource{ns})}
	sa, err := corev1.NewServiceAccount(ctx, name, &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.RetrierServiceAccount), Namespace: pulumi.String(wellknown.RetrierNamespace)},
	}, inNS...)
	if err != nil {
		return nil, err
	}
	boundary, err := newNetworkPolicies(ctx, name, RetrierNetworkPolicies(), inNS...)
	if err != nil {
		return nil, err
	}
	deps := append([]pulumi.Resource{ns, sa}, boundary...)
	reads := RetryReaderRules(args.Pools)
	outOfService, recordEvents := OutOfServiceRules()
	reads[k8smeta.NamespaceDefault] = append(slices.Clip(reads[k8smeta.NamespaceDefault]), recordEvents)
	for _, readNS := range slices.Sorted(maps.Keys(reads)) {
		rules := reads[readNS]
		rbac, err := newAccountRoleOf(ctx, name+"-"+readNS, wellknown.RetrierServiceAccount, wellknown.RetrierNamespace, readNS, rules, sa,
			parent, pulumi.DependsOn(args.RunnerNamespaces))
		if err != nil {
			return nil, err
		}
		deps = append(deps, rbac...)
	}
	rbac, err := newAccountClusterRole(ctx, name+"-out-of-service", wellknown.OutOfServiceRole, wellknown.RetrierServiceAccount, wellknown.RetrierNamespace, outOfService, sa, parent)
	if err != nil {
		return nil, err
	}
	deps = append(deps, rbac...)
	if rules := CoolDownRules(args.Retrier, args.Pools); rules != nil {
		rbac, err := newAccountClusterRole(ctx, name+"-cool-down", wellknown.CoolDownRole, wellknown.RetrierServiceAccount, wellknown.RetrierNamespace, rules, sa, parent)
		if err != nil {
			return nil, err
		}
		deps = append(deps, rbac...)
	}
	token, err := corev1.NewSecret(ctx, name+"-github", &corev1.SecretArgs{
		Metadata:   &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.RetrierTokenSecret), Namespace: pulumi.String(wellknown.RetrierNamespace)},
		StringData: pulumi.StringMap{retrierTokenKey: secretInput(*args.Retrier.GitHubToken)},
	}, inNS...)
	if err != nil {
		return nil, err
	}
	deps = append(deps, token)
	if args.Gpuci.Stored != "" {
		bucket, err := corev1.NewConfigMap(ctx, name+"-bucket", &corev1.ConfigMapArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(RetrierBucketConfigMap), Namespace: pulumi.String(wellknown.RetrierNamespace)},
			Data:     pulumi.StringMap{bucketKey: args.Bucket},
		}, inNS...)
		if err != nil {
			return nil, err
		}
		deps = append(append(deps, bucket), args.Lifelines...)
	}
	d := RetrierDeployment(args.Retrier, args.GitHub, args.Pools, args.ImageCache, args.Gpuci, args.Region)
	// Not awaited: a retrier that cannot start (its gpuci, its token) fails nothing else of
	// the up; gpuci verify reports it.
	d.Annotations = map[string]string{skipAwaitAnnotation: "true"}
	if _, err := newObject(ctx, name, d.TypeMeta, d.ObjectMeta, d, parent, pulumi.DependsOn(append(deps, args.RunnerNamespaces...))); err != nil {
		return nil, err
	}
	return r, ctx.RegisterResourceOutputs(r, pulumi.Map{})
}
