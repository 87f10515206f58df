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
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
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
	runLists             []string // the status asked for, per list of a repository's runs
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
	// What the in-cluster retrier's sweep reads first: the organization's repositories, and a
	// repository's failed runs since the interruption.
	mux.HandleFunc("GET /api/v3/orgs/luxfi/repos", func(w http.ResponseWriter, r *http.Request) {
		write(w, []map[string]any{{"name": "app", "full_name": "luxfi/app"}})
	})
	mux.HandleFunc("GET "+repo+"/actions/runs", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.runLists = append(g.runLists, r.URL.Query().Get("status"))
		g.mu.Unlock()
		write(w, map[string]any{"total_count": 1, "workflow_runs": []map[string]any{{"id": retryRunID, "status": "completed", "conclusion": "failure",
			"updated_at": time.Now().UTC().Format(time.RFC3339)}}})
	})
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

// retrierToken is the in-cluster retrier's GitHub token in the e2e stack's config.
const retrierToken = "github_pat_e2e_retrier"

// accountKubeconfig is a kubeconfig for a ServiceAccount of the stack's (the retry runner's,
// the in-cluster retrier's): the admin kubeconfig's cluster, and a token the API server issues
// for that account (TokenRequest), so every request is authorized by the real RBAC against
// the Roles the program created.
func accountKubeconfig(t tb, ctx context.Context, core kubernetes.Interface, adminKubeconfig, dir, namespace, account string) (string, kubernetes.Interface) {
	tok, err := core.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, account,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))}}, metav1.CreateOptions{})
	require.NoError(t, err, "the stack's account %s/%s exists", namespace, account)
	admin, err := clientcmd.LoadFromFile(adminKubeconfig)
	require.NoError(t, err)
	current := admin.Contexts[admin.CurrentContext]
	require.NotNil(t, current)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = admin.Clusters[current.Cluster]
	cfg.AuthInfos["retry"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["retry"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "retry", Namespace: wellknown.RunnersNamespace}
	cfg.CurrentContext = "retry"
	path := filepath.Join(dir, account+".kubeconfig")
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
	kubeconfig, account := accountKubeconfig(t, ctx, core, adminKubeconfig, dir, wellknown.RunnersNamespace, wellknown.RetryServiceAccount)

	// What else the account may not do, a hostile job under it tries (hostileJobs).
	for _, ns := range []string{wellknown.RunnersNamespace, wellknown.ContainerJobsNamespace("gpu-spot-container")} {
		_, err = account.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err, "it reads the events where the runners and the job pods run (%s)", ns)
	}

	gh := &githubRun{jobs: []githubJob{
		{id: 101, name: "in-container", runner: interruptedRunner, note: "Error: Process completed with exit code 137.", started: started, completed: time.Now()},
		{id: 102, name: "unit", runner: healthyRunner, note: "The runner has received a shutdown signal. (printed by a step)", started: started.Add(-time.Minute), completed: time.Now()},
	}}
	srv := gh.serve(t)
	defer srv.Close()

	// The retry workflow's step, as gpuci workflows writes it for this stack file
	// (examples/workflows, which a unit test holds to gpuci's output), with the kubeconfig of
	// the runner's account and --json.
	args := append(retryWorkflowStep(t, "luxfi/app", strconv.Itoa(retryRunID)), "--kubeconfig", kubeconfig, "--json")
	cmd := exec.CommandContext(ctx, gpuci, args...)
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

// retryWorkflowStep is the gpuci command line of examples/workflows/retry-interrupted.yml's
// re-run step, its two variables given.
func retryWorkflowStep(t tb, repo, runID string) []string {
	b, err := os.ReadFile(filepath.Join("..", "examples", "workflows", "retry-interrupted.yml"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "run: gpuci retry ")
		if !ok {
			continue
		}
		args := []string{"retry"}
		for _, f := range strings.Fields(cmd) {
			args = append(args, strings.NewReplacer(`"$GITHUB_REPOSITORY"`, repo, `"$RUN_ID"`, runID).Replace(f))
		}
		return args
	}
	require.FailNow(t, "examples/workflows/retry-interrupted.yml runs no gpuci retry")
	return nil
}

