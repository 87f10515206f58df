//go:build e2e

package e2e

// GitHub's record of a workflow run, as the REST API serves it to gpuci retry: the stand-in
// derives each job's conclusion and annotations from how its runner ended, observed on the
// real API server (endOf), by GitHub's and the runner's own rules, each cited. It served
// "failure" for every interrupted job until #51: GitHub concludes a job whose runner got the
// shutdown signal `cancelled`.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// jobEnd is how a job's runner ended it.
type jobEnd int

const (
	// stepFailed: a step exited non-zero, and the runner reports the job failed.
	stepFailed jobEnd = iota
	// runnerShutDown: the runner process got SIGTERM mid-job (its pod deleted with a grace
	// period, as a drain or a node's graceful shutdown does). It cancels the job, and GitHub
	// concludes it `cancelled` (actions/runner v2.336.0 src/Runner.Worker/JobRunner.cs:125-143,
	// StepsRunner.cs:322-337; runs-on/runs-on#249, paradedb/paradedb#5305). Since about 2026-07
	// the annotation says only "The operation was canceled."; "The runner has received a
	// shutdown signal" is in the job's log alone (camunda/camunda#57701).
	runnerShutDown
	// jobPodLost: a container-form job's pod vanished under a runner that lives on (its GPU
	// node reclaimed): the hook's exec fails, and the runner fails the step and the job
	// (actions/runner v2.336.0 src/Runner.Worker/Container/ContainerHooks/ContainerHookManager.cs:168-178).
	jobPodLost
	// failFastSibling: GitHub cancelled a matrix leg because another leg failed or was
	// cancelled (strategy.fail-fast, on by default: the workflow syntax reference), with the
	// annotation public logs show.
	failFastSibling
	// succeeded: the job passed.
	succeeded
	// cancelledByHand: a person cancelled the run (the Cancel button, or the REST API's
	// cancel): GitHub concludes the job `cancelled` with the annotation public logs show
	// (cmd/gpuci/internal/retry's CancelledByHand cites them).
	cancelledByHand
)

// endOf reads, on the API server, how a job ended: its runner pod gone or terminating with a
// grace period is a shutdown signal; a container-form job pod gone under a running runner is
// a lost job pod; anything else, a step that failed.
func endOf(t tb, ctx context.Context, core kubernetes.Interface, runner *corev1.Pod, jobPod *corev1.Pod) jobEnd {
	r, err := core.CoreV1().Pods(runner.Namespace).Get(ctx, runner.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), err == nil && r.DeletionTimestamp != nil && r.DeletionGracePeriodSeconds != nil && *r.DeletionGracePeriodSeconds > 0:
		return runnerShutDown
	case err != nil:
		require.NoError(t, err)
	}
	if jobPod != nil {
		_, err := core.CoreV1().Pods(jobPod.Namespace).Get(ctx, jobPod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return jobPodLost
		}
		require.NoError(t, err)
	}
	return stepFailed
}

// githubJob is one execution of a job.
type githubJob struct {
	id                 int64
	name, runner       string
	end                jobEnd
	note               string // what a failing step printed besides its exit (an annotation)
	failedLeg          string // a fail-fast sibling's: the leg that cancelled it
	started, completed time.Time
	attempt            int
}

// conclusion and annotations: GitHub's record of the execution.
func (j githubJob) conclusion() string {
	switch j.end {
	case succeeded:
		return "success"
	case runnerShutDown, failFastSibling, cancelledByHand:
		return "cancelled"
	}
	return "failure"
}

func (j githubJob) annotations() []string {
	var out []string
	switch j.end {
	case stepFailed:
		out = append(out, "Process completed with exit code 1.")
	case runnerShutDown:
		out = append(out, "The operation was canceled.")
	case jobPodLost:
		out = append(out, "Error: Executing the custom container implementation failed. Please contact your self hosted runner administrator.")
	case failFastSibling:
		out = append(out, `The strategy configuration was canceled because "`+j.failedLeg+`" failed`, "The operation was canceled.")
	case cancelledByHand:
		out = append(out, "The run was canceled by @alice.", "The operation was canceled.")
	}
	if j.note != "" {
		out = append(out, j.note)
	}
	return out
}

const (
	retryRunID        = 4242
	cudaSmokeWorkflow = 77
	cudaSmokeSHA      = "9f2c1e0d7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e"
)

// githubRun is one run of luxfi/app's cuda-smoke, under GitHub Enterprise's /api/v3/ (since
// GITHUB_API_URL points gpuci at it), and the re-runs asked of it. A re-run starts the next
// attempt, whose jobs the test then ends (rerunEnds).
type githubRun struct {
	mu                   sync.Mutex
	attempt              int
	jobs                 []githubJob // every execution, every attempt
	jobReruns            []int64
	failedJobsRerunCalls int
	runLists             []string // the status asked for, per list of a repository's runs
}

func newGitHubRun(jobs ...githubJob) *githubRun {
	for i := range jobs {
		jobs[i].attempt = 1
	}
	return &githubRun{attempt: 1, jobs: jobs}
}

// latest are the jobs' executions in the latest attempt, which the run's status and
// conclusion are (a job not re-run keeps its execution into the new attempt).
func (g *githubRun) latest() []githubJob {
	last := map[string]githubJob{}
	var order []string
	for _, j := range g.jobs {
		if _, ok := last[j.name]; !ok {
			order = append(order, j.name)
		}
		last[j.name] = j
	}
	var out []githubJob
	for _, n := range order {
		out = append(out, last[n])
	}
	return out
}

