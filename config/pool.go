package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// GPUPool is one kind of GPU runner: a Karpenter NodePool/EC2NodeClass pair and the ARC
// runner scale set whose jobs land on it.
type GPUPool struct {
	// Name names the NodePool and EC2NodeClass (a DNS label).
	Name string `json:"name"`
	// InstanceTypes Karpenter may launch, from the instancetypes catalogue.
	InstanceTypes []string `json:"instanceTypes"`
	// CapacityTypes are CapacitySpot and/or CapacityOnDemand; with both, Karpenter prefers
	// spot and falls back to on-demand when spot capacity is short.
	CapacityTypes []CapacityType `json:"capacityTypes"`
	// GPULimit caps the GPUs the pool may run at once (NodePool limits nvidia.com/gpu).
	GPULimit int `json:"gpuLimit"`
	// ConsolidateAfter is how long an empty GPU node is kept warm for the next job.
	ConsolidateAfter Duration `json:"consolidateAfter"`
	// ExpireAfter replaces nodes older than this (fresh AMIs; Never keeps them);
	// TerminationGracePeriod is how long a draining node waits for a running job. Together
	// they bound a node's life.
	ExpireAfter            Duration `json:"expireAfter"`
	TerminationGracePeriod Duration `json:"terminationGracePeriod"`
	// RootVolumeGi sizes the gp3 root volume; CUDA images are large.
	RootVolumeGi int `json:"rootVolumeGi"`
	// RootVolumeThroughput (MiB/s) and RootVolumeIOPS provision the gp3 root volume, where a
	// cold node writes every image it pulls unless they go to the instance's NVMe
	// (ImagesOnInstanceStore: an AL2023 pool's): gp3's baseline is 125 MiB/s
	// and 3,000 IOPS.
	RootVolumeThroughput int `json:"rootVolumeThroughput"`
	RootVolumeIOPS       int `json:"rootVolumeIOPS"`
	// RunnerScaleSetName is the scale set's name, usable as `runs-on: <name>`.
	RunnerScaleSetName string `json:"runnerScaleSetName"`
	// RunnerLabels are registered when the scale set is first created (ARC ≥ 0.14) and
	// cannot be changed afterwards without recreating it.
	RunnerLabels []string `json:"runnerLabels"`
	// RunnerGroup is the GitHub runner group the scale set registers in; "" is the
	// organization's default group. ARC finds an existing scale set by name within its
	// group and reuses it, so the group is part of a scale set's identity.
	RunnerGroup string `json:"runnerGroup,omitempty"`
	// TrustedRepositoriesOnly is the stack file's word that RunnerGroup admits only
	// repositories whose every job the pool's other jobs may see (no public repository, no
	// fork's pull request). A container-form pool needs it: its runners share one account,
	// which starts, reads and execs into every job pod of the pool (docs/operations.md,
	// "What a job can reach"); gpuci verify checks the group's real settings.
	TrustedRepositoriesOnly bool `json:"trustedRepositoriesOnly,omitempty"`
	// MaxRunners caps concurrent jobs; each runner takes one GPU.
	MaxRunners int `json:"maxRunners"`
	// RunnerImage is the runner container image: by default the current release, pulled on
	// each start (versions.RunnerImage); set it to pin one by tag or digest.
	RunnerImage string `json:"runnerImage"`
	// JobForm is where a job's steps run, and so which pod holds the GPU: JobFormRunner or
	// JobFormContainer.
	JobForm JobForm `json:"jobForm"`
	// ImageSnapshotID is an EBS snapshot of a Bottlerocket data volume that already holds the
	// images the pool's jobs pull (docs/operations.md, "Images from a snapshot"). The pool's
	// nodes then run Bottlerocket (versions.GPUNodeBottlerocketAlias), whose data volume —
	// sized and provisioned by rootVolumeGi, rootVolumeThroughput and rootVolumeIOPS — is
	// restored from it, so a cold node starts the job's containers without pulling them. ""
	// (the default) runs AL2023 and pulls.
	ImageSnapshotID string `json:"imageSnapshotID,omitempty"`
	// OnDemandRetry adds the pool's retry twin (RetryTwin): an on-demand NodePool and scale
	// set, idle at zero, where a workflow sends a job's second attempt after a spot
	// interruption.
	OnDemandRetry bool `json:"onDemandRetry,omitempty"`
	// CompilerCache is what the pool's jobs may do with the stack's compiler cache
	// (CacheReadWrite by default); CompilerCacheFrom names, for a read-only pool, the
	// read-write pool whose cache its builds hit.
	CompilerCache     CacheAccess `json:"compilerCache,omitempty"`
	CompilerCacheFrom string      `json:"compilerCacheFrom,omitempty"`
	// CompilerCacheShared serves what one repository's builds wrote to every repository of
	// the pool (and of the pools that read it); by default each repository hits only its own.
	CompilerCacheShared bool `json:"compilerCacheShared,omitempty"`
	// WarmSchedule is the pool's warm capacity as the stack file gives it (its `warm`
	// field); Warm is that schedule, validated.
	WarmSchedule *WarmSchedule `json:"warm,omitempty"`
	Warm         *Warm         `json:"-"`
	// RetryTwinOf is, on a twin, the name of the pool it retries for (never configured).
	RetryTwinOf string `json:"-"`
	// warmProblems are what is wrong with WarmSchedule (problems reports them).
	warmProblems []fieldProblem
}

