package infra

import (
	"encoding/json"
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/cloudwatch"
	awseks "github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/sqs"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Where the Karpenter controller runs; the Pod Identity association and the Helm release
// must agree on both.
const (
	KarpenterNamespace      = "kube-system"
	KarpenterServiceAccount = "karpenter"
)

// KarpenterAWSArgs describes the AWS side of Karpenter for one cluster.
type KarpenterAWSArgs struct {
	ClusterName, Region, Partition, AccountID string
	// EKSClusterName is the cluster's name as an output of the EKS cluster, so the access
	// entry and Pod Identity association wait for (and are deleted before) the cluster.
	EKSClusterName pulumi.StringInput
	// PodIdentityAgent is the eks-pod-identity-agent add-on; the association is useless
	// without it.
	PodIdentityAgent pulumi.Resource
	// CreateSpotServiceLinkedRole creates the account-wide AWSServiceRoleForEC2Spot role.
	// Most accounts have it already, and creating it twice fails.
	CreateSpotServiceLinkedRole bool
	Tags                        map[string]string
}

// KarpenterAWS is Karpenter's IAM (controller and node roles), its interruption queue and
// the EventBridge rules that feed it.
type KarpenterAWS struct {
	pulumi.ResourceState

	QueueName         pulumi.StringOutput `pulumi:"queueName"`
	QueueArn          pulumi.StringOutput `pulumi:"queueArn"`
	NodeRoleName      pulumi.StringOutput `pulumi:"nodeRoleName"`
	NodeRoleArn       pulumi.StringOutput `pulumi:"nodeRoleArn"`
	ControllerRoleArn pulumi.StringOutput `pulumi:"controllerRoleArn"`
}

// Managed policies of the Karpenter node role (Karpenter's CloudFormation, v1.14).
var karpenterNodePolicies = []string{
	"AmazonEKS_CNI_Policy",
	"AmazonEKSWorkerNodePolicy",
	"AmazonEC2ContainerRegistryPullOnly",
	"AmazonSSMManagedInstanceCore",
}

// interruptionRules are the EventBridge rules that feed Karpenter's interruption queue
// (Karpenter's CloudFormation, v1.14).
var interruptionRules = []struct{ Name, Source, DetailType string }{
	{"scheduled-change", "aws.health", "AWS Health Event"},
	{"spot-interruption", "aws.ec2", "EC2 Spot Instance Interruption Warning"},
	{"rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"},
	{"instance-state-change", "aws.ec2", "EC2 Instance State-change Notification"},
	{"capacity-reservation-interruption", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"},
}

// NewKarpenterAWS creates Karpenter's AWS resources.
func NewKarpenterAWS(ctx *pulumi.Context, name string, args *KarpenterAWSArgs, opts ...pulumi.ResourceOption) (*KarpenterAWS, error) {
	k := &KarpenterAWS{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:KarpenterAWS", name, k, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(k)
	tags := tagMap(args.Tags, nil)
	cluster := args.ClusterName

	// Interruption queue: Karpenter's CloudFormation names it after the cluster.
	queue, err := sqs.NewQueue(ctx, name+"-interruption", &sqs.QueueArgs{
		Name:                    pulumi.String(cluster),
		MessageRetentionSeconds: pulumi.Int(300),
		SqsManagedSseEnabled:    pulumi.Bool(true),
		Tags:                    tags,
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("creating interruption queue: %w", err)
	}
	if _, err := sqs.NewQueuePolicy(ctx, name+"-interruption", &sqs.QueuePolicyArgs{
		QueueUrl: queue.Url,
		Policy: policyDocument(ctx, k, "EC2InterruptionPolicy",
			statement{
				Actions:    []string{"sqs:SendMessage"},
				Resources:  pulumi.StringArray{queue.Arn},
				Principals: []principal{{Type: "Service", Identifiers: []string{"events.amazonaws.com", "sqs.amazonaws.com"}}},
			},
			statement{
				Sid:        "DenyHTTP",
				Effect:     "Deny",
				Actions:    []string{"sqs:*"},
				Resources:  pulumi.StringArray{queue.Arn},
				Principals: []principal{{Type: "*", Identifiers: []string{"*"}}},
				Conditions: []condition{{"Bool", "aws:SecureTransport", []string{"false"}}},
			}),
	}, parent); err != nil {
		return nil, fmt.Errorf("creating interruption queue policy: %w", err)
	}
	for _, r := range interruptionRules {
		pattern, err := json.Marshal(map[string][]string{"source": {r.Source}, "detail-type": {r.DetailType}})
		if err != nil {
			return nil, err
		}
		rule, err := cloudwatch.NewEventRule(ctx, name+"-"+r.Name, &cloudwatch.EventRuleArgs{
			Description:  pulumi.Sprintf("Karpenter interruption handling for %s: %s", cluster, r.DetailType),
			EventPattern: pulumi.String(string(pattern)),
			Tags:         tags,
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("creating EventBridge rule %s: %w", r.Name, err)
		}
		if _, err := cloudwatch.NewEventTarget(ctx, name+"-"+r.Name, &cloudwatch.EventTargetArgs{
			Rule:     rule.Name,
			TargetId: pulumi.String("KarpenterInterruptionQueueTarget"),
			Arn:      queue.Arn,
		}, parent); err != nil {
			return nil, fmt.Errorf("creating EventBridge target %s: %w", r.Name, err)
		}
	}

	// Node role: Karpenter creates the instance profile for it (EC2NodeClass spec.role).
	nodeRole, _, err := newRole(ctx, k, name+"-node", roleSpec{
		Name:        "KarpenterNodeRole-" + cluster,
		Description: "Nodes Karpenter launches for " + cluster,
		Trust:       serviceTrust("ec2.amazonaws.com", "sts:AssumeRole"),
		Managed:     managedPolicyARNs(args.Partition, karpenterNodePolicies),
		Tags:        tags,
	})
	if err != nil {
		return nil, err
	}
	// EC2_LINUX: EKS maps the role to system:node:{{EC2PrivateDNSName}} in system:nodes.
	if _, err := awseks.NewAccessEntry(ctx, name+"-node", &awseks.AccessEntryArgs{
		ClusterName:  args.EKSClusterName,
		PrincipalArn: nodeRole.Arn,
		Type:         pulumi.String("EC2_LINUX"),
		Tags:         tags,
	}, parent); err != nil {
		return nil, fmt.Errorf("creating node access entry: %w", err)
	}

	// Controller role, assumed through EKS Pod Identity.
	controllerRole, _, err := newRole(ctx, k, name+"-controller", roleSpec{
		Name:        "KarpenterController-" + cluster,
		Description: "Karpenter controller of " + cluster,
		Trust:       serviceTrust("pods.eks.amazonaws.com", "sts:AssumeRole", "sts:TagSession"),
		Tags:        tags,
	})
	if err != nil {
		return nil, err
	}
	for _, p := range ControllerPolicies(ControllerPolicyArgs{
		Partition: args.Partition, Region: args.Region, AccountID: args.AccountID, ClusterName: cluster,
		NodeRoleArn: nodeRole.Arn, QueueArn: queue.Arn,
	}) {
		policy, err := iam.NewPolicy(ctx, name+"-"+p.Key, &iam.PolicyArgs{
			Name:        pulumi.Sprintf("%s-%s", p.Name, cluster),
			Description: pulumi.Sprintf("Karpenter controller of %s: %s", cluster, p.Key),
			Policy:      policyDocument(ctx, k, "", p.Statements...),
			Tags:        tags,
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("creating policy %s: %w", p.Name, err)
		}
		if _, err := iam.NewRolePolicyAttachment(ctx, name+"-"+p.Key, &iam.RolePolicyAttachmentArgs{
			Role: controllerRole.Name, PolicyArn: policy.Arn,
		}, parent); err != nil {
			return nil, fmt.Errorf("attaching policy %s: %w", p.Name, err)
		}
	}
	// The webhook injects credentials into pods at creation, so the association must exist
	// before the Karpenter pods start (the Helm releases depend on this component).
	if _, err := awseks.NewPodIdentityAssociation(ctx, name+"-controller", &awseks.PodIdentityAssociationArgs{
		ClusterName:    args.EKSClusterName,
		Namespace:      pulumi.String(KarpenterNamespace),
		ServiceAccount: pulumi.String(KarpenterServiceAccount),
		RoleArn:        controllerRole.Arn,
		Tags:           tags,
	}, parent, pulumi.DependsOn([]pulumi.Resource{args.PodIdentityAgent})); err != nil {
		return nil, fmt.Errorf("creating Pod Identity association: %w", err)
	}

	if args.CreateSpotServiceLinkedRole {
		// Account-wide and shared with anything else using spot: keep it on destroy.
		if _, err := iam.NewServiceLinkedRole(ctx, name+"-spot", &iam.ServiceLinkedRoleArgs{
			AwsServiceName: pulumi.String("spot.amazonaws.com"),
			Description:    pulumi.String("EC2 Spot, created by lux-gpu-ci for Karpenter"),
		}, parent, pulumi.RetainOnDelete(true)); err != nil {
			return nil, fmt.Errorf("creating spot service-linked role: %w", err)
		}
	}

	k.QueueName = queue.Name
	k.QueueArn = queue.Arn
	k.NodeRoleName = nodeRole.Name
	k.NodeRoleArn = nodeRole.Arn
	k.ControllerRoleArn = controllerRole.Arn
	if err := ctx.RegisterResourceOutputs(k, pulumi.Map{
		"queueName":         k.QueueName,
		"queueArn":          k.QueueArn,
		"nodeRoleName":      k.NodeRoleName,
		"nodeRoleArn":       k.NodeRoleArn,
		"controllerRoleArn": k.ControllerRoleArn,
	}); err != nil {
		return nil, err
	}
	return k, nil
}
