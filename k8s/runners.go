package k8s

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	policyv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/policy/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8scorev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/instancetypes"
	"github.com/luxfi/lux-gpu-ci/internal/lifelines"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// RunnersArgs describes ARC and its scale sets.
type RunnersArgs struct {
	Pools  []config.GPUPool
	GitHub config.GitHub
	// NodePools by pool name: a scale set goes before its NodePool on destroy, so no runner
	// is left waiting for a node that will never come.
	NodePools                      map[string]pulumi.Resource
	SkipAwait                      bool
	ControllerChart, ScaleSetChart versions.Chart
	// ARCVersion is the charts' version; a change of its major.minor reinstalls ARC.
	ARCVersion string
	// DrainSeconds bounds a scale set's uninstall: ARC's cleanup waits for running jobs.
	DrainSeconds int
	// CRDProvider declares ARC's CRDs: it adopts ones an earlier Helm install left.
	CRDProvider pulumi.ProviderResource
	// ImageCache serves the runner images from ECR where their registry has a rule.
	ImageCache ImageCache
	// RetryRunner is the retry runner (RetryScaleSetValues); its zero value is none.
	RetryRunner config.RetryRunner
	// CompilerCache is what the pools' builds reach the compiler cache through: their scale
	// sets start after it and go before it.
	CompilerCache []pulumi.Resource
}

// Runners is the ARC controller, the GitHub credentials Secret and one runner scale set per
// pool.
type Runners struct {
	pulumi.ResourceState

	// RunsOn maps each scale set name to its two `runs-on:` forms.
	RunsOn pulumi.StringMapMapOutput `pulumi:"runsOn"`
}

// ControllerValues are the gha-runner-scale-set-controller values. Metrics are on (the
// chart's are off unless set, values.yaml "To enable metrics"): the controller's, and each
// listener's — the jobs a scale set was offered, assigned and is running, and how long they
// waited (cmd/ghalistener/metrics/metrics.go:37-48 at gha-runner-scale-set-0.14.2) — on
// :8080/metrics in arc-systems, for a scraper the team runs (docs/operations.md, "Metrics");
// nothing scrapes them by default.
func ControllerValues() map[string]any {
	return map[string]any{
		"serviceAccount": map[string]any{"create": true, "name": wellknown.ARCServiceAccount},
		"flags":          map[string]any{"logLevel": "info"},
		"metrics": map[string]any{
			"controllerManagerAddr": fmt.Sprintf(":%d", wellknown.ARCMetricsPort),
			"listenerAddr":          fmt.Sprintf(":%d", wellknown.ARCMetricsPort),
			"listenerEndpoint":      "/metrics",
		},
	}
}

// RunnerResources sizes a runner to 75% of the per-GPU share of the pool's smallest
// instance type, leaving the rest for kubelet reservations and DaemonSets. On g4dn.xlarge
// (4 vCPU, 16 GiB; 3920m / 14481Mi allocatable) that is 3 CPUs and 12Gi.
func RunnerResources(pool config.GPUPool) (k8scorev1.ResourceRequirements, error) {
	vcpus, memGiB, err := instancetypes.Smallest(pool.InstanceTypes)
	if err != nil {
		return k8scorev1.ResourceRequirements{}, fmt.Errorf("pool %s: %w", pool.Name, err)
	}
	cpu := resource.NewMilliQuantity(int64(math.Floor(vcpus*0.75*10))*100, resource.DecimalSI)
	mem := resource.MustParse(fmt.Sprintf("%dGi", int64(math.Floor(memGiB*0.75))))
	gpu := resource.MustParse("1")
	return k8scorev1.ResourceRequirements{
		Requests: k8scorev1.ResourceList{k8scorev1.ResourceCPU: *cpu, k8scorev1.ResourceMemory: mem, gpuResource: gpu},
		Limits:   k8scorev1.ResourceList{k8scorev1.ResourceMemory: mem, gpuResource: gpu},
	}, nil
}

