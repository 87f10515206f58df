package retry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/retry"
)

// The decision shows in the retry job's summary: what was re-run and, for every job, why or
// why not, in the words of its evidence.
func TestTheDecisionShowsInTheJobsSummary(t *testing.T) {
	f := cancelledRun(
		fakeJob{2, "cuda (12.9)", "cancelled", ourA, []string{operationCanceled}, 1},
		fakeJob{3, "cuda (13.0)", "cancelled", "", []string{failFast}, 1},
	)
	r := retry.Retrier{Client: f.serve(t), Owner: "luxfi", Repo: "app", ScaleSets: []string{"lux-gpu-t4"}, Cluster: clusterSays{ourA: interruptedOn(ourA)}}
	d, err := r.Decide(context.Background(), runID)
	require.NoError(t, err)
	s := d.Summary()
	assert.Contains(t, s, "**Re-run** (rerun-failed-jobs): 1 job(s) lost one of this stack's runners and 1 were cancelled because one did")
	assert.Contains(t, s, "| cuda (12.9) | cancelled | "+ourA+" | **yes** | cluster: pod "+ourA+" was on node")
	assert.Contains(t, s, "| cuda (13.0) | cancelled | (none: queued) | **yes** | cancelled because interrupted cuda (12.9) (fail-fast:")

	// Cancelled by hand: not re-run, and the summary says so.
	f = cancelledRun(fakeJob{2, "cuda", "cancelled", ourA, []string{"The run was canceled by @octocat."}, 1})
	r.Client = f.serve(t)
	d, err = r.Decide(context.Background(), runID)
	require.NoError(t, err)
	assert.Contains(t, d.Summary(), "**Not re-run**: cancelled by hand (The run was canceled by @octocat.): not re-run.")
}
