package retry_test

// The in-cluster retrier's pass over an organization (retry.Sweep), against the fake GitHub of
// retry_test.go with the organization's repositories and their failed runs added.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v93/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/retry"
)

// interrupted is a cluster that saw spot interruptions at the given times and knows the
// runners clusterSays knows.
type interrupted struct {
	clusterSays
	at []time.Time
}

func (c interrupted) Interrupted() []time.Time { return c.at }

// org adds luxfi's repositories to f — app (run 9001, failed after the interruption), docs
// (archived) and web (a failed run last changed before the interruption) — and records the
// requests for runs it serves.
func org(f *fakeGitHub, interruption time.Time) *orgRequests {
	req := &orgRequests{}
	f.more = func(mux *http.ServeMux, write func(http.ResponseWriter, any)) {
		mux.HandleFunc("GET /orgs/luxfi/repos", func(w http.ResponseWriter, r *http.Request) {
			req.add("repos")
			write(w, []map[string]any{
				{"name": "app", "full_name": "luxfi/app"},
				{"name": "docs", "full_name": "luxfi/docs", "archived": true},
				{"name": "web", "full_name": "luxfi/web"},
			})
		})
		// GitHub's status filter takes a conclusion and returns only the runs that concluded
		// it (REST "List workflow runs for a repository", status parameter).
		runs := func(r *http.Request, id int64, updated time.Time) map[string]any {
			if r.URL.Query().Get("status") != f.conclusion {
				return map[string]any{"total_count": 0, "workflow_runs": []any{}}
			}
			return map[string]any{"total_count": 1, "workflow_runs": []map[string]any{{"id": id, "status": "completed", "conclusion": f.conclusion, "updated_at": updated.Format(time.RFC3339)}}}
		}
		mux.HandleFunc("GET /repos/luxfi/app/actions/runs", func(w http.ResponseWriter, r *http.Request) {
			req.add("app runs status=" + r.URL.Query().Get("status") + " created=" + r.URL.Query().Get("created"))
			write(w, runs(r, runID, interruption.Add(5*time.Minute)))
		})
		mux.HandleFunc("GET /repos/luxfi/web/actions/runs", func(w http.ResponseWriter, r *http.Request) {
			req.add("web runs")
			write(w, runs(r, 7, interruption.Add(-time.Minute)))
		})
		mux.HandleFunc("GET /repos/luxfi/web/actions/runs/7", func(w http.ResponseWriter, r *http.Request) {
			req.add("web run 7")
		})
	}
	return req
}

type orgRequests struct {
	mu   sync.Mutex
	seen []string
}

func (o *orgRequests) add(s string) { o.mu.Lock(); o.seen = append(o.seen, s); o.mu.Unlock() }

// After a spot interruption, a pass re-runs the interrupted container-form job of a repository
// that holds no workflow of the stack's (nothing per repository), reads only the failed runs
// that changed after it, skips an archived repository, and a second pass re-runs nothing more.
func TestASweepRerunsWhatTheClusterSawInterrupted(t *testing.T) {
	at := jobStarted.Add(8 * time.Minute)
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda-in-container", "failure", ourA, []string{"Error: failed to run script step: pod not found"}, 1},
		{3, "unit", "failure", ourC, []string{"Process completed with exit code 2."}, 1},
	}}
	req := org(f, at)
	s := retry.Sweep{Client: f.serve(t), Org: "luxfi", ScaleSets: []string{"lux-gpu-t4"}, Lookback: 6 * time.Hour, Cluster: interrupted{clusterSays{
		ourA: {"cluster: pod " + ourA + "-workflow was on node ip-10-0-3-7, spot-interrupted", true, ""},
		ourC: {"cluster: pod " + ourC + " ran on node ip-10-0-3-9, which had no spot interruption while the job ran", false, ""},
	}, []time.Time{at.Add(time.Hour), at}}}

	p, err := s.Once(context.Background(), false)
	require.NoError(t, err)
	assert.Empty(t, p.Errors)
	assert.Equal(t, 2, p.Interruptions)
	assert.Equal(t, 2, p.Repos, "app and web; docs is archived")
	require.Len(t, p.Decisions, 1, "web's failed run changed before the first interruption: not read")
	assert.Equal(t, retry.RerunJob, p.Decisions[0].Method, p.Decisions[0].Reason)
	assert.Equal(t, []int64{2}, f.jobReruns, "exactly the interrupted job")
	// The first interruption (the earlier of the two) less the lookback: 11:58 − 6 h.
	assert.Contains(t, req.seen, "app runs status=failure created=>=2026-12-03T05:58:00Z")
	assert.Contains(t, req.seen, "app runs status=cancelled created=>=2026-12-03T05:58:00Z")
	assert.NotContains(t, req.seen, "web run 7")

	// The re-run's attempt runs: the next pass finds it re-run already.
	f.status, f.attempt = "in_progress", 2
	p, err = s.Once(context.Background(), false)
	require.NoError(t, err)
	assert.Empty(t, p.Errors)
	assert.Equal(t, []int64{2}, f.jobReruns, "not re-run twice")
}

