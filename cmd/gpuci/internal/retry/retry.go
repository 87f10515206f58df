// Package retry decides which failed jobs of a completed workflow run failed because one of
// this stack's runners was lost (a spot interruption, a node gone) and re-runs exactly those,
// each once. It talks to GitHub through go-github; the decision is a value the caller can
// print (--dry-run, --json) before anything is changed.
//
// GitHub re-runs one set of jobs per attempt and refuses another re-run while an attempt runs
// (403). So when every failed job was interrupted, one rerun-failed-jobs re-runs them all;
// when some failed by themselves, one interrupted job is re-run (GitHub's per-job re-run,
// which takes its dependents along), and the next interrupted one when that attempt
// completes and the caller runs again on its completed event. A job is re-run at most once: a
// job with an execution before its latest has been re-run already, by us or by hand.
package retry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-github/v93/github"
)

// LostRunner are the texts GitHub annotates a job with when its runner went away mid-job
// (the runner got SIGTERM as its node drained, or stopped answering).
var LostRunner = []string{
	"The runner has received a shutdown signal",
	"lost communication with the server",
}

// What GitHub records when a job did not fail by itself, and which of those a re-run may undo.
//
// A runner that gets SIGTERM (its node drained for a spot interruption) cancels its job: it
// logs "The runner has received a shutdown signal…" (actions/runner v2.336.0
// src/Runner.Worker/JobRunner.cs:125-143) and the running step "The operation was canceled."
// (StepsRunner.cs:322-337), and GitHub concludes the job, and so the run, `cancelled`
// (runs-on/runs-on#249, 2025-03; paradedb/paradedb#5305, 2026-06). Since about 2026-07 the
// first text is in the job's log only, not its annotations (camunda/camunda#57701): the
// cluster's evidence is what decides. A job a `strategy` with fail-fast cancels because a sibling
// failed is annotated with FailFast; a run a person cancelled with CancelledByHand; one a newer
// run of its concurrency group displaced with Superseded (GitHub's annotations, as the public
// reports quote them).
const (
	FailFast         = "The strategy configuration was canceled because"
	CancelledByHand  = "The run was canceled by"
	Superseded       = "Canceling since a higher priority waiting request"
	ConclusionFailed = "failure"
	// ConclusionCancelled is what a reclaimed runner's job concludes (above).
	ConclusionCancelled = "cancelled"
)

// ErrInProgress is returned when the run is not completed: GitHub refuses a re-run then.
var ErrInProgress = errors.New("the run is still in progress")

// Job is one job that failed or was cancelled (its latest execution) and what was concluded
// about it.
type Job struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Runner string `json:"runner"`
	// Conclusion is GitHub's for this execution: failure or cancelled.
	Conclusion string `json:"conclusion"`
	// CancelledBy says why a cancelled job that was not interrupted itself was cancelled: by an
	// interrupted sibling (fail-fast), by hand, or by a newer run; "" when not known.
	CancelledBy string `json:"cancelledBy,omitempty"`
	// Attempt is the run attempt of this execution of the job.
	Attempt int64 `json:"attempt"`
	// Executions counts the job's executions in the run that ran (a dependent skipped because
	// its need failed did not): more than one, it was re-run before.
	Executions int `json:"executions"`
	// Ambiguous: two jobs of the run share this name in one attempt, so their executions
	// cannot be told apart (GitHub's jobs API names a job only by its display name).
	Ambiguous bool `json:"ambiguous,omitempty"`
	// Interrupted: its runner was one of ours and was lost to a spot interruption (or its
	// node to a broken GPU) while the job ran (the cluster's evidence, or GitHub's where the
	// cluster cannot tell).
	Interrupted bool `json:"interrupted"`
	// Cause is the cluster's: CauseSpot or CauseBrokenGPU; "" where GitHub's annotation decided.
	Cause string `json:"cause,omitempty"`
	// Evidence is what decided, for the log.
	Evidence string `json:"evidence"`
	// started and completed are GitHub's times of the job: the cluster's evidence counts
	// between them.
	started, completed time.Time
	// byCluster: the cluster's evidence decided it was interrupted (for a container-form job,
	// the only evidence there is).
	byCluster bool
}

