package hack_test

// A newcomer's path, as the README's first screen gives it: its three commands, each run as
// written (the bootstrap against stand-ins for AWS and Pulumi, as bootstrap_test does; the
// render and the tests by what make runs, since the tests are this run and stack/render_test
// renders the dev stack), and the README short enough to read.

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeghcr"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// readmeCommands are the commands of the README's "Three commands" table, in order.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "README.md"))
	require.NoError(t, err)
	text := string(b)
	assert.Less(t, strings.Count(text, "\n"), 200, "the README stays under 200 lines")
	start := strings.Index(text, "## Three commands")
	require.GreaterOrEqual(t, start, 0, "the README has its Three commands section")
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var cmds []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(section, -1) {
		cmds = append(cmds, m[1])
	}
	return cmds
}

func TestNewcomersPath(t *testing.T) {
	t.Parallel()
	cmds := readmeCommands(t)
	require.Equal(t, []string{"make render STACK=dev", "make bootstrap", "make test"}, cmds, "the README's three commands")

	// Each is a make target that runs what the README says: the offline render of the dev
	// stack, bootstrap of the starter stack, the test command CI runs.
	dry := func(cmd string) string {
		c := exec.Command("make", append([]string{"-n", "-C", ".."}, strings.Fields(strings.TrimPrefix(cmd, "make "))...)...)
		c.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "STACK=") })
		out, err := c.CombinedOutput()
		require.NoError(t, err, "%s: %s", cmd, out)
		return string(out)
	}
	// What each runs, not how it is spelled: flags and order may change freely.
	assert.Regexp(t, `go run \./hack/render\b.*--stack dev\b`, dry(cmds[0]), "the offline render of the stack the README names")
	assert.Regexp(t, `STACK=starter\b.*hack/bootstrap\.sh`, dry(cmds[1]), "bootstrap of the starter stack")
	assert.Regexp(t, `go test\b.*\./\.\.\.`, dry(cmds[2]), "every package's tests")
	ci, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".ci", "run"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^make test$`, string(ci), "CI runs the README's test command")

	// The bootstrap, as a newcomer with a GitHub App and a state bucket runs it, to its end.
	key := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(key, []byte("-----BEGIN RSA PRIVATE KEY-----\nstand-in\n-----END RSA PRIVATE KEY-----\n"), 0o600))
	secrets := t.TempDir()
	// The starter as shipped (testkit's copy: the repository's own is the operator's to grow).
	stacks := t.TempDir()
	starter, err := os.ReadFile(filepath.Join(testkit.FixtureDir(t), "Pulumi.starter.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(stacks, "Pulumi.starter.yaml"), starter, 0o644))
	c := exec.Command("make", "-s", "-C", "..", "bootstrap")
	c.Env = append(slices.DeleteFunc(bootstrapEnv(), func(kv string) bool {
		return strings.HasPrefix(kv, "STACK=") || strings.HasPrefix(kv, "STACK_FILE_DIR=")
	}), "STACK_FILE_DIR="+stacks, "PATH="+standIns(t), "AWS_REGION=us-west-2", "GITHUB_ORG=luxfi", "PULUMI_BACKEND_URL=s3://newcomer-state",
		"GITHUB_APP_ID=123", "GITHUB_APP_INSTALLATION_ID=456", "GITHUB_APP_PRIVATE_KEY_FILE="+key, "YES=1",
		"FAKE_QUOTA_L_3819A6DF=4", "FAKE_PULUMI_SECRETS="+secrets)
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, want := range []string{
		"stand-in pulumi login s3://newcomer-state",
		"stand-in pulumi config set aws:region us-west-2",
		"stand-in pulumi config set githubAppId 123",
		"stand-in pulumi up --stack starter --yes",
		"gh variable set LUX_GPU_CI_STACK --body 'starter'",
		"gh secret set PULUMI_CONFIG_PASSPHRASE --env 'starter'",
		// The hand-off: what deploy.yml needs from this machine.
		"git add " + stacks + "/Pulumi.starter.yaml && git commit",
		"a GPU job is one line: runs-on",
	} {
		assert.Contains(t, string(out), want)
	}
	b, err := os.ReadFile(filepath.Join(secrets, "githubAppPrivateKey"))
	require.NoError(t, err, "the App key went in with --secret")
	assert.Contains(t, string(b), "stand-in")

	// The workflows for the stack just made name its scale set: the smoke job queues there.
	wf, err := gpuci(t, "starter", "workflows", "--project", stacks)
	require.NoError(t, err, wf)
	assert.Contains(t, wf, "runs-on: lux-starter-t4\n")

	// Grown into dev's shape — an on-demand twin and a container-form pool, as the starter's
	// comment says — the stack stays valid, bootstrap's checks ask for the new quota, and the
	// workflows follow: one job per pool, the re-run on the twin.
	grown := strings.Replace(string(starter), "      runnerLabels: [self-hosted, linux, amd64, cuda, gpu, starter-t4]\n",
		"      runnerLabels: [self-hosted, linux, amd64, cuda, gpu, starter-t4]\n      onDemandRetry: true\n"+
			"    - name: gpu-spot-container\n      instanceTypes: [g4dn.xlarge]\n      capacityTypes: [spot]\n      gpuLimit: 1\n      maxRunners: 1\n"+
			"      jobForm: container\n      runnerGroup: gpu-trusted\n      trustedRepositoriesOnly: true\n      runnerScaleSetName: lux-starter-t4-container\n      runnerLabels: [self-hosted, linux, amd64, cuda, gpu, starter-t4-container]\n", 1)
	require.NotEqual(t, string(starter), grown, "the starter's pool is where the test grows it")
	require.NoError(t, os.WriteFile(filepath.Join(stacks, "Pulumi.starter.yaml"), []byte(grown), 0o644))
	pre := exec.Command("make", "-s", "-C", "..", "preflight")
	pre.Env = append(slices.DeleteFunc(bootstrapEnv(), func(kv string) bool {
		return strings.HasPrefix(kv, "STACK=") || strings.HasPrefix(kv, "STACK_FILE_DIR=")
	}), "STACK_FILE_DIR="+stacks, "PATH="+standIns(t), "AWS_REGION=us-west-2", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4")
	out, err = pre.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "spot G and VT vCPU quota (L-3819A6DF): 8, pools gpu-spot,gpu-spot-container need 8")
	assert.Contains(t, string(out), "on-demand G and VT vCPU quota (L-DB2E81BA): 4, pools gpu-spot-on-demand need 4")
	wf, err = gpuci(t, "starter", "workflows", "--project", stacks)
	require.NoError(t, err, wf)
	assert.Contains(t, wf, "runs-on: ${{ fromJSON(github.run_attempt) > 1 && 'lux-starter-t4-on-demand' || 'lux-starter-t4' }}\n")
	assert.Contains(t, wf, "runs-on: lux-starter-t4-container\n")

	// A second repository: with the stack's retrier on (three config keys), it needs no file
	// of its own. Each GPU job is one runs-on line naming a scale set, with no expression, and
	// no retry workflow is written: the retrier re-runs every repository's interrupted jobs
	// (make e2e runs its Deployment's command against a repository with no workflow of ours).
	// Docker Hub's images through the stack's cache too (imageCache, with its credential).
	withRetrier := strings.Replace(grown, "  lux-gpu-ci:imageCache: []\n", "  lux-gpu-ci:imageCache: [docker.io]\n", 1) +
		"  lux-gpu-ci:registryCredentials:\n    secure: v1:c3RhbmQtaW4=\n" +
		"  lux-gpu-ci:retrierGitHubToken:\n    secure: v1:c3RhbmQtaW4=\n  lux-gpu-ci:retrierGpuciVersion: v0.4.0\n" +
		"  lux-gpu-ci:retrierGpuciSha256: " + strings.Repeat("ab", 32) + "\n"
	require.Contains(t, withRetrier, "imageCache: [docker.io]")
	require.NoError(t, os.WriteFile(filepath.Join(stacks, "Pulumi.starter.yaml"), []byte(withRetrier), 0o644))
	wf, err = gpuci(t, "starter", "workflows", "--project", stacks)
	require.NoError(t, err, wf)
	var runsOn []string
	for _, line := range strings.Split(wf, "\n") {
		if strings.HasPrefix(line, "    runs-on: ") {
			runsOn = append(runsOn, strings.TrimPrefix(line, "    runs-on: "))
		}
	}
	assert.Equal(t, []string{"lux-starter-t4", "lux-starter-t4-container"}, runsOn, "one name per job, no expression")
	assert.NotContains(t, wf, "retry-interrupted", "no retry workflow in any repository")
	assert.Contains(t, wf, "the stack's retrier re-runs the job once")
	// The cached image is named through one organization variable, set once for every
	// repository (docs/design.md: why the nodes cannot mirror docker.io to the cache).
	assert.Contains(t, wf, "image: ${{ vars.LUX_GPU_CI_DOCKER_HUB_CACHE && format('{0}/nvidia/cuda:12.8.1-devel-ubuntu24.04', vars.LUX_GPU_CI_DOCKER_HUB_CACHE) || 'nvidia/cuda:12.8.1-devel-ubuntu24.04' }}")
}

// The README's start times are what gpuci cost models for the repository's dev stack, as
// ranges, said to be modelled: a change of the model, or of dev, that moves a figure moves the
// README's too.
func TestReadmeStartTimesAreTheModels(t *testing.T) {
	t.Parallel()
	out, err := gpuci(t, "", "cost", "--project", testkit.RepoRoot(t), "--stack", "dev", "--json")
	require.NoError(t, err, out)
	type span struct{ Low, High float64 }
	var r struct {
		Pools []struct {
			Pool           string `json:"pool"`
			ColdStart      span   `json:"coldStart"`
			WarmStart      span   `json:"warmStart"`
			SpotShortStart *span  `json:"spotShortStart"`
		} `json:"pools"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "README.md"))
	require.NoError(t, err)
	readme := string(b)
	rows := map[string]string{"gpu-spot": "| runner form", "gpu-spot-container": "| container form"}
	checked := 0
	for _, p := range r.Pools {
		prefix, ok := rows[p.Pool]
		if !ok {
			continue
		}
		checked++
		require.NotNil(t, p.SpotShortStart, "dev's %s falls back to on-demand", p.Pool)
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `[^|]*\| (\d+–\d+ s)[^|]*\| (\d+–\d+ s) \| (\d+–\d+ s) \|$`).FindStringSubmatch(readme)
		require.NotNil(t, row, "the README's start table has a %s row of ranges", prefix)
		for i, want := range []span{p.ColdStart, *p.SpotShortStart, p.WarmStart} {
			assert.Equal(t, fmt.Sprintf("%.0f–%.0f s", want.Low, want.High), row[i+1], "%s: column %d is the model's", p.Pool, i+1)
		}
	}
	assert.Equal(t, 2, checked, "both dev pools")
	assert.Contains(t, readme, "## How soon a job starts\n\nQueued → first step, modelled:", "the table says it is a model")
}

