package main

// gpuci verify against client-go fakes: healthy, idle, busy, and each failure.

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/luxfi/lux-gpu-ci/internal/verify"
)

type cluster struct {
	objects []runtime.Object
	custom  []runtime.Object
}

func node(name string, labels map[string]string, ready bool, gpus int64) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	if gpus > 0 {
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return n
}

func pod(ns, name string, labels map[string]string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
}

func custom(gvk schema.GroupVersionKind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// healthy is an idle, healthy dev cluster.
func healthy() cluster {
	return cluster{
		objects: []runtime.Object{
			node("ip-10-0-1-1", map[string]string{"lux-gpu-ci.luxfi.com/node-role": "system", "node.kubernetes.io/instance-type": "t3.medium"}, true, 0),
			pod("kube-system", "karpenter-abc", map[string]string{"app.kubernetes.io/name": "karpenter"}, corev1.PodRunning),
			pod("arc-systems", "arc-gha-rs-controller-xyz", map[string]string{"app.kubernetes.io/part-of": "gha-rs-controller"}, corev1.PodRunning),
		},
		custom: []runtime.Object{
			custom(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, "", "gpu-t4", map[string]any{
				"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready"}}},
			}),
			custom(schema.GroupVersionKind{Group: "actions.github.com", Version: "v1alpha1", Kind: "AutoscalingRunnerSet"}, "arc-runners", "lux-gpu-t4", map[string]any{
				"spec":   map[string]any{"runnerScaleSetLabels": []any{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4"}},
				"status": map[string]any{"currentRunners": int64(0)},
			}),
		},
	}
}

func (c cluster) verify(t *testing.T) ([]verify.Check, string) {
	t.Helper()
	kube := kubefake.NewClientset(c.objects...)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		verify.NodePools: "NodePoolList", verify.RunnerSets: "AutoscalingRunnerSetList",
	}, c.custom...)
	checks := verify.Run(context.Background(), kube, dyn, devConfig(t))
	var out bytes.Buffer
	verify.Write(&out, checks)
	return checks, out.String()
}

func failed(checks []verify.Check) []string {
	var names []string
	for _, c := range checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	return names
}

func TestVerifyHealthyIdleCluster(t *testing.T) {
	checks, out := healthy().verify(t)
	assert.True(t, verify.AllOK(checks), out)
	assert.Len(t, checks, 6, out)
	assert.Contains(t, out, "✓ 1 system node(s) of type t3.medium, Ready — 1 found: ip-10-0-1-1 (t3.medium, Ready)")
	assert.Contains(t, out, "✓ GPU nodes up (0 when idle) — 0: none")
	assert.Contains(t, out, "✓ runner scale set lux-gpu-t4 — 0 runner(s); labels [self-hosted linux amd64 cuda gpu t4]")
}

func TestVerifyShowsGPUNodesAtWork(t *testing.T) {
	c := healthy()
	c.objects = append(c.objects, node("ip-10-0-2-2", map[string]string{"karpenter.sh/nodepool": "gpu-t4", "node.kubernetes.io/instance-type": "g4dn.xlarge"}, true, 1))
	checks, out := c.verify(t)
	assert.True(t, verify.AllOK(checks), out)
	assert.Contains(t, out, "GPU nodes up (0 when idle) — 1: ip-10-0-2-2 (gpu-t4, g4dn.xlarge, 1 GPU allocatable)")
}

func TestVerifyFailures(t *testing.T) {
	cases := map[string]struct {
		breakIt func(c *cluster)
		failing string
		want    string
	}{
		"no system node": {func(c *cluster) { c.objects = c.objects[1:] }, "system node", "0 found: none"},
		"Karpenter pending": {func(c *cluster) {
			c.objects[1] = pod("kube-system", "karpenter-abc", map[string]string{"app.kubernetes.io/name": "karpenter"}, corev1.PodPending)
		}, "Karpenter controller running", "kube-system/karpenter-abc Pending"},
		"NodePool not ready": {func(c *cluster) {
			c.custom[0].(*unstructured.Unstructured).Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "NodeClassNotReady"}}}
		}, "NodePool gpu-t4 Ready", "Ready=False NodeClassNotReady"},
		"NodePool missing":       {func(c *cluster) { c.custom = c.custom[1:] }, "NodePool gpu-t4 Ready", "not found"},
		"ARC controller missing": {func(c *cluster) { c.objects = c.objects[:2] }, "ARC controller running", "none"},
		"scale set labels drifted": {func(c *cluster) {
			c.custom[1].(*unstructured.Unstructured).Object["spec"] = map[string]any{"runnerScaleSetLabels": []any{"gpu"}}
		}, "runner scale set lux-gpu-t4", "labels are fixed when the scale set is created"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := healthy()
			tc.breakIt(&c)
			checks, out := c.verify(t)
			assert.False(t, verify.AllOK(checks))
			require.Len(t, failed(checks), 1, out)
			assert.True(t, strings.HasPrefix(failed(checks)[0], tc.failing) || strings.Contains(failed(checks)[0], tc.failing), out)
			assert.Contains(t, out, "✗ ")
			assert.Contains(t, out, tc.want)
		})
	}
}
