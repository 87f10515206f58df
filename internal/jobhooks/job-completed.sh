#!/usr/bin/env bash
# The runner's job-completed hook (ACTIONS_RUNNER_HOOK_JOB_COMPLETED), in the runner of either
# form: it stops what job-started.sh started and writes the job's summary where GitHub shows
# it ($GITHUB_STEP_SUMMARY): where the job ran, how long it waited for what, its GPU, how busy
# the GPU was, and what its minutes cost here and at GitHub's price. It never fails the job.
#
# It reads gpu-sampler.sh's "gpuci: <key> <value>" lines: the runner form's from RUNNER_TEMP,
# the container form's as job-started.sh's follower copied them from the job container's log.
# From the stack (k8s.JobHookEnv): GPUCI_POOL, GPUCI_JOB_FORM, GPUCI_CAPACITY (the pool's
# capacity types), GPUCI_PRICES ("<instance type>=<USD per hour> …" at its capacity type;
# GPUCI_PRICES_ON_DEMAND too for a pool of both), GPUCI_GITHUB_PER_MINUTE and
# GPUCI_PRICES_SOURCE; a runner-form runner's GPUCI_LAUNCHED_CAPACITY (its node's, from the
# API server: k8s.LaunchedCapacityPolicy; empty before Kubernetes 1.36).
# The runner runs it with `bash -e` (actions/runner ScriptHandler.cs), and a failed completed
# hook fails the job: nothing here may.
set +e -o pipefail
state=${RUNNER_TEMP:-/tmp}/gpuci
summary=${GITHUB_STEP_SUMMARY:-/dev/stdout}
# Only the processes this runner's own job-started.sh started (a pid in the sampler's lines is
# the job container's): the pid and start time it wrote, numbers both, and the start time the
# pid has now the same (proc(5): /proc/pid/stat's 22nd field). A pid alone could name any
# process of the runner's by the time the job ends, and a file the job reached could name one.
number() { [[ $1 =~ ^[0-9]{1,12}$ ]] && echo "$1"; }
starttime() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return; s=${s##*) }; set -- $s; echo "${20:-}"; }
for p in sampler follower; do
	pid='' start=''
	read -r pid start _ 2>/dev/null <"$state/$p"
	pid=$(number "$pid") start=$(number "$start")
	[[ -n $pid && -n $start && $(starttime "$pid") == "$start" ]] && kill "$pid" 2>/dev/null
done
log=$state/log
# The facts are untrusted: the job's code can write the lines the sampler writes (the runner
# form's log is in its RUNNER_TEMP; the container form's is its own container's stdout). Here,
# in a container-form runner, is the hooks' token the job does not have. So a fact is only
# ever text in the summary, a number checked as one before bash's arithmetic (which would run
# a command substitution in an array subscript), or a node name checked as one before it goes
# into a URL.
fact() { sed -n "s/^gpuci: $1 //p" "$log" 2>/dev/null | head -1; }
# Spot or on-demand, as Karpenter launched the job's node: the runner form's from its pod's
# annotation, the container form's from the job pod's Node.
launched=${GPUCI_LAUNCHED_CAPACITY:-}
if [[ ${GPUCI_JOB_FORM:-runner} == container ]]; then
	# The follower's longest read is the whole log.
	log=$(ls -S "$state"/log.* 2>/dev/null | head -1)
	# The Node's label, read with the hooks' account (k8s.ContainerHooksNodeRules), whether the
	# API server indents its JSON (it does for curl's user agent: k8s.io/apiserver v0.36.3
	# pkg/endpoints/handlers/negotiation/negotiate.go:116) or not.
	sa=${GPUCI_SERVICEACCOUNT_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
	node=$(fact node)
	launched=""
	if [[ $node =~ ^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$ ]]; then
		launched=$(curl -fsS --max-time 10 --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" \
			"https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}/api/v1/nodes/$node" 2>/dev/null |
			sed -n 's/.*"karpenter\.sh\/capacity-type": *"\([a-z-]*\)".*/\1/p' | head -1)
	fi
fi
# Unknown (a control plane before 1.36, a Node not read): the pool's types and prices.
capacity=${GPUCI_CAPACITY:-?}
prices=${GPUCI_PRICES:-}
case $launched in
spot) capacity=spot ;;
on-demand)
	capacity=on-demand
	# A pool of both priced its jobs at spot: this one is priced at what it ran on.
	if [[ -n ${GPUCI_PRICES_ON_DEMAND:-} ]]; then
		capacity="on-demand (spot was short)"
		prices=$GPUCI_PRICES_ON_DEMAND
	fi
	;;
