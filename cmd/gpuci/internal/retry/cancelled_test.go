package retry_test

// What GitHub records when a spot node is reclaimed under a runner-form job: the runner gets
// SIGTERM, cancels its job, and GitHub concludes the job and the run `cancelled`
// (runs-on/runs-on#249; paradedb/paradedb#5305); a fail-fast matrix cancels the other legs
// with "The strategy configuration was canceled because …". And what it records when a
// person or a newer run cancels one, which must be left alone.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/retry"
)

const (
	operationCanceled = "The operation was canceled."
	failFast          = `The strategy configuration was canceled because "cuda.12_9" failed`
)

func cancelledRun(jobs ...fakeJob) *fakeGitHub {
	return &fakeGitHub{status: "completed", conclusion: "cancelled", attempt: 1, jobs: jobs}
}

// A three-leg fail-fast matrix: one leg's node is reclaimed (the cluster saw it), GitHub
// cancels it and its two siblings. One re-run of the failed jobs runs all three again.
func TestAReclaimedLegAndItsFailFastSiblingsAreRerunTogether(t *testing.T) {
	f := cancelledRun(
		fakeJob{2, "cuda (12.9)", "cancelled", ourA, []string{operationCanceled}, 1},
		fakeJob{3, "cuda (13.0)", "cancelled", ourB, []string{failFast}, 1},
		fakeJob{4, "cuda (13.1)", "cancelled", "", []string{failFast}, 1}, // still queued: no runner
	)
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"},
		Cluster: clusterSays{ourA: interruptedOn(ourA), ourB: saw{"cluster: pod " + ourB + " ran on node ip-10-0-3-9, which had no spot interruption while the job ran", false, ""}}}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Equal(t, retry.RerunFailedJobs, d.Method, d.Reason)
	assert.ElementsMatch(t, []int64{2, 3, 4}, d.Rerun)
	assert.Equal(t, "1 job(s) lost one of this stack's runners and 2 were cancelled because one did, and no other job failed: re-run failed jobs (attempt 2)", d.Reason)
	require.Len(t, d.Failed, 3)
	assert.Equal(t, "cancelled", d.Failed[0].Conclusion)
	assert.Contains(t, d.Failed[1].Evidence, `cancelled because interrupted cuda (12.9) (fail-fast: The strategy configuration`)
	require.NoError(t, r.Apply(context.Background(), d))
	assert.Equal(t, 1, f.reruns, "one attempt runs all three")

	// With a token that may not read annotations (the in-cluster retrier's), the cluster's
	// evidence and the times decide: the siblings ended with the reclaimed leg.
	f.annotationsStatus = 403
	r.ClusterOnly = true
	d, err = r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Equal(t, retry.RerunFailedJobs, d.Method, d.Reason)
	assert.ElementsMatch(t, []int64{2, 3, 4}, d.Rerun)
	assert.Contains(t, d.Failed[2].Evidence, "cancelled because interrupted cuda (12.9) (cancelled as it ended)")
}

// A run cancelled by hand, or displaced by a newer one, stays cancelled, even with a
// reclaimed node in it.
func TestARunCancelledOnPurposeIsLeftAlone(t *testing.T) {
	for name, tc := range map[string]struct {
		note   string
		newer  []map[string]any
		reason string
	}{
		"by hand":           {"The run was canceled by @alice.", nil, "cancelled by hand (The run was canceled by @alice.): not re-run"},
		"a concurrency one": {"Canceling since a higher priority waiting request for CUDA-main exists", nil, "a newer run displaced it"},
		"the branch moved": {"", []map[string]any{{"id": runID + 1, "head_sha": "bbbbbbb2222222", "head_branch": "main", "status": "in_progress"}},
			"branch main moved on: run 9002 tests bbbbbbb: not re-run"},
	} {
		t.Run(name, func(t *testing.T) {
			notes := []string{operationCanceled}
			if tc.note != "" {
				notes = append(notes, tc.note)
			}
			f := cancelledRun(
				fakeJob{2, "cuda (12.9)", "cancelled", ourA, notes, 1},
				fakeJob{3, "cuda (13.0)", "cancelled", ourB, notes, 1},
			)
			f.newerRuns = tc.newer
			r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"},
				Cluster: clusterSays{ourA: interruptedOn(ourA)}}
			d, err := r.Decide(context.Background(), runID)
			require.NoError(t, err)
			assert.Empty(t, d.Method, d.Reason)
			assert.Contains(t, d.Reason, tc.reason)
		})
	}
}

// A job reclaimed again in its re-run gets no third attempt; the decision says so.
func TestAJobReclaimedTwiceIsNotRerunAgain(t *testing.T) {
	f := cancelledRun(
		fakeJob{2, "cuda (12.9)", "cancelled", ourA, []string{operationCanceled}, 1},
		fakeJob{12, "cuda (12.9)", "cancelled", ourB, []string{operationCanceled}, 2},
	)
	f.attempt = 2
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"},
		Cluster: clusterSays{ourB: interruptedOn(ourB)}}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Empty(t, d.Method)
	require.Len(t, d.Failed, 1)
	assert.Contains(t, d.Failed[0].Evidence, "re-run once already (2 executions): not again")
}
