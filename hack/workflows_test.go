package hack_test

// The repository's workflows take their region from the stack file (gpuci env), never from a
// literal of their own: a stack in another region deploys from the same workflow.

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/versions"
)

type workflow struct {
	On          any               `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Jobs        map[string]struct {
		If          string            `yaml:"if"`
		Environment string            `yaml:"environment"`
		Permissions map[string]string `yaml:"permissions"`
		Env         map[string]string `yaml:"env"`
		Steps       []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// workflows reads every workflow the repository runs or ships, by file name.
func workflows(t *testing.T) map[string]workflow {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testkit.RepoRoot(t), ".github", "workflows", "*.yml"))
	require.NoError(t, err)
	examples, err := filepath.Glob(filepath.Join(testkit.RepoRoot(t), "examples", "workflows", "*.yml"))
	require.NoError(t, err)
	out := map[string]workflow{}
	for _, f := range append(files, examples...) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var w workflow
		require.NoError(t, yaml.Unmarshal(b, &w), f)
		out[filepath.Base(f)] = w
	}
	require.GreaterOrEqual(t, len(out), 7, "the repository's five workflows and the two examples")
	return out
}

// pinnedAction is an action pinned to a commit: owner/repo[/path]@<40 hex>. A tag or branch
// moves under the workflow (whoever can push a tag to the action's repository runs code
// here); a commit does not. Dependabot (.github/dependabot.yml) keeps the pins current.
var pinnedAction = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?@[0-9a-f]{40}$`)

func TestActionsArePinnedByCommit(t *testing.T) {
	t.Parallel()
	uses := 0
	for file, w := range workflows(t) {
		for name, job := range w.Jobs {
			for _, s := range job.Steps {
				if s.Uses == "" || strings.HasPrefix(s.Uses, "./") {
					continue
				}
				uses++
				assert.Regexp(t, pinnedAction, s.Uses, "%s job %s: pin %q to a commit (owner/repo@<sha> # vX.Y.Z)", file, name, s.Uses)
			}
		}
	}
	assert.Greater(t, uses, 10, "the workflows use actions")
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".github", "dependabot.yml"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "package-ecosystem: github-actions", "Dependabot moves the pins")
	// The pattern refuses what a tag pin looks like.
	for _, tag := range []string{"actions/checkout@v4", "actions/checkout@v4.4.0", "actions/checkout@main", "actions/checkout@11d5960"} {
		assert.NotRegexp(t, pinnedAction, tag)
	}
}

// The stacks' passphrase decrypts every credential in their files. A job that reads it runs in
// a GitHub environment, so it can be an environment secret. That each environment is limited
// (the stack's to main, preview's behind a required reviewer where the plan allows one) is
// what bootstrap sets up, and hack/bootstrap_test.go holds it, not this test.
func TestThePassphraseIsReadOnlyInAnEnvironment(t *testing.T) {
	t.Parallel()
	readers := 0
	for file, w := range rawWorkflows(t) {
		jobs, _ := w["jobs"].(map[string]any)
		require.NotEmpty(t, jobs, file)
		rest := maps.Clone(w)
		delete(rest, "jobs")
		assert.False(t, readsPassphrase(t, rest), "%s reads the passphrase outside its jobs (a workflow-level env gives it to every job)", file)
		for name, job := range jobs {
			if !readsPassphrase(t, job) { // anywhere: env, run, with, a service's env
				continue
			}
			readers++
			env, _ := job.(map[string]any)["environment"]
			assert.NotEmpty(t, env, "%s job %s reads the passphrase outside an environment", file, name)
		}
	}
	assert.Equal(t, 2, readers, "deploy.yml and preview.yml read it")
	assert.Equal(t, "github.ref == 'refs/heads/main' && (inputs.stack || vars.LUX_GPU_CI_STACK)", workflows(t)["deploy.yml"].Jobs["deploy"].If, "only main deploys, however dispatched, and only a stack named")
}

// readsPassphrase tells whether a part of a workflow names the passphrase's secret, in any
// field and either expression syntax (secrets.X, secrets['X']).
func readsPassphrase(t *testing.T, part any) bool {
	b, err := yaml.Marshal(part)
	require.NoError(t, err)
	return strings.Contains(string(b), "PULUMI_CONFIG_PASSPHRASE")
}

