package stack_test

// Warm capacity under mocks: per pool window, a CronJob in the window's zone whose Job keeps
// that many placeholders up until the window's end; a placeholder asks what a job's GPU pod
// asks, pulls what a job will run, preempts nothing and is preempted by any job, and passes
// the restricted Pod Security level by upstream's own evaluator. make e2e runs a window
// through the real CronJob, Job and scheduler controllers and the real Karpenter.

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// devWithWarm is the dev stack's two pools with warm windows: the runner-form pool on
// weekdays in Berlin, the container-form pool with its CUDA image on weekends in UTC.
const devWithWarm = `[
	{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 2, "maxRunners": 1, "runnerScaleSetName": "lux-gpu-t4",
	 "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4"], "onDemandRetry": true,
	 "warm": {"timeZone": "Europe/Berlin", "windows": [{"days": "mon-fri", "from": "08:00", "to": "19:00", "nodes": 2}]}},
	{"name": "gpu-spot-container", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 1, "maxRunners": 1, "runnerScaleSetName": "lux-gpu-t4-container",
	 "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4-container"], "jobForm": "container",
	 "warm": {"windows": [{"days": "sat,sun", "from": "10:00", "to": "12:30", "nodes": 1}], "images": ["nvidia/cuda:12.8.1-devel-ubuntu24.04"]}}
]`

func TestWarmWindows(t *testing.T) {
	none := runDev(t)
	assert.Empty(t, none.all("kubernetes:batch/v1:CronJob"), "no warm window: no placeholder, no namespace for them")
	assert.Empty(t, none.all("kubernetes:scheduling.k8s.io/v1:PriorityClass"))

	m := runDev(t, "gpuPools", devWithWarm)
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

	week := cronJobs["gpu-spot-warm-0"]
	assert.Equal(t, "0 8 * * 1,2,3,4,5", week.Spec.Schedule)
	require.NotNil(t, week.Spec.TimeZone)
	assert.Equal(t, "Europe/Berlin", *week.Spec.TimeZone, "the controller reads the schedule in the window's zone")
	job := week.Spec.JobTemplate.Spec
	assert.Equal(t, int32(2), *job.Parallelism, "a placeholder per warm node")
	assert.Equal(t, int64(11*3600), *job.ActiveDeadlineSeconds, "its deadline is the window's end")
	assert.Greater(t, *job.Completions, int32(1000), "ended by its deadline, not by the preemptions it counts")
	require.NotNil(t, job.PodFailurePolicy)
	assert.Equal(t, batchv1.PodFailurePolicyActionIgnore, job.PodFailurePolicy.Rules[0].Action)
	assert.Equal(t, corev1.DisruptionTarget, job.PodFailurePolicy.Rules[0].OnPodConditions[0].Type)
	assert.Equal(t, batchv1.ReplaceConcurrent, week.Spec.ConcurrencyPolicy)

	// The placeholder asks what the pool's runner (the pod that holds the GPU) asks, on the
	// same nodes, and pulls its image through the cache.
	p := job.Template.Spec
	var runner corev1.PodSpec
	rel := releaseNamed(t, m, "lux-gpu-t4")
	b, err := json.Marshal(path(rel.Inputs["values"], "template", "spec"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &runner))
	assert.Equal(t, runner.NodeSelector, p.NodeSelector)
	assert.Equal(t, runner.Tolerations, p.Tolerations)
	assert.Equal(t, runner.Containers[0].Resources, p.Containers[0].Resources, "one placeholder frees exactly one job's share")
	assert.Equal(t, runner.Containers[0].Image, p.Containers[0].Image, "the runner image, from the same cache")
	assert.Equal(t, wellknown.WarmPriorityClass, p.PriorityClassName)
	assert.NotContains(t, job.Template.Annotations, wellknown.DoNotDisrupt, "a warm node may be drifted or expired")
	assert.Empty(t, p.InitContainers, "a runner-form pool pulls only its runner image")

	cont := cronJobs["gpu-spot-container-warm-0"]
	assert.Equal(t, "0 10 * * 0,6", cont.Spec.Schedule)
	assert.Equal(t, "UTC", *cont.Spec.TimeZone)
	pulls := cont.Spec.JobTemplate.Spec.Template.Spec.InitContainers
	require.Len(t, pulls, 1)
	assert.Equal(t, testRegistry+"/lux-gpu-ci/docker-hub/nvidia/cuda:12.8.1-devel-ubuntu24.04", pulls[0].Image, "the job's CUDA image, through the cache, onto the warm node")

	// Below every job, and never preempting; above the value at which Karpenter would take the
	// placeholder's node for empty (an eviction cost of 1 + priority/2^25 must stay positive).
	pc := m.one(t, "kubernetes:scheduling.k8s.io/v1:PriorityClass")
	assert.Equal(t, -10.0, pc.Inputs["value"])
	assert.Less(t, pc.Inputs["value"].(float64), 0.0)
	assert.Greater(t, 1+pc.Inputs["value"].(float64)/(1<<25), 0.0)
	assert.Equal(t, "Never", pc.Inputs["preemptionPolicy"])

	// The restricted level, by upstream's evaluator, and enforced on the namespace.
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	for name, cj := range cronJobs {
		tmpl := cj.Spec.JobTemplate.Spec.Template
		for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec) {
			assert.True(t, r.Allowed, "%s's placeholder: %s: %s", name, r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
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
