package live_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
)

// The retry runner's memory: absent where the stack has no retry runner; recorded and recalled
// by job ID; entries older than a week dropped. (A concurrent writer's update conflicts on the
// resourceVersion read; client-go's fake does not check it, the API server does.)
func TestRetryEvidence(t *testing.T) {
	ctx := context.Background()
	none, err := live.ReadRetryEvidence(ctx, fake.NewClientset())
	require.NoError(t, err)
	assert.Nil(t, none, "no ConfigMap: no memory, and no error")

	now := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	kube := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "arc-runners", Name: "gpuci-retry-evidence", ResourceVersion: "1"},
		Data:       map[string]string{"job-1": now.Add(-8*24*time.Hour).Format(time.RFC3339) + " old", "job-2": now.Add(-time.Hour).Format(time.RFC3339) + " recent"},
	})
	mem, err := live.ReadRetryEvidence(ctx, kube)
	require.NoError(t, err)
	require.NotNil(t, mem)
	require.NoError(t, mem.Remember(ctx, map[int64]string{101: "cluster: pod p was on node n, spot-interrupted at …"}, now))

	again, err := live.ReadRetryEvidence(ctx, kube)
	require.NoError(t, err)
	ev, ok := again.Recall(101)
	require.True(t, ok)
	assert.Equal(t, "recorded by gpuci retry at 2026-12-03T13:00:00Z: cluster: pod p was on node n, spot-interrupted at …", ev)
	_, ok = again.Recall(2)
	assert.True(t, ok, "a recent entry stays")
	_, ok = again.Recall(1)
	assert.False(t, ok, "a week-old entry is dropped")
	_, ok = again.Recall(7)
	assert.False(t, ok)
}