// rawWorkflows are the workflows as generic YAML, every field kept.
func rawWorkflows(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for name := range workflows(t) {
		path := filepath.Join(testkit.RepoRoot(t), ".github", "workflows", name)
		if _, err := os.Stat(path); err != nil {
			path = filepath.Join(testkit.RepoRoot(t), "examples", "workflows", name)
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var w map[string]any
		require.NoError(t, yaml.Unmarshal(b, &w), path)
		out[name] = w
	}
	return out
}

// release.yml runs the repository's code (its tests, its build) with a read-only token and no
// credential kept in .git/config; the job that writes the release runs none of it.
func TestReleaseWritesFromAJobThatRunsNoCode(t *testing.T) {
	t.Parallel()
	w := workflows(t)["release.yml"]
	assert.Equal(t, map[string]string{"contents": "read"}, w.Permissions)
	writers := 0
	for name, job := range w.Jobs {
		for _, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "actions/checkout@") {
				assert.Equal(t, "false", s.With["persist-credentials"], "job %s keeps no token in .git/config", name)
			}
		}
		if job.Permissions["contents"] != "write" {
			continue
		}
		writers++
		for _, s := range job.Steps {
			assert.False(t, strings.HasPrefix(s.Uses, "actions/checkout@"), "job %s, which may write, checks out no code", name)
			assert.NotContains(t, s.Run, "make ", "job %s, which may write, runs no make target", name)
		}
		assert.Equal(t, "write", job.Permissions["attestations"], "job %s attests what it publishes", name)
	}
	assert.Equal(t, 1, writers, "one job writes the release")
}

func TestWorkflowsTakeTheRegionFromTheStack(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(testkit.RepoRoot(t), ".github", "workflows", "*.yml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 3)
	assumed := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var w workflow
		require.NoError(t, yaml.Unmarshal(b, &w), f)
		for name, job := range w.Jobs {
			regionSet := false
			for _, s := range job.Steps {
				if strings.Contains(s.Run, "gpuci env --stack") && strings.Contains(s.Run, `>> "$GITHUB_ENV"`) {
					regionSet = true
				}
				if strings.HasPrefix(s.Uses, "aws-actions/configure-aws-credentials") {
					assumed++
					assert.Equal(t, "${{ env.AWS_REGION }}", s.With["aws-region"], "%s job %s: the region is the stack file's", filepath.Base(f), name)
					assert.True(t, regionSet, "%s job %s: gpuci env runs before the credentials step", filepath.Base(f), name)
				}
			}
		}
	}
	assert.Equal(t, 2, assumed, "deploy.yml and preview.yml assume an AWS role")
}

// deploy.yml's up refreshes first: a deploy that failed half-way (a scale set's removal that
// outlived runnerDrainTimeout, a system-node update a running job held with
// PodEvictionFailure) left the state saying more than AWS and the cluster did, and only a
// refresh lets the next deploy finish it (make e2e walks both, with up --refresh).
func TestDeployRefreshesBeforeItsUp(t *testing.T) {
	t.Parallel()
	var w workflow
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".github", "workflows", "deploy.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &w))
	deploys := 0
	for _, job := range w.Jobs {
		for _, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "pulumi/actions@") {
				deploys++
				assert.Equal(t, "true", s.With["refresh"], "deploy.yml's pulumi step refreshes")
			}
		}
	}
	assert.Equal(t, 1, deploys, "deploy.yml runs pulumi once")
}

func TestGpuciEnvIsTheStackFilesRegion(t *testing.T) {
	t.Parallel()
	out, err := gpuci(t, "", "env", "--project", testkit.FixtureDir(t), "--stack", "prod")
	require.NoError(t, err, out)
	assert.Equal(t, "AWS_REGION=us-west-2\n", out)

	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(testkit.FixtureDir(t), "Pulumi.prod.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Pulumi.eu.yaml"), []byte(strings.Replace(string(b), "aws:region: us-west-2", "aws:region: eu-west-1", 1)), 0o644))
	out, err = gpuci(t, "", "env", "--project", dir, "--stack", "eu")
	require.NoError(t, err, out)
	assert.Equal(t, "AWS_REGION=eu-west-1\n", out)
}

