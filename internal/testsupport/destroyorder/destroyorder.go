// Package destroyorder checks the program's destroy-order contracts (internal/lifelines) on a
// deployment's graph, for the unit tests (the program's graph under mocks) and the e2e (a
// real stack's state, pulumi-eks's children included): what the Kubernetes layer needs while
// its finalizers run must be a real, transitive dependency of it.
package destroyorder

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"

	"github.com/luxfi/lux-gpu-ci/internal/lifelines"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/mockstack"
)

// Node is one resource of a deployment, with what the engine orders its delete by.
type Node struct {
	URN, Type, Parent string
	Custom            bool
	// Deps are the URNs it depends on: dependsOn, property dependencies and its provider.
	Deps []string
}

// Graph is a deployment's resources by URN.
type Graph map[string]*Node

// GraphFromMocks is the graph of the program run under mocks (no children of pulumi-eks's
// remote components: their code does not run there).
func GraphFromMocks(regs []mockstack.Registration) Graph {
	g := Graph{}
	for _, r := range regs {
		rpc := r.Raw.RegisterRPC
		n := &Node{URN: r.URN, Type: r.Type, Parent: rpc.GetParent(), Custom: r.Raw.Custom}
		n.Deps = append(n.Deps, rpc.GetDependencies()...)
		for _, deps := range rpc.GetPropertyDependencies() {
			n.Deps = append(n.Deps, deps.GetUrns()...)
		}
		if p := providerURN(r.Raw.Provider); p != "" {
			n.Deps = append(n.Deps, p)
		}
		g[n.URN] = n
	}
	return g
}

// GraphFromDeployment is the graph of a real stack's state (`pulumi stack export`), which
// holds the children pulumi-eks's components create too.
func GraphFromDeployment(d apitype.UntypedDeployment) (Graph, error) {
	var dep apitype.DeploymentV3
	if err := json.Unmarshal(d.Deployment, &dep); err != nil {
		return nil, fmt.Errorf("reading the deployment: %w", err)
	}
	g := Graph{}
	for _, r := range dep.Resources {
		if r.Delete {
			continue
		}
		n := &Node{URN: string(r.URN), Type: string(r.Type), Parent: string(r.Parent), Custom: r.Custom}
		for _, u := range r.Dependencies {
			n.Deps = append(n.Deps, string(u))
		}
		for _, us := range r.PropertyDependencies {
			for _, u := range us {
				n.Deps = append(n.Deps, string(u))
			}
		}
		if p := providerURN(r.Provider); p != "" {
			n.Deps = append(n.Deps, p)
		}
		g[n.URN] = n
	}
	return g, nil
}

// providerURN strips the ID from a provider reference ("urn::id").
func providerURN(ref string) string {
	if i := strings.LastIndex(ref, "::"); i > 0 {
		return ref[:i]
	}
	return ""
}

// Under tells whether n is a descendant of a resource of type ancestor.
func (g Graph) Under(n *Node, ancestor string) bool {
	for p := g[n.Parent]; p != nil; p = g[p.Parent] {
		if p.Type == ancestor {
			return true
		}
	}
	return false
}

// DependsOn is everything n transitively depends on, as the engine's dependency graph
// (pkg/resource/graph) sees it: its dependencies, property dependencies and provider, and for
// a dependency on a component, every descendant of that component. (The SDK records a local
// component as its children, without nesting under custom resources; a remote component,
// such as pulumi-eks's, as itself.)
func (g Graph) DependsOn(urn string) map[string]bool {
	children := map[string][]string{}
	for u, n := range g {
		children[n.Parent] = append(children[n.Parent], u)
	}
	seen := map[string]bool{}
	var visit, descend func(u string)
	descend = func(u string) {
		for _, c := range children[u] {
			visit(c)
			descend(c)
		}
	}
	visit = func(u string) {
		if seen[u] {
			return
		}
		seen[u] = true
		n := g[u]
		if n == nil {
			return
		}
		for _, d := range n.Deps {
			visit(d)
		}
		if !n.Custom {
			descend(u)
		}
	}
	for _, d := range g[urn].Deps {
		visit(d)
	}
	return seen
}

// Lifeline is a destroy-order rule: every dependent must (transitively) depend on every
// lifeline, so the engine deletes the dependents first, whatever it is asked to destroy.
type Lifeline struct {
	// What the dependents are and why they need the lifelines.
	Dependents, Why string
	IsDependent     func(g Graph, n *Node) bool
	IsLifeline      func(g Graph, n *Node) bool
}

// RuleOf is the program's contract as a rule on a graph.
func RuleOf(c lifelines.Contract) Lifeline {
	under := func(g Graph, n *Node, ancestors ...string) bool {
		return slices.ContainsFunc(ancestors, func(a string) bool { return g.Under(n, a) })
	}
	return Lifeline{
		Dependents: c.Dependents, Why: c.Why,
		IsDependent: func(g Graph, n *Node) bool {
			return under(g, n, c.DependentsUnder...) && (len(c.DependentTypes) == 0 || slices.Contains(c.DependentTypes, n.Type))
		},
		IsLifeline: func(g Graph, n *Node) bool {
			return slices.Contains(c.LifelineTypes, n.Type) && (c.LifelinesUnder == "" || g.Under(n, c.LifelinesUnder))
		},
	}
}

// Rules are the program's destroy-order contracts (lifelines.All), as rules.
var Rules = func() []Lifeline {
	var out []Lifeline
	for _, c := range lifelines.All {
		out = append(out, RuleOf(c))
	}
	return out
}()

// Violations checks the rules. For each rule some dependents break, it returns one report:
// the rule, and each lifeline with how many dependents do not depend on it. A rule that
// finds no dependents or no lifelines is a violation too: it would pass by checking nothing.
func (g Graph) Violations(rules []Lifeline) []string {
	urns := make([]string, 0, len(g))
	for u := range g {
		urns = append(urns, u)
	}
	sort.Strings(urns)
	var out []string
	for _, rule := range rules {
		var dependents, lifelines []string
		for _, u := range urns {
			// Components have nothing to delete: only custom resources (and providers) count.
			if g[u].Custom && rule.IsDependent(g, g[u]) {
				dependents = append(dependents, u)
			}
			if rule.IsLifeline(g, g[u]) {
				lifelines = append(lifelines, u)
			}
		}
		if len(dependents) == 0 || len(lifelines) == 0 {
			out = append(out, fmt.Sprintf("%s: found %d dependents and %d lifelines; the rule checks nothing", rule.Dependents, len(dependents), len(lifelines)))
			continue
		}
		missing := map[string][]string{}
		for _, d := range dependents {
			deps := g.DependsOn(d)
			for _, l := range lifelines {
				if !deps[l] {
					missing[l] = append(missing[l], key(d))
				}
			}
		}
		var lines []string
		for _, l := range lifelines {
			if ds := missing[l]; len(ds) > 0 {
				lines = append(lines, fmt.Sprintf("  %s — %d of %d do not (e.g. %s)", key(l), len(ds), len(dependents), ds[0]))
			}
		}
		if len(lines) > 0 {
			out = append(out, fmt.Sprintf("%s must depend on each of these, because %s:\n%s",
				rule.Dependents, rule.Why, strings.Join(lines, "\n")))
		}
	}
	return out
}

// key shortens a URN to "type::name".
func key(urn string) string { return mockstack.URNKey(urn) }
