#!/bin/sh
# Checks a job's GPU, then samples it through the job. It runs where the job's GPU is:
# - runner form: from job-started.sh, in the runner, writing to $GPUCI_LOG in RUNNER_TEMP;
# - container form: as the job container's postStart hook (k8s.JobPodTemplate), writing to the
#   container's own log (its PID 1's stdout), which job-started.sh's follower reads from the
#   runner through the API server. The job's steps run through exec, so nothing else writes there.
# It writes one "gpuci: <key> <value>" line per fact; job-completed.sh reads them back.
# Any image a container job can use has sh: the container hooks run every step through it
# (runner-container-hooks v0.8.1 packages/k8s/src/hooks/run-script-step.ts).
# A failure fails the job before its first step: in the runner form the runner fails the
# job-started hook, in the container form the kubelet kills a container whose postStart failed.
#
# GPUCI_DEV_DIR, GPUCI_PROC_DIR and GPUCI_DMI_DIR are where it looks (a test points them
# elsewhere); GPUCI_ZONE is the node's zone (set by the stack from the pod's label), and
# GPUCI_NODE the node's name (the container form's: its runner reads the Node).
set -u
log=${GPUCI_LOG:-/proc/1/fd/1}
dev=${GPUCI_DEV_DIR:-/dev}
proc=${GPUCI_PROC_DIR:-/proc}
interval=${GPUCI_SAMPLE_SECONDS:-5}

say() { printf 'gpuci: %s\n' "$*" >>"$log"; }
fail() {
	say "error $1: $2"
	# The kubelet keeps the message in the container's status (terminationMessagePath).
	printf '%s: %s\n' "$1" "$2" >"${GPUCI_TERMINATION_LOG:-/dev/termination-log}" 2>/dev/null
	echo "::error title=$1::$2"
	exit 1
}
# nvidia-smi, bounded: a wedged driver must not hold the job's start.
smi() {
	if command -v timeout >/dev/null; then timeout 20 nvidia-smi "$@"; else nvidia-smi "$@"; fi
}

say "started $(date +%s)"
# The wait, as this machine knows it: when the node booted (the host's boot time, which
# /proc/stat gives every container), and when this container started (its PID 1's start, in
# clock ticks after boot: proc(5) /proc/pid/stat field 22).
boot=$(awk '$1 == "btime" { print $2 }' "$proc/stat" 2>/dev/null)
if [ -n "$boot" ]; then
	say "node-up $boot"
	ticks=$(sed 's/.*) //' "$proc/1/stat" 2>/dev/null | awk '{ print $20 }')
	hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
	[ -n "$ticks" ] && say "pod-up $((boot + ticks / hz))"
fi
instance=$(cat "${GPUCI_DMI_DIR:-/sys/devices/virtual/dmi/id}/product_name" 2>/dev/null)
say "instance ${instance:-unknown}"
[ -n "${GPUCI_ZONE:-}" ] && say "zone $GPUCI_ZONE"
[ -n "${GPUCI_NODE:-}" ] && say "node $GPUCI_NODE"

# The device plugin gives the pod its GPU's device nodes whatever the image holds.
ls "$dev"/nvidia[0-9]* >/dev/null 2>&1 ||
	fail "No GPU" "no NVIDIA device in this container ($dev/nvidia0 and on): the pod is not on a GPU node, or the node's device plugin gave it none. The job needs a GPU; it was stopped before its first step."
if ! command -v nvidia-smi >/dev/null; then
	# The NVIDIA runtime mounts nvidia-smi only where the image asks for the "utility"
	# driver capability (NVIDIA_DRIVER_CAPABILITIES, which CUDA's images set).
	say "note nvidia-smi is not in this image (its NVIDIA_DRIVER_CAPABILITIES lacks utility): the GPU was not sampled"
	exit 0
fi
if ! gpu=$(smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1); then
	fail "GPU not usable" "nvidia-smi failed: $(echo "$gpu" | tr '\n' ' ')— the driver is not loaded or the device is gone. The job was stopped before its first step."
fi
# A line of the query is "name, driver, memory"; nvidia-smi may print a warning among them
# (an infoROM it cannot read, say), which is said as one, never taken for a GPU.
gpus=$(echo "$gpu" | grep -E '^[^,]+, [^,]+, [^,]+$')
[ -n "$gpus" ] || fail "No GPU" "nvidia-smi lists no GPU device: $(echo "$gpu" | tr '\n' ' ')The job was stopped before its first step."
echo "$gpu" | grep -vE '^[^,]+, [^,]+, [^,]+$' | while IFS= read -r line; do [ -n "$line" ] && say "warning $line"; done
echo "$gpus" | while IFS= read -r line; do say "gpu $line"; done
gpu=$gpus
say "cuda $(smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)"

# Utilization and memory, one line per GPU every interval, until the job ends: the runner
# form's job-completed.sh stops it; the container form's ends with its pod. Its output goes
# to the log only, so neither the runner nor the kubelet waits for it: a postStart's exec
# returns once its own output is closed (containerd v2.2.4, the CRI's container_execsync.go
# 240-253), and its end kills only the exec's own process, not this child (the runc shim's
# process/exec.go 151-163).
(
	while :; do
		smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits 2>/dev/null |
			while IFS= read -r line; do say "sample $line"; done
		sleep "$interval"
	done
) </dev/null >/dev/null 2>&1 &
# Its pid and start time (proc(5): /proc/pid/stat's 22nd field, the 20th after the command's
# closing parenthesis), which job-completed.sh matches before it stops it.
[ -n "${GPUCI_PIDFILE:-}" ] && echo "$! $(sed 's/.*) //' "/proc/$!/stat" 2>/dev/null | cut -d' ' -f20)" >"$GPUCI_PIDFILE"
echo "GPU: $gpu, sampling its use every $interval s for the job summary"
exit 0
