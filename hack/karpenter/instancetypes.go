package main

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// shape is what differs between the instance types the e2e's stacks name. Upstream's
// generated table (pkg/fake/zz_generated.describe_instance_types.go) holds none of the small
// GPU types, so these are AWS's published figures (the EC2 instance type pages: accelerated
// computing and general purpose), built into the same EC2 shape that table uses for
// g4dn.8xlarge.
type shape struct {
	name                 string
	vcpus, cores         int32
	memoryMiB            int64
	gpu, gpuManufacturer string
	gpuMemoryMiB         int32
	enis, ipv4PerENI     int32
	nvmeGB               int64
	burstable            bool
	cpuManufacturer      string
}

var shapes = []shape{
	{name: "g4dn.xlarge", vcpus: 4, cores: 2, memoryMiB: 16384, gpu: "T4", gpuManufacturer: "NVIDIA", gpuMemoryMiB: 16384, enis: 3, ipv4PerENI: 10, nvmeGB: 125, cpuManufacturer: "Intel"},
	{name: "g4dn.2xlarge", vcpus: 8, cores: 4, memoryMiB: 32768, gpu: "T4", gpuManufacturer: "NVIDIA", gpuMemoryMiB: 16384, enis: 3, ipv4PerENI: 10, nvmeGB: 225, cpuManufacturer: "Intel"},
	{name: "g5.xlarge", vcpus: 4, cores: 2, memoryMiB: 16384, gpu: "A10G", gpuManufacturer: "NVIDIA", gpuMemoryMiB: 24576, enis: 4, ipv4PerENI: 15, nvmeGB: 250, cpuManufacturer: "AMD"},
	{name: "g6.xlarge", vcpus: 4, cores: 2, memoryMiB: 16384, gpu: "L4", gpuManufacturer: "NVIDIA", gpuMemoryMiB: 22888, enis: 4, ipv4PerENI: 15, nvmeGB: 250, cpuManufacturer: "AMD"},
	{name: "t3.medium", vcpus: 2, cores: 1, memoryMiB: 4096, enis: 3, ipv4PerENI: 6, burstable: true, cpuManufacturer: "Intel"},
}

var instanceTypes = func() []ec2types.InstanceTypeInfo {
	var out []ec2types.InstanceTypeInfo
	for _, s := range shapes {
		it := ec2types.InstanceTypeInfo{
			InstanceType:                  ec2types.InstanceType(s.name),
			SupportedUsageClasses:         []ec2types.UsageClassType{"on-demand", "spot"},
			SupportedVirtualizationTypes:  []ec2types.VirtualizationType{"hvm"},
			BurstablePerformanceSupported: aws.Bool(s.burstable),
			BareMetal:                     aws.Bool(false),
			CurrentGeneration:             aws.Bool(true),
			Hypervisor:                    "nitro",
			ProcessorInfo: &ec2types.ProcessorInfo{
				Manufacturer:           aws.String(s.cpuManufacturer),
				SupportedArchitectures: []ec2types.ArchitectureType{"x86_64"},
			},
			VCpuInfo:   &ec2types.VCpuInfo{DefaultCores: aws.Int32(s.cores), DefaultVCpus: aws.Int32(s.vcpus)},
			MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(s.memoryMiB)},
			EbsInfo: &ec2types.EbsInfo{
				EbsOptimizedSupport: "default", EncryptionSupport: "supported", NvmeSupport: "required",
			},
			NetworkInfo: &ec2types.NetworkInfo{
				MaximumNetworkInterfaces:  aws.Int32(s.enis),
				Ipv4AddressesPerInterface: aws.Int32(s.ipv4PerENI),
				DefaultNetworkCardIndex:   aws.Int32(0),
				NetworkCards:              []ec2types.NetworkCardInfo{{NetworkCardIndex: aws.Int32(0), MaximumNetworkInterfaces: aws.Int32(s.enis)}},
			},
		}
		if s.gpu != "" {
			it.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{
				Name: aws.String(s.gpu), Manufacturer: aws.String(s.gpuManufacturer), Count: aws.Int32(1),
				MemoryInfo: &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(s.gpuMemoryMiB)},
			}}}
		}
		if s.nvmeGB > 0 {
			it.InstanceStorageInfo = &ec2types.InstanceStorageInfo{NvmeSupport: "required", TotalSizeInGB: aws.Int64(s.nvmeGB)}
		}
		out = append(out, it)
	}
	return out
}()
