package k8s

import (
	"fmt"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// WarmCapacityArgs are the pools whose warm windows the component opens (warm.go).
type WarmCapacityArgs struct {
	Pools      []config.GPUPool
	ImageCache ImageCache
	// NodePools by pool name: a pool's CronJobs go before its NodePool on destroy.
	NodePools map[string][]pulumi.Resource
}

// WarmCapacity is the warm placeholders' namespace, priority and network policy, and one
// CronJob per pool window.
type WarmCapacity struct {
	pulumi.ResourceState
}

// NewWarmCapacity declares the pools' warm windows; with none, nothing.
func NewWarmCapacity(ctx *pulumi.Context, name string, args *WarmCapacityArgs, opts ...pulumi.ResourceOption) (*WarmCapacity, error) {
	var warm []config.GPUPool
	for _, p := range args.Pools {
		if p.Warm != nil {
			warm = append(warm, p)
		}
	}
	if len(warm) == 0 {
		return nil, nil
	}
	w := &WarmCapacity{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:k8s:WarmCapacity", name, w, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(w)
	ns, err := corev1.NewNamespace(ctx, name, &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(wellknown.WarmNamespace), Labels: pulumi.ToStringMap(WarmNamespaceLabels())},
	}, parent)
	if err != nil {
		return nil, err
	}
	pc := WarmPriorityClass()
	priority, err := newObject(ctx, name+"-priority", pc.TypeMeta, pc.ObjectMeta, pc, parent)
	if err != nil {
		return nil, fmt.Errorf("warm capacity's priority class: %w", err)
	}
	deny := DenyAll(wellknown.WarmNamespace)
	if _, err := newObject(ctx, name+"-"+deny.Name, deny.TypeMeta, deny.ObjectMeta, deny, parent, pulumi.DependsOn([]pulumi.Resource{ns})); err != nil {
		return nil, fmt.Errorf("warm capacity's network policy: %w", err)
	}
	for _, pool := range warm {
		deps := append([]pulumi.Resource{ns, priority}, args.NodePools[pool.Name]...)
		for i := range pool.Warm.Windows {
			cj, err := WarmCronJob(pool, i, args.ImageCache)
			if err != nil {
				return nil, err
			}
			if _, err := newObject(ctx, name+"-"+cj.Name, cj.TypeMeta, cj.ObjectMeta, cj, parent, pulumi.DependsOn(deps)); err != nil {
				return nil, fmt.Errorf("pool %s: warm window %d: %w", pool.Name, i, err)
			}
		}
	}
	return w, ctx.RegisterResourceOutputs(w, pulumi.Map{})
}