// retrierSweepsTheOrg is the in-cluster retrier's pass after the same run: the command and
// arguments of the Deployment the program made (one pass: without --every), its token from
// the Secret the program made, and its own account's token, against a GitHub where the
// repository holds no workflow of the stack's. It finds the interruption in the cluster's
// events, lists the organization's repositories and the failed runs since, and re-runs
// exactly the interrupted job. Its account reads events and nothing else; no account of the
// runners' namespace reads its token.
func retrierSweepsTheOrg(t tb, ctx context.Context, core kubernetes.Interface, gpuci, adminKubeconfig, interruptedRunner, healthyRunner string, started time.Time) {
	dir, err := os.MkdirTemp("", "e2e-retrier-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	kubeconfig, account := accountKubeconfig(t, ctx, core, adminKubeconfig, dir, wellknown.RetrierNamespace, wellknown.RetrierServiceAccount)

	d, err := core.AppsV1().Deployments(wellknown.RetrierNamespace).Get(ctx, wellknown.RetrierName, metav1.GetOptions{})
	require.NoError(t, err, "the program's retrier")
	c := d.Spec.Template.Spec.Containers[0]
	require.Equal(t, "GITHUB_TOKEN", c.Env[0].Name)
	ref := c.Env[0].ValueFrom.SecretKeyRef
	secret, err := core.CoreV1().Secrets(wellknown.RetrierNamespace).Get(ctx, ref.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, retrierToken, string(secret.Data[ref.Key]), "the token the stack was given")
	args := c.Args
	require.Equal(t, []string{"--every", "1m"}, args[len(args)-2:], "a pass a minute")
	args = append(args[:len(args)-2:len(args)-2], "--kubeconfig", kubeconfig)

	gh := &githubRun{jobs: []githubJob{
		{id: 101, name: "in-container", runner: interruptedRunner, note: "Error: Process completed with exit code 137.", started: started, completed: time.Now()},
		{id: 102, name: "unit", runner: healthyRunner, note: "The runner has received a shutdown signal. (printed by a step)", started: started.Add(-time.Minute), completed: time.Now()},
	}}
	srv := gh.serve(t)
	defer srv.Close()
	cmd := exec.CommandContext(ctx, gpuci, args...)
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+string(secret.Data[ref.Key]), "GITHUB_API_URL="+srv.URL, "KUBECONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "gpuci %v: %s%s", args, stdout.String(), stderr.String())
	t.Logf("the retrier's pass under %s: %s", wellknown.RetrierServiceAccount, stdout.String())
	var pass struct {
		Interruptions int      `json:"interruptions"`
		Repos         int      `json:"repos"`
		Errors        []string `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &pass), stdout.String())
	assert.Positive(t, pass.Interruptions, "Karpenter's event, read with the retrier's own account")
	assert.Equal(t, 1, pass.Repos)
	assert.Empty(t, pass.Errors)
	gh.mu.Lock()
	assert.Equal(t, []int64{101}, gh.jobReruns, "exactly the interrupted job, with nothing in the repository")
	assert.Equal(t, []string{"failure"}, gh.runLists, "its failed runs")
	gh.mu.Unlock()

	// Its account: the events, nothing else.
	_, err = account.CoreV1().Pods(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the retrier reads no pod (a job pod's spec holds its job's secrets): %v", err)
	_, err = account.CoreV1().Secrets(wellknown.RunnersNamespace).Get(ctx, "arc-github-credentials", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "nor ARC's credential: %v", err)
	_, err = account.CoreV1().Secrets(wellknown.RetrierNamespace).Get(ctx, wellknown.RetrierTokenSecret, metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "nor its own token, which only its pod's env holds: %v", err)
	// No account of the runners' namespace reads the token.
	for _, sa := range []string{wellknown.ContainerHooksAccount("gpu-spot-container"), k8s.LegacyContainerHooksAccount, wellknown.RetryServiceAccount, "default"} {
		review, err := core.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + wellknown.RunnersNamespace + ":" + sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + wellknown.RunnersNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: wellknown.RetrierNamespace, Verb: "get", Resource: "secrets", Name: wellknown.RetrierTokenSecret},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.False(t, review.Status.Allowed, "%s reads the retrier's token", sa)
	}
}