// JobsOf is the pool whose jobs p runs: p itself, or on a twin the pool it re-runs jobs for.
// The two share what follows a job rather than a node: the compiler cache, and in the
// container form the job pods' namespace and account.
func (p GPUPool) JobsOf() string {
	if p.RetryTwinOf != "" {
		return p.RetryTwinOf
	}
	return p.Name
}

// RunnerPodNamespaces are where the pools' runner and job pods run: the runners' namespace,
// then each container-form pool's jobs' namespace (a twin's is its pool's), in pool order.
func RunnerPodNamespaces(pools []GPUPool) []string {
	out := []string{wellknown.RunnersNamespace}
	for _, p := range pools {
		if ns := wellknown.ContainerJobsNamespace(p.JobsOf()); p.JobForm == JobFormContainer && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// retryTwinSuffix names a twin's NodePool, scale set and routing label after its pool's.
const retryTwinSuffix = "-on-demand"

// RetryTwin is the pool's on-demand twin: the same GPU types, form, image, group and sizes,
// on-demand capacity only, and a scale set of its own that only a retry reaches — its name,
// and its labels with the last one (by default the pool's own label) suffixed, so neither
// scale set's labels contain the other's.
func (p GPUPool) RetryTwin() GPUPool {
	t := p
	t.Name = p.Name + retryTwinSuffix
	t.CapacityTypes = []CapacityType{CapacityOnDemand}
	t.RunnerScaleSetName = p.RunnerScaleSetName + retryTwinSuffix
	t.RunnerLabels = slices.Clone(p.RunnerLabels)
	if n := len(t.RunnerLabels); n > 0 {
		t.RunnerLabels[n-1] += retryTwinSuffix
	}
	t.InstanceTypes = slices.Clone(p.InstanceTypes)
	t.OnDemandRetry, t.RetryTwinOf = false, p.Name
	// A retry waits for no warm node: it runs seldom, and on-demand capacity is there.
	t.WarmSchedule, t.Warm, t.warmProblems = nil, nil, nil
	return t
}

// JobForm is where a pool's job steps run, and so which pod holds the GPU.
type JobForm string

const (
	// JobFormRunner runs the steps in the runner container, which holds the GPU. Jobs
	// without `container:`; no service containers or Docker actions (there is no Docker).
	JobFormRunner JobForm = "runner"
	// JobFormContainer is ARC's kubernetes-novolume container mode: every job declares
	// `container:`, the runner (no GPU, on the system nodes) starts it as a pod of its own
	// through the container hooks, and that job pod holds the GPU on the pool's nodes.
	JobFormContainer JobForm = "container"
)

// CapacityType is an EC2 purchase option a pool's nodes may use (Karpenter's
// karpenter.sh/capacity-type values).
type CapacityType string

const (
	CapacitySpot     CapacityType = "spot"
	CapacityOnDemand CapacityType = "on-demand"
)

// CapacityTypeNames are the pool's capacity types as strings (a NodePool requirement's values).
func (p GPUPool) CapacityTypeNames() []string {
	out := make([]string, len(p.CapacityTypes))
	for i, ct := range p.CapacityTypes {
		out[i] = string(ct)
	}
	return out
}

// Allows reports whether the pool may use capacity type ct.
func (p GPUPool) Allows(ct CapacityType) bool { return slices.Contains(p.CapacityTypes, ct) }

// IdleRunners is how many of the pool's runners wait for a job (ARC's minRunners): one for a
// container-form pool, whose runner sits on a system node at no GPU cost and so saves a job
// ARC's creation and start of its runner; none for a runner-form pool (its runner would hold
// a GPU node around the clock) or a retry twin (it takes only re-runs). An idle runner is
// evicted by a system-node roll as a busy one is not: its readiness is its job
// (k8s.RunnerBusyProbe, k8s.BusyRunnersBudget).
func (p GPUPool) IdleRunners() int {
	if p.JobForm != JobFormContainer || p.RetryTwinOf != "" {
		return 0
	}
	return min(1, p.MaxRunners)
}

// NodeOS is the operating system of the pool's GPU nodes: NodeOSBottlerocket when its images
// come from a snapshot (Bottlerocket keeps them on a data volume of their own, which a
// snapshot restores whole), NodeOSAL2023 otherwise.
func (p GPUPool) NodeOS() string {
	if p.ImageSnapshotID != "" {
		return NodeOSBottlerocket
	}
	return NodeOSAL2023
}

// ImagesOnInstanceStore tells whether the pool's nodes keep their images and the kubelet on
// the instance's local NVMe (every GPU type of the catalogue has one: 125 GB on
// g4dn.xlarge, 250 GB on g5.xlarge and g6.xlarge): an AL2023 pool's do. A snapshot pool's
// images are on its EBS data volume, restored from the snapshot, which the NVMe would hide.
func (p GPUPool) ImagesOnInstanceStore() bool { return p.NodeOS() == NodeOSAL2023 }

const (
	NodeOSAL2023       = "al2023"
	NodeOSBottlerocket = "bottlerocket"
)

// FollowsRunnerReleases reports whether the pool runs the current runner release rather than
// a pinned image: the stock :latest, or the CUDA runner's moving tag (versions.CUDARunnerFollowTag).
func (p GPUPool) FollowsRunnerReleases() bool {
	return p.RunnerImage == versions.RunnerImage || strings.HasSuffix(p.RunnerImage, ":"+versions.CUDARunnerFollowTag)
}

// parsePools reads gpuPools: unset means [DefaultPool()]; each configured pool must name
// itself and its instance types, and takes the default pool's values for the rest (its
// scale set is named lux-<name> and labelled with its name).
func (p *parser) parsePools() []GPUPool {
	raw, ok := p.raw(KeyGPUPools)
	if !ok {
		return []GPUPool{DefaultPool()}
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &items); err != nil || len(items) == 0 {
		p.fail(KeyGPUPools, "must be a non-empty list of pools", `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"]}]`)
		return nil
	}
	var pools []GPUPool
	for i, item := range items {
		pool := DefaultPool()
		pool.Name, pool.InstanceTypes, pool.RunnerScaleSetName, pool.RunnerLabels = "", nil, "", nil
		dec := json.NewDecoder(bytes.NewReader(item))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pool); err != nil {
			p.fail(KeyGPUPools, fmt.Sprintf("[%d] cannot be read: %v", i, err), `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"]}]`)
			continue
		}
		if pool.RunnerScaleSetName == "" && pool.Name != "" {
			pool.RunnerScaleSetName = "lux-" + pool.Name
		}
		if pool.RunnerLabels == nil && pool.Name != "" {
			pool.RunnerLabels = []string{"self-hosted", "linux", "amd64", "cuda", "gpu", pool.Name}
		}
		if pool.WarmSchedule != nil {
			pool.Warm = pool.WarmSchedule.parse(pool.GPULimit, pool.JobForm, func(field, problem string) {
				pool.warmProblems = append(pool.warmProblems, fieldProblem{field, problem})
			})
		}
		pools = append(pools, pool)
	}
	return pools
}

// Pools are every pool the stack runs: each configured pool (GPUPools), followed by its
// on-demand retry twin when it has one (RetryTwin), derived here rather than kept in the
// configuration. What registers, prices or checks NodePools and scale sets reads these.
func (c *Config) Pools() []GPUPool {
	var out []GPUPool
	for _, p := range c.GPUPools {
		out = append(out, p)
		if p.OnDemandRetry {
			out = append(out, p.RetryTwin())
		}
	}
	return out
}
