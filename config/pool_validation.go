package config

// A pool's validation: each field on its own (problems), a twin's derived names
// (twinProblems), and the pools against each other (validatePools). Every problem names its
// field; validatePools names the pool and the key, and gives the fix.

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/luxfi/lux-gpu-ci/instancetypes"
	"github.com/luxfi/lux-gpu-ci/versions"
)

var (
	dnsLabelRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	runnerLabelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	// An EBS snapshot ID: snap- and 8 (older) or 17 hexadecimal digits.
	snapshotIDRE = regexp.MustCompile(`^snap-([0-9a-f]{8}|[0-9a-f]{17})$`)
)

// validRunnerGroup: a runner group's name as GitHub shows it.
func validRunnerGroup(g string) bool {
	return g == strings.TrimSpace(g) && !strings.ContainsAny(g, "\n\t") && len(g) <= 100
}

func (c *Config) validatePools(p *parser) {
	// Every pool the stack runs, a twin after its pool: a twin's own fields come from its
	// pool, so only its derived names can be wrong; it is named by its pool's index.
	type checked struct {
		pool     GPUPool
		at       string
		problems []fieldProblem
	}
	var all []checked
	for i, pool := range c.GPUPools {
		at := fmt.Sprintf("[%d]", i)
		if pool.Name != "" {
			at = fmt.Sprintf("[%d] (%s)", i, pool.Name)
		}
		all = append(all, checked{pool, at, append(pool.problems(), compilerCacheProblems(pool, c.GPUPools)...)})
		if pool.OnDemandRetry {
			twin := pool.RetryTwin()
			all = append(all, checked{twin, fmt.Sprintf("[%d] (%s)", i, pool.Name), twin.twinProblems()})
		}
	}
	names, scaleSets := map[string]bool{}, map[string]bool{}
	for n, e := range all {
		pool, problems := e.pool, e.problems
		// Within the stack, as across stacks (ScaleSetClashes): a labels-form runs-on of one
		// scale set must not reach another.
		for _, other := range all[:n] {
			o := other.pool
			if len(pool.RunnerLabels) > 0 && len(o.RunnerLabels) > 0 && (subset(pool.RunnerLabels, o.RunnerLabels) || subset(o.RunnerLabels, pool.RunnerLabels)) {
				problems = append(problems, fieldProblem{"runnerLabels", fmt.Sprintf("[%s] and pool %s's [%s]: one contains the other, so a labels-form runs-on may land on either; give each pool a label of its own", strings.Join(pool.RunnerLabels, ","), o.Name, strings.Join(o.RunnerLabels, ","))})
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
			p.fail(KeyGPUPools, fmt.Sprintf("%s.%s: %s", e.at, pr.field, pr.problem), example)
		}
	}
}

// twinProblems checks what a retry twin derives from its pool: its names must still fit.
func (t GPUPool) twinProblems() []fieldProblem {
	var out []fieldProblem
	if len(t.Name) > 50 {
		out = append(out, fieldProblem{"onDemandRetry", fmt.Sprintf("the twin's NodePool %q is longer than 50 characters; shorten name", t.Name)})
	}
	if len(t.RunnerScaleSetName) > 45 {
		out = append(out, fieldProblem{"onDemandRetry", fmt.Sprintf("the twin's scale set %q is longer than 45 characters (ARC's limit); shorten runnerScaleSetName", t.RunnerScaleSetName)})
	}
	if n := len(t.RunnerLabels); n > 0 && len(t.RunnerLabels[n-1]) > 255 {
		out = append(out, fieldProblem{"onDemandRetry", fmt.Sprintf("the twin's label %q is 256 characters or more; shorten the last of runnerLabels", t.RunnerLabels[n-1])})
	}
	return out
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
	// A container-form pool's runners share one account that may start, read and exec into
	// every job pod of the pool: one job of the pool can reach the others (k8s.ContainerHooksRules).
	if pool.JobForm == JobFormContainer {
		switch {
		case pool.RunnerGroup == "":
			bad("runnerGroup", "is not set, so the pool's runners are in the organization's Default group, which every repository may use: a container-form pool's jobs can reach each other's pods, so name a runner group that admits only trusted repositories (docs/operations.md, \"What a job can reach\"), and set trustedRepositoriesOnly: true")
		case !pool.TrustedRepositoriesOnly:
			bad("trustedRepositoriesOnly", fmt.Sprintf("is not true: a container-form pool's jobs can reach each other's pods, so its runner group must admit only trusted repositories (no public repository, no fork's pull request); limit group %q so in the organization's settings, then set trustedRepositoriesOnly: true (gpuci verify checks the group)", pool.RunnerGroup))
		}
	}
	if pool.Warm != nil {
		// A window's CronJob is <name>-warm-<i>, and a CronJob's name is at most 52 characters
		// (its Jobs' names add 11).
		if n := len(fmt.Sprintf("%s-warm-%d", pool.Name, len(pool.Warm.Windows)-1)); n > 52 {
			bad("warm", fmt.Sprintf("the window CronJobs' names, %s-warm-<i>, are %d characters, past Kubernetes' 52 for a CronJob: shorten name", pool.Name, n))
		}
		// A job's pod takes a warm node by preemption: the placeholder goes, and the scheduler
		// binds the job's pod on its next attempt. In that gap the node is empty, and Karpenter
		// counts consolidateAfter from a node's last pod event (sigs.k8s.io/karpenter v1.14.1
		// pkg/controllers/nodeclaim/disruption/consolidation.go): under the floor it could take
		// the warm node from the job it was kept for.
		if ca := pool.ConsolidateAfter.Std(); ca < WarmConsolidateAfterFloor {
			bad("consolidateAfter", fmt.Sprintf("is %s, under %s for a pool with warm windows: a job takes a warm node by preemption, and Karpenter could find the node empty in the second between the placeholder's exit and the job's binding; set at least %q", ca, WarmConsolidateAfterFloor, WarmConsolidateAfterFloor.String()))
		}
	}
	return append(out, pool.warmProblems...)
}
