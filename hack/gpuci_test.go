package hack_test

// The gpuci CLI as a person runs it: --stack defaults to the selected Pulumi stack, never to a
// silent "dev", and `gpuci version` names its pins.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// gpuciBin is gpuci, built once for the package's tests (TestMain).
var gpuciBin string

func TestMain(m *testing.M) {
	var err error
	// Without symbols, as make dist builds it.
	if gpuciBin, err = buildGpuci("gpuci", "-s -w"); err != nil {
		fmt.Fprintln(os.Stderr, "building gpuci:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// buildGpuci builds ./cmd/gpuci with ldflags into a directory of the user's cache kept for
// this checkout, and returns its path. Kept, not temporary: go build leaves an output whose
// build ID is already the one it would link alone, so a warm run pays no link (~2 s of CPU
// each); one directory per checkout, so two checkouts' tests never write each other's.
func buildGpuci(name, ldflags string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "lux-gpu-ci", "test-bin", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-ldflags="+ldflags, "-o", bin, "./cmd/gpuci")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
}

// gpuci runs gpuci args… from the repository root with PATH holding only go and, if selected
// is not empty, a stand-in pulumi whose selected stack is selected.
func gpuci(t *testing.T, selected string, args ...string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	if selected != "" {
		script := "#!/bin/sh\n[ \"$1 $2\" = \"stack --show-name\" ] && echo " + selected + " && exit 0\nexit 1\n"
		require.NoError(t, os.WriteFile(filepath.Join(bin, "pulumi"), []byte(script), 0o755))
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(gpuciBin, args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+filepath.Dir(goBin)+":/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestGpuciStackIsTheSelectedOne(t *testing.T) {
	t.Parallel()
	fixtures := testkit.FixtureDir(t)
	out, err := gpuci(t, "", "quota", "--project", fixtures)
	require.Error(t, err, out)
	assert.Contains(t, out, "no --stack given and no Pulumi stack selected", "never a silent dev")

	out, err = gpuci(t, "prod", "quota", "--project", fixtures)
	require.NoError(t, err, out)
	assert.Contains(t, out, "gpuci: stack prod (the selected Pulumi stack)")

	out, err = gpuci(t, "prod", "quota", "--project", fixtures, "--stack", "dev")
	require.NoError(t, err, out)
	assert.Regexp(t, `(?m)^CAPACITY +QUOTA CODE +vCPUs NEEDED +POOLS$`, out, "a table with a header")
	assert.Regexp(t, `(?m)^spot +L-3819A6DF +8 +gpu-spot, gpu-spot-container$`, out, "--stack wins over the selection")
	assert.Contains(t, out, "--region us-west-2", "and how to ask for more")

	out, err = gpuci(t, "", "quota", "--project", fixtures, "--stack", "dev", "--tsv")
	require.NoError(t, err, out)
	assert.Equal(t, "spot\tL-3819A6DF\t8\tgpu-spot,gpu-spot-container\non-demand\tL-DB2E81BA\t4\tgpu-spot-on-demand\n", out, "what make bootstrap reads")
	assert.NotContains(t, out, "selected Pulumi stack")
}

func TestGpuciVersionNamesThePins(t *testing.T) {
	t.Parallel()
	out, err := gpuci(t, "", "version")
	require.NoError(t, err, out)
	assert.Contains(t, out, "gpuci ")
	assert.Contains(t, out, "ARC "+versions.ARCControllerChart.Version)
	assert.Contains(t, out, "Karpenter "+versions.KarpenterChart.Version)
}

// Every command has --json beside its text for people (its -h lists the flag), and usage
// lists every command main dispatches. cache-gate is a server the stack's pods run: its
// output is its log.
func TestEveryGpuciCommandHasJSON(t *testing.T) {
	t.Parallel()
	bin := gpuciBin
	usage, _ := exec.Command(bin, "help").CombinedOutput()
	var commands []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z-]+) {2,}`).FindAllStringSubmatch(string(usage), -1) {
		commands = append(commands, m[1])
	}
	require.ElementsMatch(t, []string{"cost", "verify", "doctor", "crd-owners", "quota", "reach", "env", "images", "workflows", "actionlint-config", "stats", "retry", "grow", "cuda-image", "github-app", "cache-gate", "version"}, commands, "%s", usage)
	for _, c := range commands {
		if c == "cache-gate" {
			continue
		}
		out, _ := exec.Command(bin, c, "-h").CombinedOutput()
		assert.Contains(t, string(out), "-json", "gpuci %s has --json", c)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"karpenter": "`+versions.KarpenterChart.Version+`"`)
}

// A command that waits on a cluster, AWS or GitHub says what it is doing, with the time, on
// standard error: standard output stays its answer (its --json included).
func TestGpuciShowsProgressOnStandardError(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(gpuciBin, "verify", "--project", testkit.FixtureDir(t), "--stack", "dev", "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--json")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.Error(t, cmd.Run(), "no cluster to reach")
	assert.Regexp(t, `(?m)^\[gpuci +\d+\.\ds\] connecting to the cluster of stack dev$`, stderr.String())
	assert.Empty(t, stdout.String(), "nothing but the answer on standard output")
}

// gpuci images lists what a pool's snapshot must hold, named as the pool's pods name them:
// through the stack's image cache where it caches the registry, else fully qualified (ctr
// does not add docker.io/ as the kubelet does).
func TestGpuciImagesNamesThemAsThePodsDo(t *testing.T) {
	t.Parallel()
	fixtures := testkit.FixtureDir(t)
	const ecr = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
	cache := `{"ghcr.io": "` + ecr + `/lux-gpu-ci/ghcr", "docker.io": "` + ecr + `/lux-gpu-ci/docker-hub"}`
	out, err := gpuci(t, "", "images", "--project", fixtures, "--stack", "dev", "--pool", "gpu-spot-container",
		"--job-image", "nvidia/cuda:12.8.1-devel-ubuntu24.04,ubuntu:24.04", "--cache", cache)
	require.NoError(t, err, out)
	assert.Equal(t, ecr+"/lux-gpu-ci/ghcr/actions/actions-runner:latest,"+ecr+"/lux-gpu-ci/docker-hub/nvidia/cuda:12.8.1-devel-ubuntu24.04,"+
		ecr+"/lux-gpu-ci/docker-hub/library/ubuntu:24.04\n", out)

	out, err = gpuci(t, "", "images", "--project", fixtures, "--stack", "dev", "--pool", "gpu-spot", "--job-image", "nvidia/cuda:12.8.1-devel-ubuntu24.04", "--cache", "{}")
	require.NoError(t, err, out)
	assert.Equal(t, "ghcr.io/actions/actions-runner:latest,docker.io/nvidia/cuda:12.8.1-devel-ubuntu24.04\n", out, "no cache: fully qualified")

	out, err = gpuci(t, "", "images", "--project", fixtures, "--stack", "dev", "--pool", "gpu", "--cache", "{}")
	require.Error(t, err)
	assert.Contains(t, out, `--pool "gpu" is not one of stack dev's pools [gpu-spot gpu-spot-on-demand gpu-spot-container]`)
}

// The stack's outputs come through the Pulumi CLI as JSON: the image cache's addresses for
// gpuci images, the kubeconfig (a string) for the cluster commands.
func TestGpuciReadsTheStacksOutputs(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	const ecr = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: t}}]\n"
	kubeJSON, err := json.Marshal(kubeconfig)
	require.NoError(t, err)
	script := "#!/bin/sh\ncase \"$*\" in\n" +
		"'stack output imageCache --json --show-secrets --stack dev') echo '{\"docker.io\": \"" + ecr + "/lux-gpu-ci/docker-hub\"}' ;;\n" +
		"'stack output kubeconfig --json --show-secrets --stack dev') cat <<'EOF'\n" + string(kubeJSON) + "\nEOF\n;;\n" +
		"*) exit 1 ;;\nesac\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "pulumi"), []byte(script), 0o755))
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(gpuciBin, args...)
		cmd.Dir = ".."
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBECONFIG=") }), "PATH="+bin+":/usr/bin:/bin")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, stderr, err := run("images", "--project", testkit.FixtureDir(t), "--stack", "dev", "--pool", "gpu-spot-container", "--job-image", "nvidia/cuda:12.8.1-devel-ubuntu24.04")
	require.NoError(t, err, stderr)
	assert.Equal(t, "ghcr.io/actions/actions-runner:latest,"+ecr+"/lux-gpu-ci/docker-hub/nvidia/cuda:12.8.1-devel-ubuntu24.04\n", out, "ghcr.io not cached here: fully qualified")

	out, stderr, err = run("verify", "--project", testkit.FixtureDir(t), "--stack", "dev")
	require.Error(t, err, "nothing listens on 127.0.0.1:1")
	assert.Contains(t, out, "127.0.0.1:1", "the kubeconfig output was read and used: its server is the one refused")
	assert.Contains(t, stderr, "some checks failed")
}

