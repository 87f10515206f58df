// Package stats measures the stack's fleet from GitHub's record of its jobs: per scale set,
// how many jobs ran, how long they queued (p50, p90, max), how many minutes they ran, how many
// lost their runner to a spot interruption and how many were re-runs, and what those minutes
// cost here against GitHub's hosted price. The figures are GitHub's timestamps: a job's queue
// time is its started_at minus its created_at, which holds the whole wait (a runner pod, a
// node launched, images pulled), not the stack's model of it (gpuci cost).
package stats

import (
	"context"
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
	// Queue times in seconds: nearest-rank percentiles of the jobs' started_at − created_at.
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
	for _, repo := range repos {
		runs, err := c.runs(ctx, repo)
		if err != nil {
			return rep, err
		}
		rep.Runs += len(runs)
		for i, run := range runs {
			c.progress("%s: jobs of run %d (%d of %d)", repo, run, i+1, len(runs))
			jobs, err := c.jobs(ctx, repo, run)
			if err != nil {
				return rep, err
			}
			for _, j := range jobs {
				ss := retry.ScaleSetOf(j.GetRunnerName(), names)
				if ss == "" || j.StartedAt == nil || j.CompletedAt == nil || j.GetStatus() != "completed" {
					continue
				}
				s := by[ss]
				s.Jobs++
				s.queue = append(s.queue, math.Max(0, j.StartedAt.Sub(j.GetCreatedAt().Time).Seconds()))
				s.RunMinutes += math.Max(0, j.CompletedAt.Sub(j.StartedAt.Time).Minutes())
				if j.GetRunAttempt() > 1 {
					s.Reruns++
				}
				if j.GetConclusion() == "failure" {
					s.Failed++
					lost, err := c.lostRunner(ctx, repo, j.GetID())
					if err != nil {
						return rep, err
					}
					if lost {
						s.Interrupted++
					}
				}
			}
		}
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

func (c Collector) runs(ctx context.Context, repo string) ([]int64, error) {
	var out []int64
	opts := &github.ListWorkflowRunsOptions{Created: ">=" + c.Since.UTC().Format(time.RFC3339), ListOptions: github.ListOptions{PerPage: 100}}
	for {
		c.progress("%s: workflow runs since %s, page %d", repo, c.Since.UTC().Format("2006-01-02 15:04"), max(opts.Page, 1))
		runs, resp, err := c.Client.Actions.ListRepositoryWorkflowRuns(ctx, c.Owner, repo, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s/%s's workflow runs: %w", c.Owner, repo, err)
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
