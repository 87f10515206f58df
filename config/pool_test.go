package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// A pool's retry twin is derived where it is needed, not kept among the configured pools:
// GPUPools is what the stack file says, Pools what the stack runs, each twin after its pool
// and made from it as it is now.
func TestTwinsAreDerivedNotConfigured(t *testing.T) {
	c := testkit.DevConfig(t)
	var configured, runs []string
	for _, p := range c.GPUPools {
		configured = append(configured, p.Name)
		assert.Empty(t, p.RetryTwinOf, "%s is configured, not derived", p.Name)
	}
	for _, p := range c.Pools() {
		runs = append(runs, p.Name)
	}
	assert.Equal(t, []string{"gpu-spot", "gpu-spot-container"}, configured)
	assert.Equal(t, []string{"gpu-spot", "gpu-spot-on-demand", "gpu-spot-container"}, runs, "the test stack: gpu-spot has a twin")

	c.GPUPools[0].MaxRunners = 3
	twin := c.Pools()[1]
	require.Equal(t, "gpu-spot", twin.RetryTwinOf)
	assert.Equal(t, 3, twin.MaxRunners, "a twin follows its pool")
	assert.Equal(t, []config.CapacityType{config.CapacityOnDemand}, twin.CapacityTypes)
}
