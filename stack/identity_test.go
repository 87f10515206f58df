package stack_test

// The deploy identity (identity/, stack.IdentityProgram) under the mocks: who may assume each
// role, and what each may do, read from the policies the AWS provider would render.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/mockstack"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/stack"
)

// identityConfig is an identity stack serving testkit's dev and prod.
func identityConfig(kv ...string) map[string]string {
	cfg := map[string]string{
		"aws:region":                             "us-west-2",
		config.IdentityProject + ":repository":   "luxfi/lux-gpu-ci",
		config.IdentityProject + ":stacks":       `["dev", "prod"]`,
		config.IdentityProject + ":stateBackend": "s3://lux-state/gpu-ci",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		cfg[config.IdentityProject+":"+kv[i]] = kv[i+1]
	}
	return cfg
}

func runIdentity(t *testing.T, cfg map[string]string) (*mockstack.Mocks, error) {
	t.Helper()
	m := mockstack.New(config.IdentityProject, "luxfi")
	return m, m.Run(stack.IdentityProgram(testkit.FixtureDir(t)), cfg, nil)
}

// renderedPolicy is a policy document the mocks rendered (an inline policy's JSON).
func renderedPolicy(t *testing.T, doc any) fakeaws.PolicyDocument {
	t.Helper()
	s, ok := doc.(string)
	require.True(t, ok, "a rendered policy: %v", doc)
	var p fakeaws.PolicyDocument
	require.NoError(t, json.Unmarshal([]byte(s), &p), s)
	require.NotEmpty(t, p.Statement)
	return p
}

// policyNames are the managed policies registered, by physical name.
func policyNames(m *mockstack.Mocks) []string {
	var out []string
	for _, p := range m.All("aws:iam/policy:Policy") {
		out = append(out, p.Inputs["name"].(string))
	}
	return out
}

// managedPolicy is the managed policy registered with that physical name, as rendered.
func managedPolicy(t *testing.T, m *mockstack.Mocks, name string) fakeaws.PolicyDocument {
	t.Helper()
	for _, p := range m.All("aws:iam/policy:Policy") {
		if p.Inputs["name"] == name {
			return renderedPolicy(t, p.Inputs["policy"])
		}
	}
	t.Fatalf("no policy named %s; have %v", name, policyNames(m))
	return fakeaws.PolicyDocument{}
}

// roleNamed is the role registered with that physical name, with its trust and its one inline policy.
func roleNamed(t *testing.T, m *mockstack.Mocks, name string) (trust, policy fakeaws.PolicyDocument) {
	t.Helper()
	for _, r := range m.All("aws:iam/role:Role") {
		if r.Inputs["name"] != name {
			continue
		}
		inline := r.Inputs["inlinePolicies"].([]any)
		require.Len(t, inline, 1, "%s has one inline policy", name)
		return renderedPolicy(t, r.Inputs["assumeRolePolicy"]), renderedPolicy(t, inline[0].(map[string]any)["policy"])
	}
	t.Fatalf("no role named %s", name)
	return
}

