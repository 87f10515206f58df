#!/usr/bin/env bash
# make e2e: build or reuse the tools, start a local control plane, deploy the Kubernetes
# layer with the real Pulumi engine, tear everything down. Prints each phase's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\n==> e2e: %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

start=$SECONDS
log "tools (cached under ${LUX_GPU_CI_CACHE:-$HOME/.cache/lux-gpu-ci}; cold ~30 min, warm instant)"
hack/e2e-tools.sh >/dev/null
eval "$(hack/e2e-tools.sh --env)"
echo "tools: $((SECONDS - start))s"

t=$SECONDS
log "control plane on 127.0.0.1"
dir=$(mktemp -d /tmp/lux-gpu-ci-e2e.XXXXXX)
trap 'hack/cluster-down.sh "$dir"' EXIT
export E2E_KUBECONFIG
E2E_KUBECONFIG=$(hack/cluster-up.sh "$dir")
echo "control plane: $((SECONDS - t))s"

t=$SECONDS
log "go test -tags e2e ./e2e"
go test -tags e2e -count=1 -v -timeout 30m ./e2e
echo "e2e tests: $((SECONDS - t))s; total: $((SECONDS - start))s"
