package cost_test

// gpuci cost: the seed's own arithmetic, and our default stack itemised.

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/cost"
	"github.com/luxfi/lux-gpu-ci/internal/testkit"
)

func near(t *testing.T, want, got float64, what string) {
	t.Helper()
	assert.LessOrEqual(t, math.Abs(want-got), 0.01, "%s: want %.2f, got %.2f", what, want, got)
}

// The seed: 30 builds/day × 10 min at $0.16/h is ~$24/month of GPU; idle is ~$138/month
// (control plane, one t3.medium, its root volume, NAT hours; no separate IPv4 charge then).
func TestCostReproducesTheSeedArithmetic(t *testing.T) {
	p := cost.DefaultPrices()
	p.Spot = map[string]float64{"g4dn.xlarge": 0.16}
	p.PublicIPv4 = 0
	r, err := cost.Estimate(testkit.DevConfig(t), p, cost.Usage{BuildsPerDay: 30, MinutesPerBuild: 10})
	require.NoError(t, err)
	near(t, 137.82, r.IdleUSD, "idle per month")
	require.Len(t, r.Pools, 3, "dev's two pools (one per job form, priced alike, each as if it ran every build) and gpu-spot's retry twin")
	assert.Equal(t, r.Pools[0].BuildUSD, r.Pools[2].BuildUSD)
	pool := r.Pools[0]
	assert.Equal(t, "g4dn.xlarge", pool.InstanceType)
	near(t, 24.00, pool.PerBuild[0].USD*30*30, "GPU instance per month")
}

func TestCostOfTheDefaultStack(t *testing.T) {
	r, err := cost.Estimate(testkit.DevConfig(t), cost.DefaultPrices(), cost.Usage{BuildsPerDay: 30, MinutesPerBuild: 10, BootMinutes: 4, ImageGB: 8, ColdStarts: 1})
	require.NoError(t, err)
	var idle []string
	for _, it := range r.Idle {
		idle = append(idle, it.What)
	}
	assert.Equal(t, []string{"EKS control plane", "1 × t3.medium system node", "1 × 20 GiB gp3 system root volume", "NAT gateway hours and its public IPv4"}, idle)
	near(t, 73+30.368+1.6+36.5, r.IdleUSD, "idle")
	pool := r.Pools[0]
	assert.Equal(t, "spot", pool.CapacityType)
	assert.Equal(t, "g4dn.xlarge", pool.InstanceType, "the cheaper of the pool's types")
	near(t, 14.5, pool.NodeMinutes, "node minutes: job + boot + 30 s warm window")
	near(t, 14.5/60*0.2497, pool.PerBuild[0].USD, "instance")
	near(t, 8*0.045, pool.PerBuild[2].USD, "image through the NAT")
	near(t, pool.BuildUSD*30*30, pool.MonthlyUSD, "monthly")
	near(t, 10*0.052, r.HostedUSD, "hosted T4 per build")
	near(t, r.IdleUSD/(r.HostedUSD-pool.BuildUSD), r.BreakEvenBuilds, "break-even")

	var out bytes.Buffer
	require.NoError(t, r.WriteTable(&out))
	assert.Contains(t, out.String(), "Break-even")
	for _, source := range []string{"https://aws.amazon.com/eks/pricing/", "https://aws.amazon.com/vpc/pricing/", "https://docs.github.com/en/billing/reference/actions-runner-pricing"} {
		assert.Contains(t, out.String(), source, "prices cite public sources")
	}
	assert.NotContains(t, out.String(), "upstream.md", "no source outside the repository a user cannot open")

	lean, err := cost.Estimate(testkit.DevConfig(t, "natMode", "none"), cost.DefaultPrices(), cost.Usage{BuildsPerDay: 30, MinutesPerBuild: 10, ImageGB: 8, ColdStarts: 1})
	require.NoError(t, err)
	near(t, r.IdleUSD-36.5+3.65, lean.IdleUSD, "lean idle has no NAT, but the system node's public IPv4 ($0.005/h)")
	assert.Contains(t, lean.Idle, cost.Item{What: "1 × public IPv4 of the system nodes (no NAT)", USD: 0.005 * 730})
	require.Len(t, lean.Pools[0].PerBuild, 3, "no NAT data charge without a NAT")
	ipv4 := lean.Pools[0].PerBuild[2]
	assert.Equal(t, "the GPU node's public IPv4 (no NAT)", ipv4.What)
	near(t, lean.Pools[0].NodeMinutes/60*0.005, ipv4.USD, "the GPU node's IPv4 for its life")
}

