package infra

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ControllerPolicyArgs names what the Karpenter controller policies are scoped to.
type ControllerPolicyArgs struct {
	Partition, Region, AccountID, ClusterName string
	NodeRoleArn, QueueArn                     pulumi.StringInput
}

// ControllerPolicy is one of the controller's managed policies.
type ControllerPolicy struct {
	// Key is a short logical name; Name is the upstream policy name (suffixed with the
	// cluster name when created).
	Key, Name  string
	Statements []statement
}

// ControllerPolicies are the Karpenter v1.14 controller policies exactly as upstream's
// CloudFormation template (website/.../getting-started-with-karpenter/cloudformation.yaml)
// defines them: six policies, 32 actions. The zonal-shift policy is only exercised with
// settings.enableZonalShift, but it is read-only and keeps the set identical to upstream.
func ControllerPolicies(a ControllerPolicyArgs) []ControllerPolicy {
	p, r, acct, c := a.Partition, a.Region, a.AccountID, a.ClusterName
	arns := func(format ...string) pulumi.StringArray {
		out := pulumi.StringArray{}
		for _, f := range format {
			out = append(out, pulumi.String(fmt.Sprintf(f, p, r)))
		}
		return out
	}
	ec2Tagged := arns(
		"arn:%s:ec2:%s:*:fleet/*",
		"arn:%s:ec2:%s:*:instance/*",
		"arn:%s:ec2:%s:*:volume/*",
		"arn:%s:ec2:%s:*:network-interface/*",
		"arn:%s:ec2:%s:*:launch-template/*",
		"arn:%s:ec2:%s:*:spot-instances-request/*",
	)

	clusterOwned := "kubernetes.io/cluster/" + c
	instanceProfiles := pulumi.StringArray{pulumi.String(fmt.Sprintf("arn:%s:iam::%s:instance-profile/*", p, acct))}
	clusterArn := fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", p, r, acct, c)

	return []ControllerPolicy{
		{Key: "node-lifecycle", Name: "KarpenterControllerNodeLifecyclePolicy", Statements: []statement{
			{
				Sid:     "AllowScopedEC2InstanceAccessActions",
				Actions: []string{"ec2:RunInstances", "ec2:CreateFleet"},
				Resources: arns(
					"arn:%s:ec2:%s::image/*",
					"arn:%s:ec2:%s::snapshot/*",
					"arn:%s:ec2:%s:*:security-group/*",
					"arn:%s:ec2:%s:*:subnet/*",
					"arn:%s:ec2:%s:*:capacity-reservation/*",
					"arn:%s:ec2:%s:*:placement-group/*",
				),
			},
			{
				Sid:       "AllowScopedEC2LaunchTemplateAccessActions",
				Actions:   []string{"ec2:RunInstances", "ec2:CreateFleet"},
				Resources: arns("arn:%s:ec2:%s:*:launch-template/*"),
				Conditions: []condition{
					{"StringEquals", "aws:ResourceTag/" + clusterOwned, []string{"owned"}},
					{"StringLike", "aws:ResourceTag/karpenter.sh/nodepool", []string{"*"}},
				},
			},
			{
				Sid:       "AllowScopedEC2InstanceActionsWithTags",
				Actions:   []string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"},
				Resources: ec2Tagged,
				Conditions: []condition{
					{"StringEquals", "aws:RequestTag/" + clusterOwned, []string{"owned"}},
					{"StringEquals", "aws:RequestTag/eks:eks-cluster-name", []string{c}},
					{"StringLike", "aws:RequestTag/karpenter.sh/nodepool", []string{"*"}},
				},
			},
			{
				Sid:       "AllowScopedResourceCreationTagging",
				Actions:   []string{"ec2:CreateTags"},
				Resources: ec2Tagged,
				Conditions: []condition{
					{"StringEquals", "aws:RequestTag/" + clusterOwned, []string{"owned"}},
					{"StringEquals", "aws:RequestTag/eks:eks-cluster-name", []string{c}},
					{"StringEquals", "ec2:CreateAction", []string{"RunInstances", "CreateFleet", "CreateLaunchTemplate"}},
					{"StringLike", "aws:RequestTag/karpenter.sh/nodepool", []string{"*"}},
				},
			},
			{
				Sid:       "AllowScopedResourceTagging",
				Actions:   []string{"ec2:CreateTags"},
				Resources: arns("arn:%s:ec2:%s:*:instance/*"),
				Conditions: []condition{
					{"StringEquals", "aws:ResourceTag/" + clusterOwned, []string{"owned"}},
					{"StringLike", "aws:ResourceTag/karpenter.sh/nodepool", []string{"*"}},
					{"StringEqualsIfExists", "aws:RequestTag/eks:eks-cluster-name", []string{c}},
					{"ForAllValues:StringEquals", "aws:TagKeys", []string{"eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"}},
				},
			},
			{
				Sid:       "AllowScopedDeletion",
				Actions:   []string{"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"},
				Resources: arns("arn:%s:ec2:%s:*:instance/*", "arn:%s:ec2:%s:*:launch-template/*"),
				Conditions: []condition{
					{"StringEquals", "aws:ResourceTag/" + clusterOwned, []string{"owned"}},
					{"StringLike", "aws:ResourceTag/karpenter.sh/nodepool", []string{"*"}},
				},
			},
		}},
		{Key: "iam-integration", Name: "KarpenterControllerIAMIntegrationPolicy", Statements: []statement{
			{
				Sid:        "AllowPassingInstanceRole",
				Actions:    []string{"iam:PassRole"},
				Resources:  pulumi.StringArray{a.NodeRoleArn},
				Conditions: []condition{{"StringEquals", "iam:PassedToService", []string{"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}}},
			},
			{
				Sid:       "AllowScopedInstanceProfileCreationActions",
				Actions:   []string{"iam:CreateInstanceProfile"},
				Resources: instanceProfiles,
				Conditions: []condition{
					{"StringEquals", "aws:RequestTag/" + clusterOwned, []string{"owned"}},
					{"StringEquals", "aws:RequestTag/eks:eks-cluster-name", []string{c}},
					{"StringEquals", "aws:RequestTag/topology.kubernetes.io/region", []string{r}},
					{"StringLike", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass", []string{"*"}},
				},
			},
			{
				Sid:       "AllowScopedInstanceProfileTagActions",
				Actions:   []string{"iam:TagInstanceProfile"},
				Resources: instanceProfiles,
				Conditions: []condition{
					{"StringEquals", "aws:ResourceTag/" + clusterOwned, []string{"owned"}},
					{"StringEquals", "aws:ResourceTag/topology.kubernetes.io/region", []string{r}},
					{"StringEquals", "aws:RequestTag/" + clusterOwned, []string{"owned"}},
					{"StringEquals", "aws:RequestTag/eks:eks-cluster-name", []string{c}},
					{"StringEquals", "aws:RequestTag/topology.kubernetes.io/region", []string{r}},
					{"StringLike", "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass", []string{"*"}},
					{"StringLike", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass", []string{"*"}},
				},
			},
			{
				Sid:       "AllowScopedInstanceProfileActions",
				Actions:   []string{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"},
				Resources: instanceProfiles,
				Conditions: []condition{
					{"StringEquals", "aws:ResourceTag/" + clusterOwned, []string{"owned"}},
					{"StringEquals", "aws:ResourceTag/topology.kubernetes.io/region", []string{r}},
					{"StringLike", "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass", []string{"*"}},
				},
			},
		}},
		{Key: "eks-integration", Name: "KarpenterControllerEKSIntegrationPolicy", Statements: []statement{{
			Sid:       "AllowAPIServerEndpointDiscovery",
			Actions:   []string{"eks:DescribeCluster"},
			Resources: pulumi.StringArray{pulumi.String(clusterArn)},
		}}},
		{Key: "interruption", Name: "KarpenterControllerInterruptionPolicy", Statements: []statement{{
			Sid:       "AllowInterruptionQueueActions",
			Actions:   []string{"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"},
			Resources: pulumi.StringArray{a.QueueArn},
		}}},
		{Key: "zonal-shift", Name: "KarpenterControllerZonalShiftPolicy", Statements: []statement{{
			Sid:        "AllowZonalShiftStatusReadOnly",
			Actions:    []string{"arc-zonal-shift:GetManagedResource"},
			Resources:  pulumi.StringArray{pulumi.String("*")},
			Conditions: []condition{{"StringEquals", "arc-zonal-shift:ResourceIdentifier", []string{clusterArn}}},
		}}},
		{Key: "resource-discovery", Name: "KarpenterControllerResourceDiscoveryPolicy", Statements: []statement{
			{
				Sid: "AllowRegionalReadActions",
				Actions: []string{
					"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances",
					"ec2:DescribeInstanceStatus", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes",
					"ec2:DescribeLaunchTemplates", "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups",
					"ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
				},
				Resources:  pulumi.StringArray{pulumi.String("*")},
				Conditions: []condition{{"StringEquals", "aws:RequestedRegion", []string{r}}},
			},
			{
				Sid:       "AllowSSMReadActions",
				Actions:   []string{"ssm:GetParameter"},
				Resources: arns("arn:%s:ssm:%s::parameter/aws/service/*"),
			},
			{
				Sid:       "AllowPricingReadActions",
				Actions:   []string{"pricing:GetProducts"},
				Resources: pulumi.StringArray{pulumi.String("*")},
			},
			{
				Sid:       "AllowUnscopedInstanceProfileListAction",
				Actions:   []string{"iam:ListInstanceProfiles"},
				Resources: pulumi.StringArray{pulumi.String("*")},
			},
			{
				Sid:       "AllowInstanceProfileReadActions",
				Actions:   []string{"iam:GetInstanceProfile"},
				Resources: instanceProfiles,
			},
		}},
	}
}
