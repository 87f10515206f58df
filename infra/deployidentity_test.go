package infra

// The deploy identity's statements, as the builders write them (stack/identity_test.go checks
// the roles the program registers, their trust and these documents on them).

import (
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
)

var testScope = identityScope{
	Partition: "aws", Account: "123456789012",
	Stack:       config.IdentityStack{Name: "dev", Region: "us-west-2", ClusterName: "lux-gpu-ci"},
	StateBucket: "lux-gpu-ci-state", StatePrefix: "pulumi",
	DeployRoles: []string{"lux-gpu-ci-deploy"}, PreviewRole: "lux-gpu-ci-preview-luxfi-lux-gpu-ci",
}

// resources are a statement's resources as written (every one a known string).
func resources(t *testing.T, s statement) []string {
	t.Helper()
	var out []string
	for _, r := range s.Resources {
		v, ok := r.(pulumi.String)
		require.True(t, ok, "%s: a resource known when the builder runs", s.Sid)
		out = append(out, string(v))
	}
	return out
}

// A preview runs a pull request's code: the preview role only reads.
func TestPreviewStatementsOnlyRead(t *testing.T) {
	stmts := previewStatements(testScope, []string{"us-west-2"})
	require.NotEmpty(t, stmts)
	for _, s := range stmts {
		require.NotEmpty(t, s.Actions, s.Sid)
		for _, a := range s.Actions {
			_, verb, ok := strings.Cut(a, ":")
			require.True(t, ok, a)
			assert.True(t, strings.HasPrefix(verb, "Describe") || strings.HasPrefix(verb, "List") || strings.HasPrefix(verb, "Get"), "%s: %s writes", s.Sid, a)
		}
	}
}

// The deploy role reaches its own stack: a statement on every resource ("*") holds to the
// stack's region; a statement on every role or policy of the account holds to the stack's
// ClusterTag (reads aside); and each other resource is one the stack makes, by its exact
// name or a pattern that only the stack's names match (its cluster's name followed by a
// delimiter no cluster name holds, "/" or "--"; or its ClusterTag as a condition).
// stack/identity_judged_test.go judges what that lets the role do.
func TestDeployStatementsStayInTheStack(t *testing.T) {
	stmts := deployStatements(testScope)
	require.NotEmpty(t, stmts)
	owned := func(s statement) bool {
		for _, c := range s.Conditions {
			if (c.Variable == "aws:ResourceTag/"+ClusterTag || c.Variable == "aws:RequestTag/"+ClusterTag) && c.Test == "StringEquals" && slices.Equal(c.Values, []string{"lux-gpu-ci"}) {
				return true
			}
		}
		return false
	}
	region := func(s statement) bool {
		for _, c := range s.Conditions {
			if c.Variable == "aws:RequestedRegion" && slices.Equal(c.Values, []string{"us-west-2"}) {
				return true
			}
		}
		return false
	}
	reads := func(s statement) bool {
		for _, a := range s.Actions {
			_, verb, _ := strings.Cut(a, ":")
			if !strings.HasPrefix(verb, "Get") && !strings.HasPrefix(verb, "List") {
				return false
			}
		}
		return true
	}
	// The stack's own resources, by exact name or a pattern only they match.
	const acct = "123456789012"
	stacks := []string{
		"arn:aws:eks:us-west-2:" + acct + ":cluster/lux-gpu-ci",
		"arn:aws:eks:us-west-2:" + acct + ":nodegroup/lux-gpu-ci/*",
		"arn:aws:eks:us-west-2:" + acct + ":addon/lux-gpu-ci/*",
		"arn:aws:eks:us-west-2:" + acct + ":access-entry/lux-gpu-ci/*",
		"arn:aws:eks:us-west-2:" + acct + ":podidentityassociation/lux-gpu-ci/*",
		"arn:aws:secretsmanager:us-west-2:" + acct + ":secret:ecr-pullthroughcache/lux-gpu-ci/*",
		"arn:aws:s3:::lux-gpu-ci--ccache-*", "arn:aws:s3:::lux-gpu-ci--ccache-*/*",
		"arn:aws:budgets::" + acct + ":budget/lux-gpu-ci-monthly",
		"arn:aws:s3:::lux-gpu-ci-state",
		"arn:aws:s3:::lux-gpu-ci-state/pulumi/.pulumi/meta.yaml",
		"arn:aws:s3:::lux-gpu-ci-state/pulumi/.pulumi/stacks/lux-gpu-ci/dev.json*",
		"arn:aws:s3:::lux-gpu-ci-state/pulumi/.pulumi/history/lux-gpu-ci/dev/*",
		"arn:aws:s3:::lux-gpu-ci-state/pulumi/.pulumi/backups/lux-gpu-ci/dev/*",
		"arn:aws:s3:::lux-gpu-ci-state/pulumi/.pulumi/locks/organization/lux-gpu-ci/dev/*",
		"arn:aws:iam::" + acct + ":role/aws-service-role/*",
	}
	checked := 0
	for _, s := range stmts {
		if s.Effect == "Deny" {
			continue
		}
		for _, r := range resources(t, s) {
			checked++
			switch {
			case r == "*":
				assert.True(t, region(s), "%s: every resource, in the stack's region only", s.Sid)
			case r == "arn:aws:iam::"+acct+":role/*" || r == "arn:aws:iam::"+acct+":policy/*" ||
				strings.HasPrefix(r, "arn:aws:sqs:us-west-2:"+acct+":") || strings.HasPrefix(r, "arn:aws:events:us-west-2:"+acct+":rule/"):
				assert.True(t, owned(s) || reads(s), "%s: %s only where the stack's ClusterTag is", s.Sid, r)
			default:
				assert.Contains(t, stacks, r, "%s: %s is none of the stack's", s.Sid, r)
			}
		}
	}
	assert.Greater(t, checked, 20)
}
