package config

// A pool's defaults, apart from its validation (pool_validation.go), as Karpenter keeps them
// (its apis' _defaults.go): what a pool is when the stack file leaves a field out.

import (
	"time"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// gp3's baseline, included in its price (EBS user guide, "General Purpose SSD volumes").
const (
	GP3BaselineThroughput = 125
	GP3BaselineIOPS       = 3000
)

// DefaultRootVolumeThroughput is gp3's baseline, included in its price. An AL2023 pool's node
// writes the images it pulls, and runs the kubelet, on the instance's local NVMe (its
// EC2NodeClass's instanceStorePolicy RAID0: ImagesOnInstanceStore), not on the root volume;
// a snapshot pool's data volume holds its images already and loads each block from S3 on
// first read, at a pace the volume's throughput does not set. (It was 250 MiB/s while AL2023
// pools unpacked images onto the root volume, where 125 MiB/s was the bound.)
const DefaultRootVolumeThroughput = GP3BaselineThroughput

// DefaultPool is the pool a stack gets when it configures none: one T4-class spot GPU.
func DefaultPool() GPUPool {
	return GPUPool{
		Name:                   "gpu-spot",
		InstanceTypes:          []string{"g4dn.xlarge"},
		CapacityTypes:          []CapacityType{CapacitySpot},
		GPULimit:               1,
		ConsolidateAfter:       DurationOf(30 * time.Second),
		ExpireAfter:            DurationOf(24 * time.Hour),
		TerminationGracePeriod: DurationOf(6 * time.Hour),
		RootVolumeGi:           100,
		RootVolumeThroughput:   DefaultRootVolumeThroughput,
		RootVolumeIOPS:         GP3BaselineIOPS,
		RunnerScaleSetName:     "lux-gpu-t4",
		RunnerLabels:           []string{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4"},
		MaxRunners:             1,
		RunnerImage:            versions.RunnerImage,
		JobForm:                JobFormRunner,
		CompilerCache:          CacheReadWrite,
	}
}
