#!/usr/bin/env bash
# Builds (or reuses) the binaries the e2e tests need, from the Go module proxy and Debian
# only, into a cache directory keyed by version. Nothing here is committed; a second run
# with the cache present does no work.
#
#   etcd                      Debian etcd-server
#   kube-apiserver            k8s.io/kubernetes v$KUBE_VERSION (wrapper module over staging)
#   kube-controller-manager   same wrapper: its garbage collector and namespace controller
#                             finish foreground deletes, without which destroy hangs
#   kube-scheduler            same wrapper: places every pod, the GPU jobs' included
#   karpenter                 hack/karpenter: Karpenter's controllers at go.mod's pins over
#                             upstream's in-memory AWS (pkg/fake)
#   pulumi                    github.com/pulumi/pulumi/pkg/v3 v$PULUMI_VERSION
#   pulumi-resource-kubernetes  the served pulumi-kubernetes/provider/v4 pseudo-version,
#                             installed as plugin version $K8S_PLUGIN_VERSION
#   bazel-remote, gofakes3,   the compiler cache's server at versions.CompilerCacheServerVersion
#   ccache                    and a local S3 (module proxy), ccache from Debian: make e2e runs a
#                             build through the server as the stack deploys it
#   pulumi-resource-eks       the real pulumi-eks component: @pulumi/eks from npm, exactly as
#                             hack/eks-plugin/package-lock.json pins it, run by Node (Debian's
#                             nodejs where the machine has none); and the version before the
#                             pin (hack/eks-plugin-previous), which the e2e upgrades from
#
# Usage: hack/e2e-tools.sh            build what is missing, print the tool directory
#        hack/e2e-tools.sh --env      print shell exports for the tools (eval-able)
# Cold: ~30 min on 2 cores (kube 8, Pulumi CLI 6, provider 14 sharing the Go cache). Warm: instant.
set -euo pipefail

KUBE_VERSION=1.36.3
PULUMI_VERSION=3.276.0
K8S_PROVIDER_MODULE=github.com/pulumi/pulumi-kubernetes/provider/v4
K8S_PROVIDER_PSEUDO=v4.0.0-20260115033456-f47bc2d6f199
K8S_PROVIDER_PULUMI=v3.215.0   # the pkg/sdk versions that provider commit compiles against
K8S_PROVIDER_SDK=v4.24.0
K8S_PLUGIN_VERSION=4.32.0      # what the program's pulumi-kubernetes SDK asks for
BAZEL_REMOTE_VERSION=v2.6.2    # versions.CompilerCacheServerVersion (e2e/pins_test.go)
GOFAKES3_VERSION=v1.2.0
CLIPBOARD_REPLACE='github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e'

