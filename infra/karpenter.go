package infra

import (
	"encoding/json"
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/cloudwatch"
	awseks "github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/sqs"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// KarpenterAWSArgs describes the AWS side of Karpenter for one cluster.
type KarpenterAWSArgs struct {
	// PermissionsBoundary is the stack's (config.Config.PermissionsBoundaryArn): the node and
	// controller roles carry it; "" for none.
	PermissionsBoundary                       string
	ClusterName, Region, Partition, AccountID string
	// EKSClusterName is the cluster's name as an output of the EKS cluster, so the access
	// entry and Pod Identity association wait for (and are deleted before) the cluster.
	EKSClusterName pulumi.StringInput
	// PodIdentityAgent is the eks-pod-identity-agent add-on; the association is useless
	// without it.
	PodIdentityAgent pulumi.Resource
	// CreateSpotServiceLinkedRole makes sure the account has the AWSServiceRoleForEC2Spot role
	// Karpenter needs to launch spot capacity; ExistingSpotRoleArn is that role when the
	// account already has it (creating it twice fails, so it is adopted instead).
	CreateSpotServiceLinkedRole bool
	ExistingSpotRoleArn         string
	Tags                        map[string]string
}

// KarpenterAWS is Karpenter's IAM (controller and node roles), its interruption queue and
// the EventBridge rules that feed it.
type KarpenterAWS struct {
	pulumi.ResourceState

	InterruptionQueue pulumi.StringOutput `pulumi:"queueName"`
	QueueArn          pulumi.StringOutput `pulumi:"queueArn"`
	NodeRoleName      pulumi.StringOutput `pulumi:"nodeRoleName"`
	NodeRoleArn       pulumi.StringOutput `pulumi:"nodeRoleArn"`
	ControllerRoleArn pulumi.StringOutput `pulumi:"controllerRoleArn"`

	// Resources are everything Karpenter's AWS side is made of: queue and rules, roles,
	// policies and attachments, access entry, Pod Identity association.
	Resources []pulumi.Resource
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

// NewKarpenterAWS creates Karpenter's AWS resources: the interruption queue, the node role,
// the controller role.
func NewKarpenterAWS(ctx *pulumi.Context, name string, args *KarpenterAWSArgs, opts ...pulumi.ResourceOption) (*KarpenterAWS, error) {
	k := &KarpenterAWS{}
	if err := ctx.RegisterComponentResource(wellknown.KarpenterAWSComponent, name, k, opts...); err != nil {
		return nil, err
	}
	// Everything it makes is the stack's own: its roles, policies, queue and rules carry the
	// ClusterTag the deploy role acts on.
	b := &karpenterBuilder{ctx: ctx, name: name, args: args, component: k, tags: ownedTags(args.Tags, args.ClusterName)}

	queue, err := b.interruptionQueue()
	if err != nil {
		return nil, err
	}
	nodeRole, err := b.nodeRole()
	if err != nil {
		return nil, err
	}
	controllerRole, err := b.controllerRole(nodeRole, queue)
	if err != nil {
		return nil, err
	}
	if args.CreateSpotServiceLinkedRole {
		if err := b.spotServiceLinkedRole(); err != nil {
			return nil, err
		}
	}

	k.InterruptionQueue = queue.Name
	k.QueueArn = queue.Arn
	k.NodeRoleName = nodeRole.Name
	k.NodeRoleArn = nodeRole.Arn
	k.ControllerRoleArn = controllerRole.Arn
	k.Resources = b.created
	if err := ctx.RegisterResourceOutputs(k, pulumi.Map{
		"queueName":         k.InterruptionQueue,
		"queueArn":          k.QueueArn,
		"nodeRoleName":      k.NodeRoleName,
		"nodeRoleArn":       k.NodeRoleArn,
		"controllerRoleArn": k.ControllerRoleArn,
	}); err != nil {
		return nil, err
	}
	return k, nil
}

// karpenterBuilder creates Karpenter's AWS resources, each a child of the component.
type karpenterBuilder struct {
	ctx       *pulumi.Context
	name      string
	args      *KarpenterAWSArgs
	component *KarpenterAWS
	tags      pulumi.StringMap
	created   created
}

func (b *karpenterBuilder) parent() pulumi.ResourceOption { return pulumi.Parent(b.component) }

// interruptionQueue creates the SQS queue Karpenter reads spot interruptions, rebalance
// recommendations, health and state-change events from, its policy, and the EventBridge
// rules that feed it.
func (b *karpenterBuilder) interruptionQueue() (*sqs.Queue, error) {
	// A name prefix, not a fixed name: SQS refuses a deleted queue's name for 60 s, which
	// would fail a destroy followed at once by an up. Karpenter takes the name as an output.
	queue, err := sqs.NewQueue(b.ctx, b.name+"-interruption", &sqs.QueueArgs{
		NamePrefix:              pulumi.String(b.args.ClusterName + "-"),
		MessageRetentionSeconds: pulumi.Int(300),
		SqsManagedSseEnabled:    pulumi.Bool(true),
		Tags:                    b.tags,
	}, b.parent())
	if err != nil {
		return nil, fmt.Errorf("creating interruption queue: %w", err)
	}
	b.created.add(queue)
	var ruleArns pulumi.StringArray
	var targets []func(pulumi.Resource) error
	for _, r := range interruptionRules {
		pattern, err := json.Marshal(map[string][]string{"source": {r.Source}, "detail-type": {r.DetailType}})
		if err != nil {
			return nil, err
		}
		rule, err := cloudwatch.NewEventRule(b.ctx, b.name+"-"+r.Name, &cloudwatch.EventRuleArgs{
			Description:  pulumi.Sprintf("Karpenter interruption handling for %s: %s", b.args.ClusterName, r.DetailType),
			EventPattern: pulumi.String(string(pattern)),
			Tags:         b.tags,
		}, b.parent())
		if err != nil {
			return nil, fmt.Errorf("creating EventBridge rule %s: %w", r.Name, err)
		}
		b.created.add(rule)
		ruleArns = append(ruleArns, rule.Arn)
		targets = append(targets, func(policy pulumi.Resource) error {
			target, err := cloudwatch.NewEventTarget(b.ctx, b.name+"-"+r.Name, &cloudwatch.EventTargetArgs{
				Rule:     rule.Name,
				TargetId: pulumi.String("KarpenterInterruptionQueueTarget"),
				Arn:      queue.Arn,
			}, b.parent(), pulumi.DependsOn([]pulumi.Resource{policy}))
			if err != nil {
				return fmt.Errorf("creating EventBridge target %s: %w", r.Name, err)
			}
			b.created.add(target)
			return nil
		})
	}
	// Karpenter's CloudFormation (v1.14.1 cloudformation.yaml, KarpenterInterruptionQueuePolicy)
	// lets events.amazonaws.com and sqs.amazonaws.com send, from anywhere. EventBridge may
	// send here only for this stack's rules (aws:SourceArn, as EventBridge's guide for an SQS
	// target recommends): nobody's rule in another account or stack can feed Karpenter
	// interruptions that drain its nodes. sqs.amazonaws.com's grant is left out: nothing of
	// the stack sends as SQS, and unconditioned it would admit any account's.
	policy, err := sqs.NewQueuePolicy(b.ctx, b.name+"-interruption", &sqs.QueuePolicyArgs{
		QueueUrl: queue.Url,
		Policy: policyDocument(b.ctx, b.component, "EC2InterruptionPolicy",
			statement{
				Sid:              "EventBridgeRulesOfThisStack",
				Actions:          []string{"sqs:SendMessage"},
				Resources:        pulumi.StringArray{queue.Arn},
				Principals:       []principal{{Type: "Service", Identifiers: []string{"events.amazonaws.com"}}},
				OutputConditions: []outputCondition{{"ArnEquals", "aws:SourceArn", ruleArns}},
			},
			statement{
				Sid:        "DenyHTTP",
				Effect:     "Deny",
				Actions:    []string{"sqs:*"},
				Resources:  pulumi.StringArray{queue.Arn},
				Principals: []principal{{Type: "*", Identifiers: []string{"*"}}},
				Conditions: []condition{{"Bool", "aws:SecureTransport", []string{"false"}}},
			}),
	}, b.parent())
	if err != nil {
		return nil, fmt.Errorf("creating interruption queue policy: %w", err)
	}
	b.created.add(policy)
	for _, target := range targets {
		if err := target(policy); err != nil {
			return nil, err
		}
	}
	return queue, nil
}

// nodeRole creates the role of the nodes Karpenter launches (Karpenter creates their
// instance profile from the EC2NodeClass's spec.role) and its EC2_LINUX access entry: EKS
// maps the role to system:node:{{EC2PrivateDNSName}} in system:nodes.
func (b *karpenterBuilder) nodeRole() (*iam.Role, error) {
	role, attachments, err := newRole(b.ctx, b.component, b.name+"-node", roleSpec{
		Name:        NodeRoleName(b.args.ClusterName),
		Description: "Nodes Karpenter launches for " + b.args.ClusterName,
		Trust:       serviceTrust("ec2.amazonaws.com", []string{"sts:AssumeRole"}),
		Managed:     managedPolicyARNs(b.args.Partition, karpenterNodePolicies),
		Tags:        b.tags,
		Boundary:    b.args.PermissionsBoundary,
	})
	if err != nil {
		return nil, err
	}
	entry, err := awseks.NewAccessEntry(b.ctx, b.name+"-node", &awseks.AccessEntryArgs{
		ClusterName:  b.args.EKSClusterName,
		PrincipalArn: role.Arn,
		Type:         pulumi.String("EC2_LINUX"),
		Tags:         b.tags,
	}, b.parent())
	if err != nil {
		return nil, fmt.Errorf("creating node access entry: %w", err)
	}
	b.created.add(role)
	b.created.add(attachments...)
	b.created.add(entry)
	return role, nil
}

// controllerRole creates the controller's role, with upstream's six policies, and its EKS
// Pod Identity association.
func (b *karpenterBuilder) controllerRole(nodeRole *iam.Role, queue *sqs.Queue) (*iam.Role, error) {
	cluster := b.args.ClusterName
	role, _, err := newRole(b.ctx, b.component, b.name+"-controller", roleSpec{
		Name:        cluster + "-karpenter",
		Description: "Karpenter controller of " + cluster,
		Trust:       podIdentityTrust(b.args.Partition, b.args.Region, b.args.AccountID, cluster, wellknown.KarpenterNamespace, wellknown.KarpenterServiceAccount),
		Tags:        b.tags,
		Boundary:    b.args.PermissionsBoundary,
	})
	if err != nil {
		return nil, err
	}
	b.created.add(role)
	for _, p := range ControllerPolicies(ControllerPolicyArgs{
		Partition: b.args.Partition, Region: b.args.Region, AccountID: b.args.AccountID, ClusterName: cluster,
		NodeRoleArn: nodeRole.Arn, QueueArn: queue.Arn,
	}) {
		policy, err := iam.NewPolicy(b.ctx, b.name+"-"+p.Key, &iam.PolicyArgs{
			Name:        pulumi.Sprintf("%s-%s", p.Name, cluster),
			Description: pulumi.Sprintf("Karpenter controller of %s: %s", cluster, p.Key),
			Policy:      policyDocument(b.ctx, b.component, "", p.Statements...),
			Tags:        b.tags,
		}, b.parent())
		if err != nil {
			return nil, fmt.Errorf("creating policy %s: %w", p.Name, err)
		}
		attachment, err := iam.NewRolePolicyAttachment(b.ctx, b.name+"-"+p.Key, &iam.RolePolicyAttachmentArgs{
			Role: role.Name, PolicyArn: policy.Arn,
		}, b.parent())
		if err != nil {
			return nil, fmt.Errorf("attaching policy %s: %w", p.Name, err)
		}
		b.created.add(policy, attachment)
	}
	// The webhook injects credentials into pods at creation, so the association must exist
	// before the Karpenter pods start (the Helm releases depend on this component).
	assoc, err := awseks.NewPodIdentityAssociation(b.ctx, b.name+"-controller", &awseks.PodIdentityAssociationArgs{
		ClusterName:    b.args.EKSClusterName,
		Namespace:      pulumi.String(wellknown.KarpenterNamespace),
		ServiceAccount: pulumi.String(wellknown.KarpenterServiceAccount),
		RoleArn:        role.Arn,
		Tags:           b.tags,
	}, b.parent(), pulumi.DependsOn([]pulumi.Resource{b.args.PodIdentityAgent}))
	if err != nil {
		return nil, fmt.Errorf("creating Pod Identity association: %w", err)
	}
	b.created.add(assoc)
	return role, nil
}

// PodIdentitySource limits a Pod Identity trust to one ServiceAccount in this cluster: EKS
// Pod Identity tags the session it asks for with the cluster's ARN and the pod's namespace
// and ServiceAccount ("Define which pods can assume a role": session tags eks-cluster-arn,
// kubernetes-namespace, kubernetes-service-account), so another cluster's association with
// the role, or another account's, or another ServiceAccount's, gets nothing.
func PodIdentitySource(partition, region, account, cluster, namespace, serviceAccount string) []condition {
	return []condition{
		{"StringEquals", "aws:RequestTag/eks-cluster-arn", []string{fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", partition, region, account, cluster)}},
		{"StringEquals", "aws:RequestTag/kubernetes-namespace", []string{namespace}},
		{"StringEquals", "aws:RequestTag/kubernetes-service-account", []string{serviceAccount}},
	}
}

// podIdentityTrust is the trust policy of a role EKS Pod Identity hands to serviceAccount.
func podIdentityTrust(partition, region, account, cluster, namespace, serviceAccount string) []statement {
	return serviceTrust("pods.eks.amazonaws.com", []string{"sts:AssumeRole", "sts:TagSession"},
		PodIdentitySource(partition, region, account, cluster, namespace, serviceAccount)...)
}

// spotServiceLinkedRole makes sure the account has the EC2 Spot service-linked role: it is
// created if absent and adopted (imported) if the account already has it, since creating it
// twice fails. It is shared with anything else using spot in the account, so it is kept on
// destroy; an import is ignored once the role is in the stack's state.
func (b *karpenterBuilder) spotServiceLinkedRole() error {
	opts := []pulumi.ResourceOption{b.parent(), pulumi.RetainOnDelete(true)}
	if arn := b.args.ExistingSpotRoleArn; arn != "" {
		// An import fails when the declared inputs differ from the role's; whatever
		// description or tags the account gave it are its own.
		opts = append(opts, pulumi.Import(pulumi.ID(arn)), pulumi.IgnoreChanges([]string{"description", "tags"}))
	}
	if _, err := iam.NewServiceLinkedRole(b.ctx, b.name+"-spot", &iam.ServiceLinkedRoleArgs{
		AwsServiceName: pulumi.String("spot.amazonaws.com"),
	}, opts...); err != nil {
		return fmt.Errorf("creating spot service-linked role: %w", err)
	}
	return nil
}

// NodeRoleName is the role of the nodes Karpenter launches for a cluster.
func NodeRoleName(cluster string) string { return cluster + "-karpenter-node" }
