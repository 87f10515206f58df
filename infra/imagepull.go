package infra

import (
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// NodeImagePullArgs describes which of the account's ECR repositories nodes may pull from.
type NodeImagePullArgs struct {
	ClusterName, Region, Partition, AccountID string
	// Repositories are the repository name patterns nodes may pull from in the stack's
	// region: the image cache's prefixes ("<prefix>/*") and the imageRepositories key's.
	Repositories []string
	// NodeRoleNames are the roles of the nodes that pull images: the system node group's and
	// Karpenter's.
	NodeRoleNames []pulumi.StringInput
	Tags          map[string]string
}

// NodeImagePull is the limit on what the nodes' roles may pull from the stack's own account.
// AWS's AmazonEC2ContainerRegistryPullOnly, which nodes need for EKS's own add-on images (in
// AWS's accounts, whose repositories a caller's identity policy must allow too), allows pulls
// from every repository everywhere, so any private image of the account, a `container:` job's
// to choose. One Deny statement takes the account's repositories back, but for Repositories.
type NodeImagePull struct {
	pulumi.ResourceState
}

// ImagePullActions are what a pull through ECR asks of IAM: the image's manifest, its layers,
// and, on a pull-through cache's first pull of a tag, the import (AmazonEC2ContainerRegistryPullOnly's
// actions but GetAuthorizationToken, which names no repository; BatchCheckLayerAvailability,
// which pushes use, is denied too).
var ImagePullActions = []string{"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchImportUpstreamImage", "ecr:BatchCheckLayerAvailability"}

// ImagePullScope is the Deny statement: in the account (aws:ResourceAccount, which IAM puts
// in the request context of ECR's actions), nothing but repositories; with none, the whole
// account.
func ImagePullScope(partition, region, account string, repositories []string) statement {
	deny := statement{Sid: "OnlyTheStacksRepositoriesOfThisAccount", Effect: "Deny", Actions: ImagePullActions}
	if len(repositories) == 0 {
		deny.Resources = pulumi.StringArray{pulumi.Sprintf("arn:%s:ecr:*:%s:repository/*", partition, account)}
		return deny
	}
	for _, r := range repositories {
		deny.NotResources = append(deny.NotResources, pulumi.Sprintf("arn:%s:ecr:%s:%s:repository/%s", partition, region, account, r))
	}
	deny.Conditions = []condition{{"StringEquals", "aws:ResourceAccount", []string{account}}}
	return deny
}

// NewNodeImagePull creates the policy and attaches it to each node role.
func NewNodeImagePull(ctx *pulumi.Context, name string, args *NodeImagePullArgs, opts ...pulumi.ResourceOption) (*NodeImagePull, error) {
	c := &NodeImagePull{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:NodeImagePull", name, c, opts...); err != nil {
		return nil, err
	}
	policy, err := iam.NewPolicy(ctx, name, &iam.PolicyArgs{
		Name:        pulumi.String(args.ClusterName + "-node-image-pull"),
		Description: pulumi.String("What the nodes of " + args.ClusterName + " may pull from the account's own ECR repositories"),
		Policy:      policyDocument(ctx, c, "", ImagePullScope(args.Partition, args.Region, args.AccountID, args.Repositories)),
		Tags:        ownedTags(args.Tags, args.ClusterName),
	}, pulumi.Parent(c))
	if err != nil {
		return nil, fmt.Errorf("creating the node image pull policy: %w", err)
	}
	for i, role := range args.NodeRoleNames {
		if _, err := iam.NewRolePolicyAttachment(ctx, fmt.Sprintf("%s-%d", name, i), &iam.RolePolicyAttachmentArgs{
			Role: role, PolicyArn: policy.Arn,
		}, pulumi.Parent(c)); err != nil {
			return nil, fmt.Errorf("attaching the node image pull policy: %w", err)
		}
	}
	return c, ctx.RegisterResourceOutputs(c, pulumi.Map{})
}