CACHE=${LUX_GPU_CI_CACHE:-$HOME/.cache/lux-gpu-ci}
TOOLS=$CACHE/tools
KUBE_DIR=$TOOLS/kubernetes-v$KUBE_VERSION
PULUMI_DIR=$TOOLS/pulumi-v$PULUMI_VERSION
PROVIDER_DIR=$TOOLS/pulumi-resource-kubernetes-v$K8S_PLUGIN_VERSION
PULUMI_HOME_DIR=$CACHE/pulumi-home
CCACHE_TOOLS_DIR=$TOOLS/compiler-cache-bazel-remote-$BAZEL_REMOTE_VERSION-gofakes3-$GOFAKES3_VERSION
# The eks plugins' directories are keyed by their lockfiles, so a changed pin reinstalls one.
EKS_LOCK=$(cd "$(dirname "$0")" && pwd)/eks-plugin/package-lock.json
EKS_DIR=$TOOLS/pulumi-eks-$(sha256sum "$EKS_LOCK" | cut -c1-12)
EKS_PREVIOUS_LOCK=$(cd "$(dirname "$0")" && pwd)/eks-plugin-previous/package-lock.json
EKS_PREVIOUS_DIR=$TOOLS/pulumi-eks-$(sha256sum "$EKS_PREVIOUS_LOCK" | cut -c1-12)
# So is Karpenter's, by its sources: an edit of hack/karpenter rebuilds it.
KARPENTER_SRC=$(cd "$(dirname "$0")" && pwd)/karpenter
KARPENTER_DIR=$TOOLS/karpenter-$(cat "$KARPENTER_SRC"/go.mod "$KARPENTER_SRC"/go.sum "$KARPENTER_SRC"/*.go | sha256sum | cut -c1-12)

if [[ ${1:-} == --env ]]; then
	cat <<EOF
export PATH="$KUBE_DIR:$PULUMI_DIR:\$PATH"
export E2E_KUBE_APISERVER="$KUBE_DIR/kube-apiserver"
export E2E_KUBE_CONTROLLER_MANAGER="$KUBE_DIR/kube-controller-manager"
export E2E_KUBE_SCHEDULER="$KUBE_DIR/kube-scheduler"
export E2E_KUBE_VERSION="$KUBE_VERSION"
export E2E_KARPENTER="$KARPENTER_DIR/karpenter"
export E2E_PULUMI="$PULUMI_DIR/pulumi"
export E2E_PULUMI_HOME="$PULUMI_HOME_DIR"
export E2E_ETCD="$(command -v etcd || echo /usr/bin/etcd)"
export E2E_EKS_PLUGIN="$EKS_DIR"
export E2E_EKS_PLUGIN_PREVIOUS="$EKS_PREVIOUS_DIR"
export E2E_BAZEL_REMOTE="$CCACHE_TOOLS_DIR/bazel-remote"
export E2E_GOFAKES3="$CCACHE_TOOLS_DIR/gofakes3"
export E2E_CCACHE="$(command -v ccache || echo /usr/bin/ccache)"
EOF
	exit 0
fi

log() { printf '[e2e-tools %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
timed() { local start=$SECONDS; "$@"; log "$1 took $((SECONDS - start))s"; }

# A wrapper module for building a command out of a module that cannot be built directly.
wrapper() { # dir module-line...
	local dir=$1
	shift
	rm -rf "$dir.build"
	mkdir -p "$dir.build"
	printf '%s\n' "$@" >"$dir.build/go.mod"
}

etcd_install() {
	if command -v etcd >/dev/null 2>&1; then return; fi
	log "installing etcd-server from Debian"
	apt_install etcd-server openssl
	# Debian starts a system etcd on the default ports; the tests run their own.
	local sudo=()
	[[ $(id -u) == 0 ]] || sudo=(sudo)
	"${sudo[@]}" systemctl stop etcd >/dev/null 2>&1 || "${sudo[@]}" service etcd stop >/dev/null 2>&1 || "${sudo[@]}" pkill -x etcd || true
}

apt_install() { # package...
	local sudo=()
	[[ $(id -u) == 0 ]] || sudo=(sudo)
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# pulumi-eks's provider is Node.js code (its npm package ships cmd/provider/index.js); the
# engine runs it as the eks plugin through a one-line wrapper.
eks_install() { # [lockfile dir]
	local EKS_LOCK=${1:-$EKS_LOCK} EKS_DIR=${2:-$EKS_DIR}
	if [[ -x $EKS_DIR/pulumi-resource-eks ]]; then return; fi
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		log "installing nodejs and npm from Debian"
		apt_install nodejs npm
	fi
	log "installing @pulumi/eks from npm as pinned by $EKS_LOCK (node $(node --version))"
	rm -rf "$EKS_DIR.build" && mkdir -p "$EKS_DIR.build"
	cp "$(dirname "$EKS_LOCK")/package.json" "$EKS_LOCK" "$EKS_DIR.build/"
	# --ignore-scripts: @pulumi/kubernetes's install script would download a plugin; the
	# e2e's plugins come from this script.
	(cd "$EKS_DIR.build" && npm ci --ignore-scripts --omit=dev --no-audit --no-fund --loglevel=error >&2)
	printf '#!/bin/sh\nexec node "%s/node_modules/@pulumi/eks/cmd/provider/index.js" "$@"\n' "$EKS_DIR" >"$EKS_DIR.build/pulumi-resource-eks"
	chmod +x "$EKS_DIR.build/pulumi-resource-eks"
	rm -rf "$EKS_DIR" && mv "$EKS_DIR.build" "$EKS_DIR"
}

kube_build() {
	if [[ -x $KUBE_DIR/kube-apiserver && -x $KUBE_DIR/kube-controller-manager && -x $KUBE_DIR/kube-scheduler ]]; then return; fi
	log "building kube-apiserver, kube-controller-manager and kube-scheduler v$KUBE_VERSION (~12 min cold)"
	local gomod replaces
	gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	# k8s.io/kubernetes replaces its staging modules with ./staging paths that its module zip
	# lacks; point each at the published module of the matching version instead.
	replaces=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#\t\1 => \1 v0.'"${KUBE_VERSION#1.}"'#p' "$gomod" | grep -v sample-cli-plugin)
	wrapper "$KUBE_DIR" "module example/kas" "go 1.26.0" "godebug default=go1.26" \
		"require k8s.io/kubernetes v$KUBE_VERSION" "replace (" "$replaces" ")"
	cat >"$KUBE_DIR.build/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
EOF
	(
		cd "$KUBE_DIR.build"
		go mod tidy >/dev/null
		# Without the version the server reports v0.0.0-master and clients cannot parse it.
		local minor
		minor=$(cut -d. -f2 <<<"$KUBE_VERSION")
		local ld="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
		mkdir -p "$KUBE_DIR.out"
		go build -ldflags "$ld" -o "$KUBE_DIR.out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
		go build -ldflags "$ld" -o "$KUBE_DIR.out/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
		go build -ldflags "$ld" -o "$KUBE_DIR.out/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler
	)
	rm -rf "$KUBE_DIR" && mv "$KUBE_DIR.out" "$KUBE_DIR" && rm -rf "$KUBE_DIR.build"
}

pulumi_build() {
	if [[ -x $PULUMI_DIR/pulumi ]]; then return; fi
	log "building the Pulumi CLI v$PULUMI_VERSION (~12 min cold)"
	wrapper "$PULUMI_DIR" "module example/pulumi" "go 1.26.0" \
		"require (" "	github.com/pulumi/pulumi/pkg/v3 v$PULUMI_VERSION" "	github.com/pulumi/pulumi/sdk/v3 v$PULUMI_VERSION" ")" \
		"replace $CLIPBOARD_REPLACE"
	cat >"$PULUMI_DIR.build/tools.go" <<'EOF'
//go:build tools

package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
EOF
	(
		cd "$PULUMI_DIR.build"
		go mod tidy >/dev/null
		mkdir -p "$PULUMI_DIR.out"
		# Without the version the Automation API refuses destroy (--client needs >= 3.181).
		go build -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
			-o "$PULUMI_DIR.out/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
	)
	rm -rf "$PULUMI_DIR" && mv "$PULUMI_DIR.out" "$PULUMI_DIR" && rm -rf "$PULUMI_DIR.build"
}

provider_build() {
	if [[ -x $PROVIDER_DIR/pulumi-resource-kubernetes ]]; then return; fi
	log "building pulumi-resource-kubernetes ($K8S_PROVIDER_PSEUDO as $K8S_PLUGIN_VERSION, ~25 min cold)"
	local src
	src=$(go mod download -json "$K8S_PROVIDER_MODULE@$K8S_PROVIDER_PSEUDO" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	wrapper "$PROVIDER_DIR" "module example/pulumi-resource-kubernetes" "go 1.26.0" \
		"require (" "	$K8S_PROVIDER_MODULE $K8S_PROVIDER_PSEUDO" \
		"	github.com/pulumi/pulumi/pkg/v3 $K8S_PROVIDER_PULUMI" "	github.com/pulumi/pulumi/sdk/v3 $K8S_PROVIDER_PULUMI" ")" \
		"replace github.com/pulumi/pulumi-kubernetes/sdk/v4 => github.com/pulumi/pulumi-kubernetes/sdk/v4 $K8S_PROVIDER_SDK" \
		"replace $CLIPBOARD_REPLACE"
	# main.go embeds generated files: schema-embed.json is schema.json with the version set,
	# terraform-mapping-embed.json the mapping re-serialized.
	cp "$src/cmd/pulumi-resource-kubernetes/main.go" "$PROVIDER_DIR.build/"
	python3 - "$src/cmd/pulumi-resource-kubernetes" "$PROVIDER_DIR.build" "$K8S_PLUGIN_VERSION" <<'EOF'
import json, sys
src, dst, version = sys.argv[1:]
schema = json.load(open(f"{src}/schema.json"))
schema["version"] = version
json.dump(schema, open(f"{dst}/schema-embed.json", "w"))
json.dump(json.load(open(f"{src}/terraform-mapping.json")), open(f"{dst}/terraform-mapping-embed.json", "w"))
EOF
	chmod -R u+w "$PROVIDER_DIR.build"
	(
		cd "$PROVIDER_DIR.build"
		go mod tidy >/dev/null
		mkdir -p "$PROVIDER_DIR.out"
		go build -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$K8S_PLUGIN_VERSION" \
			-o "$PROVIDER_DIR.out/pulumi-resource-kubernetes" .
	)
	rm -rf "$PROVIDER_DIR" && mv "$PROVIDER_DIR.out" "$PROVIDER_DIR" && rm -rf "$PROVIDER_DIR.build"
}

plugin_install() {
	local marker=$PULUMI_HOME_DIR/plugins/resource-kubernetes-v$K8S_PLUGIN_VERSION
	if [[ -d $marker ]]; then return; fi
	log "installing the kubernetes plugin $K8S_PLUGIN_VERSION into $PULUMI_HOME_DIR"
	PULUMI_HOME=$PULUMI_HOME_DIR PULUMI_SKIP_UPDATE_CHECK=true \
		"$PULUMI_DIR/pulumi" plugin install resource kubernetes "$K8S_PLUGIN_VERSION" --file "$PROVIDER_DIR/pulumi-resource-kubernetes" >&2
}

# Karpenter's controllers, at the versions hack/karpenter/go.mod pins (e2e/pins_test.go holds
# them to the program's go.mod), over upstream's in-memory AWS APIs.
karpenter_build() {
	if [[ -x $KARPENTER_DIR/karpenter ]]; then return; fi
	local version
	version=$(sed -n 's#^\s*github.com/aws/karpenter-provider-aws \(v[^ ]*\)$#\1#p' "$KARPENTER_SRC/go.mod")
	log "building Karpenter $version's controllers over pkg/fake (hack/karpenter, ~5 min cold)"
	mkdir -p "$KARPENTER_DIR.out"
	(cd "$KARPENTER_SRC" && go build -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$version" -o "$KARPENTER_DIR.out/karpenter" .)
	rm -rf "$KARPENTER_DIR" && mv "$KARPENTER_DIR.out" "$KARPENTER_DIR"
}

# The compiler cache's server and a local S3, from the module proxy. bazel-remote's module
# cannot be `go install`ed by version (the proxy refuses its version list, which install asks
# for), so a wrapper module requires the exact versions. Pure Go (CGO_ENABLED=0): its cgo zstd
# is only for CAS blobs, which ccache never writes. ccache is Debian's (4.7.5: http storage,
# layout=bazel), g++ compiles the test's sources.
compiler_cache_tools() {
	if ! command -v ccache >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
		log "installing ccache and g++ from Debian"
		apt_install ccache g++
	fi
	if [[ -x $CCACHE_TOOLS_DIR/bazel-remote && -x $CCACHE_TOOLS_DIR/gofakes3 ]]; then return; fi
	log "building bazel-remote $BAZEL_REMOTE_VERSION and gofakes3 $GOFAKES3_VERSION (~3 min cold)"
	wrapper "$CCACHE_TOOLS_DIR" "module example/compilercache" "go 1.26.0" \
		"require (" "	github.com/buchgr/bazel-remote/v2 $BAZEL_REMOTE_VERSION" "	github.com/johannesboyne/gofakes3 $GOFAKES3_VERSION" ")"
	cat >"$CCACHE_TOOLS_DIR.build/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "github.com/buchgr/bazel-remote/v2"
	_ "github.com/johannesboyne/gofakes3/cmd/gofakes3"
)
EOF
	(
		cd "$CCACHE_TOOLS_DIR.build"
		go mod tidy >/dev/null
		mkdir -p "$CCACHE_TOOLS_DIR.out"
		CGO_ENABLED=0 go build -ldflags "-s -w" -o "$CCACHE_TOOLS_DIR.out/bazel-remote" github.com/buchgr/bazel-remote/v2
		go build -ldflags "-s -w" -o "$CCACHE_TOOLS_DIR.out/gofakes3" github.com/johannesboyne/gofakes3/cmd/gofakes3
	)
	rm -rf "$CCACHE_TOOLS_DIR" && mv "$CCACHE_TOOLS_DIR.out" "$CCACHE_TOOLS_DIR" && rm -rf "$CCACHE_TOOLS_DIR.build"
}

mkdir -p "$TOOLS"
timed etcd_install
timed kube_build
timed pulumi_build
timed provider_build
timed plugin_install
timed eks_install
timed eks_install "$EKS_PREVIOUS_LOCK" "$EKS_PREVIOUS_DIR"
timed karpenter_build
timed compiler_cache_tools
echo "$TOOLS"
