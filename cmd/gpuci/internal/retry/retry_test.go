package retry_test

// The retry decision against a fake GitHub REST API (httptest) answering with payloads shaped
// like GitHub's: a run, every execution of its jobs, a job's annotations, the two re-run
// endpoints (the run's failed jobs, one job).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v93/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/retry"
)

const runID = 9001

// fakeJob is one execution of a job: attempt 0 is the first (1).
type fakeJob struct {
	id          int64
	name        string
	conclusion  string
	runner      string
	annotations []string
	attempt     int64
}

// The jobs' times as GitHub reports them.
var (
	jobStarted   = time.Date(2026, 12, 3, 11, 50, 0, 0, time.UTC)
	jobCompleted = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
)

// fakeGitHub serves one run of luxfi/app; it records re-run requests.
type fakeGitHub struct {
	status, conclusion string
	attempt            int
	jobs               []fakeJob
	rerunStatus        int // answer to both re-runs (0: 201)
	reruns             int // rerun-failed-jobs requests
	jobReruns          []int64
	// annotationsStatus answers the annotations endpoint (0: the annotations); a fine-grained
	// token gets 403 (it cannot hold the Checks permission).
	annotationsStatus int
	// newerRuns are the workflow's runs on the same branch created after this one.
	newerRuns []map[string]any
	// more adds endpoints (sweep_test.go: the organization's repositories and runs).
	more func(mux *http.ServeMux, write func(http.ResponseWriter, any))
}

func (f *fakeGitHub) serve(t *testing.T) *github.Client {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		require.NoError(t, json.NewEncoder(w).Encode(v))
	}
	mux.HandleFunc("GET /repos/luxfi/app/actions/runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		write(w, map[string]any{"id": runID, "name": "CUDA", "status": f.status, "conclusion": f.conclusion, "run_attempt": f.attempt, "event": "push",
			"workflow_id": 77, "head_branch": "main", "head_sha": "aaaaaaa1111111", "created_at": jobStarted.Add(-time.Minute).Format(time.RFC3339)})
	})
	// The workflow's runs on the run's branch created after it (cancelledOnPurpose).
	mux.HandleFunc("GET /repos/luxfi/app/actions/workflows/77/runs", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "main", r.URL.Query().Get("branch"))
		write(w, map[string]any{"total_count": len(f.newerRuns), "workflow_runs": f.newerRuns})
	})
	mux.HandleFunc("GET /repos/luxfi/app/actions/runs/{run}/jobs", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "all", r.URL.Query().Get("filter"), "every execution, not only the latest attempt's")
		var jobs []map[string]any
		for _, j := range f.jobs {
			jobs = append(jobs, map[string]any{"id": j.id, "run_id": runID, "run_attempt": max(j.attempt, 1), "name": j.name, "status": "completed", "conclusion": j.conclusion,
				"labels": []string{"lux-gpu-t4"}, "runner_name": j.runner, "runner_group_name": "Default",
				"started_at": jobStarted.Format(time.RFC3339), "completed_at": jobCompleted.Format(time.RFC3339)})
		}
		write(w, map[string]any{"total_count": len(jobs), "jobs": jobs})
	})
	mux.HandleFunc("GET /repos/luxfi/app/check-runs/{job}/annotations", func(w http.ResponseWriter, r *http.Request) {
		if f.annotationsStatus != 0 {
			w.WriteHeader(f.annotationsStatus)
			write(w, map[string]any{"message": "Resource not accessible by personal access token", "status": "403"})
			return
		}
		var out []map[string]any
		for _, j := range f.jobs {
			if fmt.Sprint(j.id) == r.PathValue("job") {
				for _, a := range j.annotations {
					out = append(out, map[string]any{"path": ".github", "start_line": 1, "end_line": 1, "annotation_level": "failure", "message": a})
				}
			}
		}
		write(w, out)
	})
	answer := func(w http.ResponseWriter) {
		if f.rerunStatus != 0 {
			w.WriteHeader(f.rerunStatus)
			write(w, map[string]any{"message": "This workflow is already running", "documentation_url": "https://docs.github.com/rest"})
			return
		}
		w.WriteHeader(http.StatusCreated)
		write(w, map[string]any{})
	}
	mux.HandleFunc("POST /repos/luxfi/app/actions/runs/{run}/rerun-failed-jobs", func(w http.ResponseWriter, r *http.Request) {
		f.reruns++
		answer(w)
	})
	mux.HandleFunc("POST /repos/luxfi/app/actions/jobs/{job}/rerun", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("job"), 10, 64)
		require.NoError(t, err)
		f.jobReruns = append(f.jobReruns, id)
		answer(w)
	})
	if f.more != nil {
		f.more(mux, write)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base := srv.URL + "/"
	c, err := github.NewClient(github.WithURLs(&base, &base), github.WithAuthToken("ghs_test"))
	require.NoError(t, err)
	return c
}