// gpuToleration lets a pod onto GPU nodes (the NodePools' taint).
var gpuToleration = k8scorev1.Toleration{Key: wellknown.GPUTaintKey, Operator: k8scorev1.TolerationOpExists, Effect: k8scorev1.TaintEffectNoSchedule}

// RunnerTemplate is a pool's runner pod. In the runner form it holds the GPU; in the
// container form the job pod holds it instead (JobPodTemplate).
// The runner image comes through the image cache when its registry has a rule.
func RunnerTemplate(pool config.GPUPool, cache ImageCache) (k8scorev1.PodTemplateSpec, error) {
	if pool.JobForm == config.JobFormContainer {
		return containerFormRunnerTemplate(pool, cache), nil
	}
	t, err := gpuPodTemplate(pool, k8scorev1.Container{
		// ARC requires the runner container to be called "runner".
		Name:            "runner",
		Image:           cache.Pull(pool.RunnerImage),
		ImagePullPolicy: runnerPullPolicy(pool),
		Command:         []string{"/home/runner/run.sh"},
	})
	if err != nil {
		return t, err
	}
	// The runner holds the GPU: its job hooks check it and sum its use up (jobhooks.go).
	return withJobHooks(t, pool), nil
}

// gpuPodTemplate is the pod that holds a pool's GPU, whichever form: container c with one GPU
// and the pool's share of its node (RunnerResources), on the pool's nodes, tolerating their
// taint, never disrupted by consolidation while a job runs. A job's own code runs in it, so it
// mounts no service-account token (ARC and the container hooks keep the template's
// automountServiceAccountToken: resourcebuilder.go newEphemeralRunnerPod at
// gha-runner-scale-set-0.14.2 copies the spec; the hooks' utils.ts mergePodSpecWithOptions at
// v0.8.1 keeps every spec key of the template, for job and container-step pods alike).
func gpuPodTemplate(pool config.GPUPool, c k8scorev1.Container) (k8scorev1.PodTemplateSpec, error) {
	res, err := RunnerResources(pool)
	if err != nil {
		return k8scorev1.PodTemplateSpec{}, err
	}
	c.Resources = res
	// The job's code finds the pool's compiler cache by ccache's own variables, and the
	// label is what lets its pod reach the cache's server.
	c.Env = append(c.Env, CompilerCacheEnv(pool)...)
	labels := map[string]string{wellknown.PoolLabel: pool.Name, wellknown.RunnerRoleLabel: wellknown.RunnerRoleJob}
	if svc := pool.CompilerCacheService(); svc != "" {
		labels[wellknown.CompilerCacheLabel] = svc
	}
	return k8scorev1.PodTemplateSpec{
		ObjectMeta: k8smeta.ObjectMeta{
			Labels:      labels,
			Annotations: map[string]string{wellknown.DoNotDisrupt: "true"},
		},
		Spec: k8scorev1.PodSpec{
			AutomountServiceAccountToken: ptr(false),
			NodeSelector:                 map[string]string{wellknown.NodePoolLabel: pool.Name},
			Tolerations:                  []k8scorev1.Toleration{gpuToleration},
			Containers:                   []k8scorev1.Container{c},
		},
	}, nil
}

// systemRunnerResources: a runner on the system nodes only relays (a container-form job to its
// pod through the Node.js hooks, or a retry decision) besides the .NET runner, so it is sized
// for a t3.medium it shares with Karpenter, CoreDNS and ARC.
var systemRunnerResources = k8scorev1.ResourceRequirements{
	Requests: k8scorev1.ResourceList{k8scorev1.ResourceCPU: resource.MustParse("100m"), k8scorev1.ResourceMemory: resource.MustParse("384Mi")},
	Limits:   k8scorev1.ResourceList{k8scorev1.ResourceMemory: resource.MustParse("1Gi")},
}

