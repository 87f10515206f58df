package live_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakecluster"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// gpuNode is a pool's GPU node as the kubelet reports it: capacity every GPU its device
// plugin registered, allocatable the healthy ones.
func gpuNode(name, pool string, capacity, allocatable int64) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{
			wellknown.PoolLabel: pool, corev1.LabelInstanceTypeStable: "g4dn.xlarge", corev1.LabelTopologyZone: "us-west-2a", "karpenter.sh/capacity-type": "spot",
		}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{wellknown.GPUResource: *resource.NewQuantity(capacity, resource.DecimalSI)},
			Allocatable: corev1.ResourceList{wellknown.GPUResource: *resource.NewQuantity(allocatable, resource.DecimalSI)},
		},
	}
}

func nodeClaim(name, node string, deleting bool) runtime.Object {
	u := fakecluster.Custom(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}, "", name, map[string]any{"status": map[string]any{"nodeName": node}})
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		u.SetFinalizers([]string{"karpenter.sh/termination"})
	}
	return u
}

// A node whose device plugin withdrew a GPU is taken out of service once: its event recorded
// as the retrier, its NodeClaim deleted (Karpenter drains and replaces it). A healthy node, a
// node of no pool of the stack's, and a node already going are left alone. The job that ran
// there is then the GPU's, on the cluster's evidence, for a few minutes after it ended; a
// job of a healthy node is not.
func TestABrokenGPUsNodeIsTakenOutOfService(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	c := fakecluster.Cluster{
		Objects: []runtime.Object{
			gpuNode("ip-10-0-3-1", "gpu-spot", 1, 0), // broken
			gpuNode("ip-10-0-3-2", "gpu-spot", 1, 1), // healthy: the control
			gpuNode("ip-10-0-3-3", "someone-elses", 1, 0),
			gpuNode("ip-10-0-3-4", "gpu-spot", 4, 3), // one of four withdrawn, already going
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "arc-runners", Name: "a.s"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "arc-runners", Name: "lux-gpu-t4-x-runner-a"},
				Reason: "Scheduled", Message: "Successfully assigned arc-runners/lux-gpu-t4-x-runner-a to ip-10-0-3-1", LastTimestamp: metav1.NewTime(at.Add(-10 * time.Minute)), Source: corev1.EventSource{Component: "default-scheduler"}},
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "arc-runners", Name: "b.s"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "arc-runners", Name: "lux-gpu-t4-x-runner-b"},
				Reason: "Scheduled", Message: "Successfully assigned arc-runners/lux-gpu-t4-x-runner-b to ip-10-0-3-2", LastTimestamp: metav1.NewTime(at.Add(-10 * time.Minute)), Source: corev1.EventSource{Component: "default-scheduler"}},
			// The same reason written by anyone but the retrier (a job that could create
			// events) is not evidence.
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "forged"}, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-3-2"},
				Reason: live.GPUOutOfService, Message: "forged", LastTimestamp: metav1.NewTime(at), Source: corev1.EventSource{Component: "gpuci-job"}},
		},
		Custom: []runtime.Object{nodeClaim("gpu-spot-a", "ip-10-0-3-1", false), nodeClaim("gpu-spot-b", "ip-10-0-3-2", false),
			nodeClaim("other-c", "ip-10-0-3-3", false), nodeClaim("gpu-spot-d", "ip-10-0-3-4", true)},
	}
	kube, dyn := c.Clients()
	ctx := context.Background()
	o := live.OutOfService{Kube: kube, Dynamic: dyn, Pools: []string{"gpu-spot", "gpu-spot-container"}, Now: func() time.Time { return at }}
	did, err := o.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"node ip-10-0-3-1 (g4dn.xlarge, us-west-2a, spot, pool gpu-spot): its device plugin withdrew 1 of its 1 GPU(s) as unhealthy; NodeClaim gpu-spot-a deleted, Karpenter replaces the node"}, did)

	claims, err := dyn.Resource(wellknown.NodeClaims).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var left []string
	for _, c := range claims.Items {
		left = append(left, c.GetName())
	}
	assert.ElementsMatch(t, []string{"gpu-spot-b", "other-c", "gpu-spot-d"}, left, "only the broken node's NodeClaim is deleted")

	again, err := o.Sweep(ctx)
	require.NoError(t, err)
	assert.Empty(t, again, "once: its NodeClaim is gone")

	in, err := live.ReadInterruptions(ctx, kube, []string{"arc-runners"})
	require.NoError(t, err)
	require.Len(t, in.Events, 1, "the retrier's event, not the forged one")
	assert.Equal(t, live.GPUOutOfService, in.Events[0].Cause)
	assert.Equal(t, []string{"lux-gpu-t4-x-runner-a"}, in.Events[0].Pods)
	assert.Equal(t, []time.Time{at}, in.Interrupted(), "what starts the pass that re-runs its job")

	// The job failed on the broken GPU and ended a minute before the retrier's pass saw it.
	evidence, known, cause := in.Runner("lux-gpu-t4-x-runner-a", at.Add(-9*time.Minute), at.Add(-time.Minute))
	assert.True(t, known)
	assert.Equal(t, live.GPUOutOfService, cause)
	assert.Contains(t, evidence, "was on node ip-10-0-3-1, taken out of service for a broken GPU at 2026-12-07T10:00:00Z")
	_, _, cause = in.Runner("lux-gpu-t4-x-runner-a", at.Add(-20*time.Minute), at.Add(-5*time.Minute))
	assert.Empty(t, cause, "a job that ended five minutes before the GPU was found broken is not the GPU's")
	_, known, cause = in.Runner("lux-gpu-t4-x-runner-b", at.Add(-9*time.Minute), at.Add(-time.Minute))
	assert.True(t, known)
	assert.Empty(t, cause, "the control job's node is healthy (and the forged event names it)")
}

// The retrier's message says where and what: gpuci doctor groups it by type and zone.
func TestWithdrawnGPUs(t *testing.T) {
	w, c := live.WithdrawnGPUs(*gpuNode("n", "p", 4, 3))
	assert.Equal(t, []int64{1, 4}, []int64{w, c})
	w, c = live.WithdrawnGPUs(*gpuNode("n", "p", 1, 1))
	assert.Equal(t, []int64{0, 1}, []int64{w, c})
	w, _ = live.WithdrawnGPUs(corev1.Node{})
	assert.Zero(t, w, "a node with no GPU reported")
}
