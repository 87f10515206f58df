#!/usr/bin/env bash
# make e2e: build or reuse the tools, build the fake AWS, start a local control plane, run the
# whole program through the real Pulumi engine (e2e/), tear everything down. Prints each
# phase's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\n==> e2e: %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

start=$SECONDS
log "tools (cached under ${LUX_GPU_CI_CACHE:-$HOME/.cache/lux-gpu-ci}; cold ~30 min, warm instant)"
hack/e2e-tools.sh >/dev/null
eval "$(hack/e2e-tools.sh --env)"
echo "tools: $((SECONDS - start))s"

dir=$(mktemp -d /tmp/lux-gpu-ci-e2e.XXXXXX)
trap 'hack/cluster-down.sh "$dir/cluster"; rm -rf "$dir"' EXIT

t=$SECONDS
log "fake AWS (hack/fakeaws): the aws plugin, and the aws and kubectl CLIs"
mkdir -p "$dir/bin"
go build -o "$dir/bin/fakeaws" ./hack/fakeaws
for name in pulumi-resource-aws aws kubectl; do ln -s fakeaws "$dir/bin/$name"; done
export E2E_FAKEAWS_BIN=$dir/bin
echo "fake AWS: $((SECONDS - t))s"

t=$SECONDS
log "control plane on 127.0.0.1"
hack/cluster-up.sh "$dir/cluster" >/dev/null
export E2E_CLUSTER_DIR=$dir/cluster
echo "control plane: $((SECONDS - t))s"

t=$SECONDS
log "go test -tags e2e ./e2e"
go test -tags e2e -count=1 -ldflags=-w -v -timeout 30m ./e2e
echo "e2e tests: $((SECONDS - t))s; total: $((SECONDS - start))s"
