package config_test

// Pulumi.yaml declares the config as the program reads it, in a form the engine accepts, and
// every stack file in the repository loads.

import (
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	"github.com/pulumi/pulumi/sdk/v3/go/common/diag/colors"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// Pulumi.yaml declares exactly the keys config.Defaults knows, with the same defaults.
func TestPulumiYamlDeclaresTheConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "Pulumi.yaml"))
	require.NoError(t, err)
	var project struct {
		Name   string `yaml:"name"`
		Config map[string]struct {
			Type        string `yaml:"type"`
			Default     any    `yaml:"default"`
			Secret      bool   `yaml:"secret"`
			Description string `yaml:"description"`
		} `yaml:"config"`
	}
	require.NoError(t, yaml.Unmarshal(b, &project))
	assert.Equal(t, config.Project, project.Name)
	for key, def := range config.Defaults {
		decl, ok := project.Config[key]
		if !assert.True(t, ok, "Pulumi.yaml does not declare %s", key) {
			continue
		}
		assert.Equal(t, jsonOf(t, def), jsonOf(t, decl.Default), "default of %s", key)
	}
	// The engine requires every key Pulumi.yaml declares without a default, before the
	// program runs: only the keys config.Required names may lack one.
	for key, decl := range project.Config {
		_, ok := config.Defaults[key]
		assert.True(t, ok || slices.Contains(config.Required, key), "Pulumi.yaml declares %s, which config does not read", key)
		if slices.Contains(config.Required, key) {
			assert.Nil(t, decl.Default, "%s is required: no default", key)
		} else {
			assert.NotNil(t, decl.Default, "%s is optional, so Pulumi.yaml must give it a default, or the engine refuses every stack that leaves it unset", key)
		}
	}
	// The engine checks that a key declared secret holds an encrypted value, its plain
	// default included: a secret key with a default breaks every stack that leaves it unset.
	// So the optional credentials are not declared secret; the program refuses them in plain
	// text (TestPlainTextCredentialIsRefused).
	for key, decl := range project.Config {
		assert.False(t, decl.Secret && decl.Default != nil, "%s is declared secret with a default, which the engine refuses", key)
	}
	for _, key := range []string{config.KeyGitHubToken, config.KeyGitHubAppPrivateKey} {
		assert.Contains(t, project.Config[key].Description, "--secret", "pulumi config describes how to set %s", key)
	}
}

