package stack_test

// The AWS layer's network under mocks: layout, tags, NAT, the lean profile, AZs.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

func TestNetworkDev(t *testing.T) {
	m := runDev(t)
	vpc := m.one(t, "aws:ec2/vpc:Vpc")
	assert.Equal(t, "10.0.0.0/16", vpc.Inputs["cidrBlock"])
	assert.Equal(t, true, vpc.Inputs["enableDnsHostnames"])
	assert.Equal(t, true, vpc.Inputs["enableDnsSupport"])

	var public, private []registered
	for _, s := range m.all("aws:ec2/subnet:Subnet") {
		if strings.Contains(s.Name, "public") {
			public = append(public, s)
		} else {
			private = append(private, s)
		}
	}
	require.Len(t, public, 2)
	require.Len(t, private, 2)
	// The first two AZs by name, whatever order the region lists them in.
	for i, az := range []string{"us-west-2a", "us-west-2b"} {
		assert.Equal(t, az, public[i].Inputs["availabilityZone"])
		assert.Equal(t, az, private[i].Inputs["availabilityZone"])
	}
	assert.Equal(t, []any{"10.0.0.0/18", "10.0.64.0/18"}, []any{private[0].Inputs["cidrBlock"], private[1].Inputs["cidrBlock"]})
	assert.Equal(t, []any{"10.0.192.0/21", "10.0.200.0/21"}, []any{public[0].Inputs["cidrBlock"], public[1].Inputs["cidrBlock"]})
	for _, s := range private {
		tags := s.Inputs["tags"].(map[string]any)
		assert.Equal(t, "lux-gpu-ci", tags["karpenter.sh/discovery"], s.Name)
		assert.Equal(t, "1", tags["kubernetes.io/role/internal-elb"], s.Name)
		assert.Equal(t, "shared", tags["kubernetes.io/cluster/lux-gpu-ci"], s.Name)
		assert.Equal(t, "dev", tags["env"], "common tags reach %s", s.Name)
	}
	for _, s := range public {
		tags := s.Inputs["tags"].(map[string]any)
		assert.NotContains(t, tags, "karpenter.sh/discovery", "nodes must not land in public subnets when there is a NAT")
		assert.Equal(t, "1", tags["kubernetes.io/role/elb"], s.Name)
		assert.Equal(t, false, s.Inputs["mapPublicIpOnLaunch"], s.Name)
	}

	nat := m.one(t, "aws:ec2/natGateway:NatGateway")
	assert.Equal(t, "network-public-usw2-az1_id", nat.Inputs["subnetId"], "the NAT lives in the first public subnet")
	assert.Contains(t, nat.Deps(), "aws:ec2/internetGateway:InternetGateway::network-igw")
	privateRT := m.get(t, "aws:ec2/routeTable:RouteTable", "network-private-rt")
	routes := privateRT.Inputs["routes"].([]any)
	require.Len(t, routes, 1)
	assert.Equal(t, "0.0.0.0/0", routes[0].(map[string]any)["cidrBlock"])
	assert.Equal(t, "network-nat_id", routes[0].(map[string]any)["natGatewayId"])
}

func TestLeanProfileHasNoNATAndPublicNodes(t *testing.T) {
	m := runDev(t, "natMode", "none", "azCount", "3")
	assert.Empty(t, m.all("aws:ec2/natGateway:NatGateway"))
	assert.Empty(t, m.all("aws:ec2/eip:Eip"))
	subnets := m.all("aws:ec2/subnet:Subnet")
	require.Len(t, subnets, 3)
	for _, s := range subnets {
		assert.Contains(t, s.Name, "public")
		assert.Equal(t, true, s.Inputs["mapPublicIpOnLaunch"], s.Name)
		assert.Equal(t, "lux-gpu-ci", s.Inputs["tags"].(map[string]any)["karpenter.sh/discovery"], s.Name)
	}
	mng := m.one(t, "eks:index:ManagedNodeGroup")
	assert.Equal(t, []any{"network-public-usw2-az1_id", "network-public-usw2-az2_id", "network-public-usw2-az3_id"}, mng.Inputs["subnetIds"])
	cl := m.one(t, "eks:index:Cluster")
	assert.NotContains(t, cl.Inputs, "privateSubnetIds")
}

func TestTooFewAvailabilityZonesIsAConfigError(t *testing.T) {
	m := newMocks()
	m.Cloud.AZs = []fakeaws.AZ{{Name: "us-west-2a", ID: "usw2-az1"}, {Name: "us-west-2b", ID: "usw2-az2"}}
	err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "azCount", "3"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:azCount")
	assert.Empty(t, names(m.programResources()))
}

// Zones are chosen once: a stack whose subnets exist keeps their zones, whatever would be
// chosen now (here: a zone earlier in the order starts offering the GPU types), and what
// would move them is a config error naming the key and the fix.
func TestZonesAreKeptOnceChosen(t *testing.T) {
	account := t.TempDir() // the fake account, as it persists between runs
	run := func(offerings map[string][]string, kv ...string) (*mocks, error) {
		m := newMocks()
		m.Cloud.StateDir = account
		m.Cloud.Offerings = offerings
		return m, m.run(testkit.With(testkit.StackConfig(t, "dev"), kv...))
	}
	zonesOf := func(m *mocks) []any {
		var zones []any
		for _, s := range m.all("aws:ec2/subnet:Subnet") {
			if strings.HasPrefix(s.Name, "network-private-") {
				zones = append(zones, s.Inputs["availabilityZone"])
			}
		}
		return zones
	}
	gpus := []string{"g4dn.xlarge"}
	first, err := run(map[string][]string{"us-west-2a": {"t3.medium"}})
	require.NoError(t, err)
	require.Equal(t, []any{"us-west-2b", "us-west-2c"}, zonesOf(first), "us-west-2a offers no GPU type")
	sn := first.get(t, "aws:ec2/subnet:Subnet", "network-private-usw2-az2")
	aliases := sn.Raw.RegisterRPC.GetAliases()
	require.Len(t, aliases, 1)
	assert.Equal(t, "network-private-0", aliases[0].GetSpec().GetName(), "named by zone ID, aliased to the position a stack created before used")

	again, err := run(map[string][]string{"us-west-2a": gpus})
	require.NoError(t, err)
	assert.Equal(t, []any{"us-west-2b", "us-west-2c"}, zonesOf(again), "kept, though us-west-2a now offers the GPUs and comes first")

	m, err := run(nil, "azCount", "3")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:azCount: the stack's subnets are in 2 availability zones [us-west-2b (usw2-az2) us-west-2c (usw2-az3)]")
	assert.Contains(t, err.Error(), "fix: pulumi config set azCount 2")
	assert.Empty(t, names(m.programResources()))

	m, err = run(map[string][]string{"us-west-2c": {"t3.medium"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools: zone us-west-2c (usw2-az3), where the stack's subnets are, offers none of pool gpu-spot's g4dn.xlarge")
	assert.Empty(t, names(m.programResources()))
}
