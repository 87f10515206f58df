package retry

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-github/v93/github"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/githubside"
)

// Sweep is the in-cluster retrier's pass over an organization (gpuci retry --org): nothing in
// any repository calls it. It starts from the cluster — no spot interruption in the cluster's
// events, no GitHub call at all — and only then reads the failed runs of the repositories its
// credential reaches, deciding each as Decide does. Every decision is idempotent (a job is
// re-run once; a run already re-run is left alone), so a pass can repeat as often as it runs.
type Sweep struct {
	Client *github.Client
	// Org is the organization whose repositories are read.
	Org       string
	ScaleSets []string
	// Cluster is the cluster's evidence (live.Interruptions); required: it is what starts a
	// pass and what decides a container-form job.
	Cluster ClusterEvidence
	// Lookback bounds how long before an interruption a run may have started (a run that
	// completed before the interruption is never read).
	Lookback time.Duration
	// CoolDown, when set, keeps the pool of each job the pass re-runs on on-demand capacity
	// for CoolDownFor (nodepools.CoolDownNodePoolFor): Karpenter skips an interrupted spot
	// offering for three minutes only, and a re-run that goes back to a short spot market is
	// interrupted again. CoolDownNodePools names each scale set's cool-down NodePool.
	CoolDown          CoolDown
	CoolDownFor       time.Duration
	CoolDownNodePools map[string]string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// CoolDown raises a cool-down NodePool's GPU limit for a while, and lowers it after
// (live.CoolDowns, against the cluster).
type CoolDown interface {
	// Hold keeps nodePool launching until until; a hold never shortens a longer one.
	Hold(ctx context.Context, nodePool string, until time.Time) error
	// Release ends the holds whose time is past at now, and names their NodePools.
	Release(ctx context.Context, now time.Time) ([]string, error)
}

// ClusterEvidence is RunnerEvidence, and when the cluster last saw a spot interruption.
type ClusterEvidence interface {
	RunnerEvidence
	// Interrupted lists the times of the spot interruptions the cluster still knows of.
	Interrupted() []time.Time
}

// Pass is what one sweep did.
type Pass struct {
	// At is when the pass started: gpuci doctor reads the retrier's last pass from its log.
	At time.Time `json:"at"`
	// Token is what the last check of the retrier's token found (CheckToken), at
	// TokenChecked: "ok", or why GitHub refused it.
	Token        string    `json:"token,omitempty"`
	TokenChecked time.Time `json:"tokenChecked,omitzero"`
	// TokenReach are the private repositories the token could see at that check
	// (CheckToken); null from a gpuci before it.
	TokenReach []string `json:"tokenReach"`
	// Interruptions the cluster knows of; none means GitHub was not asked.
	Interruptions int `json:"interruptions"`
	// Repos read, and the failed or cancelled runs among them that completed after the first
	// interruption.
	Repos     int        `json:"repos"`
	Decisions []Decision `json:"decisions,omitempty"`
	// CoolDowns are the cool-down NodePools the pass held (with their end), and Ended those
	// it released.
	CoolDowns []string `json:"coolDowns,omitempty"`
	Ended     []string `json:"coolDownsEnded,omitempty"`
	// OutOfService are the GPU nodes the pass took out of service (live.OutOfService) before
	// it read the cluster's evidence.
	OutOfService []string `json:"outOfService,omitempty"`
	// Errors are runs that could not be decided or re-run; the pass goes on without them.
	Errors []string `json:"errors,omitempty"`
}

// TokenRefused starts Pass.Token when GitHub refused the token: gpuci doctor looks for it.
const TokenRefused = "refused: "

// CheckToken lists the organization's repositories with the retrier's token: a pass with no
// interruption asks GitHub nothing, so without this a token that expired (a fine-grained token
// always does) would be found only when a job needs re-running. It returns "ok" (or
// TokenRefused and GitHub's words) and the token's reach: the private and internal
// repositories, archived ones left out, it can see. A fine-grained token sees exactly the
// private repositories it was given, and every public one (a public report:
// octokit/octokit.js discussion #2559), so its reach is the repositories whose workflows it may
// dispatch and whose logs it may delete: gpuci doctor compares it with the repositories the
// pools serve. Hourly, paginated by 100.
func (s Sweep) CheckToken(ctx context.Context) (state string, reach []string) {
	// Never nil when checked, even if it reaches none: not an older gpuci's null.
	reach, err := githubside.PrivateRepositories(ctx, s.Client, s.Org)
	if err != nil {
		return TokenRefused + err.Error(), nil
	}
	return "ok", reach
}

// Once makes one pass: reads the cluster, then (if it saw an interruption) every repository's
// failed runs since, decides each and, unless dryRun, re-runs what the decision says.
func (s Sweep) Once(ctx context.Context, dryRun bool) (Pass, error) {
	p := Pass{At: s.now().UTC()}
	if s.Cluster == nil {
		return p, fmt.Errorf("the in-cluster retrier needs the cluster's evidence")
	}
	if s.CoolDown != nil && !dryRun {
		// First, whatever else the pass meets: a cool-down ends on time.
		ended, err := s.CoolDown.Release(ctx, s.now())
		p.Ended = ended
		if err != nil {
			p.Errors = append(p.Errors, fmt.Sprintf("ending cool-downs: %v", err))
		}
	}
	times := s.Cluster.Interrupted()
	p.Interruptions = len(times)
	if len(times) == 0 {
		return p, nil
	}
	first := times[0]
	for _, at := range times[1:] {
		if at.Before(first) {
			first = at
		}
	}
	created := first.Add(-s.Lookback).UTC().Format(time.RFC3339)
	for repo, err := range s.Client.Repositories.ListByOrgIter(ctx, s.Org, &github.RepositoryListByOrgOptions{ListOptions: github.ListOptions{PerPage: 100}}) {
		if err != nil {
			return p, fmt.Errorf("listing %s's repositories: %w", s.Org, err)
		}
		if repo.GetArchived() {
			continue
		}
		p.Repos++
		r := Retrier{Client: s.Client, Owner: s.Org, Repo: repo.GetName(), ScaleSets: s.ScaleSets, Cluster: s.Cluster, ClusterOnly: true}
		// A run whose runner was reclaimed concludes cancelled, not failure (Decide's
		// comment cites GitHub's behaviour), so a pass reads both; the API's status filter
		// takes one conclusion a request.
		for _, conclusion := range []string{ConclusionFailed, ConclusionCancelled} {
			s.decideRuns(ctx, &p, r, repo, conclusion, created, first, dryRun)
		}
	}
	return p, nil
}

// decideRuns decides, and unless dryRun re-runs, a repository's runs of one conclusion
// created since created that last changed after first.
func (s Sweep) decideRuns(ctx context.Context, p *Pass, r Retrier, repo *github.Repository, conclusion, created string, first time.Time, dryRun bool) {
	opts := &github.ListWorkflowRunsOptions{Status: conclusion, Created: ">=" + created, ListOptions: github.ListOptions{PerPage: 100}}
	for run, err := range s.Client.Actions.ListRepositoryWorkflowRunsIter(ctx, s.Org, repo.GetName(), opts) {
		if err != nil {
			p.Errors = append(p.Errors, fmt.Sprintf("%s: listing %s runs: %v", repo.GetFullName(), conclusion, err))
			break
		}
		// A run whose last change came before the first interruption did not lose a
		// runner to it.
		if run.GetUpdatedAt().Before(first) {
			continue
		}
		d, err := r.Decide(ctx, run.GetID())
		if err != nil {
			p.Errors = append(p.Errors, fmt.Sprintf("%s run %d: %v", repo.GetFullName(), run.GetID(), err))
			continue
		}
		p.Decisions = append(p.Decisions, d)
		if dryRun || d.Method == "" {
			continue
		}
		s.coolDown(ctx, p, d)
		if err := r.Apply(ctx, d); err != nil {
			p.Errors = append(p.Errors, fmt.Sprintf("%s run %d: %v", repo.GetFullName(), run.GetID(), err))
		}
	}
}

func (s Sweep) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// coolDown holds the cool-down NodePool of each interrupted job's pool before d re-runs it,
// so that the re-run's node is on-demand; a job a broken GPU failed needs only a fresh node,
// which the NodeClaim's deletion gives it. A hold that fails is reported and the job re-run
// all the same: on spot, it may still pass.
func (s Sweep) coolDown(ctx context.Context, p *Pass, d Decision) {
	if s.CoolDown == nil || s.CoolDownFor <= 0 {
		return
	}
	until := s.now().Add(s.CoolDownFor)
	held := map[string]bool{}
	for _, j := range d.Failed {
		if !j.Interrupted || j.Cause == CauseBrokenGPU || !slices.Contains(d.Rerun, j.ID) {
			continue
		}
		pool := s.CoolDownNodePools[ScaleSetOf(j.Runner, s.ScaleSets)]
		if pool == "" || held[pool] {
			continue
		}
		held[pool] = true
		if err := s.CoolDown.Hold(ctx, pool, until); err != nil {
			p.Errors = append(p.Errors, fmt.Sprintf("%s run %d: cool-down %s not held, re-run on spot: %v", d.Repo, d.RunID, pool, err))
			continue
		}
		p.CoolDowns = append(p.CoolDowns, pool+" until "+until.UTC().Format(time.RFC3339))
	}
}
