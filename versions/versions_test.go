package versions_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// Every chart is pinned, and findable by its name (the helmCharts config key).
func TestChartsArePinnedAndNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range versions.Charts {
		assert.NotEmpty(t, c.Version, "%s is pinned", c.Chart)
		assert.False(t, seen[c.Name()], "%s is listed once", c.Name())
		seen[c.Name()] = true
		got, ok := versions.ChartNamed(c.Name())
		assert.True(t, ok)
		assert.Equal(t, c, got)
	}
	assert.Equal(t, []string{"karpenter-crd", "karpenter", "nvidia-device-plugin", "gha-runner-scale-set-controller", "gha-runner-scale-set"}, versions.ChartNames())
	_, ok := versions.ChartNamed("cert-manager")
	assert.False(t, ok)
}
