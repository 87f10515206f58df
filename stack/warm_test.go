package stack_test

// Warm capacity under mocks: per pool window, a CronJob in the window's zone whose Job keeps
// that many placeholders up until the window's end; a placeholder asks what a job's GPU pod
// asks, pulls what a job will run, preempts nothing and is preempted by any job, and passes
// the restricted Pod Security level by upstream's own evaluator. make e2e runs a window
// through the real CronJob, Job and scheduler controllers and the real Karpenter.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// What the program registers for warm windows: nothing without one; a CronJob per window
// (none for a twin), each deleted before its pool's NodePool; one PriorityClass; the
// placeholders' namespace at the restricted level, with a deny-all policy. What a window's
// CronJob is, is k8s/warm_test.go's.
func TestWarmWindows(t *testing.T) {
	none := runDev(t)
	assert.Empty(t, none.all("kubernetes:batch/v1:CronJob"), "no warm window: no placeholder, no namespace for them")
	assert.Empty(t, none.all("kubernetes:scheduling.k8s.io/v1:PriorityClass"))

	m := runDev(t, "gpuPools", testkit.WarmPools)
	cronJobs := map[string]batchv1.CronJob{}
	for _, r := range m.all("kubernetes:batch/v1:CronJob") {
		var cj batchv1.CronJob
		decodeInputs(t, r, &cj)
		cronJobs[cj.Name] = cj
		assert.Equal(t, wellknown.WarmNamespace, cj.Namespace)
		pool := cj.Spec.JobTemplate.Spec.Template.Labels[wellknown.WarmPoolLabel]
		assert.Contains(t, r.Deps(), "kubernetes:karpenter.sh/v1:NodePool::gpu-ci-"+pool+"-nodepool", "deleted before its pool's NodePool")
	}
	require.Len(t, cronJobs, 2, "one per window; the on-demand twin keeps nothing warm")
	assert.Contains(t, cronJobs, "gpu-spot-warm-0")
	assert.Contains(t, cronJobs, "gpu-spot-container-warm-0")

	pc := m.one(t, "kubernetes:scheduling.k8s.io/v1:PriorityClass")
	assert.Equal(t, -10.0, pc.Inputs["value"])
	assert.Equal(t, "Never", pc.Inputs["preemptionPolicy"])

	var ns registered
	for _, r := range m.all("kubernetes:core/v1:Namespace") {
		if path(r.Inputs, "metadata", "name") == wellknown.WarmNamespace {
			ns = r
		}
	}
	require.NotEmpty(t, ns.Name, "the placeholders' namespace")
	assert.Equal(t, "restricted", path(ns.Inputs, "metadata", "labels", psaapi.EnforceLevelLabel))
	assert.Contains(t, names(m.all("kubernetes:networking.k8s.io/v1:NetworkPolicy")), "gpu-ci-warm-"+k8s.DenyAllPolicy)
}
