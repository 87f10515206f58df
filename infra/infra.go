// Package infra is the AWS layer of lux-gpu-ci: the VPC, the EKS cluster with its system
// node group and add-ons, Karpenter's IAM and interruption queue, and the optional budget.
// Each concern is one ComponentResource; New wires them in dependency order.
package infra

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/lifelines"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// Outputs is what the Kubernetes layer and the stack exports need from the AWS layer.
type Outputs struct {
	Region      string
	ClusterName string
	// NodesPublic is true in the lean profile: nodes need a public IP for egress.
	NodesPublic bool
	// Zones are the availability zones the network spans (chooseZones logs why).
	Zones []Zone

	VpcID            pulumi.StringOutput
	PrivateSubnetIDs pulumi.StringArrayOutput
	PublicSubnetIDs  pulumi.StringArrayOutput
	Endpoint         pulumi.StringOutput
	// Kubeconfig is a secret.
	Kubeconfig pulumi.StringOutput

	InterruptionQueue pulumi.StringOutput
	NodeRoleName      pulumi.StringOutput
	ControllerRoleArn pulumi.StringOutput
	// ImageCache maps each cached upstream registry's host to its ECR repository prefix.
	ImageCache map[string]string

	// Lifelines are what everything in the cluster needs while it runs and while its
	// finalizers run on destroy (lifelines.Cluster): the network (routes, NAT and internet
	// gateway give the nodes egress to EC2, IAM and GitHub), the cluster component (the
	// add-ons, CoreDNS among them, and the system node group) and the image cache nodes pull
	// through. The Kubernetes provider depends on them, so every object in the cluster is
	// created after and deleted before any of them — for a full destroy, a targeted one or a
	// replacement alike.
	Lifelines lifelines.Set
	// KarpenterLifelines are Karpenter's AWS side (lifelines.Karpenter): its IAM, Pod Identity
	// association, node access entry and interruption queue. Karpenter's releases depend on
	// them, so the controller starts with its credentials and drains GPU nodes on destroy
	// with them.
	KarpenterLifelines lifelines.Set
	// CompilerCacheBucket is the stack's bucket ("" when it has none: no compiler cache and no
	// stored gpuci), and CompilerCacheLifelines its settings and the servers' roles: the
	// servers depend on them. RetrierLifelines are the retrier's role and association.
	CompilerCacheBucket    pulumi.StringOutput
	CompilerCacheLifelines []pulumi.Resource
	RetrierLifelines       []pulumi.Resource
}

