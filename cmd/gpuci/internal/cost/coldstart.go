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

// Rates of the steps of a pull (MB/s).
const (
	// FromECRMBps is an ECR pull in the node's region, layers from S3 through the gateway
	// endpoint: S3 serves ~100 MB/s per connection and containerd fetches three layers at a
	// time (its max_concurrent_downloads default). An estimate.
	FromECRMBps = 300.0
	// FromUpstreamMBps is a pull from a public registry over the internet through the NAT
	// gateway (which itself scales to tens of Gbps): the registry's CDN per connection is the
	// bound. An estimate; Docker Hub also limits anonymous pulls per source IP, and every
	// node behind one NAT shares its address.
	FromUpstreamMBps = 60.0
	// UnpackMBps is gzip decompression in containerd, one core per layer, layers applied in
	// order (each on top of the last): an estimate of its output rate.
	UnpackMBps = 200.0
	// InstanceStoreMBps is what a node's local NVMe takes of a pull (an AL2023 pool's images
	// are there: config.GPUPool.ImagesOnInstanceStore): an estimate. AWS publishes only 4-KiB
	// random IOPS for the g4dn, g5 and g6 instance stores (32,500 writes on g4dn, about
	// 20,000 on g5 and g6: 80–130 MB/s at 4 KiB); containerd writes layers sequentially in
	// large blocks, which an NVMe SSD takes several times faster. Past 300 MB/s, unpacking
	// (UnpackMBps) is the bound either way.
	InstanceStoreMBps = 500.0
)

// Steps of a cold start before the pull (seconds).
const (
	// ARCJobToPodSeconds: the scale set's listener holds a long poll on GitHub's broker,
	// hears of the job at once, and ARC creates the ephemeral runner's pod. An estimate.
	ARCJobToPodSeconds = 5.0
	// IdleRunnerTakesJobSeconds: a container-form pool's waiting runner
	// (config.GPUPool.IdleRunners) hears of the job on its own long poll, starts its worker,
	// and its container hooks check their permissions and create the job pod. An estimate.
	IdleRunnerTakesJobSeconds = 5.0
	// KarpenterDecideSeconds: Karpenter batches pending pods for 1 s of quiet (at most 10 s:
	// its BATCH_IDLE_DURATION and BATCH_MAX_DURATION defaults), then calls CreateFleet.
	KarpenterDecideSeconds = 5.0
	// LaunchToReadySeconds: a spot instance from CreateFleet to a Ready node: boot of the
	// AL2023 NVIDIA AMI, the driver loaded, nodeadm configuring kubelet, registration. An
	// estimate; the NodeClaim's Launched and Registered conditions measure it.
	LaunchToReadySeconds = 75.0
	// DevicePluginSeconds: the device plugin's pod started on the new node (its image pulled
	// as DevicePluginImageGB) registers nvidia.com/gpu; only then does the GPU pod fit.
	DevicePluginSeconds = 10.0
	// StartSeconds: kubelet starts a pulled container.
	StartSeconds = 2.0
	// FromSnapshotSeconds: an image already on a data volume restored from a snapshot is not
	// pulled; the blocks its container reads are fetched from S3 on first access (EBS
	// "volume initialization": https://docs.aws.amazon.com/ebs/latest/userguide/initalize-volume.html),
	// slower than a warm volume but only for what the job touches. An estimate; a followed
	// :latest runner released since the snapshot also pulls its new layers, not modelled.
	FromSnapshotSeconds = 10.0
	// PreemptSeconds: in a warm window the job's pod finds a placeholder on a warm node; the
	// scheduler nominates the node, deletes the placeholder (its shell exits on SIGTERM at
	// once: k8s.WarmPlaceholder) and binds the pod on its next attempt. An estimate; make e2e
	// prints the time from a job pod's creation to its binding on a warm node.
	PreemptSeconds = 2.0
	// SpotRefusedSeconds: EC2 refuses the spot launch (InsufficientInstanceCapacity);
	// Karpenter deletes the NodeClaim, remembers the offering for 3 minutes, and makes a new
	// one on its next pass, the pod requeued after 10 s and batched for 1–10 s
	// (sigs.k8s.io/karpenter v1.14.1 nodeclaim/lifecycle/launch.go; karpenter-provider-aws
	// pkg/cache UnavailableOfferingsTTL). Once no spot offering of the pool is left, it
	// launches on-demand. An estimate for one refused round (a pool of one type in two zones
	// may take two).
	SpotRefusedSeconds = 15.0
	// PrepareJobWaitSeconds is how long the container form's hooks wait for the job pod to
	// run before they fail the job: the stack sets it (wellknown.PrepareJobTimeoutSeconds);
	// the hooks' own default would be 600 s (runner-container-hooks v0.8.1,
	// packages/k8s/src/k8s/index.ts, DEFAULT_WAIT_FOR_POD_TIME_SECONDS).
	PrepareJobWaitSeconds = float64(wellknown.PrepareJobTimeoutSeconds)
)

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

// Step is one part of a cold start.
type Step struct {
	What    string  `json:"what"`
	Seconds float64 `json:"seconds"`
}

// ColdStart is the time from a queued job to its first step on a new GPU node.
type ColdStart struct {
	Pool    string  `json:"pool"`
	Steps   []Step  `json:"steps"`
	Seconds float64 `json:"seconds"`
	// PrepareJobMarginSeconds is, for the container form, what is left of the hooks' wait
	// for the job pod (PrepareJobWaitSeconds) once the node is up and the images pulled;
	// negative, the job fails before it starts.
	PrepareJobMarginSeconds *float64 `json:"prepareJobMarginSeconds,omitempty"`
}

