package k8s

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/luxfi/lux-gpu-ci/internal/lifelines"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// KarpenterArgs describes the Karpenter installation.
type KarpenterArgs struct {
	ClusterName, Region string
	InterruptionQueue   pulumi.StringInput
	// Lifelines are the AWS side the controller needs from before its pods start until it
	// has drained the GPU nodes on destroy (lifelines.Karpenter); both releases keep them.
	Lifelines       lifelines.Set
	SkipAwait       bool
	CRDChart, Chart versions.Chart
	// SystemNodes is how many system nodes run the controller (KarpenterReplicas).
	SystemNodes int
	// Network are the NetworkPolicies its pods' network rests on (strict mode: boundary.go):
	// in place before they start, and until they have drained the GPU nodes on destroy.
	Network []pulumi.Resource
}

// Karpenter is the karpenter-crd and karpenter releases.
type Karpenter struct {
	pulumi.ResourceState

	// Release is the controller; GPU pools depend on it so destroy removes them (and
	// Karpenter terminates their instances) while the controller still runs.
	Release *HelmRelease
}

// KarpenterReplicas is the controller's replica count on systemNodes nodes: two where there
// are two nodes, so a system node's replacement or loss leaves a leader (the chart's PDB lets
// a drain take one at a time); one on a single node, since the chart's required anti-affinity
// on hostname would leave a second Pending there.
func KarpenterReplicas(systemNodes int) int { return max(1, min(2, systemNodes)) }

// KarpenterValues are the karpenter chart values, for a cluster with systemNodes system nodes.
func KarpenterValues(clusterName, region string, queue any, systemNodes int) map[string]any {
	return map[string]any{
		"settings": map[string]any{
			"clusterName":       clusterName,
			"interruptionQueue": queue,
		},
		// Must match the Pod Identity association; the chart would otherwise derive it
		// from the release name.
		"serviceAccount": map[string]any{"name": wellknown.KarpenterServiceAccount},
		"replicas":       KarpenterReplicas(systemNodes),
		"controller": map[string]any{
			// Fits a t3.medium (1930m / 3246Mi allocatable) beside CoreDNS and ARC.
			"resources": mustUnstructured(corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("250m"),
					corev1.ResourceMemory: resource.MustParse("512Mi"),
				},
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}),
			// Pod Identity injects AWS_REGION too; this keeps Karpenter off IMDS, whose hop
			// limit is 1 on AL2023 nodes.
			"env": jsonList(corev1.EnvVar{Name: "AWS_REGION", Value: region}),
		},
	}
}

// KarpenterCRDValues annotate every CRD of the karpenter-crd chart (its additionalAnnotations
// value) with Helm's keep policy: uninstalling the release — a replace of it (a new provider,
// `up --replace`), a rename, a destroy — then leaves the CRDs, and with them every NodePool,
// EC2NodeClass and NodeClaim, instead of deleting each object of their kinds (and the GPU
// instances behind the NodeClaims). A new install of the release adopts the CRDs it finds
// (they still carry its release name). On a destroy they stay, empty, until the cluster goes.
func KarpenterCRDValues() map[string]any {
	return map[string]any{"additionalAnnotations": map[string]any{wellknown.HelmResourcePolicyAnnotation: wellknown.HelmKeep}}
}

// NewKarpenter installs Karpenter's CRDs (their own chart, so they upgrade with Karpenter)
// and then the controller with SkipCrds.
func NewKarpenter(ctx *pulumi.Context, name string, args *KarpenterArgs, opts ...pulumi.ResourceOption) (*Karpenter, error) {
	k := &Karpenter{}
	if err := ctx.RegisterComponentResource(wellknown.KarpenterComponent, name, k, opts...); err != nil {
		return nil, err
	}
	crds, err := newRelease(ctx, name+"-crd", release{
		Name: wellknown.KarpenterCRDRelease, Namespace: wellknown.KarpenterNamespace, Chart: args.CRDChart,
		Values: KarpenterCRDValues(), SkipAwait: args.SkipAwait,
		// A release of a pinned name can only be replaced by deleting it first (a new install
		// under a name in use fails); the keep policy makes that delete leave the CRDs.
	}, pulumi.Parent(k), args.Lifelines.Keep(), pulumi.DeleteBeforeReplace(true))
	if err != nil {
		return nil, err
	}
	controller, err := newRelease(ctx, name, release{
		Name: wellknown.KarpenterRelease, Namespace: wellknown.KarpenterNamespace, Chart: args.Chart,
		Values:   KarpenterValues(args.ClusterName, args.Region, args.InterruptionQueue, args.SystemNodes),
		SkipCrds: true, SkipAwait: args.SkipAwait,
	}, pulumi.Parent(k), args.Lifelines.Keep(), pulumi.DependsOn(append([]pulumi.Resource{crds}, args.Network...)))
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	k.Release = controller
	if err := ctx.RegisterResourceOutputs(k, pulumi.Map{}); err != nil {
		return nil, err
	}
	return k, nil
}
