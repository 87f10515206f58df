package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/luxfi/lux-gpu-ci/instancetypes"
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
	// cold node writes every image it pulls: gp3's baseline is 125 MiB/s and 3,000 IOPS.
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
	// WarmSchedule is the pool's warm capacity as the stack file gives it (its `warm`
	// field); Warm is that schedule, validated.
	WarmSchedule *WarmSchedule `json:"warm,omitempty"`
	Warm         *Warm         `json:"-"`
	// RetryTwinOf is, on a twin, the name of the pool it retries for (never configured).
	RetryTwinOf string `json:"-"`
	// warmProblems are what is wrong with WarmSchedule (problems reports them).
	warmProblems []fieldProblem
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

// validRunnerGroup: a runner group's name as GitHub shows it.
func validRunnerGroup(g string) bool {
	return g == strings.TrimSpace(g) && !strings.ContainsAny(g, "\n\t") && len(g) <= 100
}

var (
	dnsLabelRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	runnerLabelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	// An EBS snapshot ID: snap- and 8 (older) or 17 hexadecimal digits.
	snapshotIDRE = regexp.MustCompile(`^snap-([0-9a-f]{8}|[0-9a-f]{17})$`)
)

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
		if pool.OnDemandRetry {
			// Validated with the others: its names must fit and be unique too.
			pools = append(pools, pool.RetryTwin())
		}
	}
	return pools
}

func (c *Config) validatePools(p *parser) {
	names, scaleSets := map[string]bool{}, map[string]bool{}
	i := -1 // the pool's index in gpuPools; a twin follows its pool
	for n, pool := range c.GPUPools {
		var problems []fieldProblem
		at := ""
		if pool.RetryTwinOf != "" {
			// A twin's own fields come from its pool; only its derived names can be wrong.
			at = fmt.Sprintf("[%d] (%s)", i, pool.RetryTwinOf)
			if len(pool.Name) > 50 {
				problems = append(problems, fieldProblem{"onDemandRetry", fmt.Sprintf("the twin's NodePool %q is longer than 50 characters; shorten name", pool.Name)})
			}
			if len(pool.RunnerScaleSetName) > 45 {
				problems = append(problems, fieldProblem{"onDemandRetry", fmt.Sprintf("the twin's scale set %q is longer than 45 characters (ARC's limit); shorten runnerScaleSetName", pool.RunnerScaleSetName)})
			}
			if n := len(pool.RunnerLabels); n > 0 && len(pool.RunnerLabels[n-1]) > 255 {
				problems = append(problems, fieldProblem{"onDemandRetry", fmt.Sprintf("the twin's label %q is 256 characters or more; shorten the last of runnerLabels", pool.RunnerLabels[n-1])})
			}
		} else {
			i++
			at = fmt.Sprintf("[%d]", i)
			if pool.Name != "" {
				at = fmt.Sprintf("[%d] (%s)", i, pool.Name)
			}
			problems = append(pool.problems(), compilerCacheProblems(pool, c.GPUPools)...)
		}
		// Within the stack, as across stacks (ScaleSetClashes): a labels-form runs-on of one
		// scale set must not reach another.
		for _, other := range c.GPUPools[:n] {
			if len(pool.RunnerLabels) > 0 && len(other.RunnerLabels) > 0 && (subset(pool.RunnerLabels, other.RunnerLabels) || subset(other.RunnerLabels, pool.RunnerLabels)) {
				problems = append(problems, fieldProblem{"runnerLabels", fmt.Sprintf("[%s] and pool %s's [%s]: one contains the other, so a labels-form runs-on may land on either; give each pool a label of its own", strings.Join(pool.RunnerLabels, ","), other.Name, strings.Join(other.RunnerLabels, ","))})
			}
		}
		// Across pools: each names its own NodePool and scale set.
		if pool.Name != "" && names[pool.Name] {
			problems = append(problems, fieldProblem{"name", fmt.Sprintf("%q is used by two pools", pool.Name)})
		}
		names[pool.Name] = true
		if scaleSets[pool.RunnerScaleSetName] {
			problems = append(problems, fieldProblem{"runnerScaleSetName", fmt.Sprintf("%q is used by two pools", pool.RunnerScaleSetName)})
		}
		scaleSets[pool.RunnerScaleSetName] = true
		for _, pr := range problems {
			example := fmt.Sprintf(`[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "%s": …}]`, pr.field)
			if strings.HasPrefix(pr.field, "warm") {
				example = warmExample
			}
			p.fail(KeyGPUPools, fmt.Sprintf("%s.%s: %s", at, pr.field, pr.problem), example)
		}
	}
}

