// Package cost is `gpuci cost`: what a stack costs idle, per build and per month, from its
// configuration and a price table, compared with GitHub's hosted T4 runner.
package cost

import (
	"fmt"
	"github.com/luxfi/lux-gpu-ci/pricing"

	"github.com/luxfi/lux-gpu-ci/config"
)

// HoursPerMonth is AWS's billing month.
const HoursPerMonth = 730

// WeeksPerMonth turns a week's warm node-hours into a month's (HoursPerMonth / 168).
const WeeksPerMonth = HoursPerMonth / (7 * 24.0)

// DefaultInterruptionRate is the share of builds gpuci cost assumes a spot interruption
// re-runs: 5 %, deliberately high. AWS's Spot Instance Advisor puts g4dn in us-west-2 in its
// ">20 %" band, a monthly figure for instances that live for weeks; a GPU node here lives for
// one build's minutes, so the share of builds hit is far lower. Measure yours (gpuci doctor
// lists interruptions) and pass --interruption-rate.
const DefaultInterruptionRate = 0.05

// Usage describes the CI load.
type Usage struct {
	BuildsPerDay    float64 `json:"buildsPerDay"`
	MinutesPerBuild float64 `json:"minutesPerBuild"`
	// BootMinutes is how long a cold node runs before the job's first step (launch, join,
	// image pulls); below zero, each pool's own cold-start model from the launch on, at its
	// slow end (ColdStartOf: ColdStart.NodeUp.High).
	BootMinutes float64 `json:"bootMinutes"`
	// JobImageGB is the container form's job image (its `container:`), as pulled; below
	// zero, the smoke workflow's CUDA image (SmokeJobImageGB). Through a NAT gateway a pull
	// costs NATPerGB; from the image cache, nothing.
	JobImageGB float64 `json:"jobImageGB"`
	// ColdStarts is the share of builds that start a new node (1: every build, idle between).
	ColdStarts float64 `json:"coldStarts"`
	// InterruptionRate is the share of a pool's builds a spot interruption sends to its
	// on-demand retry twin (gpuci doctor lists the interruptions a cluster has seen).
	InterruptionRate float64 `json:"interruptionRate"`
}

// Item is one line of a bill.
type Item struct {
	What string  `json:"what"`
	USD  float64 `json:"usd"`
}

// PoolEstimate is what one GPU pool costs.
type PoolEstimate struct {
	Pool         string  `json:"pool"`
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	PerHour      float64 `json:"instancePerHour"`
	NodeMinutes  float64 `json:"nodeMinutesPerBuild"`
	PerBuild     []Item  `json:"perBuild"`
	BuildUSD     float64 `json:"perBuildUSD"`
	MonthlyUSD   float64 `json:"monthlyUSD"`
	// Images are what a cold node of the pool pulls; ColdStart how long until the job runs.
	Images    []PulledImage `json:"images"`
	ColdStart ColdStart     `json:"coldStart"`
	// WarmStart is a job's start on a warm node (in a warm window, or on a node a job just
	// left); SpotShortStart a cold start when spot is short and the pool falls back (nil: it
	// cannot, and its jobs wait for spot).
	WarmStart      ColdStart  `json:"warmStart"`
	SpotShortStart *ColdStart `json:"spotShortStart,omitempty"`
	// WarmNodeHoursPerMonth are the node-hours the pool's warm windows keep up, and
	// WarmMonthlyUSD what they cost (in the pool's month).
	WarmNodeHoursPerMonth float64 `json:"warmNodeHoursPerMonth,omitempty"`
	WarmMonthlyUSD        float64 `json:"warmMonthlyUSD,omitempty"`
	// WarmOnDemandMonthlyUSD is what the windows cost if their nodes are on-demand (a pool
	// that allows it falls back when spot is short, and keeps that node for the whole window:
	// a warm node is never empty, and Karpenter replaces a node for a cheaper one only under
	// WhenEmptyOrUnderutilized, never under the pools' WhenEmpty).
	WarmOnDemandMonthlyUSD float64 `json:"warmOnDemandMonthlyUSD,omitempty"`
	// OnDemandBuildUSD is the per-build cost if spot is short and the pool falls back.
	OnDemandBuildUSD float64 `json:"onDemandPerBuildUSD,omitempty"`
	// RetryTwinOf names the pool whose interrupted builds this twin re-runs; its month
	// counts only those (Usage.InterruptionRate of the builds).
	RetryTwinOf string `json:"retryTwinOf,omitempty"`
}

