package cost_test

// gpuci cost: the seed's own arithmetic, and our default stack itemised.

import (
	"bytes"
	"context"
	"github.com/luxfi/lux-gpu-ci/pricing"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/cost"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/instancetypes"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// nearTo is near with a tolerance of its own, for figures a cent would swallow.
func nearTo(t *testing.T, want, got, tolerance float64, what string) {
	t.Helper()
	assert.LessOrEqual(t, math.Abs(want-got), tolerance, "%s: want %v, got %v", what, want, got)
}

func near(t *testing.T, want, got float64, what string) {
	t.Helper()
	assert.LessOrEqual(t, math.Abs(want-got), 0.01, "%s: want %.2f, got %.2f", what, want, got)
}

// The seed: 30 builds/day × 10 min at $0.16/h is ~$24/month of GPU; idle is ~$138/month
// (control plane, one t3.medium, its root volume, NAT hours; no separate IPv4 charge then).
func TestCostReproducesTheSeedArithmetic(t *testing.T) {
	p := pricing.Default()
	p.Spot = map[string]float64{"g4dn.xlarge": 0.16}
	p.PublicIPv4 = 0
	r, err := cost.Estimate(noCache(t, "gpuPools", `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "runnerScaleSetName": "lux-gpu-t4", "onDemandRetry": true, "compilerCache": "none"},
		{"name": "gpu-spot-container", "instanceTypes": ["g4dn.xlarge"], "runnerScaleSetName": "lux-gpu-t4-container", "runnerLabels": ["c"], "jobForm": "container", "runnerGroup": "gpu-trusted", "trustedRepositoriesOnly": true, "compilerCache": "none"}]`), p, cost.Usage{BuildsPerDay: 30, MinutesPerBuild: 10})
	require.NoError(t, err)
	near(t, 137.82, r.IdleUSD, "idle per month")
	require.Len(t, r.Pools, 3, "dev's two pools (one per job form, priced alike, each as if it ran every build) and gpu-spot's retry twin")
	pool := r.Pools[0]
	assert.Equal(t, "g4dn.xlarge", pool.InstanceType)
	near(t, 24.00, pool.PerBuild[0].USD*30*30, "GPU instance per month")
}

// noCache is the dev stack without its image cache: images come from their registries.
func noCache(t *testing.T, kv ...string) *config.Config {
	return testkit.DevConfig(t, append([]string{"imageCache", "[]", "registryCredentials", testkit.Unset}, kv...)...)
}

// defaultUsage is gpuci cost's defaults: 30 ten-minute builds a day, every one on a new node,
// each pool's own cold start and the smoke workflow's CUDA image.
var defaultUsage = cost.Usage{BuildsPerDay: 30, MinutesPerBuild: 10, BootMinutes: -1, JobImageGB: -1, ColdStarts: 1, InterruptionRate: cost.DefaultInterruptionRate}

func item(t *testing.T, e cost.PoolEstimate, prefix string) cost.Item {
	t.Helper()
	for _, it := range e.PerBuild {
		if strings.HasPrefix(it.What, prefix) {
			return it
		}
	}
	t.Fatalf("pool %s has no per-build item %q: %v", e.Pool, prefix, e.PerBuild)
	return cost.Item{}
}

func poolNamed(t *testing.T, r cost.Report, name string) cost.PoolEstimate {
	t.Helper()
	for _, e := range r.Pools {
		if e.Pool == name {
			return e
		}
	}
	t.Fatalf("no pool %s", name)
	return cost.PoolEstimate{}
}

// comparisonNamed is the report's comparison of a pool, failing the test without one.
func comparisonNamed(t *testing.T, r cost.Report, pool string) cost.Comparison {
	t.Helper()
	for _, c := range r.Comparisons {
		if c.Pool == pool {
			return c
		}
	}
	t.Fatalf("no comparison for pool %s", pool)
	return cost.Comparison{}
}

func TestCostOfTheDefaultStack(t *testing.T) {
	r, err := cost.Estimate(testkit.DevConfig(t), pricing.Default(), defaultUsage)
	require.NoError(t, err)
	var idle []string
	for _, it := range r.Idle {
		idle = append(idle, it.What)
	}
	assert.Equal(t, []string{"EKS control plane", "1 × t3.medium system node", "1 × 20 GiB gp3 system root volume", "NAT gateway hours and its public IPv4", "ECR image cache: 8.5 GB of cached images",
		"compiler cache bucket: 4 GB (a model: 2 GB per read-write pool)", "compiler cache requests: 180k GET, 36k PUT (a model: 200 compilations a build)"}, idle)
	// The compiler cache: 2 prefixes × 2 GB × $0.023; 900 builds × 200 compilations × 2 reads,
	// half from S3 (180k GET × $0.0004/1000) and a tenth written (36k PUT × $0.005/1000).
	near(t, 2*2*0.023+180*0.0004+36*0.005, item(t, cost.PoolEstimate{PerBuild: r.Idle[5:]}, "compiler cache bucket").USD+item(t, cost.PoolEstimate{PerBuild: r.Idle[5:]}, "compiler cache requests").USD, "the compiler cache's month")
	near(t, 73+30.368+1.6+36.5+0.85+0.344, r.IdleUSD, "idle: the cache stores the runner image (0.5 GB) and the CUDA image (8 GB) at $0.10/GB-month; the compiler cache")
	near(t, 8.0, r.Usage.JobImageGB, "the smoke workflow's CUDA image by default")

	pool := poolNamed(t, r, "gpu-spot")
	assert.Equal(t, "spot", pool.CapacityType)
	assert.Equal(t, "g4dn.xlarge", pool.InstanceType, "the cheaper of the pool's types")
	// By hand, the slow end from the launch on (what the node is billed for): launch 110 s,
	// RAID0 10 s, the device plugin's 0.1 GB through the NAT (100 MB / 25 MB/s = 4 s down,
	// then 200 MB / 70 MB/s = 2.857 s unpacking, the NVMe being faster) + 15 s, the runner's
	// 0.5 GB from the cache (500 / 130 = 3.846 s + 1000 / 70 = 14.286 s), its container 3 s
	// and its start 10 s: 172.99 s. The node lives 10 + 2.8832 + 0.5 = 13.3832 minutes,
	// 0.223053 h.
	nearTo(t, 172.99, pool.ColdStart.NodeUp.High, 0.01, "the node's part of the cold start, slow end")
	nearTo(t, 13.3832, pool.NodeMinutes, 0.001, "node minutes: job + the pool's cold start from its launch + 30 s warm window")
	nearTo(t, 0.055697, pool.PerBuild[0].USD, 0.000005, "instance: 0.223053 h × $0.2497")
	nearTo(t, 0.002444, item(t, pool, "100 GiB gp3 root volume").USD, 0.000005, "volume: 0.223053 h × 100 GiB × $0.08 / 730")
	for _, it := range pool.PerBuild {
		assert.NotContains(t, it.What, "above gp3's baseline", "the images go to the NVMe: the root volume needs no more than gp3's baseline")
	}
	assert.Equal(t, cost.Item{What: "0.5 GB of images from the ECR cache (S3 gateway endpoint)", USD: 0}, item(t, pool, "0.5 GB"), "the runner image")
	near(t, 0.1*0.045, item(t, pool, "0.1 GB of images through the NAT").USD, "the device plugin's image: nvcr.io has no cache rule")
	nearTo(t, 0.062641, pool.BuildUSD, 0.00001, "per build: instance, volume, $0.0045 of NAT")
	nearTo(t, 56.38, pool.MonthlyUSD, 0.01, "monthly: 900 builds")
	near(t, 10*0.052, r.HostedUSD, "hosted T4 per build")

	container := poolNamed(t, r, "gpu-spot-container")
	assert.Equal(t, cost.Item{What: "8.5 GB of images from the ECR cache (S3 gateway endpoint)", USD: 0}, item(t, container, "8.5 GB"), "fs-init's runner image and the CUDA image")

	var out bytes.Buffer
	require.NoError(t, r.WriteTable(&out))
	assert.Contains(t, out.String(), "break-even")
	assert.Contains(t, out.String(), "Cold start: queued job → first step on a new GPU node (modelled, not measured")
	assert.Regexp(t, `(?m)^    total +\d+–\d+ s$`, out.String(), "a range, not a point")
	assert.Contains(t, out.String(), "Start figures are a model, not a measurement")
	for _, source := range []string{"https://aws.amazon.com/eks/pricing/", "https://aws.amazon.com/vpc/pricing/", "https://aws.amazon.com/ecr/pricing/", "https://aws.amazon.com/ebs/pricing/", "https://docs.github.com/en/billing/reference/actions-runner-pricing"} {
		assert.Contains(t, out.String(), source, "prices cite public sources")
	}
	assert.NotContains(t, out.String(), "upstream.md", "no source outside the repository a user cannot open")
}

// The product's reason to exist, with the CUDA image a job really pulls: through the cache,
// every pool is at least 6× cheaper per build than GitHub's hosted T4 (its cold start priced at the model's slow end), and the month far
// cheaper; without the cache, the container form's 8 GB through the NAT costs more than
// GitHub — the case the image path exists for.
func TestTheImagePathKeepsTheStackCheaperThanGitHub(t *testing.T) {
	r, err := cost.Estimate(testkit.DevConfig(t), pricing.Default(), defaultUsage)
	require.NoError(t, err)
	require.Len(t, r.Comparisons, 2, "gpu-spot (with its twin) and gpu-spot-container")
	for _, c := range r.Comparisons {
		assert.GreaterOrEqual(t, c.Times, 6.0, "pool %s per build", c.Pool)
		assert.Less(t, c.MonthUSD, 0.5*c.HostedMonthUSD, "pool %s: a month at 30 builds/day under half of GitHub's", c.Pool)
	}

	before, err := cost.Estimate(noCache(t), pricing.Default(), defaultUsage)
	require.NoError(t, err)
	container := poolNamed(t, before, "gpu-spot-container")
	near(t, 8.6*0.045, item(t, container, "8.6 GB of images through the NAT").USD, "device plugin, runner and CUDA image through the NAT")
	c := comparisonNamed(t, before, "gpu-spot-container")
	assert.Less(t, c.Times, 1.5, "through the NAT the CUDA pull dwarfs the GPU time")
	assert.Greater(t, c.MonthUSD, c.HostedMonthUSD, "and the month costs more than GitHub's")

	// The lean profile has no NAT: image bytes come in through the internet gateway, free,
	// and each node pays for its public IPv4.
	lean, err := cost.Estimate(noCache(t, "natMode", "none"), pricing.Default(), defaultUsage)
	require.NoError(t, err)
	near(t, before.IdleUSD-36.5+3.65, lean.IdleUSD, "lean idle has no NAT, but the system node's public IPv4 ($0.005/h)")
	assert.Contains(t, lean.Idle, cost.Item{What: "1 × public IPv4 of the system nodes (no NAT)", USD: 0.005 * 730})
	lc := poolNamed(t, lean, "gpu-spot-container")
	assert.Equal(t, cost.Item{What: "8.6 GB of images through the internet gateway", USD: 0}, item(t, lc, "8.6 GB"))
	near(t, lc.NodeMinutes/60*0.005, item(t, lc, "the GPU node's public IPv4").USD, "the GPU node's IPv4 for its life")
}

// The cold-start model, step by step, for both forms, each step a range; the container form
// against the hooks' wait for the job pod.
func TestColdStart(t *testing.T) {
	c := testkit.DevConfig(t)
	runner := cost.ColdStartOf(c.GPUPools[0], cost.PulledImages(c, c.GPUPools[0], 8))
	var steps []string
	for _, s := range runner.Steps {
		steps = append(steps, s.What)
		assert.Less(t, s.Low, s.High, "%s: a range, not a point", s.What)
	}
	assert.Equal(t, []string{
		"ARC: job → runner pod", "Karpenter: batch, CreateFleet", "instance launch → node Ready",
		"the instance store's NVMe assembled as RAID0 for containerd",
		"pull nvcr.io/nvidia/k8s-device-plugin:v0.19.3 (0.1 GB, over the internet, through the NAT, onto the instance's NVMe)",
		"device plugin registers the GPU",
		"pull ghcr.io/actions/actions-runner:latest (0.5 GB, from the ECR cache, onto the instance's NVMe)",
		"container start", "the runner starts and takes its job",
	}, steps, "the runner's own start and the NVMe's RAID0 are steps of their own (#52.5)")
	// By hand: lows 2 + 2 + 60 + 6 + 2.667 + 5 + 6.667 + 1 + 3; highs 8 + 11 + 110 + 10 +
	// 6.857 + 15 + 18.132 + 3 + 10.
	nearTo(t, 88.33, runner.Low, 0.01, "runner form, fast end")
	nearTo(t, 191.99, runner.High, 0.01, "runner form, slow end")
	nearTo(t, runner.High-8-11, runner.NodeUp.High, 0.001, "the node is up from its launch")
	assert.Nil(t, runner.PrepareJobMargin, "the runner form has no hooks' wait")

	pool := c.GPUPools[1]
	require.Equal(t, config.JobFormContainer, pool.JobForm)
	cached := cost.ColdStartOf(pool, cost.PulledImages(c, pool, 8))
	cuda := cached.Steps[len(cached.Steps)-3]
	require.Equal(t, "pull nvidia/cuda:12.8.1-devel-ubuntu24.04 (8.0 GB, from the ECR cache, onto the instance's NVMe)", cuda.What)
	// 8000 / 300 + 16000 / 200 = 106.7 s; 8000 / 130 + 16000 / 70 = 290.1 s: inside the
	// 150–300 s public figures for default containerd at the slow end.
	nearTo(t, 106.67, cuda.Low, 0.01, "the CUDA pull, fast end")
	nearTo(t, 290.11, cuda.High, 0.01, "the CUDA pull, slow end")
	require.NotNil(t, cached.PrepareJobMargin)
	assert.Greater(t, cached.PrepareJobMargin.Low, 500.0, "through the cache the CUDA image leaves most of the hooks' wait spare, at the slow end")
	assert.Greater(t, cached.Low, runner.High-10, "and yet more than the runner form's")
	assert.Greater(t, cached.High, 330.0, "queued → running may take six minutes and more at the slow end")

	nc := noCache(t)
	upstream := cost.ColdStartOf(pool, cost.PulledImages(nc, pool, 8))
	assert.Greater(t, upstream.Low, cached.Low+50, "over the internet: minutes more")
	assert.Greater(t, upstream.High, cached.High+200, "over the internet: minutes more")
	assert.Greater(t, upstream.PrepareJobMargin.Low, 300.0, "even then the wait outlasts it")
	huge := cost.ColdStartOf(pool, cost.PulledImages(nc, pool, 50))
	assert.Negative(t, huge.PrepareJobMargin.High, "a 50 GB image from Docker Hub outlasts the wait even at the fast end: the job would fail")
}

// A pull: download, then the slower of unpacking and writing. 8 GB at 250 MiB/s from ECR:
// fast 8000 MB / 300 MB/s = 26.67 s, then max(16000 MB / 200 MB/s = 80 s, 24000 MB /
// 262.144 MB/s = 91.55 s) = 118.22 s; slow 8000 / 130 = 61.54 s, then max(16000 / 70 =
// 228.57 s, 91.55 s) = 290.11 s.
func TestPullSeconds(t *testing.T) {
	mib := 1.048576 // MB/s per MiB/s
	gp3 := func(mibs float64) cost.Rate { return cost.Rate{Slow: mibs * mib, Fast: mibs * mib} }
	got := cost.PullSeconds(8, true, gp3(250))
	near(t, 118.22, got.Low, "8 GB from ECR at 250 MiB/s, fast end")
	near(t, 290.11, got.High, "8 GB from ECR at 250 MiB/s, slow end")
	got = cost.PullSeconds(8, false, gp3(125))
	near(t, 133.33+183.11, got.Low, "8 GB over the internet at 125 MiB/s: the disk the bound")
	near(t, 320+228.57, got.High, "8 GB over the internet at 125 MiB/s, slow end: 25 MB/s down")
	for _, gb := range []float64{0.5, 8, 20} {
		for _, tp := range []float64{125, 250, 500, 1000} {
			ecr, internet := cost.PullSeconds(gb, true, gp3(tp)), cost.PullSeconds(gb, false, gp3(tp))
			assert.Less(t, ecr.Low, internet.Low, "the cache is faster (%v GB, %v MiB/s)", gb, tp)
			assert.Less(t, ecr.High, internet.High, "the cache is faster (%v GB, %v MiB/s)", gb, tp)
			assert.Less(t, ecr.Low, ecr.High, "a range (%v GB, %v MiB/s)", gb, tp)
			if tp > 125 {
				assert.LessOrEqual(t, ecr.High, cost.PullSeconds(gb, true, gp3(tp/2)).High, "more throughput is never slower")
			}
		}
	}
}

// A span prints as a range, or as one figure when both ends round alike.
func TestSpanString(t *testing.T) {
	assert.Equal(t, "88–192 s", cost.Span{Low: 88.33, High: 191.99}.String())
	assert.Equal(t, "2 s", cost.Span{Low: 2, High: 2.2}.String())
}

func TestCostNamesAMissingPrice(t *testing.T) {
	c := testkit.DevConfig(t, "gpuPools", `[{"name": "big", "instanceTypes": ["g5.48xlarge"], "gpuLimit": 8}]`)
	_, err := cost.Estimate(c, pricing.Default(), cost.Usage{BuildsPerDay: 1, MinutesPerBuild: 1})
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
	p, err := cost.LivePrices(context.Background(), pricing.Default(), src, "us-west-2", []string{"t3.medium", "g4dn.xlarge"}, []string{"g4dn.xlarge"})
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
	p := pricing.Default()
	u := defaultUsage
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
	// By hand: the twin's node lives as long as gpu-spot's (13.3832 min, 0.223053 h) at the
	// on-demand $0.526: $0.117326, plus the same volume ($0.002444) and NAT ($0.0045) as
	// gpu-spot: $0.124270 a build. It runs 5% of 900 builds: 45.
	nearTo(t, 0.117326, twin.PerBuild[0].USD, 0.000005, "instance: 0.223053 h × $0.526 on-demand")
	nearTo(t, 0.124270, twin.BuildUSD, 0.00001, "per build")
	nearTo(t, 5.5922, twin.MonthlyUSD, 0.001, "the twin's month: 45 re-runs")

	var out bytes.Buffer
	require.NoError(t, r.WriteTable(&out))
	assert.Contains(t, out.String(), "per month, re-running 5% of gpu-spot's 30 builds/day (spot interruptions)")
	assert.Contains(t, out.String(), "self-hosted (idle + the pool + its retry twin, if any)")
	compared := 0
	for _, c := range r.Comparisons {
		if c.Pool == "gpu-spot" {
			// 142.662 idle + 56.377 for gpu-spot's 900 builds + 5.592 for the twin's 45.
			nearTo(t, 204.63, c.MonthUSD, 0.01, "gpu-spot's month counts its twin's re-runs")
			compared++
		}
	}
	require.Equal(t, 1, compared, "one comparison for gpu-spot")

	u.InterruptionRate = 1.5
	_, err = cost.Estimate(testkit.DevConfig(t), p, u)
	assert.ErrorContains(t, err, "not a share of builds")
}

// A container-form pool whose images come from a snapshot, by hand: no image crosses any
// network on a cold start, the snapshot's storage is an idle cost, and the cold start loses
// its pulls. Steps, fast and slow ends: the runner waiting on a system node and its hooks 3–10
// s, Karpenter 2–11 s, launch 60–110 s, Bottlerocket's own device plugin 5–15 s, each of the
// two images read from the restored volume 5–30 s, fs-init and the container start 1–3 s
// each: 82–212 s. Snapshot: (0.5 + 8 GB) × (1 + 2 unpacked) = 25.5 GB × $0.05 = $1.275 a month.
func TestImageSnapshotPool(t *testing.T) {
	c := testkit.DevConfig(t)
	pool := &c.GPUPools[1]
	require.Equal(t, config.JobFormContainer, pool.JobForm)
	pool.ImageSnapshotID = "snap-0123456789abcdef0"

	cs := cost.ColdStartOf(*pool, cost.PulledImages(c, *pool, 8))
	var steps []string
	for _, s := range cs.Steps {
		steps = append(steps, s.What)
	}
	assert.Equal(t, []string{
		"the runner waiting on a system node takes the job, its hooks create the job pod",
		"Karpenter: batch, CreateFleet", "instance launch → node Ready", "Bottlerocket's device plugin registers the GPU",
		"ghcr.io/actions/actions-runner:latest (0.5 GB) on the data volume from snap-0123456789abcdef0, read on first access",
		"nvidia/cuda:12.8.1-devel-ubuntu24.04 (8.0 GB) on the data volume from snap-0123456789abcdef0, read on first access",
		"fs-init (the runner image, on the node) copies the runner's externals", "container start",
	}, steps, "no pull, and no device plugin image")
	assert.Equal(t, cost.Span{Low: 82, High: 212}, cs.Span, "queued → running")

	r, err := cost.Estimate(c, pricing.Default(), defaultUsage)
	require.NoError(t, err)
	var snapshot []cost.Item
	for _, it := range r.Idle {
		if strings.HasPrefix(it.What, "EBS snapshot") {
			snapshot = append(snapshot, it)
		}
	}
	require.Len(t, snapshot, 1, "one snapshot, priced once")
	assert.Equal(t, "EBS snapshot snap-0123456789abcdef0: 25.5 GB of images, unpacked", snapshot[0].What)
	near(t, 1.275, snapshot[0].USD, "the snapshot's month")
	e := poolNamed(t, r, "gpu-spot-container")
	assert.Equal(t, cost.Item{What: "8.5 GB of images on the data volume from its snapshot (no pull)", USD: 0}, item(t, e, "8.5 GB"))
	for _, it := range e.PerBuild {
		assert.NotContains(t, it.What, "ECR cache", "nothing is pulled through the cache")
		assert.NotContains(t, it.What, "NAT", "nothing crosses the NAT")
	}
	pulled := poolNamed(t, r, "gpu-spot")
	item(t, pulled, "0.5 GB of images from the ECR cache") // the other pools still pull
}

// On-demand prices come from Karpenter's generated table (hack/genprices keeps the copy equal
// to the pinned module's): every GPU type a pool may use, and any system node type, has one.
func TestOnDemandPricesAreKarpentersTable(t *testing.T) {
	p := pricing.Default()
	for _, it := range instancetypes.Names() {
		assert.Positive(t, p.OnDemand[it], "%s has an on-demand price", it)
	}
	for it, want := range map[string]float64{"g4dn.xlarge": 0.526, "g5.xlarge": 1.006, "g6.xlarge": 0.8048, "t3.medium": 0.0416, "m5.large": 0.096} {
		assert.Equal(t, want, p.OnDemand[it], it)
	}
	assert.Contains(t, p.Source, "karpenter-provider-aws v1.14.1")
	p.OnDemand["g4dn.xlarge"] = 9
	assert.Equal(t, 0.526, pricing.Default().OnDemand["g4dn.xlarge"], "each caller gets its own copy")
}

// A warm start (a warm window's node, or one a job just left): no launch, no pull; the job's
// pod preempts a placeholder. Both forms within 15 s of the job being queued, by the model.
// And a cold start when spot is short: one refused round more, for a pool that may fall back;
// a spot-only pool has none (its jobs wait for spot).
func TestWarmAndSpotShortStarts(t *testing.T) {
	c := testkit.DevConfig(t)
	runner := cost.WarmStartOf(c.GPUPools[0])
	assert.Equal(t, []cost.Step{
		{What: "ARC: job → runner pod", Span: cost.ARCJobToPod},
		{What: "the scheduler preempts a placeholder on a warm node and binds the pod", Span: cost.Preempt},
		{What: "container start (its image already on the node)", Span: cost.ContainerStart},
		{What: "the runner starts and takes its job", Span: cost.RunnerTakesJob},
	}, runner.Steps)
	assert.Equal(t, cost.Span{Low: 7, High: 25}, runner.Span)
	assert.Equal(t, cost.Span{}, runner.NodeUp, "no node launched")
	container := cost.WarmStartOf(c.GPUPools[1])
	require.Equal(t, config.JobFormContainer, c.GPUPools[1].JobForm)
	assert.Equal(t, []cost.Step{
		{What: "the runner waiting on a system node takes the job, its hooks create the job pod", Span: cost.IdleRunnerTakesJob},
		{What: "the scheduler preempts a placeholder on a warm node and binds the pod", Span: cost.Preempt},
		{What: "fs-init (the runner image, on the node) copies the runner's externals", Span: cost.ContainerStart},
		{What: "container start (its image already on the node)", Span: cost.ContainerStart},
	}, container.Steps, "no runner to start: one waits on a system node")
	assert.Equal(t, cost.Span{Low: 6, High: 20}, container.Span)
	// A twin keeps no runner waiting: ARC makes and starts one per re-run.
	twin := c.GPUPools[1].RetryTwin()
	assert.Len(t, cost.WarmStartOf(twin).Steps, 5, "ARC's runner pod and its start too")

	spotOnly := c.GPUPools[0]
	require.Equal(t, []config.CapacityType{config.CapacitySpot}, spotOnly.CapacityTypes)
	assert.Nil(t, cost.SpotShortStartOf(spotOnly, cost.PulledImages(c, spotOnly, 8)), "a spot-only pool cannot fall back")
	both := spotOnly
	both.CapacityTypes = []config.CapacityType{config.CapacitySpot, config.CapacityOnDemand}
	images := cost.PulledImages(c, both, 8)
	short := cost.SpotShortStartOf(both, images)
	require.NotNil(t, short)
	cold := cost.ColdStartOf(both, images)
	assert.Equal(t, cold.Span.Plus(cost.SpotRefused), short.Span, "one refused round more")
	assert.Equal(t, "spot refused (InsufficientInstanceCapacity): Karpenter's next pass launches on-demand", short.Steps[2].What, "after Karpenter's first CreateFleet")
	assert.Equal(t, cold.NodeUp, short.NodeUp, "the refused launch made no node")
}

// A window's default lead (config.WarmLeadRunnerForm, WarmLeadContainerForm) is at least the
// slow end of the model from the placeholder's creation (Karpenter's decision) to the node's
// last pull: at the window's start its nodes are up and pulled.
func TestWarmLeadsCoverTheModelledColdStart(t *testing.T) {
	c := testkit.DevConfig(t)
	checked := 0
	for _, pool := range c.GPUPools {
		lead := config.WarmLeadRunnerForm
		if pool.JobForm == config.JobFormContainer {
			lead = config.WarmLeadContainerForm
		}
		cs := cost.ColdStartOf(pool, cost.PulledImages(c, pool, cost.SmokeJobImageGB))
		warming, counting := 0.0, false
		for _, s := range cs.Steps {
			counting = counting || s.What == "Karpenter: batch, CreateFleet"
			if counting && (strings.HasPrefix(s.What, "pull ") || !strings.Contains(s.What, "start")) {
				warming += s.High
			}
		}
		assert.Greater(t, warming, 60.0, "%s: the model's warming steps were found", pool.Name)
		assert.GreaterOrEqual(t, lead.Seconds(), warming, "%s: its default lead covers the modelled %0.f s", pool.Name, warming)
		checked++
	}
	assert.Equal(t, 2, checked, "both dev pools")
}

// A pool's warm windows cost their node-hours at the pool's price, a month being 730/168 weeks.
func TestWarmWindowsArePriced(t *testing.T) {
	pools := `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 2, "maxRunners": 1,
		"warm": {"windows": [{"days": "mon-fri", "from": "08:00", "to": "18:00", "nodes": 2}]}}]`
	r, err := cost.Estimate(testkit.DevConfig(t, "gpuPools", pools), pricing.Default(), defaultUsage)
	require.NoError(t, err)
	e := poolNamed(t, r, "gpu-spot")
	near(t, 5*(10+4.0/60)*2*730.0/168, e.WarmNodeHoursPerMonth, "5 days × (10 h + the 4-min lead) × 2 nodes a week")
	ebs := 100 * pricing.Default().GP3PerGiBMonth / cost.HoursPerMonth
	near(t, e.WarmNodeHoursPerMonth*(e.PerHour+ebs), e.WarmMonthlyUSD, "at the pool's spot price, with its volume")
	near(t, e.BuildUSD*defaultUsage.BuildsPerDay*30+e.WarmMonthlyUSD, e.MonthlyUSD, "on top of its builds")
	assert.Greater(t, comparisonNamed(t, r, "gpu-spot").MonthUSD, r.IdleUSD+e.WarmMonthlyUSD)
	assert.Zero(t, e.WarmOnDemandMonthlyUSD, "a spot-only pool's warm nodes are never on-demand")

	// A pool that falls back to on-demand may hold an on-demand node all window: priced apart.
	fallback := strings.Replace(pools, `"gpuLimit": 2`, `"gpuLimit": 2, "capacityTypes": ["spot", "on-demand"]`, 1)
	r, err = cost.Estimate(testkit.DevConfig(t, "gpuPools", fallback), pricing.Default(), defaultUsage)
	require.NoError(t, err)
	e = poolNamed(t, r, "gpu-spot")
	near(t, e.WarmNodeHoursPerMonth*(0.526+ebs), e.WarmOnDemandMonthlyUSD, "the windows at g4dn.xlarge's on-demand $0.526")
	var out bytes.Buffer
	require.NoError(t, r.WriteTable(&out))
	assert.Contains(t, out.String(), "warm windows on on-demand nodes (spot short at a window's start: the node is kept all window; gpuci doctor flags it)")
}

// A cached image's first pull of a new tag may still cross the NAT (ECR has been seen sending
// an uncached pull to the upstream): priced once per tag, at most its size at the NAT's rate,
// and not at all where there is no NAT.
func TestANewTagsFirstPullIsPricedOnce(t *testing.T) {
	r, err := cost.Estimate(testkit.DevConfig(t), pricing.Default(), defaultUsage)
	require.NoError(t, err)
	assert.Equal(t, []cost.Item{
		{What: "ghcr.io/actions/actions-runner:latest (0.5 GB)", USD: 0.5 * 0.045},
		{What: "nvidia/cuda:12.8.1-devel-ubuntu24.04 (8.0 GB)", USD: 8 * 0.045},
	}, r.NewTagFirstPulls, "each cached image once, whatever the pools that pull it")
	lean, err := cost.Estimate(testkit.DevConfig(t, "natMode", "none"), pricing.Default(), defaultUsage)
	require.NoError(t, err)
	assert.Empty(t, lean.NewTagFirstPulls, "no NAT: data in through the internet gateway is free")
}