const (
	shutdown = "The runner has received a shutdown signal. This can happen when the runner service is stopped, or a manually started runner is canceled."
	lost     = "The self-hosted runner: lux-gpu-t4-7xk2p-runner-abcde lost communication with the server. Verify the machine is running and has a healthy network connection."
	ourA     = "lux-gpu-t4-7xk2p-runner-abcde"
	ourB     = "lux-gpu-t4-7xk2p-runner-fghij"
	ourC     = "lux-gpu-t4-7xk2p-runner-klmno"
)

func decideAndApply(t *testing.T, f *fakeGitHub) (retry.Decision, error) {
	t.Helper()
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"}}
	d, err := r.Decide(context.Background(), runID)
	if err != nil {
		return d, err
	}
	return d, r.Apply(context.Background(), d)
}

func TestInterruptedJobsAreRerunOnce(t *testing.T) {
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{1, "lint", "success", "GitHub Actions 2", nil, 1},
		{2, "cuda (12.9)", "failure", ourA, []string{shutdown}, 1},
		{3, "cuda (13.0)", "failure", ourB, []string{lost}, 1},
	}}
	d, err := decideAndApply(t, f)
	require.NoError(t, err)
	assert.Equal(t, retry.RerunFailedJobs, d.Method, d.Reason)
	assert.Equal(t, []int64{2, 3}, d.Rerun)
	assert.Equal(t, 1, f.reruns, "one re-run of the failed jobs, in one attempt")
	assert.Empty(t, f.jobReruns)
	require.Len(t, d.Failed, 2)
	assert.Equal(t, "GitHub annotation: "+shutdown, d.Failed[0].Evidence, "says which evidence decided")
	assert.Contains(t, d.Reason, "re-run failed jobs (attempt 2)")

	// The same event again, after the re-run started: attempt 2 is running.
	f.status, f.conclusion, f.attempt = "in_progress", "", 2
	d, err = decideAndApply(t, f)
	require.NoError(t, err, "idempotent: a second call is no error")
	assert.Empty(t, d.Method)
	assert.Equal(t, "attempt 2 is in_progress: already re-run", d.Reason)
	assert.Equal(t, 1, f.reruns, "idempotent")

	// Attempt 2 completed, and its node was taken again: each job is re-run once, not twice.
	f.status, f.conclusion = "completed", "failure"
	f.jobs = append(f.jobs, fakeJob{12, "cuda (12.9)", "failure", ourA + "x", []string{shutdown}, 2}, fakeJob{13, "cuda (13.0)", "success", ourB + "x", nil, 2})
	d, err = decideAndApply(t, f)
	require.NoError(t, err)
	assert.Empty(t, d.Method, d.Reason)
	assert.Equal(t, "the 1 interrupted job(s) were re-run once already, or share their name with another job: not re-run", d.Reason)
	require.Len(t, d.Failed, 1, "the latest execution of each job decides: cuda (13.0) passed on attempt 2")
	assert.Equal(t, int64(12), d.Failed[0].ID)
	assert.Contains(t, d.Failed[0].Evidence, "re-run once already (2 executions): not again")
	assert.Equal(t, 1, f.reruns)
	assert.Empty(t, f.jobReruns)
}