// systemRunnerPod is a runner pod for the system nodes (a container-form pool's, the retry
// runner's): no GPU and no GPU toleration, systemRunnerResources, under account, whose token
// it uses to reach the API server for its job (RunnerRoleRelay).
func systemRunnerPod(account, image string, pull k8scorev1.PullPolicy) k8scorev1.PodTemplateSpec {
	return k8scorev1.PodTemplateSpec{
		ObjectMeta: k8smeta.ObjectMeta{Labels: map[string]string{wellknown.RunnerRoleLabel: wellknown.RunnerRoleRelay}},
		Spec: k8scorev1.PodSpec{
			ServiceAccountName: account,
			NodeSelector:       map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue},
			Containers: []k8scorev1.Container{{
				// ARC requires the runner container to be called "runner".
				Name:            "runner",
				Image:           image,
				ImagePullPolicy: pull,
				Command:         []string{"/home/runner/run.sh"},
				Resources:       systemRunnerResources,
			}},
		},
	}
}

// runnerPullPolicy pulls the followed image on every start (a node may hold an older
// :latest); a pinned image never changes, so the node's copy is good.
func runnerPullPolicy(pool config.GPUPool) k8scorev1.PullPolicy {
	if pool.FollowsRunnerReleases() {
		return k8scorev1.PullAlways
	}
	return k8scorev1.PullIfNotPresent
}

// ScaleSetValues are the gha-runner-scale-set values for a pool.
func ScaleSetValues(pool config.GPUPool, gh config.GitHub, cache ImageCache) (map[string]any, error) {
	tmpl, err := RunnerTemplate(pool, cache)
	if err != nil {
		return nil, err
	}
	t, err := unstructured(tmpl)
	if err != nil {
		return nil, err
	}
	labels := make([]any, len(pool.RunnerLabels))
	for i, l := range pool.RunnerLabels {
		labels[i] = l
	}
	values := map[string]any{
		"githubConfigUrl":    gh.ConfigURL,
		"githubConfigSecret": wellknown.GitHubSecretName,
		// Defaults to the release name otherwise; it is also the runs-on label.
		"runnerScaleSetName": pool.RunnerScaleSetName,
		// Registered only when the scale set is first created (ARC 0.14).
		"scaleSetLabels": labels,
		// A container-form pool keeps a runner waiting on a system node; nothing else waits
		// (config.GPUPool.IdleRunners).
		"minRunners": pool.IdleRunners(),
		"maxRunners": pool.MaxRunners,
		"controllerServiceAccount": map[string]any{
			"namespace": wellknown.ARCNamespace,
			"name":      wellknown.ARCServiceAccount,
		},
		"template": t,
	}
	if pool.RunnerGroup != "" {
		// Looked up by name at the org; the group must exist and allow the repositories.
		values["runnerGroup"] = pool.RunnerGroup
	}
	if pool.JobForm == config.JobFormContainer {
		// ARC ≥ 0.13: job pods through the container hooks, no work volume (no PVC, so no
		// EBS CSI driver or StorageClass).
		values["containerMode"] = map[string]any{"type": "kubernetes-novolume"}
	}
	return values, nil
}

// RunsOn returns the two `runs-on:` forms that reach a pool's scale set.
func RunsOn(pool config.GPUPool) map[string]string {
	return map[string]string{
		"labels":   "[" + strings.Join(pool.RunnerLabels, ", ") + "]",
		"scaleSet": pool.RunnerScaleSetName,
	}
}

