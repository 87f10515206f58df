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
// land on either cluster, and destroying one stack deletes the other's scale set. Two
// scale sets in one organization and group with the same label set are as bad for jobs
// that use the labels form of runs-on. One message per clash, naming both stacks.
func ScaleSetClashes(stacks []*Config) []string {
	type entry struct {
		stack, pool, name, labels string
	}
	seen := map[string][]entry{} // by organization and runner group
	var out []string
	for _, c := range stacks {
		for _, p := range c.GPUPools {
			group := p.RunnerGroup
			if group == "" {
				group = DefaultRunnerGroup
			}
			// GitHub compares organization and group names without regard to case.
			where := strings.ToLower(c.GitHub.Org) + "\x00" + strings.ToLower(group)
			labels := slices.Clone(p.RunnerLabels)
			slices.Sort(labels)
			e := entry{c.Stack, p.Name, p.RunnerScaleSetName, strings.Join(labels, ",")}
			for _, o := range seen[where] {
				if o.stack == e.stack {
					continue // within a stack, validatePools already refuses a shared name
				}
				at := fmt.Sprintf("stacks %s (pool %s) and %s (pool %s), organization %s, runner group %q", o.stack, o.pool, e.stack, e.pool, c.GitHub.Org, group)
				if o.name == e.name {
					out = append(out, fmt.Sprintf("%s: both register scale set %q; give one stack's pool another runnerScaleSetName (or runnerGroup)", at, e.name))
				}
				if o.labels == e.labels {
					out = append(out, fmt.Sprintf("%s: both register labels [%s], so a labels-form runs-on reaches either; add a label that tells them apart (e.g. the stack name)", at, e.labels))
				}
			}
			seen[where] = append(seen[where], e)
		}
	}
	return out
}
