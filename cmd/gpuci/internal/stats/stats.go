// Package stats measures the stack's fleet from GitHub's record of its jobs: per scale set,
// how many jobs ran, how long they queued (p50, p90, max), how many minutes they ran, how many
// lost their runner to a spot interruption and how many were re-runs, and what those minutes
// cost here against GitHub's hosted price. The figures are GitHub's timestamps, not the stack's
// model (gpuci cost). A job's queue time runs from its created_at to when a runner began it:
// its first step's started_at where that is later than the job's own started_at, which for a
// scale set's job GitHub may stamp when it assigns the job, before any runner picks it up
// (actions/actions-runner-controller issue #3346; a maintainer closing PR #4507 says so). A job
// cancelled while it queued waited at least until it was cancelled: it counts in the queue
// times with that wait (so p90 is not biased low), and apart as CancelledQueued.
package stats

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v93/github"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/retry"
)

// ScaleSet is one scale set whose jobs count, and what an hour of its node costs.
type ScaleSet struct {
	Name string
	Pool string
	// PerHour is the pool's node price (cost.HourlyPrice), with the instance type and
	// capacity type it is for.
	PerHour                    float64
	InstanceType, CapacityType string
}

// Collector reads workflow runs and their jobs from GitHub.
type Collector struct {
	Client *github.Client
	// Owner and Repos are where the jobs are: the repositories named, or every repository of
	// the organization Owner when Repos is empty.
	Owner string
	Repos []string
	// ScaleSets are the stack's (its pools' and twins'); a job counts for the one its runner
	// belongs to (retry.ScaleSetOf).
	ScaleSets []ScaleSet
	Since     time.Time
	// Until ends the window (zero: now).
	Until time.Time
	// GitHubPerMinute is GitHub's price of a hosted GPU runner minute, for comparison.
	GitHubPerMinute float64
	// Progress, when set, is told what is being read as the pages go by.
	Progress func(format string, args ...any)
}

// Stats is one scale set's figures.
type Stats struct {
	ScaleSet string `json:"scaleSet"`
	Pool     string `json:"pool"`
	Jobs     int    `json:"jobs"`
	// Queue times in seconds: nearest-rank percentiles of the jobs' waits from created_at to
	// their runner's first step (the package's comment), cancelled-while-queued jobs' included.
	QueueP50 float64 `json:"queueP50Seconds"`
	QueueP90 float64 `json:"queueP90Seconds"`
	QueueMax float64 `json:"queueMaxSeconds"`
	// RunMinutes are the jobs' completed_at − started_at, summed.
	RunMinutes float64 `json:"runMinutes"`
	Failed     int     `json:"failed"`
	// Interrupted are failed jobs GitHub annotates with a lost runner (retry.LostRunner).
	Interrupted int `json:"interrupted"`
	// Reruns are jobs of a run attempt after the first.
	Reruns int `json:"reruns"`
	// CancelledQueued are jobs cancelled before a runner began them.
	CancelledQueued int `json:"cancelledWhileQueued"`
	// Spend is RunMinutes at the pool's node price: the job's own node time, not the warm
	// window or boot around it (gpuci cost models those). GitHub is the same minutes at
	// GitHub's hosted price.
	Spend        float64 `json:"estimatedSpendUsd"`
	GitHub       float64 `json:"githubPriceUsd"`
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	queue        []float64
}

// Report is the fleet's figures since a time.
type Report struct {
	Since     time.Time `json:"since"`
	Repos     int       `json:"repositories"`
	Runs      int       `json:"runs"`
	ScaleSets []Stats   `json:"scaleSets"`
	// Incomplete says why the figures stop short (GitHub's rate limit), "" when they do not:
	// what was read before is kept.
	Incomplete string `json:"incomplete,omitempty"`
}

func (c Collector) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(format, args...)
	}
}