// NewRunners installs ARC, the credentials Secret and the scale sets.
func NewRunners(ctx *pulumi.Context, name string, args *RunnersArgs, opts ...pulumi.ResourceOption) (*Runners, error) {
	r := &Runners{}
	if err := ctx.RegisterComponentResource(wellknown.RunnersComponent, name, r, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(r)
	// The controller's namespace holds a copy of the GitHub credential for each listener
	// (resourcebuilder.go newScaleSetListenerConfig): no privileged pod runs there either.
	systemNS, err := corev1.NewNamespace(ctx, name+"-systems", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.ARCNamespace), Labels: pulumi.ToStringMap(PodSecurityLabels())},
	}, parent)
	if err != nil {
		return nil, err
	}
	// The CRDs outlive the controller (it removes its finalizers from their objects) and
	// follow its chart version (newARCCRDs); Helm's one-time install of crds/ is skipped.
	// Deleting a CRD deletes every object of its kind — every scale set, every runner — so the
	// program never deletes one: a replace (a new provider, `up --replace`) or a rename that
	// lost its alias (stack/urns_test.go pins the URNs) retains the live CRD and the new
	// resource adopts it (the CRD provider upserts); on destroy they stay, empty, and go with
	// the EKS cluster. Delete-before-replace keeps the old and the new resource from both
	// claiming the CRD at once.
	crds, err := newARCCRDs(ctx, name+"-crd", args.ControllerChart, parent, pulumi.Provider(args.CRDProvider),
		pulumi.DeleteBeforeReplace(true), pulumi.RetainOnDelete(true))
	if err != nil {
		return nil, err
	}
	// An ARC upgrade across a minor version is ARC's own procedure, in one up: remove every
	// scale set, upgrade the controller, install the scale sets again. The controller deletes
	// any AutoscalingRunnerSet of another major.minor than its own build, and GitHub's scale
	// set with it (autoscalingrunnerset_controller.go, the IsVersionAllowed branch, at
	// gha-runner-scale-set-0.14.2), so upgrading either side in place loses the scale sets
	// while the releases stay "deployed". Here the ARC minor is the controller's replacement
	// trigger, replaced delete-first; each scale set is replaced with it (ReplaceWith), so
	// the engine runs: delete the scale sets (each uninstall waits until the old controller
	// has cleaned up, which waits for the runners' jobs) → delete the controller → install
	// the new one → install the scale sets. A patch bump stays an in-place upgrade. The
	// release's description names the minor, so a preview shows the change.
	// ARC's releases keep its CRDs (lifelines.ARCCRDs): the controller directly, the scale
	// sets through it.
	crdLifelines := lifelines.Of(lifelines.ARCCRDs, crds...)
	arcMinor := config.MajorMinor(args.ARCVersion)
	controller, err := newRelease(ctx, name+"-controller", release{
		Name: wellknown.ARCControllerRelease, Namespace: wellknown.ARCNamespace, Chart: args.ControllerChart,
		Values: ControllerValues(), SkipCrds: true, SkipAwait: args.SkipAwait,
		Description: "ARC " + arcMinor + ": a change of minor version reinstalls the controller and every scale set",
	}, parent, pulumi.DependsOn([]pulumi.Resource{systemNS}), crdLifelines.Keep(),
		pulumi.ReplacementTrigger(pulumi.String(arcMinor)), pulumi.DeleteBeforeReplace(true))
	if err != nil {
		return nil, err
	}
	// The scale sets' objects carry ARC's cleanup-protection finalizers, which only the
	// controller removes: the runners' namespace must be gone before the controller goes.
	runnersNS, err := corev1.NewNamespace(ctx, name+"-runners", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.RunnersNamespace), Labels: pulumi.ToStringMap(PodSecurityLabels())},
	}, parent, pulumi.DependsOn([]pulumi.Resource{controller}))
	if err != nil {
		return nil, err
	}
	// Every scale set depends on the boundary: no runner starts before it, and on destroy it
	// stands until the last runner's job has drained.
	boundary, err := newNetworkPolicies(ctx, name, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}

	creds := pulumi.StringMap{}
	switch gh := args.GitHub; {
	case gh.Token != nil:
		creds["github_token"] = secretInput(*gh.Token)
	case gh.App != nil:
		creds["github_app_id"] = pulumi.String(gh.App.AppID)
		creds["github_app_installation_id"] = pulumi.String(gh.App.InstallationID)
		creds["github_app_private_key"] = secretInput(gh.App.PrivateKey)
	default:
		return nil, fmt.Errorf("runners: no GitHub credentials")
	}
	secret, err := corev1.NewSecret(ctx, name+"-github", &corev1.SecretArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.GitHubSecretName), Namespace: pulumi.String(wellknown.RunnersNamespace)},
		Type:     pulumi.String("Opaque"),
		// A secret end to end: Pulumi encrypts it in state and never prints it.
		StringData: pulumi.ToSecret(creds).(pulumi.StringMapOutput),
	}, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}

	hooks, err := newContainerHooks(ctx, name, args.Pools, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}
	budgets, err := newRunningJobsBudgets(ctx, name, args.Pools, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}
	jobHooks, err := newJobHooks(ctx, name, args.Pools, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
	if err != nil {
		return nil, err
	}

	runsOn := pulumi.StringMapMap{}
	for _, pool := range args.Pools {
		vals, err := ScaleSetValues(pool, args.GitHub, args.ImageCache)
		if err != nil {
			return nil, err
		}
		deps := append(append(append([]pulumi.Resource{controller, secret, runnersNS}, budgets...), boundary...), args.CompilerCache...)
		if np := args.NodePools[pool.Name]; np != nil {
			deps = append(deps, np)
		}
		// A container-form scale set's runners need their account and job pod template
		// until the last of them is gone.
		deps = append(deps, hooks[pool.Name]...)
		// A runner-form scale set's runners mount the job hooks.
		if pool.JobForm == config.JobFormRunner && jobHooks != nil {
			deps = append(deps, jobHooks)
		}
		// A scale set's release always waits (its chart has no workload to wait for on
		// install): its uninstall must block until ARC has cleaned the scale set up — its
		// runners' jobs finished, GitHub's scale set deleted — before the controller, the
		// credentials or the namespace go, on destroy and on an ARC upgrade alike.
		if _, err := newRelease(ctx, name+"-"+pool.RunnerScaleSetName, release{
			Name: pool.RunnerScaleSetName, Namespace: wellknown.RunnersNamespace, Chart: args.ScaleSetChart,
			Values: vals, TimeoutSeconds: args.DrainSeconds,
		}, parent, pulumi.DependsOn(deps), pulumi.ReplaceWith([]pulumi.Resource{controller})); err != nil {
			return nil, err
		}
		runsOn[pool.RunnerScaleSetName] = pulumi.ToStringMap(RunsOn(pool))
	}
	if retry := args.RetryRunner; retry.ScaleSetName != "" {
		account, err := newRetryReader(ctx, name, parent, pulumi.DependsOn([]pulumi.Resource{runnersNS}))
		if err != nil {
			return nil, err
		}
		// Like a pool's: its uninstall waits for ARC's cleanup, before the controller, the
		// credentials, the account or the namespace go.
		vals, err := RetryScaleSetValues(retry, args.GitHub, args.ImageCache)
		if err != nil {
			return nil, err
		}
		if _, err := newRelease(ctx, name+"-"+retry.ScaleSetName, release{
			Name: retry.ScaleSetName, Namespace: wellknown.RunnersNamespace, Chart: args.ScaleSetChart,
			Values: vals, TimeoutSeconds: args.DrainSeconds,
		}, parent, pulumi.DependsOn(append(append(append([]pulumi.Resource{controller, secret, runnersNS}, budgets...), boundary...), account...)),
			pulumi.ReplaceWith([]pulumi.Resource{controller})); err != nil {
			return nil, err
		}
		runsOn[retry.ScaleSetName] = pulumi.ToStringMap(map[string]string{"scaleSet": retry.ScaleSetName})
	}

	r.RunsOn = runsOn.ToStringMapMapOutput()
	if err := ctx.RegisterResourceOutputs(r, pulumi.Map{"runsOn": r.RunsOn}); err != nil {
		return nil, err
	}
	return r, nil
}

