package stats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v93/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/stats"
)

// fakeGitHub serves GitHub's REST listings the collector pages through, each in pages of its
// own (a Link header to the next, as GitHub sends), and records what was asked.
type fakeGitHub struct {
	mu     sync.Mutex
	asked  []string
	routes map[string][]any // path → pages (each page: the JSON body)
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.asked = append(f.asked, r.URL.Path+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	pages, ok := f.routes[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	if page > len(pages) {
		http.Error(w, "no such page", http.StatusBadRequest)
		return
	}
	if page < len(pages) {
		next := *r.URL
		q := next.Query()
		q.Set("page", strconv.Itoa(page+1))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, next.String()))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(pages[page-1])
}

var day = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// job is a workflow job as GitHub lists it: created, started and completed at these offsets
// (h:m:s after midnight of day).
func job(id int64, runner, status, conclusion string, attempt int, created, started, completed string) map[string]any {
	at := func(hms string) string {
		d, err := time.Parse("15:04:05", hms)
		if err != nil {
			panic(err)
		}
		return day.Add(time.Duration(d.Hour())*time.Hour + time.Duration(d.Minute())*time.Minute + time.Duration(d.Second())*time.Second).Format(time.RFC3339)
	}
	j := map[string]any{"id": id, "runner_name": runner, "status": status, "run_attempt": attempt, "created_at": at(created), "started_at": at(started)}
	if conclusion != "" {
		j["conclusion"], j["completed_at"] = conclusion, at(completed)
	}
	return j
}

// withFirstStep gives j a first step that started at hms.
func withFirstStep(j map[string]any, hms string) map[string]any {
	started := job(0, "", "", "", 0, hms, hms, "")["started_at"]
	j["steps"] = []map[string]any{{"name": "Set up job", "number": 1, "started_at": started}}
	return j
}

// cancelledQueued is a job for the scale set label that was cancelled before a runner took it.
func cancelledQueued(id int64, label, created, cancelled string) map[string]any {
	j := job(id, "", "completed", "cancelled", 1, created, cancelled, cancelled)
	j["labels"] = []string{label}
	return j
}

func jobsPage(jobs ...map[string]any) map[string]any {
	return map[string]any{"total_count": len(jobs), "jobs": jobs}
}

func runsPage(ids ...int64) map[string]any {
	var runs []map[string]any
	for _, id := range ids {
		runs = append(runs, map[string]any{"id": id})
	}
	return map[string]any{"total_count": len(runs), "workflow_runs": runs}
}

const (
	t4   = "lux-gpu-t4"
	twin = "lux-gpu-t4-on-demand"
)

func fixture() *fakeGitHub {
	lost := []map[string]any{{"message": "The runner has received a shutdown signal. This can happen when the runner service is stopped, or a manually started runner is canceled."}}
	ownFault := []map[string]any{{"message": "Process completed with exit code 1."}}
	return &fakeGitHub{routes: map[string][]any{
		// Two pages of repositories; the archived one is skipped.
		"/orgs/luxfi/repos": {
			[]map[string]any{{"name": "app"}, {"name": "old", "archived": true}},
			[]map[string]any{{"name": "lib"}},
		},
		"/repos/luxfi/app/actions/runs": {runsPage(1), runsPage(2)},
		"/repos/luxfi/lib/actions/runs": {runsPage(3)},
		"/repos/luxfi/app/actions/runs/1/jobs": {
			jobsPage(
				job(11, t4+"-abc12-runner-x1y2z", "completed", "success", 1, "10:00:00", "10:00:30", "10:10:30"), // queued 30 s, ran 10 min
				job(12, t4+"-abc12-runner-q9w8e", "completed", "failure", 1, "10:00:00", "10:02:00", "10:05:00"), // 120 s, 3 min, lost its runner
			),
			jobsPage(
				job(13, twin+"-def34-runner-a1b2c", "completed", "success", 2, "10:06:00", "10:07:30", "10:12:30"), // the re-run: 90 s, 5 min
				job(14, "GitHub Actions 2", "completed", "success", 1, "10:00:00", "10:00:05", "10:01:05"),         // hosted: not ours
			),
		},
		"/repos/luxfi/app/actions/runs/2/jobs": {jobsPage(
			job(21, t4+"-abc12-runner-zzz11", "completed", "success", 1, "11:00:00", "11:00:10", "11:20:10"), // 10 s, 20 min
			job(22, t4+"-abc12-runner-zzz22", "completed", "failure", 1, "11:00:00", "11:01:00", "11:02:00"), // 60 s, 1 min, its own failure
			job(23, t4+"-abc12-runner-zzz33", "in_progress", "", 1, "11:00:00", "11:00:20", ""),              // still running: not counted
		)},
		"/repos/luxfi/lib/actions/runs/3/jobs": {jobsPage(
			job(31, t4+"-abc12-runner-lib01", "completed", "success", 1, "12:00:00", "12:04:00", "12:14:00"), // 240 s, 10 min
			// Started when GitHub assigned it, begun by its runner 50 s later (its first step):
			// queued 60 s, ran 9 min.
			withFirstStep(job(32, t4+"-abc12-runner-lib02", "completed", "success", 1, "13:00:00", "13:00:10", "13:10:00"), "13:01:00"),
			// Cancelled after 300 s in the queue, no runner ever took it: a 300 s wait.
			cancelledQueued(33, t4, "14:00:00", "14:05:00"),
		)},
		"/repos/luxfi/app/check-runs/12/annotations": {lost},
		"/repos/luxfi/app/check-runs/22/annotations": {ownFault},
	}}
}

func TestStatsFromPagedListings(t *testing.T) {
	t.Parallel()
	gh := fixture()
	srv := httptest.NewServer(gh)
	t.Cleanup(srv.Close)
	base := srv.URL + "/"
	client, err := github.NewClient(github.WithURLs(&base, &base))
	require.NoError(t, err)
	var progress []string
	c := stats.Collector{
		Client: client, Owner: "luxfi", Since: day, Until: day.Add(7 * 24 * time.Hour),
		ScaleSets: []stats.ScaleSet{
			{Name: t4, Pool: "gpu-spot", PerHour: 0.2497, InstanceType: "g4dn.xlarge", CapacityType: "spot"},
			{Name: twin, Pool: "gpu-spot-on-demand", PerHour: 0.526, InstanceType: "g4dn.xlarge", CapacityType: "on-demand"},
		},
		GitHubPerMinute: 0.052,
		Progress:        func(f string, a ...any) { progress = append(progress, fmt.Sprintf(f, a...)) },
	}
	rep, err := c.Collect(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Repos, "two pages of repositories, the archived one left out")
	assert.Equal(t, 3, rep.Runs, "app's two pages of runs and lib's one")
	require.Len(t, rep.ScaleSets, 2)

	// lux-gpu-t4, by hand: queue times 30, 120, 10, 60, 240, 60 (job 32: to its first step,
	// not its started_at) and 300 s (job 33, cancelled while queued) → sorted 10 30 60 60 120
	// 240 300; nearest rank: p50 is the ⌈3.5⌉ = 4th (60 s), p90 the ⌈6.3⌉ = 7th (300 s). Run
	// minutes 10 + 3 + 20 + 1 + 10 + 9 = 53; at $0.2497/h that is $0.22057, at GitHub's
	// $0.052/min $2.756.
	s := rep.ScaleSets[0]
	assert.Equal(t, t4, s.ScaleSet)
	assert.Equal(t, 6, s.Jobs, "the hosted job, the running one and the one cancelled in the queue are not counted as run")
	assert.Equal(t, 1, s.CancelledQueued)
	assert.Equal(t, 60.0, s.QueueP50)
	assert.Equal(t, 300.0, s.QueueP90, "the wait of a job cancelled in the queue counts")
	assert.Equal(t, 300.0, s.QueueMax)
	assert.InDelta(t, 53.0, s.RunMinutes, 1e-9)
	assert.Equal(t, 2, s.Failed)
	assert.Equal(t, 1, s.Interrupted, "one failure lost its runner; the other was the job's own")
	assert.Equal(t, 0, s.Reruns)
	assert.InDelta(t, 53.0/60*0.2497, s.Spend, 1e-9)
	assert.InDelta(t, 2.756, s.GitHub, 1e-9)
	assert.Empty(t, rep.Incomplete)

	// The twin ran the re-run: 90 s queued, 5 minutes.
	s = rep.ScaleSets[1]
	assert.Equal(t, twin, s.ScaleSet, "a twin's runners are its own, not its pool's")
	assert.Equal(t, []float64{90, 90, 90}, []float64{s.QueueP50, s.QueueP90, s.QueueMax})
	assert.Equal(t, 1, s.Reruns)
	assert.InDelta(t, 5.0, s.RunMinutes, 1e-9)

	// Every page was asked for, runs only since --since, jobs of every attempt.
	assert.Contains(t, gh.asked, "/orgs/luxfi/repos?page=2&per_page=100")
	assert.Contains(t, gh.asked, "/repos/luxfi/app/actions/runs?created=2026-12-01T00%3A00%3A00Z..2026-12-08T00%3A00%3A00Z&page=2&per_page=100")
	assert.Contains(t, gh.asked, "/repos/luxfi/app/actions/runs/1/jobs?filter=all&page=2&per_page=100")
	assert.Contains(t, progress, "repositories of luxfi, page 2", "progress while it pages")
	assert.Contains(t, progress, "app: workflow runs created 2026-12-01T00:00:00Z..2026-12-08T00:00:00Z, page 2")
	assert.Contains(t, progress, "app: jobs of run 2 (2 of 2)")
}

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 0.0, stats.Percentile(nil, 50))
	one := []float64{7}
	assert.Equal(t, 7.0, stats.Percentile(one, 50))
	assert.Equal(t, 7.0, stats.Percentile(one, 90))
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	assert.Equal(t, 5.0, stats.Percentile(ten, 50), "the 5th of 10")
	assert.Equal(t, 9.0, stats.Percentile(ten, 90), "the 9th of 10")
	assert.Equal(t, 10.0, stats.Percentile(ten, 91), "past 90%: the 10th")
}

