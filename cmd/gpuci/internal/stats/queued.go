package stats

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-github/v93/github"
)

// QueuedJob is a job GitHub has queued and no runner has picked up.
type QueuedJob struct {
	Repo    string    `json:"repo"`
	ID      int64     `json:"id"`
	Name    string    `json:"name"`
	Labels  []string  `json:"labels"`
	Created time.Time `json:"created"`
}

// Queued lists the jobs queued now in the repositories (c.Repos, or every one of c.Owner's):
// the jobs of runs that are queued or in progress (a run with one job running and one
// waiting is "in_progress") whose own status is queued.
func (c Collector) Queued(ctx context.Context) ([]QueuedJob, error) {
	repos := c.Repos
	if len(repos) == 0 {
		var err error
		if repos, err = c.orgRepos(ctx); err != nil {
			return nil, err
		}
	}
	var out []QueuedJob
	for _, repo := range repos {
		for _, status := range []string{"queued", "in_progress"} {
			opts := &github.ListWorkflowRunsOptions{Status: status, ListOptions: github.ListOptions{PerPage: 100}}
			for {
				c.progress("%s: %s runs, page %d", repo, status, max(opts.Page, 1))
				runs, resp, err := c.Client.Actions.ListRepositoryWorkflowRuns(ctx, c.Owner, repo, opts)
				if err != nil {
					return nil, fmt.Errorf("listing %s/%s's %s runs: %w", c.Owner, repo, status, err)
				}
				for _, r := range runs.WorkflowRuns {
					jobs, err := c.jobs(ctx, repo, r.GetID())
					if err != nil {
						return nil, err
					}
					for _, j := range jobs {
						if j.GetStatus() == "queued" {
							out = append(out, QueuedJob{Repo: repo, ID: j.GetID(), Name: j.GetName(), Labels: j.Labels, Created: j.GetCreatedAt().Time})
						}
					}
				}
				if resp.NextPage == 0 {
					break
				}
				opts.Page = resp.NextPage
			}
		}
	}
	return out, nil
}
