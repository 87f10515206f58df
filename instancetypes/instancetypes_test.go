package instancetypes_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/instancetypes"
)

func TestLookup(t *testing.T) {
	g, ok := instancetypes.Lookup("g4dn.xlarge")
	require.True(t, ok)
	assert.Equal(t, instancetypes.GPU{Name: "g4dn.xlarge", VCPUs: 4, MemoryGiB: 16, GPUs: 1, GPUModel: "t4"}, g)
	_, ok = instancetypes.Lookup("t3.medium")
	assert.False(t, ok, "only NVIDIA GPU types are in the catalogue")
	assert.True(t, slices.IsSorted(instancetypes.Names()))
}

// A runner sized for the smallest per-GPU share fits every type of the pool.
func TestSmallest(t *testing.T) {
	cpu, mem, err := instancetypes.Smallest([]string{"g5.2xlarge", "g4dn.xlarge"})
	require.NoError(t, err)
	assert.Equal(t, []float64{4, 16}, []float64{cpu, mem})
	cpu, mem, err = instancetypes.Smallest([]string{"g6.12xlarge"})
	require.NoError(t, err)
	assert.Equal(t, []float64{12, 48}, []float64{cpu, mem}, "4 GPUs share 48 vCPUs and 192 GiB")
	_, _, err = instancetypes.Smallest([]string{"p5.48xlarge"})
	assert.ErrorContains(t, err, `"p5.48xlarge" is not a known GPU instance type`)
	_, _, err = instancetypes.Smallest(nil)
	assert.Error(t, err)
}