// New builds the AWS layer from validated configuration; gpuci is the build the stack's pods
// run (nil where they run a release).
func New(ctx *pulumi.Context, cfg *config.Config, gpuci *GpuciBinary) (*Outputs, error) {
	// Look-ups first: if the account cannot hold the stack, fail before creating anything.
	zones, err := chooseZones(ctx, cfg.ClusterName, cfg.Network.AZCount, cfg.Pools())
	if err != nil {
		return nil, err
	}
	partition, err := aws.GetPartition(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("looking up the AWS partition: %w", err)
	}
	caller, err := aws.GetCallerIdentity(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("looking up the AWS account (are credentials set?): %w", err)
	}
	// The nodes' roles may pull from the account's own ECR only what imageRepositories and the
	// cache cover (NodeImagePull): an image of the stack's own set elsewhere would fail at job
	// time, so it fails here, where the account is known.
	if denied := cfg.ImageCache.DeniedOwnImages(caller.AccountId, cfg.Region, cfg.Pools()); len(denied) > 0 {
		return nil, fmt.Errorf("%s: the nodes may not pull %s from account %s's own ECR (the stack denies them every repository of the account but the cache's and imageRepositories'); fix: add the repositories (or a prefix ending in *) to imageRepositories in Pulumi.<stack>.yaml, in region %s",
			config.KeyImageRepositories, strings.Join(denied, ", "), caller.AccountId, cfg.Region)
	}
	live, err := clusterExists(ctx, cfg.ClusterName)
	if err != nil {
		return nil, err
	}
	if err := checkAdmins(ctx, cfg.ClusterName, live, adminsOf(cfg), caller.Arn); err != nil {
		return nil, err
	}
	if err := keepSystemNodes(ctx, cfg.ClusterName, live, cfg.SystemNodes, versions.SystemAMIType, cfg.Network.NatMode == config.NatSingle); err != nil {
		return nil, err
	}
	var existingSpotRole string
	if cfg.CreateSpotServiceLinkedRole {
		if existingSpotRole, err = spotRoleArn(ctx); err != nil {
			return nil, err
		}
	}

	nat := cfg.Network.NatMode == config.NatSingle
	network, err := NewNetwork(ctx, "network", &NetworkArgs{
		ClusterName: cfg.ClusterName,
		Region:      cfg.Region,
		CIDR:        cfg.Network.CIDR,
		Zones:       zones,
		NAT:         nat,
		Tags:        cfg.Tags,
	})
	if err != nil {
		return nil, err
	}
	cluster, err := NewCluster(ctx, "cluster", &ClusterArgs{
		Name:                   cfg.ClusterName,
		Version:                cfg.KubernetesVersion,
		Region:                 cfg.Region,
		Partition:              partition.Partition,
		VpcID:                  network.VpcID,
		PublicSubnetIDs:        network.PublicSubnetIDs,
		PrivateSubnetIDs:       privateSubnets(network, nat),
		NodeSubnetIDs:          network.NodeSubnetIDs,
		PublicAccessCIDRs:      cfg.PublicAccessCIDRs,
		AdminPrincipals:        cfg.AdminPrincipals,
		DeployRoleArn:          cfg.DeployRoleArn,
		PreviewRoleArn:         cfg.PreviewRoleArn,
		SystemNodeInstanceType: cfg.SystemNodes.InstanceType,
		SystemNodeCount:        cfg.SystemNodes.Count,
		AddonVersions:          cfg.AddonVersions,
		PermissionsBoundary:    cfg.PermissionsBoundaryArn(),
		NetworkPolicyMode:      cfg.Network.NetworkPolicyMode,
		Tags:                   cfg.Tags,
		Auth:                   cfg.AWS,
	})
	if err != nil {
		return nil, err
	}
	karpenter, err := NewKarpenterAWS(ctx, "karpenter", &KarpenterAWSArgs{
		ClusterName:                 cfg.ClusterName,
		Region:                      cfg.Region,
		Partition:                   partition.Partition,
		AccountID:                   caller.AccountId,
		EKSClusterName:              cluster.EKS.EksCluster.Name(),
		PodIdentityAgent:            cluster.PodIdentityAgent,
		CreateSpotServiceLinkedRole: cfg.CreateSpotServiceLinkedRole,
		ExistingSpotRoleArn:         existingSpotRole,
		PermissionsBoundary:         cfg.PermissionsBoundaryArn(),
		Tags:                        cfg.Tags,
	})
	if err != nil {
		return nil, err
	}
	clusterLifelines := lifelines.Of(lifelines.Cluster, network.Resources...)
	clusterLifelines.Add(cluster.Resources...)
	var imageCache map[string]string
	if len(cfg.ImageCache.Upstreams) > 0 {
		ic, err := NewImageCache(ctx, "image-cache", &ImageCacheArgs{
			ClusterName:   cfg.ClusterName,
			Region:        cfg.Region,
			Partition:     partition.Partition,
			AccountID:     caller.AccountId,
			DNSSuffix:     partition.DnsSuffix,
			Upstreams:     cfg.ImageCache.Upstreams,
			NodeRoleNames: []pulumi.StringInput{cluster.SystemNodeRoleName, karpenter.NodeRoleName},
			Tags:          cfg.Tags,
		})
		if err != nil {
			return nil, err
		}
		imageCache = ic.Repositories
		clusterLifelines.Add(ic.Resources...)
	}
	// Every stack, cached or not: the nodes pull nothing else from the account.
	pullable := slices.Clone(cfg.ImageCache.Repositories)
	for _, u := range cfg.ImageCache.Upstreams {
		pullable = append(pullable, u.RepositoryPrefix+"/*")
	}
	if _, err := NewNodeImagePull(ctx, "node-image-pull", &NodeImagePullArgs{
		ClusterName:   cfg.ClusterName,
		Region:        cfg.Region,
		Partition:     partition.Partition,
		AccountID:     caller.AccountId,
		Repositories:  pullable,
		NodeRoleNames: []pulumi.StringInput{cluster.SystemNodeRoleName, karpenter.NodeRoleName},
		Tags:          cfg.Tags,
	}); err != nil {
		return nil, err
	}
	bucket, cacheLifelines, retrierLifelines := pulumi.String("").ToStringOutput(), []pulumi.Resource(nil), []pulumi.Resource(nil)
	if services := cfg.CompilerCaches(); len(services) > 0 || (gpuci != nil && cfg.Retrier.Enabled()) {
		cc, err := NewCompilerCache(ctx, "compiler-cache", &CompilerCacheArgs{
			ClusterName:      cfg.ClusterName,
			Region:           cfg.Region,
			Partition:        partition.Partition,
			AccountID:        caller.AccountId,
			EKSClusterName:   cluster.EKS.EksCluster.Name(),
			PodIdentityAgent: cluster.PodIdentityAgent,
			Services:         services,
			ExpiryDays:       cfg.CompilerCacheExpiryDays,
			Boundary:         cfg.PermissionsBoundaryArn(),
			Tags:             cfg.Tags,
			Gpuci:            gpuci,
			Retrier:          cfg.Retrier.Enabled(),
		})
		if err != nil {
			return nil, err
		}
		bucket, cacheLifelines, retrierLifelines = cc.Bucket, cc.Resources, cc.RetrierResources
	}
	if b := cfg.Budget; b != nil {
		if _, err := NewBudget(ctx, "budget", &BudgetArgs{
			ClusterName: cfg.ClusterName, MonthlyUSD: b.MonthlyUSD, Emails: b.Emails, Tags: cfg.Tags,
		}); err != nil {
			return nil, err
		}
	}

	return &Outputs{
		Region:             cfg.Region,
		ClusterName:        cfg.ClusterName,
		NodesPublic:        !nat,
		Zones:              zones,
		VpcID:              network.VpcID,
		PrivateSubnetIDs:   network.PrivateSubnetIDs,
		PublicSubnetIDs:    network.PublicSubnetIDs,
		Endpoint:           cluster.Endpoint,
		Kubeconfig:         cluster.Kubeconfig,
		InterruptionQueue:  karpenter.InterruptionQueue,
		NodeRoleName:       karpenter.NodeRoleName,
		ControllerRoleArn:  karpenter.ControllerRoleArn,
		ImageCache:         imageCache,
		Lifelines:          clusterLifelines,
		KarpenterLifelines: lifelines.Of(lifelines.Karpenter, karpenter.Resources...),

		CompilerCacheBucket:    bucket,
		CompilerCacheLifelines: cacheLifelines,
		RetrierLifelines:       retrierLifelines,
	}, nil
}

// privateSubnets is nil in the lean profile: pulumi-eks must see "public subnets only",
// not an empty private list.
func privateSubnets(n *Network, nat bool) pulumi.StringArrayInput {
	if !nat {
		return nil
	}
	return n.PrivateSubnetIDs
}

// created records the resources a component creates, in order. Dependents that must
// outlive nothing of the component depend on this list rather than on the component: the
// SDK expands a dependency on a component into the children registered so far, and a child
// is registered in a goroutine, so that expansion can race the component's last children.
type created []pulumi.Resource

func (c *created) add(rs ...pulumi.Resource) { *c = append(*c, rs...) }

// ownedTags are the stack's common tags and its ClusterTag: an IAM role or policy, a queue or
// a rule the deploy role of this stack (and no other's) may change.
func ownedTags(common map[string]string, cluster string) pulumi.StringMap {
	return tagMap(common, map[string]string{ClusterTag: cluster})
}

// tagMap merges the stack's common tags with resource-specific ones (which win).
func tagMap(common, extra map[string]string) pulumi.StringMap {
	m := maps.Clone(common)
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, extra)
	return pulumi.ToStringMap(m)
}