// warmExample is the fix shown for a bad warm schedule.
const warmExample = `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "warm": {"timeZone": "Europe/Berlin", "windows": [{"days": "mon-fri", "from": "08:00", "to": "19:00", "nodes": 1}]}}]`

// fieldProblem is what is wrong with one field of a pool.
type fieldProblem struct{ field, problem string }

// problems checks one pool on its own.
func (pool GPUPool) problems() []fieldProblem {
	var out []fieldProblem
	bad := func(field, problem string) { out = append(out, fieldProblem{field, problem}) }

	switch {
	case pool.Name == "":
		bad("name", "is required")
	case len(pool.Name) > 50 || !dnsLabelRE.MatchString(pool.Name):
		bad("name", fmt.Sprintf("%q must be a DNS label (lower-case letters, digits, '-'), at most 50 characters", pool.Name))
	}

	if len(pool.InstanceTypes) == 0 {
		bad("instanceTypes", "is empty; Karpenter could launch nothing")
	}
	for _, it := range pool.InstanceTypes {
		if _, ok := instancetypes.Lookup(it); !ok {
			bad("instanceTypes", fmt.Sprintf("%q is not a known NVIDIA GPU instance type (known: %s)", it, strings.Join(instancetypes.Names(), ", ")))
		}
	}
	if d := firstDuplicate(pool.InstanceTypes); d != "" {
		bad("instanceTypes", fmt.Sprintf("%q is listed twice", d))
	}
	if len(pool.CapacityTypes) == 0 {
		bad("capacityTypes", `is empty; use ["spot"], ["on-demand"] or both`)
	}
	for _, ct := range pool.CapacityTypes {
		if ct != CapacitySpot && ct != CapacityOnDemand {
			bad("capacityTypes", fmt.Sprintf("%q is not spot or on-demand", ct))
		}
	}
	if d := firstDuplicate(pool.CapacityTypes); d != "" {
		bad("capacityTypes", fmt.Sprintf("%q is listed twice", d))
	}
	if pool.GPULimit < 1 || pool.GPULimit > 64 {
		bad("gpuLimit", fmt.Sprintf("must be 1–64, got %d", pool.GPULimit))
	}
	for _, d := range []struct {
		field        string
		value        Duration
		neverAllowed bool
	}{
		{"consolidateAfter", pool.ConsolidateAfter, false}, {"expireAfter", pool.ExpireAfter, true}, {"terminationGracePeriod", pool.TerminationGracePeriod, false},
	} {
		if problem := d.value.problem(d.neverAllowed); problem != "" {
			bad(d.field, problem)
		}
	}
	if pool.RootVolumeGi < 20 || pool.RootVolumeGi > 16384 {
		bad("rootVolumeGi", fmt.Sprintf("must be 20–16384 GiB, got %d", pool.RootVolumeGi))
	}

	switch t := pool.RootVolumeThroughput; {
	case t < GP3BaselineThroughput || t > 1000:
		bad("rootVolumeThroughput", fmt.Sprintf("must be %d–1000 MiB/s (gp3's range), got %d", GP3BaselineThroughput, t))
	case pool.RootVolumeIOPS > 0 && t*4 > pool.RootVolumeIOPS:
		bad("rootVolumeThroughput", fmt.Sprintf("%d MiB/s needs at least %d IOPS (gp3 gives at most 0.25 MiB/s per IOPS); raise rootVolumeIOPS to %d or lower rootVolumeThroughput", t, t*4, t*4))
	}
	switch n := pool.RootVolumeIOPS; {
	case n < GP3BaselineIOPS || n > 16000:
		bad("rootVolumeIOPS", fmt.Sprintf("must be %d–16000 (gp3's range), got %d", GP3BaselineIOPS, n))
	case n > 500*pool.RootVolumeGi:
		bad("rootVolumeIOPS", fmt.Sprintf("%d IOPS needs a volume of at least %d GiB (gp3 gives at most 500 IOPS per GiB); raise rootVolumeGi", n, (n+499)/500))
	}

	if sn := pool.RunnerScaleSetName; len(sn) > 45 || !dnsLabelRE.MatchString(sn) {
		bad("runnerScaleSetName", fmt.Sprintf("%q must be lower-case letters, digits and '-', at most 45 characters (ARC's limit)", sn))
	}
	if g := pool.RunnerGroup; g != "" && !validRunnerGroup(g) {
		bad("runnerGroup", fmt.Sprintf("%q must be a runner group's name as GitHub shows it (no surrounding spaces, at most 100 characters)", g))
	}
	if len(pool.RunnerLabels) == 0 {
		bad("runnerLabels", "is empty; give at least one label for runs-on")
	}
	for _, l := range pool.RunnerLabels {
		if len(l) > 255 || !runnerLabelRE.MatchString(l) {
			bad("runnerLabels", fmt.Sprintf("%q must be lower-case letters, digits, '.', '_' or '-', under 256 characters", l))
		}
	}
	if d := firstDuplicate(pool.RunnerLabels); d != "" {
		bad("runnerLabels", fmt.Sprintf("%q is listed twice", d))
	}
	// A label that names a GPU model as a word of its own (t4, prod-t4, t4-container) promises
	// that GPU to the jobs that ask for it: every instance type must have it.
	for _, l := range pool.RunnerLabels {
		for _, word := range strings.FieldsFunc(l, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
			if !instancetypes.IsGPUModel(word) {
				continue
			}
			for _, it := range pool.InstanceTypes {
				if g, ok := instancetypes.Lookup(it); ok && g.GPUModel != word {
					bad("runnerLabels", fmt.Sprintf("%q promises an NVIDIA %s, but %s has an %s: take %s out of instanceTypes, or use a label that names no GPU", l, strings.ToUpper(word), it, strings.ToUpper(g.GPUModel), it))
				}
			}
		}
	}
	if pool.MaxRunners < 1 || pool.MaxRunners > pool.GPULimit {
		bad("maxRunners", fmt.Sprintf("must be 1–gpuLimit (%d): each runner takes one GPU, got %d", pool.GPULimit, pool.MaxRunners))
	}
	if img := pool.RunnerImage; img != versions.RunnerImage && (img == "" || strings.HasSuffix(img, ":latest") || !strings.ContainsAny(img, ":@")) {
		bad("runnerImage", fmt.Sprintf("%q must be pinned to a tag or digest (or leave runnerImage out to follow the current runner, %s)", img, versions.RunnerImage))
	}
	if id := pool.ImageSnapshotID; id != "" && !snapshotIDRE.MatchString(id) {
		bad("imageSnapshotID", fmt.Sprintf("%q is not an EBS snapshot ID (snap- and 17 hexadecimal digits, as aws ec2 describe-snapshots shows it); leave it out to pull images", id))
	}
	if pool.OnDemandRetry && !pool.Allows(CapacitySpot) {
		bad("onDemandRetry", "the pool uses no spot capacity, so nothing interrupts it: its twin would be the same pool; leave onDemandRetry out")
	}
	if pool.JobForm != JobFormRunner && pool.JobForm != JobFormContainer {
		bad("jobForm", fmt.Sprintf("%q is not %q (steps run in the runner, which holds the GPU) or %q (every job declares container:, and its pod gets the GPU)", pool.JobForm, JobFormRunner, JobFormContainer))
	}
	if pool.Warm != nil {
		// A window's CronJob is <name>-warm-<i>, and a CronJob's name is at most 52 characters
		// (its Jobs' names add 11).
		if n := len(fmt.Sprintf("%s-warm-%d", pool.Name, len(pool.Warm.Windows)-1)); n > 52 {
			bad("warm", fmt.Sprintf("the window CronJobs' names, %s-warm-<i>, are %d characters, past Kubernetes' 52 for a CronJob: shorten name", pool.Name, n))
		}
	}
	return append(out, pool.warmProblems...)
}
