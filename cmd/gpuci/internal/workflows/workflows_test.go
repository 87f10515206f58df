package workflows_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/workflows"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// workflow is what these tests read back from a written workflow.
type workflow struct {
	On struct {
		WorkflowRun struct {
			Workflows []string `yaml:"workflows"`
		} `yaml:"workflow_run"`
	} `yaml:"on"`
	Name string `yaml:"name"`
	Jobs map[string]struct {
		RunsOn    string `yaml:"runs-on"`
		Container struct {
			Image string `yaml:"image"`
		} `yaml:"container"`
		Steps []struct {
			Run string `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func write(t *testing.T, stack string, cfg *config.Config) map[string]workflow {
	t.Helper()
	files, err := workflows.For(stack, cfg, workflows.Release{})
	require.NoError(t, err)
	out := map[string]workflow{}
	for _, f := range files {
		var wf workflow
		require.NoError(t, yaml.Unmarshal([]byte(f.Content), &wf), "%s is YAML:\n%s", f.Name, f.Content)
		out[f.Name] = wf
	}
	return out
}

// The shipped examples are exactly what gpuci writes for the repository's dev stack: an edit
// of dev's pools, or of the templates, shows here until the examples are written again.
func TestExamplesAreWhatGpuciWritesForDev(t *testing.T) {
	t.Parallel()
	root := testkit.RepoRoot(t)
	cfg, err := config.ParseStackFileOffline(config.StackFile(root, "dev"))
	require.NoError(t, err)
	files, err := workflows.For("dev", cfg, workflows.Release{})
	require.NoError(t, err)
	dir := filepath.Join(root, "examples", "workflows")
	shipped, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		require.NoError(t, err)
		assert.Equal(t, f.Content, string(b), "examples/workflows/%s is not gpuci's output for dev: run make examples", f.Name)
	}
	for i := range shipped {
		shipped[i] = filepath.Base(shipped[i])
	}
	assert.ElementsMatch(t, names, shipped, "examples/workflows holds gpuci's files for dev and nothing else")
}

// Every configured pool gets a job on its own scale set, its twin reached by a re-run; the
// retry workflow runs on the stack's retry runner and counts every scale set's lost runners.
func TestEveryPoolGetsAJobOnItsScaleSet(t *testing.T) {
	t.Parallel()
	cfg := testkit.DevConfig(t, "retryScaleSetName", "lux-gpu-retry", "retryRunnerGroup", "lux-gpu-retry")
	wfs := write(t, "dev", cfg)
	require.Contains(t, wfs, "cuda.yml")
	smoke := wfs["cuda.yml"]
	var pools, all []string
	for _, p := range cfg.Pools() {
		all = append(all, p.RunnerScaleSetName)
		if p.RetryTwinOf == "" {
			pools = append(pools, p.Name)
		}
	}
	require.Len(t, pools, 2, "the fixture has two pools")
	require.Len(t, all, 3, "and one twin")
	assert.ElementsMatch(t, pools, slices.Collect(mapKeys(smoke.Jobs)), "one job per pool")
	assert.Equal(t, "${{ fromJSON(github.run_attempt) > 1 && 'lux-gpu-t4-on-demand' || 'lux-gpu-t4' }}", smoke.Jobs["gpu-spot"].RunsOn)
	assert.Empty(t, smoke.Jobs["gpu-spot"].Container.Image, "a runner-form job has no container")
	assert.Equal(t, "${{ vars.LUX_GPU_CI_DOCKER_HUB_CACHE && format('{0}/nvidia/cuda:12.8.1-devel-ubuntu24.04', vars.LUX_GPU_CI_DOCKER_HUB_CACHE) || 'nvidia/cuda:12.8.1-devel-ubuntu24.04' }}",
		smoke.Jobs["gpu-spot-container"].Container.Image, "dev caches docker.io")
	assert.Equal(t, "lux-gpu-t4-container", smoke.Jobs["gpu-spot-container"].RunsOn, "a pool without a twin is named plainly")

	require.Contains(t, wfs, "retry-interrupted.yml")
	retry := wfs["retry-interrupted.yml"]
	assert.Equal(t, []string{smoke.Name}, retry.On.WorkflowRun.Workflows, "it follows the smoke workflow by its name")
	assert.Equal(t, cfg.RetryRunner.ScaleSetName, retry.Jobs["retry"].RunsOn)
	var run string
	for _, s := range retry.Jobs["retry"].Steps {
		if strings.HasPrefix(s.Run, "gpuci retry ") {
			run = s.Run
		}
	}
	require.NotEmpty(t, run, "a step runs gpuci retry")
	slices.Sort(all)
	assert.Contains(t, run, "--scale-sets "+strings.Join(all, ",")+" ", "every scale set's lost runners count, the twins' too")
}

// A stack like the starter — one pool, no twin, no cache, no retry runner — gets a job with a
// plain runs-on, and no retry workflow (nothing to run it on).
func TestTheStarterGetsOnePlainJob(t *testing.T) {
	t.Parallel()
	cfg := testkit.Parse(t, "starter", testkit.StackConfig(t, "starter"))
	wfs := write(t, "starter", cfg)
	assert.Equal(t, []string{"cuda.yml"}, slices.Collect(mapKeys(wfs)))
	jobs := wfs["cuda.yml"].Jobs
	require.Len(t, jobs, 1)
	assert.Equal(t, "lux-starter-t4", jobs["gpu-spot"].RunsOn)

	// A container-form pool on a stack that caches no docker.io images names the image plainly.
	cfg = testkit.DevConfig(t, "imageCache", "[]", "registryCredentials", testkit.Unset)
	assert.Equal(t, workflows.SmokeJobImage, write(t, "dev", cfg)["cuda.yml"].Jobs["gpu-spot-container"].Container.Image)
}

// A released linux/amd64 gpuci pins itself in the retry workflow; anything else leaves the pin
// empty, and the workflow's first step refuses to run until it is filled in.
func TestTheRetryWorkflowPinsTheRelease(t *testing.T) {
	t.Parallel()
	cfg := testkit.DevConfig(t, "retryScaleSetName", "lux-gpu-retry", "retryRunnerGroup", "lux-gpu-retry")
	content := func(rel workflows.Release) string {
		files, err := workflows.For("dev", cfg, rel)
		require.NoError(t, err)
		for _, f := range files {
			if f.Name == "retry-interrupted.yml" {
				return f.Content
			}
		}
		t.Fatal("no retry workflow")
		return ""
	}
	pinned := content(workflows.Release{Version: "v1.2.3", SHA256: strings.Repeat("ab", 32), URL: "https://example.com/r"})
	assert.Contains(t, pinned, `GPUCI_VERSION: "v1.2.3"`)
	assert.Contains(t, pinned, `GPUCI_SHA256: "`+strings.Repeat("ab", 32)+`"`)
	assert.Contains(t, pinned, "GPUCI_RELEASES: https://example.com/r")
	unpinned := content(workflows.Release{})
	assert.Contains(t, unpinned, `GPUCI_SHA256: ""`)
	assert.Contains(t, unpinned, `if [ -z "$GPUCI_VERSION" ] || [ -z "$GPUCI_SHA256" ]; then`)
	assert.Contains(t, unpinned, "GPUCI_RELEASES: "+workflows.DefaultReleasesURL)
}

func mapKeys[M ~map[string]V, V any](m M) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// .github/actionlint.yaml is what make actionlint-config writes from the repository's stack
// files (so a new stack's labels reach it by the generator, never by hand), and it names every
// label a stack's pools, twins and retry runner register.
func TestActionlintConfigIsGenerated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testkit.RepoRoot(t), "Pulumi.*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 2, "dev and prod at least")
	var stacks []*config.Config
	for _, f := range files {
		c, err := config.ParseStackFileOffline(f)
		require.NoError(t, err, f)
		stacks = append(stacks, c)
	}
	want, err := workflows.ActionlintConfig(stacks)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".github", "actionlint.yaml"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), ".github/actionlint.yaml is stale: run make actionlint-config")

	var doc struct {
		SelfHostedRunner struct {
			Labels []string `yaml:"labels"`
		} `yaml:"self-hosted-runner"`
	}
	require.NoError(t, yaml.Unmarshal(want, &doc))
	for _, l := range []string{"t4", "lux-gpu-t4", "lux-gpu-t4-on-demand", "lux-gpu-retry", "lux-prod-gpu-l4"} {
		assert.Contains(t, doc.SelfHostedRunner.Labels, l, "a pool's label, its scale set, its twin's, the retry runner's, another stack's")
	}
	assert.NotContains(t, doc.SelfHostedRunner.Labels, "self-hosted", "actionlint's own labels are not repeated")
}