// Report is the whole estimate.
type Report struct {
	Prices    string         `json:"prices"`
	Usage     Usage          `json:"usage"`
	Idle      []Item         `json:"idleMonthly"`
	IdleUSD   float64        `json:"idleMonthlyUSD"`
	Pools     []PoolEstimate `json:"pools"`
	HostedUSD float64        `json:"githubHostedT4PerBuildUSD"`
	// Comparisons put each pool (with its retry twin) against GitHub's hosted T4 runner.
	Comparisons []Comparison `json:"comparisons"`
	// NewTagFirstPulls price, once per new tag of each cached image, a first pull that ECR
	// sends to the upstream registry instead of serving it (it has been seen redirecting an
	// uncached pull to the upstream's CDN: aws/containers-roadmap#2304, #939), so that it
	// crosses the NAT: at most the image's size at NATPerGB. Not in any month above.
	NewTagFirstPulls []Item `json:"newTagFirstPullsAtMost,omitempty"`
}

// Comparison is one pool running every build, against GitHub's hosted T4 runner.
type Comparison struct {
	Pool string `json:"pool"`
	// Times is how many times cheaper a build is here (GitHub's per build / the pool's).
	Times float64 `json:"timesCheaperPerBuild"`
	// MonthUSD is the idle month plus the pool's builds (and its twin's re-runs).
	MonthUSD       float64 `json:"monthUSD"`
	HostedMonthUSD float64 `json:"githubHostedMonthUSD"`
	// BreakEvenBuilds is the builds per month above which self-hosting is cheaper (0: never).
	BreakEvenBuilds float64 `json:"breakEvenBuildsPerMonth"`
}

// Estimate prices a stack's configuration for a usage.
func Estimate(cfg *config.Config, p pricing.Prices, u Usage) (Report, error) {
	r := Report{Prices: p.Source, Usage: u}
	system, ok := p.OnDemand[cfg.SystemNodes.InstanceType]
	if !ok {
		return r, fmt.Errorf("no on-demand price for the system node type %s (add it with --prices)", cfg.SystemNodes.InstanceType)
	}
	n := float64(cfg.SystemNodes.Count)
	r.Idle = append(r.Idle,
		Item{"EKS control plane", p.EKSControlPlane * HoursPerMonth},
		Item{fmt.Sprintf("%d × %s system node", cfg.SystemNodes.Count, cfg.SystemNodes.InstanceType), n * system * HoursPerMonth},
		Item{fmt.Sprintf("%d × %.0f GiB gp3 system root volume", cfg.SystemNodes.Count, p.SystemRootVolumeGi), n * p.SystemRootVolumeGi * p.GP3PerGiBMonth},
	)
	nat := cfg.Network.NatMode == config.NatSingle
	if nat {
		r.Idle = append(r.Idle, Item{"NAT gateway hours and its public IPv4", (p.NATGateway + p.PublicIPv4) * HoursPerMonth})
	} else {
		// The lean profile has no NAT: every node has a public IPv4 address instead.
		r.Idle = append(r.Idle, Item{fmt.Sprintf("%d × public IPv4 of the system nodes (no NAT)", cfg.SystemNodes.Count), n * p.PublicIPv4 * HoursPerMonth})
	}
	if u.JobImageGB < 0 {
		u.JobImageGB = SmokeJobImageGB
		r.Usage.JobImageGB = u.JobImageGB
	}
	if gb := cachedGB(cfg, u); gb > 0 {
		r.Idle = append(r.Idle, Item{fmt.Sprintf("ECR image cache: %.1f GB of cached images", gb), gb * p.ECRStoragePerGBMonth})
	}
	r.Idle = append(r.Idle, snapshots(cfg, u, p)...)
	r.Idle = append(r.Idle, compilerCache(cfg, u, p)...)
	for _, it := range r.Idle {
		r.IdleUSD += it.USD
	}

	if nat {
		seen := map[string]bool{}
		for _, pool := range cfg.Pools() {
			for _, img := range PulledImages(cfg, pool, u.JobImageGB) {
				if img.Cached && !seen[img.Image] {
					seen[img.Image] = true
					r.NewTagFirstPulls = append(r.NewTagFirstPulls, Item{fmt.Sprintf("%s (%.1f GB)", img.Image, img.GB), img.GB * p.NATPerGB})
				}
			}
		}
	}
	r.HostedUSD = u.MinutesPerBuild * p.HostedT4PerMinute
	for _, pool := range cfg.Pools() {
		e, err := estimatePool(cfg, pool, p, u, nat)
		if err != nil {
			return r, err
		}
		r.Pools = append(r.Pools, e)
	}
	for _, e := range r.Pools {
		if e.RetryTwinOf != "" {
			continue
		}
		c := Comparison{Pool: e.Pool, Times: r.HostedUSD / e.BuildUSD, MonthUSD: r.IdleUSD + e.MonthlyUSD, HostedMonthUSD: r.HostedUSD * u.BuildsPerDay * 30}
		for _, twin := range r.Pools {
			if twin.RetryTwinOf == e.Pool {
				c.MonthUSD += twin.MonthlyUSD
			}
		}
		if r.HostedUSD > e.BuildUSD {
			c.BreakEvenBuilds = r.IdleUSD / (r.HostedUSD - e.BuildUSD)
		}
		r.Comparisons = append(r.Comparisons, c)
	}
	return r, nil
}

