// Package jobhooks holds the scripts that check a GPU job's GPU and write its summary:
// job-started.sh and job-completed.sh are the runner's job hooks
// (ACTIONS_RUNNER_HOOK_JOB_STARTED and _COMPLETED) in both job forms; gpu-sampler.sh checks
// and samples the GPU where it is, from job-started.sh in a runner-form runner, as the job
// container's postStart hook in the container form. The runner starts each of the stack's
// own hooks as a .js file (job-started.js, job-completed.js, and a container-form runner's
// container-hooks.js), which its own node runs, and which replaces PATH before it runs
// anything: a job chooses what is first on the runner's PATH (trusted-env.js). k8s mounts
// them from one ConfigMap; jobhooks_test.go runs them as the runner and the kubelet do, with a
// stand-in nvidia-smi and a stand-in of the API server's pod log.
package jobhooks

import _ "embed"

var (
	//go:embed job-started.sh
	JobStarted string
	//go:embed job-completed.sh
	JobCompleted string
	//go:embed gpu-sampler.sh
	GPUSampler string
	//go:embed trusted-env.js
	TrustedEnv string
	//go:embed job-started.js
	JobStartedEntry string
	//go:embed job-completed.js
	JobCompletedEntry string
	//go:embed container-hooks.js
	ContainerHooksEntry string
)

// Where the runner and the job container find them: the ConfigMap's keys, mounted at Dir.
const (
	Dir             = "/opt/gpuci/hooks"
	JobStartedKey   = "job-started.sh"
	JobCompletedKey = "job-completed.sh"
	GPUSamplerKey   = "gpu-sampler.sh"
	TrustedEnvKey   = "trusted-env.js"
	// The runner's entry points: what ACTIONS_RUNNER_HOOK_JOB_STARTED, _COMPLETED and a
	// container-form runner's ACTIONS_RUNNER_CONTAINER_HOOKS name.
	JobStartedEntryKey     = "job-started.js"
	JobCompletedEntryKey   = "job-completed.js"
	ContainerHooksEntryKey = "container-hooks.js"
)

// Files are the ConfigMap's data: every file above by its key.
func Files() map[string]string {
	return map[string]string{
		JobStartedKey: JobStarted, JobCompletedKey: JobCompleted, GPUSamplerKey: GPUSampler, TrustedEnvKey: TrustedEnv,
		JobStartedEntryKey: JobStartedEntry, JobCompletedEntryKey: JobCompletedEntry, ContainerHooksEntryKey: ContainerHooksEntry,
	}
}

// RunnerContainerHooks is where the runner image keeps the container hooks
// (runner-container-hooks' kubernetes-novolume build: actions/runner v2.336.0
// images/Dockerfile:24-26), which ARC's chart would name in ACTIONS_RUNNER_CONTAINER_HOOKS
// (_helpers.tpl kubernetes-novolume-mode-runner-container) and container-hooks.js runs.
const RunnerContainerHooks = "/home/runner/k8s-novolume/index.js"