// retryable: interrupted on the job's only execution so far.
func (j Job) retryable() bool { return j.Interrupted && j.Executions == 1 && !j.Ambiguous }

// How a decision re-runs.
const (
	// RerunFailedJobs re-runs every failed job of the run (and their dependents) in one attempt.
	RerunFailedJobs = "rerun-failed-jobs"
	// RerunJob re-runs one job (and its dependents): the jobs that failed by themselves stay failed.
	RerunJob = "rerun-job"
)

// Decision is what Decide found and what Apply will do.
type Decision struct {
	Repo    string `json:"repo"`
	RunID   int64  `json:"runId"`
	Attempt int    `json:"attempt"`
	Failed  []Job  `json:"failedJobs"`
	// Method is how Apply re-runs (RerunFailedJobs or RerunJob); "" re-runs nothing.
	Method string `json:"method,omitempty"`
	// Rerun are the IDs of the jobs Apply re-runs now.
	Rerun []int64 `json:"rerun,omitempty"`
	// Next are interrupted jobs left for when the re-run attempt completes.
	Next   []int64 `json:"next,omitempty"`
	Reason string  `json:"reason"`
}

// Retrier reads runs and re-runs them in one repository.
type Retrier struct {
	Client      *github.Client
	Owner, Repo string
	// ScaleSets are the stack's runner scale set names: ARC names a runner
	// <scale set>-<id>-runner-<id> (the API server's generateName cuts the prefix to 58
	// characters, so a 45-character scale set's runners read …-runner<id>), so a job's runner
	// name tells whose it was.
	ScaleSets []string
	// Cluster, when set, is what the stack's cluster knows of a runner (live.Interruptions):
	// it sees a spot interruption GitHub cannot — in the container form the runner survives on
	// a system node and reports an ordinary step failure when its job pod's node is taken.
	// The interrupted jobs left for a later attempt (Decision.Next) are judged again when that
	// attempt completes, on what the cluster still knows then: nothing is kept between runs,
	// since whatever the retry runner could write, a job on it could forge.
	Cluster RunnerEvidence
	// ClusterOnly decides on the cluster's evidence alone where GitHub's annotations cannot be
	// read (403): a fine-grained token gets no Checks permission. The in-cluster retrier's
	// token is one, and it acts only on what the cluster saw.
	ClusterOnly bool
}

// RunnerEvidence tells what the cluster knows of a runner (by its name): known when it still
// has the runner's pods; cause, when their node was lost under the job (between GitHub's
// started and completed times of the job): CauseSpot or CauseBrokenGPU; "" when it was not.
type RunnerEvidence interface {
	Runner(name string, started, completed time.Time) (evidence string, known bool, cause string)
}

// Why the cluster lost a job's node (live.Interruption's Cause, the events' reasons).
const (
	// CauseSpot: AWS reclaimed the spot node (Karpenter's SpotInterrupted).
	CauseSpot = "SpotInterrupted"
	// CauseBrokenGPU: its device plugin withdrew a GPU and the retrier took the node out of
	// service (live.OutOfService). Its re-run needs a healthy node, not on-demand capacity.
	CauseBrokenGPU = "GPUOutOfService"
)

// ours reports whether a runner name belongs to one of the stack's scale sets.
func (r Retrier) ours(runner string) bool { return ScaleSetOf(runner, r.ScaleSets) != "" }

// ScaleSetOf is the scale set of scaleSets a runner belongs to, by its name (ARC names a
// runner <scale set>-<id>-runner-<id>, see Retrier.ScaleSets); "" when none. The longest
// match wins: lux-gpu-t4-on-demand's runners are not lux-gpu-t4's.
func ScaleSetOf(runner string, scaleSets []string) string {
	best := ""
	for _, s := range scaleSets {
		if rest, ok := strings.CutPrefix(runner, s+"-"); ok && len(s) > len(best) && runnerSuffix.MatchString(rest) {
			best = s
		}
	}
	return best
}

