package wellknown

// Karpenter runs in kube-system under a pinned ServiceAccount: its Pod Identity association
// and its Helm release must agree on both.
const (
	KarpenterNamespace      = "kube-system"
	KarpenterServiceAccount = "karpenter"
	KarpenterRelease        = "karpenter"
	KarpenterCRDRelease     = "karpenter-crd"
)

// The NVIDIA device plugin has its own namespace (its chart refuses "default"); its
// DaemonSet is named after the release.
const (
	DevicePluginNamespace = "nvidia-device-plugin"
	DevicePluginRelease   = "nvidia-device-plugin"
)

// Actions Runner Controller: the controller in one namespace, the scale sets and their
// runners in another. The controller's ServiceAccount is pinned because each scale set must
// name it (the chart would otherwise look it up in the cluster, which fails in previews).
const (
	ARCNamespace         = "arc-systems"
	RunnersNamespace     = "arc-runners"
	ARCControllerRelease = "arc"
	ARCServiceAccount    = "arc-gha-rs-controller"
	// GitHubSecretName holds the credentials runners register with.
	GitHubSecretName = "arc-github-credentials"
	// RetryServiceAccount runs the retry runner (config.RetryRunner) and names its Roles:
	// read the events gpuci retry --cluster decides on, nothing else.
	RetryServiceAccount = "gpuci-retry"
	// ARCCRDFieldManager is the one field manager the stack applies ARC's CRDs as
	// (server-side apply). Fixed, not pulumi-kubernetes' per-resource random name: a replace or
	// rename of a CRD's resource applies as the same manager, so no earlier one keeps owning a
	// field that a later ARC drops (gpuci crd-owners takes such fields over).
	ARCCRDFieldManager = "lux-gpu-ci"
)

// A container-form pool's jobs: the container hooks start each job's pod in the pool's own
// namespace (ContainerJobsNamespace, named to the hooks by ACTIONS_RUNNER_KUBERNETES_NAMESPACE),
// as the pool's own account (ContainerHooksAccount, a ServiceAccount of the runners'
// namespace whose rights are all in the jobs' namespace). A retry twin runs its pool's jobs
// again, so it shares its pool's namespace and account: the pool is the unit of trust.
const (
	containerJobsNamespacePrefix = "arc-jobs-"
	containerHooksAccountPrefix  = "arc-hooks-"
)

// ContainerJobsLabel marks, with "true", the namespaces of container-form pools' job pods.
const ContainerJobsLabel = "lux-gpu-ci.luxfi.com/container-jobs"

// ContainerJobsNamespace is the namespace of the job pods of the container-form pool named
// pool (a pool's name is a DNS label of at most 50 characters: this fits 63).
func ContainerJobsNamespace(pool string) string { return containerJobsNamespacePrefix + pool }

// ContainerHooksAccount is the ServiceAccount a container-form pool's runners run as (in the
// runners' namespace): the container hooks' permissions in ContainerJobsNamespace(pool), and
// nothing in the runners' namespace.
func ContainerHooksAccount(pool string) string { return containerHooksAccountPrefix + pool }

// Warm capacity (a pool's warm windows): its placeholders run in a namespace of their own, at a
// priority below every job's, labelled with the pool they keep warm.
const (
	WarmNamespace     = "gpuci-warm"
	WarmPriorityClass = "lux-gpu-ci-warm"
	// WarmPoolLabel, on a placeholder pod, names the pool whose node it holds.
	WarmPoolLabel = "lux-gpu-ci.luxfi.com/warm-for"
)

// PrepareJobTimeoutSeconds is how long a container-form runner's hooks wait for the job pod to
// run before they fail the job (ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS; the hooks' own
// default is 600 s, runner-container-hooks v0.8.1 packages/k8s/src/k8s/index.ts). The wait
// covers a whole cold start: gpuci cost's model puts the smoke workflow's 8 GB CUDA image at
// ~4 minutes through the image cache and ~7½ without it at gp3's baseline; a spot
// InsufficientCapacity on Karpenter's first choice adds a second launch (~1½ minutes); twice
// that, for the estimates' error, is 20 minutes. Waiting longer costs nothing but a runner
// on a system node: a job whose pod can never run (quota, gpuLimit) fails 10 minutes later.
const PrepareJobTimeoutSeconds = 1200

// The compiler cache (a pool's compilerCache): a cache server per pool in a namespace of its
// own, ccache-<pool>, on CompilerCachePort; a pool's job pods carry CompilerCacheLabel naming
// the one they may reach.
const (
	CompilerCacheNamespace = "gpuci-cache"
	CompilerCacheLabel     = "lux-gpu-ci.luxfi.com/compiler-cache"
	CompilerCachePort      = 8080
)

// CompilerCacheName is the Deployment, Service and ServiceAccount of pool's cache server:
// prefixed, as a Service's name must start with a letter and a pool's may start with a digit
// (at most 50 characters: this fits 63). Never "bazel-remote": Kubernetes' service links
// would set BAZEL_REMOTE_* variables, which the server reads as its flags.
func CompilerCacheName(pool string) string { return "ccache-" + pool }

// ARCMetricsPort is where ARC's controller and each scale set's listener serve their metrics
// (k8s.ControllerValues), at /metrics.
const ARCMetricsPort = 8080

// Component types the destroy-order contract names (internal/lifelines): the components
// register under these, and the contract finds its dependents and lifelines by them.
const (
	KubernetesLayerComponent = "lux-gpu-ci:k8s:GPUCI"
	KarpenterComponent       = "lux-gpu-ci:k8s:Karpenter"
	GPUPoolComponent         = "lux-gpu-ci:k8s:GPUPool"
	RunnersComponent         = "lux-gpu-ci:k8s:Runners"
	KarpenterAWSComponent    = "lux-gpu-ci:infra:KarpenterAWS"
)

// The in-cluster retrier (config.Retrier): a Deployment in a namespace of its own, away from
// the runners' namespace, where its GitHub token (which may re-run jobs) lives; its account
// reads the events in default and in the runners' namespace.
const (
	RetrierNamespace      = "gpuci-retrier"
	RetrierName           = "gpuci-retrier"
	RetrierServiceAccount = "gpuci-retrier"
	RetrierTokenSecret    = "gpuci-retrier-github"
)

// A spot pool's cool-down NodePool (nodepools.CoolDownNodePoolFor): on-demand, tried before the
// pool's own, and launching nothing (its GPU limit 0) until the in-cluster retrier, having
// re-run a job a spot interruption ended, raises its limit to CoolDownGPULimitAnnotation's
// until CoolDownUntilAnnotation's time.
const (
	coolDownSuffix             = "-cool-down"
	CoolDownGPULimitAnnotation = "lux-gpu-ci.luxfi.com/cool-down-gpu-limit"
	CoolDownUntilAnnotation    = "lux-gpu-ci.luxfi.com/cool-down-until"
	CoolDownRole               = "gpuci-retrier-cool-down"
)

// OutOfServiceRole is the in-cluster retrier's ClusterRole to take a broken GPU's node out of
// service (k8s.OutOfServiceRules).
const OutOfServiceRole = "gpuci-retrier-out-of-service"

// CoolDownNodePool is the name of pool's cool-down NodePool.
func CoolDownNodePool(pool string) string { return pool + coolDownSuffix }

// GpuciKey is where the stack's bucket keeps a build of gpuci for the stack's pods: under its
// SHA-256, so a new build is a new object and a pod never reads a binary its pin does not name.
func GpuciKey(sha256 string) string { return "gpuci/linux-amd64/" + sha256 }
