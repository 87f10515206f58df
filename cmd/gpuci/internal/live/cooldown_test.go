package live_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakecluster"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s/nodepools"
)

// The program's cool-down NodePool, as the retrier patches it: a hold raises its GPU limit to
// the pool's and records its end, a later hold never shortens it, a release after the end
// sets the limit back to 0 and drops the end; before the end it is left alone. (That the
// retrier's account may patch it and no other NodePool, and what Karpenter then launches, is
// make e2e's, with the real RBAC and the real Karpenter.)
func TestACoolDownIsHeldAndReleasedOnTime(t *testing.T) {
	pool := config.DefaultPool()
	pool.GPULimit = 3
	obj, err := nodepools.CoolDownNodePoolObject(pool)
	require.NoError(t, err)
	c := fakecluster.Healthy()
	c.Custom = append(c.Custom, &unstructured.Unstructured{Object: obj})
	_, dyn := c.Clients()
	name := wellknown.CoolDownNodePool(pool.Name)
	cd := live.CoolDowns{Dynamic: dyn, NodePools: []string{name}}
	ctx := context.Background()
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

	limit, until := coolDownOf(t, dyn, name)
	assert.Equal(t, "0", limit, "the program's: nothing launched")
	assert.Empty(t, until)

	require.NoError(t, cd.Hold(ctx, name, at.Add(30*time.Minute)))
	limit, until = coolDownOf(t, dyn, name)
	assert.Equal(t, "3", limit, "the pool's own limit")
	assert.Equal(t, "2026-12-07T09:30:00Z", until)
	require.NoError(t, cd.Hold(ctx, name, at.Add(10*time.Minute)))
	_, until = coolDownOf(t, dyn, name)
	assert.Equal(t, "2026-12-07T09:30:00Z", until, "a shorter hold keeps the longer one")

	ended, err := cd.Release(ctx, at.Add(29*time.Minute))
	require.NoError(t, err)
	assert.Empty(t, ended)
	limit, _ = coolDownOf(t, dyn, name)
	assert.Equal(t, "3", limit, "still held")

	ended, err = cd.Release(ctx, at.Add(30*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, []string{name}, ended)
	limit, until = coolDownOf(t, dyn, name)
	assert.Equal(t, "0", limit)
	assert.Empty(t, until)

	assert.Error(t, cd.Hold(ctx, "gpu-spot", at), "a NodePool without the program's cool-down limit is not held")
}

func coolDownOf(t *testing.T, dyn dynamic.Interface, name string) (limit, until string) {
	np, err := dyn.Resource(schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	limit, _, err = unstructured.NestedString(np.Object, "spec", "limits", "nvidia.com/gpu")
	require.NoError(t, err)
	return limit, np.GetAnnotations()[wellknown.CoolDownUntilAnnotation]
}
