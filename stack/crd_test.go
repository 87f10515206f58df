package stack_test

// What the program declares against Karpenter's own CRDs (schema and CEL), and wrong pools refused by our validation and, where they would be, by the CRDs.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/k8s/karpentercrd"
)

// What the program declares for the dev stack passes the CRDs as registered.
func TestDevStackObjectsPassKarpenterCRDs(t *testing.T) {
	v := karpentercrd.Validator(t)
	m := runDev(t)
	var objects []registered
	for _, typ := range []string{"kubernetes:karpenter.sh/v1:NodePool", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"} {
		objects = append(objects, m.all(typ)...)
	}
	require.Len(t, objects, 6, "three pools: gpu-spot, its on-demand twin, gpu-spot-container")
	for _, r := range objects {
		obj := map[string]any{"apiVersion": r.Inputs["apiVersion"], "kind": r.Inputs["kind"], "metadata": r.Inputs["metadata"], "spec": r.Inputs["spec"]}
		assert.Empty(t, v.Validate(obj), "%s as registered", r.Key())
	}
}

// Wrong pool configurations: our validation refuses each with a message naming gpuPools
// and the field; where Karpenter's CRDs would refuse the resulting object too, the test
// builds that object and shows the CRD (schema or CEL) error.
func TestWrongPoolConfigs(t *testing.T) {
	v := karpentercrd.Validator(t)
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
		{name: "runner group with spaces around it", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "runnerGroup": " prod "}`, wantCfg: "runnerGroup"},
		{name: "scale set name too long", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "runnerScaleSetName": "` + strings.Repeat("x", 46) + `"}`, wantCfg: "runnerScaleSetName"},
		{name: "unpinned runner image", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "runnerImage": "ghcr.io/luxfi/cuda-runner:latest"}`, wantCfg: "runnerImage"},
		{name: "unknown job form", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "jobForm": "dind"}`, wantCfg: `jobForm: "dind" is not "runner"`},
		{name: "retry twin's names too long", pool: `{"name": "gpu-` + strings.Repeat("x", 40) + `", "instanceTypes": ["g4dn.xlarge"], "runnerScaleSetName": "lux-gpu", "onDemandRetry": true}`, wantCfg: "onDemandRetry: the twin's NodePool"},
		{name: "retry twin of an on-demand pool", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "capacityTypes": ["on-demand"], "onDemandRetry": true}`, wantCfg: "onDemandRetry: the pool uses no spot capacity"},
		{name: "labels contained in another pool's", pool: `{"name": "a", "instanceTypes": ["g4dn.xlarge"], "runnerLabels": ["gpu"]}, {"name": "b", "instanceTypes": ["g4dn.xlarge"], "runnerLabels": ["gpu", "big"]}`, wantCfg: "one contains the other"},
		{name: "root volume faster than gp3", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "rootVolumeThroughput": 2000, "rootVolumeIOPS": 16000}`, wantCfg: "rootVolumeThroughput: must be 125–1000 MiB/s"},
		{name: "throughput beyond its IOPS", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "rootVolumeThroughput": 1000}`, wantCfg: "rootVolumeThroughput: 1000 MiB/s needs at least 4000 IOPS"},
		{name: "IOPS beyond the volume", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "rootVolumeGi": 20, "rootVolumeIOPS": 16000}`, wantCfg: "rootVolumeIOPS: 16000 IOPS needs a volume of at least 32 GiB"},
		{name: "IOPS below gp3's baseline", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "rootVolumeIOPS": 100}`, wantCfg: "rootVolumeIOPS: must be 3000–16000"},
		{name: "a t4 label on an A10G type", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge", "g5.xlarge"], "runnerLabels": ["self-hosted", "prod-t4"]}`, wantCfg: `runnerLabels: "prod-t4" promises an NVIDIA T4, but g5.xlarge has an A10G: take g5.xlarge out of instanceTypes`},
		{name: "image snapshot not a snapshot ID", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "imageSnapshotID": "ami-0123456789abcdef0"}`, wantCfg: `imageSnapshotID: "ami-0123456789abcdef0" is not an EBS snapshot ID`},
		{name: "unknown compiler cache access", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "compilerCache": "write-only"}`, wantCfg: `compilerCache: "write-only" must be "read-write", "read-only" or "none"`},
		{name: "read-only cache nobody fills", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "compilerCache": "read-only"}`, wantCfg: "compilerCacheFrom: is not set, and nothing ever writes a read-only pool's own cache"},
		{name: "read-only cache of a read-only pool", pool: `{"name": "a", "instanceTypes": ["g4dn.xlarge"], "runnerLabels": ["a"], "compilerCache": "read-only", "compilerCacheFrom": "b"}, {"name": "b", "instanceTypes": ["g4dn.xlarge"], "runnerLabels": ["b"], "compilerCache": "none"}`, wantCfg: `compilerCacheFrom: pool b's cache is "none"`},
		{name: "read-only cache of no pool", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "compilerCache": "read-only", "compilerCacheFrom": "main"}`, wantCfg: `compilerCacheFrom: "main" is not a pool of the stack`},
		{name: "a writer reading another's cache", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "compilerCacheFrom": "gpu"}`, wantCfg: `compilerCacheFrom: "gpu" is set, but only a read-only pool reads another pool's cache`},
		{name: "misspelt field", pool: `{"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "gpuLimt": 2}`, wantCfg: "unknown field \"gpuLimt\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMocks()
			err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "gpuPools", "["+tc.pool+"]"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools: ")
			assert.Contains(t, err.Error(), tc.wantCfg)
			assert.Empty(t, names(m.programResources()), "nothing may be registered")

			if tc.breakCRD == nil {
				return
			}
			np, nc := karpentercrd.Objects(t, config.DefaultPool(), false, nil)
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
	v := karpentercrd.Validator(t)
	for _, tag := range []string{"kubernetes.io/cluster/lux-gpu-ci", "eks:eks-cluster-name", "karpenter.sh/nodepool"} {
		m := newMocks()
		tags, _ := json.Marshal(map[string]string{tag: "x"})
		err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "tags", string(tags)))
		require.Error(t, err, tag)
		assert.Contains(t, err.Error(), "lux-gpu-ci:tags: tag \""+tag+"\"")

		_, nc := karpentercrd.Objects(t, config.DefaultPool(), false, map[string]string{tag: "x"})
		errs := v.Validate(nc)
		assert.NotEmpty(t, errs, "the EC2NodeClass CRD refuses tag %s", tag)
	}
}
