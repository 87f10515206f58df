// Package githubside checks what the stack's boundaries rest on in GitHub's settings, through
// GitHub's REST API (go-github): the runner groups the stack file calls trusted, and the
// deploying repository's environments. gpuci verify reports each as a check, gpuci doctor each
// failing one as a finding. The stack file can say a group admits only trusted repositories;
// only GitHub can say whether it does.
package githubside

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-github/v93/github"

	"github.com/luxfi/lux-gpu-ci/config"
)

// Check is one fact of GitHub's settings, held or not, with its evidence and its fix.
type Check struct {
	Name     string `json:"name"`
	OK       bool   `json:"ok"`
	Evidence string `json:"evidence"`
	Fix      string `json:"fix,omitempty"`
}

// TrustedGroups are the runner groups the stack file says admit only trusted repositories:
// each pool's with trustedRepositoriesOnly, and the retry runner's (its account reads the
// cluster's events), by name.
func TrustedGroups(cfg *config.Config) []string {
	var out []string
	for _, p := range cfg.GPUPools {
		if p.TrustedRepositoriesOnly && !slices.Contains(out, p.RunnerGroup) {
			out = append(out, p.RunnerGroup)
		}
	}
	if g := cfg.RetryRunner.RunnerGroup; g != "" && !slices.Contains(out, g) {
		out = append(out, g)
	}
	return out
}

// PoolGroups are the runner groups of the stack's pools, each once ("" the organization's
// default group).
func PoolGroups(cfg *config.Config) []string {
	var out []string
	for _, p := range cfg.Pools() {
		if !slices.Contains(out, p.RunnerGroup) {
			out = append(out, p.RunnerGroup)
		}
	}
	return out
}

// RunnerGroups checks each group the stack file trusts: it exists in the organization, admits
// no public repository, and only the repositories it lists (visibility "selected"; "all" is
// every repository of the organization, and "private" every private one). The evidence names
// the repositories. A token needs the organization's "Self-hosted runners: read" (fine-grained)
// or admin:org (classic).
func RunnerGroups(ctx context.Context, gh *github.Client, org string, groups []string) []Check {
	var out []Check
	if len(groups) == 0 {
		return nil
	}
	all, err := listGroups(ctx, gh, org)
	for _, name := range groups {
		c := Check{Name: fmt.Sprintf("runner group %q admits only trusted repositories", name)}
		if err != nil {
			c.Evidence, c.Fix = "GitHub: "+err.Error(), "a token that may read the organization's runner groups (Self-hosted runners: read)"
			out = append(out, c)
			continue
		}
		i := slices.IndexFunc(all, func(g *github.RunnerGroup) bool { return g.GetName() == name })
		if i < 0 {
			c.Evidence = fmt.Sprintf("the organization %s has no runner group %q", org, name)
			c.Fix = "create it under Organization settings → Actions → Runner groups, with selected repositories and no public ones"
			out = append(out, c)
			continue
		}
		g := all[i]
		var problems []string
		if g.GetAllowsPublicRepositories() {
			problems = append(problems, "it admits public repositories (a fork's pull request runs there)")
		}
		if v := g.GetVisibility(); v != "selected" {
			problems = append(problems, fmt.Sprintf("its visibility is %q: every %srepository of the organization may use it", v, map[string]string{"private": "private "}[v]))
		}
		repos, rerr := groupRepositories(ctx, gh, org, g.GetID())
		switch {
		case rerr != nil:
			problems = append(problems, "its repositories cannot be read: "+rerr.Error())
		case g.GetVisibility() == "selected":
			for _, r := range repos {
				if !r.GetPrivate() {
					problems = append(problems, fmt.Sprintf("it lists the public repository %s", r.GetFullName()))
				}
			}
		}
		var names []string
		for _, r := range repos {
			names = append(names, r.GetFullName())
		}
		c.OK = len(problems) == 0
		c.Evidence = fmt.Sprintf("visibility %s, public repositories %t, %d repositories: %s", g.GetVisibility(), g.GetAllowsPublicRepositories(), len(repos), strings.Join(names, ", "))
		if !c.OK {
			c.Evidence = strings.Join(problems, "; ") + " (" + c.Evidence + ")"
			c.Fix = fmt.Sprintf("in Organization settings → Actions → Runner groups → %s: Repository access \"Selected repositories\" (the trusted ones), \"Allow public repositories\" off", name)
		}
		out = append(out, c)
	}
	return out
}

