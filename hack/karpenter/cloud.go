package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	sqsapi "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/samber/lo"

	"github.com/aws/karpenter-provider-aws/pkg/fake"
)

// seed is the part of the fake account the program created, as the e2e read it from the
// stack's state after `up`.
type seed struct {
	Region  string `json:"region"`
	Account string `json:"account"`
	Subnets []struct {
		ID     string            `json:"id"`
		Zone   string            `json:"zone"`
		ZoneID string            `json:"zoneID"`
		VPC    string            `json:"vpc"`
		Tags   map[string]string `json:"tags"`
	} `json:"subnets"`
	SecurityGroups []struct {
		ID   string            `json:"id"`
		Name string            `json:"name"`
		Tags map[string]string `json:"tags"`
	} `json:"securityGroups"`
	// Roles are the IAM roles that exist; an EC2NodeClass naming another one fails as on AWS.
	Roles []string `json:"roles"`
	// Queues are the SQS queues that exist; Karpenter's INTERRUPTION_QUEUE must be one.
	Queues []string `json:"queues"`
	// Clusters are the EKS clusters, which Karpenter asks for its endpoint.
	Clusters []struct {
		Name            string `json:"name"`
		Endpoint        string `json:"endpoint"`
		Version         string `json:"version"`
		ServiceIPv4CIDR string `json:"serviceIPv4CIDR"`
	} `json:"clusters"`
}

// cloud is the fake account: upstream's fakes, seeded.
type cloud struct {
	region, accountID string
	ec2               ec2API
	iam               *fake.IAMAPI
	ssm               ssmAPI
	eks               eksAPI
	pricing           *fake.PricingAPI
	sqs               *queue
}

func newCloud(s seed) *cloud {
	images := &amis{byID: map[string]ec2types.Image{}, origin: time.Now().UTC()}
	c := &cloud{
		region: s.Region, accountID: s.Account,
		ec2: ec2API{fake.NewEC2API(), images, &launchTemplates{data: map[string]*ec2types.RequestLaunchTemplateData{}}}, iam: fake.NewIAMAPI(), ssm: ssmAPI{fake.NewSSMAPI(), images}, eks: eksAPI{fake.NewEKSAPI(), map[string]ekstypes.Cluster{}},
		pricing: &fake.PricingAPI{}, sqs: newQueue(),
	}
	zones := map[string]string{}
	for _, sn := range s.Subnets {
		zones[sn.Zone] = sn.ZoneID
		c.ec2.Subnets.Store(sn.ID, ec2types.Subnet{
			SubnetId: aws.String(sn.ID), AvailabilityZone: aws.String(sn.Zone), AvailabilityZoneId: aws.String(sn.ZoneID),
			VpcId: aws.String(sn.VPC), AvailableIpAddressCount: aws.Int32(250), MapPublicIpOnLaunch: aws.Bool(false),
			Tags: tags(sn.Tags),
		})
	}
	groups := lo.Map(s.SecurityGroups, func(g struct {
		ID   string            `json:"id"`
		Name string            `json:"name"`
		Tags map[string]string `json:"tags"`
	}, _ int) ec2types.SecurityGroup {
		return ec2types.SecurityGroup{GroupId: aws.String(g.ID), GroupName: aws.String(g.Name), Tags: tags(g.Tags)}
	})
	// Upstream's fake filters only its own default groups; these answer the same filters.
	c.ec2.DescribeSecurityGroupsBehavior.Output.Set(&ec2.DescribeSecurityGroupsOutput{SecurityGroups: groups})

	var azs []ec2types.AvailabilityZone
	var offerings []ec2types.InstanceTypeOffering
	names := lo.Keys(zones)
	sort.Strings(names)
	for _, z := range names {
		azs = append(azs, ec2types.AvailabilityZone{ZoneName: aws.String(z), ZoneId: aws.String(zones[z]), ZoneType: aws.String("availability-zone")})
		for _, it := range instanceTypes {
			offerings = append(offerings, ec2types.InstanceTypeOffering{InstanceType: it.InstanceType, Location: aws.String(z), LocationType: ec2types.LocationTypeAvailabilityZone})
		}
	}
	c.ec2.DescribeAvailabilityZonesOutput.Set(&ec2.DescribeAvailabilityZonesOutput{AvailabilityZones: azs})
	c.ec2.DescribeInstanceTypesOutput.Set(&ec2.DescribeInstanceTypesOutput{InstanceTypes: instanceTypes})
	c.ec2.DescribeInstanceTypeOfferingsOutput.Set(&ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: offerings})

	for _, cl := range s.Clusters {
		c.eks.clusters[cl.Name] = ekstypes.Cluster{Name: aws.String(cl.Name), Endpoint: aws.String(cl.Endpoint), Version: aws.String(cl.Version),
			Status: ekstypes.ClusterStatusActive, KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{ServiceIpv4Cidr: aws.String(cl.ServiceIPv4CIDR)}}
	}
	c.iam.EnableRoleValidation = true
	for _, r := range s.Roles {
		c.iam.Roles[r] = &iamtypes.Role{RoleName: aws.String(r), RoleId: aws.String(fake.RoleID())}
	}
	return c
}

