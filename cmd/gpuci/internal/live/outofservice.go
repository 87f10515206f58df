package live

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// GPUOutOfService is the reason of the event the in-cluster retrier records on a GPU node it
// took out of service, reported as RetrierReporter.
const GPUOutOfService = "GPUOutOfService"

// RetrierReporter is the component the retrier's events are reported by. Only the retrier's
// account may create events (in "default", k8s.OutOfServiceRules): the retry runner's, where
// a job runs, only reads them.
const RetrierReporter = "gpuci-retrier"

// WithdrawnGPUs is how many of a node's GPUs its device plugin has withdrawn: capacity less
// allocatable. The kubelet counts a plugin's healthy devices in both and its unhealthy ones in
// capacity only (kubernetes pkg/kubelet/cm/devicemanager/manager.go, GetCapacity, read at
// 7510f32987fe). NVIDIA's device plugin marks a GPU unhealthy on an NVML critical XID event
// and sends it so to the kubelet (k8s-device-plugin v0.19.3 internal/rm/health.go:133-170,
// internal/plugin/server.go:276-280), never back ("there is no way to recover from the
// Unhealthy state", server.go:277); the XIDs of an application's own errors (13, 31, 43, 45,
// 68, 109: health.go:232-240) are ignored, so a job's faulty kernel never withdraws a GPU.
// The figure is the node's own, from a DaemonSet with the host's driver: nothing a job writes.
func WithdrawnGPUs(n corev1.Node) (withdrawn, capacity int64) {
	c, a := n.Status.Capacity[wellknown.GPUResource], n.Status.Allocatable[wellknown.GPUResource]
	return max(c.Value()-a.Value(), 0), c.Value()
}

// OutOfService takes the pools' GPU nodes whose device plugin withdrew a GPU out of service
// (the in-cluster retrier, before each pass): it records GPUOutOfService on the Node and
// deletes the node's NodeClaim. Karpenter then taints the node karpenter.sh/disrupted
// (NoSchedule), drains it — a running job's pod (do-not-disrupt) is never evicted, only waited
// for, up to the NodeClaim's termination grace period — terminates the instance, and launches a
// fresh node for whatever is pending (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/node/termination/controller.go:130-151, terminator/terminator.go:96-117,
// pkg/utils/pod/scheduling.go:58-77). Karpenter's own node repair acts on the EKS node
// monitoring agent's AcceleratedHardwareReady after 10 minutes, behind an alpha gate that is
// off by default (karpenter-provider-aws v1.14.1 pkg/cloudprovider/cloudprovider.go:321-323,
// charts/karpenter/values.yaml:231-233): this acts at the retrier's next pass.
// A withdrawn GPU already takes no new pod (its node's allocatable lost it); this replaces
// the node, which would otherwise be kept and paid for with the GPU it has left, and is what
// the retrier's evidence (ReadInterruptions) and gpuci doctor read.
type OutOfService struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Pools are the stack's GPU pools' names (wellknown.PoolLabel on their nodes, cool-down
	// NodePools' included).
	Pools []string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Sweep takes every such node out of service once (a node whose NodeClaim is already being
// deleted is left to Karpenter), and says what it did, one line a node.
func (o OutOfService) Sweep(ctx context.Context) ([]string, error) {
	if len(o.Pools) == 0 {
		return nil, nil
	}
	nodes, err := o.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: wellknown.PoolLabel + " in (" + strings.Join(o.Pools, ",") + ")"})
	if err != nil {
		return nil, fmt.Errorf("listing the pools' nodes: %w", err)
	}
	var broken []corev1.Node
	for _, n := range nodes.Items {
		if w, _ := WithdrawnGPUs(n); w > 0 && n.DeletionTimestamp == nil {
			broken = append(broken, n)
		}
	}
	if len(broken) == 0 {
		return nil, nil
	}
	claims, err := o.Dynamic.Resource(wellknown.NodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	var did []string
	for _, n := range broken {
		claim := claimOf(claims.Items, n.Name)
		if claim == nil || claim.GetDeletionTimestamp() != nil {
			continue
		}
		msg := OutOfServiceMessage(n, claim.GetName())
		if err := o.record(ctx, n, msg); err != nil {
			return did, err
		}
		if err := o.Dynamic.Resource(wellknown.NodeClaims).Delete(ctx, claim.GetName(), metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: new(claim.GetUID())},
		}); err != nil {
			return did, fmt.Errorf("deleting NodeClaim %s of node %s: %w", claim.GetName(), n.Name, err)
		}
		did = append(did, msg)
	}
	return did, nil
}

// OutOfServiceMessage says which node, what it is, and why: what gpuci doctor lists.
func OutOfServiceMessage(n corev1.Node, claim string) string {
	w, c := WithdrawnGPUs(n)
	return fmt.Sprintf("node %s (%s, %s, %s, pool %s): its device plugin withdrew %d of its %d GPU(s) as unhealthy; NodeClaim %s deleted, Karpenter replaces the node",
		n.Name, orNone(n.Labels[corev1.LabelInstanceTypeStable]), orNone(n.Labels[corev1.LabelTopologyZone]), orNone(n.Labels["karpenter.sh/capacity-type"]),
		orNone(n.Labels[wellknown.PoolLabel]), w, c, claim)
}

func orNone(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// claimOf is the NodeClaim whose node is name.
func claimOf(claims []unstructured.Unstructured, name string) *unstructured.Unstructured {
	for i := range claims {
		if node, _, _ := unstructured.NestedString(claims[i].Object, "status", "nodeName"); node == name {
			return &claims[i]
		}
	}
	return nil
}

// record writes the GPUOutOfService event on the Node (a cluster-scoped object's events are
// in "default"), as RetrierReporter.
func (o OutOfService) record(ctx context.Context, n corev1.Node, msg string) error {
	now := metav1.NewTime(o.now())
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: n.Name + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		Reason:         GPUOutOfService, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: RetrierReporter},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: RetrierReporter, ReportingInstance: RetrierReporter,
	}
	if _, err := o.Kube.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, e, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("recording %s on node %s: %w", GPUOutOfService, n.Name, err)
	}
	return nil
}

func (o OutOfService) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}
