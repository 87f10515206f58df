package hack_test

// The retry workflow's install step, run as the retry runner runs it: the released gpuci
// (pinned by itself when it wrote the workflow) downloaded (from a local server standing in for GitHub's release downloads), checked against
// the SHA-256 the workflow pins, installed and on PATH, in seconds; a binary that does not
// match the pin is refused, even when the release's own sums file was rewritten to match it.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// installStep is the "Install gpuci" step of a retry workflow and its job's env.
func installStep(t *testing.T, content []byte) (script string, env map[string]string) {
	t.Helper()
	var wf struct {
		Jobs map[string]struct {
			Env   map[string]string `yaml:"env"`
			Steps []struct {
				Name string `yaml:"name"`
				Run  string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal(content, &wf))
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

// The retry workflow a released gpuci writes installs that very release: its version and its
// own SHA-256 are the workflow's pin, and the download is checked against it.
func TestRetryWorkflowInstallsGpuciInSeconds(t *testing.T) {
	require.Equal(t, "linux/amd64", runtime.GOOS+"/"+runtime.GOARCH, "the workflow installs gpuci_linux_amd64, which this test builds and runs")
	const version = "v9.9.9-test"
	// A released gpuci, as make dist stamps it (built as TestMain builds gpuciBin, so only the
	// link is new: make dist's -trimpath and CGO_ENABLED=0 would compile every package again).
	released, err := buildGpuci("gpuci_linux_amd64", "-s -w -X main.releaseVersion="+version)
	require.NoError(t, err)
	bin, err := os.ReadFile(released)
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
	// The workflow the released gpuci writes for dev, downloading from releases.
	written := func(t *testing.T, releases string) []byte {
		cmd := exec.Command(released, "workflows", "--stack", "dev", "--project", testkit.RepoRoot(t), "--releases", releases, "--json")
		out, err := cmd.Output()
		require.NoError(t, err)
		var files []struct{ Name, Content string }
		require.NoError(t, json.Unmarshal(out, &files))
		for _, f := range files {
			if f.Name == "retry-interrupted.yml" {
				return []byte(f.Content)
			}
		}
		t.Fatal("no retry workflow for dev")
		return nil
	}
	// The install step as the runner runs it, with its job's env.
	run := func(t *testing.T, workflow []byte) (string, string, error) {
		script, env := installStep(t, workflow)
		temp := t.TempDir()
		path := filepath.Join(temp, "github_path")
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "RUNNER_TEMP="+temp, "GITHUB_PATH="+path)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		added, _ := os.ReadFile(path)
		return string(out), strings.TrimSpace(string(added)), err
	}

	wf := written(t, serve(t, bin))
	_, env := installStep(t, wf)
	assert.Equal(t, version, env["GPUCI_VERSION"], "the release pins itself")
	assert.Equal(t, hex.EncodeToString(pin[:]), env["GPUCI_SHA256"], "by its own SHA-256")
	start := time.Now()
	out, added, err := run(t, wf)
	elapsed := time.Since(start)
	require.NoError(t, err, "%s", out)
	assert.Contains(t, out, "gpuci_linux_amd64: OK", "the download matches the workflow's pin")
	assert.Contains(t, out, "gpuci "+version, "the installed gpuci is the release (gpuci version)")
	require.NotEmpty(t, added, "gpuci's directory goes on the job's PATH")
	assert.FileExists(t, filepath.Join(added, "gpuci"))
	assert.Less(t, elapsed, 10*time.Second, "installed in seconds")
	// GitHub serves release assets from its CDN at tens of MB/s; at a pessimistic 10 MB/s the
	// download adds about a second per 10 MB. (make dist's linux/amd64 binary measured 78 MB.)
	t.Logf("install step: %s locally for a %.1f MB gpuci (~%.0f s more at 10 MB/s)", elapsed.Round(10*time.Millisecond), float64(len(bin))/1e6, float64(len(bin))/10e6)

	// A binary that is not the pinned one is refused, though the release's sums match it.
	tampered := append([]byte{}, bin...)
	tampered[len(tampered)/2] ^= 0xff
	out, _, err = run(t, written(t, serve(t, tampered)))
	require.Error(t, err, "a tampered download is refused")
	assert.Contains(t, out, "gpuci_linux_amd64: FAILED")

	// The shipped example, written from source, pins nothing: nothing is downloaded or run.
	example, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "examples", "workflows", "retry-interrupted.yml"))
	require.NoError(t, err)
	out, _, err = run(t, example)
	require.Error(t, err, "no pin, no install")
	assert.Contains(t, out, "Set GPUCI_VERSION to the gpuci release you deploy")
}