// runnerSuffix is what ARC puts after a scale set's name in its runners' names: compiled
// once, as gpuci stats asks it of every job it reads.
var runnerSuffix = regexp.MustCompile(`^[a-z0-9]+-runner-?[a-z0-9]+$`)

// Decide reads the run and every execution of its jobs, and decides which failed jobs to
// re-run.
func (r Retrier) Decide(ctx context.Context, runID int64) (Decision, error) {
	d := Decision{Repo: r.Owner + "/" + r.Repo, RunID: runID}
	run, _, err := r.Client.Actions.GetWorkflowRunByID(ctx, r.Owner, r.Repo, runID)
	if err != nil {
		return d, fmt.Errorf("reading run %d: %w", runID, err)
	}
	d.Attempt = run.GetRunAttempt()
	if run.GetStatus() != "completed" && d.Attempt > 1 {
		// Re-run already, by us or by hand: nothing to do, and no error (idempotent). Its own
		// completed event is the time to look again.
		d.Reason = fmt.Sprintf("attempt %d is %s: already re-run", d.Attempt, run.GetStatus())
		return d, nil
	}
	if run.GetStatus() != "completed" {
		return d, fmt.Errorf("run %d is %s: %w; GitHub accepts a re-run only once it completes (call again on its workflow_run completed event)", runID, run.GetStatus(), ErrInProgress)
	}
	if c := run.GetConclusion(); c != ConclusionFailed && c != ConclusionCancelled {
		d.Reason = fmt.Sprintf("run concluded %s: nothing to re-run", c)
		return d, nil
	}
	latest, err := r.latestExecutions(ctx, runID)
	if err != nil {
		return d, err
	}
	for _, j := range latest {
		if err := r.judge(ctx, &j); err != nil {
			return d, err
		}
		d.Failed = append(d.Failed, j)
	}
	// A run a person cancelled, or a newer run displaced, stays as it ended.
	if why, err := r.cancelledOnPurpose(ctx, run, d.Failed); err != nil {
		return d, err
	} else if why != "" {
		d.Reason = why + ": not re-run"
		return d, nil
	}
	causedByInterruption(d.Failed)
	var retry []int64
	interrupted := 0
	// Jobs the cluster decided go first: its evidence lasts as long as its events (about an
	// hour), while a lost-runner annotation stays on its job, so a job that waits for a later
	// attempt is judged again on evidence that is still there.
	for _, clusterOnly := range []bool{true, false} {
		for _, j := range d.Failed {
			if j.byCluster == clusterOnly && j.retryable() {
				retry = append(retry, j.ID)
			}
		}
	}
	for _, j := range d.Failed {
		if j.Interrupted {
			interrupted++
		}
	}
	switch {
	case interrupted == 0:
		d.Reason = "no failed job lost one of this stack's runners"
	case len(retry) == 0:
		d.Reason = fmt.Sprintf("the %d interrupted job(s) were re-run once already, or share their name with another job: not re-run", interrupted)
	case len(retry)+len(collateral(d.Failed)) == len(d.Failed):
		// GitHub's rerun-failed-jobs re-runs the run's failed and cancelled jobs and their
		// dependents (the REST reference: "Re-run failed jobs and their dependent jobs"; that
		// it takes cancelled ones too: DataDog/dd-trace-js#8673, paradedb/paradedb#5305), so the
		// siblings fail-fast cancelled run again with the interrupted job.
		d.Method, d.Rerun = RerunFailedJobs, append(retry, collateral(d.Failed)...)
		d.Reason = fmt.Sprintf("%d job(s) lost one of this stack's runners", len(retry))
		if n := len(collateral(d.Failed)); n > 0 {
			d.Reason += fmt.Sprintf(" and %d were cancelled because one did", n)
		}
		d.Reason += fmt.Sprintf(", and no other job failed: re-run failed jobs (attempt %d)", d.Attempt+1)
	default:
		// GitHub takes one re-run per completed attempt: one job now, the next on the
		// completed event of the attempt this starts.
		d.Method, d.Rerun, d.Next = RerunJob, retry[:1], retry[1:]
		d.Reason = fmt.Sprintf("re-run job %d (attempt %d), which lost one of this stack's runners; %d failed job(s) not re-run (failed by themselves, re-run once already, or named like another job)", retry[0], d.Attempt+1, len(d.Failed)-len(retry))
		if len(d.Next) > 0 {
			d.Reason += fmt.Sprintf("; %d more interrupted job(s) after that attempt completes", len(d.Next))
		}
	}
	return d, nil
}

