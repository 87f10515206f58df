package k8s_test

// A container-form pool's job pod template, as the container hooks read it.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// The template file, read back strictly (an unknown field would fail), is the pod that holds
// the pool's GPU: on its nodes, tolerating their taint, never disrupted while the job runs,
// with no account token where the job's code runs, and merged into the hooks' job container.
func TestJobPodTemplateAsTheHooksReadIt(t *testing.T) {
	pool := config.DefaultPool()
	pool.Name, pool.RunnerScaleSetName, pool.JobForm = "gpu-spot-container", "lux-gpu-t4-container", config.JobFormContainer
	file, err := k8s.JobPodTemplateYAML(pool)
	require.NoError(t, err)
	var job corev1.PodTemplateSpec
	require.NoError(t, yaml.UnmarshalStrict([]byte(file), &job))
	assert.Equal(t, map[string]string{"karpenter.sh/do-not-disrupt": "true"}, job.Annotations)
	assert.Equal(t, map[string]string{"lux-gpu-ci.luxfi.com/pool": "gpu-spot-container", "lux-gpu-ci.luxfi.com/runner-role": "job", "lux-gpu-ci.luxfi.com/compiler-cache": "gpu-spot-container"}, job.Labels,
		"its pool, its role for the NetworkPolicies (a job's code runs here) and the compiler cache server it may reach")
	require.NotNil(t, job.Spec.AutomountServiceAccountToken)
	assert.False(t, *job.Spec.AutomountServiceAccountToken, "no token in the pod where the job's code runs (the hooks keep this key of the template)")
	assert.Equal(t, map[string]string{"lux-gpu-ci.luxfi.com/pool": "gpu-spot-container"}, job.Spec.NodeSelector, "the pool's nodes, its cool-down NodePool's included")
	taint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	assert.True(t, corev1helpers.TolerationsTolerateTaint(klog.Background(), job.Spec.Tolerations, &taint, false), "the job pod tolerates the GPU taint")
	require.Len(t, job.Spec.Containers, 1)
	assert.Equal(t, "$job", job.Spec.Containers[0].Name, "merged into the job container, not added as a sidecar")
	assert.Empty(t, job.Spec.Containers[0].Image, "the workflow's container: names the image")
	res := job.Spec.Containers[0].Resources
	assert.Equal(t, "1", res.Limits.Name("nvidia.com/gpu", "").String())
	assert.Equal(t, "3", res.Requests.Cpu().String())
	assert.Equal(t, "12Gi", res.Requests.Memory().String())

	// The job container checks and samples its GPU as it starts: the sampler from the hooks'
	// ConfigMap as its postStart hook (the hooks keep lifecycle, env and volumeMounts of the
	// "$job" container and the pod's volumes: runner-container-hooks v0.8.1 utils.ts
	// mergeContainerWithOptions, mergePodSpecWithOptions), the zone from the pod's label.
	job0 := job.Spec.Containers[0]
	require.NotNil(t, job0.Lifecycle)
	require.NotNil(t, job0.Lifecycle.PostStart)
	require.NotNil(t, job0.Lifecycle.PostStart.Exec)
	assert.Equal(t, []string{"sh", "/opt/gpuci/hooks/gpu-sampler.sh"}, job0.Lifecycle.PostStart.Exec.Command)
	assert.Equal(t, []corev1.VolumeMount{{Name: "gpuci-job-hooks", MountPath: "/opt/gpuci/hooks", ReadOnly: true}}, job0.VolumeMounts)
	require.Len(t, job.Spec.Volumes, 1)
	require.NotNil(t, job.Spec.Volumes[0].ConfigMap)
	assert.Equal(t, k8s.JobHooksConfigMap, job.Spec.Volumes[0].ConfigMap.Name)
	env := envOf(job0.Env)
	require.NotNil(t, env["GPUCI_ZONE"].ValueFrom)
	assert.Equal(t, "metadata.labels['topology.kubernetes.io/zone']", env["GPUCI_ZONE"].ValueFrom.FieldRef.FieldPath)
	require.NotNil(t, env["GPUCI_NODE"].ValueFrom, "the node whose capacity type the runner reads")
	assert.Equal(t, "spec.nodeName", env["GPUCI_NODE"].ValueFrom.FieldRef.FieldPath)
}