// gpuci retry --cluster needs the cluster: unreadable, it re-runs nothing and says so, rather
// than decide on GitHub's evidence alone (which would leave container-form jobs failed).
func TestRetryWithAnUnreadableClusterReRunsNothing(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghs_test")
	t.Setenv("GITHUB_API_URL", "http://127.0.0.1:1") // never reached
	out, err := gpuci(t, "", "retry", "--cluster", "--kubeconfig", filepath.Join(t.TempDir(), "missing"),
		"--scale-sets", "lux-gpu-t4", "--repo", "luxfi/app", "--run-id", "7")
	require.Error(t, err, "%s", out)
	assert.Contains(t, out, "the cluster cannot be read, so nothing was re-run")
	assert.Contains(t, out, "without --cluster, GitHub's evidence alone decides")
	assert.NotContains(t, out, "reading run 7", "GitHub is not asked")
}

// The in-cluster retrier runs unattended with no liveness probe: a GitHub that takes its
// request and never answers must not stop it. Its pass (here, the token's check after an
// unreadable cluster) is abandoned at --pass-timeout, and it says so.
func TestTheRetrierOutlivesAGitHubThatNeverAnswers(t *testing.T) {
	t.Parallel()
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hanging.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpuciBin, "retry", "--org", "luxfi", "--scale-sets", "lux-gpu-t4",
		"--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--pass-timeout", "1s")
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN=ghs_test", "GITHUB_API_URL="+hanging.URL)
	started := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "the pass never ended:\n%s", out)
	require.Error(t, err, "the cluster could not be read: %s", out)
	assert.Less(t, time.Since(started), 30*time.Second)
	assert.Contains(t, string(out), "context deadline exceeded", "the token's check, abandoned")
	assert.Contains(t, string(out), "the cluster cannot be read, so nothing was re-run")
}