esac

now=${GPUCI_NOW:-$(date +%s)} # the clock (a test fixes it)
started=$(number "$(cat "$state/started" 2>/dev/null)")
started=${started:-$now}
seconds=$((now - started))
minutes=$(awk -v s="$seconds" 'BEGIN { printf "%.1f", s / 60 }')

instance=$(fact instance)
instance=${instance:-unknown}
zone=$(fact zone)
IFS=, read -r gpu_name driver memory <<<"$(fact gpu)"
cuda=$(fact cuda)
error=$(fact error)
note=$(fact note)
warning=$(fact warning)
# The GPUs the job held (nvidia-smi lists the ones its container sees, one line each) of the
# node's (its instance type's, GPUCI_GPUS): a job holding one of four pays a quarter of the node.
held=$(sed -n 's/^gpuci: gpu //p' "$log" 2>/dev/null | wc -l)
held=$(number "$held")
((held > 0)) || held=1
of=""
for kv in ${GPUCI_GPUS:-}; do
	[[ ${kv%%=*} == "$instance" ]] && of=$(number "${kv#*=}")
done
((${of:-0} > held)) || of=$held

[[ -n $error ]] && echo "::error title=The job's GPU::$error"

# Utilization: mean and peak of the samples, and the memory peak, each over the readings that
# are numbers. nvidia-smi answers "[N/A]" for what a GPU does not report (utilization under
# MIG or vGPU, for one): such a reading is counted apart (na), never read as 0 or as a peak.
read -r n mean peak mem nmem na < <(sed -n 's/^gpuci: sample //p' "$log" 2>/dev/null | awk -F', *' '
	$1 ~ /^[0-9]+$/ { n++; s += $1; if ($1 + 0 > p) p = $1 + 0 }
	$1 !~ /^[0-9]+$/ { na++ }
	$2 ~ /^[0-9]+$/ { nm++; if ($2 + 0 > m) m = $2 + 0 }
	END { printf "%d %.0f %d %d %d %d\n", n, n ? s / n : 0, p, m, nm, na }')

# The wait, as far as the cluster knows it (gpu-sampler.sh: the node's boot, the GPU
# container's start; here: the job's start in the runner). A node booted within five minutes
# of the pod's start was launched for it (cold); an older one was up already (warm).
node_up=$(number "$(fact node-up)")
pod_up=$(number "$(fact pod-up)")
# What the samples cover: the runner form's sampler starts with the job; the container
# form's with the job container (its postStart), after the node's boot and the image's pull,
# which its readings must not be stretched over.
sampled=$seconds
if [[ ${GPUCI_JOB_FORM:-runner} == container && -n $pod_up ]] && ((now - pod_up < seconds)); then
	sampled=$((now - pod_up))
	((sampled >= 0)) || sampled=0
fi
wait=""
if [[ -n $node_up && -n $pod_up ]]; then
	age=$((pod_up - node_up))
	if ((age < 300)); then kind="a new node (cold)"; else kind="a node up $((age / 60)) min already (warm)"; fi
	if [[ ${GPUCI_JOB_FORM:-runner} == container ]]; then
		# When the job pod was bound to its node (its PodScheduled condition, as the follower
		# last read the pod): the node was Ready then; the images came after.
		# One JSON object a line (whatever the indentation), then the PodScheduled one's time.
		bound=$(tr -d '\n' <"$state/pod.json" 2>/dev/null | tr '{}' '\n\n' | grep '"type": *"PodScheduled"' |
			sed -n 's/.*"lastTransitionTime": *"\([^"]*\)".*/\1/p' | head -1)
		[[ -n $bound ]] && bound=$(number "$(date -d "$bound" +%s 2>/dev/null)")
		from=$started
		wait="$kind: job start"
		if ((node_up > started)); then
			wait+=" → node booted $((node_up - started)) s"
			from=$node_up
		fi
		if [[ -n $bound ]]; then
			wait+=" → pod bound $((bound - from)) s → job container up $((pod_up - bound)) s"
		else
			wait+=" → job container up $((pod_up - from)) s"
		fi
	else
		wait="$kind: node booted → runner up $((pod_up - node_up)) s → job start $((started - pod_up)) s"
	fi
fi

price=""
for kv in $prices; do
	[[ ${kv%%=*} == "$instance" ]] && price=${kv#*=}
done
{
	echo "### GPU job on ${GPUCI_POOL:-?}: ${minutes} min on ${instance}"
	echo
	echo "| | |"
	echo "|---|---|"
	echo "| Instance | ${instance}${zone:+ in ${zone}}, ${capacity} |"
	echo "| Wait | ${wait:-not measured (no facts from the GPU node)}; queued before it: \`gpuci stats\` |"
	echo "| GPU | ${gpu_name:-${error:-none seen}}${driver:+, driver ${driver# }}${cuda:+, CUDA ${cuda}}${memory:+, ${memory# }}${warning:+ (nvidia-smi warned: ${warning})} |"
	if ((n > 0)); then
		if ((nmem > 0)); then
			echo "| GPU use | ${mean}% mean, ${peak}% peak; memory peak ${mem} MiB ($n samples) |"
		else
			echo "| GPU use | ${mean}% mean, ${peak}% peak; memory not reported ($n samples) |"
		fi
	elif ((na > 0)); then
		memory_peak=""
		((nmem > 0)) && memory_peak="; memory peak ${mem} MiB"
		echo "| GPU use | not reported: nvidia-smi answered [N/A] for utilization in all $na samples (MIG or vGPU)${memory_peak} |"
	elif [[ -n $note ]]; then
		echo "| GPU use | ${note} |"
	else
		echo "| GPU use | no sample (a job shorter than one interval) |"
	fi
	if [[ -n $price ]]; then
		# utilization.gpu is "percent of time over the past sample period during which one or
		# more kernels was executing; the sample period may be between 1 second and 1/6 second
		# depending on the product" (nvidia-smi --help-query-gpu): a reading every interval
		# sees at most one second of it, so the share with no kernel running is an estimate
		# from the samples, over the time they cover.
		awk -v m="$seconds" -v p="$price" -v g="${GPUCI_GITHUB_PER_MINUTE:-0}" -v u="$mean" -v n="$n" -v it="$instance" \
			-v held="$held" -v of="$of" -v s="$sampled" -v every="${GPUCI_SAMPLE_SECONDS:-5}" 'BEGIN {
			share = p * held / of; here = m / 3600 * share; gh = m / 60 * g
			if (held < of) printf "| Cost | $%.4f here (%d of the %d GPUs of %s at $%.4f/h: $%.4f/h), $%.4f at GitHub'"'"'s price ($%.3f/min) |\n", here, held, of, it, p, share, gh, g
			else printf "| Cost | $%.4f here (%s at $%.4f/h), $%.4f at GitHub'"'"'s price ($%.3f/min) |\n", here, it, p, gh, g
			if (n > 0) printf "| No kernel running | $%.4f: %.0f%% of the %.1f min sampled (%d readings of nvidia-smi'"'"'s utilization.gpu, each its last 1/6–1 s, every %s s) |\n", s / 3600 * share * (100 - u) / 100, 100 - u, s / 60, n, every
		}'
	else
		echo "| Cost | no price for ${instance} |"
	fi
	echo
	echo "Prices are list prices (a model, not a bill: spot varies): ${GPUCI_PRICES_SOURCE:-pricing/}."
} >>"$summary"
exit 0
