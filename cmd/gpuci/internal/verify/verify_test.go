package verify_test

// gpuci verify against client-go fakes: healthy, idle, busy, and each failure.

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/verify"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakecluster"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// verifyCluster runs gpuci verify's checks on a fake cluster, against the dev stack.
func verifyCluster(t *testing.T, c fakecluster.Cluster) ([]verify.Check, string) {
	t.Helper()
	kube, dyn := c.Clients()
	checks := verify.Run(context.Background(), kube, dyn, testkit.DevConfig(t))
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
	checks, out := verifyCluster(t, fakecluster.Healthy())
	assert.True(t, verify.AllOK(checks), out)
	assert.Len(t, checks, 10, out) // a NodePool and a scale set for each of dev's three pools (a twin included)
	assert.Contains(t, out, "✓ 1 system node(s) of type t3.medium, Ready — 1 found: ip-10-0-1-1 (t3.medium, Ready)")
	assert.Contains(t, out, "✓ GPU nodes up (0 when idle) — 0: none")
	assert.Contains(t, out, "✓ runner scale set lux-gpu-t4 — 0 runner(s); labels [self-hosted linux amd64 cuda gpu t4]")
}

func TestVerifyShowsGPUNodesAtWork(t *testing.T) {
	c := fakecluster.Healthy()
	c.Objects = append(c.Objects, fakecluster.Node("ip-10-0-2-2", map[string]string{"karpenter.sh/nodepool": "gpu-spot", "node.kubernetes.io/instance-type": "g4dn.xlarge"}, true, 1))
	checks, out := verifyCluster(t, c)
	assert.True(t, verify.AllOK(checks), out)
	assert.Contains(t, out, "GPU nodes up (0 when idle) — 1: ip-10-0-2-2 (gpu-spot, g4dn.xlarge, 1 GPU allocatable)")
}

func TestVerifyFailures(t *testing.T) {
	cases := map[string]struct {
		breakIt func(c *fakecluster.Cluster)
		failing string
		want    string
	}{
		"no system node": {func(c *fakecluster.Cluster) { c.Objects = c.Objects[1:] }, "system node", "0 found: none"},
		"Karpenter pending": {func(c *fakecluster.Cluster) {
			c.Objects[1] = fakecluster.Pod("kube-system", "karpenter-abc", map[string]string{"app.kubernetes.io/name": "karpenter"}, corev1.PodPending)
		}, "Karpenter controller running", "kube-system/karpenter-abc Pending"},
		"NodePool not ready": {func(c *fakecluster.Cluster) {
			c.Custom[0].(*unstructured.Unstructured).Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "NodeClassNotReady"}}}
		}, "NodePool gpu-spot Ready", "Ready=False NodeClassNotReady"},
		"NodePool missing":       {func(c *fakecluster.Cluster) { c.Custom = c.Custom[1:] }, "NodePool gpu-spot Ready", "not found"},
		"ARC controller missing": {func(c *fakecluster.Cluster) { c.Objects = c.Objects[:2] }, "ARC controller running", "none"},
		"scale set labels drifted": {func(c *fakecluster.Cluster) {
			c.Custom[1].(*unstructured.Unstructured).Object["spec"] = map[string]any{"runnerScaleSetLabels": []any{"gpu"}}
		}, "runner scale set lux-gpu-t4", "labels are fixed when the scale set is created"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakecluster.Healthy()
			tc.breakIt(&c)
			checks, out := verifyCluster(t, c)
			assert.False(t, verify.AllOK(checks))
			require.Len(t, failed(checks), 1, out)
			assert.True(t, strings.HasPrefix(failed(checks)[0], tc.failing) || strings.Contains(failed(checks)[0], tc.failing), out)
			assert.Contains(t, out, "✗ ")
			assert.Contains(t, out, tc.want)
		})
	}
}

// With retryScaleSetName, verify looks for the retry runner's scale set too, in its own
// runner group: one GitHub has no group for stays where it was, and verify says so.
func TestVerifyRetryRunner(t *testing.T) {
	cfg := testkit.DevConfig(t)
	cfg.RetryRunner = config.RetryRunner{ScaleSetName: "lux-gpu-retry", RunnerGroup: "lux-gpu-retry"}
	run := func(c fakecluster.Cluster) ([]verify.Check, string) {
		kube, dyn := c.Clients()
		checks := verify.Run(context.Background(), kube, dyn, cfg)
		var out bytes.Buffer
		verify.Write(&out, checks)
		return checks, out.String()
	}
	const check = "retry runner scale set lux-gpu-retry in runner group lux-gpu-retry"
	checks, out := run(fakecluster.Healthy())
	assert.Equal(t, []string{check}, failed(checks), out)
	assert.Contains(t, out, "not found")

	withRetrySet := func(group string) fakecluster.Cluster {
		c := fakecluster.Healthy()
		ars := fakecluster.Custom(schema.GroupVersionKind{Group: "actions.github.com", Version: "v1alpha1", Kind: "AutoscalingRunnerSet"}, "arc-runners", "lux-gpu-retry", map[string]any{})
		if group != "" {
			ars.SetAnnotations(map[string]string{wellknown.ARCRunnerGroupAnnotation: group})
		}
		c.Custom = append(c.Custom, ars)
		return c
	}
	checks, out = run(withRetrySet("LUX-GPU-RETRY"))
	assert.True(t, verify.AllOK(checks), out)
	assert.Contains(t, out, "✓ "+check+" — 0 runner(s); in runner group LUX-GPU-RETRY")

	for _, group := range []string{"Default", ""} {
		checks, out = run(withRetrySet(group))
		assert.Equal(t, []string{check}, failed(checks), out)
		assert.Contains(t, out, "create that group in the organization's Actions settings", "group %q", group)
	}
}
