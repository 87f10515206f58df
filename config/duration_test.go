package config_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

func parsePools(t *testing.T, pools string) (*config.Config, error) {
	t.Helper()
	cfg := testkit.With(testkit.StackConfig(t, "dev"), "gpuPools", pools)
	return config.Parse("dev", func(k string) (string, bool) { v, ok := cfg[k]; return v, ok }, nil)
}

// A pool's durations, form and capacity types are read once, into typed values: what the
// NodePool and the cost model use is a time.Duration, never text to parse again.
func TestPoolFieldsAreTypedAtTheBoundary(t *testing.T) {
	c, err := parsePools(t, `[{"name": "gpu-a", "instanceTypes": ["g4dn.xlarge"], "consolidateAfter": "1m30s", "expireAfter": "Never",
		"terminationGracePeriod": "2h", "jobForm": "container", "runnerGroup": "gpu-trusted", "trustedRepositoriesOnly": true, "capacityTypes": ["spot", "on-demand"]}]`)
	require.NoError(t, err)
	pool := c.GPUPools[0]
	assert.Equal(t, 90*time.Second, pool.ConsolidateAfter.Std())
	assert.True(t, pool.ExpireAfter.IsNever())
	assert.Equal(t, 2*time.Hour, pool.TerminationGracePeriod.Std())
	assert.Equal(t, config.JobFormContainer, pool.JobForm)
	assert.True(t, pool.Allows(config.CapacitySpot) && pool.Allows(config.CapacityOnDemand))
	assert.Equal(t, []string{"spot", "on-demand"}, pool.CapacityTypeNames())

	def := config.DefaultPool()
	assert.Equal(t, 30*time.Second, def.ConsolidateAfter.Std(), "the defaults are typed too")
	assert.Equal(t, "24h", def.ExpireAfter.String(), "written as the stack file writes it")
	assert.Equal(t, "1m30s", pool.ConsolidateAfter.String())
	assert.Equal(t, "Never", pool.ExpireAfter.String())

	// Written back, a pool reads the same (the stack file's form).
	b, err := json.Marshal([]config.GPUPool{pool})
	require.NoError(t, err)
	again, err := parsePools(t, string(b))
	require.NoError(t, err)
	assert.Equal(t, pool.ConsolidateAfter, again.GPUPools[0].ConsolidateAfter)
	assert.Equal(t, pool.ExpireAfter, again.GPUPools[0].ExpireAfter)
}

// What is not a Karpenter duration is refused with its field's name, whatever its JSON type.
func TestBadPoolDurationsAreRefusedByField(t *testing.T) {
	for value, want := range map[string]string{
		`"consolidateAfter": "1.5h"`:       `consolidateAfter: "1.5h" is not a Karpenter duration`,
		`"consolidateAfter": 30`:           `consolidateAfter: "30" is not a Karpenter duration`,
		`"consolidateAfter": "Never"`:      `consolidateAfter: "Never" is allowed for expireAfter only`,
		`"terminationGracePeriod": "6 h"`:  `terminationGracePeriod: "6 h" is not a Karpenter duration`,
		`"expireAfter": "99999999999999h"`: `expireAfter: "99999999999999h" is not a Karpenter duration`,
	} {
		_, err := parsePools(t, `[{"name": "gpu-a", "instanceTypes": ["g4dn.xlarge"], `+value+`}]`)
		require.Error(t, err, value)
		assert.Contains(t, err.Error(), want, value)
		assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools", "the key")
	}
}