// status and conclusion of the run: in progress while a job of the latest attempt has not
// ended; then failure if a job failed, else cancelled if one was, else success.
func (g *githubRun) status() (status, conclusion string) {
	conclusion = "success"
	for _, j := range g.latest() {
		if j.completed.IsZero() {
			return "in_progress", ""
		}
		switch c := j.conclusion(); {
		case c == "failure":
			conclusion = c
		case c == "cancelled" && conclusion != "failure":
			conclusion = c
		}
	}
	return "completed", conclusion
}

// rerun starts the next attempt with the given jobs' new executions, not yet ended.
func (g *githubRun) rerun(names map[string]bool) {
	g.attempt++
	for _, j := range g.latest() {
		if names[j.name] {
			g.jobs = append(g.jobs, githubJob{id: j.id + 1000*int64(g.attempt), name: j.name, attempt: g.attempt, started: time.Now()})
		}
	}
}

// rerunEnds ends the latest attempt's execution of job name.
func (g *githubRun) rerunEnds(name, runner string, end jobEnd) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.jobs) - 1; i >= 0; i-- {
		if g.jobs[i].name == name {
			g.jobs[i].runner, g.jobs[i].end, g.jobs[i].completed = runner, end, time.Now()
			return
		}
	}
}

func (g *githubRun) serve(t tb) *httptest.Server {
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	const repo = "/api/v3/repos/luxfi/app"
	run := func() map[string]any {
		status, conclusion := g.status()
		return map[string]any{"id": retryRunID, "name": "cuda-smoke", "status": status, "conclusion": conclusion, "run_attempt": g.attempt,
			"workflow_id": cudaSmokeWorkflow, "head_branch": "main", "head_sha": cudaSmokeSHA, "event": "push",
			"created_at": g.jobs[0].started.UTC().Format(time.RFC3339), "updated_at": time.Now().UTC().Format(time.RFC3339)}
	}
	// What the in-cluster retrier's sweep reads first: the organization's repositories, and a
	// repository's runs of a conclusion since the interruption (the status parameter takes a
	// conclusion and returns only the runs that concluded it).
	mux.HandleFunc("GET /api/v3/orgs/luxfi/repos", func(w http.ResponseWriter, r *http.Request) {
		write(w, []map[string]any{{"name": "app", "full_name": "luxfi/app"}})
	})
	mux.HandleFunc("GET "+repo+"/actions/runs", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		asked := r.URL.Query().Get("status")
		g.runLists = append(g.runLists, asked)
		runs := []map[string]any{}
		if _, conclusion := g.status(); conclusion == asked {
			runs = append(runs, run())
		}
		write(w, map[string]any{"total_count": len(runs), "workflow_runs": runs})
	})
	mux.HandleFunc("GET "+repo+"/actions/runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		write(w, run())
	})
	// The workflow's runs on the branch since this one (gpuci asks whether the branch moved
	// on before it re-runs a cancelled run): none but this one.
	mux.HandleFunc("GET "+repo+"/actions/workflows/{workflow}/runs", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		write(w, map[string]any{"total_count": 1, "workflow_runs": []map[string]any{run()}})
	})
	// filter=all: every execution of every attempt (gpuci asks for all).
	mux.HandleFunc("GET "+repo+"/actions/runs/{run}/jobs", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		var jobs []map[string]any
		for _, j := range g.jobs {
			job := map[string]any{"id": j.id, "run_id": retryRunID, "run_attempt": j.attempt, "name": j.name, "status": "in_progress",
				"runner_name": j.runner, "started_at": j.started.UTC().Format(time.RFC3339)}
			if !j.completed.IsZero() {
				job["status"], job["conclusion"], job["completed_at"] = "completed", j.conclusion(), j.completed.UTC().Format(time.RFC3339)
			}
			jobs = append(jobs, job)
		}
		write(w, map[string]any{"total_count": len(jobs), "jobs": jobs})
	})
	mux.HandleFunc("GET "+repo+"/check-runs/{job}/annotations", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		out := []map[string]any{}
		for _, j := range g.jobs {
			if strconv.FormatInt(j.id, 10) == r.PathValue("job") && !j.completed.IsZero() {
				for _, a := range j.annotations() {
					out = append(out, map[string]any{"annotation_level": "failure", "message": a})
				}
			}
		}
		write(w, out)
	})
	// GitHub takes a re-run only of a completed run; rerun-failed-jobs re-runs its failed and
	// cancelled jobs (the REST reference; cancelled ones too: DataDog/dd-trace-js#8673,
	// paradedb/paradedb#5305).
	mux.HandleFunc("POST "+repo+"/actions/jobs/{job}/rerun", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.PathValue("job"), 10, 64)
		g.mu.Lock()
		defer g.mu.Unlock()
		if status, _ := g.status(); status != "completed" {
			http.Error(w, `{"message":"This workflow run is not completed"}`, http.StatusForbidden)
			return
		}
		g.jobReruns = append(g.jobReruns, id)
		for _, j := range g.latest() {
			if j.id == id {
				g.rerun(map[string]bool{j.name: true})
			}
		}
		w.WriteHeader(http.StatusCreated)
		write(w, map[string]any{})
	})
	mux.HandleFunc("POST "+repo+"/actions/runs/{run}/rerun-failed-jobs", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if status, _ := g.status(); status != "completed" {
			http.Error(w, `{"message":"This workflow run is not completed"}`, http.StatusForbidden)
			return
		}
		g.failedJobsRerunCalls++
		names := map[string]bool{}
		for _, j := range g.latest() {
			if c := j.conclusion(); c == "failure" || c == "cancelled" {
				names[j.name] = true
			}
		}
		g.rerun(names)
		w.WriteHeader(http.StatusCreated)
		write(w, map[string]any{})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("fake GitHub: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	return httptest.NewServer(mux)
}
