#!/usr/bin/env bash
# The runner's job-started hook (ACTIONS_RUNNER_HOOK_JOB_STARTED). The runner runs it with
# `bash -e {0}` (actions/runner v2.336.0 ScriptHandler.cs) in the runner container, even in
# the container form (JobHookProvider.cs: the runner's own step host), before the job's first
# step and before its containers start; a failure fails the job.
# - Runner form: the runner holds the job's GPU. gpu-sampler.sh checks it — a job whose GPU is
#   broken stops here, in seconds, saying why — and samples it through the job.
# - Container form (GPUCI_JOB_FORM=container): the runner is on a system node; the job's pod
#   does not exist yet. Its GPU is checked and sampled by the same script, as the job
#   container's postStart hook, which writes to the container's log. A follower started here
#   copies that log into RUNNER_TEMP through the API server while the job runs: the runner
#   deletes the job pod ("Stop containers") before job-completed.sh runs: post-job steps are
#   popped last-registered first (StepsRunner.cs:71), and the stop step is registered when the
#   containers start (ContainerOperationProvider.cs:57-63), after this hook's pair (JobExtension.cs:570-579).
set -uo pipefail
state=${RUNNER_TEMP:-/tmp}/gpuci
hooks=${BASH_SOURCE[0]%/*}
mkdir -p "$state"
date +%s >"$state/started"

if [[ ${GPUCI_JOB_FORM:-runner} != container ]]; then
	GPUCI_LOG=$state/log GPUCI_PIDFILE=$state/sampler sh "$hooks/gpu-sampler.sh"
	exit
fi

# The job pod's name and container (runner-container-hooks v0.8.1
# packages/k8s/src/hooks/constants.ts getJobPodName, JOB_CONTAINER_NAME), in the pool's jobs'
# namespace where the hooks start it (ACTIONS_RUNNER_KUBERNETES_NAMESPACE: the hooks'
# src/k8s/index.ts namespace(); the account's own namespace when unset), read with the
# runner's own account, which the hooks use for the same pod (pods/log: k8s.ContainerHooksRules).
sa=${GPUCI_SERVICEACCOUNT_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
pod=${ACTIONS_RUNNER_POD_NAME:0:54}-workflow
ns=${ACTIONS_RUNNER_KUBERNETES_NAMESPACE:-$(cat "$sa/namespace")}
pod_url="https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}/api/v1/namespaces/$ns/pods/$pod"
url="$pod_url/log?container=job&follow=true"
api() { curl -fsS --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" "$@" 2>/dev/null; }
# Each attempt reads the pod (kept for when it was bound to its node: job-completed.sh's wait),
# then the log from its start, into a file of its own: until the container runs the API
# answers 400 or 404; a stream cut short is read again. It stops once a stream ends
# (the container ended or its pod went), when job-completed.sh stops it, or after as long as
# the hooks wait for the job pod (ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS) without reading
# anything: then no job pod is coming.
(
	patience=${ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS:-1200}
	deadline=$((SECONDS + patience))
	for ((n = 0; SECONDS < deadline; n++)); do
		api -o "$state/pod.json.new" "$pod_url" && mv "$state/pod.json.new" "$state/pod.json"
		if api -o "$state/log.$n" "$url"; then
			break
		fi
		[[ -s $state/log.$n ]] && deadline=$((SECONDS + patience))
		sleep "${GPUCI_FOLLOW_RETRY_SECONDS:-1}"
	done
) </dev/null >/dev/null 2>&1 &
# Its pid and start time, as gpu-sampler.sh writes the sampler's (job-completed.sh matches both).
echo "$! $(sed 's/.*) //' "/proc/$!/stat" 2>/dev/null | cut -d' ' -f20)" >"$state/follower"
echo "The job's GPU is checked when its pod starts on a GPU node (its container's postStart hook); its use is summed up at the end of the job."
