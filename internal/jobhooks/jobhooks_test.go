package jobhooks_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/jobhooks"
)

// fakeNvidiaSMI stands in for nvidia-smi as the NVIDIA runtime mounts it into the runner: the
// GPU's facts, the CUDA version in its banner, and, looping (-l), the samples in samples one
// per line, then nothing (as a GPU at rest between intervals).
const fakeNvidiaSMI = `#!/usr/bin/env bash
[[ -n ${FAKE_SMI_FAIL:-} ]] && { echo "$FAKE_SMI_FAIL"; exit 9; }
case "$*" in
*"--query-gpu=name,driver_version,memory.total"*) echo "Tesla T4, 570.133.20, 15360 MiB" ;;
*"-l "*) cat "$FAKE_SMI_SAMPLES"; exec sleep 600 ;;
"") echo "| NVIDIA-SMI 570.133.20    Driver Version: 570.133.20    CUDA Version: 12.8     |" ;;
*) echo "stand-in nvidia-smi: $* is not faked" >&2; exit 2 ;;
esac
`

// runner is a job's environment as the runner gives a hook: RUNNER_TEMP, GITHUB_STEP_SUMMARY,
// PATH, and what the stack sets on a runner-form pod.
type runner struct {
	dir, temp, summary, bin string
	env                     []string
}

func newRunner(t *testing.T, withSMI bool, samples string) *runner {
	t.Helper()
	r := &runner{dir: t.TempDir()}
	r.temp, r.bin = filepath.Join(r.dir, "temp"), filepath.Join(r.dir, "bin")
	r.summary = filepath.Join(r.dir, "step_summary")
	for _, d := range []string{r.temp, r.bin, filepath.Join(r.dir, "dmi")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	if withSMI {
		require.NoError(t, os.WriteFile(filepath.Join(r.bin, "nvidia-smi"), []byte(fakeNvidiaSMI), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "samples"), []byte(samples), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "dmi", "product_name"), []byte("g4dn.xlarge\n"), 0o444))
	r.env = append(os.Environ(), "PATH="+r.bin+":/usr/bin:/bin", "RUNNER_TEMP="+r.temp, "GITHUB_STEP_SUMMARY="+r.summary,
		"FAKE_SMI_SAMPLES="+filepath.Join(r.dir, "samples"), "GPUCI_SAMPLE_SECONDS=1", "GPUCI_DMI_DIR="+filepath.Join(r.dir, "dmi"),
		"GPUCI_POOL=gpu-spot", "GPUCI_CAPACITY=spot, on-demand when spot is short", "GPUCI_PRICES=g4dn.xlarge=0.2497 g5.xlarge=0.5328",
		"GPUCI_GITHUB_PER_MINUTE=0.052", "GPUCI_PRICES_SOURCE=test prices", "GPUCI_ZONE=us-west-2b")
	return r
}