// ServedRepositories are the private repositories the pools' runner groups admit (groups by
// name, "" the organization's default group), archived ones left out, sorted: a group whose
// visibility is "all" or "private" admits every private repository of the organization, which
// are then read too. These are the repositories whose interrupted jobs the retrier re-runs.
func ServedRepositories(ctx context.Context, gh *github.Client, org string, groups []string) ([]string, error) {
	all, err := listGroups(ctx, gh, org)
	if err != nil {
		return nil, err
	}
	served := map[string]bool{}
	everyRepository := false
	for _, name := range groups {
		i := slices.IndexFunc(all, func(g *github.RunnerGroup) bool {
			return g.GetName() == name || (name == "" && g.GetDefault())
		})
		if i < 0 {
			return nil, fmt.Errorf("the organization %s has no runner group %q", org, name)
		}
		if all[i].GetVisibility() != "selected" {
			everyRepository = true
			continue
		}
		repos, err := groupRepositories(ctx, gh, org, all[i].GetID())
		if err != nil {
			return nil, err
		}
		for _, r := range repos {
			if !r.GetArchived() && Private(r) {
				served[r.GetFullName()] = true
			}
		}
	}
	if everyRepository {
		all, err := PrivateRepositories(ctx, gh, org)
		if err != nil {
			return nil, err
		}
		for _, r := range all {
			served[r] = true
		}
	}
	return slices.Sorted(maps.Keys(served)), nil
}

// PrivateRepositories are the organization's private and internal repositories gh can see,
// archived ones left out, sorted (never nil): every page, by 100.
func PrivateRepositories(ctx context.Context, gh *github.Client, org string) ([]string, error) {
	out := []string{}
	for repo, err := range gh.Repositories.ListByOrgIter(ctx, org, &github.RepositoryListByOrgOptions{ListOptions: github.ListOptions{PerPage: 100}}) {
		if err != nil {
			return nil, err
		}
		if !repo.GetArchived() && Private(repo) {
			out = append(out, repo.GetFullName())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Private tells a private or internal repository from a public one (GitHub's "visibility",
// or "private" where a response has no visibility).
func Private(r *github.Repository) bool {
	if v := r.GetVisibility(); v != "" {
		return v != "public"
	}
	return r.GetPrivate()
}

func listGroups(ctx context.Context, gh *github.Client, org string) ([]*github.RunnerGroup, error) {
	var all []*github.RunnerGroup
	opts := &github.ListOrgRunnerGroupOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		page, resp, err := gh.Actions.ListOrganizationRunnerGroups(ctx, org, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, page.RunnerGroups...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

func groupRepositories(ctx context.Context, gh *github.Client, org string, id int64) ([]*github.Repository, error) {
	var all []*github.Repository
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := gh.Actions.ListRepositoryAccessRunnerGroup(ctx, org, id, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Repositories...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// DeployEnvironment checks the deploying repository's environment of a stack: it admits the
// branches its own policies name (custom branch policies), and those are main alone. An
// environment with no deployment branch policy admits every branch, and any branch's job
// then holds the stack's passphrase (AWS refuses it the deploy role: identity/ trusts main's
// ref alone). Reviewers are reported, not required: a plan may have none.
func DeployEnvironment(ctx context.Context, gh *github.Client, repository, stack string) Check {
	c := Check{Name: fmt.Sprintf("environment %s of %s deploys from main only", stack, repository)}
	owner, name, _ := strings.Cut(repository, "/")
	env, _, err := gh.Repositories.GetEnvironment(ctx, owner, name, stack)
	if err != nil {
		c.Evidence, c.Fix = "GitHub: "+err.Error(), "make bootstrap with DEPLOY_REPOSITORY (and gh logged in) makes it"
		return c
	}
	fix := fmt.Sprintf("Settings → Environments → %s → Deployment branches and tags: \"Selected branches and tags\", main alone (make bootstrap sets it)", stack)
	p := env.GetDeploymentBranchPolicy()
	if p == nil || !p.GetCustomBranchPolicies() {
		c.Evidence, c.Fix = "it admits every branch (no deployment branch policy of its own)", fix
		if p != nil && p.GetProtectedBranches() {
			c.Evidence = "it admits every protected branch"
		}
		return c
	}
	policies, _, err := gh.Repositories.ListDeploymentBranchPolicies(ctx, owner, name, stack, &github.ListOptions{PerPage: 100})
	if err != nil {
		c.Evidence, c.Fix = "its branch policies cannot be read: "+err.Error(), fix
		return c
	}
	var names []string
	for _, b := range policies.BranchPolicies {
		names = append(names, b.GetType()+" "+b.GetName())
	}
	reviewers := "no required reviewers"
	for _, r := range env.ProtectionRules {
		if len(r.Reviewers) > 0 {
			reviewers = fmt.Sprintf("%d required reviewers", len(r.Reviewers))
		}
	}
	c.OK = slices.Equal(names, []string{"branch main"})
	c.Evidence = fmt.Sprintf("admits %s; %s", strings.Join(names, ", "), reviewers)
	if len(names) == 0 {
		c.Evidence = "custom branch policies, none of them: no branch may deploy"
	}
	if !c.OK {
		c.Fix = fix
	}
	return c
}
