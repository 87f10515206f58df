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
	// ContainerHooksServiceAccount runs container-form runners (and names their Role and
	// RoleBinding): the permissions the container hooks need, nothing else.
	ContainerHooksServiceAccount = "arc-container-hooks"
)
