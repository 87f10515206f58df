package main

// NodePools and EC2NodeClasses against Karpenter's own CRDs (structural schema and CEL), as
// embedded in the karpenter-provider-aws module version go.mod pins.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/k8s"
	"github.com/luxfi/lux-gpu-ci/k8s/crdvalidation"
)

func karpenterValidator(t *testing.T) *crdvalidation.Validator {
	t.Helper()
	v, err := crdvalidation.Karpenter()
	require.NoError(t, err)
	return v
}

// objects builds a pool's NodePool and EC2NodeClass as the program sends them.
func objects(t *testing.T, pool config.GPUPool, publicIP bool, tags map[string]string) (nodePool, nodeClass map[string]any) {
	t.Helper()
	nodePool, err := k8s.NodePoolObject(pool)
	require.NoError(t, err)
	nodeClass, err = k8s.EC2NodeClassObject(pool, "lux-gpu-ci", "KarpenterNodeRole-lux-gpu-ci", publicIP, tags)
	require.NoError(t, err)
	return nodePool, nodeClass
}

// What the program declares for the dev stack passes the CRDs as registered.
func TestDevStackObjectsPassKarpenterCRDs(t *testing.T) {
	v := karpenterValidator(t)
	m := runDev(t)
	for _, typ := range []string{"kubernetes:karpenter.sh/v1:NodePool", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"} {
		r := m.one(t, typ)
		obj := map[string]any{"apiVersion": r.Inputs["apiVersion"], "kind": r.Inputs["kind"], "metadata": r.Inputs["metadata"], "spec": r.Inputs["spec"]}
		assert.Empty(t, v.Validate(obj), "%s as registered", typ)
	}
}

func TestPoolVariantsPassKarpenterCRDs(t *testing.T) {
	v := karpenterValidator(t)
	variants := map[string]func(p *config.GPUPool){
		"default":            func(*config.GPUPool) {},
		"on-demand fallback": func(p *config.GPUPool) { p.CapacityTypes = []string{"spot", "on-demand"} },
		"on-demand only":     func(p *config.GPUPool) { p.CapacityTypes = []string{"on-demand"} },
		"four-GPU nodes":     func(p *config.GPUPool) { p.InstanceTypes = []string{"g5.12xlarge", "g6.12xlarge"}; p.GPULimit = 8 },
		"never expire":       func(p *config.GPUPool) { p.ExpireAfter = "Never" },
		"compound durations": func(p *config.GPUPool) { p.ConsolidateAfter = "1m30s"; p.TerminationGracePeriod = "2h30m" },
		"big disk":           func(p *config.GPUPool) { p.RootVolumeGi = 2000 },
	}
	for name, mutate := range variants {
		t.Run(name, func(t *testing.T) {
			pool := config.DefaultPool()
			mutate(&pool)
			for _, public := range []bool{false, true} {
				np, nc := objects(t, pool, public, map[string]string{"team": "platform"})
				assert.Empty(t, v.Validate(np), "NodePool")
				assert.Empty(t, v.Validate(nc), "EC2NodeClass")
			}
		})
	}
}

