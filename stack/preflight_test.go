package stack_test

// What the AWS layer checks in the account before it creates anything: the zones it can use,
// the identity running the update, the spot service-linked role, the live system node group;
// and names of its own per stack, so two stacks share an account.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// Zones are chosen by ID among those EKS accepts, and only where every pool's GPU types are
// offered.
func TestZonesAreOnesEKSAcceptsThatOfferTheGPUs(t *testing.T) {
	m := newMocks()
	m.Cloud.AZs = []fakeaws.AZ{{Name: "us-west-2a", ID: "usw2-az1"}, {Name: "us-west-2b", ID: "usw2-az2"}, {Name: "us-west-2c", ID: "usw2-az3"}, {Name: "us-west-2d", ID: "usw2-az4"}}
	m.Cloud.Offerings = map[string][]string{"us-west-2a": {"t3.medium"}, "us-west-2b": {"g4dn.xlarge"}}
	require.NoError(t, m.run(testkit.StackConfig(t, "dev")))
	var zones []any
	for _, s := range m.all("aws:ec2/subnet:Subnet") {
		if strings.HasPrefix(s.Name, "network-private-") {
			zones = append(zones, s.Inputs["availabilityZone"])
		}
	}
	assert.Equal(t, []any{"us-west-2b", "us-west-2c"}, zones, "us-west-2a offers no g4dn.xlarge")

	// In us-east-1, EKS refuses use1-az3, whatever its name in this account.
	m = newMocks()
	m.Cloud.AZs = []fakeaws.AZ{{Name: "us-east-1a", ID: "use1-az3"}, {Name: "us-east-1b", ID: "use1-az1"}, {Name: "us-east-1c", ID: "use1-az2"}}
	require.NoError(t, m.run(testkit.With(testkit.StackConfig(t, "dev"), "aws:region", "us-east-1")))
	for _, s := range m.all("aws:ec2/subnet:Subnet") {
		assert.NotEqual(t, "us-east-1a", s.Inputs["availabilityZone"], "%s is in a zone EKS refuses", s.Name)
	}

	m = newMocks()
	m.Cloud.Offerings = map[string][]string{"us-west-2a": {}, "us-west-2b": {}, "us-west-2c": {}}
	err := m.run(testkit.StackConfig(t, "dev"))
	assert.ErrorContains(t, err, "lux-gpu-ci:azCount: the region has 1 availability zones EKS accepts that offer every pool's GPU types")
	assert.ErrorContains(t, err, "us-west-2a (usw2-az1) offers none of pool gpu-spot's g4dn.xlarge")
	assert.Empty(t, names(m.programResources()), "nothing may be registered")
}

// EKS makes the identity that creates the cluster an admin; listing it again fails the
// update with ResourceInUseException, so it is refused before anything is created.
func TestTheCallerIsNoAdminPrincipal(t *testing.T) {
	m := newMocks()
	m.Cloud.CallerArn = "arn:aws:sts::123456789012:assumed-role/platform-ci/gha-1234"
	err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "adminPrincipals", `["arn:aws:iam::123456789012:role/platform-ci"]`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `lux-gpu-ci:adminPrincipals: "arn:aws:iam::123456789012:role/platform-ci" is the identity creating cluster lux-gpu-ci`)
	assert.Contains(t, err.Error(), "ResourceInUseException")
	assert.Empty(t, names(m.programResources()))

	m = newMocks()
	m.Cloud.CallerArn = "arn:aws:sts::123456789012:assumed-role/platform-ci/gha-1234"
	require.NoError(t, m.run(testkit.With(testkit.StackConfig(t, "dev"), "adminPrincipals", `["arn:aws:iam::123456789012:role/humans"]`)))

	// The deploy role creating the cluster (deploy.yml after a destroy) is refused the same way,
	// naming its own key and the way out.
	m = newMocks()
	m.Cloud.CallerArn = "arn:aws:sts::123456789012:assumed-role/lux-gpu-ci-deploy/GitHubActions"
	err = m.run(testkit.With(testkit.StackConfig(t, "dev"), "deployRoleArn", "arn:aws:iam::123456789012:role/lux-gpu-ci-deploy"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `lux-gpu-ci:deployRoleArn: "arn:aws:iam::123456789012:role/lux-gpu-ci-deploy" is the identity creating cluster lux-gpu-ci`)
	assert.Contains(t, err.Error(), "create the cluster with make bootstrap")
	assert.Empty(t, names(m.programResources()))

	// Once the cluster exists its creator's entry is settled: a listed admin may run up.
	m = newMocks()
	m.Cloud.CallerArn = "arn:aws:sts::123456789012:assumed-role/platform-ci/gha-1234"
	m.Cloud.Clusters = []string{"other", "lux-gpu-ci"}
	require.NoError(t, m.run(testkit.With(testkit.StackConfig(t, "dev"), "adminPrincipals", `["arn:aws:iam::123456789012:role/platform-ci"]`)))
}