// PullSeconds is how long a pull of gb takes onto a disk that writes diskMBps: the download
// (from ECR in the region, or over the internet), then the slower of unpacking and writing
// (the disk takes the compressed layers and the unpacked files).
func PullSeconds(gb float64, fromECR bool, diskMBps float64) float64 {
	source := FromUpstreamMBps
	if fromECR {
		source = FromECRMBps
	}
	mb := gb * 1000
	return mb/source + max(mb*UnpackedPerPulled/UnpackMBps, mb*(1+UnpackedPerPulled)/diskMBps)
}

// ImageDisk is where a pool's node writes the images it pulls, and how fast (MB/s): the
// instance's NVMe (an AL2023 pool), or its gp3 volume at the pool's rootVolumeThroughput
// (MiB/s).
func ImageDisk(pool config.GPUPool) (string, float64) {
	if pool.ImagesOnInstanceStore() {
		return "the instance's NVMe", InstanceStoreMBps
	}
	return fmt.Sprintf("%d MiB/s gp3", pool.RootVolumeThroughput), float64(pool.RootVolumeThroughput) * 1.048576
}

// addRunnerSteps adds what happens before the job's GPU pod exists: ARC makes the runner's
// pod, unless a container-form runner waits for the job on a system node; a container-form
// runner's hooks then create the job pod.
func addRunnerSteps(pool config.GPUPool, add func(string, float64)) {
	switch {
	case pool.JobForm != config.JobFormContainer:
		add("ARC: job → runner pod", ARCJobToPodSeconds)
	case pool.IdleRunners() > 0:
		add("the runner waiting on a system node takes the job, its hooks create the job pod", IdleRunnerTakesJobSeconds)
	default:
		add("ARC: job → runner pod", ARCJobToPodSeconds)
		add("runner on a system node starts, the hooks create the job pod", StartSeconds+ARCJobToPodSeconds)
	}
}

// WarmStartOf estimates a job's start on a warm node (config.GPUPool's warm windows): no
// node to launch, no image to pull; the job's pod preempts a placeholder.
func WarmStartOf(pool config.GPUPool) ColdStart {
	cs := ColdStart{Pool: pool.Name}
	add := func(what string, s float64) { cs.Steps = append(cs.Steps, Step{what, s}) }
	addRunnerSteps(pool, add)
	add("the scheduler preempts a placeholder on a warm node and binds the pod", PreemptSeconds)
	if pool.JobForm == config.JobFormContainer {
		add("fs-init (the runner image, on the node) copies the runner's externals", StartSeconds)
	}
	add("container start (its image already on the node)", StartSeconds)
	for _, s := range cs.Steps {
		cs.Seconds += s.Seconds
	}
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
	short := ColdStart{Pool: cs.Pool, Steps: append([]Step{}, cs.Steps[0])}
	short.Steps = append(short.Steps, Step{"spot refused (InsufficientInstanceCapacity): Karpenter's next pass launches on-demand", SpotRefusedSeconds})
	short.Steps = append(short.Steps, cs.Steps[1:]...)
	for _, s := range short.Steps {
		short.Seconds += s.Seconds
	}
	if cs.PrepareJobMarginSeconds != nil {
		m := *cs.PrepareJobMarginSeconds - SpotRefusedSeconds
		short.PrepareJobMarginSeconds = &m
	}
	return &short
}

// ColdStartOf estimates a pool's cold start, step by step.
func ColdStartOf(pool config.GPUPool, images []PulledImage) ColdStart {
	cs := ColdStart{Pool: pool.Name}
	add := func(what string, s float64) { cs.Steps = append(cs.Steps, Step{what, s}) }
	addRunnerSteps(pool, add)
	waitFrom := len(cs.Steps) // the hooks' wait starts once the job pod exists
	add("Karpenter: batch, CreateFleet", KarpenterDecideSeconds)
	add("instance launch → node Ready", LaunchToReadySeconds)
	if pool.NodeOS() == config.NodeOSBottlerocket {
		add("Bottlerocket's device plugin registers the GPU", DevicePluginSeconds)
	}
	for _, img := range images {
		if img.FromSnapshot {
			add(fmt.Sprintf("%s (%.1f GB) on the data volume from %s, read on first access", img.Image, img.GB, pool.ImageSnapshotID), FromSnapshotSeconds)
			continue
		}
		where := "over the internet, through the NAT"
		if img.Cached {
			where = "from the ECR cache"
		}
		disk, rate := ImageDisk(pool)
		add(fmt.Sprintf("pull %s (%.1f GB, %s, onto %s)", img.Image, img.GB, where, disk), PullSeconds(img.GB, img.Cached, rate))
		if img.Image == versions.NvidiaDevicePluginImage {
			add("device plugin registers the GPU", DevicePluginSeconds)
		}
	}
	add("container start", StartSeconds)
	for _, s := range cs.Steps {
		cs.Seconds += s.Seconds
	}
	if pool.JobForm == config.JobFormContainer {
		waited := 0.0
		for _, s := range cs.Steps[waitFrom:] {
			waited += s.Seconds
		}
		margin := PrepareJobWaitSeconds - waited
		cs.PrepareJobMarginSeconds = &margin
	}
	return cs
}
