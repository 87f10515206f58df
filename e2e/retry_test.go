//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// retryScaleSet is dev's retryScaleSetName: its runner's account is the one gpuci retry reads
// the cluster with.
const retryScaleSet = "lux-gpu-retry"

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

// interruptedRun is GitHub's record of the run whose container-form job lost its spot node:
// that job ended as the API server showed it (end: its job pod gone under its runner), and
// beside it a job on another container-form runner failed with a lost-runner line a step
// printed itself, while its node (a system node) had no interruption.
func interruptedRun(interruptedRunner, healthyRunner string, end jobEnd, started time.Time) *githubRun {
	return newGitHubRun(
		githubJob{id: 101, name: "in-container", runner: interruptedRunner, end: end, started: started, completed: time.Now()},
		githubJob{id: 102, name: "unit", runner: healthyRunner, end: stepFailed, note: "The runner has received a shutdown signal. (printed by a step)", started: started.Add(-time.Minute), completed: time.Now()},
	)
}

// retryFromTheCluster is the retry workflow's step on the stack's retry runner, after that
// run: gpuci retry --cluster, with the retry account's token, reads what Karpenter and the
// scheduler recorded and re-runs exactly the interrupted job; the cluster knows better than
// the other job's annotation, and it is not re-run. The account reads events and nothing else.
func retryFromTheCluster(t tb, ctx context.Context, core kubernetes.Interface, gpuci, adminKubeconfig, interruptedRunner, healthyRunner, node string, end jobEnd, started time.Time) {
	dir, err := os.MkdirTemp("", "e2e-retry-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	kubeconfig, account := accountKubeconfig(t, ctx, core, adminKubeconfig, dir, wellknown.RunnersNamespace, wellknown.RetryServiceAccount)

	// What else the account may not do, a hostile job under it tries (hostileJobs).
	for _, ns := range []string{wellknown.RunnersNamespace, wellknown.ContainerJobsNamespace("gpu-spot-container")} {
		_, err = account.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err, "it reads the events where the runners and the job pods run (%s)", ns)
	}

	gh := interruptedRun(interruptedRunner, healthyRunner, end, started)
	srv := gh.serve(t)
	defer srv.Close()

	// The retry workflow's step, as gpuci workflows writes it for this stack file
	// (examples/workflows, which a unit test holds to gpuci's output), with the kubeconfig of
	// the runner's account and --json.
	args := append(retryWorkflowStep(t, "luxfi/app", strconv.Itoa(retryRunID)), "--kubeconfig", kubeconfig, "--json")
	cmd := exec.CommandContext(ctx, gpuci, args...)
	summary := filepath.Join(dir, "step-summary.md") // the runner's $GITHUB_STEP_SUMMARY
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN=ghs_e2e", "GITHUB_API_URL="+srv.URL, "KUBECONFIG=", "GITHUB_STEP_SUMMARY="+summary)
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
	md, err := os.ReadFile(summary)
	require.NoError(t, err, "the decision is in the retry job's summary")
	assert.Contains(t, string(md), "| in-container | failure | "+interruptedRunner+" | **yes** |")
	assert.Contains(t, string(md), "| unit | failure | "+healthyRunner+" | no |")
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

// interruptedMatrix is GitHub's record of a three-leg fail-fast matrix whose first leg is
// the interrupted job (end): GitHub cancelled the second leg, which ran on another runner,
// and the third, still queued (no runner), because the first ended (failFastSibling).
func interruptedMatrix(job, interruptedRunner, otherRunner string, end jobEnd, started time.Time) *githubRun {
	first := job + " (12.9)"
	return newGitHubRun(
		githubJob{id: 101, name: first, runner: interruptedRunner, end: end, started: started, completed: time.Now()},
		githubJob{id: 102, name: job + " (13.0)", runner: otherRunner, end: failFastSibling, failedLeg: first, started: started, completed: time.Now()},
		githubJob{id: 103, name: job + " (13.1)", end: failFastSibling, failedLeg: first, started: started, completed: time.Now()},
	)
}

// retrierSweepsTheOrg is the in-cluster retrier's pass after the same job, in a fail-fast
// matrix (interruptedMatrix): the command and
// arguments of the Deployment the program made (one pass: without --every), its token from
// the Secret the program made, and its own account's token, against a GitHub where the
// repository holds no workflow of the stack's. It finds the interruption in the cluster's
// events, lists the organization's repositories and the failed and cancelled runs since, puts
// the job's pool on on-demand for the cool-down (its cool-down NodePool's limit raised, with
// the rights the program gave it), and re-runs the interrupted leg and the two it cancelled,
// in one attempt. Its account reads
// events, patches the cool-down NodePools and nothing else; no account of the runners'
// namespace reads its token. Then the re-run runs (rerun, the interrupted leg's, which returns
// its runner's name) and passes; once the cool-down is over, the next pass ends it: the limit
// back to 0, and nothing re-run again.
func retrierSweepsTheOrg(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, gpuci, adminKubeconfig, interruptedRunner, healthyRunner string, end jobEnd, started time.Time, rerun func() string) {
	gh := interruptedMatrix("in-container", interruptedRunner, healthyRunner, end, started)
	pass, account, done := retrierPasses(t, ctx, core, gpuci, adminKubeconfig, gh)
	defer done()
	p := pass()
	assert.Positive(t, p.Interruptions, "Karpenter's event, read with the retrier's own account")
	assert.Equal(t, 1, p.Repos)
	coolDown := wellknown.CoolDownNodePool("gpu-spot-container")
	require.Len(t, p.CoolDowns, 1, "the interrupted job's pool goes on-demand")
	assert.Contains(t, p.CoolDowns[0], coolDown+" until ")
	gh.mu.Lock()
	assert.Equal(t, 1, gh.failedJobsRerunCalls, "the interrupted leg and the legs it cancelled, in one attempt, with nothing in the repository")
	assert.Empty(t, gh.jobReruns)
	assert.Equal(t, 2, gh.attempt)
	assert.Equal(t, []string{"failure", "cancelled"}, gh.runLists, "its failed and its cancelled runs")
	gh.mu.Unlock()
	np, err := kube.Resource(nodePools).Get(ctx, coolDown, metav1.GetOptions{})
	require.NoError(t, err)
	limit, _, _ := unstructured.NestedString(np.Object, "spec", "limits", wellknown.GPUResource)
	assert.Equal(t, np.GetAnnotations()[wellknown.CoolDownGPULimitAnnotation], limit, "the cool-down NodePool takes the pool's GPU limit")
	assert.NotEmpty(t, np.GetAnnotations()[wellknown.CoolDownUntilAnnotation])

	// Its account: the events and the cool-down NodePools, nothing else.
	for _, attempt := range []struct{ verb, name string }{{"patch", "gpu-spot-container"}, {"patch", "gpu-spot"}, {"create", ""}, {"delete", coolDown}} {
		review, err := core.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + wellknown.RetrierNamespace + ":" + wellknown.RetrierServiceAccount, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "karpenter.sh", Resource: "nodepools", Verb: attempt.verb, Name: attempt.name},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.False(t, review.Status.Allowed, "the retrier may %s NodePool %q", attempt.verb, attempt.name)
	}
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

	// The re-run, on the pool's on-demand nodes, passes; the cool-down ends (its time moved
	// to the past here, as half an hour would), and the next pass lowers the limit.
	gh.rerunEnds("in-container (12.9)", rerun(), succeeded)
	gh.rerunEnds("in-container (13.0)", "lux-gpu-t4-container-e2e-runner-m2", succeeded)
	gh.rerunEnds("in-container (13.1)", "lux-gpu-t4-container-e2e-runner-m3", succeeded)
	gh.mu.Lock()
	status, conclusion := gh.status()
	gh.mu.Unlock()
	assert.Equal(t, []string{"completed", "success"}, []string{status, conclusion}, "the run is green")
	coolDownEnds(t, ctx, kube, pass, coolDown)
	gh.mu.Lock()
	assert.Equal(t, 1, gh.failedJobsRerunCalls, "re-run once")
	gh.mu.Unlock()
}