// Each deploy role is assumable by one GitHub environment of one repository — its stack's —
// and the preview role by the repository's preview environment only, through GitHub's OIDC
// provider, with the audience configure-aws-credentials asks for.
func TestEachRoleTrustsOneEnvironmentOfTheRepository(t *testing.T) {
	t.Parallel()
	m, err := runIdentity(t, identityConfig())
	require.NoError(t, err)
	providers := m.All("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
	require.Len(t, providers, 1, "the account has none: it is created")
	assert.Equal(t, "https://token.actions.githubusercontent.com", providers[0].Inputs["url"])
	assert.Equal(t, []any{"sts.amazonaws.com"}, providers[0].Inputs["clientIdLists"])
	provider := "arn:aws:iam::" + mockstack.Account + ":oidc-provider/token.actions.githubusercontent.com"

	for role, env := range map[string]string{
		"lux-gpu-ci-deploy":                   "dev",  // testkit's dev: cluster lux-gpu-ci
		"lux-gpu-ci-prod-deploy":              "prod", // prod: lux-gpu-ci-prod
		"lux-gpu-ci-preview-luxfi-lux-gpu-ci": "preview",
	} {
		trust, _ := roleNamed(t, m, role)
		require.Len(t, trust.Statement, 1, role)
		s := trust.Statement[0]
		assert.Equal(t, "Allow", s.Effect)
		assert.Equal(t, []string{"sts:AssumeRoleWithWebIdentity"}, s.Action, role)
		assert.Equal(t, map[string]any{"Federated": []any{provider}}, s.Principal, role)
		ref := "refs/heads/main"
		if env == "preview" {
			ref = "refs/pull/*/merge"
		}
		assert.Equal(t, map[string]map[string][]string{
			"StringEquals": {
				"token.actions.githubusercontent.com:aud":         {"sts.amazonaws.com"},
				"token.actions.githubusercontent.com:sub":         {"repo:luxfi/lux-gpu-ci:environment:" + env},
				"token.actions.githubusercontent.com:environment": {env},
				"token.actions.githubusercontent.com:repository":  {"luxfi/lux-gpu-ci"},
			},
			"StringLike": {"token.actions.githubusercontent.com:ref": {ref}},
		}, s.Condition, "%s: only environment %s of luxfi/lux-gpu-ci, on %s", role, env, ref)
	}
	assert.Len(t, m.All("aws:iam/role:Role"), 3, "a deploy role per stack, one preview role")
	assert.ElementsMatch(t, []string{"lux-gpu-ci-boundary", "lux-gpu-ci-prod-boundary"}, policyNames(m), "a permissions boundary per stack")

	// An account with a provider already: it is used, not made again (IAM refuses a second).
	existing := "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"
	m, err = runIdentity(t, identityConfig("oidcProviderArn", existing))
	require.NoError(t, err)
	assert.Empty(t, m.All("aws:iam/openIdConnectProvider:OpenIdConnectProvider"))
	trust, _ := roleNamed(t, m, "lux-gpu-ci-deploy")
	assert.Equal(t, map[string]any{"Federated": []any{existing}}, trust.Statement[0].Principal)
}

// What a deploy role may do is its stack's: every statement names a resource of the stack, or
// holds to its region; no service is granted whole but the network's and the cluster's own.
// The preview role reads, and only what the program looks up and the state.
func TestTheRolesPermissionsAreWrittenDownAndScoped(t *testing.T) {
	t.Parallel()
	m, err := runIdentity(t, identityConfig())
	require.NoError(t, err)
	_, deploy := roleNamed(t, m, "lux-gpu-ci-prod-deploy")
	sids := map[string]fakeaws.PolicyStatement{}
	for _, s := range deploy.Statement {
		require.NotEmpty(t, s.Sid, "every statement says what it is for")
		sids[s.Sid] = s
		if s.Effect == "Deny" {
			continue
		}
		for _, a := range s.Action {
			assert.NotEqual(t, "*", a, "%s grants everything", s.Sid)
			assert.False(t, strings.HasPrefix(a, "iam:") && strings.HasSuffix(a, "*"), "%s grants IAM whole: %s", s.Sid, a)
		}
		scoped := len(s.Condition) > 0
		for _, r := range s.Resource {
			scoped = scoped || r != "*"
		}
		assert.True(t, scoped, "%s neither names a resource nor holds to a condition", s.Sid)
	}
	assert.Equal(t, []string{"arn:aws:eks:us-west-2:" + mockstack.Account + ":cluster/lux-gpu-ci-prod"}, sids["TheCluster"].Resource[:1], "the cluster is prod's")
	assert.Equal(t, map[string]map[string][]string{"StringEquals": {"aws:RequestedRegion": {"us-west-2"}}}, sids["TheNetworkAndTheSystemNodes"].Condition, "EC2 in the stack's region only")
	assert.Equal(t, []string{"arn:aws:sqs:us-west-2:" + mockstack.Account + ":lux-gpu-ci-prod-*"}, sids["TheInterruptionQueue"].Resource)
	assert.Equal(t, []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, sids["TheStacksState"].Action, "a deploy writes its state")

	_, preview := roleNamed(t, m, "lux-gpu-ci-preview-luxfi-lux-gpu-ci")
	var actions []string
	for _, s := range preview.Statement {
		for _, a := range s.Action {
			actions = append(actions, a)
			_, verb, _ := strings.Cut(a, ":")
			assert.Regexp(t, `^(Describe|List|Get)[A-Z]`, verb, "the preview role only reads: %s", a)
		}
	}
	assert.Contains(t, actions, "s3:GetObject", "the state")
	assert.Contains(t, actions, "eks:ListClusters", "the program's lookups (infra/preflight.go)")
}

// A bad identity configuration registers nothing and names the key and its fix.
func TestIdentityConfigIsValidatedFirst(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg  map[string]string
		want string
	}{
		"no repository":         {identityConfig("repository", ""), "lux-gpu-ci-identity:repository: \"\" is not a GitHub repository as owner/name"},
		"a repository URL":      {identityConfig("repository", "https://github.com/luxfi/lux-gpu-ci"), "lux-gpu-ci-identity:repository:"},
		"a stack with no file":  {identityConfig("stacks", `["dev", "staging"]`), `lux-gpu-ci-identity:stacks: "staging" has no stack file`},
		"preview as a stack":    {identityConfig("stacks", `["preview"]`), `lux-gpu-ci-identity:stacks: "preview" cannot name a stack`},
		"no stacks":             {identityConfig("stacks", `[]`), "lux-gpu-ci-identity:stacks: names no stack"},
		"no backend":            {identityConfig("stateBackend", ""), "lux-gpu-ci-identity:stateBackend: is not set"},
		"a provider of another": {identityConfig("oidcProviderArn", "arn:aws:iam::123456789012:oidc-provider/accounts.google.com"), "lux-gpu-ci-identity:oidcProviderArn:"},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := runIdentity(t, tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "(fix: ")
			assert.Empty(t, m.Resources(), "nothing is registered")
		})
	}
}