// RunningJobsBudget and BusyRunnersBudget are the PodDisruptionBudgets that keep a job's pods
// from being evicted while the job runs. Karpenter's GPU nodes honour do-not-disrupt already;
// these are for what drains nodes by eviction: a managed node group update (a new system-node
// AMI, instance type, or a tag edit that changes its launch template) would otherwise evict
// the container-form runners on the system nodes and fail their jobs. With them, EKS retries
// the eviction for 15 minutes and then fails the update (PodEvictionFailure) rather than kill
// a job; the next `up` tries again.
//
//   - RunningJobsBudget: the pods a job's own code runs in (wellknown.RunnerRoleJob: a
//     runner-form runner, a container-form job's pod). ARC's runners are ephemeral, so such a
//     pod exists only while its job does; none is ever evicted, not even one that is not
//     Ready yet (a starting job).
//   - BusyRunnersBudget: the container-form runners (wellknown.RunnerRoleRelay, with a pool),
//     one of which waits for a job on the system nodes (config.GPUPool.IdleRunners). Such a
//     runner is Ready only while it runs a job (RunnerBusyProbe), and this budget lets any
//     runner that is not Ready go (unhealthyPodEvictionPolicy AlwaysAllow: the API server's
//     eviction, kubernetes v1.36.3 pkg/registry/core/pod/storage/eviction.go:238-244): a roll
//     moves an idle runner, which ARC starts again on another node (a missing runner pod is
//     re-created: ephemeralrunner_controller.go at gha-runner-scale-set-0.14.2, lines
//     256-262), and never a busy one.
//
// Their selectors are disjoint: the eviction API refuses a pod that two budgets select.
const (
	RunningJobsBudget = "running-jobs"
	BusyRunnersBudget = "busy-runners"
)

