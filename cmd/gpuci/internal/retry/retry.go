// Package retry decides whether a completed workflow run failed because one of this stack's
// runners was lost (a spot interruption, a node gone) and, if so, re-runs its failed jobs
// once. It talks to GitHub through go-github; the decision is a value the caller can print
// (--dry-run, --json) before anything is changed.
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

// ErrInProgress is returned when the run is not completed: GitHub refuses a re-run then.
var ErrInProgress = errors.New("the run is still in progress")

// Job is one failed job and what was concluded about it.
type Job struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Runner string `json:"runner"`
	// Interrupted: its runner was one of ours and was lost to a spot interruption while the
	// job ran (the cluster's evidence, or GitHub's where the cluster cannot tell).
	Interrupted bool `json:"interrupted"`
	// Evidence is what decided, for the log.
	Evidence string `json:"evidence"`
	// started and completed are GitHub's times of the job: the cluster's evidence counts
	// between them.
	started, completed time.Time
}

// Decision is what Decide found and what Apply will do.
type Decision struct {
	Repo    string `json:"repo"`
	RunID   int64  `json:"runId"`
	Attempt int    `json:"attempt"`
	Failed  []Job  `json:"failedJobs"`
	// Rerun: re-run the run's failed jobs (every failed job was interrupted).
	Rerun  bool   `json:"rerun"`
	Reason string `json:"reason"`
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
	Cluster RunnerEvidence
}

// RunnerEvidence tells what the cluster knows of a runner (by its name): known when it still
// has the runner's pods, interrupted when their node had a spot interruption while the job
// ran (between GitHub's started and completed times of the job).
type RunnerEvidence interface {
	Runner(name string, started, completed time.Time) (evidence string, known, interrupted bool)
}

// ours reports whether a runner name belongs to one of the stack's scale sets.
func (r Retrier) ours(runner string) bool {
	for _, s := range r.ScaleSets {
		if regexp.MustCompile(`^` + regexp.QuoteMeta(s) + `-[a-z0-9]+-runner-?[a-z0-9]+$`).MatchString(runner) {
			return true
		}
	}
	return false
}

// Decide reads the run, its jobs of the latest attempt and their annotations.
func (r Retrier) Decide(ctx context.Context, runID int64) (Decision, error) {
	d := Decision{Repo: r.Owner + "/" + r.Repo, RunID: runID}
	run, _, err := r.Client.Actions.GetWorkflowRunByID(ctx, r.Owner, r.Repo, runID)
	if err != nil {
		return d, fmt.Errorf("reading run %d: %w", runID, err)
	}
	d.Attempt = run.GetRunAttempt()
	if run.GetStatus() != "completed" && d.Attempt > 1 {
		// Re-run already, by us or by hand: nothing to do, and no error (idempotent).
		d.Reason = fmt.Sprintf("attempt %d is %s: already re-run", d.Attempt, run.GetStatus())
		return d, nil
	}
	if run.GetStatus() != "completed" {
		return d, fmt.Errorf("run %d is %s: %w; GitHub accepts a re-run only once it completes (call again on its workflow_run completed event)", runID, run.GetStatus(), ErrInProgress)
	}
	if run.GetConclusion() != "failure" {
		d.Reason = fmt.Sprintf("run concluded %s: nothing to re-run", run.GetConclusion())
		return d, nil
	}
	for job, err := range r.Client.Actions.ListWorkflowJobsAttemptIter(ctx, r.Owner, r.Repo, runID, int64(d.Attempt), &github.ListOptions{PerPage: 100}) {
		if err != nil {
			return d, fmt.Errorf("listing jobs of run %d attempt %d: %w", runID, d.Attempt, err)
		}
		if job.GetConclusion() != "failure" {
			continue
		}
		j := Job{ID: job.GetID(), Name: job.GetName(), Runner: job.GetRunnerName(), started: job.GetStartedAt().Time, completed: job.GetCompletedAt().Time}
		if err := r.judge(ctx, &j); err != nil {
			return d, err
		}
		d.Failed = append(d.Failed, j)
	}
	interrupted := 0
	for _, j := range d.Failed {
		if j.Interrupted {
			interrupted++
		}
	}
	switch {
	case interrupted == 0:
		d.Reason = "no failed job lost one of this stack's runners"
	case d.Attempt > 1:
		d.Reason = fmt.Sprintf("attempt %d: interrupted jobs are re-run once, on the first attempt only", d.Attempt)
	case interrupted < len(d.Failed):
		// Re-running would re-run the jobs that failed by themselves too, and the run
		// stays red for their reasons.
		d.Reason = fmt.Sprintf("%d of %d failed jobs failed by themselves: not re-run", len(d.Failed)-interrupted, len(d.Failed))
	default:
		d.Rerun = true
		d.Reason = fmt.Sprintf("all %d failed jobs lost one of this stack's runners: re-run failed jobs (attempt %d)", interrupted, d.Attempt+1)
	}
	return d, nil
}

