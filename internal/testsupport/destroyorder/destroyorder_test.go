package destroyorder_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/destroyorder"
)

func urn(typ, name string) string { return "urn:pulumi:dev::lux-gpu-ci::" + typ + "::" + name }

func typeOf(urn string) string { return strings.Split(urn, "::")[2] }

// A small stack: a network component with a route table, a remote node-group component
// whose node group is its child, and the Kubernetes layer's provider and one object.
func graph(providerDeps ...string) destroyorder.Graph {
	nodes := []*destroyorder.Node{
		{URN: urn("lux-gpu-ci:infra:Network", "network")},
		{URN: urn("aws:ec2/routeTable:RouteTable", "rt"), Parent: urn("lux-gpu-ci:infra:Network", "network"), Custom: true},
		{URN: urn("eks:index:ManagedNodeGroup", "system")},
		{URN: urn("aws:eks/nodeGroup:NodeGroup", "system"), Parent: urn("eks:index:ManagedNodeGroup", "system"), Custom: true},
		{URN: urn("lux-gpu-ci:k8s:GPUCI", "gpu-ci")},
		{URN: urn("pulumi:providers:kubernetes", "gpu-ci"), Parent: urn("lux-gpu-ci:k8s:GPUCI", "gpu-ci"), Custom: true, Deps: providerDeps},
		{URN: urn("kubernetes:core/v1:Namespace", "ns"), Parent: urn("lux-gpu-ci:k8s:GPUCI", "gpu-ci"), Custom: true,
			Deps: []string{urn("pulumi:providers:kubernetes", "gpu-ci")}},
	}
	g := destroyorder.Graph{}
	for _, n := range nodes {
		n.Type = typeOf(n.URN)
		g[n.URN] = n
	}
	return g
}

var rules = []destroyorder.Lifeline{destroyorder.Rules[0]}

func TestDependenciesReachLifelinesThroughProviderAndComponents(t *testing.T) {
	// The namespace depends on its provider, which depends on the route table directly and on
	// the remote node-group component, whose child the engine counts too.
	g := graph(urn("aws:ec2/routeTable:RouteTable", "rt"), urn("eks:index:ManagedNodeGroup", "system"))
	deps := g.DependsOn(urn("kubernetes:core/v1:Namespace", "ns"))
	assert.True(t, deps[urn("aws:eks/nodeGroup:NodeGroup", "system")])
	assert.Empty(t, g.Violations(rules))
}

func TestAMissingLifelineIsNamed(t *testing.T) {
	g := graph(urn("eks:index:ManagedNodeGroup", "system"))
	v := g.Violations(rules)
	require.Len(t, v, 1)
	assert.Contains(t, v[0], "aws:ec2/routeTable:RouteTable::rt — 2 of 2 do not (e.g. kubernetes:core/v1:Namespace::ns)")
}

func TestARuleThatChecksNothingFails(t *testing.T) {
	g := destroyorder.Graph{}
	v := g.Violations(rules)
	require.Len(t, v, 1)
	assert.Contains(t, v[0], "the rule checks nothing")
}
