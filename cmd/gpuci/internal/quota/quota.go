// Package quota is what a stack needs of the account's EC2 vCPU quotas for GPU instances.
// New accounts usually have 0 vCPUs of G and VT instances, and spot and on-demand are
// separate quotas: Karpenter's launches then fail, and GPU jobs wait forever.
package quota

import (
	"fmt"
	"slices"
	"strings"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/instancetypes"
)

// Service Quotas codes of EC2's G and VT vCPU limits (all the catalogue's types are G).
const (
	SpotGVT     = "L-3819A6DF" // All G and VT Spot Instance Requests
	OnDemandGVT = "L-DB2E81BA" // Running On-Demand G and VT instances
)

// Need is the vCPUs one capacity type's quota must allow.
type Need struct {
	CapacityType string   `json:"capacityType"`
	QuotaCode    string   `json:"quotaCode"`
	VCPUs        int      `json:"vcpus"`
	Pools        []string `json:"pools"`
}

// RequestCommand is the AWS CLI command that asks for the quota in region.
func (n Need) RequestCommand(region string) string {
	return fmt.Sprintf("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code %s --desired-value %d --region %s", n.QuotaCode, n.VCPUs, region)
}

// Needs are the quotas the stack's pools need: for each capacity type, the sum over the
// pools that use it of gpuLimit × the most vCPUs per GPU among the pool's instance types
// (the pool may run its whole GPU limit on its hungriest type).
func Needs(cfg *config.Config) []Need {
	byType := map[string]*Need{}
	for _, pool := range cfg.Pools() {
		perGPU := 0
		for _, it := range pool.InstanceTypes {
			if g, ok := instancetypes.Lookup(it); ok {
				perGPU = max(perGPU, (g.VCPUs+g.GPUs-1)/g.GPUs)
			}
		}
		for _, ct := range pool.CapacityTypeNames() {
			n := byType[ct]
			if n == nil {
				code := OnDemandGVT
				if ct == "spot" {
					code = SpotGVT
				}
				n = &Need{CapacityType: ct, QuotaCode: code}
				byType[ct] = n
			}
			n.VCPUs += pool.GPULimit * perGPU
			n.Pools = append(n.Pools, pool.Name)
		}
	}
	var out []Need
	for _, ct := range []string{"spot", "on-demand"} {
		if n := byType[ct]; n != nil {
			out = append(out, *n)
		}
	}
	return out
}

// Shortfall is the Need a NodeClaim's launch error says the account lacks, if it is a quota
// error: EC2 answers MaxSpotInstanceCountExceeded for spot and VcpuLimitExceeded for
// on-demand.
func Shortfall(cfg *config.Config, launchMessage string) (Need, bool) {
	ct := ""
	switch {
	case strings.Contains(launchMessage, "MaxSpotInstanceCountExceeded"):
		ct = "spot"
	case strings.Contains(launchMessage, "VcpuLimitExceeded"):
		ct = "on-demand"
	default:
		return Need{}, false
	}
	needs := Needs(cfg)
	i := slices.IndexFunc(needs, func(n Need) bool { return n.CapacityType == ct })
	if i < 0 {
		return Need{CapacityType: ct, QuotaCode: map[string]string{"spot": SpotGVT, "on-demand": OnDemandGVT}[ct]}, true
	}
	return needs[i], true
}