// coolDownEnds: a cool-down's end moved to the past (as its half hour would), the retrier's
// next pass ends it: the cool-down NodePool's limit back to 0, the pool on its own NodePool.
func coolDownEnds(t tb, ctx context.Context, kube dynamic.Interface, pass func() retrierPass, coolDown string) {
	past, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{wellknown.CoolDownUntilAnnotation: time.Now().Add(-time.Second).UTC().Format(time.RFC3339)}}})
	require.NoError(t, err)
	_, err = kube.Resource(nodePools).Patch(ctx, coolDown, types.MergePatchType, past, metav1.PatchOptions{})
	require.NoError(t, err)
	p := pass()
	assert.Equal(t, []string{coolDown}, p.Ended)
	assert.Empty(t, p.CoolDowns, "the re-run passed: no run to decide, no cool-down")
	np, err := kube.Resource(nodePools).Get(ctx, coolDown, metav1.GetOptions{})
	require.NoError(t, err)
	limit, _, _ := unstructured.NestedString(np.Object, "spec", "limits", wellknown.GPUResource)
	assert.Equal(t, "0", limit, "the pool back on its own NodePool")
	assert.NotContains(t, np.GetAnnotations(), wellknown.CoolDownUntilAnnotation)
}

// retrierPasses runs the program's retrier as its Deployment does, one pass a call: the
// Deployment's command and arguments (without --every), its token from the Secret the
// program made, its own account's token from the API server, against gh. done removes what
// it made.
func retrierPasses(t tb, ctx context.Context, core kubernetes.Interface, gpuci, adminKubeconfig string, gh *githubRun) (pass func() retrierPass, account kubernetes.Interface, done func()) {
	dir, err := os.MkdirTemp("", "e2e-retrier-")
	require.NoError(t, err)
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

	srv := gh.serve(t)
	pass = func() retrierPass {
		cmd := exec.CommandContext(ctx, gpuci, args...)
		cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+string(secret.Data[ref.Key]), "GITHUB_API_URL="+srv.URL, "KUBECONFIG=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "gpuci %v: %s%s", args, stdout.String(), stderr.String())
		t.Logf("the retrier's pass under %s: %s", wellknown.RetrierServiceAccount, stdout.String())
		var p retrierPass
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &p), stdout.String())
		assert.Empty(t, p.Errors)
		assert.Equal(t, "ok", p.Token, "GitHub took the stack's token (gpuci doctor reads this)")
		return p
	}
	return pass, account, func() { srv.Close(); os.RemoveAll(dir) }
}

// retrierPass is what a pass of the retrier prints (retry.Pass).
type retrierPass struct {
	Interruptions int      `json:"interruptions"`
	Repos         int      `json:"repos"`
	CoolDowns     []string `json:"coolDowns"`
	Ended         []string `json:"coolDownsEnded"`
	OutOfService  []string `json:"outOfService"`
	Token         string   `json:"token"`
	Errors        []string `json:"errors"`
}