// latestExecutions lists every execution of the run's jobs (filter=all) and returns, for
// each job that failed in its latest execution, that execution and how many the job had. A
// job is known by its name (matrix values included, so a matrix's legs differ; two jobs of one
// name are marked Ambiguous); an execution by its ID.
func (r Retrier) latestExecutions(ctx context.Context, runID int64) ([]Job, error) {
	type job struct {
		latest     *github.WorkflowJob
		ids        map[int64]bool // the executions that ran
		perAttempt map[int64]int  // entries per run attempt: more than one, two jobs share the name
	}
	byName := map[string]*job{}
	var order []string
	for wj, err := range r.Client.Actions.ListWorkflowJobsIter(ctx, r.Owner, r.Repo, runID, &github.ListWorkflowJobsOptions{Filter: "all", ListOptions: github.ListOptions{PerPage: 100}}) {
		if err != nil {
			return nil, fmt.Errorf("listing the jobs of run %d: %w", runID, err)
		}
		j := byName[wj.GetName()]
		if j == nil {
			j = &job{ids: map[int64]bool{}, perAttempt: map[int64]int{}}
			byName[wj.GetName()] = j
			order = append(order, wj.GetName())
		}
		j.perAttempt[wj.GetRunAttempt()]++
		if wj.GetConclusion() != "skipped" {
			j.ids[wj.GetID()] = true
		}
		if j.latest == nil || wj.GetRunAttempt() > j.latest.GetRunAttempt() {
			j.latest = wj
		}
	}
	var failed []Job
	for _, name := range order {
		wj := byName[name].latest
		if c := wj.GetConclusion(); c != ConclusionFailed && c != ConclusionCancelled {
			continue
		}
		ambiguous := false
		for _, n := range byName[name].perAttempt {
			ambiguous = ambiguous || n > 1
		}
		failed = append(failed, Job{ID: wj.GetID(), Name: wj.GetName(), Runner: wj.GetRunnerName(), Conclusion: wj.GetConclusion(), Attempt: wj.GetRunAttempt(),
			Executions: len(byName[name].ids), Ambiguous: ambiguous, started: wj.GetStartedAt().Time, completed: wj.GetCompletedAt().Time})
	}
	return failed, nil
}