// The compiler cache's model (a model: measure yours with the bucket's metrics). A read-write
// pool's prefix holds CompilerCacheGBPerPrefix of objects; a build runs
// CompilationsPerBuild compilations through ccache, each two reads of the server (a manifest
// and a result), which the server answers from S3 when its disk does not hold them
// (CompilerCacheDiskMissShare of them), and writes what missed (CompilerCacheMissShare) once.
const (
	CompilerCacheGBPerPrefix   = 2.0
	CompilationsPerBuild       = 200.0
	CompilerCacheDiskMissShare = 0.5
	CompilerCacheMissShare     = 0.1
)

// compilerCache prices the compiler cache's bucket: its storage, and a month's requests.
func compilerCache(cfg *config.Config, u Usage, p pricing.Prices) []Item {
	prefixes := map[string]bool{}
	for _, s := range cfg.CompilerCaches() {
		prefixes[s.Prefix] = true
	}
	if len(prefixes) == 0 {
		return nil
	}
	gb := CompilerCacheGBPerPrefix * float64(len(prefixes))
	perMonth := u.BuildsPerDay * 30 * CompilationsPerBuild
	gets := perMonth * 2 * CompilerCacheDiskMissShare
	puts := perMonth * 2 * CompilerCacheMissShare
	return []Item{
		{fmt.Sprintf("compiler cache bucket: %.0f GB (a model: %.0f GB per read-write pool)", gb, CompilerCacheGBPerPrefix), gb * p.S3PerGBMonth},
		{fmt.Sprintf("compiler cache requests: %.0fk GET, %.0fk PUT (a model: %.0f compilations a build)", gets/1000, puts/1000, CompilationsPerBuild),
			gets/1000*p.S3GetPer1000 + puts/1000*p.S3PutPer1000},
	}
}

// cachedGB is what the image cache stores: each distinct cached image the pools pull, once
// (ECR keeps a few versions of a changing tag; a new version shares most layers).
func cachedGB(cfg *config.Config, u Usage) float64 {
	seen, gb := map[string]bool{}, 0.0
	for _, pool := range cfg.Pools() {
		for _, img := range PulledImages(cfg, pool, u.JobImageGB) {
			if img.Cached && !seen[img.Image] {
				seen[img.Image] = true
				gb += img.GB
			}
		}
	}
	return gb
}

// snapshots price each image snapshot the pools use, once (a retry twin shares its pool's).
func snapshots(cfg *config.Config, u Usage, p pricing.Prices) []Item {
	var items []Item
	seen := map[string]bool{}
	for _, pool := range cfg.Pools() {
		if pool.ImageSnapshotID == "" || seen[pool.ImageSnapshotID] {
			continue
		}
		seen[pool.ImageSnapshotID] = true
		gb := SnapshotGB(PulledImages(cfg, pool, u.JobImageGB))
		items = append(items, Item{fmt.Sprintf("EBS snapshot %s: %.1f GB of images, unpacked", pool.ImageSnapshotID, gb), gb * p.SnapshotPerGBMonth})
	}
	return items
}