// A runner-form job whose node was reclaimed concludes cancelled (GitHub's record; see
// cancelled_test.go): the pass finds its run among the cancelled ones and re-runs it.
func TestASweepRerunsARunGitHubConcludedCancelled(t *testing.T) {
	at := jobStarted.Add(8 * time.Minute)
	f := &fakeGitHub{status: "completed", conclusion: "cancelled", attempt: 1, jobs: []fakeJob{
		{2, "cuda", "cancelled", ourA, []string{"The operation was canceled."}, 1},
	}}
	org(f, at)
	now := at.Add(10 * time.Minute)
	cool := &coolDowns{f: f}
	s := retry.Sweep{Client: f.serve(t), Org: "luxfi", ScaleSets: []string{"lux-gpu-t4"}, Lookback: time.Hour,
		Cluster:  interrupted{clusterSays{ourA: interruptedOn(ourA)}, []time.Time{at}},
		CoolDown: cool, CoolDownFor: 30 * time.Minute, CoolDownNodePools: map[string]string{"lux-gpu-t4": "gpu-spot-cool-down"},
		Now: func() time.Time { return now }}
	p, err := s.Once(context.Background(), false)
	require.NoError(t, err)
	assert.Empty(t, p.Errors)
	require.Len(t, p.Decisions, 1, "the cancelled run is read")
	assert.Equal(t, retry.RerunFailedJobs, p.Decisions[0].Method, p.Decisions[0].Reason)
	assert.Equal(t, 1, f.reruns)
	// The pool goes on-demand before the re-run starts, for the cool-down.
	assert.Equal(t, []string{"release at 2026-12-03T12:08:00Z", "hold gpu-spot-cool-down until 2026-12-03T12:38:00Z with 0 re-runs asked"}, cool.calls)
	assert.Equal(t, []string{"gpu-spot-cool-down until 2026-12-03T12:38:00Z"}, p.CoolDowns)

	// A dry run changes nothing, cool-downs included.
	cool.calls = nil
	_, err = s.Once(context.Background(), true)
	require.NoError(t, err)
	assert.Empty(t, cool.calls)
}

// coolDowns records the sweep's holds and releases, and how many re-runs GitHub had been asked
// for at each hold.
type coolDowns struct {
	f     *fakeGitHub
	calls []string
}

func (c *coolDowns) Hold(_ context.Context, np string, until time.Time) error {
	c.calls = append(c.calls, fmt.Sprintf("hold %s until %s with %d re-runs asked", np, until.UTC().Format(time.RFC3339), c.f.reruns+len(c.f.jobReruns)))
	return nil
}

func (c *coolDowns) Release(_ context.Context, now time.Time) ([]string, error) {
	c.calls = append(c.calls, "release at "+now.UTC().Format(time.RFC3339))
	return nil, nil
}

// With no interruption in the cluster's events a pass asks GitHub nothing.
func TestASweepWithoutAnInterruptionAsksGitHubNothing(t *testing.T) {
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1}
	req := org(f, jobStarted)
	p, err := retry.Sweep{Client: f.serve(t), Org: "luxfi", ScaleSets: []string{"lux-gpu-t4"}, Cluster: interrupted{clusterSays{}, nil}}.Once(context.Background(), false)
	require.NoError(t, err)
	assert.Zero(t, p.Interruptions)
	assert.Empty(t, req.seen)
	assert.Empty(t, f.jobReruns)
}

// The retrier's token is a fine-grained one, which cannot read check annotations (403): a job
// whose runner the cluster no longer knows is left alone, and the interrupted job of the same
// run is still re-run. The per-run decision, with a token that cannot read them, stops.
func TestASweepDecidesOnTheClusterWhereAnnotationsAreRefused(t *testing.T) {
	at := jobStarted.Add(8 * time.Minute)
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, annotationsStatus: http.StatusForbidden, jobs: []fakeJob{
		{2, "cuda-in-container", "failure", ourA, nil, 1},
		{3, "unit", "failure", ourB, nil, 1}, // its pod's events are gone
	}}
	org(f, at)
	cluster := interrupted{clusterSays{ourA: {"cluster: pod " + ourA + "-workflow was on node ip-10-0-3-7, spot-interrupted", true, ""}}, []time.Time{at}}
	client := f.serve(t)
	p, err := retry.Sweep{Client: client, Org: "luxfi", ScaleSets: []string{"lux-gpu-t4"}, Lookback: time.Hour, Cluster: cluster}.Once(context.Background(), false)
	require.NoError(t, err)
	assert.Empty(t, p.Errors)
	require.Len(t, p.Decisions, 1)
	require.Len(t, p.Decisions[0].Failed, 2)
	assert.Contains(t, p.Decisions[0].Failed[1].Evidence, "annotations cannot be read")
	assert.Equal(t, []int64{2}, f.jobReruns)

	_, err = retry.Retrier{Client: client, Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"}, Cluster: cluster}.Decide(context.Background(), runID)
	require.Error(t, err, "without ClusterOnly a refused read is an error, as in the per-repository workflow")
}

