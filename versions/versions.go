// Package versions is the one place where lux-gpu-ci pins what it installs that go.mod
// cannot pin: Helm charts, container images and AWS-side versions. Go module versions live
// in go.mod; the Pulumi provider plugins follow their SDK modules there.
//
// Bumping a pin is a reviewed change: the unit tests render the charts named here, so a
// bump that breaks our values fails `make test` before it reaches a cluster.
package versions

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
