// Package jobhooks holds the scripts that check a GPU job's GPU and write its summary:
// job-started.sh and job-completed.sh are the runner's job hooks
// (ACTIONS_RUNNER_HOOK_JOB_STARTED and _COMPLETED) in both job forms; gpu-sampler.sh checks
// and samples the GPU where it is, from job-started.sh in a runner-form runner, as the job
// container's postStart hook in the container form. k8s mounts them from one ConfigMap;
// jobhooks_test.go runs them as the runner and the kubelet do, with a stand-in nvidia-smi and
// a stand-in of the API server's pod log.
package jobhooks

import _ "embed"

var (
	//go:embed job-started.sh
	JobStarted string
	//go:embed job-completed.sh
	JobCompleted string
	//go:embed gpu-sampler.sh
	GPUSampler string
)

// Where the runner and the job container find them: the ConfigMap's keys, mounted at Dir.
const (
	Dir             = "/opt/gpuci/hooks"
	JobStartedKey   = "job-started.sh"
	JobCompletedKey = "job-completed.sh"
	GPUSamplerKey   = "gpu-sampler.sh"
)