// A job that failed by itself is never re-run, and does not keep an interrupted job from its
// re-run: GitHub's per-job re-run takes exactly the interrupted one — one per attempt, since
// GitHub refuses a re-run while an attempt runs; the next goes when that attempt completes.
func TestOnlyTheInterruptedJobsAreRerun(t *testing.T) {
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda (12.9)", "failure", ourA, []string{shutdown}, 1},
		{3, "unit", "failure", ourC, []string{"Process completed with exit code 2."}, 1},
		{4, "cuda (13.0)", "failure", ourB, []string{lost}, 1},
	}}
	d, err := decideAndApply(t, f)
	require.NoError(t, err)
	assert.Equal(t, retry.RerunJob, d.Method, d.Reason)
	assert.Equal(t, []int64{2}, f.jobReruns, "only the first interrupted job, now")
	assert.Zero(t, f.reruns, "never rerun-failed-jobs: it would re-run the unit job too")
	assert.Equal(t, []int64{4}, d.Next)
	assert.Equal(t, "re-run job 2 (attempt 2), which lost one of this stack's runners; 1 failed job(s) not re-run (failed by themselves, re-run once already, or named like another job); 1 more interrupted job(s) after that attempt completes", d.Reason)

	// Attempt 2 (job 2 again) completed: now the second interrupted job.
	f.attempt = 2
	f.jobs = append(f.jobs, fakeJob{22, "cuda (12.9)", "success", ourA + "x", nil, 2})
	d, err = decideAndApply(t, f)
	require.NoError(t, err)
	assert.Equal(t, retry.RerunJob, d.Method, d.Reason)
	assert.Equal(t, []int64{2, 4}, f.jobReruns)
	assert.Empty(t, d.Next)
	assert.Contains(t, d.Reason, "re-run job 4 (attempt 3)")

	// Attempt 3 completed: the unit job still failed by itself; nothing more.
	f.attempt = 3
	f.jobs = append(f.jobs, fakeJob{34, "cuda (13.0)", "success", ourB + "x", nil, 3})
	d, err = decideAndApply(t, f)
	require.NoError(t, err)
	assert.Empty(t, d.Method, d.Reason)
	assert.Equal(t, "no failed job lost one of this stack's runners", d.Reason)
	assert.Equal(t, []int64{2, 4}, f.jobReruns)
}

func TestNothingIsRerun(t *testing.T) {
	for name, f := range map[string]*fakeGitHub{
		"a test step failed": {status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
			{2, "cuda", "failure", ourA, []string{"Process completed with exit code 1."}, 1}}},
		"re-run once already": {status: "completed", conclusion: "failure", attempt: 2, jobs: []fakeJob{
			{2, "cuda", "failure", ourA, []string{shutdown}, 1},
			{12, "cuda", "failure", ourB, []string{shutdown}, 2}}},
		"re-run by hand (the whole run)": {status: "completed", conclusion: "failure", attempt: 2, jobs: []fakeJob{
			{2, "cuda", "success", ourA, nil, 1},
			{12, "cuda", "failure", ourB, []string{shutdown}, 2}}},
		"another runner's job": {status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
			{2, "cuda", "failure", "lux-prod-gpu-t4-7xk2p-runner-abcde", []string{shutdown}, 1},
			{3, "build", "failure", "ip-10-0-1-5", []string{lost}, 1}}},
		"run succeeded": {status: "completed", conclusion: "success", attempt: 1},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := decideAndApply(t, f)
			require.NoError(t, err)
			assert.Empty(t, d.Method, d.Reason)
			assert.Empty(t, d.Rerun)
			assert.NotEmpty(t, d.Reason, "says why not")
			assert.Zero(t, f.reruns)
			assert.Empty(t, f.jobReruns)
		})
	}
}

