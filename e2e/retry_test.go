//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// retryScaleSet is dev's retryScaleSetName: its runner's account is the one gpuci retry reads
// the cluster with.
const retryScaleSet = "lux-gpu-retry"

// githubRun is a fake GitHub REST API (the endpoints gpuci retry calls, under GitHub
// Enterprise's /api/v3/, since GITHUB_API_URL points gpuci at it) serving one failed run of
// luxfi/app, and recording the re-runs asked for.
type githubRun struct {
	jobs []githubJob

	mu                   sync.Mutex
	jobReruns            []int64
	failedJobsRerunCalls int
}

type githubJob struct {
	id                 int64
	name, runner, note string // note: the job's one annotation
	started, completed time.Time
}

const retryRunID = 4242

func (g *githubRun) serve(t tb) *httptest.Server {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	const repo = "/api/v3/repos/luxfi/app"
	mux.HandleFunc("GET "+repo+"/actions/runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		write(w, map[string]any{"id": retryRunID, "name": "cuda-smoke", "status": "completed", "conclusion": "failure", "run_attempt": 1})
	})
	mux.HandleFunc("GET "+repo+"/actions/runs/{run}/jobs", func(w http.ResponseWriter, r *http.Request) {
		var jobs []map[string]any
		for _, j := range g.jobs {
			jobs = append(jobs, map[string]any{"id": j.id, "run_id": retryRunID, "run_attempt": 1, "name": j.name, "status": "completed", "conclusion": "failure",
				"runner_name": j.runner, "started_at": j.started.UTC().Format(time.RFC3339), "completed_at": j.completed.UTC().Format(time.RFC3339)})
		}
		write(w, map[string]any{"total_count": len(jobs), "jobs": jobs})
	})
	mux.HandleFunc("GET "+repo+"/check-runs/{job}/annotations", func(w http.ResponseWriter, r *http.Request) {
		out := []map[string]any{}
		for _, j := range g.jobs {
			if strconv.FormatInt(j.id, 10) == r.PathValue("job") {
				out = append(out, map[string]any{"annotation_level": "failure", "message": j.note})
			}
		}
		write(w, out)
	})
	mux.HandleFunc("POST "+repo+"/actions/jobs/{job}/rerun", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.PathValue("job"), 10, 64)
		g.mu.Lock()
		g.jobReruns = append(g.jobReruns, id)
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		write(w, map[string]any{})
	})
	mux.HandleFunc("POST "+repo+"/actions/runs/{run}/rerun-failed-jobs", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.failedJobsRerunCalls++
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		write(w, map[string]any{})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("fake GitHub: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	return srv
}

// retryAccountKubeconfig is a kubeconfig for the retry runner's ServiceAccount: the admin
// kubeconfig's cluster, and a token the API server issues for that account (TokenRequest),
// so every request is authorized by the real RBAC against the Roles the program created.
func retryAccountKubeconfig(t tb, ctx context.Context, core kubernetes.Interface, adminKubeconfig, dir string) (string, kubernetes.Interface) {
	tok, err := core.CoreV1().ServiceAccounts(wellknown.RunnersNamespace).CreateToken(ctx, wellknown.RetryServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))}}, metav1.CreateOptions{})
	require.NoError(t, err, "the stack's retry account %s/%s exists", wellknown.RunnersNamespace, wellknown.RetryServiceAccount)
	admin, err := clientcmd.LoadFromFile(adminKubeconfig)
	require.NoError(t, err)
	current := admin.Contexts[admin.CurrentContext]
	require.NotNil(t, current)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = admin.Clusters[current.Cluster]
	cfg.AuthInfos["retry"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["retry"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "retry", Namespace: wellknown.RunnersNamespace}
	cfg.CurrentContext = "retry"
	path := filepath.Join(dir, "retry-account.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	rest, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	client, err := kubernetes.NewForConfig(rest)
	require.NoError(t, err)
	return path, client
}

// retryFromTheCluster is the retry workflow's step on the stack's retry runner, after a run
// whose container-form job lost its spot node: gpuci retry --cluster, with the retry
// account's token, reads what Karpenter and the scheduler recorded and re-runs exactly that
// job. Beside it in the run, a job on another container-form runner failed with a lost-runner
// annotation a step printed itself, while its node (a system node) had no interruption: the
// cluster knows better, and it is not re-run. The account reads events and nothing else.
func retryFromTheCluster(t tb, ctx context.Context, core kubernetes.Interface, gpuci, adminKubeconfig, interruptedRunner, healthyRunner, node string, started time.Time) {
	dir, err := os.MkdirTemp("", "e2e-retry-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	kubeconfig, account := retryAccountKubeconfig(t, ctx, core, adminKubeconfig, dir)

	// What else the account may not do, a hostile job under it tries (hostileJobs).
	_, err = account.CoreV1().Events(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "it reads the runners' events")

	gh := &githubRun{jobs: []githubJob{
		{id: 101, name: "in-container", runner: interruptedRunner, note: "Error: Process completed with exit code 137.", started: started, completed: time.Now()},
		{id: 102, name: "unit", runner: healthyRunner, note: "The runner has received a shutdown signal. (printed by a step)", started: started.Add(-time.Minute), completed: time.Now()},
	}}
	srv := gh.serve(t)
	defer srv.Close()

	cmd := exec.CommandContext(ctx, gpuci, "retry", "--cluster", "--kubeconfig", kubeconfig,
		"--scale-sets", "lux-gpu-t4,lux-gpu-t4-container", "--repo", "luxfi/app", "--run-id", strconv.Itoa(retryRunID), "--json")
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN=ghs_e2e", "GITHUB_API_URL="+srv.URL, "KUBECONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "gpuci retry: %s%s", stdout.String(), stderr.String())
	assert.NotContains(t, stderr.String(), "cannot be read", "the retry account reads what it needs")
	var d struct {
		Method string  `json:"method"`
		Rerun  []int64 `json:"rerun"`
		Failed []struct {
			ID          int64  `json:"id"`
			Interrupted bool   `json:"interrupted"`
			Evidence    string `json:"evidence"`
		} `json:"failedJobs"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &d), "gpuci retry --json: %s", stdout.String())
	t.Logf("gpuci retry --cluster under %s: %s", wellknown.RetryServiceAccount, stdout.String())
	require.Len(t, d.Failed, 2)
	assert.True(t, d.Failed[0].Interrupted, "the container-form job lost its node")
	assert.Contains(t, d.Failed[0].Evidence, fmt.Sprintf("was on node %s, spot-interrupted", node), "Karpenter's event decided")
	assert.False(t, d.Failed[1].Interrupted, "a lost-runner annotation does not outweigh the cluster")
	assert.Contains(t, d.Failed[1].Evidence, "not trusted over the cluster")
	assert.Equal(t, "rerun-job", d.Method)
	gh.mu.Lock()
	defer gh.mu.Unlock()
	assert.Equal(t, []int64{101}, gh.jobReruns, "exactly the interrupted job is re-run")
	assert.Zero(t, gh.failedJobsRerunCalls, "never the run's failed jobs: unit failed by itself")
}
