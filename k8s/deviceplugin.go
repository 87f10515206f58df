package k8s

import (
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8scorev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// DevicePluginArgs describes the NVIDIA device plugin installation.
type DevicePluginArgs struct {
	Chart     versions.Chart
	SkipAwait bool
}

// DevicePlugin is the NVIDIA device plugin DaemonSet, which advertises nvidia.com/gpu on GPU
// nodes. The AL2023 NVIDIA AMI has the driver and container toolkit but not this plugin.
type DevicePlugin struct {
	pulumi.ResourceState
}

// DevicePluginValues make the plugin run on exactly the GPU pools' AL2023 nodes: it tolerates
// their taint and requires their nvidia.com/gpu.present=true label (and no Bottlerocket
// node-os label: Bottlerocket runs its own plugin). The chart's own affinity
// would also match that label, but only as one of three NFD-based alternatives; stating it
// keeps the contract in this repository.
func DevicePluginValues() map[string]any {
	return map[string]any{
		"tolerations": jsonList(
			k8scorev1.Toleration{Key: "CriticalAddonsOnly", Operator: k8scorev1.TolerationOpExists},
			k8scorev1.Toleration{Key: wellknown.GPUTaintKey, Operator: k8scorev1.TolerationOpExists, Effect: k8scorev1.TaintEffectNoSchedule},
		),
		"affinity": mustUnstructured(k8scorev1.Affinity{NodeAffinity: &k8scorev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &k8scorev1.NodeSelector{NodeSelectorTerms: []k8scorev1.NodeSelectorTerm{{
				MatchExpressions: []k8scorev1.NodeSelectorRequirement{
					{Key: wellknown.GPUPresentLabel, Operator: k8scorev1.NodeSelectorOpIn, Values: []string{"true"}},
					// Bottlerocket's NVIDIA variant advertises the GPUs itself.
					{Key: wellknown.NodeOSLabel, Operator: k8scorev1.NodeSelectorOpNotIn, Values: []string{config.NodeOSBottlerocket}},
				},
			}}},
		}}),
		// No GPU feature discovery / NFD: the NodePool labels say what the node is.
		"gfd": map[string]any{"enabled": false},
		"nfd": map[string]any{"enabled": false},
	}
}

// NewDevicePlugin installs the plugin into its own namespace.
func NewDevicePlugin(ctx *pulumi.Context, name string, args *DevicePluginArgs, opts ...pulumi.ResourceOption) (*DevicePlugin, error) {
	d := &DevicePlugin{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:k8s:DevicePlugin", name, d, opts...); err != nil {
		return nil, err
	}
	ns, err := corev1.NewNamespace(ctx, name, &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.DevicePluginNamespace)},
	}, pulumi.Parent(d))
	if err != nil {
		return nil, err
	}
	// It reaches what it always did (strict mode: boundary.go), from before its pods start.
	allow, err := newNetworkPolicies(ctx, name, []networkingv1.NetworkPolicy{AllowAll(wellknown.DevicePluginNamespace)}, pulumi.Parent(d), pulumi.DependsOn([]pulumi.Resource{ns}))
	if err != nil {
		return nil, err
	}
	if _, err := newRelease(ctx, name, release{
		Name: wellknown.DevicePluginRelease, Namespace: wellknown.DevicePluginNamespace, Chart: args.Chart,
		Values: DevicePluginValues(), SkipAwait: args.SkipAwait,
	}, pulumi.Parent(d), pulumi.DependsOn(append([]pulumi.Resource{ns}, allow...))); err != nil {
		return nil, err
	}
	if err := ctx.RegisterResourceOutputs(d, pulumi.Map{}); err != nil {
		return nil, err
	}
	return d, nil
}