func TestRunInProgress(t *testing.T) {
	f := &fakeGitHub{status: "in_progress", attempt: 1}
	_, err := decideAndApply(t, f)
	require.ErrorIs(t, err, retry.ErrInProgress)
	assert.Contains(t, err.Error(), "run 9001 is in_progress")
	assert.Zero(t, f.reruns)

	// Completed when read, running again by the time of the re-run: GitHub's 403.
	f = &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, rerunStatus: http.StatusForbidden, jobs: []fakeJob{{2, "cuda", "failure", ourA, []string{shutdown}, 1}}}
	_, err = decideAndApply(t, f)
	assert.True(t, errors.Is(err, retry.ErrInProgress), "%v", err)
	assert.Equal(t, 1, f.reruns)
}

// clusterSays is a cluster that knows some runners (as live.Interruptions answers).
type clusterSays map[string]saw

// saw is what the cluster knows of one runner.
type saw struct {
	evidence    string
	interrupted bool
	cause       string // retry.CauseSpot when interrupted and ""
}

// interruptedOn: the cluster saw pod's spot node interrupted while its job ran.
func interruptedOn(pod string) saw {
	return saw{"cluster: pod " + pod + " was on node ip-10-0-3-7, spot-interrupted at 2026-12-03T11:58:00Z (Spot interruption warning was triggered)", true, ""}
}

func (c clusterSays) Runner(name string, started, completed time.Time) (string, bool, string) {
	if !started.Equal(jobStarted) || !completed.Equal(jobCompleted) {
		return fmt.Sprintf("asked about %s for %v–%v, not the job's own times", name, started, completed), false, ""
	}
	e, ok := c[name]
	if !ok {
		return "cluster: nothing left of pod " + name + " or " + name + "-workflow (pods and events are gone)", false, ""
	}
	switch {
	case !e.interrupted:
		return e.evidence, true, ""
	case e.cause != "":
		return e.evidence, true, e.cause
	}
	return e.evidence, true, retry.CauseSpot
}

// Where the cluster knows more than GitHub it decides, and says so: a container-form job
// whose job pod's node was interrupted fails like a test (its runner survived on a system
// node), and only the cluster can tell. Where it does not know, GitHub's annotations decide.
func TestClusterEvidence(t *testing.T) {
	const podGone = "Error: failed to run script step: pod lux-gpu-t4-7xk2p-runner-abcde-workflow not found"
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda-in-container", "failure", ourA, []string{podGone}, 1},
		{3, "cuda", "failure", ourB, []string{shutdown}, 1},
	}}
	cluster := clusterSays{ourA: {"cluster: pod " + ourA + "-workflow was on node ip-10-0-3-7, spot-interrupted at 2026-12-03T11:58:00Z (Spot interruption warning was triggered)", true, ""}}
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"}, Cluster: cluster}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.NotEmpty(t, d.Rerun, d.Reason)
	require.Len(t, d.Failed, 2)
	assert.Equal(t, cluster[ourA].evidence, d.Failed[0].Evidence, "the cluster decided")
	assert.Equal(t, "GitHub annotation: "+shutdown+"; cluster: nothing left of pod "+ourB+" or "+ourB+"-workflow (pods and events are gone)", d.Failed[1].Evidence, "GitHub decided; the cluster had nothing")

	assert.Equal(t, retry.RerunFailedJobs, d.Method)

	// Without the cluster, the container-form job looks like one that failed by itself: only
	// the runner-form job, which GitHub saw lose its runner, is re-run.
	r.Cluster = nil
	d, err = r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Equal(t, retry.RerunJob, d.Method, d.Reason)
	assert.Equal(t, []int64{3}, d.Rerun)

	// A runner whose node was not interrupted, and no lost-runner annotation: not re-run.
	r.Cluster = clusterSays{ourA: {"cluster: pod " + ourA + " ran on node ip-10-0-3-8, which had no spot interruption since", false, ""}}
	d, err = r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Equal(t, []int64{3}, d.Rerun, "the other job only")
	assert.Equal(t, "cluster: pod "+ourA+" ran on node ip-10-0-3-8, which had no spot interruption since: failed by itself (a lost-runner annotation is not trusted over the cluster)", d.Failed[0].Evidence)
}