// Karpenter cannot launch spot capacity in an account without the EC2 Spot service-linked
// role, and creating it where it exists fails: it is created if absent, adopted if present,
// kept on destroy; false leaves it alone.
func TestSpotServiceLinkedRoleOnlyIfAbsent(t *testing.T) {
	m := runDev(t)
	slr := m.one(t, "aws:iam/serviceLinkedRole:ServiceLinkedRole")
	assert.Equal(t, "spot.amazonaws.com", slr.Inputs["awsServiceName"])
	assert.Empty(t, slr.Raw.RegisterRPC.GetImportId(), "a fresh account: created")
	assert.True(t, slr.Raw.RegisterRPC.GetRetainOnDelete(), "account-wide: kept on destroy")

	m = newMocks()
	m.Cloud.SpotRoleExists = true
	require.NoError(t, m.run(testkit.StackConfig(t, "dev")))
	slr = m.one(t, "aws:iam/serviceLinkedRole:ServiceLinkedRole")
	assert.Equal(t, fakeaws.SpotRoleArn, slr.Raw.RegisterRPC.GetImportId(), "the account has it: adopted, not created twice")

	m = runDev(t, "createSpotServiceLinkedRole", "false")
	assert.Empty(t, m.all("aws:iam/serviceLinkedRole:ServiceLinkedRole"))
}

// A stack that names no cluster gets names of its own, so a second stack in the account does
// not collide with dev's IAM roles, queue and budget.
func TestAStackWithoutAClusterNameGetsItsOwnNames(t *testing.T) {
	cfg := testkit.With(testkit.StackConfig(t, "dev"), "clusterName", testkit.Unset)
	m := newStackMocks("staging")
	require.NoError(t, m.run(cfg))
	assert.Equal(t, "lux-gpu-ci-staging", m.one(t, "eks:index:Cluster").Inputs["name"])
	assert.Equal(t, "lux-gpu-ci-staging-karpenter-node", m.get(t, "aws:iam/role:Role", "karpenter-node-role").Inputs["name"])
	assert.Equal(t, "lux-gpu-ci-staging-karpenter", m.get(t, "aws:iam/role:Role", "karpenter-controller-role").Inputs["name"])
	assert.Equal(t, "lux-gpu-ci-staging-", m.one(t, "aws:sqs/queue:Queue").Inputs["namePrefix"])
}