// The validator is not a rubber stamp: Karpenter's own rules reject a hand-broken object.
func TestValidatorRejectsKnownBadObjects(t *testing.T) {
	v := karpenterValidator(t)
	np, nc := objects(t, config.DefaultPool(), false, nil)
	np["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)["karpenter.sh/nodepool"] = "x"
	assert.Contains(t, v.Validate(np).ToAggregate().Error(), "restricted")
	nc["spec"].(map[string]any)["instanceProfile"] = "also-a-profile"
	assert.Contains(t, v.Validate(nc).ToAggregate().Error(), "must specify exactly one of ['role', 'instanceProfile']")
}

// Wrong pool configurations: our validation refuses each with a message naming gpuPools
// and the field; where Karpenter's CRDs would refuse the resulting object too, the test
// builds that object and shows the CRD (schema or CEL) error.
func TestWrongPoolConfigs(t *testing.T) {
	v := karpenterValidator(t)
	type objs struct{ np, nc map[string]any }
	spec := func(o map[string]any, keys ...string) map[string]any {
		cur := o["spec"].(map[string]any)
		for _, k := range keys {
			cur = cur[k].(map[string]any)
		}
		return cur
	}
	cases := []struct {
		name    string
		pool    string // JSON of one pool
		wantCfg string
		// breakCRD applies the same mistake to a valid object; wantCRD is the CRD's answer.
		breakCRD func(o objs) map[string]any
		wantCRD  string
	}{
		{
			name: "no instance types", pool: `{"name": "gpu", "instanceTypes": []}`, wantCfg: "instanceTypes: is empty",
			breakCRD: func(o objs) map[string]any {
				spec(o.np, "template", "spec")["requirements"].([]any)[1].(map[string]any)["values"] = []any{}
				return o.np
			},
			wantCRD: "requirements with operator 'In' must have a value defined",
		},
		{
			name: "no capacity types", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "capacityTypes": []}`, wantCfg: "capacityTypes: is empty",
			breakCRD: func(o objs) map[string]any {
				spec(o.np, "template", "spec")["requirements"].([]any)[0].(map[string]any)["values"] = []any{}
				return o.np
			},
			wantCRD: "requirements with operator 'In' must have a value defined",
		},
		{
			name: "consolidateAfter in words", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "consolidateAfter": "30 seconds"}`, wantCfg: "consolidateAfter: \"30 seconds\"",
			breakCRD: func(o objs) map[string]any { spec(o.np, "disruption")["consolidateAfter"] = "30 seconds"; return o.np },
			wantCRD:  "spec.disruption.consolidateAfter",
		},
		{
			name: "fractional duration", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "expireAfter": "1.5h"}`, wantCfg: "expireAfter: \"1.5h\"",
			breakCRD: func(o objs) map[string]any { spec(o.np, "template", "spec")["expireAfter"] = "1.5h"; return o.np },
			wantCRD:  "spec.template.spec.expireAfter",
		},
		{
			name: "grace period Never", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "terminationGracePeriod": "Never"}`, wantCfg: "terminationGracePeriod: \"Never\"",
			breakCRD: func(o objs) map[string]any {
				spec(o.np, "template", "spec")["terminationGracePeriod"] = "Never"
				return o.np
			},
			wantCRD: "spec.template.spec.terminationGracePeriod",
		},
		{
			name: "zero-size disk", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "rootVolumeGi": 0}`, wantCfg: "rootVolumeGi: must be 20",
			breakCRD: func(o objs) map[string]any {
				spec(o.nc)["blockDeviceMappings"].([]any)[0].(map[string]any)["ebs"].(map[string]any)["volumeSize"] = "0Gi"
				return o.nc
			},
			wantCRD: "volumeSize",
		},
		{
			name: "pool name not a DNS name", pool: `{"name": "GPU_T4", "instanceTypes": ["g4dn.xlarge"]}`, wantCfg: "name: \"GPU_T4\" must be a DNS label",
			breakCRD: func(o objs) map[string]any { o.np["metadata"].(map[string]any)["name"] = "GPU_T4"; return o.np },
			wantCRD:  "metadata.name",
		},
		{
			name: "unknown capacity type", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "capacityTypes": ["preemptible"]}`, wantCfg: "\"preemptible\" is not spot or on-demand",
			// Karpenter accepts this at admission and marks the NodePool not Ready at runtime.
		},
		{name: "CPU instance type", pool: `{"name": "gpu", "instanceTypes": ["t3.large"]}`, wantCfg: "\"t3.large\" is not a known NVIDIA GPU instance type"},
		{name: "more runners than GPUs", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 1, "maxRunners": 3}`, wantCfg: "maxRunners: must be 1–gpuLimit (1)"},
		{name: "zero GPU limit", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 0, "maxRunners": 0}`, wantCfg: "gpuLimit: must be 1–64"},
		{name: "upper-case runner label", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "runnerLabels": ["GPU"]}`, wantCfg: "runnerLabels: \"GPU\""},
		{name: "scale set name too long", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "runnerScaleSetName": "` + strings.Repeat("x", 46) + `"}`, wantCfg: "runnerScaleSetName"},
		{name: "unpinned runner image", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "runnerImage": "ghcr.io/actions/actions-runner:latest"}`, wantCfg: "runnerImage"},
		{name: "misspelt field", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "gpuLimt": 2}`, wantCfg: "unknown field \"gpuLimt\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMocks()
			err := m.run(with(stackConfig(t, "dev"), "gpuPools", "["+tc.pool+"]"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools: ")
			assert.Contains(t, err.Error(), tc.wantCfg)
			assert.Empty(t, names(m.programResources()), "nothing may be registered")

			if tc.breakCRD == nil {
				return
			}
			np, nc := objects(t, config.DefaultPool(), false, nil)
			require.Empty(t, v.Validate(np), "the unbroken NodePool is valid")
			require.Empty(t, v.Validate(nc), "the unbroken EC2NodeClass is valid")
			broken := tc.breakCRD(objs{np, nc})
			errs := v.Validate(broken)
			require.NotEmpty(t, errs, "Karpenter's CRD accepts the broken object")
			assert.Contains(t, errs.ToAggregate().Error(), tc.wantCRD)
		})
	}
}

// Tags Karpenter reserves are refused by our validation and by the EC2NodeClass CEL rules.
func TestReservedTagsRejectedByConfigAndCEL(t *testing.T) {
	v := karpenterValidator(t)
	for _, tag := range []string{"kubernetes.io/cluster/lux-gpu-ci", "eks:eks-cluster-name", "karpenter.sh/nodepool"} {
		m := newMocks()
		tags, _ := json.Marshal(map[string]string{tag: "x"})
		err := m.run(with(stackConfig(t, "dev"), "tags", string(tags)))
		require.Error(t, err, tag)
		assert.Contains(t, err.Error(), "lux-gpu-ci:tags: tag \""+tag+"\"")

		_, nc := objects(t, config.DefaultPool(), false, map[string]string{tag: "x"})
		errs := v.Validate(nc)
		assert.NotEmpty(t, errs, "the EC2NodeClass CRD refuses tag %s", tag)
	}
}