// A job a broken GPU failed (its node taken out of service: live.OutOfService) is re-run once,
// like an interrupted one, with nothing per repository; its pool does not go on-demand, as
// spot was not short: the deleted NodeClaim gives it a fresh node. A job of a healthy node
// that failed in the same run stays failed.
func TestASweepRerunsTheJobABrokenGPUFailedWithoutACoolDown(t *testing.T) {
	at := jobCompleted.Add(time.Minute)
	f := &fakeGitHub{status: "completed", conclusion: "failure", attempt: 1, jobs: []fakeJob{
		{2, "cuda", "failure", ourA, []string{"Process completed with exit code 1."}, 1},
		{3, "unit", "failure", ourC, []string{"Process completed with exit code 2."}, 1},
	}}
	org(f, at)
	cool := &coolDowns{f: f}
	s := retry.Sweep{Client: f.serve(t), Org: "luxfi", ScaleSets: []string{"lux-gpu-t4"}, Lookback: time.Hour,
		Cluster: interrupted{clusterSays{
			ourA: {"cluster: pod " + ourA + " was on node ip-10-0-3-7, taken out of service for a broken GPU", true, retry.CauseBrokenGPU},
			ourC: {"cluster: pod " + ourC + " ran on node ip-10-0-3-9, which had no spot interruption and no broken GPU while the job ran", false, ""},
		}, []time.Time{at}},
		CoolDown: cool, CoolDownFor: 30 * time.Minute, CoolDownNodePools: map[string]string{"lux-gpu-t4": "gpu-spot-cool-down"},
		Now: func() time.Time { return at }}
	p, err := s.Once(context.Background(), false)
	require.NoError(t, err)
	assert.Empty(t, p.Errors)
	require.Len(t, p.Decisions, 1)
	d := p.Decisions[0]
	assert.Equal(t, retry.RerunJob, d.Method, d.Reason)
	assert.Equal(t, []int64{2}, f.jobReruns, "the broken GPU's job, once")
	require.Len(t, d.Failed, 2)
	assert.Equal(t, retry.CauseBrokenGPU, d.Failed[0].Cause)
	assert.Contains(t, d.Failed[0].Evidence, "taken out of service for a broken GPU")
	assert.Empty(t, p.CoolDowns, "no cool-down: spot was not short")
	assert.Equal(t, []string{"release at 2026-12-03T12:01:00Z"}, cool.calls, "only the pass's release of ended cool-downs")
}

// The retrier's token is checked against the organization (a quiet pass asks GitHub nothing
// else), and its reach is what the listing shows it, every page of it: the private and
// internal repositories, archived ones left out (gpuci doctor compares them with what the
// pools serve). GitHub's 401 for an expired token is reported as refused, with GitHub's words.
func TestCheckToken(t *testing.T) {
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/orgs/luxfi/repos", r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("page") == "" {
			// GitHub's pagination: a Link header to the next page.
			w.Header().Set("Link", `<http://`+r.Host+`/orgs/luxfi/repos?per_page=100&page=2>; rel="next"`)
			_, _ = w.Write([]byte(`[{"full_name":"luxfi/kernels","private":true,"visibility":"private"},{"full_name":"luxfi/site","private":false,"visibility":"public"}]`))
			return
		}
		_, _ = w.Write([]byte(`[{"full_name":"luxfi/engine","private":true,"visibility":"internal"},{"full_name":"luxfi/old","private":true,"visibility":"private","archived":true}]`))
	}))
	defer pages.Close()
	base := pages.URL + "/"
	client, err := github.NewClient(github.WithURLs(&base, &base), github.WithAuthToken("github_pat_retrier"))
	require.NoError(t, err)
	state, reach := retry.Sweep{Client: client, Org: "luxfi"}.CheckToken(context.Background())
	assert.Equal(t, "ok", state)
	assert.Equal(t, []string{"luxfi/engine", "luxfi/kernels"}, reach, "both pages read; public and archived repositories left out")

	expired := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`))
	}))
	defer expired.Close()
	base = expired.URL + "/"
	client, err = github.NewClient(github.WithURLs(&base, &base), github.WithAuthToken("github_pat_expired"))
	require.NoError(t, err)
	got, reach := retry.Sweep{Client: client, Org: "luxfi"}.CheckToken(context.Background())
	assert.True(t, strings.HasPrefix(got, retry.TokenRefused), got)
	assert.Contains(t, got, "401 Bad credentials")
	assert.Nil(t, reach, "a refused token reaches nothing known")
}