// Once a deploy identity serves the stack (deployRoleArn), every role the stack makes carries
// its permissions boundary, and every role, policy, queue and rule its ClusterTag: what the
// deploy role needs to change them (stack/identity_judged_test.go). The system nodes' launch
// template is left as it was: a tag on its instances would roll the system nodes.
func TestTheStacksRolesCarryItsBoundaryAndTag(t *testing.T) {
	t.Parallel()
	const deploy = "arn:aws:iam::123456789012:role/lux-gpu-ci-deploy"
	with := runDev(t, "deployRoleArn", deploy)
	without := runDev(t)
	roles := with.all("aws:iam/role:Role")
	require.GreaterOrEqual(t, len(roles), 4, "the system nodes', Karpenter's two, the compiler cache's")
	for _, r := range roles {
		assert.Equal(t, "arn:aws:iam::123456789012:policy/lux-gpu-ci-boundary", r.Inputs["permissionsBoundary"], "%s carries the stack's boundary", r.Name)
	}
	for _, r := range without.all("aws:iam/role:Role") {
		assert.Nil(t, r.Inputs["permissionsBoundary"], "%s: no identity, no boundary", r.Name)
	}
	var tagged []registered
	for _, typ := range []string{"aws:iam/role:Role", "aws:iam/policy:Policy", "aws:sqs/queue:Queue", "aws:cloudwatch/eventRule:EventRule", "aws:s3/bucketV2:BucketV2"} {
		tagged = append(tagged, without.all(typ)...)
	}
	require.GreaterOrEqual(t, len(tagged), 14)
	for _, r := range tagged {
		assert.Equal(t, "lux-gpu-ci", path(r.Inputs, "tags", "lux-gpu-ci/cluster"), "%s %s carries the ClusterTag", r.Type, r.Name)
	}
	for _, lt := range without.all("aws:ec2/launchTemplate:LaunchTemplate") {
		for _, spec := range lt.Inputs["tagSpecifications"].([]any) {
			assert.Nil(t, path(spec, "tags", "lux-gpu-ci/cluster"), "%s: the instances' tags are as they were", lt.Name)
		}
	}
}
