package fakeaws

import (
	"context"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"google.golang.org/protobuf/types/known/structpb"
)

const nodeGroupType = "aws:eks/nodeGroup:NodeGroup"

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

func launchedFrom(outputs resource.PropertyMap) Launched {
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

// rollNodes runs the update's node replacement when it changes what the nodes are launched
// from, and records the group's launch once it succeeded.
func (p *Provider) rollNodes(ctx context.Context, id string, olds, outs resource.PropertyMap) error {
	if p.NodeGroups == nil || !launchChanged(olds, outs) {
		return p.cloud.recordLaunch(id, outs)
	}
	st, err := p.cloud.read()
	if err != nil {
		return err
	}
	zoneOf := func(subnet string) string { return st.Subnets[subnet].AZ }
	if err := p.NodeGroups.Update(ctx, outs, zoneOf); err != nil {
		return fmt.Errorf("waiting for EKS Node Group (%s) version update: unexpected state 'Failed', wanted target 'Successful'. last error: %w", id, err)
	}
	return p.cloud.recordLaunch(id, outs)
}

// readNodeGroup is the node group as DescribeNodegroup gives it: what its nodes were last
// launched from, which a failed update did not change (though the state holds the update's
// outputs).
func (p *Provider) readNodeGroup(id string, props *structpb.Struct) (*structpb.Struct, error) {
	st, err := p.cloud.read()
	if err != nil {
		return nil, err
	}
	launched, ok := st.NodeGroups[id]
	if !ok {
		return props, nil
	}
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

func (c *Cloud) recordLaunch(id string, outputs resource.PropertyMap) error {
	return c.update(func(st *accountState) {
		if st.NodeGroups == nil {
			st.NodeGroups = map[string]Launched{}
		}
		st.NodeGroups[id] = launchedFrom(outputs)
	})
}
