// Package fakeeks is EKS's side of a managed node group in the e2e: the nodes it runs, as the
// local API server sees them, and what an update of the group does to them. The fake AWS
// (hack/fakeaws) rolls the nodes when the engine updates the group; the e2e registers the
// group's first nodes with the same code.
//
// The rules are EKS's "managed node update behavior" (docs.aws.amazon.com/eks/latest/userguide/
// managed-node-update-behavior.html): new nodes first, the old ones cordoned, then drained one
// at a time with the eviction API (so PodDisruptionBudgets hold), and a drain that cannot
// finish within the eviction timeout (EKS: 15 minutes) fails the update with
// PodEvictionFailure, leaving the node and its pods where they are.
package fakeeks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Labels EKS puts on a managed node group's nodes (its own, besides the group's labels).
const (
	NodeGroupLabel    = "eks.amazonaws.com/nodegroup"
	CapacityTypeLabel = "eks.amazonaws.com/capacityType"
	// ExcludeFromLBLabel is what EKS labels an old node with when it cordons it for an update.
	ExcludeFromLBLabel = "node.kubernetes.io/exclude-from-external-load-balancers"
	// LaunchAnnotation records what a node's instance was launched from (its launch template
	// version, Kubernetes version and AMI release): EC2 knows it, a Node does not, so the fake
	// writes it on the Node it registers.
	LaunchAnnotation = "fakeeks.lux-gpu-ci/launched-from"
)

// t3Medium is what a t3.medium registers in EKS (AL2023, the VPC CNI's 17 pods): 2 vCPUs
// less kube-reserved 70m; 3.76 GiB of memory less kube-reserved 442 MiB (255 MiB + 11 MiB ×
// 17 pods) and the 100 MiB eviction threshold (amazon-eks-ami's nodeadm kubelet config).
var t3Medium = struct{ capacity, allocatable corev1.ResourceList }{
	capacity: corev1.ResourceList{
		corev1.ResourceCPU: kresource.MustParse("2"), corev1.ResourceMemory: kresource.MustParse("3943360Ki"),
		corev1.ResourcePods: kresource.MustParse("17"), corev1.ResourceEphemeralStorage: kresource.MustParse("20Gi"),
	},
	allocatable: corev1.ResourceList{
		corev1.ResourceCPU: kresource.MustParse("1930m"), corev1.ResourceMemory: kresource.MustParse("3388352Ki"),
		corev1.ResourcePods: kresource.MustParse("17"), corev1.ResourceEphemeralStorage: kresource.MustParse("18Gi"),
	},
}

// NodeGroup is what a managed node group's nodes are made from: the inputs of
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
	// Version is the Kubernetes minor its nodes' kubelets run ("" before the group has one:
	// the cluster's).
	Version string
	// LaunchedFrom is what UpdateNodegroupVersion changes, and so what a node is replaced
	// for: the launch template and its version, the Kubernetes version, the AMI release.
	LaunchedFrom string
	// Force is forceUpdateVersion: a drain that times out does not fail the update.
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
	launched, err := json.Marshal([]any{m["launchTemplate"], m["version"], m["releaseVersion"]})
	if err != nil {
		return g, err
	}
	g.LaunchedFrom = string(launched)
	g.Force, _ = m["forceUpdateVersion"].(bool)
	return g, nil
}

// Nodes are the group's nodes in the API server, by name.
func Nodes(ctx context.Context, core kubernetes.Interface, group string) ([]corev1.Node, error) {
	list, err := core.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeGroupLabel + "=" + group})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// Launch starts n nodes of the group: each instance's kubelet registers its Node, Ready,
// with the group's labels and taints and EKS's own labels. Names follow EKS's (the instance's
// private DNS name), the first free ones.
func Launch(ctx context.Context, core kubernetes.Interface, g NodeGroup, n int) ([]string, error) {
	existing, err := core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	taken := map[string]bool{}
	for _, node := range existing.Items {
		taken[node.Name] = true
	}
	var names []string
	for i := 10; len(names) < n; i++ {
		name := fmt.Sprintf("ip-10-0-0-%d.us-west-2.compute.internal", i)
		if taken[name] {
			continue
		}
		zone := g.Zones[(i-10)%len(g.Zones)]
		if err := register(ctx, core, g, name, zone); err != nil {
			return names, err
		}
		names = append(names, name)
	}
	return names, nil
}

