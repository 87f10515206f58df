package k8s_test

// A pool's warm windows as the builders make them: each window's CronJob and its placeholder
// pods (stack/warm_test.go checks what the program registers).

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

func TestWarmWindowCronJobs(t *testing.T) {
	cfg := testkit.DevConfig(t, "gpuPools", testkit.WarmPools)
	pools := map[string]config.GPUPool{}
	for _, p := range cfg.GPUPools {
		pools[p.Name] = p
	}
	cronJob := func(pool string) batchv1.CronJob {
		cj, err := k8s.WarmCronJob(pools[pool], 0, testCache)
		require.NoError(t, err)
		return cj
	}

	week := cronJob("gpu-spot")
	assert.Equal(t, "gpu-spot-warm-0", week.Name)
	assert.Equal(t, "56 7 * * 1,2,3,4,5", week.Spec.Schedule, "08:00 less the runner form's lead (4 min): its nodes up and pulled at 08:00")
	require.NotNil(t, week.Spec.TimeZone)
	assert.Equal(t, "Europe/Berlin", *week.Spec.TimeZone, "the controller reads the schedule in the window's zone")
	job := week.Spec.JobTemplate.Spec
	assert.Equal(t, int32(2), *job.Parallelism, "a placeholder per warm node")
	assert.Equal(t, int64(11*3600+4*60), *job.ActiveDeadlineSeconds, "its deadline is the window's end")
	assert.Greater(t, *job.Completions, int32(1000), "ended by its deadline, not by the preemptions it counts")
	require.NotNil(t, job.PodFailurePolicy)
	assert.Equal(t, batchv1.PodFailurePolicyActionIgnore, job.PodFailurePolicy.Rules[0].Action)
	assert.Equal(t, corev1.DisruptionTarget, job.PodFailurePolicy.Rules[0].OnPodConditions[0].Type)
	assert.Equal(t, batchv1.ReplaceConcurrent, week.Spec.ConcurrencyPolicy)

	// The placeholder asks what the pool's runner (the pod that holds the GPU) asks, on the
	// same nodes, and pulls its image through the cache.
	p := job.Template.Spec
	runner, err := k8s.RunnerTemplate(pools["gpu-spot"], testCache)
	require.NoError(t, err)
	assert.Equal(t, runner.Spec.NodeSelector, p.NodeSelector)
	assert.Equal(t, runner.Spec.Tolerations, p.Tolerations)
	assert.Equal(t, runner.Spec.Containers[0].Resources, p.Containers[0].Resources, "one placeholder frees exactly one job's share")
	assert.Equal(t, runner.Spec.Containers[0].Image, p.Containers[0].Image, "the runner image, from the same cache")
	assert.Equal(t, wellknown.WarmPriorityClass, p.PriorityClassName)
	assert.NotContains(t, job.Template.Annotations, wellknown.DoNotDisrupt, "a warm node may be drifted or expired")
	assert.Len(t, p.Containers, 1, "a runner-form pool pulls only its runner image")
	assert.Empty(t, p.InitContainers)

	cont := cronJob("gpu-spot-container")
	assert.Equal(t, "52 9 * * 0,6", cont.Spec.Schedule, "the container form's lead is 8 min: its CUDA pull")
	assert.Equal(t, "UTC", *cont.Spec.TimeZone)
	// The job images are pulled by containers after hold's, not by init containers: a job
	// image without sh cannot start its pull, and that must not fail the placeholder (the
	// kubelet fails a pod whose init container fails; e2e/kubelet_standin_test.go).
	cp := cont.Spec.JobTemplate.Spec.Template.Spec
	assert.Empty(t, cp.InitContainers, "no pull can fail the placeholder")
	require.Len(t, cp.Containers, 2)
	assert.Equal(t, "hold", cp.Containers[0].Name, "hold, with the runner image, first: a job's fs-init need not wait for the CUDA pull")
	assert.Equal(t, runner.Spec.Containers[0].Image, cp.Containers[0].Image)
	assert.Equal(t, testCache["docker.io"]+"/nvidia/cuda:12.8.1-devel-ubuntu24.04", cp.Containers[1].Image, "the job's CUDA image, through the cache, onto the warm node")
	// ... and its failure is none of the Job's: the pod failure policy ignores it, by name.
	rules := cont.Spec.JobTemplate.Spec.PodFailurePolicy.Rules
	require.Len(t, rules, 2)
	require.NotNil(t, rules[1].OnExitCodes)
	assert.Equal(t, batchv1.PodFailurePolicyActionIgnore, rules[1].Action)
	assert.Equal(t, cp.Containers[1].Name, *rules[1].OnExitCodes.ContainerName)
	assert.Equal(t, batchv1.PodFailurePolicyOnExitCodesOpNotIn, rules[1].OnExitCodes.Operator)
	assert.Equal(t, []int32{0}, rules[1].OnExitCodes.Values, "any exit but 0, StartError's 128 among them")
	assert.Len(t, job.PodFailurePolicy.Rules, 1, "a runner-form pool's Job ignores only disruptions")

	// The restricted level, by upstream's evaluator.
	for _, cj := range []batchv1.CronJob{week, cont} {
		assertRestricted(t, cj.Name+"'s placeholder", cj.Spec.JobTemplate.Spec.Template)
	}
}

// Below every job, and never preempting; above the value at which Karpenter would take the
// placeholder's node for empty (an eviction cost of 1 + priority/2^25 must stay positive).
func TestWarmPriorityClass(t *testing.T) {
	pc := k8s.WarmPriorityClass()
	assert.Less(t, pc.Value, int32(0))
	assert.Greater(t, 1+float64(pc.Value)/(1<<25), 0.0)
	require.NotNil(t, pc.PreemptionPolicy)
	assert.Equal(t, corev1.PreemptNever, *pc.PreemptionPolicy)
}
