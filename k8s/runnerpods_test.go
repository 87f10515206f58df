package k8s_test

// The runner pods' builders: what a runner or a job pod of each form looks like, and the
// budgets that keep them through a drain.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// A container-form runner's readiness probe, run by sh over a process table as /proc shows
// it (NUL-separated command lines): it fails while the runner waits (its listener, and the
// probe itself, whose command line names the pattern), and succeeds once the runner runs a
// job's worker, as actions/runner starts it.
func TestRunnerBusyProbeSeesTheJobsWorker(t *testing.T) {
	script := k8s.RunnerBusyProbe().Exec.Command
	require.Equal(t, []string{"sh", "-c"}, script[:2])
	proc := t.TempDir()
	probe := strings.ReplaceAll(script[2], "/proc/", proc+"/")
	require.NotEqual(t, script[2], probe, "the probe reads /proc")
	process := func(pid string, argv ...string) {
		require.NoError(t, os.MkdirAll(filepath.Join(proc, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "cmdline"), []byte(strings.Join(argv, "\x00")+"\x00"), 0o644))
	}
	busy := func() bool {
		err := exec.Command("sh", "-c", probe).Run()
		if err == nil {
			return true
		}
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		require.Equal(t, 1, exit.ExitCode(), "grep found no match (2 would be an error)")
		return false
	}
	process("1", "/bin/bash", "/home/runner/run.sh")
	process("7", "/home/runner/bin/Runner.Listener", "run", "--startuptype", "service")
	process("31", "sh", "-c", script[2])              // the probe itself
	process("self", "/home/runner/bin/Runner.Worker") // not a process id: /proc/self is the reader
	assert.False(t, busy(), "an idle runner: its listener, no worker")
	process("58", "/home/runner/bin/Runner.Worker", "spawnclient", "118", "121")
	assert.True(t, busy(), "a job's worker runs")
}

// The CUDA runner's moving tag follows the runner releases as the stock :latest does: pulled
// on every start. Its versioned tag is a pin: the node's copy is good.
func TestCUDARunnerTagIsFollowed(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"ghcr.io/luxfi/lux-cuda-runner:cuda12.8":         corev1.PullAlways,
		"ghcr.io/luxfi/lux-cuda-runner:2.334.0-cuda12.8": corev1.PullIfNotPresent,
		"ghcr.io/actions/actions-runner:latest":          corev1.PullAlways,
	} {
		pool := config.DefaultPool()
		pool.RunnerImage = image
		tmpl, err := k8s.RunnerTemplate(pool, nil)
		require.NoError(t, err)
		require.NotEmpty(t, tmpl.Spec.Containers)
		assert.Equal(t, want, tmpl.Spec.Containers[0].ImagePullPolicy, image)
	}
}

// Each pod a pool runs, in either form, is under exactly one of the runners' budgets (the
// eviction API refuses a pod two budgets select): its template's labels, matched by the API
// machinery's own selector.
func TestEachRunnerPodIsUnderOneBudget(t *testing.T) {
	container := config.DefaultPool()
	container.JobForm = config.JobFormContainer
	budgets := k8s.RunningJobsBudgets([]config.GPUPool{config.DefaultPool(), container})
	require.Len(t, budgets, 2, "a container-form pool: the busy runners' budget too")
	selects := func(b policyv1.PodDisruptionBudgetSpec, podLabels map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(b.Selector)
		require.NoError(t, err)
		return s.Matches(labels.Set(podLabels))
	}
	for _, pool := range []config.GPUPool{config.DefaultPool(), container} {
		tmpl, err := k8s.RunnerTemplate(pool, nil)
		require.NoError(t, err)
		pods := map[string]map[string]string{"runner": tmpl.Labels}
		if pool.JobForm == config.JobFormContainer {
			job, err := k8s.JobPodTemplate(pool)
			require.NoError(t, err)
			pods["job pod"] = job.Labels
		}
		for what, l := range pods {
			var under []string
			for name, b := range budgets {
				if selects(b, l) {
					under = append(under, name)
				}
			}
			assert.Len(t, under, 1, "%s's %s is under one budget: %v", pool.Name, what, under)
		}
	}
}

// The retry runner is a relay on the system nodes under its own account: no GPU, no GPU
// toleration, the current runner pulled on each start through the cache.
func TestRetryRunnerTemplate(t *testing.T) {
	cache := testCache
	tmpl := k8s.RetryRunnerTemplate(cache)
	assert.Equal(t, "relay", tmpl.Labels["lux-gpu-ci.luxfi.com/runner-role"], "it reaches the API server (NetworkPolicies)")
	assert.NotContains(t, tmpl.Labels, "lux-gpu-ci.luxfi.com/pool", "under neither runners' budget: it holds no job of a pool")
	assert.Equal(t, "gpuci-retry", tmpl.Spec.ServiceAccountName, "the account the retry RBAC binds")
	assert.Equal(t, map[string]string{"lux-gpu-ci.luxfi.com/node-role": "system"}, tmpl.Spec.NodeSelector)
	assert.Empty(t, tmpl.Spec.Tolerations)
	require.Len(t, tmpl.Spec.Containers, 1)
	c := tmpl.Spec.Containers[0]
	assert.Equal(t, "runner", c.Name, "ARC's name for the runner container")
	assert.Equal(t, cache["ghcr.io"]+"/actions/actions-runner:latest", c.Image)
	assert.Equal(t, corev1.PullAlways, c.ImagePullPolicy, ":latest is the current runner only if pulled")
	assert.NotContains(t, c.Resources.Limits, corev1.ResourceName("nvidia.com/gpu"))
}
