package fakeaws_test

import (
	"context"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

// What the fake does not know fails, naming the token: a new resource type or data source
// cannot pass the tests unnoticed.
func TestUnknownTypesAndInvokesAreRefused(t *testing.T) {
	c := &fakeaws.Cloud{}
	_, _, err := c.Create("aws:rds/instance:Instance", "db", resource.PropertyMap{}, false)
	assert.ErrorContains(t, err, "aws:rds/instance:Instance is not one the fake knows")
	_, err = c.Invoke("aws:ec2/getAmi:getAmi", resource.PropertyMap{})
	assert.ErrorContains(t, err, "invoke aws:ec2/getAmi:getAmi is not one the fake knows")

	p := fakeaws.NewProvider(fakeaws.Cloud{}, "")
	_, err = p.Check(context.Background(), &pulumirpc.CheckRequest{Urn: "urn:pulumi:dev::p::aws:rds/instance:Instance::db"})
	assert.ErrorContains(t, err, "aws:rds/instance:Instance", "the plugin refuses it in Check, so a preview fails too")
}

// In a preview, what AWS computes is unknown; what the program chose is known.
func TestPreviewLeavesComputedOutputsUnknown(t *testing.T) {
	c := &fakeaws.Cloud{Region: "us-west-2"}
	in := resource.PropertyMap{"name": resource.NewProperty("KarpenterNodeRole-x")}
	id, outs, err := c.Create("aws:iam/role:Role", "node-role", in, true)
	require.NoError(t, err)
	assert.Empty(t, id)
	assert.Equal(t, "KarpenterNodeRole-x", outs["name"].StringValue())
	assert.True(t, outs["arn"].IsComputed())

	id, outs, err = c.Create("aws:iam/role:Role", "node-role", in, false)
	require.NoError(t, err)
	assert.Equal(t, "node-role_id", id)
	assert.Equal(t, "arn:aws:iam::123456789012:role/KarpenterNodeRole-x", outs["arn"].StringValue())

	_, outs, err = c.Create("aws:eks/cluster:Cluster", "cl", resource.PropertyMap{"name": resource.NewProperty("lux")}, false)
	require.NoError(t, err)
	assert.Equal(t, fakeaws.FakeEndpoint("us-west-2"), outs["endpoint"].StringValue())
	assert.Equal(t, fakeaws.ClusterSG, outs["vpcConfig"].ObjectValue()["clusterSecurityGroupId"].StringValue())
}

func TestAvailabilityZones(t *testing.T) {
	c := &fakeaws.Cloud{Region: "us-east-1"}
	out, err := c.Invoke("aws:index/getAvailabilityZones:getAvailabilityZones", resource.NewPropertyMapFromMap(map[string]any{
		"excludeZoneIds": []any{"use1-az3"},
	}))
	require.NoError(t, err)
	assert.Equal(t, []any{"us-east-1a", "us-east-1d", "us-east-1b"}, out["names"].Mappable())
	assert.Equal(t, []any{"use1-az1", "use1-az4", "use1-az2"}, out["zoneIds"].Mappable())
}

// The plugin passes inputs through Check, and Diff reports exactly the changed inputs.
func TestProviderDiff(t *testing.T) {
	p := fakeaws.NewProvider(fakeaws.Cloud{}, "")
	marshal := func(m map[string]any) *structpb.Struct {
		s, err := plugin.MarshalProperties(resource.NewPropertyMapFromMap(m), plugin.MarshalOptions{})
		require.NoError(t, err)
		return s
	}
	urn := "urn:pulumi:dev::p::aws:sqs/queue:Queue::q"
	same, err := p.Diff(context.Background(), &pulumirpc.DiffRequest{Urn: urn, OldInputs: marshal(map[string]any{"name": "a"}), News: marshal(map[string]any{"name": "a"})})
	require.NoError(t, err)
	assert.Equal(t, pulumirpc.DiffResponse_DIFF_NONE, same.GetChanges())
	changed, err := p.Diff(context.Background(), &pulumirpc.DiffRequest{Urn: urn, OldInputs: marshal(map[string]any{"name": "a", "x": 1}), News: marshal(map[string]any{"name": "a", "x": 2})})
	require.NoError(t, err)
	assert.Equal(t, pulumirpc.DiffResponse_DIFF_SOME, changed.GetChanges())
	assert.Equal(t, []string{"x"}, changed.GetDiffs())
}

// SQS refuses a deleted queue's name for a minute, and an account has one EC2 Spot
// service-linked role: the fake does too, so the e2e shows when the stack trips on either.
func TestTheAccountRemembersWhatAWSDoes(t *testing.T) {
	c := &fakeaws.Cloud{}
	q := resource.PropertyMap{"name": resource.NewProperty("lux-gpu-ci")}
	id, outs, err := c.Create("aws:sqs/queue:Queue", "q", q, false)
	require.NoError(t, err)
	require.NoError(t, c.Delete("aws:sqs/queue:Queue", id, outs))
	_, _, err = c.Create("aws:sqs/queue:Queue", "q", q, false)
	assert.ErrorContains(t, err, "QueueDeletedRecently")

	slr := resource.PropertyMap{"awsServiceName": resource.NewProperty("spot.amazonaws.com")}
	_, _, err = c.Create("aws:iam/serviceLinkedRole:ServiceLinkedRole", "spot", slr, false)
	require.NoError(t, err)
	_, _, err = c.Create("aws:iam/serviceLinkedRole:ServiceLinkedRole", "spot", slr, false)
	assert.ErrorContains(t, err, "has been taken in this account")
}

// The fake keeps AWS's rules for the image path's requests: what AWS refuses fails here.
func TestImagePathRequestsFollowAWSRules(t *testing.T) {
	c := &fakeaws.Cloud{Region: "us-west-2"}
	rule := func(kv ...any) resource.PropertyMap {
		m := map[string]any{"ecrRepositoryPrefix": "lux-gpu-ci/docker-hub", "upstreamRegistryUrl": "registry-1.docker.io",
			"credentialArn": "arn:aws:secretsmanager:us-west-2:123456789012:secret:ecr-pullthroughcache/lux-gpu-ci/docker-hub-x-AbCdEf"}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return resource.NewPropertyMapFromMap(m)
	}
	const ptc = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"
	_, _, err := c.Create(ptc, "ok", rule(), false)
	require.NoError(t, err, "a well-formed rule")
	for what, in := range map[string]resource.PropertyMap{
		"a credentialArn is required":                          rule("credentialArn", nil),
		"must have a name starting with ecr-pullthroughcache/": rule("credentialArn", "arn:aws:secretsmanager:us-west-2:123456789012:secret:dockerhub-AbCdEf"),
		"ecrRepositoryPrefix":                                  rule("ecrRepositoryPrefix", "lux-gpu-ci-production-cluster/docker-hub"),
		"is not a supported upstream registry":                 rule("upstreamRegistryUrl", "nvcr.io"),
	} {
		_, _, err := c.Create(ptc, "bad", in, false)
		assert.ErrorContains(t, err, what)
	}
	_, _, err = c.Create(ptc, "public", rule("upstreamRegistryUrl", "public.ecr.aws", "credentialArn", nil), false)
	assert.NoError(t, err, "ECR Public needs no credential")

	_, _, err = c.Create("aws:ec2/vpcEndpoint:VpcEndpoint", "s3", resource.NewPropertyMapFromMap(map[string]any{
		"serviceName": "com.amazonaws.us-east-1.s3", "vpcEndpointType": "Gateway", "routeTableIds": []any{"rt"},
	}), false)
	assert.ErrorContains(t, err, "InvalidServiceName", "a gateway endpoint serves its own region")
	_, _, err = c.Create("aws:secretsmanager/secret:Secret", "s", resource.NewPropertyMapFromMap(map[string]any{
		"namePrefix": "ecr-pullthroughcache/x-", "recoveryWindowInDays": 3,
	}), false)
	assert.ErrorContains(t, err, "RecoveryWindowInDays")
	_, _, err = c.Create("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate", "t", resource.NewPropertyMapFromMap(map[string]any{
		"prefix": "lux-gpu-ci/ghcr", "appliedFors": []any{"PULL_THROUGH_CACHE"}, "lifecyclePolicy": `{"rules": []}`,
	}), false)
	assert.ErrorContains(t, err, "lifecyclePolicy")
}

// The account's subnets, as getSubnets (by tag) and getSubnet read them, until deleted.
func TestTheAccountRemembersItsSubnets(t *testing.T) {
	c := &fakeaws.Cloud{Region: "us-west-2", StateDir: t.TempDir()}
	in := resource.NewPropertyMapFromMap(map[string]any{"availabilityZone": "us-west-2c", "tags": map[string]any{"kubernetes.io/cluster/lux": "shared"}})
	id, outs, err := c.Create("aws:ec2/subnet:Subnet", "network-private-0", in, false)
	require.NoError(t, err)
	assert.Equal(t, "usw2-az3", outs["availabilityZoneId"].StringValue())
	_, _, err = c.Create("aws:ec2/subnet:Subnet", "other", resource.NewPropertyMapFromMap(map[string]any{"availabilityZone": "us-west-2a"}), false)
	require.NoError(t, err)

	byTag := resource.NewPropertyMapFromMap(map[string]any{"filters": []any{map[string]any{"name": "tag:kubernetes.io/cluster/lux", "values": []any{"shared"}}}})
	got, err := c.Invoke("aws:ec2/getSubnets:getSubnets", byTag)
	require.NoError(t, err)
	assert.Equal(t, []any{id}, got["ids"].Mappable())
	sn, err := c.Invoke("aws:ec2/getSubnet:getSubnet", resource.NewPropertyMapFromMap(map[string]any{"id": id}))
	require.NoError(t, err)
	assert.Equal(t, "us-west-2c", sn["availabilityZone"].StringValue())
	assert.Equal(t, "usw2-az3", sn["availabilityZoneId"].StringValue())

	require.NoError(t, c.Delete("aws:ec2/subnet:Subnet", id, outs))
	got, err = c.Invoke("aws:ec2/getSubnets:getSubnets", byTag)
	require.NoError(t, err)
	assert.Empty(t, got["ids"].Mappable())
}

// EKS's version skew rules: a node group never newer than its control plane, the control
// plane one minor version at a time and never more than three ahead of a managed node group.
func TestEKSRefusesAVersionSkew(t *testing.T) {
	c := &fakeaws.Cloud{}
	prop := resource.NewProperty[string]
	version := func(v string) resource.PropertyMap {
		return resource.PropertyMap{"name": prop("lux"), "version": prop(v)}
	}
	clusterID, clusterOuts, err := c.Create("aws:eks/cluster:Cluster", "cl", version("1.33"), false)
	require.NoError(t, err)
	group := func(v string) resource.PropertyMap {
		return resource.PropertyMap{"clusterName": prop("lux"), "nodeGroupName": prop("system"), "version": prop(v), "amiType": prop("AL2023_x86_64_STANDARD")}
	}
	_, _, err = c.Create("aws:eks/nodeGroup:NodeGroup", "ng-new", group("1.34"), false)
	assert.ErrorContains(t, err, "newer than the cluster's, 1.33", "a node group ahead of its control plane")
	ngID, ngOuts, err := c.Create("aws:eks/nodeGroup:NodeGroup", "ng", group("1.33"), false)
	require.NoError(t, err)
	_, err = c.Update("aws:eks/nodeGroup:NodeGroup", "ng", ngID, ngOuts, group("1.34"), false)
	assert.ErrorContains(t, err, "newer than the cluster's", "the nodes before the control plane")
	_, err = c.Update("aws:eks/cluster:Cluster", "cl", clusterID, clusterOuts, version("1.35"), false)
	assert.ErrorContains(t, err, "Unsupported Kubernetes minor version update from 1.33 to 1.35", "two minors at once")

	for _, v := range []string{"1.34", "1.35", "1.36"} {
		clusterOuts, err = c.Update("aws:eks/cluster:Cluster", "cl", clusterID, clusterOuts, version(v), false)
		require.NoError(t, err, "to %s with the nodes at 1.33: a kubelet may be three minors behind", v)
	}
	_, err = c.Update("aws:eks/cluster:Cluster", "cl", clusterID, clusterOuts, version("1.37"), false)
	assert.ErrorContains(t, err, "Nodegroup system is at 1.33, more than three minor versions behind 1.37")
	_, err = c.Update("aws:eks/nodeGroup:NodeGroup", "ng", ngID, ngOuts, group("1.36"), false)
	assert.NoError(t, err, "the nodes follow the control plane")
}