func register(ctx context.Context, core kubernetes.Interface, g NodeGroup, name, zone string) error {
	labels := map[string]string{
		corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		corev1.LabelInstanceTypeStable: g.InstanceType, corev1.LabelTopologyZone: zone,
		NodeGroupLabel: g.Name, CapacityTypeLabel: g.CapacityType,
	}
	for k, v := range g.Labels {
		labels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{LaunchAnnotation: g.LaunchedFrom}},
		Spec:       corev1.NodeSpec{Taints: g.Taints, ProviderID: "aws:///" + zone + "/i-" + strings.ReplaceAll(strings.TrimPrefix(name, "ip-"), ".", "-")},
	}
	if _, err := core.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	version := "v1.35.0"
	if g.Version != "" {
		version = "v" + g.Version + ".0"
	}
	return MarkReady(ctx, core, name, t3Medium.capacity, t3Medium.allocatable, version)
}

// MarkReady writes what a kubelet reports once it runs: the machine's capacity and
// allocatable, Ready, and its version.
func MarkReady(ctx context.Context, core kubernetes.Interface, name string, capacity, allocatable corev1.ResourceList, kubeletVersion string) error {
	nodes := core.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Capacity, n.Status.Allocatable = capacity, allocatable
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now}}
		n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: kubeletVersion, OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "containerd://2.1.0"}
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// Update is UpdateNodegroupVersion, run to its end as the provider waits for it:
//
//  1. scale up: new nodes, launched from the new configuration, as many as the group
//     runs old ones (EKS launches up to twice its zones' count and scales back after; the
//     fake launches only what the old nodes' pods need);
//  2. every old node cordoned and labelled to leave external load balancers;
//  3. the old nodes drained one at a time (maxUnavailable 1, the default; EKS picks at
//     random, the fake by name): each pod but DaemonSets' and finished ones is evicted
//     through the eviction API, retried while a PodDisruptionBudget refuses, until it is
//     gone; then the instance terminates (its Node and Lease go). A drain that has not ended
//     within evictionTimeout fails the update with PodEvictionFailure, unless Force;
//  4. an update that fails leaves everything as it is (the new nodes, the cordoned old
//     ones); the next update goes on from there.
//
// Not modelled: the 60 s EKS waits after cordoning a drained node (the e2e's time budget).
func Update(ctx context.Context, core kubernetes.Interface, g NodeGroup, evictionTimeout time.Duration) error {
	nodes, err := Nodes(ctx, core, g.Name)
	if err != nil {
		return err
	}
	var old []corev1.Node
	current := 0
	for _, n := range nodes {
		if n.Annotations[LaunchAnnotation] == g.LaunchedFrom {
			current++
		} else {
			old = append(old, n)
		}
	}
	if len(old) == 0 {
		return nil
	}
	if missing := len(old) - current; missing > 0 {
		if _, err := Launch(ctx, core, g, missing); err != nil {
			return fmt.Errorf("fakeeks: scaling up %s: %w", g.Name, err)
		}
	}
	for _, n := range old {
		if err := cordon(ctx, core, n.Name); err != nil {
			return err
		}
	}
	for _, n := range old {
		if err := drain(ctx, core, n.Name, evictionTimeout); err != nil {
			if !g.Force {
				// EKS's update error, as the provider's waiter reports it.
				return fmt.Errorf("PodEvictionFailure: Reached max retries while trying to evict pods from nodes in node group %s (%s: %v)", g.Name, n.Name, err)
			}
		}
		if err := terminate(ctx, core, n.Name); err != nil {
			return err
		}
	}
	return nil
}

func cordon(ctx context.Context, core kubernetes.Interface, name string) error {
	nodes := core.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = true
		n.Labels[ExcludeFromLBLabel] = "true"
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// drain evicts the node's pods until none is left, or the timeout ends.
func drain(ctx context.Context, core kubernetes.Interface, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var refused error
	for {
		pods, err := core.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		left := 0
		for _, p := range pods.Items {
			if !drained(&p) {
				continue
			}
			left++
			if p.DeletionTimestamp != nil {
				continue // evicted, its containers stopping
			}
			err := core.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
			if err != nil && !apierrors.IsNotFound(err) {
				refused = fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if refused == nil {
				refused = fmt.Errorf("%d pods still on the node", left)
			}
			return refused
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// drained: a drain moves the pod (kubectl drain's rules, which EKS's follow): not a
// DaemonSet's, which stays with its node, and not one that has finished.
func drained(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}

// terminate is the instance leaving: its Node and its Lease go (the pod garbage collector
// removes what was left on it).
func terminate(ctx context.Context, core kubernetes.Interface, name string) error {
	err := core.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = core.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
