// Package k8s is the Kubernetes layer of lux-gpu-ci: Karpenter and its CRDs, one GPU
// NodePool/EC2NodeClass per pool, the NVIDIA device plugin, and Actions Runner Controller
// with one runner scale set per pool.
//
// It takes explicit arguments and does not import infra, so it deploys onto any cluster
// reachable with a kubeconfig (the e2e tests use a local API server).
package k8s

import (
	"fmt"
	"net"
	"net/url"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/lifelines"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s/nodepools"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// Args is everything the Kubernetes layer needs from the AWS layer and the stack config.
type Args struct {
	// Kubeconfig reaches the cluster (a secret).
	Kubeconfig pulumi.StringInput
	// Lifelines are what everything in the cluster needs while it runs and while its
	// finalizers run on destroy (lifelines.Cluster: network, add-ons, system nodes): the
	// provider depends on them, so every object in the cluster is deleted first. Each field
	// named for one of infra.Outputs' is that output, under the same name.
	Lifelines lifelines.Set

	ClusterName string
	Region      string
	// InterruptionQueue is the SQS queue name; NodeRoleName the Karpenter node role.
	InterruptionQueue pulumi.StringInput
	NodeRoleName      pulumi.StringInput
	// KarpenterLifelines are Karpenter's AWS side (its IAM, Pod Identity association, node
	// access entry, queue): needed before the controller starts and until it has drained
	// the GPU nodes on destroy.
	KarpenterLifelines lifelines.Set
	// NodesPublic gives GPU nodes public IPs (the lean network profile).
	NodesPublic bool
	// SystemNodes is the system node group's size: Karpenter runs a replica on each of two.
	SystemNodes int
	// Tags go on the EC2 instances and volumes Karpenter launches.
	Tags map[string]string

	Pools  []config.GPUPool
	GitHub config.GitHub
	// ImageCache is where nodes pull the runner images from (an ECR pull-through cache),
	// by upstream registry; nil pulls every image from its registry.
	ImageCache ImageCache

	// KubernetesMinor is the control plane's minor version (config.Config.KubernetesMinor):
	// what its API server serves.
	KubernetesMinor int

	// SkipAwait installs Helm releases without waiting for readiness (clusters without a
	// kubelet, such as the e2e API server).
	SkipAwait bool
	// Charts are where the charts come from; nil means the pinned ones (versions.Charts).
	Charts Charts
	// ARCVersion is the version of ARC's charts (config.ARCVersion): its major.minor decides
	// whether an upgrade of ARC reinstalls the scale sets (NewRunners).
	ARCVersion string
	// RunnerDrainSeconds is how long removing a scale set waits for its running jobs
	// (config.RunnerDrainTimeout).
	RunnerDrainSeconds int
	// RetryRunner is the retry runner (config.RetryRunner); its zero value is none.
	RetryRunner config.RetryRunner
	// Retrier is the in-cluster retrier (config.Retrier); its zero value is none.
	Retrier config.Retrier
	// Gpuci is what the stack's pods run (the retrier, the compiler caches' gates), and
	// RetrierLifelines the retrier's role and association that read a stored one.
	Gpuci            Gpuci
	RetrierLifelines []pulumi.Resource
	// CompilerCaches are the compiler cache's servers (config.Config.CompilerCaches), on
	// CompilerCacheBucket, with their AWS side (infra.CompilerCache) as
	// CompilerCacheLifelines.
	CompilerCaches         []config.CompilerCacheService
	CompilerCacheBucket    pulumi.StringInput
	CompilerCacheLifelines []pulumi.Resource
}

// Charts are the Helm charts the layer installs, by chart name.
type Charts map[string]versions.Chart

// ChartsWith are the pinned charts (versions.Charts), except those overrides names (the
// helmCharts config key), which come from where the override says.
func ChartsWith(overrides map[string]versions.Chart) Charts {
	c := Charts{}
	for _, pinned := range versions.Charts {
		c[pinned.Name()] = pinned
		if o, ok := overrides[pinned.Name()]; ok {
			c[pinned.Name()] = o
		}
	}
	return c
}

// of is where the pinned chart comes from.
func (c Charts) of(pinned versions.Chart) versions.Chart { return c[pinned.Name()] }

// Layer is the Kubernetes layer. It registers as lux-gpu-ci:k8s:GPUCI, its first name, which
// every resource's URN carries: renaming the type token would replace the whole layer.
type Layer struct {
	pulumi.ResourceState

	// RunsOn maps each pool's scale set name to the `runs-on:` values that reach it.
	RunsOn pulumi.StringMapMapOutput `pulumi:"runsOn"`
}

// New deploys the Kubernetes layer.
func New(ctx *pulumi.Context, name string, args *Args, opts ...pulumi.ResourceOption) (*Layer, error) {
	charts := args.Charts
	if charts == nil {
		charts = ChartsWith(nil)
	}
	g := &Layer{}
	if err := ctx.RegisterComponentResource(wellknown.KubernetesLayerComponent, name, g, opts...); err != nil {
		return nil, err
	}
	kubeconfig := args.Kubeconfig
	if args.SkipAwait {
		kubeconfig = loopbackOnly(args.Kubeconfig)
	}
	provider, err := kubernetes.NewProvider(ctx, name, &kubernetes.ProviderArgs{
		Kubeconfig:            kubeconfig,
		EnableServerSideApply: pulumi.Bool(true),
		// DeleteUnreachable stays off: dropping unreachable objects from state would orphan
		// Karpenter's EC2 instances. PULUMI_K8S_DELETE_UNREACHABLE is the break-glass.
	}, pulumi.Parent(g), args.Lifelines.Keep())
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes provider: %w", err)
	}
	in := []pulumi.ResourceOption{pulumi.Parent(g), pulumi.Providers(provider)}
	// ARC's CRDs used to be installed by the controller chart's crds/ (before the program
	// managed them): on such a cluster they exist, unowned. This provider adopts them
	// (server-side apply upserts) instead of failing with AlreadyExists; everything else
	// keeps failing on an object it did not create.
	crdProvider, err := kubernetes.NewProvider(ctx, name+"-crds", &kubernetes.ProviderArgs{
		Kubeconfig:            kubeconfig,
		EnableServerSideApply: pulumi.Bool(true),
		UpsertExistingObjects: pulumi.Bool(true),
	}, pulumi.Parent(g), args.Lifelines.Keep())
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes provider for CRDs: %w", err)
	}

	// kube-system holds CoreDNS and Karpenter, which keep the network they had (strict mode:
	// boundary.go): before anything of the stack's starts there.
	kubeSystem, err := newNetworkPolicies(ctx, name+"-kube-system", []networkingv1.NetworkPolicy{AllowAll(wellknown.KarpenterNamespace)}, in...)
	if err != nil {
		return nil, err
	}
	karpenter, err := NewKarpenter(ctx, name+"-karpenter", &KarpenterArgs{
		ClusterName:       args.ClusterName,
		Region:            args.Region,
		InterruptionQueue: args.InterruptionQueue,
		Lifelines:         args.KarpenterLifelines,
		SkipAwait:         args.SkipAwait,
		CRDChart:          charts.of(versions.KarpenterCRDChart),
		Chart:             charts.of(versions.KarpenterChart),
		SystemNodes:       args.SystemNodes,
		Network:           kubeSystem,
	}, in...)
	if err != nil {
		return nil, err
	}
	if _, err := NewDevicePlugin(ctx, name+"-nvidia", &DevicePluginArgs{
		Chart:     charts.of(versions.NvidiaDevicePluginChart),
		SkipAwait: args.SkipAwait,
	}, in...); err != nil {
		return nil, err
	}
	nodePools := map[string][]pulumi.Resource{}
	for _, pool := range args.Pools {
		p, err := NewPoolNodes(ctx, name+"-"+pool.Name, &PoolNodesArgs{
			Pool:         pool,
			ClusterName:  args.ClusterName,
			NodeRoleName: args.NodeRoleName,
			NodesPublic:  args.NodesPublic,
			Tags:         args.Tags,
			Karpenter:    karpenter.Release,
			CoolDown:     nodepools.CoolsDown(pool, args.Retrier),
		}, in...)
		if err != nil {
			return nil, err
		}
		nodePools[pool.Name] = p.NodePools()
	}
	if _, err := NewWarmCapacity(ctx, name+"-warm", &WarmCapacityArgs{
		Pools: args.Pools, ImageCache: args.ImageCache, NodePools: nodePools,
	}, in...); err != nil {
		return nil, err
	}
	compilerCache, err := NewCompilerCache(ctx, name+"-compiler-cache", &CompilerCacheArgs{
		Services: args.CompilerCaches, Bucket: args.CompilerCacheBucket, Region: args.Region,
		DependsOn: args.CompilerCacheLifelines, ImageCache: args.ImageCache, SkipAwait: args.SkipAwait, Gpuci: args.Gpuci,
	}, in...)
	if err != nil {
		return nil, err
	}
	runners, err := NewRunners(ctx, name+"-arc", &RunnersArgs{
		Pools:            args.Pools,
		GitHub:           args.GitHub,
		NodePools:        nodePools,
		SkipAwait:        args.SkipAwait,
		ControllerChart:  charts.of(versions.ARCControllerChart),
		CRDProvider:      crdProvider,
		ScaleSetChart:    charts.of(versions.ARCScaleSetChart),
		ARCVersion:       args.ARCVersion,
		DrainSeconds:     args.RunnerDrainSeconds,
		ImageCache:       args.ImageCache,
		RetryRunner:      args.RetryRunner,
		CompilerCache:    compilerCache.Resources,
		LaunchedCapacity: args.KubernetesMinor >= LaunchedCapacityMinKubernetesMinor,
	}, in...)
	if err != nil {
		return nil, err
	}

	if err := compilerCache.LetGatesRead(ctx, name+"-compiler-cache", runners.PodNamespaces); err != nil {
		return nil, err
	}

	if _, err := NewRetrier(ctx, name+"-retrier", &RetrierArgs{
		Retrier: args.Retrier, GitHub: args.GitHub, Pools: args.Pools, ImageCache: args.ImageCache, RunnerNamespaces: runners.PodNamespaces,
		Gpuci: args.Gpuci, Bucket: args.CompilerCacheBucket, Lifelines: args.RetrierLifelines, Region: args.Region,
	}, in...); err != nil {
		return nil, err
	}

	g.RunsOn = runners.RunsOn
	if err := ctx.RegisterResourceOutputs(g, pulumi.Map{"runsOn": g.RunsOn}); err != nil {
		return nil, err
	}
	return g, nil
}

