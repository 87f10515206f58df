package k8s

// The runner pods of each form and the budgets that keep them through a drain, with the
// scale sets' and controller's Helm values: pure builders, which the Runners component
// (runners.go) registers and runnerpods_test.go checks.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	k8scorev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/instancetypes"
	"github.com/luxfi/lux-gpu-ci/internal/apiobject"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

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
		Requests: k8scorev1.ResourceList{k8scorev1.ResourceCPU: *cpu, k8scorev1.ResourceMemory: mem, wellknown.GPUResource: gpu},
		Limits:   k8scorev1.ResourceList{k8scorev1.ResourceMemory: mem, wellknown.GPUResource: gpu},
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
			// The pool's label, not Karpenter's NodePool label: the pool's cool-down NodePool
			// (CoolDownNodePoolFor) launches nodes that carry it too.
			NodeSelector: map[string]string{wellknown.PoolLabel: pool.Name},
			Tolerations:  []k8scorev1.Toleration{gpuToleration},
			Containers:   []k8scorev1.Container{c},
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

// runnerUser is the runner image's user "runner" (actions/runner v2.336.0 images/Dockerfile:
// adduser --uid 1001, its own group 1001). The image names it, not its number, so a pod that
// must run as non-root says the number.
const runnerUser = int64(1001)

// systemRunnerPod is a runner pod for the system nodes (a container-form pool's, the retry
// runner's): no GPU and no GPU toleration, systemRunnerResources, under account, whose token
// it uses to reach the API server for its job (RunnerRoleRelay). It meets Pod Security's
// restricted level although its namespace enforces baseline: a relay shares the system nodes
// with Karpenter's and the retrier's credentials and with ARC, and runs nothing that needs
// root. No privilege escalation means no sudo (the image's sudo is setuid, which no_new_privs
// disarms), all capabilities dropped, the runtime's default seccomp profile, the image's
// non-root user.
func systemRunnerPod(account, image string, pull k8scorev1.PullPolicy) k8scorev1.PodTemplateSpec {
	user := runnerUser
	return k8scorev1.PodTemplateSpec{
		ObjectMeta: k8smeta.ObjectMeta{Labels: map[string]string{wellknown.RunnerRoleLabel: wellknown.RunnerRoleRelay}},
		Spec: k8scorev1.PodSpec{
			ServiceAccountName: account,
			NodeSelector:       map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue},
			SecurityContext: &k8scorev1.PodSecurityContext{
				RunAsNonRoot: ptr(true), RunAsUser: &user, RunAsGroup: &user,
				SeccompProfile: &k8scorev1.SeccompProfile{Type: k8scorev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []k8scorev1.Container{{
				// ARC requires the runner container to be called "runner".
				Name:            "runner",
				Image:           image,
				ImagePullPolicy: pull,
				Command:         []string{"/home/runner/run.sh"},
				Resources:       systemRunnerResources,
				SecurityContext: &k8scorev1.SecurityContext{
					AllowPrivilegeEscalation: ptr(false),
					Capabilities:             &k8scorev1.Capabilities{Drop: []k8scorev1.Capability{"ALL"}},
				},
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
	t, err := apiobject.ToMap(tmpl)
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
