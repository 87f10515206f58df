#!/usr/bin/env bash
# Stops what hack/cluster-up.sh started (by PID) and removes its directory.
set -euo pipefail
dir=${1:?usage: cluster-down.sh DIR}
if [[ -f $dir/pids ]]; then
	while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done <"$dir/pids"
fi
rm -rf "$dir"