// loopbackOnly passes the kubeconfig on only if its cluster's API server is on the loopback
// network. helmSkipAwait exists for the e2e's kubelet-less API server; on a real cluster it
// would remove the teardown order (an uninstall that does not wait lets the GitHub
// credentials go while ARC still needs them to delete its scale sets), so there it is an
// error naming the key. The endpoint is known once the cluster exists (a first preview cannot
// tell; its up stops here, before anything in the cluster is created).
func loopbackOnly(kubeconfig pulumi.StringInput) pulumi.StringOutput {
	return pulumi.ToSecret(kubeconfig.ToStringOutput().ApplyT(func(kc string) (string, error) {
		cfg, err := clientcmd.Load([]byte(kc))
		if err != nil {
			return "", fmt.Errorf("reading the kubeconfig: %w", err)
		}
		server := ""
		if c, ok := cfg.Contexts[cfg.CurrentContext]; ok && cfg.Clusters[c.Cluster] != nil {
			server = cfg.Clusters[c.Cluster].Server
		}
		u, err := url.Parse(server)
		host := ""
		if err == nil {
			host = u.Hostname()
		}
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
			return kc, nil
		}
		return "", fmt.Errorf("%s:%s: true, but the cluster's API server %q is not on the loopback network; "+
			"skipping Helm's waits is only for a test API server without kubelets, on a real cluster it removes the teardown order "+
			"(fix: pulumi config set %s false)", config.Project, config.KeyHelmSkipAwait, server, config.KeyHelmSkipAwait)
	})).(pulumi.StringOutput)
}
