package stack_test

// NodePools and EC2NodeClasses against Karpenter's own CRDs (structural schema and CEL), as
// embedded in the karpenter-provider-aws module version go.mod pins.

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/karpentercrd"
)

func TestPoolVariantsPassKarpenterCRDs(t *testing.T) {
	v := karpentercrd.Validator(t)
	variants := map[string]func(p *config.GPUPool){
		"default":              func(*config.GPUPool) {},
		"on-demand fallback":   func(p *config.GPUPool) { p.CapacityTypes = []string{"spot", "on-demand"} },
		"on-demand only":       func(p *config.GPUPool) { p.CapacityTypes = []string{"on-demand"} },
		"four-GPU nodes":       func(p *config.GPUPool) { p.InstanceTypes = []string{"g5.12xlarge", "g6.12xlarge"}; p.GPULimit = 8 },
		"never expire":         func(p *config.GPUPool) { p.ExpireAfter = "Never" },
		"compound durations":   func(p *config.GPUPool) { p.ConsolidateAfter = "1m30s"; p.TerminationGracePeriod = "2h30m" },
		"big disk":             func(p *config.GPUPool) { p.RootVolumeGi = 2000 },
		"fast disk":            func(p *config.GPUPool) { p.RootVolumeThroughput, p.RootVolumeIOPS = 1000, 16000 },
		"on-demand retry twin": func(p *config.GPUPool) { *p = p.RetryTwin() },
	}
	for name, mutate := range variants {
		t.Run(name, func(t *testing.T) {
			pool := config.DefaultPool()
			mutate(&pool)
			for _, public := range []bool{false, true} {
				np, nc := karpentercrd.Objects(t, pool, public, map[string]string{"team": "platform"})
				assert.Empty(t, v.Validate(np), "NodePool")
				assert.Empty(t, v.Validate(nc), "EC2NodeClass")
			}
		})
	}
}

// The validator is not a rubber stamp: Karpenter's own rules reject a hand-broken object.
func TestValidatorRejectsKnownBadObjects(t *testing.T) {
	v := karpentercrd.Validator(t)
	np, nc := karpentercrd.Objects(t, config.DefaultPool(), false, nil)
	np["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)["karpenter.sh/nodepool"] = "x"
	assert.Contains(t, v.Validate(np).ToAggregate().Error(), "restricted")
	nc["spec"].(map[string]any)["instanceProfile"] = "also-a-profile"
	assert.Contains(t, v.Validate(nc).ToAggregate().Error(), "must specify exactly one of ['role', 'instanceProfile']")
}