// judge decides whether a failed or cancelled job was interrupted, and records which evidence
// decided: the cluster's, where it knows the runner (its node was interrupted while the job
// ran, or it was not: then a lost-runner annotation, which a step can print too, does not
// count); otherwise, where the cluster cannot be asked or no longer knows, GitHub's
// annotations. A cancelled job's annotations also say why it was cancelled (CancelledBy).
func (r Retrier) judge(ctx context.Context, j *Job) error {
	notes, err := r.annotations(ctx, j.ID)
	var denied *github.ErrorResponse
	readable := true
	if err != nil && r.ClusterOnly && errors.As(err, &denied) && denied.Response != nil && denied.Response.StatusCode == http.StatusForbidden {
		readable, err = false, nil
	}
	if err != nil {
		return err
	}
	if j.Conclusion == ConclusionCancelled {
		j.CancelledBy = cancelCause(notes)
	}
	if !r.ours(j.Runner) {
		j.Evidence = fmt.Sprintf("runner %q is not one of this stack's scale sets %v", j.Runner, r.ScaleSets)
		return nil
	}
	var cluster string
	if r.Cluster != nil {
		var known bool
		var cause string
		cluster, known, cause = r.Cluster.Runner(j.Runner, j.started, j.completed)
		switch {
		case cause != "":
			j.Interrupted, j.Cause, j.Evidence, j.byCluster = true, cause, cluster, true
			j.noteRerun()
			return nil
		case known:
			j.Evidence = cluster + ": failed by itself (a lost-runner annotation is not trusted over the cluster)"
			return nil
		}
	}
	if !readable {
		j.Evidence = "GitHub's annotations cannot be read with this token, and the cluster saw no interruption of this runner: not re-run"
		if cluster != "" {
			j.Evidence += "; " + cluster
		}
		return nil
	}
	annotation := lostRunner(notes)
	j.Interrupted, j.Evidence = annotation != "", annotation
	if !j.Interrupted {
		j.Evidence = "no lost-runner annotation: the job failed by itself"
	}
	if cluster != "" {
		j.Evidence += "; " + cluster
	}
	j.noteRerun()
	return nil
}

// noteRerun adds to an interrupted job's evidence why it is not re-run: twice, or another job
// of the same name.
func (j *Job) noteRerun() {
	switch {
	case j.Interrupted && j.Ambiguous:
		j.Evidence += fmt.Sprintf("; another job of this run is also named %q, so its executions cannot be told apart: not re-run (give the jobs distinct names)", j.Name)
	case j.Interrupted && j.Executions > 1:
		j.Evidence += fmt.Sprintf("; re-run once already (%d executions): not again", j.Executions)
	}
}

// collateral are the cancelled jobs an interrupted job of the run took with it (CancelledBy
// names it), which a re-run of the failed jobs runs again.
func collateral(jobs []Job) []int64 {
	var out []int64
	for _, j := range jobs {
		if !j.Interrupted && j.Conclusion == ConclusionCancelled && strings.HasPrefix(j.CancelledBy, "interrupted ") && j.Executions <= 1 {
			out = append(out, j.ID)
		}
	}
	return out
}

// causedByInterruption marks the cancelled jobs that were cancelled because an interrupted
// job of the run ended: GitHub's fail-fast annotation names the failed leg; where annotations
// cannot be read (ClusterOnly), a cancelled job that ended with or after the first
// interrupted one in the same attempt is taken for its sibling (a person's cancel or a newer
// run's is ruled out first, by cancelledOnPurpose).
func causedByInterruption(jobs []Job) {
	var first *Job
	for i := range jobs {
		j := &jobs[i]
		if j.Interrupted && (first == nil || j.completed.Before(first.completed)) {
			first = j
		}
	}
	if first == nil {
		return
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Interrupted || j.Conclusion != ConclusionCancelled || j.Attempt != first.Attempt {
			continue
		}
		switch {
		case strings.HasPrefix(j.CancelledBy, FailFast):
			j.CancelledBy = "interrupted " + first.Name + " (fail-fast: " + j.CancelledBy + ")"
		case j.CancelledBy == "" && !j.completed.Before(first.completed):
			j.CancelledBy = "interrupted " + first.Name + " (cancelled as it ended)"
		}
		if strings.HasPrefix(j.CancelledBy, "interrupted ") {
			j.Evidence = "cancelled because " + j.CancelledBy
		}
	}
}

