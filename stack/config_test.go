package stack_test

// Configuration through the program: a bad value names its key and the fix and registers nothing; every stack file and the engine's defaults build the program.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// Bad configuration fails with an error naming the key and registers nothing.
func TestInvalidConfigNamesKeyAndCreatesNothing(t *testing.T) {
	cases := []struct {
		name, wantKey string
		kv            []string
	}{
		{"region missing", "aws:region", []string{"aws:region", testkit.Unset}},
		{"drain timeout not a duration", "lux-gpu-ci:runnerDrainTimeout", []string{"runnerDrainTimeout", "forever"}},
		{"drain timeout past deploy.yml's job", "lux-gpu-ci:runnerDrainTimeout", []string{"runnerDrainTimeout", "6h"}},
		{"region malformed", "aws:region", []string{"aws:region", "Oregon"}},
		{"cluster name with capitals", "lux-gpu-ci:clusterName", []string{"clusterName", "GPU_CI"}},
		{"cluster name too long", "lux-gpu-ci:clusterName", []string{"clusterName", strings.Repeat("a", 41)}},
		{"kubernetes version not minor", "lux-gpu-ci:kubernetesVersion", []string{"kubernetesVersion", "v1.35.2"}},
		{"kubernetes version too old", "lux-gpu-ci:kubernetesVersion", []string{"kubernetesVersion", "1.29"}},
		{"kubernetes version too new", "lux-gpu-ci:kubernetesVersion", []string{"kubernetesVersion", "1.37"}},
		{"vpc cidr garbage", "lux-gpu-ci:vpcCidr", []string{"vpcCidr", "10.0.0.0"}},
		{"vpc cidr public range", "lux-gpu-ci:vpcCidr", []string{"vpcCidr", "8.8.0.0/16"}},
		{"vpc cidr too small", "lux-gpu-ci:vpcCidr", []string{"vpcCidr", "10.0.0.0/24"}},
		{"vpc cidr host bits", "lux-gpu-ci:vpcCidr", []string{"vpcCidr", "10.0.0.1/16"}},
		{"one AZ", "lux-gpu-ci:azCount", []string{"azCount", "1"}},
		{"AZ count not a number", "lux-gpu-ci:azCount", []string{"azCount", "two"}},
		{"unknown NAT mode", "lux-gpu-ci:natMode", []string{"natMode", "multi"}},
		{"instance type malformed", "lux-gpu-ci:systemNodeInstanceType", []string{"systemNodeInstanceType", "t3medium"}},
		{"no system nodes", "lux-gpu-ci:systemNodeCount", []string{"systemNodeCount", "0"}},
		{"public access empty", "lux-gpu-ci:publicAccessCidrs", []string{"publicAccessCidrs", `[]`}},
		{"public access not a CIDR", "lux-gpu-ci:publicAccessCidrs", []string{"publicAccessCidrs", `["203.0.113.7"]`}},
		{"public access not a list", "lux-gpu-ci:publicAccessCidrs", []string{"publicAccessCidrs", `"0.0.0.0/0"`}},
		{"admin not an ARN", "lux-gpu-ci:adminPrincipals", []string{"adminPrincipals", `["alice"]`}},
		{"admin listed twice", "lux-gpu-ci:adminPrincipals", []string{"adminPrincipals", `["arn:aws:iam::123456789012:role/a","arn:aws:iam::123456789012:role/a"]`}},
		{"deploy role a user", "lux-gpu-ci:deployRoleArn", []string{"deployRoleArn", "arn:aws:iam::123456789012:user/alice"}},
		{"deploy role also an admin", "lux-gpu-ci:deployRoleArn", []string{"deployRoleArn", "arn:aws:iam::123456789012:role/d", "adminPrincipals", `["arn:aws:iam::123456789012:role/d"]`}},
		{"preview role not an ARN", "lux-gpu-ci:previewRoleArn", []string{"previewRoleArn", "preview"}},
		{"preview role the deploy role", "lux-gpu-ci:previewRoleArn", []string{"deployRoleArn", "arn:aws:iam::123456789012:role/d", "previewRoleArn", "arn:aws:iam::123456789012:role/d"}},
		{"reserved tag", "lux-gpu-ci:tags", []string{"tags", `{"aws:owner": "x"}`}},
		{"tag we own", "lux-gpu-ci:tags", []string{"tags", `{"karpenter.sh/discovery": "x"}`}},
		{"unknown add-on", "lux-gpu-ci:addonVersions", []string{"addonVersions", `{"ebs-csi": "v1.0.0-eksbuild.1"}`}},
		{"budget typo", "lux-gpu-ci:budget", []string{"budget", `{"monthly_usd": 100, "emails": ["a@example.com"]}`}},
		{"budget zero", "lux-gpu-ci:budget", []string{"budget", `{"monthlyUsd": 0, "emails": ["a@example.com"]}`}},
		{"budget without e-mail", "lux-gpu-ci:budget", []string{"budget", `{"monthlyUsd": 100, "emails": []}`}},
		{"spot role flag not bool", "lux-gpu-ci:createSpotServiceLinkedRole", []string{"createSpotServiceLinkedRole", "yes please"}},
		{"helm chart we do not install", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"cert-manager": {"chart": "oci://registry.example.com/cert-manager", "version": "1.0.0"}}`}},
		{"helm chart from a registry, unpinned", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"karpenter": {"chart": "oci://registry.example.com/karpenter"}}`}},
		{"ARC controller chart mirrored at another version", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"gha-runner-scale-set-controller": {"chart": "oci://registry.example.com/gha-runner-scale-set-controller", "version": "0.15.0"}}`}},
		{"helm chart in a relative directory", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"karpenter": {"chart": "charts/karpenter"}}`}},
		{"cache of a registry ECR cannot cache", "lux-gpu-ci:imageCache", []string{"imageCache", `["nvcr.io"]`}},
		{"cache of a registry listed twice", "lux-gpu-ci:imageCache", []string{"imageCache", `["ghcr.io", "ghcr.io"]`}},
		{"cache not a list", "lux-gpu-ci:imageCache", []string{"imageCache", `"docker.io"`}},
		{"cached registry without its credential", "lux-gpu-ci:registryCredentials", []string{"imageCache", `["docker.io"]`, "registryCredentials", testkit.Unset}},
		{"registry credential not JSON", "lux-gpu-ci:registryCredentials", []string{"registryCredentials", "luxci:dckr_pat_x"}},
		{"registry credential without its token", "lux-gpu-ci:registryCredentials", []string{"registryCredentials", `{"docker.io": {"username": "luxci"}, "ghcr.io": {"username": "luxci", "accessToken": "t"}}`}},
		{"registry credential for a registry not cached", "lux-gpu-ci:registryCredentials", []string{"imageCache", `["ghcr.io"]`}},
		{"retry scale set with capitals", "lux-gpu-ci:retryScaleSetName", []string{"retryScaleSetName", "Lux-Retry"}},
		{"retry scale set too long for ARC", "lux-gpu-ci:retryScaleSetName", []string{"retryScaleSetName", strings.Repeat("r", 46)}},
		{"retry scale set that is a GPU pool's", "lux-gpu-ci:retryScaleSetName", []string{"retryScaleSetName", "lux-gpu-t4"}},
		{"retry scale set that is a twin's", "lux-gpu-ci:retryScaleSetName", []string{"retryScaleSetName", "lux-gpu-t4-on-demand"}},
		{"retry runner without a group of its own", "lux-gpu-ci:retryRunnerGroup", []string{"retryScaleSetName", "lux-gpu-retry"}},
		{"retry runner in the Default group", "lux-gpu-ci:retryRunnerGroup", []string{"retryScaleSetName", "lux-gpu-retry", "retryRunnerGroup", "default"}},
		{"retry runner group without a retry runner", "lux-gpu-ci:retryRunnerGroup", []string{"retryRunnerGroup", "lux-gpu-retry"}},
		{"image repository not an ECR name", "lux-gpu-ci:imageRepositories", []string{"imageRepositories", `["Team-A/base"]`}},
		{"compiler cache expiring at once", "lux-gpu-ci:compilerCacheExpiryDays", []string{"compilerCacheExpiryDays", "0"}},
		{"image repositories allowing every repository", "lux-gpu-ci:imageRepositories", []string{"imageRepositories", `["team-a/*", "*"]`}},
		{"image repositories not a list", "lux-gpu-ci:imageRepositories", []string{"imageRepositories", `"team-a/*"`}},
		{"cluster name ECR would refuse in the cache's repositories", "lux-gpu-ci:clusterName", []string{"clusterName", "lux--ci"}},
		{"helm chart with a misspelt field", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"karpenter": {"chart": "/srv/karpenter", "versoin": "1"}}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMocks()
			err := m.run(testkit.With(testkit.StackConfig(t, "dev"), tc.kv...))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantKey+":", "the error names the key")
			assert.Contains(t, err.Error(), "fix:", "the error says how to fix it")
			assert.Empty(t, names(m.programResources()), "nothing may be registered")
		})
	}
}