// The README's, the operations page's and design.md's quota figures for dev are what gpuci quota computes
// from Pulumi.dev.yaml (#39: they once said 4 on-demand vCPUs where dev needed 8).
func TestDocsQuotaFiguresAreGpuciQuotas(t *testing.T) {
	t.Parallel()
	out, err := gpuci(t, "", "quota", "--project", testkit.RepoRoot(t), "--stack", "dev", "--json")
	require.NoError(t, err, out)
	var needs []struct {
		CapacityType string   `json:"capacityType"`
		VCPUs        int      `json:"vcpus"`
		Pools        []string `json:"pools"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &needs), out)
	by := map[string]int{}
	for _, n := range needs {
		by[n.CapacityType] = n.VCPUs
	}
	require.Positive(t, by["spot"])
	require.Positive(t, by["on-demand"])
	readme, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(readme), fmt.Sprintf("%d for dev; on-demand (`L-DB2E81BA`) %d for dev", by["spot"], by["on-demand"]))
	ops, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "docs", "operations.md"))
	require.NoError(t, err)
	for _, n := range needs {
		assert.Contains(t, string(ops), fmt.Sprintf("pools %s need %d. Request it", strings.Join(n.Pools, ","), n.VCPUs), "%s, in bootstrap's sample output", n.CapacityType)
	}
	design, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "docs", "design.md"))
	require.NoError(t, err)
	said := regexp.MustCompile(`for (\d+) spot and (\d+) on-demand G and VT vCPUs`).FindStringSubmatch(strings.Join(strings.Fields(string(design)), " "))
	require.Len(t, said, 3, "design.md says dev's quota")
	assert.Equal(t, []string{strconv.Itoa(by["spot"]), strconv.Itoa(by["on-demand"])}, said[1:], "design.md's quota for dev (it once said 4 on-demand where dev needs 16)")
}

// The stack verbs act on the Pulumi stack selected in the directory — after make bootstrap,
// the starter — as gpuci and pulumi do, or on STACK when given; with neither, they stop
// before running anything, never on a silent default.
func TestMakeActsOnTheSelectedStack(t *testing.T) {
	t.Parallel()
	dry := func(selected string, args ...string) (string, error) {
		bin := t.TempDir()
		if selected != "" {
			script := "#!/bin/sh\n[ \"$1 $2\" = \"stack --show-name\" ] && echo " + selected + " && exit 0\nexit 1\n"
			require.NoError(t, os.WriteFile(filepath.Join(bin, "pulumi"), []byte(script), 0o755))
		}
		c := exec.Command("make", append([]string{"-n", "-C", ".."}, args...)...)
		c.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "STACK=") || strings.HasPrefix(kv, "PATH=")
		}), "PATH="+bin+":/usr/bin:/bin")
		out, err := c.CombinedOutput()
		return string(out), err
	}
	for _, verb := range []string{"verify", "doctor", "cost", "destroy", "up", "preview", "render", "workflows"} {
		out, err := dry("starter", verb)
		require.NoError(t, err, out)
		assert.Regexp(t, `(?m)--stack starter( |$)`, out, "make %s acts on the selected stack", verb)
		out, err = dry("starter", verb, "STACK=prod")
		require.NoError(t, err, out)
		assert.Contains(t, out, "--stack prod", "make %s STACK=prod acts on prod", verb)
		out, err = dry("", verb)
		require.Error(t, err, out)
		assert.Contains(t, out, "no Pulumi stack selected here", "make %s with no stack stops", verb)
		assert.NotContains(t, out, "--stack", "and runs nothing")
	}
	out, err := dry("prod", "bootstrap")
	require.NoError(t, err, out)
	assert.Contains(t, out, "STACK=starter hack/bootstrap.sh", "bootstrap makes the starter unless told")
}

// Growing the starter is one command: make grow sets the pool's gpuLimit and maxRunners in
// the stack file (its comments and every other line kept), asks AWS for the quota the grown
// pool needs, and runs the up.
func TestTheStarterGrowsInOneCommand(t *testing.T) {
	t.Parallel()
	c := exec.Command("make", "-n", "-C", "..", "grow", "STACK=starter", "POOL=gpu-spot", "GPUS=4")
	c.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "STACK=") })
	plan, err := c.CombinedOutput()
	require.NoError(t, err, "%s", plan)
	assert.Regexp(t, `(?m)gpuci grow --stack starter --pool gpu-spot --gpus 4\n.*hack/bootstrap\.sh --grow$`, string(plan), "the file, then the quota and the up")

	stacks := t.TempDir()
	starter, err := os.ReadFile(filepath.Join(testkit.FixtureDir(t), "Pulumi.starter.yaml"))
	require.NoError(t, err)
	file := filepath.Join(stacks, "Pulumi.starter.yaml")
	require.NoError(t, os.WriteFile(file, starter, 0o644))
	out, err := gpuci(t, "", "grow", "--project", stacks, "--stack", "starter", "--pool", "gpu-spot", "--gpus", "4")
	require.NoError(t, err, out)
	grown, err := os.ReadFile(file)
	require.NoError(t, err)
	var changed []string
	before, after := strings.Split(string(starter), "\n"), strings.Split(string(grown), "\n")
	require.Len(t, after, len(before), "no line added or lost:\n%s", grown)
	for i := range before {
		if before[i] != after[i] {
			changed = append(changed, after[i])
		}
	}
	assert.Equal(t, []string{"      gpuLimit: 4", "      maxRunners: 4"}, changed, "only the two limits changed, comments and all else kept")

	// A pool the file does not have, or no GPU, changes nothing.
	for _, args := range [][]string{{"--pool", "gpu-nope", "--gpus", "4"}, {"--pool", "gpu-spot", "--gpus", "0"}} {
		out, err := gpuci(t, "", append([]string{"grow", "--project", stacks, "--stack", "starter"}, args...)...)
		require.Error(t, err, out)
		again, _ := os.ReadFile(file)
		assert.Equal(t, string(grown), string(again), "%v changed nothing", args)
	}
	out, err = gpuci(t, "", "grow", "--project", stacks, "--stack", "starter", "--pool", "gpu-nope", "--gpus", "4")
	assert.Contains(t, out, `no pool named "gpu-nope"`)

	// Its quota (16 vCPUs of g4dn.xlarge spot), asked of AWS, then the up.
	log := filepath.Join(t.TempDir(), "aws.log")
	up := exec.Command("bash", "bootstrap.sh", "--grow")
	up.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=starter", "STACK_FILE_DIR="+stacks, "YES=1",
		"FAKE_QUOTA_L_3819A6DF=4", "FAKE_AWS_LOG="+log)
	b, err := up.CombinedOutput()
	require.NoError(t, err, "%s", b)
	calls, _ := os.ReadFile(log)
	assert.Contains(t, string(calls), "request-service-quota-increase --service-code ec2 --quota-code L-3819A6DF --desired-value 16 --region us-west-2")
	assert.Contains(t, string(b), "stand-in pulumi up --stack starter --yes")
	assert.NotContains(t, string(b), "gh ", "the GitHub side is bootstrap's alone")
}

// The README's cost table is what gpuci cost models for the repository's dev stack: idle, per
// build and per month for each job form, GitHub's hosted T4 beside them, and the break-even
// (and design.md's idle total);
// a change of the model, the prices or dev that moves a figure moves the README's too.
func TestReadmeCostsAreTheModels(t *testing.T) {
	t.Parallel()
	out, err := gpuci(t, "", "cost", "--project", testkit.RepoRoot(t), "--stack", "dev", "--json")
	require.NoError(t, err, out)
	var r struct {
		IdleMonthlyUSD float64 `json:"idleMonthlyUSD"`
		Pools          []struct {
			Pool        string  `json:"pool"`
			PerBuildUSD float64 `json:"perBuildUSD"`
		} `json:"pools"`
		GitHubPerBuild float64 `json:"githubHostedT4PerBuildUSD"`
		Comparisons    []struct {
			Pool      string  `json:"pool"`
			Month     float64 `json:"monthUSD"`
			GitHub    float64 `json:"githubHostedMonthUSD"`
			BreakEven float64 `json:"breakEvenBuildsPerMonth"`
		} `json:"comparisons"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "README.md"))
	require.NoError(t, err)
	readme := string(b)
	perBuild := map[string]float64{}
	for _, p := range r.Pools {
		perBuild[p.Pool] = p.PerBuildUSD
	}
	rows := map[string]string{"gpu-spot": "| this stack, steps in the runner (`gpu-spot`) |", "gpu-spot-container": "| this stack, a `container:` job pulling `nvidia/cuda` devel (8 GB) |"}
	var breakEven []float64
	for _, c := range r.Comparisons {
		prefix, ok := rows[c.Pool]
		if !ok {
			continue
		}
		want := fmt.Sprintf("%s $%.0f | $%.3f | $%.0f |", prefix, r.IdleMonthlyUSD, perBuild[c.Pool], c.Month)
		assert.Equal(t, want, readmeRow(t, readme, prefix), "%s: the README's row is the model's", c.Pool)
		gh := "| GitHub-hosted T4 runner ($0.052/min) |"
		assert.Equal(t, fmt.Sprintf("%s $0 | $%.2f | $%.0f |", gh, r.GitHubPerBuild, c.GitHub), readmeRow(t, readme, gh))
		breakEven = append(breakEven, c.BreakEven)
	}
	require.Len(t, breakEven, 2, "both dev forms")
	// design.md's table of what is always on sums to the same idle figure.
	design, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "docs", "design.md"))
	require.NoError(t, err)
	idle := regexp.MustCompile(`\| \*\*Idle total\*\* \| \*\*≈ ([0-9.]+)\*\*`).FindStringSubmatch(string(design))
	require.Len(t, idle, 2, "design.md has its idle total")
	assert.Equal(t, fmt.Sprintf("%.1f", r.IdleMonthlyUSD), idle[1], "design.md's idle total is the model's")

	// The snapshot row: dev with its container pool's images from a snapshot.
	project := t.TempDir()
	for _, f := range []string{"Pulumi.yaml", "Pulumi.dev.yaml"} {
		b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), f))
		require.NoError(t, err)
		if f == "Pulumi.dev.yaml" {
			snap := strings.Replace(string(b), "    - name: gpu-spot-container\n", "    - name: gpu-spot-container\n      imageSnapshotID: snap-0123456789abcdef0\n", 1)
			require.NotEqual(t, string(b), snap, "dev's container pool is where the test gives it a snapshot")
			b = []byte(snap)
		}
		require.NoError(t, os.WriteFile(filepath.Join(project, f), b, 0o644))
	}
	out, err = gpuci(t, "", "cost", "--project", project, "--stack", "dev", "--json")
	require.NoError(t, err, out)
	r.Pools, r.Comparisons = nil, nil
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	for _, p := range r.Pools {
		perBuild[p.Pool] = p.PerBuildUSD
	}
	snapRow := "| the same job, its images from a snapshot ([`imageSnapshotID`](docs/operations.md#images-from-a-snapshot-imagesnapshotid)): 2–4½ min faster cold starts |"
	found := false
	for _, c := range r.Comparisons {
		if c.Pool == "gpu-spot-container" {
			found = true
			assert.Equal(t, fmt.Sprintf("%s $%.0f | $%.3f | $%.0f |", snapRow, r.IdleMonthlyUSD, perBuild[c.Pool], c.Month), readmeRow(t, readme, snapRow))
		}
	}
	assert.True(t, found, "the container pool's comparison")
	slices.Sort(breakEven)
	tens := func(v float64) int { return int(math.Round(v/10)) * 10 }
	assert.Contains(t, readme, fmt.Sprintf("Break-even is about %d–%d builds a month", tens(breakEven[0]), tens(breakEven[1])))
}