// GitHub lists at most 1,000 runs for a query with the created filter: a window that holds
// more is halved until each half fits, and every run is read.
func TestAWindowOfMoreThanAThousandRunsIsSplit(t *testing.T) {
	t.Parallel()
	// 1,500 runs, one a minute from day's midnight; GitHub answers each window with its total
	// and the first 1,000 of its runs (one page of them here: ids only matter).
	var mu sync.Mutex
	var windows []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/jobs") {
			_ = json.NewEncoder(w).Encode(jobsPage())
			return
		}
		from, until, ok := strings.Cut(r.URL.Query().Get("created"), "..")
		require.True(t, ok, "a range: %s", r.URL.RawQuery)
		a, err := time.Parse(time.RFC3339, from)
		require.NoError(t, err)
		b, err := time.Parse(time.RFC3339, until)
		require.NoError(t, err)
		mu.Lock()
		windows = append(windows, r.URL.Query().Get("created"))
		mu.Unlock()
		var ids []int64
		for i := int64(0); i < 1500; i++ {
			at := day.Add(time.Duration(i) * time.Minute)
			if !at.Before(a) && !at.After(b) {
				ids = append(ids, i+1)
			}
		}
		page := runsPage(ids[:min(len(ids), 1000)]...)
		page["total_count"] = len(ids)
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	base := srv.URL + "/"
	client, err := github.NewClient(github.WithURLs(&base, &base))
	require.NoError(t, err)
	c := stats.Collector{Client: client, Owner: "luxfi", Repos: []string{"app"}, Since: day, Until: day.Add(1500 * time.Minute)}
	rep, err := c.Collect(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1500, rep.Runs, "every run read, none twice: %v", windows)
	assert.Greater(t, len(windows), 1, "the window was split")
}

// GitHub's rate limit midway: the figures read before it are kept, and the report says why
// they stop short.
func TestARateLimitKeepsWhatWasRead(t *testing.T) {
	t.Parallel()
	gh := fixture()
	limited := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/repos/luxfi/lib/actions/runs" {
			w.Header().Set("X-RateLimit-Limit", "5000")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(day.Add(time.Hour).Unix(), 10))
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message": "API rate limit exceeded"}`))
			return
		}
		gh.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(limited)
	t.Cleanup(srv.Close)
	base := srv.URL + "/"
	client, err := github.NewClient(github.WithURLs(&base, &base))
	require.NoError(t, err)
	c := stats.Collector{Client: client, Owner: "luxfi", Since: day, Until: day.Add(24 * time.Hour),
		ScaleSets: []stats.ScaleSet{{Name: t4, Pool: "gpu-spot"}, {Name: twin, Pool: "gpu-spot-on-demand"}}}
	rep, err := c.Collect(context.Background())
	require.NoError(t, err, "a rate limit is a shorter report, not a lost one")
	assert.Contains(t, rep.Incomplete, "rate limit")
	assert.Equal(t, 4, rep.ScaleSets[0].Jobs, "app's jobs, read before the limit")
}