// gpuci stats, as an operator runs it: the stack's scale sets, GitHub's record of one job
// from a stand-in GitHub (GITHUB_API_URL, as on GitHub Enterprise Server), a table with its
// figures, and progress on standard error.
func TestGpuciStatsPrintsATable(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	reply := func(path, body string) {
		mux.HandleFunc("GET /api/v3"+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		})
	}
	reply("/orgs/luxfi/repos", `[{"name": "app"}]`)
	reply("/repos/luxfi/app/actions/runs", `{"total_count": 1, "workflow_runs": [{"id": 7}]}`)
	reply("/repos/luxfi/app/actions/runs/7/jobs", `{"total_count": 1, "jobs": [{"id": 70, "status": "completed", "conclusion": "success", "run_attempt": 1,
		"runner_name": "lux-gpu-t4-abc12-runner-x1y2z", "created_at": "2026-12-01T10:00:00Z", "started_at": "2026-12-01T10:01:47Z", "completed_at": "2026-12-01T10:13:47Z"}]}`)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	cmd := exec.Command(gpuciBin, "stats", "--stack", "dev", "--project", testkit.FixtureDir(t), "--since", "30d")
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN=ghp_test", "GITHUB_API_URL="+srv.URL)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s%s", stdout.String(), stderr.String())
	out := stdout.String()
	assert.Regexp(t, `(?m)^ +SCALE SET +JOBS +QUEUE p50 +p90 +max +CANCELLED QUEUED +RUN MIN +FAILED +INTERRUPTED +RE-RUNS +SPEND +AT GITHUB'S PRICE$`, out)
	// 107 s queued, 12 minutes at g4dn.xlarge spot ($0.2497/h: $0.05) and at GitHub's $0.052/min ($0.62).
	assert.Regexp(t, `(?m)^ +lux-gpu-t4 +1 +107s +107s +107s +0 +12 +0 +0 +0 +\$0\.05 +\$0\.62$`, out)
	assert.Regexp(t, `(?m)^ +lux-gpu-t4-on-demand +0 +0s`, out, "every scale set of the stack, a job or none")
	assert.Contains(t, stderr.String(), "app: jobs of run 7 (1 of 1)", "progress while it pages")
}