// Collect pages through the repositories, their runs created since c.Since, and every job of
// each run (every attempt), and sums the jobs on the stack's scale sets.
func (c Collector) Collect(ctx context.Context) (Report, error) {
	rep := Report{Since: c.Since}
	repos := c.Repos
	if len(repos) == 0 {
		var err error
		if repos, err = c.orgRepos(ctx); err != nil {
			return rep, err
		}
	}
	rep.Repos = len(repos)
	by := map[string]*Stats{}
	var names []string
	for _, s := range c.ScaleSets {
		by[s.Name] = &Stats{ScaleSet: s.Name, Pool: s.Pool, InstanceType: s.InstanceType, CapacityType: s.CapacityType}
		names = append(names, s.Name)
	}
	until := c.Until
	if until.IsZero() {
		until = time.Now()
	}
	err := c.collect(ctx, repos, names, by, until, &rep)
	var rate *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	switch {
	case errors.As(err, &rate):
		rep.Incomplete = fmt.Sprintf("GitHub's rate limit (resets %s): the figures are what was read before it", rate.Rate.Reset.Format(time.RFC3339))
	case errors.As(err, &abuse):
		rep.Incomplete = "GitHub's secondary rate limit: the figures are what was read before it"
	case err != nil:
		return rep, err
	}
	price := map[string]ScaleSet{}
	for _, s := range c.ScaleSets {
		price[s.Name] = s
	}
	for _, n := range names {
		s := by[n]
		slices.Sort(s.queue)
		s.QueueP50, s.QueueP90 = Percentile(s.queue, 50), Percentile(s.queue, 90)
		if len(s.queue) > 0 {
			s.QueueMax = s.queue[len(s.queue)-1]
		}
		s.Spend = s.RunMinutes / 60 * price[n].PerHour
		s.GitHub = s.RunMinutes * c.GitHubPerMinute
		rep.ScaleSets = append(rep.ScaleSets, *s)
	}
	return rep, nil
}

func (c Collector) collect(ctx context.Context, repos, names []string, by map[string]*Stats, until time.Time, rep *Report) error {
	for _, repo := range repos {
		runs, err := c.runs(ctx, repo, c.Since, until)
		if err != nil {
			return err
		}
		rep.Runs += len(runs)
		for i, run := range runs {
			c.progress("%s: jobs of run %d (%d of %d)", repo, run, i+1, len(runs))
			jobs, err := c.jobs(ctx, repo, run)
			if err != nil {
				return err
			}
			for _, j := range jobs {
				ss := retry.ScaleSetOf(j.GetRunnerName(), names)
				if j.GetStatus() != "completed" || j.CompletedAt == nil {
					continue
				}
				if ss == "" {
					if j.GetConclusion() == "cancelled" && j.GetRunnerName() == "" {
						// Cancelled before any runner took it: whose it would have been is
						// not recorded, so it counts for every scale set its labels name.
						for _, n := range names {
							if slices.Contains(j.Labels, n) {
								by[n].CancelledQueued++
								by[n].queue = append(by[n].queue, math.Max(0, j.CompletedAt.Sub(j.GetCreatedAt().Time).Seconds()))
							}
						}
					}
					continue
				}
				began := pickedUp(j)
				if began.IsZero() {
					continue
				}
				s := by[ss]
				s.Jobs++
				s.queue = append(s.queue, math.Max(0, began.Sub(j.GetCreatedAt().Time).Seconds()))
				s.RunMinutes += math.Max(0, j.CompletedAt.Sub(began).Minutes())
				if j.GetRunAttempt() > 1 {
					s.Reruns++
				}
				if j.GetConclusion() == "failure" {
					s.Failed++
					lost, err := c.lostRunner(ctx, repo, j.GetID())
					if err != nil {
						return err
					}
					if lost {
						s.Interrupted++
					}
				}
			}
		}
	}
	return nil
}

