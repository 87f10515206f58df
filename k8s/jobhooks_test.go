package k8s_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/instancetypes"
	"github.com/luxfi/lux-gpu-ci/k8s"
	"github.com/luxfi/lux-gpu-ci/pricing"
)

func fmtPrice(usd float64) string { return strconv.FormatFloat(usd, 'g', -1, 64) }

func envOf(vars []corev1.EnvVar) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, v := range vars {
		out[v.Name] = v
	}
	return out
}

// What a runner-form runner tells its job hooks does not depend on the pool's instance types
// (a new size of the same GPU must not roll the scale set's runners), but on its capacity
// types: spot pools are priced at spot, on-demand ones at on-demand, and every catalogued GPU
// type has its price.
func TestJobHookEnvPricesEveryGPUType(t *testing.T) {
	p := pricing.Default()
	pool := config.DefaultPool()
	one := k8s.JobHookEnv(pool, p)
	pool.InstanceTypes = []string{"g4dn.xlarge", "g4dn.2xlarge"}
	assert.Equal(t, one, k8s.JobHookEnv(pool, p), "an instanceTypes edit changes nothing the runners carry")

	env := envOf(one)
	prices := strings.Fields(env["GPUCI_PRICES"].Value)
	var priced []string
	for _, it := range instancetypes.Names() {
		if price, ok := p.Spot[it]; ok {
			priced = append(priced, it+"="+fmtPrice(price))
		}
	}
	require.NotEmpty(t, priced)
	assert.ElementsMatch(t, priced, prices, "every catalogued GPU type the spot table prices, the pool's or not")
	assert.Contains(t, prices, "g4dn.xlarge="+fmtPrice(p.Spot["g4dn.xlarge"]), "spot pools are priced at spot")
	assert.Equal(t, "spot", env["GPUCI_CAPACITY"].Value)

	onDemand := config.DefaultPool()
	onDemand.CapacityTypes = []config.CapacityType{config.CapacityOnDemand}
	od := envOf(k8s.JobHookEnv(onDemand, p))
	assert.Contains(t, strings.Fields(od["GPUCI_PRICES"].Value), "g4dn.xlarge="+fmtPrice(p.OnDemand["g4dn.xlarge"]))
	assert.Equal(t, "on-demand", od["GPUCI_CAPACITY"].Value)
	assert.NotContains(t, env, "GPUCI_PRICES_ON_DEMAND", "a spot-only pool runs on spot")
	assert.NotContains(t, od, "GPUCI_PRICES_ON_DEMAND", "an on-demand pool's prices are on-demand already")

	// A pool of both is priced at spot, and a job whose node was on-demand at on-demand.
	mixed := config.DefaultPool()
	mixed.CapacityTypes = []config.CapacityType{config.CapacitySpot, config.CapacityOnDemand}
	both := envOf(k8s.JobHookEnv(mixed, p))
	assert.Equal(t, env["GPUCI_PRICES"], both["GPUCI_PRICES"])
	assert.Equal(t, od["GPUCI_PRICES"].Value, both["GPUCI_PRICES_ON_DEMAND"].Value)
	assert.Equal(t, "spot, on-demand when spot is short (priced at spot)", both["GPUCI_CAPACITY"].Value)

	assert.Equal(t, "runner", env["GPUCI_JOB_FORM"].Value)
}
