package fakeeks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Labels EKS puts on a managed node group's nodes (its own, besides the group's labels).
const (
	NodeGroupLabel    = "eks.amazonaws.com/nodegroup"
	CapacityTypeLabel = "eks.amazonaws.com/capacityType"
	// LaunchAnnotation records what a node's instance was launched from (its launch template
	// version, Kubernetes version and AMI release): EC2 knows it, a Node does not, so the fake
	// writes it on the Node it registers.
	LaunchAnnotation = "fakeeks.lux-gpu-ci/launched-from"
)

// machines is what each instance type the system nodes may be registers in EKS. A t3.medium
// (AL2023, the VPC CNI's 17 pods): 2 vCPUs less kube-reserved 70m; 3.76 GiB of memory less
// kube-reserved 442 MiB (255 MiB + 11 MiB × 17 pods) and the 100 MiB eviction threshold
// (amazon-eks-ami's nodeadm kubelet config).
var machines = map[string]struct{ capacity, allocatable corev1.ResourceList }{
	"t3.medium": {
		capacity: corev1.ResourceList{
			corev1.ResourceCPU: kresource.MustParse("2"), corev1.ResourceMemory: kresource.MustParse("3943360Ki"),
			corev1.ResourcePods: kresource.MustParse("17"), corev1.ResourceEphemeralStorage: kresource.MustParse("20Gi"),
		},
		allocatable: corev1.ResourceList{
			corev1.ResourceCPU: kresource.MustParse("1930m"), corev1.ResourceMemory: kresource.MustParse("3388352Ki"),
			corev1.ResourcePods: kresource.MustParse("17"), corev1.ResourceEphemeralStorage: kresource.MustParse("18Gi"),
		},
	},
}

// nodeDomain ends an EKS node's name: the instance's private DNS name in the e2e's region.
const nodeDomain = ".us-west-2.compute.internal"

// Nodes are the group's nodes in the API server, by name.
func Nodes(ctx context.Context, core kubernetes.Interface, group string) ([]corev1.Node, error) {
	list, err := core.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeGroupLabel + "=" + group})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// Launch starts n nodes of the group, round-robin over its zones: each instance's kubelet
// registers its Node, Ready, with the group's labels and taints and EKS's own labels. Names
// follow EKS's (the instance's private DNS name); a new instance never takes a name an
// earlier one of the group had.
func Launch(ctx context.Context, core kubernetes.Interface, g NodeGroup, n int) ([]string, error) {
	machine, ok := machines[g.InstanceType]
	if !ok {
		return nil, fmt.Errorf("fakeeks: node group %s runs %q: the fake knows what %v register, add its capacity", g.Name, g.InstanceType, slices.Sorted(maps.Keys(machines)))
	}
	nodes, err := Nodes(ctx, core, g.Name)
	if err != nil {
		return nil, err
	}
	next := 10
	for _, node := range nodes {
		if i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(node.Name, "ip-10-0-0-"), nodeDomain)); err == nil && i >= next {
			next = i + 1
		}
	}
	var names []string
	for j := range n {
		name := fmt.Sprintf("ip-10-0-0-%d%s", next+j, nodeDomain)
		if err := register(ctx, core, g, machine.capacity, machine.allocatable, name, g.Zones[j%len(g.Zones)]); err != nil {
			return names, err
		}
		names = append(names, name)
	}
	return names, nil
}

func register(ctx context.Context, core kubernetes.Interface, g NodeGroup, capacity, allocatable corev1.ResourceList, name, zone string) error {
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
	return MarkReady(ctx, core, name, capacity, allocatable, "v"+g.Version+".0")
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
