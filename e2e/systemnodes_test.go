//go:build e2e

package e2e

// What the system nodes look like after the system node group's update, which the fake AWS
// runs on this API server as EKS does (internal/testsupport/fakeeks). The phases that update
// the group are platformBumped and tagsAndSnapshotEdited.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeeks"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// systemNodesNow are the system nodes (the stack's label), by name.
func systemNodesNow(t *testing.T, ctx context.Context, core kubernetes.Interface) map[string]corev1.Node {
	t.Helper()
	list, err := core.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: wellknown.SystemNodeLabel + "=" + wellknown.SystemNodeValue})
	require.NoError(t, err)
	out := map[string]corev1.Node{}
	for _, n := range list.Items {
		out[n.Name] = n
	}
	return out
}

// systemNodesRolled asserts that the system node group runs only new nodes — none of before
// left, as many as before, each Ready, schedulable, its kubelet at kubeletVersion — and that
// what the stack runs on system nodes was moved onto them by the drain, the controllers and
// the scheduler: Karpenter's and ARC's controllers, every scale set's listener, CoreDNS. It
// returns the new nodes.
func systemNodesRolled(t *testing.T, ctx context.Context, core kubernetes.Interface, before []string, kubeletVersion string) []string {
	t.Helper()
	nodes := systemNodesNow(t, ctx, core)
	var names []string
	for name, n := range nodes {
		assert.NotContains(t, before, name, "an old node is gone once the update ended")
		assert.False(t, n.Spec.Unschedulable, "%s is schedulable", name)
		assert.NotContains(t, n.Spec.Taints, fakeeks.UnschedulableTaint, "%s is not an old node", name)
		assert.Equal(t, kubeletVersion, n.Status.NodeInfo.KubeletVersion, "%s runs the new kubelet", name)
		names = append(names, name)
	}
	slices.Sort(names)
	require.Len(t, names, len(before), "the group runs as many nodes as before")

	wants := []string{wellknown.KarpenterNamespace + "/karpenter", wellknown.ARCNamespace + "/arc-gha-rs-controller", "kube-system/coredns"}
	for _, scaleSet := range configuredScaleSets(t) {
		wants = append(wants, wellknown.ARCNamespace+"/"+scaleSet+"-listener")
	}
	var missing []string
	if !assert.Eventually(t, func() bool {
		missing = nil
		for _, want := range wants {
			ns, prefix, _ := strings.Cut(want, "/")
			pods, err := core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			moved := slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
				return strings.HasPrefix(p.Name, prefix) && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && slices.Contains(names, p.Spec.NodeName)
			})
			if !moved {
				missing = append(missing, want)
			}
		}
		return len(missing) == 0
	}, 30*time.Second, 250*time.Millisecond) {
		t.Errorf("not running on a new system node %v: %v", names, missing)
	}
	return names
}