// pickedUp is when a runner began the job: its first step's start where that is later than
// the job's own started_at (stamped at assignment for a scale set's job), else started_at;
// zero if neither is recorded.
func pickedUp(j *github.WorkflowJob) time.Time {
	var t time.Time
	if j.StartedAt != nil {
		t = j.StartedAt.Time
	}
	if len(j.Steps) > 0 && j.Steps[0].StartedAt != nil && j.Steps[0].StartedAt.After(t) {
		t = j.Steps[0].StartedAt.Time
	}
	return t
}

// Percentile is the nearest-rank percentile of sorted values: the smallest value with at
// least p% of the values at or below it (0 for none).
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func (c Collector) orgRepos(ctx context.Context) ([]string, error) {
	var out []string
	opts := &github.RepositoryListByOrgOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		c.progress("repositories of %s, page %d", c.Owner, max(opts.Page, 1))
		repos, resp, err := c.Client.Repositories.ListByOrg(ctx, c.Owner, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s's repositories: %w", c.Owner, err)
		}
		for _, r := range repos {
			if !r.GetArchived() {
				out = append(out, r.GetName())
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// maxListed is how many runs GitHub lists for one query with the created filter ("up to
// 1,000 results for each search", REST API: List workflow runs for a repository).
const maxListed = 1000

// runs are the repository's runs created from from to until (both included): one query per window, and a window
// GitHub holds more than maxListed runs of is halved until each half fits.
func (c Collector) runs(ctx context.Context, repo string, from, until time.Time) ([]int64, error) {
	var out []int64
	window := from.UTC().Format(time.RFC3339) + ".." + until.UTC().Format(time.RFC3339)
	opts := &github.ListWorkflowRunsOptions{Created: window, ListOptions: github.ListOptions{PerPage: 100}}
	for {
		c.progress("%s: workflow runs created %s, page %d", repo, window, max(opts.Page, 1))
		runs, resp, err := c.Client.Actions.ListRepositoryWorkflowRuns(ctx, c.Owner, repo, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s/%s's workflow runs: %w", c.Owner, repo, err)
		}
		if runs.GetTotalCount() > maxListed && until.Sub(from) > 2*time.Second {
			// The range's ends are both included: the halves meet a second apart.
			mid := from.Add(until.Sub(from) / 2).Truncate(time.Second)
			first, err := c.runs(ctx, repo, from, mid)
			if err != nil {
				return nil, err
			}
			second, err := c.runs(ctx, repo, mid.Add(time.Second), until)
			return append(first, second...), err
		}
		for _, r := range runs.WorkflowRuns {
			out = append(out, r.GetID())
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// jobs are every job of a run, each attempt's ("all"): a re-run's jobs and the ones it re-ran.
func (c Collector) jobs(ctx context.Context, repo string, run int64) ([]*github.WorkflowJob, error) {
	var out []*github.WorkflowJob
	opts := &github.ListWorkflowJobsOptions{Filter: "all", ListOptions: github.ListOptions{PerPage: 100}}
	for {
		jobs, resp, err := c.Client.Actions.ListWorkflowJobs(ctx, c.Owner, repo, run, opts)
		if err != nil {
			return nil, fmt.Errorf("listing the jobs of %s/%s run %d: %w", c.Owner, repo, run, err)
		}
		out = append(out, jobs.Jobs...)
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// lostRunner: GitHub annotated the failed job with a lost runner (a job's ID is its check
// run's).
func (c Collector) lostRunner(ctx context.Context, repo string, job int64) (bool, error) {
	anns, _, err := c.Client.Checks.ListCheckRunAnnotations(ctx, c.Owner, repo, job, &github.ListOptions{PerPage: 100})
	if err != nil {
		return false, fmt.Errorf("reading job %d's annotations in %s/%s: %w", job, c.Owner, repo, err)
	}
	for _, a := range anns {
		for _, lost := range retry.LostRunner {
			if strings.Contains(a.GetMessage(), lost) {
				return true, nil
			}
		}
	}
	return false, nil
}
