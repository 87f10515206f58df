// Package versions is the one place where lux-gpu-ci pins what it installs that go.mod
// cannot pin: Helm charts, container images and AWS-side versions. Go module versions live
// in go.mod; the Pulumi provider plugins follow their SDK modules there.
//
// Bumping a pin is a reviewed change: the unit tests render the charts named here, so a
// bump that breaks our values fails `make test` before it reaches a cluster.
package versions

import "path"

const (
	// KubernetesDefault is the EKS control-plane version a new stack gets. EKS 1.35 is in
	// standard support until 2027-03 and Karpenter 1.14 supports 1.26–1.36.
	KubernetesDefault = "1.35"
	// KubernetesMin and KubernetesMax bound what the config accepts: older than 1.32 has left
	// EKS extended support planning windows and has no AL2023 story worth keeping; newer than
	// 1.36 is not supported by Karpenter 1.14.
	KubernetesMin = 32
	KubernetesMax = 36

	// SystemAMIType is the EKS-optimized AMI of the always-on system node group. AL2 has no
	// AMIs for Kubernetes 1.33+, and pulumi-eks v2 defaults to AL2.
	SystemAMIType = "AL2023_x86_64_STANDARD"
)

// Chart is a pinned Helm chart: an oci:// reference, or a name in a classic repository.
// Module and Path say where a Go module holds the same chart, so tests and `make render`
// can render it without network beyond the Go module proxy.
type Chart struct {
	Chart   string `json:"chart"`
	Repo    string `json:"repo,omitempty"`
	Version string `json:"version"`
	Module  string `json:"-"` // module@version
	Path    string `json:"-"` // the chart's directory inside the module
}

// Name is the chart's name: the last element of its reference ("karpenter" for
// oci://public.ecr.aws/karpenter/karpenter).
func (c Chart) Name() string { return path.Base(c.Chart) }

// karpenterModule holds Karpenter's charts; its version matches go.mod's (a test checks).
const karpenterModule = "github.com/aws/karpenter-provider-aws@v1.14.1"

// Karpenter 1.14.1 (matches sigs.k8s.io/karpenter and karpenter-provider-aws in go.mod, whose
// CRDs the tests validate our NodePools against). The CRDs are their own chart so they
// upgrade with Karpenter (Helm never upgrades a chart's crds/ directory).
var (
	KarpenterCRDChart = Chart{Chart: "oci://public.ecr.aws/karpenter/karpenter-crd", Version: "1.14.1", Module: karpenterModule, Path: "charts/karpenter-crd"}
	KarpenterChart    = Chart{Chart: "oci://public.ecr.aws/karpenter/karpenter", Version: "1.14.1", Module: karpenterModule, Path: "charts/karpenter"}
)

// NVIDIA device plugin. The AL2023 NVIDIA AMI ships drivers and the container toolkit but
// not the device plugin. 0.19.3 is also a Go module version, so tests render the real chart.
var NvidiaDevicePluginChart = Chart{
	Chart: "nvidia-device-plugin", Repo: "https://nvidia.github.io/k8s-device-plugin", Version: "0.19.3",
	Module: "github.com/NVIDIA/k8s-device-plugin@v0.19.3", Path: "deployments/helm/nvidia-device-plugin",
}

// NvidiaDevicePluginImage is the image the pinned chart runs (its appVersion; a chart render
// test keeps them equal). It is on nvcr.io, which ECR's pull-through cache does not support.
const NvidiaDevicePluginImage = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"

// CompilerCacheServer is the compiler cache's server: bazel-remote, whose HTTP cache ccache's
// http storage speaks (layout=bazel) and whose S3 proxy reads EKS Pod Identity's credentials
// (its minio-go v7.0.98, pkg/credentials/iam_aws.go:198-200; docs/design.md, "Compiler
// cache"). Its image runs /bazel-remote-linux-amd64 as uid 65532 (BUILD.bazel:112-139 at
// the tag); hack/e2e-tools.sh builds the same version from the module proxy for make e2e.
const (
	CompilerCacheServerVersion = "v2.6.2"
	CompilerCacheServerImage   = "docker.io/buchgr/bazel-remote-cache:" + CompilerCacheServerVersion
	CompilerCacheServerBinary  = "/bazel-remote-linux-amd64"
)