// A step can print GitHub's lost-runner text itself: where the cluster knows the runner and
// saw no interruption while the job ran, the annotation does not earn a re-run.
func TestSpoofedAnnotationWithAHealthyCluster(t *testing.T) {
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{{2, "cuda", "failure", ourA, []string{shutdown}, 1}}}
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"},
		Cluster: clusterSays{ourA: {"cluster: pod " + ourA + " ran on node ip-10-0-3-8, which had no spot interruption while the job ran", false, ""}}}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Empty(t, d.Rerun, d.Reason)
	require.Len(t, d.Failed, 1)
	assert.False(t, d.Failed[0].Interrupted)
	assert.Contains(t, d.Failed[0].Evidence, "not trusted over the cluster")

	// The cluster no longer knows the runner (pods and events gone): GitHub decides.
	r.Cluster = clusterSays{}
	d, err = r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.NotEmpty(t, d.Rerun, d.Reason)
}

// A 45-character scale set (ARC's limit): the API server cuts generateName's prefix to 58
// characters, dropping the dash after "runner". Still ours; a longer name of another scale
// set that starts alike is not.
func TestLongScaleSetNames(t *testing.T) {
	long := strings.Repeat("g", 45)
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda", "failure", long + "-7xk2p-runnerabcde", []string{shutdown}, 1},
	}}
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{long}}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.NotEmpty(t, d.Rerun, d.Reason)

	r.ScaleSets = []string{long[:40]}
	d, err = r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Empty(t, d.Rerun, "another scale set's runner")
}

// A container-form job whose job pod's node was taken fails like a test (its runner lived on a
// system node): with the cluster's evidence it is re-run on its own, and a job beside it that
// failed by itself is not.
func TestContainerFormJobRerunOnClusterEvidence(t *testing.T) {
	const podGone = "Error: failed to run script step: pod lux-gpu-t4-7xk2p-runner-abcde-workflow not found"
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda-in-container", "failure", ourA, []string{podGone}, 1},
		{3, "unit", "failure", ourC, []string{"Process completed with exit code 2."}, 1},
	}}
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"}, Cluster: clusterSays{
		ourA: {"cluster: pod " + ourA + "-workflow was on node ip-10-0-3-7, spot-interrupted at 2026-12-03T11:58:00Z (Spot interruption warning was triggered)", true, ""},
		ourC: {"cluster: pod " + ourC + " ran on node ip-10-0-3-9, which had no spot interruption while the job ran", false, ""},
	}}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	require.NoError(t, r.Apply(context.Background(), d))
	assert.Equal(t, retry.RerunJob, d.Method, d.Reason)
	assert.Equal(t, []int64{2}, f.jobReruns)
	assert.Zero(t, f.reruns)
}

// A dependent skipped on attempt 1 (its need was interrupted) and interrupted itself on the
// re-run has run once: it is re-run. Two jobs of one name cannot be told apart: neither is.
func TestExecutionsThatCount(t *testing.T) {
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 2, jobs: []fakeJob{
		{2, "cuda", "failure", ourA, []string{shutdown}, 1},
		{3, "report", "skipped", "", nil, 1},
		{12, "cuda", "success", ourB, nil, 2},
		{13, "report", "failure", ourC, []string{lost}, 2},
	}}
	d, err := decideAndApply(t, f)
	require.NoError(t, err)
	assert.Equal(t, retry.RerunFailedJobs, d.Method, d.Reason)
	require.Len(t, d.Failed, 1)
	assert.Equal(t, 1, d.Failed[0].Executions, "the skipped execution did not run")

	f = &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda", "failure", ourA, []string{shutdown}, 1},
		{3, "cuda", "failure", ourB, []string{"Process completed with exit code 1."}, 1},
	}}
	d, err = decideAndApply(t, f)
	require.NoError(t, err)
	assert.Empty(t, d.Method, d.Reason)
	assert.Zero(t, f.reruns)
	assert.Empty(t, f.jobReruns)
	require.Len(t, d.Failed, 1, "one name, one job as the API lets us see it")
	assert.True(t, d.Failed[0].Ambiguous)
}