// The dev stack keeps the names the seed's runbook uses, so its commands work as written.
func TestDevStackUsesTheRunbooksNames(t *testing.T) {
	m := runDev(t)
	assert.Equal(t, "lux-gpu-ci", m.one(t, "eks:index:Cluster").Inputs["name"])
	assert.Equal(t, "gpu-spot", path(m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-gpu-spot-nodepool").Inputs, "metadata", "name"))
	assert.Equal(t, "lux-gpu-ci-karpenter-node", m.get(t, "aws:iam/role:Role", "karpenter-node-role").Inputs["name"])
	assert.Equal(t, "gpu-ci", path(m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-gpu-spot-nodepool").Inputs["spec"], "template", "metadata", "labels", "workload"))
	assert.Equal(t, "lux-gpu-ci", m.one(t, "aws:ec2/tag:Tag").Inputs["value"], "karpenter.sh/discovery=lux-gpu-ci")
	assert.Equal(t, "lux-gpu-t4", path(releaseNamed(t, m, "lux-gpu-t4").Inputs["values"], "runnerScaleSetName"))
}

// A change that would replace the live system node group (its instance type, its AMI type, its
// subnets through natMode) is refused: EKS terminates the old group's nodes 5 minutes into
// their drain, with the container-form jobs running there. replaceSystemNodes lets one deploy
// through; a group that already is what the stack asks for is the stack's (a replacement that
// failed half-way leaves the old one beside it); another team's node group is ignored.
func TestTheLiveSystemNodeGroupIsNotReplacedUnasked(t *testing.T) {
	account := t.TempDir() // the fake account, as it persists between runs
	first := newMocks()
	first.Cloud.StateDir = account
	require.NoError(t, first.run(testkit.StackConfig(t, "dev")), "the stack's first up")
	var private, public []string
	for _, sn := range first.all("aws:ec2/subnet:Subnet") {
		if strings.HasPrefix(sn.Name, "network-private-") {
			private = append(private, fakeaws.ID(sn.Name))
		} else {
			public = append(public, fakeaws.ID(sn.Name))
		}
	}
	require.NotEmpty(t, private)
	require.NotEmpty(t, public)
	system := func(name, instanceType, amiType string, subnets []string) fakeaws.NodeGroup {
		return fakeaws.NodeGroup{Cluster: "lux-gpu-ci", Name: name, InstanceTypes: []string{instanceType}, AMIType: amiType, SubnetIDs: subnets,
			Labels: map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue}}
	}
	live := func(groups ...fakeaws.NodeGroup) *mocks {
		m := newMocks()
		m.Cloud.StateDir = account
		m.Cloud.Clusters = []string{"lux-gpu-ci"}
		m.Cloud.NodeGroups = append([]fakeaws.NodeGroup{
			{Cluster: "lux-gpu-ci", Name: "team-x", InstanceTypes: []string{"m5.large"}, AMIType: "BOTTLEROCKET_x86_64", SubnetIDs: public},
		}, groups...)
		return m
	}
	current := system("cluster-system-0a1b", "t3.medium", versions.SystemAMIType, private)

	m := live(current)
	require.NoError(t, m.run(testkit.StackConfig(t, "dev")), "the same group: kept")

	m = live(current)
	err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "systemNodeInstanceType", "t3.large"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:systemNodeInstanceType: the system node group cluster-system-0a1b would be replaced (instance type t3.medium → t3.large)")
	assert.Contains(t, err.Error(), "killing the container-form jobs running there (fix: pulumi config set systemNodeInstanceType t3.medium; or, to replace the group, deploy once with pulumi config set replaceSystemNodes true")
	assert.Empty(t, names(m.programResources()), "nothing is created or changed")

	m = live(system("cluster-system-0a1b", "t3.medium", "AL2_x86_64", private))
	err = m.run(testkit.StackConfig(t, "dev"))
	require.Error(t, err, "a new system AMI type (versions.SystemAMIType) replaces the group too")
	assert.Contains(t, err.Error(), "lux-gpu-ci:replaceSystemNodes: the system node group cluster-system-0a1b would be replaced (AMI type AL2_x86_64 → "+versions.SystemAMIType)
	assert.Contains(t, err.Error(), "(fix: to replace the group, deploy once")

	m = live(current)
	err = m.run(testkit.With(testkit.StackConfig(t, "dev"), "natMode", "none"))
	require.Error(t, err, "natMode moves the nodes to the public subnets: a new group")
	assert.Contains(t, err.Error(), "lux-gpu-ci:natMode: the system node group cluster-system-0a1b would be replaced (private subnets → public (natMode))")

	m = live(current)
	err = m.run(testkit.With(testkit.StackConfig(t, "dev"), "systemNodeInstanceType", "t3.large", "natMode", "none"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(instance type t3.medium → t3.large; private subnets → public (natMode))")
	assert.Contains(t, err.Error(), "(fix: undo the changes; or, to replace the group")

	m = live(current)
	require.NoError(t, m.run(testkit.With(testkit.StackConfig(t, "dev"), "systemNodeInstanceType", "t3.large", "replaceSystemNodes", "true")), "asked for")
	assert.Equal(t, []any{"t3.large"}, m.one(t, "eks:index:ManagedNodeGroup").Inputs["instanceTypes"])

	m = live(current, system("cluster-system-9f8e", "t3.large", versions.SystemAMIType, private))
	require.NoError(t, m.run(testkit.With(testkit.StackConfig(t, "dev"), "systemNodeInstanceType", "t3.large")),
		"a replacement that failed half-way: the new group is the stack's, the old one goes with the next up")
}