// The Pulumi SDK's own loaders accept Pulumi.yaml (validated against Pulumi's project
// schema, config declarations included) and every stack file.
func TestPulumiLoadsTheProjectAndStacks(t *testing.T) {
	project, err := workspace.LoadProject(filepath.Join(testkit.RepoRoot(t), "Pulumi.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "lux-gpu-ci", string(project.Name))
	assert.Equal(t, "go", project.Runtime.Name())
	files := stackFiles(t)
	sink := diag.DefaultSink(io.Discard, io.Discard, diag.FormatOptions{Color: colors.Never})
	for _, f := range files {
		stack, err := workspace.LoadProjectStack(sink, project, f)
		require.NoError(t, err, f)
		assert.NotEmpty(t, stack.Config, f)
	}
}

// actionlint knows every runs-on label and scale-set name our stacks register.
func TestActionlintKnowsOurRunnerLabels(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), ".github", "actionlint.yaml"))
	require.NoError(t, err)
	var cfg struct {
		SelfHostedRunner struct {
			Labels []string `yaml:"labels"`
		} `yaml:"self-hosted-runner"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	builtin := []string{"self-hosted", "linux", "x64", "arm64"}
	for _, f := range stackFiles(t) {
		c, err := config.ParseStackFileOffline(f)
		require.NoError(t, err, f)
		for _, p := range c.Pools() {
			for _, l := range append(slices.Clone(p.RunnerLabels), p.RunnerScaleSetName) {
				assert.True(t, slices.Contains(cfg.SelfHostedRunner.Labels, l) || slices.Contains(builtin, l), "%s: %q is not in .github/actionlint.yaml: run make actionlint-config", f, l)
			}
		}
		if r := c.RetryRunner.ScaleSetName; r != "" {
			assert.Contains(t, cfg.SelfHostedRunner.Labels, r, "%s: the retry scale set is not in .github/actionlint.yaml: run make actionlint-config", f)
		}
	}
}

// stackFiles are the repository's Pulumi.<stack>.yaml files: dev and prod at least, so a wrong
// root or pattern fails instead of checking nothing.
func stackFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testkit.RepoRoot(t), "Pulumi.*.yaml"))
	require.NoError(t, err)
	require.Contains(t, files, filepath.Join(testkit.RepoRoot(t), "Pulumi.dev.yaml"))
	require.Contains(t, files, filepath.Join(testkit.RepoRoot(t), "Pulumi.prod.yaml"))
	return files
}

// jsonOf is v's canonical JSON (object keys sorted), for comparing values of different types.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var generic any
	require.NoError(t, json.Unmarshal(b, &generic))
	b, err = json.Marshal(generic)
	require.NoError(t, err)
	return string(b)
}

// Two stacks in one account never collide: every stack file names a cluster of its own, and
// so IAM roles, policies, queue and budget of their own.
func TestStacksDoNotShareClusterNames(t *testing.T) {
	owner := map[string]string{}
	for _, f := range stackFiles(t) {
		c, err := config.ParseStackFileOffline(f)
		require.NoError(t, err, f)
		assert.Empty(t, owner[c.ClusterName], "%s and %s both name cluster %s", owner[c.ClusterName], filepath.Base(f), c.ClusterName)
		owner[c.ClusterName] = filepath.Base(f)
	}
}

// Stacks that register runners in the same organization and runner group never share a scale
// set or a label set (ARC would hand one scale set to two clusters).
func TestStacksDoNotShareScaleSets(t *testing.T) {
	load := func(files ...string) []*config.Config {
		var out []*config.Config
		for _, f := range files {
			c, err := config.ParseStackFileOffline(f)
			require.NoError(t, err, f)
			out = append(out, c)
		}
		return out
	}
	assert.Empty(t, config.ScaleSetClashes(load(stackFiles(t)...)), "the repository's stack files")

	// The prod file as it was: its T4 pool copied dev's scale set name and labels.
	clashes := config.ScaleSetClashes(load(filepath.Join(testkit.FixtureDir(t), "Pulumi.dev.yaml"), filepath.Join("testdata", "shared-scale-set", "Pulumi.prod.yaml")))
	require.Len(t, clashes, 2, "%q", clashes)
	assert.Contains(t, clashes[0], `stacks dev (pool gpu-spot) and prod (pool gpu-t4), organization luxfi, runner group "Default": both register scale set "lux-gpu-t4"`)
	assert.Contains(t, clashes[1], "a labels-form runs-on of [amd64,cuda,gpu,linux,self-hosted,t4] also matches [amd64,cuda,gpu,linux,self-hosted,t4]")

	// A label added on one side only is not enough: dev's runs-on still reaches prod.
	superset := load(filepath.Join(testkit.FixtureDir(t), "Pulumi.dev.yaml"), filepath.Join("testdata", "shared-scale-set", "Pulumi.prod.yaml"))
	superset[1].GPUPools[0].RunnerScaleSetName = "lux-prod-gpu-t4"
	superset[1].GPUPools[0].RunnerLabels = append(superset[1].GPUPools[0].RunnerLabels, "prod")
	clashes = config.ScaleSetClashes(superset)
	require.Len(t, clashes, 1, "%q", clashes)
	assert.Contains(t, clashes[0], "[amd64,cuda,gpu,linux,self-hosted,t4] also matches [amd64,cuda,gpu,linux,prod,self-hosted,t4]")

	// A runner group of its own separates them; so do distinct names and labels.
	sep := load(filepath.Join(testkit.FixtureDir(t), "Pulumi.dev.yaml"), filepath.Join("testdata", "shared-scale-set", "Pulumi.prod.yaml"))
	sep[1].GPUPools[0].RunnerGroup = "production"
	assert.Empty(t, config.ScaleSetClashes(sep))
	sep[1].GPUPools[0].RunnerGroup = "default" // GitHub's names ignore case
	assert.Len(t, config.ScaleSetClashes(sep), 2)

	// Retry runners' scale sets are scale sets too: one name in two stacks clashes.
	sep[1].GPUPools[0].RunnerGroup = "production"
	sep[0].RetryRunner = config.RetryRunner{ScaleSetName: "lux-gpu-retry", RunnerGroup: "retry"}
	sep[1].RetryRunner = config.RetryRunner{ScaleSetName: "lux-gpu-retry", RunnerGroup: "retry"}
	clashes = config.ScaleSetClashes(sep)
	require.Len(t, clashes, 1, "%q", clashes)
	assert.Contains(t, clashes[0], `both register scale set "lux-gpu-retry"`)
	assert.Contains(t, clashes[0], `runner group "retry"`, "in the retry runner's own group")
	sep[1].RetryRunner.RunnerGroup = "prod-retry"
	assert.Empty(t, config.ScaleSetClashes(sep), "one name in two groups is two scale sets")
	sep[1].RetryRunner = config.RetryRunner{ScaleSetName: "lux-prod-gpu-retry", RunnerGroup: "retry"}
	assert.Empty(t, config.ScaleSetClashes(sep))
}

// deploy.yml refuses a stack whose API endpoint does not admit its runner, naming the key.
func TestAPIAdmits(t *testing.T) {
	prod, err := config.ParseStackFileOffline(filepath.Join(testkit.FixtureDir(t), "Pulumi.prod.yaml"))
	require.NoError(t, err)
	require.NoError(t, prod.APIAdmits(netip.MustParseAddr("203.0.113.7")), "inside 203.0.113.0/24")
	err = prod.APIAdmits(netip.MustParseAddr("20.1.2.3"))
	require.Error(t, err, "a GitHub-hosted runner's address")
	assert.Contains(t, err.Error(), "lux-gpu-ci:publicAccessCidrs: [203.0.113.0/24] does not admit 20.1.2.3")
	assert.Contains(t, err.Error(), "add 20.1.2.3/32, or the runner's egress range, to publicAccessCidrs in Pulumi.prod.yaml")
	dev, err := config.ParseStackFileOffline(filepath.Join(testkit.FixtureDir(t), "Pulumi.dev.yaml"))
	require.NoError(t, err)
	assert.NoError(t, dev.APIAdmits(netip.MustParseAddr("20.1.2.3")), "dev's endpoint is open (0.0.0.0/0)")
}

// A stack file read offline (gpuci, the deploy identity) gets the project's defaults for what
// it leaves out, as the engine would give them: every key of Defaults, left out of the
// starter's file one at a time (each one-line key), parses (natMode's default, of the wrong
// type, panicked here).
func TestAStackFileThatLeavesAKeyOutGetsItsDefault(t *testing.T) {
	starter, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "Pulumi.starter.yaml"))
	require.NoError(t, err)
	left := 0
	for _, line := range strings.Split(string(starter), "\n") {
		key, value, ok := strings.Cut(strings.TrimPrefix(line, "  "+config.Project+":"), ":")
		if !ok || !strings.HasPrefix(line, "  "+config.Project+":") || strings.TrimSpace(value) == "" {
			continue // not a key of the project's, or one whose value takes the lines below
		}
		if _, hasDefault := config.Defaults[key]; !hasDefault {
			continue
		}
		left++
		file := filepath.Join(t.TempDir(), "Pulumi.starter.yaml")
		require.NoError(t, os.WriteFile(file, []byte(strings.Replace(string(starter), line+"\n", "", 1)), 0o644))
		require.NotPanics(t, func() {
			_, err = config.ParseStackFileOffline(file)
		}, "the starter without %s", key)
		assert.NoError(t, err, "the starter without %s", key)
	}
	assert.GreaterOrEqual(t, left, 5, "keys of the starter with a default, each left out once")
}
