package quota_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/quota"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

func TestNeedsOfTheDevStack(t *testing.T) {
	needs := quota.Needs(testkit.DevConfig(t))
	assert.Equal(t, []quota.Need{
		{CapacityType: "spot", QuotaCode: "L-3819A6DF", VCPUs: 8, Pools: []string{"gpu-spot", "gpu-spot-container"}},
		{CapacityType: "on-demand", QuotaCode: "L-DB2E81BA", VCPUs: 4, Pools: []string{"gpu-spot-on-demand"}},
	}, needs, "one g4dn.xlarge per pool, all busy at once: 8 vCPUs of spot G and VT, and 4 on-demand for gpu-spot's retry twin")
	assert.Equal(t, "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-3819A6DF --desired-value 8 --region us-west-2",
		needs[0].RequestCommand("us-west-2"))
}

// Each capacity type is its own quota; a pool counts its hungriest type per GPU.
func TestNeedsAddUpPerCapacityType(t *testing.T) {
	cfg := testkit.DevConfig(t, "gpuPools", `[
		{"name": "a", "instanceTypes": ["g4dn.xlarge", "g5.2xlarge"], "capacityTypes": ["spot", "on-demand"], "gpuLimit": 2, "maxRunners": 2},
		{"name": "b", "instanceTypes": ["g6.12xlarge"], "capacityTypes": ["on-demand"], "gpuLimit": 4, "maxRunners": 4}
	]`)
	assert.Equal(t, []quota.Need{
		{CapacityType: "spot", QuotaCode: "L-3819A6DF", VCPUs: 16, Pools: []string{"a"}},
		{CapacityType: "on-demand", QuotaCode: "L-DB2E81BA", VCPUs: 16 + 48, Pools: []string{"a", "b"}},
	}, quota.Needs(cfg))
}

func TestShortfallFromALaunchError(t *testing.T) {
	cfg := testkit.DevConfig(t)
	n, ok := quota.Shortfall(cfg, "creating instance, MaxSpotInstanceCountExceeded: Max spot instance count exceeded")
	assert.True(t, ok)
	assert.Equal(t, "L-3819A6DF", n.QuotaCode)
	_, ok = quota.Shortfall(cfg, "InsufficientInstanceCapacity")
	assert.False(t, ok, "no capacity is not a quota problem")
}