// Actions Runner Controller in scale-set mode; 0.14 added scaleSetLabels. No Go module
// version holds the 0.14 charts, so both are copied into k8s/arc (the source of ARC's CRDs);
// bump these with that copy (k8s/arc/README.md).
var (
	ARCControllerChart = Chart{Chart: "oci://ghcr.io/actions/actions-runner-controller-charts/gha-runner-scale-set-controller", Version: "0.14.2"}
	ARCScaleSetChart   = Chart{Chart: "oci://ghcr.io/actions/actions-runner-controller-charts/gha-runner-scale-set", Version: "0.14.2"}
)

// Charts is every chart the stack installs: the one list the Kubernetes layer, `make render`
// and the tests take charts from, and the names the helmCharts config key overrides.
var Charts = []Chart{KarpenterCRDChart, KarpenterChart, NvidiaDevicePluginChart, ARCControllerChart, ARCScaleSetChart}

// ChartNamed returns the pinned chart of that name.
func ChartNamed(name string) (Chart, bool) {
	for _, c := range Charts {
		if c.Name() == name {
			return c, true
		}
	}
	return Chart{}, false
}

// ChartNames lists the charts' names, in install order.
func ChartNames() []string {
	names := make([]string, len(Charts))
	for i, c := range Charts {
		names[i] = c.Name()
	}
	return names
}

// AWSCLIImage is the one image of the stack's gpuci pods (the retrier, the caches' gates:
// k8s/gpuci.go), which fetches the gpuci the stack stored in its bucket, by EKS Pod Identity,
// and runs it: the AWS CLI reads the agent's credentials since 2.15.0 (EKS user guide
// pod-id-minimum-sdk), at this tag in awscli/botocore/credentials.py ContainerProvider
// (AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, :2068) and utils.py (the agent's 169.254.170.23
// allowed, :2893). Its image is Amazon Linux 2023 with sh and sha256sum (docker/Dockerfile).
// Pinned by tag only: a digest read from the registry would go here (k8s.ImageCache.Pull then
// pulls it from its own registry, as ECR's cache fills only on a pull by tag).
const AWSCLIImage = "public.ecr.aws/aws-cli/aws-cli:2.36.7"

// GpuciReleases is where release.yml publishes gpuci's binaries, by tag: the in-cluster
// retrier (config.Retrier) and the retry workflow download theirs from here.
const GpuciReleases = "https://github.com/luxfi/lux-gpu-ci/releases/download"

// RunnerImage is the default runner container: ARC's own default, the current runner
// release, pulled on every start. It is the one image deliberately not pinned: ARC registers
// runners with self-update disabled, and GitHub stops sending jobs to a runner version some
// 30 days after a newer one is released, so a pinned runner left alone for months stops
// getting jobs (a stack must keep working untouched). A pool may still pin one (runnerImage);
// gpuci doctor then names the pin when runners are refused as deprecated. It has no CUDA
// toolkit: jobs bring theirs; the driver comes from the node's AL2023 NVIDIA AMI.
const RunnerImage = "ghcr.io/actions/actions-runner:latest"

// CUDARunnerFollowTag is the moving tag .github/workflows/cuda-runner-image.yml publishes for
// each new runner release (images/cuda-runner: the runner with the CUDA toolkit and g++). A
// pool whose runnerImage carries it follows the runner releases as the stock :latest does
// (pulled on every start); its CUDA is the smoke workflow's.
const CUDARunnerFollowTag = "cuda12.8"

// CUDARunnerRepository is the package cuda-runner-image.yml publishes the CUDA runner image
// as, under the organization that owns the copy: ghcr.io/<owner>/lux-cuda-runner.
const CUDARunnerRepository = "lux-cuda-runner"

// GPUNodeAMIAlias pins the EKS-optimized AL2023 release for GPU nodes; Karpenter picks its
// NVIDIA variant for GPU instance types. "latest" would drift every AMI release.
const GPUNodeAMIAlias = "al2023@v20260714"

// GPUNodeBottlerocketAlias pins the Bottlerocket release for the GPU nodes of a pool whose
// images come from a snapshot (config.GPUPool.ImageSnapshotID): Karpenter resolves its
// aws-k8s-<version>-nvidia variant for GPU types (karpenter-provider-aws v1.14.1,
// pkg/providers/amifamily/bottlerocket.go). v1.64.0 was released on 2026-08-05, its AMIs
// and SSM parameters published (bottlerocket-os/bottlerocket#4895); the k8s-1.35 variants
// exist since v1.53.0 (#4737). Its NVIDIA variants run their own device plugin.
const GPUNodeBottlerocketAlias = "bottlerocket@v1.64.0"
