package infra

// The deploy identity's statements, as the builders write them (stack/identity_test.go checks
// the roles the program registers, their trust and these documents on them).

import (
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
// stack's region, and each other resource names the stack's cluster, its region or a prefix
// only the stack's resources carry (the account's roles and policies aside: the stack makes
// and passes roles, which is why it is treated as an account administrator in the docs).
func TestDeployStatementsStayInTheStack(t *testing.T) {
	stmts := deployStatements(testScope)
	require.NotEmpty(t, stmts)
	for _, s := range stmts {
		for _, r := range resources(t, s) {
			switch {
			case r == "*":
				regional := false
				for _, c := range s.Conditions {
					regional = regional || (c.Variable == "aws:RequestedRegion" && len(c.Values) == 1 && c.Values[0] == "us-west-2")
				}
				assert.True(t, regional, "%s: every resource, in the stack's region only", s.Sid)
			case strings.Contains(r, ":iam::"):
				assert.Contains(t, r, ":123456789012:", "%s: the account's own", s.Sid)
			default:
				assert.True(t, strings.Contains(r, "lux-gpu-ci") || strings.Contains(r, CompilerCacheBucketPrefix) || strings.Contains(r, "karpenter-") || strings.Contains(r, "pulumi"),
					"%s: %s names the stack's resources", s.Sid, r)
			}
		}
	}
}