// judge decides whether a failed job was interrupted, and records which evidence decided:
// the cluster's, where it knows the runner (its node was interrupted while the job ran, or it
// was not: then a lost-runner annotation, which a step can print too, does not count);
// otherwise, where the cluster cannot be asked or no longer knows, GitHub's annotations.
func (r Retrier) judge(ctx context.Context, j *Job) error {
	if !r.ours(j.Runner) {
		j.Evidence = fmt.Sprintf("runner %q is not one of this stack's scale sets %v", j.Runner, r.ScaleSets)
		return nil
	}
	var cluster string
	if r.Cluster != nil {
		var known, interrupted bool
		cluster, known, interrupted = r.Cluster.Runner(j.Runner, j.started, j.completed)
		switch {
		case interrupted:
			j.Interrupted, j.Evidence = true, cluster
			return nil
		case known:
			j.Evidence = cluster + ": failed by itself (a lost-runner annotation is not trusted over the cluster)"
			return nil
		}
	}
	annotation, err := r.lostRunner(ctx, j.ID)
	if err != nil {
		return err
	}
	j.Interrupted, j.Evidence = annotation != "", annotation
	if !j.Interrupted {
		j.Evidence = "no lost-runner annotation: the job failed by itself"
	}
	if cluster != "" {
		j.Evidence += "; " + cluster
	}
	return nil
}

// lostRunner returns the annotation that says the job's runner was lost, or "".
func (r Retrier) lostRunner(ctx context.Context, jobID int64) (string, error) {
	// A job's check run has the job's ID.
	for a, err := range r.Client.Checks.ListCheckRunAnnotationsIter(ctx, r.Owner, r.Repo, jobID, &github.ListOptions{PerPage: 100}) {
		if err != nil {
			return "", fmt.Errorf("reading annotations of job %d: %w", jobID, err)
		}
		for _, text := range LostRunner {
			if strings.Contains(a.GetMessage(), text) {
				return "GitHub annotation: " + a.GetMessage(), nil
			}
		}
	}
	return "", nil
}

// Apply re-runs the run's failed jobs if the decision says so. A run already re-run by
// someone else is in progress: GitHub answers 403, reported as ErrInProgress.
func (r Retrier) Apply(ctx context.Context, d Decision) error {
	if !d.Rerun {
		return nil
	}
	resp, err := r.Client.Actions.RerunFailedJobsByID(ctx, r.Owner, r.Repo, d.RunID)
	if err != nil {
		// GitHub's 403 for a run that is running again ("This workflow is already running").
		if resp != nil && resp.StatusCode == http.StatusForbidden && strings.Contains(err.Error(), "already running") {
			return fmt.Errorf("run %d: %w (re-run already started?): %v", d.RunID, ErrInProgress, err)
		}
		return fmt.Errorf("re-running failed jobs of run %d: %w", d.RunID, err)
	}
	return nil
}