// All problems are reported at once.
func TestInvalidConfigReportsEveryProblem(t *testing.T) {
	m := newMocks()
	err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "azCount", "9", "natMode", "both", "systemNodeCount", "0"))
	require.Error(t, err)
	for _, key := range []string{"azCount", "natMode", "systemNodeCount"} {
		assert.Contains(t, err.Error(), "lux-gpu-ci:"+key+":")
	}
}

func TestPlainTextCredentialIsRefused(t *testing.T) {
	m := newMocks()
	m.secretKeys = nil
	err := m.run(testkit.StackConfig(t, "dev"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:githubToken: is stored in plain text")
	assert.Contains(t, err.Error(), "pulumi config set --secret githubToken")
	assert.NotContains(t, err.Error(), testkit.Token, "an error never repeats a secret")
	assert.Contains(t, err.Error(), "lux-gpu-ci:registryCredentials: is stored in plain text")
	assert.NotContains(t, err.Error(), "dckr_pat_TESTTOKEN")
	assert.Empty(t, names(m.programResources()))
}

// A malformed credential is refused without quoting it.
func TestBadRegistryCredentialIsNotRepeated(t *testing.T) {
	m := newMocks()
	err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "registryCredentials", `{"docker.io": "dckr_pat_LEAKED"}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:registryCredentials: is not a JSON object")
	assert.NotContains(t, err.Error(), "dckr_pat_LEAKED")
}

// The program accepts what the engine really hands it: every default of Pulumi.yaml applied,
// "" for the credentials a stack leaves unset, {} for an unset budget.
func TestProgramAcceptsTheEngineDefaults(t *testing.T) {
	for _, stack := range []string{"dev", "prod"} {
		t.Run(stack, func(t *testing.T) {
			cfg := engineConfig(t, stack)
			assert.Equal(t, "", cfg["lux-gpu-ci:githubAppId"], "the engine sets unset optional keys to their default")
			m := newMocks()
			require.NoError(t, m.run(cfg))
			assert.NotEmpty(t, m.all("kubernetes:karpenter.sh/v1:NodePool"))
			if stack == "dev" {
				assert.Empty(t, m.all("aws:budgets/budget:Budget"), "budget {} is off")
			}
		})
	}
}

// Every stack file in the repository passes validation and builds the whole program.
func TestEveryStackFileIsValid(t *testing.T) {
	for _, stack := range repoStacks(t) {
		t.Run(stack, func(t *testing.T) {
			assert.NotEmpty(t, runRepoStack(t, stack).all("kubernetes:karpenter.sh/v1:NodePool"))
		})
	}
}

func TestProdDiffersFromDevWhereItShould(t *testing.T) {
	m := newMocks()
	require.NoError(t, m.run(testkit.StackConfig(t, "prod")))
	assert.Equal(t, "lux-gpu-ci-prod", m.one(t, "eks:index:Cluster").Inputs["name"])
	assert.Len(t, m.all("kubernetes:karpenter.sh/v1:NodePool"), 2)
	assert.Len(t, m.all("aws:budgets/budget:Budget"), 1)
	assert.Len(t, m.all("aws:ec2/subnet:Subnet"), 6)
	for _, np := range m.all("kubernetes:karpenter.sh/v1:NodePool") {
		assert.Contains(t, path(np.Inputs["spec"], "template", "spec", "requirements"),
			map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"spot", "on-demand"}}, "on-demand fallback")
	}
}

// engineConfig is the config the engine hands the program for one of the repository's stack
// files: RepoStackConfig, plus Pulumi.yaml's default for every declared key the stack leaves
// unset (as pkg/workspace.ValidateStackConfigAndApplyProjectConfig does: scalars as text,
// lists and objects as JSON).
func engineConfig(t testing.TB, stack string) map[string]string {
	t.Helper()
	project, err := workspace.LoadProject(filepath.Join(testkit.RepoRoot(t), "Pulumi.yaml"))
	require.NoError(t, err)
	cfg := testkit.RepoStackConfig(t, stack)
	for key, decl := range project.Config {
		k := config.Project + ":" + key
		if _, set := cfg[k]; set || decl.Default == nil {
			continue
		}
		switch v := decl.Default.(type) {
		case string, bool, int:
			cfg[k] = fmt.Sprint(v)
		default:
			b, err := json.Marshal(v)
			require.NoError(t, err)
			cfg[k] = string(b)
		}
	}
	return cfg
}

// A stack file as bootstrap writes it with a GitHub App (GITHUB_APP_*: pulumi config set for
// the id and installation, --secret for the key, which the file holds encrypted) or with a
// token: each passes the stack-file validation make test runs on the repository's, and a
// file with both credentials is refused as before.
func TestStackFilesBootstrapWritesValidate(t *testing.T) {
	starter, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "Pulumi.starter.yaml"))
	require.NoError(t, err)
	const encrypted = "    secure: v1:4GzT2Q==:s1Vb3Vx0bVWcBhZBTTt6AvZ8Wn5z1Q==\n"
	for name, tc := range map[string]struct {
		keys string
		ok   bool
	}{
		"a GitHub App": {"  lux-gpu-ci:githubAppId: \"123456\"\n  lux-gpu-ci:githubAppInstallationId: \"7891011\"\n  lux-gpu-ci:githubAppPrivateKey:\n" + encrypted, true},
		"a token":      {"  lux-gpu-ci:githubToken:\n" + encrypted, true},
		"both":         {"  lux-gpu-ci:githubToken:\n" + encrypted + "  lux-gpu-ci:githubAppId: \"123456\"\n  lux-gpu-ci:githubAppInstallationId: \"7891011\"\n  lux-gpu-ci:githubAppPrivateKey:\n" + encrypted, false},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "Pulumi.starter.yaml")
			require.NoError(t, os.WriteFile(file, append(append([]byte{}, starter...), tc.keys...), 0o644))
			m := newStackMocks("starter")
			err := m.run(testkit.StackFileConfig(t, file))
			if tc.ok {
				require.NoError(t, err)
				assert.NotEmpty(t, m.all("kubernetes:helm.sh/v3:Release"))
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "githubToken")
			}
		})
	}
}
