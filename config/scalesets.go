package config

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultRunnerGroup is the group ARC registers in when a pool names none.
const DefaultRunnerGroup = "Default"

// ScaleSetClashes checks stacks against each other the way GitHub sees their scale sets.
// ARC finds a scale set by name within its organization and runner group and reuses it:
// two stacks registering the same name there run two listeners on one scale set, jobs
// land on either cluster, and destroying one stack deletes the other's scale set. A job's
// labels-form runs-on reaches every runner whose labels include them all, so two scale sets
// in one organization and group where one's labels are a subset of the other's are as bad:
// the smaller set's jobs may land on the other. One message per clash, naming both stacks.
func ScaleSetClashes(stacks []*Config) []string {
	type entry struct {
		stack, pool, name string
		labels            []string // sorted
	}
	seen := map[string][]entry{} // by organization and runner group
	var out []string
	for _, c := range stacks {
		pools := c.Pools()
		if r := c.RetryRunner; r.ScaleSetName != "" {
			// The retry runner's scale set, in its own group; reached by its name only.
			pools = append(slices.Clone(pools), GPUPool{Name: "(" + KeyRetryScaleSetName + ")", RunnerScaleSetName: r.ScaleSetName, RunnerGroup: r.RunnerGroup})
		}
		for _, p := range pools {
			group := p.RunnerGroup
			if group == "" {
				group = DefaultRunnerGroup
			}
			// GitHub compares organization and group names without regard to case.
			where := strings.ToLower(c.GitHub.Org) + "\x00" + strings.ToLower(group)
			labels := slices.Clone(p.RunnerLabels)
			slices.Sort(labels)
			e := entry{c.Stack, p.Name, p.RunnerScaleSetName, labels}
			for _, o := range seen[where] {
				if o.stack == e.stack {
					continue // within a stack, validatePools already refuses a shared name
				}
				at := fmt.Sprintf("stacks %s (pool %s) and %s (pool %s), organization %s, runner group %q", o.stack, o.pool, e.stack, e.pool, c.GitHub.Org, group)
				if o.name == e.name {
					out = append(out, fmt.Sprintf("%s: both register scale set %q; give one stack's pool another runnerScaleSetName (or runnerGroup)", at, e.name))
				}
				if small, big := o.labels, e.labels; len(small) > 0 && len(big) > 0 && (subset(small, big) || subset(big, small)) {
					if !subset(small, big) {
						small, big = big, small
					}
					out = append(out, fmt.Sprintf("%s: a labels-form runs-on of [%s] also matches [%s], so its jobs may land on either; give each stack a label the other lacks (e.g. prod-t4 instead of t4)", at, strings.Join(small, ","), strings.Join(big, ",")))
				}
			}
			seen[where] = append(seen[where], e)
		}
	}
	return out
}

// subset reports whether every label of a is in b.
func subset(a, b []string) bool {
	for _, l := range a {
		if !slices.Contains(b, l) {
			return false
		}
	}
	return true
}