// RunningJobsMinAvailable is each budget's minAvailable: at least as many pods as the pools
// can ever run at once (a runner and a job pod per runner), so the disruption controller never
// allows an eviction of a Ready pod (allowed = healthy − minAvailable ≤ 0). An integer
// minAvailable is the one form a budget supports for pods of an arbitrary controller (ARC's
// EphemeralRunner has no scale subresource); maxUnavailable or a percentage would need one.
func RunningJobsMinAvailable(pools []config.GPUPool) int {
	n := 0
	for _, p := range pools {
		n += 2 * p.MaxRunners
	}
	return n
}

// RunningJobsBudgets are the two budgets' specs, by name (BusyRunnersBudget only with a
// container-form pool).
func RunningJobsBudgets(pools []config.GPUPool) map[string]k8spolicyv1.PodDisruptionBudgetSpec {
	spec := func(role string, unhealthy k8spolicyv1.UnhealthyPodEvictionPolicyType) k8spolicyv1.PodDisruptionBudgetSpec {
		return k8spolicyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr(intstr.FromInt32(int32(RunningJobsMinAvailable(pools)))),
			Selector: &k8smeta.LabelSelector{
				MatchLabels:      map[string]string{wellknown.RunnerRoleLabel: role},
				MatchExpressions: []k8smeta.LabelSelectorRequirement{{Key: wellknown.PoolLabel, Operator: k8smeta.LabelSelectorOpExists}},
			},
			UnhealthyPodEvictionPolicy: ptr(unhealthy),
		}
	}
	budgets := map[string]k8spolicyv1.PodDisruptionBudgetSpec{
		RunningJobsBudget: spec(wellknown.RunnerRoleJob, k8spolicyv1.IfHealthyBudget),
	}
	if slices.ContainsFunc(pools, func(p config.GPUPool) bool { return p.JobForm == config.JobFormContainer }) {
		budgets[BusyRunnersBudget] = spec(wellknown.RunnerRoleRelay, k8spolicyv1.AlwaysAllow)
	}
	return budgets
}

