package live_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/live"
	"github.com/luxfi/lux-gpu-ci/internal/testkit/fakecluster"
)

func TestGPUNodesAreThePoolsNodes(t *testing.T) {
	c := fakecluster.Healthy()
	c.Objects = append(c.Objects,
		fakecluster.Node("gpu-1", map[string]string{"karpenter.sh/nodepool": "gpu-spot"}, true, 1),
		fakecluster.Node("other-1", map[string]string{"karpenter.sh/nodepool": "someone-elses"}, true, 1),
	)
	kube, _ := c.Clients()
	nodes, err := live.GPUNodes(context.Background(), kube, []config.GPUPool{{Name: "gpu-spot"}, {Name: "gpu-l4"}})
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Equal(t, "gpu-1", nodes[0].Name)
}

func TestScaleSet(t *testing.T) {
	_, dyn := fakecluster.Healthy().Clients()
	rs, err := live.GetScaleSet(context.Background(), dyn, "lux-gpu-t4")
	require.NoError(t, err)
	assert.Equal(t, live.ScaleSet{Labels: []string{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4"}}, rs)
	_, err = live.GetScaleSet(context.Background(), dyn, "missing")
	assert.Error(t, err)
}

func TestConditions(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Launched", "status": "False", "reason": "InsufficientCapacity", "message": "no spot"},
		map[string]any{"type": "Ready", "status": "False", "reason": "NotLaunched"},
	}}}}
	status, reason := live.Condition(u, "Ready")
	assert.Equal(t, []string{"False", "NotLaunched"}, []string{status, reason})
	assert.Equal(t, "Launched=False InsufficientCapacity no spot; Ready=False NotLaunched <nil>", live.Conditions(u))
	status, reason = live.Condition(&unstructured.Unstructured{Object: map[string]any{}}, "Ready")
	assert.Equal(t, []string{"", "no status yet"}, []string{status, reason})
	assert.Equal(t, "no conditions", live.Conditions(&unstructured.Unstructured{Object: map[string]any{}}))
}
