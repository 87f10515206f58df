//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// stuckListener: GitHub has had two jobs queued for twenty minutes, one for a scale set whose
// listener made no runner for it (the stuck listener ARC users report:
// actions-runner-controller#3204, #4423), one for the container-form scale set, whose runner
// waits for it (not Ready: it runs no job). gpuci doctor, reading GitHub's queue from a
// stand-in of its REST API and the runner pods from the real API server, names only the
// first; --fix restarts only that scale set's listener, which ARC starts again.
func stuckListener(t *testing.T, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, systemNodes []string, gpuci, kubeconfig string) {
	const stuck, waiting = "lux-gpu-t4", "lux-gpu-t4-container"
	srv := queuedJobsServer(t, map[string]string{"cuda": stuck, "cuda-container": waiting}, time.Now().Add(-20*time.Minute))
	defer srv.Close()
	env := []string{"GITHUB_TOKEN=ghs_e2e", "GITHUB_API_URL=" + srv.URL}

	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	idle := containerFormRunner(t, ctx, core, kube, systemNodes, waiting+"-e2e-runner-w")
	defer func() { _ = pods.Delete(ctx, idle.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}) }()
	require.False(t, podReady(idle), "the container-form runner waits for a job")
	runners, err := pods.List(ctx, metav1.ListOptions{LabelSelector: wellknown.ScaleSetLabel + "=" + stuck})
	require.NoError(t, err)
	require.Empty(t, runners.Items, "no runner of %s: its listener made none", stuck)

	listeners := func() map[string]types.UID {
		list, err := core.CoreV1().Pods(wellknown.ARCNamespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.ScaleSetLabel})
		require.NoError(t, err)
		out := map[string]types.UID{}
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				out[p.Labels[wellknown.ScaleSetLabel]] = p.UID
			}
		}
		return out
	}
	before := listeners()
	require.Contains(t, before, stuck, "%s's listener runs", stuck)
	require.Contains(t, before, waiting, "%s's listener runs", waiting)

	f := gpuciDoctor(t, ctx, gpuci, kubeconfig, "Jobs queued while their scale set starts no runner (a stuck listener)", env...)
	assert.True(t, f.Problem, "doctor finds the stuck listener")
	require.Len(t, f.Evidence, 1, "only the scale set with no runner coming; the container-form one's runner waits: %v", f.Evidence)
	assert.Contains(t, f.Evidence[0], `scale set lux-gpu-t4: 1 job(s) queued, the oldest luxfi/app "cuda" for 20m0s, and no runner pod in arc-runners`)

	fix := exec.CommandContext(ctx, gpuci, "doctor", "--project", repoRoot(t), "--stack", stackName, "--kubeconfig", kubeconfig, "--fix")
	fix.Env = append(os.Environ(), env...)
	fix.Stdin = strings.NewReader("yes\n")
	out, err := fix.CombinedOutput()
	require.NoError(t, err, "gpuci doctor --fix: %s", out)
	assert.Contains(t, string(out), "restarted the listeners of [lux-gpu-t4]")
	require.Eventually(t, func() bool {
		now := listeners()
		return now[stuck] != "" && now[stuck] != before[stuck]
	}, 30*time.Second, 250*time.Millisecond, "ARC starts %s's listener again", stuck)
	after := listeners()
	for set, uid := range before {
		if set != stuck {
			assert.Equal(t, uid, after[set], "%s's listener is left alone", set)
		}
	}
}

// queuedJobsServer stands in for GitHub's REST API as gpuci reads an organization's queue
// (GitHub Enterprise Server's /api/v3/, since GITHUB_API_URL points gpuci at it): the org's
// one repository, one queued run, and in it one queued job per name, asking for its label
// alone, queued at since.
func queuedJobsServer(t *testing.T, jobs map[string]string, since time.Time) *httptest.Server {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	const run = 777
	mux.HandleFunc("GET /api/v3/orgs/luxfi/repos", func(w http.ResponseWriter, r *http.Request) {
		write(w, []map[string]any{{"name": "app"}})
	})
	mux.HandleFunc("GET /api/v3/repos/luxfi/app/actions/runs", func(w http.ResponseWriter, r *http.Request) {
		runs := []map[string]any{}
		if r.URL.Query().Get("status") == "queued" {
			runs = append(runs, map[string]any{"id": run, "status": "queued"})
		}
		write(w, map[string]any{"total_count": len(runs), "workflow_runs": runs})
	})
	mux.HandleFunc("GET /api/v3/repos/luxfi/app/actions/runs/{run}/jobs", func(w http.ResponseWriter, r *http.Request) {
		var out []map[string]any
		id := 1
		for name, label := range jobs {
			out = append(out, map[string]any{"id": id, "run_id": run, "name": name, "status": "queued", "labels": []string{label},
				"created_at": since.UTC().Format(time.RFC3339)})
			id++
		}
		write(w, map[string]any{"total_count": len(out), "jobs": out})
	})
	orgRunnerGroups(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("fake GitHub: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return httptest.NewServer(mux)
}
