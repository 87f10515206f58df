package cost

import (
	"fmt"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/workflows"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// What a cold GPU node pulls, and how long from a queued job to its first step. Every figure
// is a named constant with its source or its reasoning; an estimate says so. Measure yours
// on a live stack: a NodeClaim's conditions (Launched, Registered, Initialized) carry their
// times, and a pod's events carry each image's "Successfully pulled … in …".

// SmokeJobImage is the container-form smoke job's image: the CUDA image people write jobs
// in, which the smoke workflow gpuci workflows writes runs.
const SmokeJobImage = workflows.SmokeJobImage

// Image sizes as pulled (compressed bytes on the wire, GB).
const (
	// SmokeJobImageGB is the CUDA devel image as the issue that priced it measured a pull
	// (~8 GB): an upper bound for its compressed linux/amd64 layers, so what crosses a NAT
	// costs at most this.
	SmokeJobImageGB = 8.0
	// RunnerImageGB is ghcr.io/actions/actions-runner: an estimate from its Dockerfile's
	// layers (the .NET runtime-deps base, the runner and its Node.js externals, the Docker
	// CLI and buildx, the container hooks). A runner-form node pulls it for the runner; a
	// container-form job pod pulls it for its fs-init container, which copies the runner's
	// externals into the job.
	RunnerImageGB = 0.5
	// DevicePluginImageGB is the NVIDIA device plugin (nvcr.io, which ECR's pull-through
	// cache does not support: it always comes through the NAT), an estimate. Every cold GPU
	// node pulls it before it advertises its GPU.
	DevicePluginImageGB = 0.1
	// UnpackedPerPulled is how much larger an image is on disk than on the wire: gzip of
	// binaries and libraries (a CUDA image is mostly both) saves about half.
	UnpackedPerPulled = 2.0
)

// Span is a modelled duration in seconds: the range its sources put it in, never a point.
// Nothing here is measured on AWS; a live stack's NodeClaim conditions (Launched,
// Registered, Initialized) and pods' "Successfully pulled … in …" events measure yours.
type Span struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Plus adds two spans: the lows and the highs.
func (s Span) Plus(o Span) Span { return Span{s.Low + o.Low, s.High + o.High} }

// String is "95–160 s", or "2 s" for a span of one value.
func (s Span) String() string {
	if fmt.Sprintf("%.0f", s.Low) == fmt.Sprintf("%.0f", s.High) {
		return fmt.Sprintf("%.0f s", s.Low)
	}
	return fmt.Sprintf("%.0f–%.0f s", s.Low, s.High)
}

// Rate is a modelled throughput in MB/s: Slow and Fast bound it.
type Rate struct{ Slow, Fast float64 }

// Rates of the steps of a pull (MB/s).
var (
	// FromECR is an ECR pull in the node's region, layers from S3 through the gateway
	// endpoint. Slow: a cache in the same network measured ~130 MB/s through containerd's
	// fetch (containerd/containerd#8160); fast: S3's ~100 MB/s per connection, three layers
	// at a time (containerd's max_concurrent_downloads default).
	FromECR = Rate{Slow: 130, Fast: 300}
	// FromUpstream is a pull from a public registry over the internet through the NAT
	// gateway: the registry's CDN per connection is the bound. Slow: ~25 MB/s per layer from
	// a registry (containerd/containerd#8160); fast: an estimate. Docker Hub also limits
	// anonymous pulls per source IP, and every node behind one NAT shares its address.
	FromUpstream = Rate{Slow: 25, Fast: 60}
	// Unpack is containerd's default overlayfs unpack: gzip decompression on one core per
	// layer, layers applied in order, each fully before the container can start (the AWS
	// AI-on-EKS guidance, "Accelerating pull process"). Rates of its output; slow: the public
	// figures the review of #52 collected for default containerd (an 8 GB CUDA image in
	// 150–300 s end to end); fast: an estimate of one core's gunzip and write.
	Unpack = Rate{Slow: 70, Fast: 200}
	// InstanceStore is what a node's local NVMe takes of a pull (an AL2023 pool's images
	// are there: config.GPUPool.ImagesOnInstanceStore). AWS publishes only 4-KiB random IOPS
	// for the g4dn, g5 and g6 instance stores (32,500 writes on g4dn, about 20,000 on g5 and
	// g6: 80–130 MB/s at 4 KiB); containerd writes layers sequentially in large blocks, which
	// an NVMe SSD takes several times faster. An estimate; unpacking is the bound either way.
	InstanceStore = Rate{Slow: 300, Fast: 500}
)

// Steps of a start other than a pull (seconds).
var (
	// ARCJobToPod: the scale set's listener holds a long poll on GitHub's broker, hears of
	// the job, and ARC creates the ephemeral runner's pod. An estimate.
	ARCJobToPod = Span{2, 8}
	// RunnerTakesJob: the runner's own start and pickup: its .NET listener starts, opens its
	// session with the JIT config, receives the job message and starts its worker. The
	// review of #52's estimate (3–10 s); the job report's "runner up → job start" measures it.
	RunnerTakesJob = Span{3, 10}
	// IdleRunnerTakesJob: a container-form pool's waiting runner
	// (config.GPUPool.IdleRunners) hears of the job on its own long poll, starts its worker,
	// and its container hooks check their permissions and create the job pod. An estimate.
	IdleRunnerTakesJob = Span{3, 10}
	// KarpenterDecide: Karpenter batches pending pods for 1 s of quiet, at most 10 s (its
	// BATCH_IDLE_DURATION and BATCH_MAX_DURATION defaults), then calls CreateFleet (~1 s).
	KarpenterDecide = Span{2, 11}
	// LaunchToReady: an instance from CreateFleet to a Ready node: boot of the AL2023
	// NVIDIA AMI, the driver loaded, nodeadm configuring kubelet, registration. Karpenter's
	// maintainers measured 28–54 s for CPU types on AL2 (aws/karpenter-provider-aws PR #3827);
	// a GPU AMI loads its driver, and its root volume, restored from the AMI's snapshot, is
	// read from S3 block by block on first access (EBS volume initialization:
	// https://docs.aws.amazon.com/ebs/latest/userguide/initalize-volume.html). An estimate.
	LaunchToReady = Span{60, 110}
	// InstanceStoreRAID: an AL2023 pool's NVMe instance store assembled as RAID0 for
	// containerd and kubelet (instanceStorePolicy RAID0): 6–10 s more per boot, as measured
	// in aws/karpenter-provider-aws PR #3827.
	InstanceStoreRAID = Span{6, 10}
	// DevicePluginRegisters: the device plugin's pod on the new node (its image pulled as
	// DevicePluginImageGB) registers nvidia.com/gpu; only then does the GPU pod fit. An
	// estimate.
	DevicePluginRegisters = Span{5, 15}
	// ContainerStart: kubelet starts a pulled container. An estimate.
	ContainerStart = Span{1, 3}
	// FromSnapshot: an image already on a data volume restored from a snapshot is not
	// pulled; the blocks its container reads are fetched from S3 on first access (EBS
	// volume initialization, as above), slower than a warm volume but only for what the job
	// touches. An estimate; a followed :latest runner released since the snapshot also pulls
	// its new layers, not modelled.
	FromSnapshot = Span{5, 30}
	// Preempt: in a warm window the job's pod finds a placeholder on a warm node; the
	// scheduler nominates the node, deletes the placeholder (its shell exits on SIGTERM at
	// once: k8s.WarmPlaceholder) and binds the pod on its next attempt. make e2e binds one in
	// about 2 s through the real scheduler; the range is an estimate.
	Preempt = Span{1, 4}
	// SpotRefused: EC2 refuses the spot launch (InsufficientInstanceCapacity); Karpenter
	// deletes the NodeClaim, remembers the offering for 3 minutes, and makes a new one on
	// its next pass, the pod requeued after 10 s and batched for 1–10 s
	// (sigs.k8s.io/karpenter v1.14.1 nodeclaim/lifecycle/launch.go; karpenter-provider-aws
	// pkg/cache UnavailableOfferingsTTL). Once no spot offering of the pool is left, it
	// launches on-demand. One refused round (a pool of one type in two zones may take two).
	SpotRefused = Span{11, 21}
)

// PrepareJobWaitSeconds is how long the container form's hooks wait for the job pod to run
// before they fail the job: the stack sets it (wellknown.PrepareJobTimeoutSeconds); the
// hooks' own default would be 600 s (runner-container-hooks v0.8.1,
// packages/k8s/src/k8s/index.ts, DEFAULT_WAIT_FOR_POD_TIME_SECONDS).
const PrepareJobWaitSeconds = float64(wellknown.PrepareJobTimeoutSeconds)

// PulledImage is an image a cold GPU node pulls for a pool's job.
type PulledImage struct {
	Image string  `json:"image"`
	GB    float64 `json:"gb"`
	// Cached: its registry has an image cache rule, so it comes from ECR in the region.
	Cached bool `json:"cached"`
	// FromSnapshot: the pool's data volume is restored from a snapshot that holds it
	// (config.GPUPool.ImageSnapshotID), so a cold node does not pull it.
	FromSnapshot bool `json:"fromSnapshot,omitempty"`
}

// PulledImages are what a cold GPU node of the pool pulls for a job, in order: the device
// plugin's, then the runner form's runner, or the container form's fs-init (the runner
// image) and the job's image (jobImageGB of it; the smoke job's CUDA image by default).
//
// A pool whose images come from a snapshot runs Bottlerocket: its own device plugin (no
// image), and the runner's and the job's images on the restored data volume.
func PulledImages(cfg *config.Config, pool config.GPUPool, jobImageGB float64) []PulledImage {
	fromSnapshot := pool.NodeOS() == config.NodeOSBottlerocket
	var images []PulledImage
	if !fromSnapshot {
		images = append(images, PulledImage{Image: versions.NvidiaDevicePluginImage, GB: DevicePluginImageGB})
	}
	images = append(images, PulledImage{Image: pool.RunnerImage, GB: RunnerImageGB, FromSnapshot: fromSnapshot})
	if pool.JobForm == config.JobFormContainer {
		images = append(images, PulledImage{Image: SmokeJobImage, GB: jobImageGB, FromSnapshot: fromSnapshot})
	}
	for i := range images {
		images[i].Cached = cfg.ImageCache.Caches(images[i].Image)
	}
	return images
}

// SnapshotGB is what a snapshot of a data volume holding these images stores: containerd
// keeps each image's compressed layers and its unpacked files (UnpackedPerPulled).
func SnapshotGB(images []PulledImage) float64 {
	gb := 0.0
	for _, img := range images {
		if img.FromSnapshot {
			gb += img.GB * (1 + UnpackedPerPulled)
		}
	}
	return gb
}

// Step is one part of a start, modelled.
type Step struct {
	What string `json:"what"`
	Span
}

// ColdStart is the time from a queued job to its first step, modelled step by step.
type ColdStart struct {
	Pool  string `json:"pool"`
	Steps []Step `json:"steps"`
	// Span is the whole: the steps' lows and highs added (the steps follow one another).
	Span
	// NodeUp is the part of it the node exists for (from its launch on): what a cold start
	// adds to the node's bill.
	NodeUp Span `json:"nodeUp"`
	// PrepareJobMargin is, for the container form, what is left of the hooks' wait for the
	// job pod (PrepareJobWaitSeconds) once the node is up and the images pulled: Low at the
	// model's slowest, High at its fastest; below zero, the job fails before it starts.
	PrepareJobMargin *Span `json:"prepareJobMargin,omitempty"`
}

// add appends a step.
func (cs *ColdStart) add(what string, s Span) { cs.Steps = append(cs.Steps, Step{what, s}) }

// total adds the steps up; the node's share from step launch on (len(Steps): none).
func (cs *ColdStart) total(launch int) {
	cs.Span, cs.NodeUp = Span{}, Span{}
	for i, s := range cs.Steps {
		cs.Span = cs.Span.Plus(s.Span)
		if i >= launch {
			cs.NodeUp = cs.NodeUp.Plus(s.Span)
		}
	}
}

// PullSeconds is how long a pull of gb takes onto a disk that writes disk MB/s: the
// download (from ECR in the region, or over the internet), then the slower of unpacking and
// writing (the disk takes the compressed layers and the unpacked files). Low at every
// rate's fast end, High at its slow end.
func PullSeconds(gb float64, fromECR bool, disk Rate) Span {
	source := FromUpstream
	if fromECR {
		source = FromECR
	}
	mb := gb * 1000
	at := func(src, unpack, disk float64) float64 {
		return mb/src + max(mb*UnpackedPerPulled/unpack, mb*(1+UnpackedPerPulled)/disk)
	}
	return Span{at(source.Fast, Unpack.Fast, disk.Fast), at(source.Slow, Unpack.Slow, disk.Slow)}
}

// ImageDisk is where a pool's node writes the images it pulls, and how fast: the
// instance's NVMe (an AL2023 pool), or its gp3 volume at the pool's rootVolumeThroughput
// (MiB/s, which gp3 provisions: one rate).
func ImageDisk(pool config.GPUPool) (string, Rate) {
	if pool.ImagesOnInstanceStore() {
		return "the instance's NVMe", InstanceStore
	}
	mbps := float64(pool.RootVolumeThroughput) * 1.048576
	return fmt.Sprintf("%d MiB/s gp3", pool.RootVolumeThroughput), Rate{mbps, mbps}
}

// addRunnerSteps adds what happens before the job's GPU pod exists: ARC makes the runner's
// pod, unless a container-form runner waits for the job on a system node; a container-form
// runner's hooks then create the job pod.
func (cs *ColdStart) addRunnerSteps(pool config.GPUPool) {
	switch {
	case pool.JobForm != config.JobFormContainer:
		cs.add("ARC: job → runner pod", ARCJobToPod)
	case pool.IdleRunners() > 0:
		cs.add("the runner waiting on a system node takes the job, its hooks create the job pod", IdleRunnerTakesJob)
	default:
		cs.add("ARC: job → runner pod", ARCJobToPod)
		cs.add("runner on a system node starts and takes the job, the hooks create the job pod", ContainerStart.Plus(RunnerTakesJob))
	}
}

// addJobStarts adds the last steps on the GPU node: the container form's fs-init (the
// runner image) copies the runner's externals, then the job's container starts and the hooks
// run its first step; the runner form's runner starts and takes its job.
func (cs *ColdStart) addJobStarts(pool config.GPUPool, warm bool) {
	start := "container start"
	if warm {
		start += " (its image already on the node)"
	}
	if pool.JobForm == config.JobFormContainer {
		cs.add("fs-init (the runner image, on the node) copies the runner's externals", ContainerStart)
		cs.add(start, ContainerStart)
		return
	}
	cs.add(start, ContainerStart)
	cs.add("the runner starts and takes its job", RunnerTakesJob)
}

// WarmStartOf models a job's start on a warm node (config.GPUPool's warm windows): no node
// to launch, no image to pull; the job's pod preempts a placeholder.
func WarmStartOf(pool config.GPUPool) ColdStart {
	cs := ColdStart{Pool: pool.Name}
	cs.addRunnerSteps(pool)
	cs.add("the scheduler preempts a placeholder on a warm node and binds the pod", Preempt)
	cs.addJobStarts(pool, true)
	cs.total(len(cs.Steps))
	return cs
}

// SpotShortStartOf is a cold start when EC2 has no spot capacity of the pool's types and the
// pool falls back to on-demand (both in its capacityTypes): one refused round more; nil for a
// pool that cannot fall back (its jobs wait until spot returns).
func SpotShortStartOf(pool config.GPUPool, images []PulledImage) *ColdStart {
	if !pool.Allows(config.CapacitySpot) || !pool.Allows(config.CapacityOnDemand) {
		return nil
	}
	cs := ColdStartOf(pool, images)
	launch := len(cs.Steps) - len(cs.nodeSteps())
	short := ColdStart{Pool: cs.Pool}
	short.Steps = append(short.Steps, cs.Steps[:launch]...)
	short.add("spot refused (InsufficientInstanceCapacity): Karpenter's next pass launches on-demand", SpotRefused)
	short.Steps = append(short.Steps, cs.Steps[launch:]...)
	short.total(launch + 1)
	if m := cs.PrepareJobMargin; m != nil {
		short.PrepareJobMargin = &Span{m.Low - SpotRefused.High, m.High - SpotRefused.Low}
	}
	return &short
}

// nodeSteps are the steps from the instance's launch on.
func (cs *ColdStart) nodeSteps() []Step {
	for i, s := range cs.Steps {
		if s.What == launchStep {
			return cs.Steps[i:]
		}
	}
	return nil
}

const launchStep = "instance launch → node Ready"

// ColdStartOf models a pool's cold start, step by step.
func ColdStartOf(pool config.GPUPool, images []PulledImage) ColdStart {
	cs := ColdStart{Pool: pool.Name}
	cs.addRunnerSteps(pool)
	waitFrom := len(cs.Steps) // the hooks' wait starts once the job pod exists
	cs.add("Karpenter: batch, CreateFleet", KarpenterDecide)
	launch := len(cs.Steps)
	cs.add(launchStep, LaunchToReady)
	if pool.ImagesOnInstanceStore() {
		cs.add("the instance store's NVMe assembled as RAID0 for containerd", InstanceStoreRAID)
	}
	if pool.NodeOS() == config.NodeOSBottlerocket {
		cs.add("Bottlerocket's device plugin registers the GPU", DevicePluginRegisters)
	}
	for _, img := range images {
		if img.FromSnapshot {
			cs.add(fmt.Sprintf("%s (%.1f GB) on the data volume from %s, read on first access", img.Image, img.GB, pool.ImageSnapshotID), FromSnapshot)
			continue
		}
		where := "over the internet, through the NAT"
		if img.Cached {
			where = "from the ECR cache"
		}
		disk, rate := ImageDisk(pool)
		cs.add(fmt.Sprintf("pull %s (%.1f GB, %s, onto %s)", img.Image, img.GB, where, disk), PullSeconds(img.GB, img.Cached, rate))
		if img.Image == versions.NvidiaDevicePluginImage {
			cs.add("device plugin registers the GPU", DevicePluginRegisters)
		}
	}
	cs.addJobStarts(pool, false)
	cs.total(launch)
	if pool.JobForm == config.JobFormContainer {
		waited := Span{}
		for _, s := range cs.Steps[waitFrom:] {
			waited = waited.Plus(s.Span)
		}
		cs.PrepareJobMargin = &Span{PrepareJobWaitSeconds - waited.High, PrepareJobWaitSeconds - waited.Low}
	}
	return cs
}
