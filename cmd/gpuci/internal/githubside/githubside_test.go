package githubside_test

// Against an httptest GitHub answering in the REST API's shapes (GitHub's REST reference:
// "List self-hosted runner groups for an organization", "List repository access to a
// self-hosted runner group", "Get an environment", "List deployment branch policies").

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-github/v93/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/githubside"
)

func fakeGitHub(t *testing.T, routes map[string]any) *github.Client {
	t.Helper()
	mux := http.NewServeMux()
	for route, body := range routes {
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			require.NoError(t, json.NewEncoder(w).Encode(body))
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	gh, err := github.NewClient(github.WithEnterpriseURLs(srv.URL, srv.URL))
	require.NoError(t, err)
	return gh
}

type repo struct {
	FullName string `json:"full_name"`
	Private  bool   `json:"private"`
}

func TestATrustedGroupIsCheckedAsGitHubHasIt(t *testing.T) {
	group := func(id int, name, visibility string, public bool) map[string]any {
		return map[string]any{"id": id, "name": name, "visibility": visibility, "allows_public_repositories": public, "default": false}
	}
	gh := fakeGitHub(t, map[string]any{
		"GET /api/v3/orgs/luxfi/actions/runner-groups": map[string]any{"total_count": 4, "runner_groups": []any{
			group(1, "Default", "all", false), group(2, "gpu-trusted", "selected", false),
			group(3, "gpu-open", "selected", true), group(4, "gpu-all", "all", false),
		}},
		"GET /api/v3/orgs/luxfi/actions/runner-groups/2/repositories": map[string]any{"total_count": 2, "repositories": []repo{{"luxfi/engine", true}, {"luxfi/kernels", true}}},
		"GET /api/v3/orgs/luxfi/actions/runner-groups/3/repositories": map[string]any{"total_count": 1, "repositories": []repo{{"luxfi/site", false}}},
		"GET /api/v3/orgs/luxfi/actions/runner-groups/4/repositories": map[string]any{"total_count": 0, "repositories": []repo{}},
	})
	checks := githubside.RunnerGroups(context.Background(), gh, "luxfi", []string{"gpu-trusted", "gpu-open", "gpu-all", "gpu-missing"})
	require.Len(t, checks, 4)
	byGroup := map[string]githubside.Check{}
	for i, g := range []string{"gpu-trusted", "gpu-open", "gpu-all", "gpu-missing"} {
		byGroup[g] = checks[i]
	}
	assert.True(t, byGroup["gpu-trusted"].OK, "%+v", byGroup["gpu-trusted"])
	assert.Contains(t, byGroup["gpu-trusted"].Evidence, "2 repositories: luxfi/engine, luxfi/kernels")
	assert.False(t, byGroup["gpu-open"].OK)
	assert.Contains(t, byGroup["gpu-open"].Evidence, "it admits public repositories")
	assert.Contains(t, byGroup["gpu-open"].Evidence, "it lists the public repository luxfi/site")
	assert.False(t, byGroup["gpu-all"].OK)
	assert.Contains(t, byGroup["gpu-all"].Evidence, `its visibility is "all"`)
	assert.False(t, byGroup["gpu-missing"].OK)
	assert.Contains(t, byGroup["gpu-missing"].Evidence, `no runner group "gpu-missing"`)
	for g, c := range byGroup {
		if !c.OK {
			assert.NotEmpty(t, c.Fix, "%s says how to fix it", g)
		}
	}
}

func TestADeployEnvironmentAdmitsMainOnly(t *testing.T) {
	custom := map[string]any{"protected_branches": false, "custom_branch_policies": true}
	gh := fakeGitHub(t, map[string]any{
		"GET /api/v3/repos/luxfi/lux-gpu-ci/environments/dev":  map[string]any{"name": "dev", "deployment_branch_policy": custom},
		"GET /api/v3/repos/luxfi/lux-gpu-ci/environments/prod": map[string]any{"name": "prod", "deployment_branch_policy": nil},
		"GET /api/v3/repos/luxfi/lux-gpu-ci/environments/stg":  map[string]any{"name": "stg", "deployment_branch_policy": custom},
		"GET /api/v3/repos/luxfi/lux-gpu-ci/environments/qa":   map[string]any{"name": "qa", "deployment_branch_policy": map[string]any{"protected_branches": true, "custom_branch_policies": false}},
		"GET /api/v3/repos/luxfi/lux-gpu-ci/environments/dev/deployment-branch-policies": map[string]any{"total_count": 1,
			"branch_policies": []any{map[string]any{"id": 1, "name": "main", "type": "branch"}}},
		"GET /api/v3/repos/luxfi/lux-gpu-ci/environments/stg/deployment-branch-policies": map[string]any{"total_count": 2,
			"branch_policies": []any{map[string]any{"id": 1, "name": "main", "type": "branch"}, map[string]any{"id": 2, "name": "*", "type": "branch"}}},
	})
	ctx := context.Background()
	dev := githubside.DeployEnvironment(ctx, gh, "luxfi/lux-gpu-ci", "dev")
	assert.True(t, dev.OK, "%+v", dev)
	assert.Equal(t, "admits branch main; no required reviewers", dev.Evidence)
	prod := githubside.DeployEnvironment(ctx, gh, "luxfi/lux-gpu-ci", "prod")
	assert.False(t, prod.OK)
	assert.Contains(t, prod.Evidence, "admits every branch")
	stg := githubside.DeployEnvironment(ctx, gh, "luxfi/lux-gpu-ci", "stg")
	assert.False(t, stg.OK, "a second rule admits any branch: %+v", stg)
	qa := githubside.DeployEnvironment(ctx, gh, "luxfi/lux-gpu-ci", "qa")
	assert.False(t, qa.OK)
	assert.Contains(t, qa.Evidence, "every protected branch")
	missing := githubside.DeployEnvironment(ctx, gh, "luxfi/lux-gpu-ci", "nope")
	assert.False(t, missing.OK)
	assert.Contains(t, missing.Evidence, "404")
}

// The repositories the pools serve, which the retrier's token should reach: a group of selected
// repositories gives its private ones (not its public or archived ones); the default group
// (the pools' "" group), visible to all, gives every private or internal repository of the
// organization; a group the organization lacks is an error, not an empty list.
func TestTheRepositoriesThePoolsServe(t *testing.T) {
	type listed struct {
		FullName   string `json:"full_name"`
		Private    bool   `json:"private"`
		Visibility string `json:"visibility,omitempty"`
		Archived   bool   `json:"archived"`
	}
	gh := fakeGitHub(t, map[string]any{
		"GET /api/v3/orgs/luxfi/actions/runner-groups": map[string]any{"total_count": 2, "runner_groups": []any{
			map[string]any{"id": 1, "name": "Default", "visibility": "all", "default": true},
			map[string]any{"id": 2, "name": "gpu-trusted", "visibility": "selected", "default": false},
		}},
		"GET /api/v3/orgs/luxfi/actions/runner-groups/2/repositories": map[string]any{"total_count": 3, "repositories": []listed{
			{FullName: "luxfi/kernels", Private: true}, {FullName: "luxfi/site"}, {FullName: "luxfi/old", Private: true, Archived: true},
		}},
		"GET /api/v3/orgs/luxfi/repos": []listed{
			{FullName: "luxfi/engine", Private: true, Visibility: "private"}, {FullName: "luxfi/tools", Private: true, Visibility: "internal"},
			{FullName: "luxfi/site", Visibility: "public"}, {FullName: "luxfi/old", Private: true, Visibility: "private", Archived: true},
		},
	})
	ctx := context.Background()
	served, err := githubside.ServedRepositories(ctx, gh, "luxfi", []string{"gpu-trusted"})
	require.NoError(t, err)
	assert.Equal(t, []string{"luxfi/kernels"}, served)

	served, err = githubside.ServedRepositories(ctx, gh, "luxfi", []string{"gpu-trusted", ""})
	require.NoError(t, err)
	assert.Equal(t, []string{"luxfi/engine", "luxfi/kernels", "luxfi/tools"}, served)

	_, err = githubside.ServedRepositories(ctx, gh, "luxfi", []string{"gpu-missing"})
	assert.ErrorContains(t, err, `no runner group "gpu-missing"`)
}