// A job only the cluster saw interrupted (a container-form job) is re-run first: a job that
// waits for the next attempt is judged again then, and the cluster's events last about an
// hour, while a lost-runner annotation stays on its job.
func TestClusterOnlyEvidenceGoesFirst(t *testing.T) {
	const podGone = "Error: failed to run script step: pod lux-gpu-t4-7xk2p-runner-abcde-workflow not found"
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda-in-runner", "failure", ourB, []string{shutdown}, 1},
		{3, "unit", "failure", ourC, []string{"Process completed with exit code 2."}, 1},
		{4, "cuda-in-container", "failure", ourA, []string{podGone}, 1},
	}}
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"}, Cluster: clusterSays{
		ourA: {"cluster: pod " + ourA + "-workflow was on node ip-10-0-3-7, spot-interrupted at 2026-12-03T11:58:00Z (Spot interruption warning was triggered)", true, ""},
	}}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Equal(t, retry.RerunJob, d.Method, d.Reason)
	assert.Equal(t, []int64{4}, d.Rerun, "the container-form job, whose evidence expires, now")
	assert.Equal(t, []int64{2}, d.Next, "the runner-form job, whose annotation stays, next")
}

// Two container-form jobs interrupted beside one that failed by itself: the second waits for
// the first's re-run. When that attempt completes it is judged again on what the cluster
// still knows, and nothing else: once the cluster's events are gone (about an hour), it is not
// re-run, and its evidence says why. No memory outlives the events: the retry runner's account
// writes nothing a job on it could forge.
func TestALaterAttemptIsJudgedOnTheClustersEventsAlone(t *testing.T) {
	const podGone = "Error: failed to run script step: pod not found"
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda-a", "failure", ourA, []string{podGone}, 1},
		{3, "unit", "failure", ourC, []string{"Process completed with exit code 2."}, 1},
		{4, "cuda-b", "failure", ourB, []string{podGone}, 1},
	}}
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"},
		Cluster: clusterSays{ourA: interruptedOn(ourA + "-workflow"), ourB: interruptedOn(ourB + "-workflow")}}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	require.NoError(t, r.Apply(context.Background(), d))
	assert.Equal(t, []int64{2}, f.jobReruns)
	assert.Equal(t, []int64{4}, d.Next)

	// Attempt 2 completed within the hour: the cluster still knows, and the second is re-run.
	f.attempt = 2
	f.jobs = append(f.jobs, fakeJob{12, "cuda-a", "success", ourA + "x", nil, 2})
	d, err = r.Decide(context.Background(), runID)
	require.NoError(t, err)
	require.NoError(t, r.Apply(context.Background(), d))
	assert.Equal(t, retry.RerunJob, d.Method, d.Reason)
	assert.Equal(t, []int64{2, 4}, f.jobReruns, "the second interrupted job, on the cluster's evidence")

	// Had it completed later, the cluster would know neither runner: not re-run, and said so.
	f.jobReruns = nil
	r.Cluster = clusterSays{}
	d, err = r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Empty(t, d.Method, d.Reason)
	var second retry.Job
	for _, j := range d.Failed {
		if j.ID == 4 {
			second = j
		}
	}
	require.Equal(t, int64(4), second.ID, "job 4 is among the failed jobs")
	assert.False(t, second.Interrupted)
	assert.Contains(t, second.Evidence, "no lost-runner annotation", "GitHub alone cannot tell a container-form job lost its node")
}
