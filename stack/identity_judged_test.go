package stack_test

// The deploy identity, judged by an IAM evaluator someone else wrote (internal/testsupport/
// iamjudge: @cloud-copilot/iam-simulate over AWS's own action and condition-key data), on the
// policies as the program renders them: what a deploy role, a role it makes and the preview
// role may do, and who may assume each. The program's own reading of IAM is never asked.

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/iamjudge"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/mockstack"
)

const (
	judgedAccount = mockstack.Account
	clusterTag    = "aws:ResourceTag/lux-gpu-ci/cluster"
)

func doc(t *testing.T, p fakeaws.PolicyDocument) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return b
}

func iamARN(resource string) string { return "arn:aws:iam::" + judgedAccount + ":" + resource }

// testkit's dev stack (cluster lux-gpu-ci) and prod (lux-gpu-ci-prod), one identity, state in
// s3://lux-state/gpu-ci: dev's deploy role, as AWS would judge it.
func TestTheDevDeployRoleReachesOnlyDev(t *testing.T) {
	t.Parallel()
	m, err := runIdentity(t, identityConfig())
	require.NoError(t, err)
	_, deploy := roleNamed(t, m, "lux-gpu-ci-deploy")
	policy := []json.RawMessage{doc(t, deploy)}
	devBoundary, prodBoundary := iamARN("policy/lux-gpu-ci-boundary"), iamARN("policy/lux-gpu-ci-prod-boundary")
	self := iamARN("role/lux-gpu-ci-deploy")
	state := "arn:aws:s3:::lux-state/gpu-ci/.pulumi/"
	type want struct {
		action, resource string
		context          map[string]any
		allowed          bool
	}
	dev, prod := map[string]any{clusterTag: "lux-gpu-ci"}, map[string]any{clusterTag: "lux-gpu-ci-prod"}
	with := func(a, b map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range a {
			out[k] = v
		}
		for k, v := range b {
			out[k] = v
		}
		return out
	}
	cases := map[string]want{
		// The state: its own stack's, never prod's.
		"reads dev's checkpoint":   {"s3:GetObject", state + "stacks/lux-gpu-ci/dev.json", nil, true},
		"takes dev's lock":         {"s3:PutObject", state + "locks/organization/lux-gpu-ci/dev/1.json", nil, true},
		"reads prod's checkpoint":  {"s3:GetObject", state + "stacks/lux-gpu-ci/prod.json", nil, false},
		"writes prod's checkpoint": {"s3:PutObject", state + "stacks/lux-gpu-ci/prod.json", nil, false},
		"reads prod's history":     {"s3:GetObject", state + "history/lux-gpu-ci/prod/prod-1.checkpoint.json", nil, false},
		"reads the identity's":     {"s3:GetObject", state + "stacks/lux-gpu-ci-identity/luxfi.json", nil, false},
		// Itself and the identity: never.
		"attaches AdministratorAccess to itself": {"iam:AttachRolePolicy", self, map[string]any{"iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}, false},
		"edits its own trust":                    {"iam:UpdateAssumeRolePolicy", self, nil, false},
		// Were the deploy role itself tagged and bounded as dev's (by hand), the explicit
		// denies still hold it.
		"edits its own trust, tagged as dev's": {"iam:UpdateAssumeRolePolicy", self, with(dev, map[string]any{"iam:PermissionsBoundary": devBoundary}), false},
		"attaches a policy to itself, tagged":  {"iam:AttachRolePolicy", self, with(dev, map[string]any{"iam:PermissionsBoundary": devBoundary, "iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}), false},
		"writes its own policy":                {"iam:PutRolePolicy", self, nil, false},
		"writes prod's deploy role's policy":   {"iam:PutRolePolicy", iamARN("role/lux-gpu-ci-prod-deploy"), nil, false},
		"rewrites its boundary":                {"iam:CreatePolicyVersion", devBoundary, nil, false},
		"takes a boundary off a role of dev's": {"iam:DeleteRolePermissionsBoundary", iamARN("role/lux-gpu-ci-karpenter"), dev, false},
		// Roles: dev's own, under dev's boundary; never prod's, never unbounded.
		"makes a role of dev's, bounded": {"iam:CreateRole", iamARN("role/lux-gpu-ci-new"),
			map[string]any{"aws:RequestTag/lux-gpu-ci/cluster": "lux-gpu-ci", "iam:PermissionsBoundary": devBoundary}, true},
		"makes a role without a boundary": {"iam:CreateRole", iamARN("role/lux-gpu-ci-new"),
			map[string]any{"aws:RequestTag/lux-gpu-ci/cluster": "lux-gpu-ci"}, false},
		"makes a role under prod's boundary": {"iam:CreateRole", iamARN("role/lux-gpu-ci-new"),
			map[string]any{"aws:RequestTag/lux-gpu-ci/cluster": "lux-gpu-ci", "iam:PermissionsBoundary": prodBoundary}, false},
		"makes a role tagged for prod": {"iam:CreateRole", iamARN("role/lux-gpu-ci-prod-new"),
			map[string]any{"aws:RequestTag/lux-gpu-ci/cluster": "lux-gpu-ci-prod", "iam:PermissionsBoundary": devBoundary}, false},
		"changes dev's Karpenter role": {"iam:PutRolePolicy", iamARN("role/lux-gpu-ci-karpenter"), with(dev, map[string]any{"iam:PermissionsBoundary": devBoundary}), true},
		"changes prod's Karpenter role": {"iam:PutRolePolicy", iamARN("role/lux-gpu-ci-prod-karpenter"),
			with(prod, map[string]any{"iam:PermissionsBoundary": prodBoundary}), false},
		"attaches a policy to an untagged admin role": {"iam:AttachRolePolicy", iamARN("role/OrganizationAccountAccessRole"),
			map[string]any{"iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"}, false},
		"tags prod's role as dev's":               {"iam:TagRole", iamARN("role/lux-gpu-ci-prod-karpenter"), with(prod, map[string]any{"aws:RequestTag/lux-gpu-ci/cluster": "lux-gpu-ci"}), false},
		"untags its cluster from a role of dev's": {"iam:UntagRole", iamARN("role/lux-gpu-ci-karpenter"), with(dev, map[string]any{"aws:TagKeys": []string{"lux-gpu-ci/cluster"}}), false},
		"passes dev's node role to EC2":           {"iam:PassRole", iamARN("role/lux-gpu-ci-karpenter-node"), with(dev, map[string]any{"iam:PassedToService": "ec2.amazonaws.com"}), true},
		"passes an admin role to EC2":             {"iam:PassRole", iamARN("role/OrganizationAccountAccessRole"), map[string]any{"iam:PassedToService": "ec2.amazonaws.com"}, false},
		"passes prod's node role to EC2":          {"iam:PassRole", iamARN("role/lux-gpu-ci-prod-karpenter-node"), with(prod, map[string]any{"iam:PassedToService": "ec2.amazonaws.com"}), false},
		"passes dev's node role to Lambda":        {"iam:PassRole", iamARN("role/lux-gpu-ci-karpenter-node"), with(dev, map[string]any{"iam:PassedToService": "lambda.amazonaws.com"}), false},
		"changes a policy of prod's":              {"iam:CreatePolicyVersion", iamARN("policy/KarpenterControllerNodeLifecyclePolicy-lux-gpu-ci-prod"), prod, false},
		"changes a policy of dev's":               {"iam:CreatePolicyVersion", iamARN("policy/KarpenterControllerNodeLifecyclePolicy-lux-gpu-ci"), dev, true},
		// The rest of prod's: its cache, queue, rules, cluster, budget.
		"reads dev's compiler cache":   {"s3:GetObject", "arn:aws:s3:::lux-gpu-ci--ccache-20261207abc/gpu-spot/ac/x", nil, true},
		"reads prod's compiler cache":  {"s3:GetObject", "arn:aws:s3:::lux-gpu-ci-prod--ccache-20261207abc/gpu-spot/ac/x", nil, false},
		"deletes prod's cache bucket":  {"s3:DeleteBucket", "arn:aws:s3:::lux-gpu-ci-prod--ccache-20261207abc", nil, false},
		"deletes dev's queue":          {"sqs:DeleteQueue", "arn:aws:sqs:us-west-2:" + judgedAccount + ":lux-gpu-ci-20261207", dev, true},
		"deletes prod's queue":         {"sqs:DeleteQueue", "arn:aws:sqs:us-west-2:" + judgedAccount + ":lux-gpu-ci-prod-20261207", prod, false},
		"deletes prod's queue by name": {"sqs:DeleteQueue", "arn:aws:sqs:us-west-2:" + judgedAccount + ":lux-gpu-ci-prod-20261207", nil, false},
		"deletes prod's rule":          {"events:DeleteRule", "arn:aws:events:us-west-2:" + judgedAccount + ":rule/karpenter-spot-20261207", prod, false},
		"deletes prod's cluster":       {"eks:DeleteCluster", "arn:aws:eks:us-west-2:" + judgedAccount + ":cluster/lux-gpu-ci-prod", nil, false},
		"updates dev's cluster":        {"eks:UpdateClusterVersion", "arn:aws:eks:us-west-2:" + judgedAccount + ":cluster/lux-gpu-ci", nil, true},
		"changes prod's budget":        {"budgets:ModifyBudget", "arn:aws:budgets::" + judgedAccount + ":budget/lux-gpu-ci-prod-monthly", nil, false},
	}
	var judged []iamjudge.Case
	for name, c := range cases {
		judged = append(judged, iamjudge.Case{Name: name, Principal: self, Action: c.action, Resource: c.resource, Account: judgedAccount,
			Context: with(map[string]any{"aws:RequestedRegion": "us-west-2"}, c.context), Identity: policy})
	}
	verdicts := iamjudge.Judge(t, judged)
	for name, c := range cases {
		assert.Equal(t, c.allowed, verdicts[name] == iamjudge.Allowed, "dev's deploy role %s: %s", name, verdicts[name])
	}
}

// A role of the stack's under its boundary, given AdministratorAccess (what a deploy role
// could attach to it): it still writes no IAM and reads no state nor another stack's cache.
func TestTheBoundaryCapsWhatADeployMakes(t *testing.T) {
	t.Parallel()
	m, err := runIdentity(t, identityConfig())
	require.NoError(t, err)
	boundary := []json.RawMessage{doc(t, managedPolicy(t, m, "lux-gpu-ci-boundary"))}
	admin := []json.RawMessage{json.RawMessage(`{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}`)}
	role := iamARN("role/lux-gpu-ci-karpenter")
	dev := map[string]any{clusterTag: "lux-gpu-ci"}
	cases := map[string]struct {
		action, resource string
		context          map[string]any
		allowed          bool
	}{
		"launches a GPU node":                   {"ec2:RunInstances", "arn:aws:ec2:us-west-2:" + judgedAccount + ":instance/i-1", nil, true},
		"makes Karpenter's instance profile":    {"iam:CreateInstanceProfile", iamARN("instance-profile/lux-gpu-ci_1"), nil, true},
		"passes dev's node role to EC2":         {"iam:PassRole", iamARN("role/lux-gpu-ci-karpenter-node"), map[string]any{clusterTag: "lux-gpu-ci", "iam:PassedToService": "ec2.amazonaws.com"}, true},
		"reads its own compiler cache":          {"s3:GetObject", "arn:aws:s3:::lux-gpu-ci--ccache-x/gpu-spot/ac/1", nil, true},
		"makes a role":                          {"iam:CreateRole", iamARN("role/escape"), nil, false},
		"attaches a policy to itself":           {"iam:AttachRolePolicy", role, dev, false},
		"rewrites its own trust":                {"iam:UpdateAssumeRolePolicy", role, dev, false},
		"passes an admin role to EC2":           {"iam:PassRole", iamARN("role/OrganizationAccountAccessRole"), map[string]any{"iam:PassedToService": "ec2.amazonaws.com"}, false},
		"reads the state":                       {"s3:GetObject", "arn:aws:s3:::lux-state/gpu-ci/.pulumi/stacks/lux-gpu-ci/prod.json", nil, false},
		"reads prod's compiler cache":           {"s3:GetObject", "arn:aws:s3:::lux-gpu-ci-prod--ccache-x/gpu-spot/ac/1", nil, false},
		"assumes another role":                  {"sts:AssumeRole", iamARN("role/lux-gpu-ci-prod-deploy"), nil, false},
		"leaves the organization":               {"organizations:LeaveOrganization", "*", nil, false},
		"passes dev's node role to EKS Pod Ids": {"iam:PassRole", iamARN("role/lux-gpu-ci-karpenter-node"), map[string]any{clusterTag: "lux-gpu-ci", "iam:PassedToService": "pods.eks.amazonaws.com"}, false},
	}
	var judged []iamjudge.Case
	for name, c := range cases {
		judged = append(judged, iamjudge.Case{Name: name, Principal: role, Action: c.action, Resource: c.resource, Account: judgedAccount,
			Context: c.context, Identity: admin, Boundary: boundary})
	}
	verdicts := iamjudge.Judge(t, judged)
	for name, c := range cases {
		assert.Equal(t, c.allowed, verdicts[name] == iamjudge.Allowed, "a bounded role of dev's %s: %s", name, verdicts[name])
	}
}

// The preview role writes nothing, anywhere: every write of the services the stack uses is
// refused, and it reads the state.
func TestThePreviewRoleWritesNothing(t *testing.T) {
	t.Parallel()
	m, err := runIdentity(t, identityConfig())
	require.NoError(t, err)
	_, preview := roleNamed(t, m, "lux-gpu-ci-preview-luxfi-lux-gpu-ci")
	policy := []json.RawMessage{doc(t, preview)}
	who := iamARN("role/lux-gpu-ci-preview-luxfi-lux-gpu-ci")
	cases := map[string]struct {
		action, resource string
		allowed          bool
	}{
		"reads a checkpoint":     {"s3:GetObject", "arn:aws:s3:::lux-state/gpu-ci/.pulumi/stacks/lux-gpu-ci/prod.json", true},
		"writes a checkpoint":    {"s3:PutObject", "arn:aws:s3:::lux-state/gpu-ci/.pulumi/stacks/lux-gpu-ci/prod.json", false},
		"takes a lock":           {"s3:PutObject", "arn:aws:s3:::lux-state/gpu-ci/.pulumi/locks/organization/lux-gpu-ci/prod/1.json", false},
		"reads a role":           {"iam:GetRole", iamARN("role/lux-gpu-ci-karpenter"), true},
		"writes a role's policy": {"iam:PutRolePolicy", iamARN("role/lux-gpu-ci-karpenter"), false},
		"makes a role":           {"iam:CreateRole", iamARN("role/x"), false},
		"launches an instance":   {"ec2:RunInstances", "arn:aws:ec2:us-west-2:" + judgedAccount + ":instance/i-1", false},
		"deletes a cluster":      {"eks:DeleteCluster", "arn:aws:eks:us-west-2:" + judgedAccount + ":cluster/lux-gpu-ci", false},
		"sends to a queue":       {"sqs:SendMessage", "arn:aws:sqs:us-west-2:" + judgedAccount + ":lux-gpu-ci-1", false},
	}
	var judged []iamjudge.Case
	for name, c := range cases {
		judged = append(judged, iamjudge.Case{Name: name, Principal: who, Action: c.action, Resource: c.resource, Account: judgedAccount,
			Context: map[string]any{"aws:RequestedRegion": "us-west-2"}, Identity: policy})
	}
	verdicts := iamjudge.Judge(t, judged)
	for name, c := range cases {
		assert.Equal(t, c.allowed, verdicts[name] == iamjudge.Allowed, "the preview role %s: %s", name, verdicts[name])
	}
}

// Who may assume each role, by the trust policies as rendered: the job's environment,
// repository and ref claims, which AWS STS validates (since 2026-01). The evaluator knows
// these keys from AWS's data; the aud and sub conditions it does not evaluate are taken out
// (TestEachRoleTrustsOneEnvironmentOfTheRepository reads them as written).
func TestOnlyMainDeploysAndOnlyAPullRequestPreviews(t *testing.T) {
	t.Parallel()
	m, err := runIdentity(t, identityConfig())
	require.NoError(t, err)
	provider := iamARN("oidc-provider/token.actions.githubusercontent.com")
	trustOf := func(role string) json.RawMessage {
		trust, _ := roleNamed(t, m, role)
		for i := range trust.Statement {
			delete(trust.Statement[i].Condition["StringEquals"], "token.actions.githubusercontent.com:aud")
			delete(trust.Statement[i].Condition["StringEquals"], "token.actions.githubusercontent.com:sub")
		}
		return doc(t, trust)
	}
	job := func(env, repo, ref string) map[string]any {
		return map[string]any{
			"token.actions.githubusercontent.com:environment": env, "token.actions.githubusercontent.com:repository": repo,
			"token.actions.githubusercontent.com:ref": ref,
		}
	}
	cases := map[string]struct {
		role    string
		claims  map[string]any
		allowed bool
	}{
		"dev's deploy from main":                {"lux-gpu-ci-deploy", job("dev", "luxfi/lux-gpu-ci", "refs/heads/main"), true},
		"dev's deploy from a branch":            {"lux-gpu-ci-deploy", job("dev", "luxfi/lux-gpu-ci", "refs/heads/feature"), false},
		"dev's deploy from a pull request":      {"lux-gpu-ci-deploy", job("dev", "luxfi/lux-gpu-ci", "refs/pull/7/merge"), false},
		"dev's deploy from a tag named main":    {"lux-gpu-ci-deploy", job("dev", "luxfi/lux-gpu-ci", "refs/tags/main"), false},
		"dev's deploy from prod's environment":  {"lux-gpu-ci-deploy", job("prod", "luxfi/lux-gpu-ci", "refs/heads/main"), false},
		"prod's deploy from dev's environment":  {"lux-gpu-ci-prod-deploy", job("dev", "luxfi/lux-gpu-ci", "refs/heads/main"), false},
		"prod's deploy from main":               {"lux-gpu-ci-prod-deploy", job("prod", "luxfi/lux-gpu-ci", "refs/heads/main"), true},
		"dev's deploy from a fork's main":       {"lux-gpu-ci-deploy", job("dev", "mallory/lux-gpu-ci", "refs/heads/main"), false},
		"the preview from a pull request":       {"lux-gpu-ci-preview-luxfi-lux-gpu-ci", job("preview", "luxfi/lux-gpu-ci", "refs/pull/7/merge"), true},
		"the preview from a branch push":        {"lux-gpu-ci-preview-luxfi-lux-gpu-ci", job("preview", "luxfi/lux-gpu-ci", "refs/heads/feature"), false},
		"the preview from dev's environment":    {"lux-gpu-ci-preview-luxfi-lux-gpu-ci", job("dev", "luxfi/lux-gpu-ci", "refs/pull/7/merge"), false},
		"dev's deploy from the preview's":       {"lux-gpu-ci-deploy", job("preview", "luxfi/lux-gpu-ci", "refs/heads/main"), false},
		"dev's deploy from a branch named main": {"lux-gpu-ci-deploy", job("dev", "luxfi/lux-gpu-ci", "refs/heads/main/x"), false},
	}
	var judged []iamjudge.Case
	for name, c := range cases {
		judged = append(judged, iamjudge.Case{Name: name, Principal: provider, Action: "sts:AssumeRoleWithWebIdentity", Resource: iamARN("role/" + c.role),
			Account: judgedAccount, Context: c.claims, ResourcePolicy: trustOf(c.role)})
	}
	verdicts := iamjudge.Judge(t, judged)
	for name, c := range cases {
		assert.Equal(t, c.allowed, verdicts[name] == iamjudge.Allowed, "%s: %s", name, verdicts[name])
	}
}