// cancelledOnPurpose says why a run was cancelled on purpose, or "": a person cancelled it
// (GitHub's annotation on its jobs), a newer run of its concurrency group displaced it, or
// its branch moved on (a newer run of the same workflow and branch, on another commit: the
// re-run would test a commit nobody is waiting for).
func (r Retrier) cancelledOnPurpose(ctx context.Context, run *github.WorkflowRun, jobs []Job) (string, error) {
	for _, j := range jobs {
		switch {
		case strings.HasPrefix(j.CancelledBy, CancelledByHand):
			return "cancelled by hand (" + j.CancelledBy + ")", nil
		case strings.HasPrefix(j.CancelledBy, Superseded):
			return "a newer run displaced it (" + j.CancelledBy + ")", nil
		}
	}
	if run.GetConclusion() != ConclusionCancelled || run.GetHeadBranch() == "" || run.WorkflowID == nil {
		return "", nil
	}
	opts := &github.ListWorkflowRunsOptions{Branch: run.GetHeadBranch(), Event: run.GetEvent(),
		Created: ">" + run.GetCreatedAt().UTC().Format(time.RFC3339), ListOptions: github.ListOptions{PerPage: 20}}
	newer, _, err := r.Client.Actions.ListWorkflowRunsByID(ctx, r.Owner, r.Repo, run.GetWorkflowID(), opts)
	if err != nil {
		return "", fmt.Errorf("reading newer runs of the workflow on %s: %w", run.GetHeadBranch(), err)
	}
	for _, n := range newer.WorkflowRuns {
		if n.GetID() != run.GetID() && n.GetHeadSHA() != run.GetHeadSHA() {
			return fmt.Sprintf("branch %s moved on: run %d tests %.7s", run.GetHeadBranch(), n.GetID(), n.GetHeadSHA()), nil
		}
	}
	return "", nil
}

// annotations are the messages of a job's annotations (a job's check run has the job's ID).
func (r Retrier) annotations(ctx context.Context, jobID int64) ([]string, error) {
	var out []string
	for a, err := range r.Client.Checks.ListCheckRunAnnotationsIter(ctx, r.Owner, r.Repo, jobID, &github.ListOptions{PerPage: 100}) {
		if err != nil {
			return nil, fmt.Errorf("reading annotations of job %d: %w", jobID, err)
		}
		out = append(out, a.GetMessage())
	}
	return out, nil
}

// lostRunner returns the annotation that says the job's runner was lost, or "".
func lostRunner(notes []string) string {
	for _, n := range notes {
		for _, text := range LostRunner {
			if strings.Contains(n, text) {
				return "GitHub annotation: " + n
			}
		}
	}
	return ""
}

// cancelCause is the annotation that says why a job was cancelled (FailFast, CancelledByHand,
// Superseded), or "".
func cancelCause(notes []string) string {
	for _, n := range notes {
		for _, text := range []string{FailFast, CancelledByHand, Superseded} {
			if strings.HasPrefix(n, text) {
				return n
			}
		}
	}
	return ""
}

// Apply re-runs what the decision says. A run already re-run by someone else is in progress:
// GitHub answers 403, reported as ErrInProgress.
func (r Retrier) Apply(ctx context.Context, d Decision) error {
	if d.Method == "" {
		return nil
	}
	var resp *github.Response
	var err error
	switch d.Method {
	case RerunFailedJobs:
		resp, err = r.Client.Actions.RerunFailedJobsByID(ctx, r.Owner, r.Repo, d.RunID)
	case RerunJob:
		if len(d.Rerun) != 1 {
			return fmt.Errorf("run %d: %s re-runs one job, not %v", d.RunID, RerunJob, d.Rerun)
		}
		resp, err = r.Client.Actions.RerunJobByID(ctx, r.Owner, r.Repo, d.Rerun[0])
	default:
		return fmt.Errorf("run %d: unknown re-run method %q", d.RunID, d.Method)
	}
	if err != nil {
		// GitHub's 403 for a run that is running again ("This workflow is already running").
		if resp != nil && resp.StatusCode == http.StatusForbidden && strings.Contains(err.Error(), "already running") {
			return fmt.Errorf("run %d: %w (re-run already started?): %v", d.RunID, ErrInProgress, err)
		}
		return fmt.Errorf("re-running %v of run %d (%s): %w", d.Rerun, d.RunID, d.Method, err)
	}
	return nil
}
