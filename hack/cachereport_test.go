package hack_test

// The example workflow's compiler cache report (examples/workflows/cuda.yml, CCACHE_REPORT),
// run as a job runs it, against stand-ins for ccache and curl: the hit rate is out of every
// call ccache saw, and what the cache server failed is said, not hidden among the misses.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

func TestTheCacheReportCountsEveryCall(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "examples", "workflows", "cuda.yml"))
	require.NoError(t, err)
	var wf struct {
		Env map[string]string `yaml:"env"`
	}
	require.NoError(t, yaml.Unmarshal(b, &wf))
	report := wf.Env["CCACHE_REPORT"]
	require.NotEmpty(t, report)

	// ccache --print-stats prints "<counter>\t<value>" lines (ccache v4.12.1); the stand-in
	// prints $FAKE_STATS. curl prints $FAKE_GATE, or fails without it, as an unreachable gate.
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "ccache"), []byte("#!/bin/sh\n[ \"$1\" = --print-stats ] && printf '%b' \"$FAKE_STATS\"\nexit 0\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "curl"), []byte("#!/bin/sh\n[ -n \"$FAKE_GATE\" ] || exit 7\necho \"$*\" >\"$CURL_ARGS\"\nprintf '%s\\n' \"$FAKE_GATE\"\n"), 0o755))
	run := func(stats, gate, storage string) (line, curled string) {
		args := filepath.Join(t.TempDir(), "curl-args")
		cmd := exec.Command("bash", "-c", report)
		cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "FAKE_STATS=" + stats, "FAKE_GATE=" + gate, "CURL_ARGS=" + args, "CCACHE_REMOTE_STORAGE=" + storage}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		a, _ := os.ReadFile(args)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1], string(a)
	}
	const storage = "http://ccache-gpu-spot.gpuci-cache.svc.cluster.local:8080|layout=bazel|connect-timeout=1000|operation-timeout=10000"

	// 10 hits and 40 calls ccache could not cache are 10 of 50, not 10 of 10.
	line, curled := run(`direct_cache_hit\t6\npreprocessed_cache_hit\t4\nremote_storage_hit\t3\nunsupported_compiler_option\t30\ncalled_for_preprocessing\t10\ncalled_for_link\t2\n`, "reads 13 failed 0", storage)
	assert.Equal(t, "compiler cache: 10 of 50 compiler calls hit (20%), 3 from the pool's cache; 0 missed, 40 not cacheable, 0 ccache errors (ccache --show-stats -v above says which); 2 link steps, never cached", line)
	assert.Contains(t, curled, "http://ccache-gpu-spot.gpuci-cache.svc.cluster.local:8080/gpuci/failures", "it asks the pool's gate, at the server ccache uses")

	// Reads the server failed (S3 down) are misses to ccache: the gate's count says so.
	line, _ = run(`cache_miss\t8\ndirect_cache_hit\t2\nremote_storage_error\t1\n`, "reads 10 failed 8", storage)
	assert.Equal(t, "compiler cache: 2 of 10 compiler calls hit (20%), 0 from the pool's cache; 8 missed, 0 not cacheable, 0 ccache errors (ccache --show-stats -v above says which); 0 link steps, never cached"+
		"; ccache counted 1 failed or timed-out requests to the pool's cache (a write refused to a job that does not fill the cache is one)"+
		"; the pool's cache server failed 8 of its 10 reads for this job (S3 unreachable?): those compiled as misses", line)

	// No gate to ask (no pool cache, or it does not answer): the report stands without it.
	line, _ = run(`cache_miss\t1\ninternal_error\t1\n`, "", "")
	assert.Equal(t, "compiler cache: 0 of 2 compiler calls hit (0%), 0 from the pool's cache; 1 missed, 0 not cacheable, 1 ccache errors (ccache --show-stats -v above says which); 0 link steps, never cached", line)
}