// hook runs a hook script as the runner does: `bash -e <file>` (actions/runner v2.336.0
// ScriptHandler.cs, a .sh hook's shell), in the job's environment.
func (r *runner) hook(t *testing.T, script string, env ...string) (string, error) {
	t.Helper()
	path := filepath.Join(r.dir, "hook.sh")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	cmd := exec.Command("bash", "-e", path)
	cmd.Env = append(r.env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestTheSummaryHoldsEveryFieldFromTheSamples(t *testing.T) {
	t.Parallel()
	// Four samples (utilization %, memory MiB): mean (10+90+100+0)/4 = 50%, peak 100%,
	// memory peak 7000 MiB.
	r := newRunner(t, true, "10, 1200\n90, 7000\n100, 6500\n0, 300\n")
	out, err := r.hook(t, jobhooks.JobStarted)
	require.NoError(t, err, out)
	assert.Contains(t, out, "GPU: Tesla T4, 570.133.20, 15360 MiB, CUDA 12.8")
	// The job ran ten minutes by the hooks' clock (its start moved back, the completed hook's
	// now fixed), and long enough by the wall clock for the sampler to write.
	started := time.Now().Add(-10 * time.Minute).Unix()
	require.NoError(t, os.WriteFile(filepath.Join(r.temp, "gpuci", "started"), []byte(strconv.FormatInt(started, 10)), 0o644))
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(r.temp, "gpuci", "samples"))
		return strings.Count(string(b), "\n") == 4
	}, 10*time.Second, 50*time.Millisecond, "the sampler runs through the job")
	sampler, err := os.ReadFile(filepath.Join(r.temp, "gpuci", "sampler"))
	require.NoError(t, err)

	out, err = r.hook(t, jobhooks.JobCompleted, "GPUCI_NOW="+strconv.FormatInt(started+600, 10))
	require.NoError(t, err, out)
	b, err := os.ReadFile(r.summary)
	require.NoError(t, err)
	summary := string(b)
	t.Logf("summary:\n%s", summary)
	for _, want := range []string{
		"### GPU job on gpu-spot: 10.0 min on g4dn.xlarge",
		"| Instance | g4dn.xlarge in us-west-2b, spot, on-demand when spot is short |",
		"| GPU | Tesla T4, driver 570.133.20, CUDA 12.8, 15360 MiB |",
		"| GPU use | 50% mean, 100% peak; memory peak 7000 MiB (4 samples) |",
		// 10 min at $0.2497/h = $0.0416; at $0.052/min = $0.5200; idle half of it: $0.0208.
		"| Cost | $0.0416 here (g4dn.xlarge at $0.2497/h), $0.5200 at GitHub's price ($0.052/min) |",
		"| GPU idle | $0.0208 of it (50% of the time, by the mean) |",
		"test prices",
	} {
		assert.Contains(t, summary, want)
	}
	// The README's sample is this summary's table.
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	for _, line := range strings.Split(summary, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| |") {
			assert.Contains(t, string(readme), line+"\n", "the README's sample job summary")
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(sampler)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return exec.Command("kill", "-0", strconv.Itoa(pid)).Run() != nil }, 5*time.Second, 50*time.Millisecond, "the sampler is stopped with the job")
}

func TestABrokenGPUFailsTheJobInItsFirstSeconds(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		withSMI bool
		env     []string
		want    string
	}{
		"no driver mounted": {false, nil, "::error title=No GPU::nvidia-smi is not in this runner"},
		"driver not loaded": {true, []string{"FAKE_SMI_FAIL=NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."},
			"::error title=GPU not usable::nvidia-smi failed: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRunner(t, tc.withSMI, "")
			start := time.Now()
			out, err := r.hook(t, jobhooks.JobStarted, tc.env...)
			require.Error(t, err, "the hook fails, so the job does: %s", out)
			assert.Contains(t, out, tc.want)
			assert.Less(t, time.Since(start), 5*time.Second, "in its first seconds")
			assert.NoFileExists(t, filepath.Join(r.temp, "gpuci", "sampler"), "and samples nothing")
		})
	}
}

// A job too short for a sample, or on a type without a price, still gets its summary, and
// the completed hook never fails the job.
func TestTheSummaryNeverFailsTheJob(t *testing.T) {
	t.Parallel()
	r := newRunner(t, true, "")
	out, err := r.hook(t, jobhooks.JobStarted)
	require.NoError(t, err, out)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "dmi", "product_name"), []byte("g6.xlarge\n"), 0o644))
	out, err = r.hook(t, jobhooks.JobCompleted)
	require.NoError(t, err, out)
	b, err := os.ReadFile(r.summary)
	require.NoError(t, err)
	assert.Contains(t, string(b), "| GPU use | no sample")
	assert.Contains(t, string(b), "| Cost | no price for g6.xlarge |")
	assert.Regexp(t, regexp.MustCompile(`### GPU job on gpu-spot: 0\.[0-9] min on g6\.xlarge`), string(b))

	// Without anything of the started hook (it never ran), too.
	r = newRunner(t, false, "")
	out, err = r.hook(t, jobhooks.JobCompleted)
	require.NoError(t, err, out)
}
