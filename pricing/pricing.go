// Package pricing is the price table gpuci cost, gpuci stats and the jobs' summaries use: list
// prices with their sources, on-demand EC2 prices taken whole from Karpenter's generated table
// (zz_generated_ondemand.go, hack/genprices). Every figure is a list price on a date, not a bill.
package pricing

//go:generate go run ../hack/genprices -o zz_generated_ondemand.go

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"

	"github.com/luxfi/lux-gpu-ci/config"
)

// Prices are USD list prices. The defaults are us-west-2 figures from the public pages
// DefaultPrices cites, with their dates, and on-demand EC2 prices from Karpenter's generated
// table (zz_generated_ondemand.go, hack/genprices); gpuci cost replaces them with --prices
// for another region or date, or --live for current AWS prices.
type Prices struct {
	Source string `json:"source"`
	// Hourly prices.
	EKSControlPlane float64            `json:"eksControlPlanePerHour"`
	NATGateway      float64            `json:"natGatewayPerHour"`
	PublicIPv4      float64            `json:"publicIPv4PerHour"`
	OnDemand        map[string]float64 `json:"onDemandPerHour"`
	Spot            map[string]float64 `json:"spotPerHour"`
	// Other units.
	NATPerGB       float64 `json:"natPerGB"`
	GP3PerGiBMonth float64 `json:"gp3PerGiBMonth"`
	// gp3 performance above its baseline (125 MiB/s, 3,000 IOPS), per month provisioned.
	GP3ThroughputPerMiBsMonth float64 `json:"gp3ThroughputPerMiBsMonth"`
	GP3IOPSPerMonth           float64 `json:"gp3IopsPerMonth"`
	// ECRStoragePerGBMonth is what the image cache's repositories cost; pulls from ECR within
	// the region and S3 traffic through a gateway endpoint cost nothing.
	ECRStoragePerGBMonth float64 `json:"ecrStoragePerGBMonth"`
	// SnapshotPerGBMonth is EBS snapshot storage (standard tier), for pools whose images
	// come from a snapshot.
	SnapshotPerGBMonth float64 `json:"snapshotPerGBMonth"`
	// The compiler cache's bucket: S3 Standard storage, and its requests (PUT, GET), per
	// thousand; its traffic goes through the gateway endpoint, free.
	S3PerGBMonth       float64 `json:"s3PerGBMonth"`
	S3PutPer1000       float64 `json:"s3PutPer1000"`
	S3GetPer1000       float64 `json:"s3GetPer1000"`
	HostedT4PerMinute  float64 `json:"githubHostedT4PerMinute"`
	SystemRootVolumeGi float64 `json:"systemRootVolumeGi"`
}

// Default are the table's built-in prices.
func Default() Prices {
	return Prices{
		Source: "us-west-2 list prices: EKS https://aws.amazon.com/eks/pricing/ (standard support); " +
			"EC2 on-demand: " + karpenterOnDemandSource + ", the same list prices as us-west-2 for the g4dn, g5, g6 and t3 types " +
			"(https://aws.amazon.com/ec2/pricing/on-demand/); spot: averages of 2025-11-30 " +
			"(https://aws.amazon.com/ec2/spot/pricing/, as collected by https://instances.vantage.sh); " +
			"NAT gateway and public IPv4 (charged since 2024-02-01) https://aws.amazon.com/vpc/pricing/; " +
			"EBS gp3 (storage, throughput and IOPS above the baseline) and snapshots (standard tier) https://aws.amazon.com/ebs/pricing/; " +
			"ECR storage, and free data transfer within a region https://aws.amazon.com/ecr/pricing/; " +
			"S3 Standard storage and requests https://aws.amazon.com/s3/pricing/; gateway endpoints " +
			"carry no charge https://docs.aws.amazon.com/vpc/latest/privatelink/gateway-endpoints.html; GitHub-hosted Linux 4-core GPU runner from 2026-01-01 " +
			"https://docs.github.com/en/billing/reference/actions-runner-pricing. Check them before you rely on them.",
		EKSControlPlane: 0.10,
		NATGateway:      0.045,
		PublicIPv4:      0.005,
		OnDemand:        maps.Clone(karpenterOnDemand),
		Spot: map[string]float64{
			"g4dn.xlarge": 0.2497, "g5.xlarge": 0.5328, "g6.xlarge": 0.4152,
		},
		NATPerGB:                  0.045,
		GP3PerGiBMonth:            0.08,
		GP3ThroughputPerMiBsMonth: 0.04,
		GP3IOPSPerMonth:           0.005,
		ECRStoragePerGBMonth:      0.10,
		SnapshotPerGBMonth:        0.05,
		S3PerGBMonth:              0.023,
		S3PutPer1000:              0.005,
		S3GetPer1000:              0.0004,
		HostedT4PerMinute:         0.052,
		SystemRootVolumeGi:        20,
	}
}

// Load reads a price table (JSON, the Prices fields) over the defaults.
func Load(path string) (Prices, error) {
	p := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	p.Source = path
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// HourlyPrice is what a pool's node costs an hour: its cheapest instance type at spot prices
// when the pool runs spot (Karpenter tries spot first), on-demand otherwise.
func HourlyPrice(pool config.GPUPool, p Prices) (instanceType, capacity string, perHour float64, err error) {
	capacity = "on-demand"
	table := p.OnDemand
	if pool.Allows(config.CapacitySpot) {
		capacity, table = "spot", p.Spot
	}
	perHour = math.Inf(1)
	for _, it := range pool.InstanceTypes {
		if price, ok := table[it]; ok && price < perHour {
			instanceType, perHour = it, price
		}
	}
	if instanceType == "" {
		return "", capacity, 0, fmt.Errorf("pool %s: no %s price for any of %v (add one with --prices)", pool.Name, capacity, pool.InstanceTypes)
	}
	return instanceType, capacity, perHour, nil
}
