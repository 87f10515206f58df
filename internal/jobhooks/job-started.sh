#!/usr/bin/env bash
# The runner's job-started hook (ACTIONS_RUNNER_HOOK_JOB_STARTED), in a runner-form pool's
# runner, which holds the job's GPU. It runs before the job's first step, and a failure fails
# the job: a job whose GPU is broken stops here, in seconds, saying why, rather than minutes
# later in a CUDA error. Then it samples the GPU through the job for job-completed.sh. The
# runner runs it with `bash -e {0}` (actions/runner v2.336.0 ScriptHandler.cs), in the runner
# container even in the container form (JobHookProvider.cs), with GITHUB_STEP_SUMMARY set.
set -uo pipefail
state=${RUNNER_TEMP:-/tmp}/gpuci
mkdir -p "$state"
date +%s >"$state/started"

fail() {
	echo "::error title=$1::$2"
	exit 1
}
command -v nvidia-smi >/dev/null ||
	fail "No GPU" "nvidia-smi is not in this runner: the NVIDIA driver was not mounted into it (the pod is not on a GPU node, or the node's container runtime is not NVIDIA's). The job needs a GPU; it was stopped before its first step."
if ! gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1); then
	fail "GPU not usable" "nvidia-smi failed: $(tr '\n' ' ' <<<"$gpu")— the driver is not loaded or the device is gone. The job was stopped before its first step."
fi
[[ -n $gpu ]] || fail "No GPU" "nvidia-smi lists no GPU device. The job was stopped before its first step."
printf '%s\n' "$gpu" >"$state/gpu"
nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1 >"$state/cuda"

# Utilization and memory, every GPUCI_SAMPLE_SECONDS (5 s), until job-completed.sh stops it.
nohup nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits \
	-l "${GPUCI_SAMPLE_SECONDS:-5}" >"$state/samples" 2>/dev/null &
echo $! >"$state/sampler"
echo "GPU: $(head -1 "$state/gpu"), CUDA $(cat "$state/cuda"); sampling its use every ${GPUCI_SAMPLE_SECONDS:-5} s for the job summary"
