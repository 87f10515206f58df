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
log "the e2e tests' binary and the fake AWS (hack/fakeaws: the aws plugin, the aws and kubectl CLIs), built while the control plane starts on 127.0.0.1"
mkdir -p "$dir/bin"
# Two links and the API server's start, each a few seconds: at once, not one after another.
go test -c -tags e2e -ldflags=-w -o "$dir/e2e.test" ./e2e &
tests=$!
go build -ldflags='-s -w' -o "$dir/bin/fakeaws" ./hack/fakeaws &
fake=$!
hack/cluster-up.sh "$dir/cluster" >/dev/null
wait "$tests"
wait "$fake"
for name in pulumi-resource-aws aws kubectl; do ln -s fakeaws "$dir/bin/$name"; done
export E2E_FAKEAWS_BIN=$dir/bin E2E_CLUSTER_DIR=$dir/cluster
echo "builds and control plane: $((SECONDS - t))s"

t=$SECONDS
log "the e2e tests (go test -tags e2e ./e2e, run from its directory as go test would)"
rc=0
(cd e2e && "$dir/e2e.test" -test.v -test.count=1 -test.timeout 30m) 2>&1 | tee "$dir/e2e.out" || rc=$?
echo "e2e tests: $((SECONDS - t))s; total: $((SECONDS - start))s"
if ((rc != 0)); then
	# A failed step logs the controllers' output after its assertion, which can push the
	# assertion past the tail a CI log keeps: the failures again, last.
	log "what failed, repeated from above"
	grep -E -A14 '^\s+Error Trace:|^panic:' "$dir/e2e.out" | head -150 || true
	grep -E '^\s*--- FAIL' "$dir/e2e.out" || true
	exit "$rc"
fi
