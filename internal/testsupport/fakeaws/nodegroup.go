package fakeaws

// A managed node group: an update that changes what its nodes are launched from runs EKS's
// node replacement (NodeGroups), which can fail half-way; the fake then keeps, as AWS and
// pulumi-aws do, two truths: the state holds the update's outputs, EKS what the nodes were
// last launched from, which only a refresh reads.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	clusterType   = "aws:eks/cluster:Cluster"
	nodeGroupType = "aws:eks/nodeGroup:NodeGroup"
)

// NodeGroup is what the fake remembers of a managed node group: what DescribeNodegroup gives.
type NodeGroup struct {
	Cluster       string            `json:"cluster"`
	Name          string            `json:"name"`
	InstanceTypes []string          `json:"instanceTypes"`
	AMIType       string            `json:"amiType"`
	SubnetIDs     []string          `json:"subnetIds,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	// Launched is what its nodes were last launched from: its launchKeys after its creation
	// or its last update of them that succeeded.
	Launched Launched `json:"launched,omitempty"`
}

func nodeGroupOf(outputs resource.PropertyMap) NodeGroup {
	labels := map[string]string{}
	if m, ok := outputs["labels"].Mappable().(map[string]any); ok {
		for k, v := range m {
			labels[k] = fmt.Sprint(v)
		}
	}
	return NodeGroup{
		Cluster: str(outputs["clusterName"]), Name: str(outputs["nodeGroupName"]), InstanceTypes: stringList(outputs["instanceTypes"]),
		AMIType: str(outputs["amiType"]), SubnetIDs: stringList(outputs["subnetIds"]), Labels: labels, Launched: LaunchedFrom(outputs),
	}
}

// launchKeys are a managed node group's inputs that UpdateNodegroupVersion changes, and so
// what its nodes are launched from (terraform-provider-aws's resourceNodeGroupUpdate calls it
// for a change of launch_template, release_version or version).
var launchKeys = []resource.PropertyKey{"launchTemplate", "version", "releaseVersion"}

// NodeGroups is EKS's side of a managed node group's nodes (internal/testsupport/fakeeks, on
// the e2e's API server).
type NodeGroups interface {
	// Update replaces the group's nodes with ones launched from outputs, as
	// UpdateNodegroupVersion does; zoneOf gives a subnet's zone. It fails as EKS's update
	// does (PodEvictionFailure), the nodes left as they are.
	Update(ctx context.Context, outputs resource.PropertyMap, zoneOf func(subnet string) string) error
}

// Launched is what a node group's nodes were last launched from: its launchKeys after its
// last update that succeeded (DescribeNodegroup's answer).
type Launched map[string]any

// LaunchedFrom is what a node group's outputs launch its nodes from (fakeeks marks each node
// with it).
func LaunchedFrom(outputs resource.PropertyMap) Launched {
	l := Launched{}
	for _, k := range launchKeys {
		if v, ok := outputs[k]; ok && !v.IsNull() {
			l[string(k)] = v.Mappable()
		}
	}
	return l
}

// launchChanged tells whether news launch the nodes from something other than olds.
func launchChanged(olds, news resource.PropertyMap) bool {
	for _, k := range launchKeys {
		if !olds[k].DeepEquals(news[k]) {
			return true
		}
	}
	return false
}

// stateOf is what the bridge diffs a node group's new inputs against: its state, for every
// input it had or is given (the fake's outputs hold the inputs, besides what AWS computed).
func stateOf(oldInputs, oldOutputs, news resource.PropertyMap) resource.PropertyMap {
	state := resource.PropertyMap{}
	for _, m := range []resource.PropertyMap{oldInputs, news} {
		for k := range m {
			if v, ok := oldOutputs[k]; ok {
				state[k] = v
			}
		}
	}
	return state
}

// rollNodes runs UpdateNodegroupVersion when the update changes what the nodes are launched
// from (from the state's, which a refresh read), and records the group as the update left
// it: its launch only once the nodes were replaced (any other update, of tags, scaling or
// labels, leaves the nodes and their launch alone), nothing if the update failed.
func (p *Provider) rollNodes(ctx context.Context, id string, olds, outs resource.PropertyMap) error {
	rolled := launchChanged(olds, outs)
	if rolled && p.NodeGroups != nil {
		st, err := p.cloud.read()
		if err != nil {
			return err
		}
		zoneOf := func(subnet string) string { return st.Subnets[subnet].AZ }
		if err := p.NodeGroups.Update(ctx, outs, zoneOf); err != nil {
			// terraform-provider-aws's waiter (waitNodegroupUpdateSuccessful) on a failed update.
			update := sha256.Sum256([]byte(id + fmt.Sprint(LaunchedFrom(outs))))
			return fmt.Errorf("waiting for EKS Node Group (%s) version update (%x-%x-%x-%x-%x): unexpected state 'Failed', wanted target 'Successful'. last error: %w",
				id, update[0:4], update[4:6], update[6:8], update[8:10], update[10:16], err)
		}
	}
	// What the update changed (the fake updates in place what AWS would replace, too); the
	// nodes' launch only if they were replaced.
	return p.cloud.update(func(st *accountState) {
		if g, ok := st.NodeGroups[id]; ok {
			launched := g.Launched
			if rolled {
				launched = LaunchedFrom(outs)
			}
			g = nodeGroupOf(outs)
			g.Launched = launched
			st.NodeGroups[id] = g
		}
	})
}

// readNodeGroup is the node group as DescribeNodegroup gives it: what its nodes were last
// launched from, which a failed update did not change (though the state holds the update's
// outputs).
func (p *Provider) readNodeGroup(id string, props *structpb.Struct) (*structpb.Struct, error) {
	st, err := p.cloud.read()
	if err != nil {
		return nil, err
	}
	group, ok := st.NodeGroups[id]
	if !ok {
		return props, nil
	}
	launched := group.Launched
	outs, err := unmarshal(props)
	if err != nil {
		return nil, err
	}
	for _, k := range launchKeys {
		delete(outs, k)
		if v, ok := launched[string(k)]; ok {
			outs[k] = resource.NewPropertyValue(v)
		}
	}
	return marshal(outs)
}

// nodeGroups are the account's node groups: the ones it had, and the ones the stack created.
func (c *Cloud) nodeGroups() ([]NodeGroup, error) {
	st, err := c.read()
	if err != nil {
		return nil, err
	}
	groups := slices.Clone(c.NodeGroups)
	for _, id := range slices.Sorted(maps.Keys(st.NodeGroups)) {
		groups = append(groups, st.NodeGroups[id])
	}
	return groups, nil
}
