// Package fakeeks is EKS's side of a managed node group in the e2e: the nodes it runs, as the
// local API server sees them, and what an update of the group does to them. The fake AWS
// (hack/fakeaws) runs the update when the engine updates the group; the e2e starts the
// group's first nodes with the same code.
//
//   - nodegroup.go: a node group, read from aws:eks/nodeGroup:NodeGroup's outputs;
//   - nodes.go: its nodes joining the cluster (what their kubelets register);
//   - update.go: UpdateNodegroupVersion, EKS's node replacement.
package fakeeks

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	corev1 "k8s.io/api/core/v1"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

// NodeGroup is what a managed node group's nodes are made from: the outputs of
// aws:eks/nodeGroup:NodeGroup that reach a node.
type NodeGroup struct {
	Name         string // nodeGroupName
	DesiredSize  int
	InstanceType string
	CapacityType string
	// Zones are its subnets' zones, in its subnets' order: nodes go round-robin over them.
	Zones  []string
	Labels map[string]string
	Taints []corev1.Taint
	// Version is the Kubernetes minor its nodes' kubelets run ("1.36").
	Version string
	// LaunchedFrom is what UpdateNodegroupVersion changes, and so what a node is replaced
	// for: the launch template and its version, the Kubernetes version, the AMI release
	// (fakeaws.LaunchedFrom, as JSON).
	LaunchedFrom string
	// Force is forceUpdateVersion: a drain that times out deletes the pods it could not
	// evict instead of failing the update.
	Force bool
}

// FromOutputs reads a node group from aws:eks/nodeGroup:NodeGroup's outputs; zoneOf gives a
// subnet's zone.
func FromOutputs(p resource.PropertyMap, zoneOf func(subnet string) string) (NodeGroup, error) {
	m := p.Mappable()
	str := func(v any) string {
		if s, ok := v.(string); ok {
			return s
		}
		return ""
	}
	g := NodeGroup{Name: str(m["nodeGroupName"]), Version: str(m["version"]), CapacityType: str(m["capacityType"]), Labels: map[string]string{}}
	if g.Name == "" {
		return g, errors.New("fakeeks: the node group has no nodeGroupName")
	}
	if g.Version == "" {
		return g, fmt.Errorf("fakeeks: node group %s has no version (the program passes the control plane's)", g.Name)
	}
	if scaling, ok := m["scalingConfig"].(map[string]any); ok {
		if d, ok := scaling["desiredSize"].(float64); ok {
			g.DesiredSize = int(d)
		}
	}
	if types, ok := m["instanceTypes"].([]any); ok && len(types) > 0 {
		g.InstanceType = str(types[0])
	}
	subnets, _ := m["subnetIds"].([]any)
	for _, s := range subnets {
		zone := zoneOf(str(s))
		if zone == "" {
			return g, fmt.Errorf("fakeeks: node group %s: subnet %v is not in the account", g.Name, s)
		}
		g.Zones = append(g.Zones, zone)
	}
	if len(g.Zones) == 0 {
		return g, fmt.Errorf("fakeeks: node group %s has no subnets", g.Name)
	}
	if labels, ok := m["labels"].(map[string]any); ok {
		for k, v := range labels {
			g.Labels[k] = str(v)
		}
	}
	effects := map[string]corev1.TaintEffect{"NO_SCHEDULE": corev1.TaintEffectNoSchedule, "NO_EXECUTE": corev1.TaintEffectNoExecute, "PREFER_NO_SCHEDULE": corev1.TaintEffectPreferNoSchedule}
	taints, _ := m["taints"].([]any)
	for _, t := range taints {
		t, _ := t.(map[string]any)
		g.Taints = append(g.Taints, corev1.Taint{Key: str(t["key"]), Value: str(t["value"]), Effect: effects[str(t["effect"])]})
	}
	launched, err := json.Marshal(fakeaws.LaunchedFrom(p))
	if err != nil {
		return g, err
	}
	g.LaunchedFrom = string(launched)
	g.Force, _ = m["forceUpdateVersion"].(bool)
	return g, nil
}