// readmeRow is the README's table row that starts with prefix.
func readmeRow(t *testing.T, readme, prefix string) string {
	t.Helper()
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `.*$`).FindString(readme)
	require.NotEmpty(t, row, "the README has a row %q", prefix)
	return row
}

// A runner-form pool goes onto the CUDA runner image in one command, once its nodes can pull
// it: gpuci cuda-image asks the image's registry as a node asks it (no credentials: the
// starter has no image cache), and a private package or a tag not yet published changes
// nothing and says what to do; a pullable one is one line of the stack file. make cuda-image
// then runs the up.
func TestAPoolGoesOntoTheCUDAImageOnceNodesCanPullIt(t *testing.T) {
	t.Parallel()
	c := exec.Command("make", "-n", "-C", "..", "cuda-image", "STACK=starter", "POOL=gpu-spot")
	c.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "STACK=") })
	plan, err := c.CombinedOutput()
	require.NoError(t, err, "%s", plan)
	assert.Regexp(t, `(?m)gpuci cuda-image --stack starter --pool gpu-spot\npulumi up --stack starter$`, string(plan), "the file, then the up")

	registry := fakeghcr.New(map[string][]string{"newcomer-org/lux-cuda-runner": {"cuda12.8"}})
	t.Cleanup(registry.Close)
	ca := filepath.Join(t.TempDir(), "registry.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: registry.Certificate().Raw}), 0o644))
	host := strings.TrimPrefix(registry.URL, "https://")

	stacks := t.TempDir()
	starter, err := os.ReadFile(filepath.Join(testkit.FixtureDir(t), "Pulumi.starter.yaml"))
	require.NoError(t, err)
	file := filepath.Join(stacks, "Pulumi.starter.yaml")
	require.NoError(t, os.WriteFile(file, starter, 0o644))
	cudaImage := func(image string) (string, error) {
		cmd := exec.Command(gpuciBin, "cuda-image", "--project", stacks, "--stack", "starter", "--pool", "gpu-spot", "--image", image)
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+ca) // the registry's certificate, as a node trusts ghcr.io's
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	for image, says := range map[string][]string{
		host + "/other-org/lux-cuda-runner:cuda12.8":    {"is private", "401 Unauthorized", "Change visibility", "registryCredentials", "nothing changed"},
		host + "/newcomer-org/lux-cuda-runner:cuda12.9": {"is not published yet", "404", "gh workflow run cuda-runner-image.yml", "nothing changed"},
	} {
		out, err := cudaImage(image)
		require.Error(t, err, out)
		for _, s := range says {
			assert.Contains(t, out, s, image)
		}
		unchanged, _ := os.ReadFile(file)
		assert.Equal(t, string(starter), string(unchanged), "%s changed nothing", image)
	}

	image := host + "/newcomer-org/lux-cuda-runner:cuda12.8"
	out, err := cudaImage(image)
	require.NoError(t, err, out)
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	added := slices.DeleteFunc(strings.Split(string(after), "\n"), func(l string) bool { return slices.Contains(strings.Split(string(starter), "\n"), l) })
	assert.Equal(t, []string{"      runnerImage: " + image}, added, "one line, comments and all else kept")
	cfg, err := config.ParseStackFileOffline(file)
	require.NoError(t, err)
	require.Len(t, cfg.GPUPools, 1)
	assert.Equal(t, image, cfg.GPUPools[0].RunnerImage)
	assert.True(t, cfg.GPUPools[0].FollowsRunnerReleases(), "the CUDA image's moving tag follows the runner releases, as the stock :latest does")

	out, err = gpuci(t, "", "cuda-image", "--project", stacks, "--stack", "starter", "--pool", "gpu-nope")
	require.Error(t, err, out)
	assert.Contains(t, out, `no pool named "gpu-nope"`)
}
