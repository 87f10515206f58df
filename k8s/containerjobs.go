package k8s

// The container job form (config.JobFormContainer): ARC's kubernetes-novolume container mode.
// The runner pod runs on the system nodes without a GPU; for each job it starts the job's
// `container:` (and its services) as a pod of its own through the runner container hooks
// (actions/runner-container-hooks, packages/k8s, bundled in the runner image at
// /home/runner/k8s-novolume). What that job pod looks like beyond the workflow's image is the
// hook template: a PodTemplateSpec file named by ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE, whose
// metadata and spec the hook merges into every pod it creates, and whose container named
// "$job" it merges into the job container. The chart sets neither, so the program owns it.
//
// The job pods are not in the runners' namespace but in the pool's own
// (wellknown.ContainerJobsNamespace, named to the hooks by ACTIONS_RUNNER_KUBERNETES_NAMESPACE:
// packages/k8s/src/k8s/index.ts:846-858 at v0.8.1; every call the hooks make is in that one
// namespace, and they set no owner reference to the runner pod, index.ts:80-159). The runners
// run as the pool's own account (wellknown.ContainerHooksAccount), whose every right is in
// that namespace: a job's code that got hold of the runner's token — the runner runs what a
// job puts first on its PATH unless the entry points reset it (internal/jobhooks
// trusted-env.js) — reaches its own pool's job pods, and neither ARC's GitHub credential nor
// another runner's JIT config (Secrets of the runners' namespace) nor another pool.

import (
	"fmt"
	"path"
	"strconv"

	k8scorev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	k8srbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/apiobject"
	"github.com/luxfi/lux-gpu-ci/internal/jobhooks"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

const (
	// hookTemplateKey is the template's file name in its ConfigMap and in the runner.
	hookTemplateKey = "job-pod.yaml"
	// hookTemplateDir is where the runner mounts the ConfigMap (not over /home/runner).
	hookTemplateDir = "/home/runner/job-pod-template"
	// hookTemplateEnv names the template file for the hooks (runner-container-hooks
	// packages/k8s/src/k8s/utils.ts ENV_HOOK_TEMPLATE_PATH).
	hookTemplateEnv = "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"
	// prepareJobTimeoutEnv sets how long the hooks wait for the job pod
	// (wellknown.PrepareJobTimeoutSeconds; runner-container-hooks packages/k8s/src/k8s/index.ts
	// getPrepareJobTimeoutSeconds).
	prepareJobTimeoutEnv = "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS"
	// jobContainerExtension is the hook template's name for the job container ("$" +
	// JOB_CONTAINER_NAME in the hooks' constants.ts).
	jobContainerExtension = "$job"
	// jobsNamespaceEnv names the namespace the hooks start job pods in (index.ts namespace()).
	jobsNamespaceEnv = "ACTIONS_RUNNER_KUBERNETES_NAMESPACE"
	// containerHooksEnv names the hooks the runner runs; ARC's chart sets it to the image's
	// own unless the template does (_helpers.tpl kubernetes-novolume-mode-runner-container).
	containerHooksEnv = "ACTIONS_RUNNER_CONTAINER_HOOKS"
)

// HookTemplateConfigMapName is the ConfigMap holding a container-form pool's hook template.
func HookTemplateConfigMapName(pool config.GPUPool) string {
	return pool.RunnerScaleSetName + "-job-pod"
}

// JobPodTemplate is what the hooks merge into a container-form pool's job pod: the pod that
// holds the pool's GPU (gpuPodTemplate), its container named for the hooks' job container.
// The hooks ignore an image here: the workflow's container: names it.
func JobPodTemplate(pool config.GPUPool) (k8scorev1.PodTemplateSpec, error) {
	t, err := gpuPodTemplate(pool, k8scorev1.Container{Name: jobContainerExtension})
	if err != nil {
		return t, err
	}
	// The job container checks and samples its GPU (jobhooks.go).
	return withGPUSampler(t), nil
}

// JobPodTemplateYAML is JobPodTemplate as the file the hooks read.
func JobPodTemplateYAML(pool config.GPUPool) (string, error) {
	tmpl, err := JobPodTemplate(pool)
	if err != nil {
		return "", err
	}
	u, err := apiobject.ToMap(tmpl)
	if err != nil {
		return "", err
	}
	b, err := yaml.Marshal(u)
	if err != nil {
		return "", fmt.Errorf("pool %s: hook template: %w", pool.Name, err)
	}
	return string(b), nil
}

// containerFormRunnerTemplate is a container-form pool's runner pod: no GPU, on the system
// nodes, with the hooks' permissions and the hook template mounted. The chart adds the rest
// of the mode (ACTIONS_RUNNER_CONTAINER_HOOKS=/home/runner/k8s-novolume/index.js,
// ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER, ACTIONS_RUNNER_POD_NAME, and ACTIONS_RUNNER_IMAGE from
// the runner's image, which the hooks' fs-init container of the job pod pulls on the GPU node:
// through the cache too).
func containerFormRunnerTemplate(pool config.GPUPool, cache ImageCache) k8scorev1.PodTemplateSpec {
	const volume = "job-pod-template"
	// The pool's own account: with it set, the chart creates no kube-mode Role of its own
	// (which would grant its rights in the runners' namespace: kube_mode_role.yaml).
	t := systemRunnerPod(wellknown.ContainerHooksAccount(pool.JobsOf()), cache.Pull(pool.RunnerImage), runnerPullPolicy(pool))
	t.Labels[wellknown.PoolLabel] = pool.Name
	runner := &t.Spec.Containers[0]
	runner.Env = []k8scorev1.EnvVar{
		{Name: hookTemplateEnv, Value: path.Join(hookTemplateDir, hookTemplateKey)},
		// A cold GPU node and its image pull fit in the wait (PrepareJobTimeoutSeconds).
		{Name: prepareJobTimeoutEnv, Value: strconv.Itoa(wellknown.PrepareJobTimeoutSeconds)},
		// The job pods go to the pool's namespace, where its account's rights are.
		{Name: jobsNamespaceEnv, Value: wellknown.ContainerJobsNamespace(pool.JobsOf())},
		// The image's hooks, through an entry point that resets PATH and keeps a job's
		// executables out of the runner (internal/jobhooks container-hooks.js).
		{Name: containerHooksEnv, Value: path.Join(jobhooks.Dir, jobhooks.ContainerHooksEntryKey)},
		{Name: "GPUCI_CONTAINER_HOOKS", Value: jobhooks.RunnerContainerHooks},
	}
	// Ready only while it runs a job, so that a system-node roll may move it while it waits
	// (BusyRunnersBudget) and never while it works.
	runner.ReadinessProbe = RunnerBusyProbe()
	runner.VolumeMounts = []k8scorev1.VolumeMount{{Name: volume, MountPath: hookTemplateDir, ReadOnly: true}}
	t.Spec.Volumes = []k8scorev1.Volume{{Name: volume, VolumeSource: k8scorev1.VolumeSource{
		ConfigMap: &k8scorev1.ConfigMapVolumeSource{LocalObjectReference: k8scorev1.LocalObjectReference{Name: HookTemplateConfigMapName(pool)}},
	}}}
	// Its job hooks follow the job container's log and write the job's summary (jobhooks.go).
	return withJobHooks(t, pool)
}

// RunnerBusyProbe is a container-form runner's readiness probe: it succeeds while the runner
// runs a job and fails while the runner waits for one. The runner starts a Runner.Worker
// process for each job ("<bin>/Runner.Worker spawnclient <out> <in>": actions/runner v2.336.0
// src/Runner.Listener/JobDispatcher.cs:474-480), which lives until the job's last step and
// the container hooks' cleanup have ended; the probe looks for it among the container's
// processes. The runner image (Ubuntu) has sh and grep; the pattern's brackets keep it from
// matching the probe's own command line. Every 2 s: a job that starts is protected within
// seconds.
func RunnerBusyProbe() *k8scorev1.Probe {
	return &k8scorev1.Probe{
		ProbeHandler: k8scorev1.ProbeHandler{Exec: &k8scorev1.ExecAction{
			Command: []string{"sh", "-c", "grep -qs 'Runner[.]Worker' /proc/[0-9]*/cmdline"},
		}},
		PeriodSeconds:    2,
		SuccessThreshold: 1,
		FailureThreshold: 1,
	}
}

// ContainerHooksRules are the permissions the kubernetes-novolume hooks check for before every
// hook command, failing the job if one is missing (runner-container-hooks v0.8.1
// packages/k8s/src/k8s/index.ts requiredPermissions, lines 38-63, checked by
// SelfSubjectAccessReview in the jobs' namespace, index.ts:811; the same rules ARC's chart
// grants in that mode): the job pod, exec into it, its logs, and the image-pull secret of a
// private `container:` registry, which cleanup finds by listing. Granted in the pool's jobs'
// namespace only, where the only Secrets are those pull secrets: Kubernetes cannot limit get
// or list to some Secrets, so in the runners' namespace (ARC's rule) they would have read
// ARC's GitHub credential and every runner's JIT config. What remains: a job whose code gets
// the runner's token reaches the other job pods of its own pool (and their registry
// credentials), which is why a container-form pool's group admits only trusted repositories
// (config: trustedRepositoriesOnly).
func ContainerHooksRules() []k8srbacv1.PolicyRule {
	return []k8srbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"get", "create"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "delete"}},
	}
}