// The retry workflow downloads the released gpuci and checks its sum, in seconds, instead of
// compiling it; release.yml publishes exactly the files it downloads (make dist's names).
func TestRetryWorkflowDownloadsTheReleasedGpuci(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "examples", "workflows", "retry-interrupted.yml"))
	require.NoError(t, err)
	retry := string(b)
	assert.NotContains(t, retry, "go install", "no compile on the hosted runner")
	assert.Contains(t, retry, `GPUCI_RELEASES: https://github.com/luxfi/lux-gpu-ci/releases/download`)
	assert.Contains(t, retry, `curl -fsSLO --retry 3 "$GPUCI_RELEASES/$GPUCI_VERSION/gpuci_linux_amd64"`)
	assert.Contains(t, retry, "runs-on: lux-gpu-retry", "in the cluster, where its evidence is (dev's retryScaleSetName)")
	assert.Contains(t, retry, "gpuci retry --cluster ")
	// Checked against the workflow's own pin, never against a sums file the same release
	// serves (whoever can replace the binary there can replace its sum).
	assert.Contains(t, retry, `echo "$GPUCI_SHA256  gpuci_linux_amd64" | sha256sum -c -`)
	assert.NotContains(t, retry, "SHA256SUMS")

	b, err = os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".github", "workflows", "release.yml"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `make dist VERSION="$TAG"`)
	assert.Contains(t, string(b), `gh release create "$TAG" dist/* --repo "$REPO" --verify-tag`)
	out, err := exec.Command("make", "-s", "-n", "-C", "..", "dist", "VERSION=v0.0.0-test").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "-o dist/gpuci_${p%/*}_${p#*/} ./cmd/gpuci")
	assert.Contains(t, string(out), "linux/amd64")
	assert.Contains(t, string(out), "sha256sum gpuci_* > SHA256SUMS")
	assert.Contains(t, string(out), "-X main.releaseVersion=v0.0.0-test")
}

// The CUDA runner image, its workflow, the smoke workflow and the stack agree: it is built
// FROM the runner the stack follows, with the CUDA the smoke workflow uses, and published
// under the moving tag a pool follows (versions.CUDARunnerFollowTag); the smoke workflow
// still works on the stock runner (it installs nvcc and g++ when they are missing).
func TestCUDARunnerImageAgreesWithTheStack(t *testing.T) {
	t.Parallel()
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(append([]string{testkit.RepoRoot(t)}, parts...)...))
		require.NoError(t, err)
		return string(b)
	}
	dockerfile := read("images", "cuda-runner", "Dockerfile")
	runnerRepo, _, _ := strings.Cut(versions.RunnerImage, ":")
	assert.Contains(t, dockerfile, "\nFROM "+runnerRepo+":${RUNNER_VERSION}\n", "built on the runner the stack follows")
	cudaAPT := regexp.MustCompile(`(?m)^ARG CUDA_VERSION=(\S+)$`).FindStringSubmatch(dockerfile)
	require.NotNil(t, cudaAPT, "the Dockerfile pins its CUDA")
	assert.Contains(t, dockerfile, "g++", "nvcc needs a host compiler")
	ccache := regexp.MustCompile(`(?m)^ARG CCACHE_VERSION=(\S+)\nARG CCACHE_SHA256=([0-9a-f]{64})$`).FindStringSubmatch(dockerfile)
	require.NotNil(t, ccache, "the Dockerfile pins ccache and its checksum")
	assert.Contains(t, dockerfile, `sha256sum -c -`, "and checks it")

	var image struct {
		Env map[string]string `yaml:"env"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(read(".github", "workflows", "cuda-runner-image.yml")), &image))
	assert.Equal(t, cudaAPT[1], image.Env["CUDA_APT"], "the workflow builds the Dockerfile's CUDA")
	assert.Equal(t, "cuda"+image.Env["CUDA_TAG"], versions.CUDARunnerFollowTag, "it publishes the tag pools follow")
	assert.Equal(t, "ghcr.io/${{ github.repository_owner }}/"+versions.CUDARunnerRepository, image.Env["IMAGE"], "under the package gpuci cuda-image names by default")
	assert.Equal(t, strings.ReplaceAll(image.Env["CUDA_TAG"], ".", "-"), image.Env["CUDA_APT"])

	smoke := read("examples", "workflows", "cuda.yml")
	var smokeEnv struct {
		Env map[string]string `yaml:"env"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(smoke), &smokeEnv))
	assert.Equal(t, ccache[1], smokeEnv.Env["CCACHE_VERSION"], "the smoke workflow installs the image's ccache where it is missing")
	assert.Equal(t, ccache[2], smokeEnv.Env["CCACHE_SHA256"])
	assert.Contains(t, smokeEnv.Env["CCACHE_INSTALL"], `sha256sum -c -`)
	assert.Equal(t, 2, strings.Count(smoke, "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"), "both jobs build through ccache")
	assert.Equal(t, 2, strings.Count(smoke, `run: bash -c "$CCACHE_REPORT"`), "and print its hits")
	assert.Contains(t, smoke, `CUDA_VERSION: "`+cudaAPT[1]+`"`, "the smoke workflow's runner job installs the same CUDA")
	assert.Contains(t, smoke, "nvidia/cuda:"+image.Env["CUDA_TAG"]+".", "and its container job runs it")
	assert.Contains(t, smoke, "command -v nvcc >/dev/null && command -v g++ >/dev/null", "it skips the install on the CUDA runner")
	assert.Regexp(t, `apt-get install [^\n]* g\+\+ `, smoke, "and installs g++ with nvcc on the stock runner")
}

