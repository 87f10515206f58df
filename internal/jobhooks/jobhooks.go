// Package jobhooks holds the runner's job hooks a runner-form pool's runners run
// (ACTIONS_RUNNER_HOOK_JOB_STARTED and _COMPLETED): job-started.sh stops a job whose GPU is
// broken before its first step and samples the GPU; job-completed.sh writes the job's
// summary. k8s mounts them from a ConfigMap; jobhooks_test.go runs them as the runner does,
// with a stand-in nvidia-smi.
package jobhooks

import _ "embed"

var (
	//go:embed job-started.sh
	JobStarted string
	//go:embed job-completed.sh
	JobCompleted string
)

// Where the runner finds them: the ConfigMap's keys, mounted at Dir.
const (
	Dir             = "/opt/gpuci/hooks"
	JobStartedKey   = "job-started.sh"
	JobCompletedKey = "job-completed.sh"
)