// ContainerHooksNodeReader names the ClusterRole of ContainerHooksNodeRules.
const ContainerHooksNodeReader = "arc-container-hooks-nodes"

// ContainerHooksNodeRules let a container-form runner's job summary say whether Karpenter
// launched its job pod's node as spot or on-demand (the Node's karpenter.sh/capacity-type),
// which a pool that allows both leaves open: get, by the name the job pod's sampler reports,
// not list. A Node holds no credential.
func ContainerHooksNodeRules() []k8srbacv1.PolicyRule {
	return []k8srbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}
}

// ContainerJobsNamespaceLabels are a container-form pool's jobs' namespace's: the runners'
// Pod Security levels (a job container runs its image's user), and the label that marks it
// as one (verify and doctor find the job pods by it).
func ContainerJobsNamespaceLabels() map[string]string {
	labels := PodSecurityLabels()
	labels[wellknown.ContainerJobsLabel] = "true"
	return labels
}

// ContainerJobsNetworkPolicies are a container-form pool's jobs' namespace's: everything
// denied, then a job pod's egress (the runners' job-egress: DNS, the internet, its compiler
// cache). Nothing reaches a job pod: the hooks exec into it through the API server.
func ContainerJobsNetworkPolicies(namespace string) []networkingv1.NetworkPolicy {
	return []networkingv1.NetworkPolicy{DenyAll(namespace), jobEgressPolicy(namespace)}
}

// LegacyContainerHooksAccount is the one account every container-form runner ran as before
// each pool had its own, with the hooks' rights in the runners' namespace. It stays declared
// (same name, same rights) so that an up from a stack of that time leaves the runners it did
// not replace yet — a job still running on one — their account until they end; no new runner
// runs as it, and no account may get its token (docs/design.md, "Container-form pools, one
// account each"). Drop it, with its Role and binding, in the release after.
const LegacyContainerHooksAccount = "arc-container-hooks"