func TestCostNamesAMissingPrice(t *testing.T) {
	c := testkit.DevConfig(t, "gpuPools", `[{"name": "big", "instanceTypes": ["g5.48xlarge"], "gpuLimit": 8}]`)
	_, err := cost.Estimate(c, cost.DefaultPrices(), cost.Usage{BuildsPerDay: 1, MinutesPerBuild: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool big: no spot price")
}

type stubPrices map[string]float64

func (s stubPrices) OnDemand(_ context.Context, region, it string) (float64, error) {
	return s["od:"+region+":"+it], nil
}

func (s stubPrices) Spot(_ context.Context, region, it string) (float64, error) {
	return s["spot:"+region+":"+it], nil
}

func TestLivePricesReplaceTheTable(t *testing.T) {
	src := stubPrices{"od:us-west-2:t3.medium": 0.05, "od:us-west-2:g4dn.xlarge": 0.6, "spot:us-west-2:g4dn.xlarge": 0.2}
	p, err := cost.LivePrices(context.Background(), cost.DefaultPrices(), src, "us-west-2", []string{"t3.medium", "g4dn.xlarge"}, []string{"g4dn.xlarge"})
	require.NoError(t, err)
	assert.Contains(t, p.Source, "AWS Pricing API")
	r, err := cost.Estimate(testkit.DevConfig(t, "gpuPools", `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"]}]`), p, cost.Usage{BuildsPerDay: 1, MinutesPerBuild: 60})
	require.NoError(t, err)
	near(t, 0.05*730, r.Idle[1].USD, "the system node at the live price")
	near(t, 0.2, r.Pools[0].PerBuild[0].USD, "an hour of spot g4dn at the live price (30 s warm window aside)")
}

// A Pricing API price-list document, trimmed to the fields read.
const priceListDoc = `{"product":{"attributes":{"instanceType":"g4dn.xlarge"}},"terms":{"OnDemand":{"ABC.JRTCKXETXF":{"priceDimensions":{"ABC.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":"0.5260000000"}}}}}}}`

func TestParseOnDemandPrice(t *testing.T) {
	v, ok := cost.ParseOnDemandPrice(priceListDoc)
	require.True(t, ok)
	assert.Equal(t, 0.526, v)
	_, ok = cost.ParseOnDemandPrice(`{"terms":{}}`)
	assert.False(t, ok)
}

// A retry twin is priced on-demand and counted only for the builds an interruption re-runs.
func TestCostCountsTheRetryTwinAtTheInterruptionRate(t *testing.T) {
	p := cost.DefaultPrices()
	u := cost.Usage{BuildsPerDay: 30, MinutesPerBuild: 10, InterruptionRate: 0.05}
	r, err := cost.Estimate(testkit.DevConfig(t), p, u)
	require.NoError(t, err)
	var spot, twin cost.PoolEstimate
	for _, e := range r.Pools {
		switch e.Pool {
		case "gpu-spot":
			spot = e
		case "gpu-spot-on-demand":
			twin = e
		}
	}
	require.Equal(t, "gpu-spot", twin.RetryTwinOf)
	assert.Equal(t, "on-demand", twin.CapacityType)
	assert.Equal(t, spot.InstanceType, twin.InstanceType)
	near(t, twin.BuildUSD*30*30*0.05, twin.MonthlyUSD, "the twin's month: 5% of the builds, on-demand")
	assert.Greater(t, twin.BuildUSD, spot.BuildUSD)

	var out bytes.Buffer
	require.NoError(t, r.WriteTable(&out))
	assert.Contains(t, out.String(), "per month, re-running 5% of gpu-spot's 30 builds/day (spot interruptions)")
	assert.Contains(t, out.String(), "self-hosted (idle + pool gpu-spot + its retry twin)")

	u.InterruptionRate = 1.5
	_, err = cost.Estimate(testkit.DevConfig(t), p, u)
	assert.ErrorContains(t, err, "not a share of builds")
}