// The workflows act on the stacks the repository has, never on a name of their own: preview
// previews the stack the repository deploys (vars.LUX_GPU_CI_STACK) if the branch has its file
// (its matrix is the "The stacks" step's output, run here on a directory of stack files), and
// none otherwise; deploy deploys the stack it is told or none.
func TestWorkflowsActOnTheStacksTheRepositoryHas(t *testing.T) {
	t.Parallel()
	wfs := workflows(t)
	var script string
	for _, s := range wfs["preview.yml"].Jobs["test-and-render"].Steps {
		if s.Name == "The stacks" {
			script = s.Run
			assert.Equal(t, "${{ vars.LUX_GPU_CI_STACK }}", s.Env["STACK"], "the stack deploy.yml deploys")
		}
	}
	require.NotEmpty(t, script, "preview.yml lists the stacks in a step")
	dir := t.TempDir()
	for _, f := range []string{"Pulumi.yaml", "Pulumi.alpha.yaml", "Pulumi.beta-2.yaml", "README.md"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o644))
	}
	for stack, want := range map[string]string{"beta-2": `["beta-2"]`, "gamma": `[]`, "": `[]`} {
		output := filepath.Join(dir, "github_output-"+stack)
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GITHUB_OUTPUT="+output, "STACK="+stack)
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		got, err := os.ReadFile(output)
		require.NoError(t, err)
		assert.Equal(t, "stacks="+want+"\n", string(got), "LUX_GPU_CI_STACK=%q: the deployed stack if the branch has its file, else none", stack)
	}
	assert.Contains(t, wfs["preview.yml"].Jobs["preview"].If, "needs.test-and-render.outputs.stacks != '[]'", "no preview job on an empty matrix (GitHub fails one)")

	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".github", "workflows", "preview.yml"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "stack: ${{ fromJSON(needs.test-and-render.outputs.stacks) }}", "the preview matrix is that list")
	b, err = os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".github", "workflows", "deploy.yml"))
	require.NoError(t, err)
	assert.NotRegexp(t, `'(starter|dev|prod)'`, string(b), "no stack named in deploy.yml")
	var deploy struct {
		On struct {
			Dispatch struct {
				Inputs map[string]struct {
					Type    string   `yaml:"type"`
					Options []string `yaml:"options"`
				} `yaml:"inputs"`
			} `yaml:"workflow_dispatch"`
		} `yaml:"on"`
	}
	require.NoError(t, yaml.Unmarshal(b, &deploy))
	require.Contains(t, deploy.On.Dispatch.Inputs, "stack")
	assert.Equal(t, "string", deploy.On.Dispatch.Inputs["stack"].Type, "a dispatch names any stack with a stack file, no fixed list")
}