// newRunningJobsBudgets creates RunningJobsBudgets; the busy runners' budget after the
// running jobs' one, so that an upgrade narrows the older budget before the new one selects
// the container-form runners (one pod, one budget, throughout).
func newRunningJobsBudgets(ctx *pulumi.Context, name string, pools []config.GPUPool, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	var created []pulumi.Resource
	specs := RunningJobsBudgets(pools)
	for _, budget := range []string{RunningJobsBudget, BusyRunnersBudget} {
		spec, ok := specs[budget]
		if !ok {
			continue
		}
		var exprs metav1.LabelSelectorRequirementArray
		for _, e := range spec.Selector.MatchExpressions {
			exprs = append(exprs, metav1.LabelSelectorRequirementArgs{Key: pulumi.String(e.Key), Operator: pulumi.String(string(e.Operator))})
		}
		pdb, err := policyv1.NewPodDisruptionBudget(ctx, name+"-"+budget, &policyv1.PodDisruptionBudgetArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(budget), Namespace: pulumi.String(wellknown.RunnersNamespace)},
			Spec: &policyv1.PodDisruptionBudgetSpecArgs{
				MinAvailable:               pulumi.Int(spec.MinAvailable.IntValue()),
				Selector:                   &metav1.LabelSelectorArgs{MatchLabels: pulumi.ToStringMap(spec.Selector.MatchLabels), MatchExpressions: exprs},
				UnhealthyPodEvictionPolicy: pulumi.String(string(*spec.UnhealthyPodEvictionPolicy)),
			},
		}, slices.Concat(opts, []pulumi.ResourceOption{pulumi.DependsOn(slices.Clone(created))})...)
		if err != nil {
			return nil, err
		}
		created = append(created, pdb)
	}
	return created, nil
}

// newContainerHooks creates what container-form pools' runners use: one ServiceAccount, Role
// and RoleBinding (ContainerHooksRules) shared by them, and each pool's job pod template. It
// returns, by pool name, the resources a pool's scale set depends on (none for runner-form
// pools; nothing at all when no pool uses the container form).
func newContainerHooks(ctx *pulumi.Context, name string, pools []config.GPUPool, opts ...pulumi.ResourceOption) (map[string][]pulumi.Resource, error) {
	byPool := map[string][]pulumi.Resource{}
	var rbac []pulumi.Resource
	for _, pool := range pools {
		if pool.JobForm != config.JobFormContainer {
			continue
		}
		if rbac == nil {
			var err error
			if rbac, err = newContainerHooksRBAC(ctx, name, opts...); err != nil {
				return nil, err
			}
		}
		tmpl, err := JobPodTemplateYAML(pool)
		if err != nil {
			return nil, err
		}
		cm, err := corev1.NewConfigMap(ctx, name+"-"+HookTemplateConfigMapName(pool), &corev1.ConfigMapArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(HookTemplateConfigMapName(pool)), Namespace: pulumi.String(wellknown.RunnersNamespace)},
			Data:     pulumi.StringMap{hookTemplateKey: pulumi.String(tmpl)},
		}, opts...)
		if err != nil {
			return nil, err
		}
		byPool[pool.Name] = append([]pulumi.Resource{cm}, rbac...)
	}
	return byPool, nil
}

func newContainerHooksRBAC(ctx *pulumi.Context, name string, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	account := wellknown.ContainerHooksServiceAccount
	sa, err := corev1.NewServiceAccount(ctx, name+"-container-hooks", &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(account), Namespace: pulumi.String(wellknown.RunnersNamespace)},
	}, opts...)
	if err != nil {
		return nil, err
	}
	rbac, err := newAccountRole(ctx, name+"-container-hooks", account, wellknown.RunnersNamespace, ContainerHooksRules(), sa, opts...)
	if err != nil {
		return nil, err
	}
	return append([]pulumi.Resource{sa}, rbac...), nil
}

// newNetworkPolicies declares the runners' namespace's NetworkPolicies (RunnersNetworkPolicies).
func newNetworkPolicies(ctx *pulumi.Context, name string, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	var out []pulumi.Resource
	for _, np := range RunnersNetworkPolicies() {
		r, err := newObject(ctx, name+"-"+np.Name, np.TypeMeta, np.ObjectMeta, np, opts...)
		if err != nil {
			return nil, fmt.Errorf("network policy %s: %w", np.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// secretInput hands a credential from the configuration to a resource as a Pulumi secret,
// so it is encrypted in the state and masked in every diff.
func secretInput(s config.Secret) pulumi.StringOutput {
	return pulumi.ToSecret(pulumi.String(s.Reveal())).(pulumi.StringOutput)
}
