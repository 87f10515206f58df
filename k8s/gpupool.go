package k8s

import (
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/apiobject"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s/nodepools"
)

// PoolNodesArgs describes one GPU pool's Karpenter objects.
type PoolNodesArgs struct {
	Pool         config.GPUPool
	ClusterName  string
	NodeRoleName pulumi.StringInput
	NodesPublic  bool
	Tags         map[string]string
	// Karpenter is the controller release: the pool is deleted while it still runs, so
	// Karpenter drains and terminates the pool's instances.
	Karpenter pulumi.Resource
	// CoolDown adds the pool's cool-down NodePool (CoolDownNodePoolFor).
	CoolDown bool
}

// PoolNodes is a pool's EC2NodeClass and NodePool. It registers as lux-gpu-ci:k8s:GPUPool,
// the name its URNs carry.
type PoolNodes struct {
	pulumi.ResourceState

	NodePool     *apiextensions.CustomResource
	EC2NodeClass *apiextensions.CustomResource
	// CoolDown is the pool's cool-down NodePool, or nil.
	CoolDown *apiextensions.CustomResource
}

// NodePools are the pool's NodePool and, where it has one, its cool-down NodePool: what its
// runners and warm placeholders run on, so they go first on destroy.
func (p *PoolNodes) NodePools() []pulumi.Resource {
	if p.CoolDown != nil {
		return []pulumi.Resource{p.NodePool, p.CoolDown}
	}
	return []pulumi.Resource{p.NodePool}
}

// deleteTimeout covers draining a GPU node and terminating its instance.
const deleteTimeout = "30m"

// NewPoolNodes declares the pool's EC2NodeClass and NodePool.
func NewPoolNodes(ctx *pulumi.Context, name string, args *PoolNodesArgs, opts ...pulumi.ResourceOption) (*PoolNodes, error) {
	p := &PoolNodes{}
	if err := ctx.RegisterComponentResource(wellknown.GPUPoolComponent, name, p, opts...); err != nil {
		return nil, err
	}
	// Named cluster-scoped objects: a replacement must delete the old one first. Never
	// DeletedWith/RetainOnDelete: deleting these is what makes Karpenter clean up EC2.
	crOpts := func(deps ...pulumi.Resource) []pulumi.ResourceOption {
		return []pulumi.ResourceOption{
			pulumi.Parent(p),
			pulumi.DeleteBeforeReplace(true),
			pulumi.Timeouts(&pulumi.CustomTimeouts{Delete: deleteTimeout}),
			pulumi.DependsOn(deps),
		}
	}

	nodeClassSpec := args.NodeRoleName.ToStringOutput().ApplyT(func(role string) (map[string]any, error) {
		u, err := nodepools.EC2NodeClassObject(args.Pool, args.ClusterName, role, args.NodesPublic, args.Tags)
		if err != nil {
			return nil, err
		}
		return u["spec"].(map[string]any), nil
	})
	nodeClass, err := apiextensions.NewCustomResource(ctx, name+"-nodeclass", &apiextensions.CustomResourceArgs{
		ApiVersion:  pulumi.String("karpenter.k8s.aws/v1"),
		Kind:        pulumi.String("EC2NodeClass"),
		Metadata:    &metav1.ObjectMetaArgs{Name: pulumi.String(args.Pool.Name)},
		OtherFields: kubernetes.UntypedArgs{"spec": nodeClassSpec},
	}, crOpts(args.Karpenter)...)
	if err != nil {
		return nil, fmt.Errorf("pool %s: EC2NodeClass: %w", args.Pool.Name, err)
	}

	u, err := nodepools.NodePoolObject(args.Pool)
	if err != nil {
		return nil, err
	}
	nodePool, err := apiextensions.NewCustomResource(ctx, name+"-nodepool", &apiextensions.CustomResourceArgs{
		ApiVersion:  pulumi.String("karpenter.sh/v1"),
		Kind:        pulumi.String("NodePool"),
		Metadata:    &metav1.ObjectMetaArgs{Name: pulumi.String(args.Pool.Name)},
		OtherFields: kubernetes.UntypedArgs{"spec": u["spec"]},
	}, crOpts(nodeClass, args.Karpenter)...)
	if err != nil {
		return nil, fmt.Errorf("pool %s: NodePool: %w", args.Pool.Name, err)
	}

	p.NodePool, p.EC2NodeClass = nodePool, nodeClass
	if args.CoolDown {
		cool := nodepools.CoolDownNodePoolFor(args.Pool)
		u, err := apiobject.ToMap(cool)
		if err != nil {
			return nil, err
		}
		// The retrier owns the limit (and its until annotation) for the NodePool's life: the
		// program declares 0 once and never sets it back, so neither an up nor a refresh
		// ends a cool-down early.
		p.CoolDown, err = apiextensions.NewCustomResource(ctx, name+"-cool-down", &apiextensions.CustomResourceArgs{
			ApiVersion: pulumi.String("karpenter.sh/v1"),
			Kind:       pulumi.String("NodePool"),
			Metadata: &metav1.ObjectMetaArgs{
				Name:        pulumi.String(cool.Name),
				Annotations: pulumi.ToStringMap(cool.Annotations),
			},
			OtherFields: kubernetes.UntypedArgs{"spec": u["spec"]},
		}, append(crOpts(nodeClass, args.Karpenter), pulumi.IgnoreChanges([]string{"spec.limits"}))...)
		if err != nil {
			return nil, fmt.Errorf("pool %s: cool-down NodePool: %w", args.Pool.Name, err)
		}
	}
	if err := ctx.RegisterResourceOutputs(p, pulumi.Map{}); err != nil {
		return nil, err
	}
	return p, nil
}