func tags(m map[string]string) []ec2types.Tag {
	keys := lo.Keys(m)
	sort.Strings(keys)
	return lo.Map(keys, func(k string, _ int) ec2types.Tag { return ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])} })
}

func (c *cloud) queueURL(name string) string {
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", c.region, c.accountID, name)
}

// queue is upstream's fake SQS with SQS's long poll: upstream's ReceiveMessage answers at
// once with nothing, which a running interruption controller (it requeues immediately on an
// empty receive, trusting the 20 s wait) would spin on. Messages are held until deleted.
type queue struct {
	fake.SQSAPI
	mu       sync.Mutex
	messages []sqstypes.Message
	arrived  chan struct{}
	seq      int
}

func newQueue() *queue { return &queue{arrived: make(chan struct{}, 1)} }

func (q *queue) Send(body string) {
	q.mu.Lock()
	q.seq++
	id := fmt.Sprintf("m-%d", q.seq)
	q.messages = append(q.messages, sqstypes.Message{MessageId: aws.String(id), ReceiptHandle: aws.String(id), Body: aws.String(body),
		Attributes: map[string]string{string(sqstypes.MessageSystemAttributeNameSentTimestamp): fmt.Sprint(time.Now().UnixMilli())}})
	q.mu.Unlock()
	select {
	case q.arrived <- struct{}{}:
	default:
	}
}

func (q *queue) ReceiveMessage(ctx context.Context, in *sqsapi.ReceiveMessageInput, _ ...func(*sqsapi.Options)) (*sqsapi.ReceiveMessageOutput, error) {
	deadline := time.After(time.Duration(in.WaitTimeSeconds) * time.Second)
	for {
		q.mu.Lock()
		msgs := append([]sqstypes.Message(nil), q.messages...)
		q.mu.Unlock()
		if len(msgs) > 0 {
			return &sqsapi.ReceiveMessageOutput{Messages: msgs[:min(len(msgs), int(in.MaxNumberOfMessages))]}, nil
		}
		select {
		case <-q.arrived:
		case <-deadline:
			return &sqsapi.ReceiveMessageOutput{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (q *queue) DeleteMessage(_ context.Context, in *sqsapi.DeleteMessageInput, _ ...func(*sqsapi.Options)) (*sqsapi.DeleteMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.messages = lo.Reject(q.messages, func(m sqstypes.Message, _ int) bool {
		return aws.ToString(m.ReceiptHandle) == aws.ToString(in.ReceiptHandle)
	})
	return &sqsapi.DeleteMessageOutput{}, nil
}

func (q *queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.messages)
}
