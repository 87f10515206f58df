#!/usr/bin/env bash
# The runner's job-completed hook (ACTIONS_RUNNER_HOOK_JOB_COMPLETED), in a runner-form
# pool's runner: it stops job-started.sh's sampler and writes the job's summary where GitHub
# shows it ($GITHUB_STEP_SUMMARY): where the job ran, its GPU, how busy the GPU was, and what
# its minutes cost here and at GitHub's price. It never fails the job.
#
# From the stack (k8s.JobHookEnv): GPUCI_POOL, GPUCI_CAPACITY (the pool's capacity types),
# GPUCI_PRICES ("<instance type>=<USD per hour> …", the pool's types at its capacity type),
# GPUCI_GITHUB_PER_MINUTE, GPUCI_PRICES_SOURCE, and GPUCI_ZONE, the node's zone. GPUCI_DMI_DIR is where the instance type is
# read (EC2 writes it as the DMI product name; a test points it elsewhere).
# The runner runs it with `bash -e` (actions/runner ScriptHandler.cs), and a failed completed
# hook fails the job: nothing here may.
set +e -o pipefail
state=${RUNNER_TEMP:-/tmp}/gpuci
summary=${GITHUB_STEP_SUMMARY:-/dev/stdout}
[[ -f $state/sampler ]] && kill "$(cat "$state/sampler")" 2>/dev/null
now=${GPUCI_NOW:-$(date +%s)} # the clock (a test fixes it)
started=$(cat "$state/started" 2>/dev/null || echo "$now")
seconds=$((now - started))
minutes=$(awk -v s="$seconds" 'BEGIN { printf "%.1f", s / 60 }')

instance=$(cat "${GPUCI_DMI_DIR:-/sys/devices/virtual/dmi/id}/product_name" 2>/dev/null || true)
instance=${instance:-unknown}
IFS=, read -r gpu_name driver memory <"$state/gpu" 2>/dev/null || true
cuda=$(cat "$state/cuda" 2>/dev/null || true)

# Utilization: mean and peak of the samples, and the memory peak.
read -r n mean peak mem < <(awk -F', *' '$1 ~ /^[0-9]+$/ { n++; s += $1; if ($1 > p) p = $1; if ($2 > m) m = $2 }
	END { printf "%d %.0f %d %d\n", n, n ? s / n : 0, p, m }' "$state/samples" 2>/dev/null || echo "0 0 0 0")

price=""
for kv in ${GPUCI_PRICES:-}; do
	[[ ${kv%%=*} == "$instance" ]] && price=${kv#*=}
done
{
	echo "### GPU job on ${GPUCI_POOL:-?}: ${minutes} min on ${instance}"
	echo
	echo "| | |"
	echo "|---|---|"
	echo "| Instance | ${instance}${GPUCI_ZONE:+ in ${GPUCI_ZONE}}, ${GPUCI_CAPACITY:-?} |"
	echo "| GPU | ${gpu_name:-none seen}${driver:+, driver ${driver# }}${cuda:+, CUDA ${cuda}}${memory:+, ${memory# }} |"
	if ((n > 0)); then
		echo "| GPU use | ${mean}% mean, ${peak}% peak; memory peak ${mem} MiB ($n samples) |"
	else
		echo "| GPU use | no sample (a job shorter than one interval) |"
	fi
	if [[ -n $price ]]; then
		awk -v m="$seconds" -v p="$price" -v g="${GPUCI_GITHUB_PER_MINUTE:-0}" -v u="$mean" -v n="$n" -v it="$instance" 'BEGIN {
			here = m / 3600 * p; gh = m / 60 * g
			printf "| Cost | $%.4f here (%s at $%.4f/h), $%.4f at GitHub'"'"'s price ($%.3f/min) |\n", here, it, p, gh, g
			if (n > 0) printf "| GPU idle | $%.4f of it (%.0f%% of the time, by the mean) |\n", here * (100 - u) / 100, 100 - u
		}'
	else
		echo "| Cost | no price for ${instance} |"
	fi
	echo
	echo "Prices are list prices (a model, not a bill: spot varies): ${GPUCI_PRICES_SOURCE:-pricing/}. Queue time: \`gpuci stats\`."
} >>"$summary"
exit 0
