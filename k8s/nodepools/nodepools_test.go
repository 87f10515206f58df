package nodepools_test

// NodePools and EC2NodeClasses against Karpenter's own CRDs (structural schema and CEL), as
// embedded in the karpenter-provider-aws module version go.mod pins.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/k8s/karpentercrd"
	"github.com/luxfi/lux-gpu-ci/k8s/nodepools"
)

func TestPoolVariantsPassKarpenterCRDs(t *testing.T) {
	v := karpentercrd.Validator(t)
	variants := map[string]func(p *config.GPUPool){
		"default": func(*config.GPUPool) {},
		"on-demand fallback": func(p *config.GPUPool) {
			p.CapacityTypes = []config.CapacityType{config.CapacitySpot, config.CapacityOnDemand}
		},
		"on-demand only": func(p *config.GPUPool) { p.CapacityTypes = []config.CapacityType{config.CapacityOnDemand} },
		"four-GPU nodes": func(p *config.GPUPool) { p.InstanceTypes = []string{"g5.12xlarge", "g6.12xlarge"}; p.GPULimit = 8 },
		"never expire":   func(p *config.GPUPool) { p.ExpireAfter = config.Never() },
		"compound durations": func(p *config.GPUPool) {
			p.ConsolidateAfter, p.TerminationGracePeriod = config.DurationOf(90*time.Second), config.DurationOf(150*time.Minute)
		},
		"big disk":             func(p *config.GPUPool) { p.RootVolumeGi = 2000 },
		"fast disk":            func(p *config.GPUPool) { p.RootVolumeThroughput, p.RootVolumeIOPS = 1000, 16000 },
		"on-demand retry twin": func(p *config.GPUPool) { *p = p.RetryTwin() },
		"images from a snapshot": func(p *config.GPUPool) {
			p.ImageSnapshotID = "snap-0123456789abcdef0"
			*p = p.RetryTwin() // the twin keeps its pool's snapshot
		},
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

// A spot pool's cool-down NodePool passes Karpenter's CRD, and only a spot pool under a
// retrier that cools down has one. What it does (tried first, launching nothing at limit 0,
// on-demand once the retrier raises it) is the real Karpenter's, in make e2e.
func TestACoolDownNodePoolPassesKarpentersCRDAndOnlySpotPoolsHaveOne(t *testing.T) {
	v := karpentercrd.Validator(t)
	pool := config.DefaultPool()
	np, err := nodepools.CoolDownNodePoolObject(pool)
	require.NoError(t, err)
	assert.Empty(t, v.Validate(np), "NodePool")

	retrier := config.Retrier{GitHubToken: &config.Secret{}, SpotCoolDown: 30 * time.Minute}
	assert.True(t, nodepools.CoolsDown(pool, retrier))
	assert.False(t, nodepools.CoolsDown(pool.RetryTwin(), retrier), "a twin is on-demand")
	onDemand := pool
	onDemand.CapacityTypes = []config.CapacityType{config.CapacityOnDemand}
	assert.False(t, nodepools.CoolsDown(onDemand, retrier), "an on-demand pool")
	assert.False(t, nodepools.CoolsDown(pool, config.Retrier{}), "no retrier")
	retrier.SpotCoolDown = 0
	assert.False(t, nodepools.CoolsDown(pool, retrier), "a retrier told not to")
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

// A pool whose images come from a snapshot runs Bottlerocket with its data volume restored
// from it, and Karpenter's CRD holds it to Bottlerocket's layout: one root volume.
func TestImageSnapshotPoolRunsBottlerocketFromTheSnapshot(t *testing.T) {
	v := karpentercrd.Validator(t)
	pool := config.DefaultPool()
	pool.ImageSnapshotID = "snap-0123456789abcdef0"
	np, nc := karpentercrd.Objects(t, pool, false, nil)
	require.Empty(t, v.Validate(np), "NodePool")
	require.Empty(t, v.Validate(nc), "EC2NodeClass")

	spec := nc["spec"].(map[string]any)
	assert.Equal(t, []any{map[string]any{"alias": "bottlerocket@v1.64.0"}}, spec["amiSelectorTerms"])
	assert.Equal(t, []any{
		map[string]any{"deviceName": "/dev/xvda", "ebs": map[string]any{
			"volumeSize": "4Gi", "volumeType": "gp3", "encrypted": true, "deleteOnTermination": true,
		}},
		map[string]any{"deviceName": "/dev/xvdb", "rootVolume": true, "ebs": map[string]any{
			"snapshotID": "snap-0123456789abcdef0", "volumeSize": "100Gi", "volumeType": "gp3",
			"throughput": float64(125), "iops": float64(3000), "encrypted": true, "deleteOnTermination": true,
		}},
	}, spec["blockDeviceMappings"], "the OS volume as Karpenter's Bottlerocket default; the data volume from the snapshot, at the pool's size and speed")
	assert.NotContains(t, spec, "instanceStorePolicy", "the images are on the restored data volume, which the NVMe would hide")
	labels := np["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
	assert.Equal(t, "bottlerocket", labels["lux-gpu-ci.luxfi.com/node-os"])

	// Both volumes flagged as the kubelet's: the CRD refuses it.
	spec["blockDeviceMappings"].([]any)[0].(map[string]any)["rootVolume"] = true
	assert.Contains(t, v.Validate(nc).ToAggregate().Error(), "must have only one blockDeviceMappings with rootVolume")

	// An AL2023 pool is as before: one root volume, no snapshot, no node-os label (a new
	// template label would drift every live node of the pool).
	np, nc = karpentercrd.Objects(t, config.DefaultPool(), false, nil)
	devices := nc["spec"].(map[string]any)["blockDeviceMappings"].([]any)
	require.Len(t, devices, 1)
	assert.NotContains(t, devices[0].(map[string]any)["ebs"], "snapshotID")
	assert.Equal(t, []any{map[string]any{"alias": "al2023@v20260714"}}, nc["spec"].(map[string]any)["amiSelectorTerms"])
	assert.NotContains(t, np["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"], "lux-gpu-ci.luxfi.com/node-os")
}