// estimatePool prices a build on the pool's cheapest instance type: Karpenter launches the
// cheapest type that fits, preferring spot when the pool allows it.
func estimatePool(cfg *config.Config, pool config.GPUPool, p pricing.Prices, u Usage, nat bool) (PoolEstimate, error) {
	e := PoolEstimate{Pool: pool.Name}
	if u.InterruptionRate < 0 || u.InterruptionRate > 1 {
		return e, fmt.Errorf("--interruption-rate %v is not a share of builds: give one from 0 to 1", u.InterruptionRate)
	}
	var err error
	if e.InstanceType, e.CapacityType, e.PerHour, err = pricing.HourlyPrice(pool, p); err != nil {
		return e, err
	}
	capacity := e.CapacityType
	warm := pool.ConsolidateAfter.Std().Minutes()
	e.Images = PulledImages(cfg, pool, u.JobImageGB)
	e.ColdStart = ColdStartOf(pool, e.Images)
	e.WarmStart = WarmStartOf(pool)
	e.SpotShortStart = SpotShortStartOf(pool, e.Images)
	boot := u.BootMinutes
	if boot < 0 {
		// The node is billed from its launch: the model's slow end of that part, so the
		// model's optimism never lowers a cost.
		boot = e.ColdStart.NodeUp.High / 60
	}
	// A node runs for the job, plus (for a cold start) its boot, plus the warm window after.
	e.NodeMinutes = u.MinutesPerBuild + u.ColdStarts*(boot+warm)
	hours := e.NodeMinutes / 60
	ebsPerHour := float64(pool.RootVolumeGi) * p.GP3PerGiBMonth / HoursPerMonth
	e.PerBuild = []Item{
		{fmt.Sprintf("%s %s, %.1f node-minutes", e.InstanceType, capacity, e.NodeMinutes), hours * e.PerHour},
		{fmt.Sprintf("%d GiB gp3 root volume", pool.RootVolumeGi), hours * ebsPerHour},
	}
	if extra := float64(pool.RootVolumeThroughput-config.GP3BaselineThroughput)*p.GP3ThroughputPerMiBsMonth + float64(pool.RootVolumeIOPS-config.GP3BaselineIOPS)*p.GP3IOPSPerMonth; extra > 0 {
		e.PerBuild = append(e.PerBuild, Item{fmt.Sprintf("root volume at %d MiB/s, %d IOPS (above gp3's baseline)", pool.RootVolumeThroughput, pool.RootVolumeIOPS), hours * extra / HoursPerMonth})
	}
	e.PerBuild = append(e.PerBuild, imagePath(e.Images, u.ColdStarts, p, nat)...)
	if !nat {
		e.PerBuild = append(e.PerBuild, Item{"the GPU node's public IPv4 (no NAT)", hours * p.PublicIPv4})
	}
	for _, it := range e.PerBuild {
		e.BuildUSD += it.USD
	}
	e.MonthlyUSD = e.BuildUSD * u.BuildsPerDay * 30
	// A warm window's nodes run whether or not a job comes (a job on one is already priced
	// above; counting its minutes twice errs toward the higher figure).
	if w := pool.Warm.NodeHoursPerWeek(); w > 0 {
		e.WarmNodeHoursPerMonth = w * WeeksPerMonth
		e.WarmMonthlyUSD = e.WarmNodeHoursPerMonth * (e.PerHour + ebsPerHour)
		e.MonthlyUSD += e.WarmMonthlyUSD
		if od, ok := p.OnDemand[e.InstanceType]; ok && capacity == "spot" && pool.Allows(config.CapacityOnDemand) {
			e.WarmOnDemandMonthlyUSD = e.WarmNodeHoursPerMonth * (od + ebsPerHour)
		}
	}
	if pool.RetryTwinOf != "" {
		e.RetryTwinOf = pool.RetryTwinOf
		e.MonthlyUSD *= u.InterruptionRate
	}
	if capacity == "spot" && pool.Allows(config.CapacityOnDemand) {
		if od, ok := p.OnDemand[e.InstanceType]; ok {
			e.OnDemandBuildUSD = e.BuildUSD - hours*e.PerHour + hours*od
		}
	}
	return e, nil
}

// imagePath prices the images a cold node needs, by the way they come: on a data volume
// restored from a snapshot (its storage is an idle cost), from the ECR cache
// (S3 through the gateway endpoint, free), over the internet through the NAT ($/GB), or
// through the internet gateway of the lean profile (free: AWS charges no data in).
func imagePath(images []PulledImage, coldStarts float64, p pricing.Prices, nat bool) []Item {
	var snapshotGB, cachedGB, natGB, igwGB float64
	for _, img := range images {
		switch {
		case img.FromSnapshot:
			snapshotGB += img.GB * coldStarts
		case img.Cached:
			cachedGB += img.GB * coldStarts
		case nat:
			natGB += img.GB * coldStarts
		default:
			igwGB += img.GB * coldStarts
		}
	}
	var items []Item
	if snapshotGB > 0 {
		items = append(items, Item{fmt.Sprintf("%.1f GB of images on the data volume from its snapshot (no pull)", snapshotGB), 0})
	}
	if cachedGB > 0 {
		items = append(items, Item{fmt.Sprintf("%.1f GB of images from the ECR cache (S3 gateway endpoint)", cachedGB), 0})
	}
	if natGB > 0 {
		items = append(items, Item{fmt.Sprintf("%.1f GB of images through the NAT", natGB), natGB * p.NATPerGB})
	}
	if igwGB > 0 {
		items = append(items, Item{fmt.Sprintf("%.1f GB of images through the internet gateway", igwGB), 0})
	}
	return items
}
