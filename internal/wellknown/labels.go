package wellknown

// Labels every GPU node carries (the NodePool's template sets them).
const (
	// GPUPresentLabel satisfies the NVIDIA device plugin chart's node affinity. Without it
	// the plugin never schedules on Karpenter nodes, the GPU is never advertised and runner
	// pods stay Pending on a paid node.
	GPUPresentLabel = "nvidia.com/gpu.present"
	// WorkloadLabel marks GPU CI nodes for humans and dashboards.
	WorkloadLabel = "workload"
	WorkloadValue = "gpu-ci"
	// PoolLabel names the pool a node or runner pod belongs to.
	PoolLabel = "lux-gpu-ci.luxfi.com/pool"
	// NodeOSLabel, on the nodes of a pool that runs Bottlerocket (its images from a
	// snapshot), is "bottlerocket". Its NVIDIA variant runs its own device plugin, so the
	// stack's keeps off nodes with this label; AL2023 pools leave it out (adding a label to a
	// live NodePool's template would drift its nodes).
	NodeOSLabel = "lux-gpu-ci.luxfi.com/node-os"
	// NodePoolLabel is Karpenter's own label naming a node's NodePool
	// (sigs.k8s.io/karpenter v1.NodePoolLabelKey; a test keeps them equal).
	NodePoolLabel = "karpenter.sh/nodepool"
)

// The taint on every GPU node, and the resource its GPUs are advertised as.
const (
	// GPUTaintKey keeps everything but GPU jobs (and GPU DaemonSets) off GPU nodes.
	GPUTaintKey   = "nvidia.com/gpu"
	GPUTaintValue = "present"
	// GPUResource is what runner pods request and a pool's limit counts.
	GPUResource = "nvidia.com/gpu"
)

// IMDSHopLimit is the instance metadata service's response hop limit on every node of the
// stack, system and GPU: 1, so IMDSv2's token answers only a process on the host network (a
// pod off it is one hop further and never gets a token, and so never the node role's
// credentials). What on a node needs IMDS runs on the host network: aws-node, kube-proxy and
// the Pod Identity agent (EKS's add-ons); Karpenter, off it, takes its region from AWS_REGION
// (k8s.KarpenterValues) and its credentials from Pod Identity (docs/operations.md, "No node credentials").
const IMDSHopLimit = 1

// SystemNodeLabel marks the nodes of the always-on system node group, with SystemNodeValue.
const (
	SystemNodeLabel = "lux-gpu-ci.luxfi.com/node-role"
	SystemNodeValue = "system"
)

// RunnerRoleLabel tells, on every pod of the runners' namespace, what may run in it and so
// where it may connect (k8s.RunnersNetworkPolicies): RunnerRoleJob where a job's own code runs
// (a runner-form runner, a container-form job's pod), which reaches DNS and the internet
// only; RunnerRoleRelay for a runner that talks to the API server for its job (a
// container-form runner, through the container hooks; the retry runner).
const (
	RunnerRoleLabel = "lux-gpu-ci.luxfi.com/runner-role"
	RunnerRoleJob   = "job"
	RunnerRoleRelay = "relay"
)

// DoNotDisrupt, on a runner pod, keeps Karpenter from consolidating its node while the job
// runs.
const DoNotDisrupt = "karpenter.sh/do-not-disrupt"

// HelmResourcePolicyAnnotation set to HelmKeep, on an object of a Helm release, makes Helm
// leave the object when it uninstalls the release or an upgrade drops it (helm.sh/helm/v3
// pkg/kube/resource_policy.go; k8s/helmrelease_test.go TestHelmKeepPolicyIsHelms compares).
const (
	HelmResourcePolicyAnnotation = "helm.sh/resource-policy"
	HelmKeep                     = "keep"
)

// DiscoveryTag is the AWS tag (value: the cluster name) on the subnets and the security group
// that Karpenter's EC2NodeClass selects for GPU nodes.
const DiscoveryTag = "karpenter.sh/discovery"

// Label selectors of the controllers' pods, as their charts label them.
const (
	KarpenterPods     = "app.kubernetes.io/name=karpenter"
	ARCControllerPods = "app.kubernetes.io/part-of=gha-rs-controller"
	// ScaleSetLabel, on a listener pod, names its runner scale set.
	ScaleSetLabel = "actions.github.com/scale-set-name"
)

// LaunchedCapacityAnnotation, on a pod of the runners' namespace bound to a Karpenter node, is
// that node's capacity type ("spot" or "on-demand"): the API server copies it from the Node as
// it binds the pod (k8s.LaunchedCapacityPolicy), and a runner-form runner reads it through the
// downward API, having no token to read its Node with.
const LaunchedCapacityAnnotation = "lux-gpu-ci.luxfi.com/capacity-type"
