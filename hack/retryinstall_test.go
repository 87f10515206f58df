package hack_test

// The retry workflow's install step, run as the retry runner runs it: the released gpuci
// downloaded (from a local server standing in for GitHub's release downloads), checked against
// the SHA-256 the workflow pins, installed and on PATH, in seconds; a binary that does not
// match the pin is refused, even when the release's own sums file was rewritten to match it.

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// installStep is the retry workflow's "Install gpuci" step and its job's env.
func installStep(t *testing.T) (script string, env map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "examples", "workflows", "retry-interrupted.yml"))
	require.NoError(t, err)
	var wf struct {
		Jobs map[string]struct {
			Env   map[string]string `yaml:"env"`
			Steps []struct {
				Name string `yaml:"name"`
				Run  string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &wf))
	job, ok := wf.Jobs["retry"]
	require.True(t, ok, "the workflow has its retry job")
	for _, s := range job.Steps {
		if strings.HasPrefix(s.Name, "Install gpuci") {
			return s.Run, job.Env
		}
	}
	t.Fatal("no Install gpuci step")
	return "", nil
}

func TestRetryWorkflowInstallsGpuciInSeconds(t *testing.T) {
	script, env := installStep(t)
	version := env["GPUCI_VERSION"]
	require.NotEmpty(t, version)
	bin, err := os.ReadFile(gpuciBin)
	require.NoError(t, err)

	pin := sha256.Sum256(bin)
	// A release as make dist lays it out: the binaries and their sums, here the sums of what
	// it serves (whoever replaces a binary in a release can replace its sums file too).
	serve := func(t *testing.T, binary []byte) string {
		sum := sha256.Sum256(binary)
		sums := hex.EncodeToString(sum[:]) + "  gpuci_linux_amd64\n" + strings.Repeat("0", 64) + "  gpuci_darwin_arm64\n"
		files := map[string][]byte{"gpuci_linux_amd64": binary, "SHA256SUMS": []byte(sums)}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /releases/download/{version}/{file}", func(w http.ResponseWriter, r *http.Request) {
			f, ok := files[r.PathValue("file")]
			if r.PathValue("version") != version || !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(f)
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL + "/releases/download"
	}
	run := func(t *testing.T, releases, pinned string) (string, string, error) {
		temp := t.TempDir()
		path := filepath.Join(temp, "github_path")
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "RUNNER_TEMP="+temp, "GITHUB_PATH="+path, "GPUCI_VERSION="+version, "GPUCI_RELEASES="+releases, "GPUCI_SHA256="+pinned)
		out, err := cmd.CombinedOutput()
		added, _ := os.ReadFile(path)
		return string(out), strings.TrimSpace(string(added)), err
	}

	start := time.Now()
	out, added, err := run(t, serve(t, bin), hex.EncodeToString(pin[:]))
	elapsed := time.Since(start)
	require.NoError(t, err, "%s", out)
	assert.Contains(t, out, "gpuci_linux_amd64: OK", "the download matches the workflow's pin")
	assert.Contains(t, out, "pins: ARC", "the installed gpuci runs (gpuci version)")
	require.NotEmpty(t, added, "gpuci's directory goes on the job's PATH")
	assert.FileExists(t, filepath.Join(added, "gpuci"))
	assert.Less(t, elapsed, 10*time.Second, "installed in seconds")
	// GitHub serves release assets from its CDN at tens of MB/s; at a pessimistic 10 MB/s the
	// download adds about a second per 10 MB. (gpuciBin is stripped as make dist strips it;
	// make dist's linux/amd64 binary measured 78 MB.)
	t.Logf("install step: %s locally for a %.1f MB gpuci (~%.0f s more at 10 MB/s)", elapsed.Round(10*time.Millisecond), float64(len(bin))/1e6, float64(len(bin))/10e6)

	// A binary that is not the pinned one is refused, though the release's sums match it.
	tampered := append([]byte{}, bin...)
	tampered[len(tampered)/2] ^= 0xff
	out, _, err = run(t, serve(t, tampered), hex.EncodeToString(pin[:]))
	require.Error(t, err, "a tampered download is refused")
	assert.Contains(t, out, "gpuci_linux_amd64: FAILED")

	// Without a pin, nothing is downloaded or run.
	out, _, err = run(t, serve(t, bin), "")
	require.Error(t, err, "no pin, no install")
	assert.Contains(t, out, "Set GPUCI_SHA256")
}
