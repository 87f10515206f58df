// Package testkit holds the fixtures the unit tests of several packages share: test stacks
// (testdata/Pulumi.<stack>.yaml, copies of the repository's that the operator's edits do not
// reach) as the engine hands them to the program, and small edits of them.
package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
)

// Token stands in for a GitHub PAT, which a real stack holds encrypted; tests check it never
// leaves a secret.
const Token = "ghp_TESTTOKEN0123456789"

// RegistryCredentials stand in for the image cache's registry credentials (docker.io and
// ghcr.io), which a real stack holds encrypted; tests check they never leave a secret.
const RegistryCredentials = `{"docker.io": {"username": "luxci", "accessToken": "dckr_pat_TESTTOKEN"}, "ghcr.io": {"username": "luxci", "accessToken": "ghp_TESTREADPACKAGES"}}`

// SecretKeys are the config keys a real stack stores with --secret.
var SecretKeys = []string{"lux-gpu-ci:githubToken", "lux-gpu-ci:githubAppPrivateKey", "lux-gpu-ci:registryCredentials", "lux-gpu-ci:retrierGitHubToken"}

// Unset, as a value for With, removes the key.
const Unset = "<unset>"

// RepoRoot is the repository's top directory (where go.mod is), from any package's tests.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test's directory")
		dir = parent
	}
}

// FixtureDir holds the test stacks, testdata/Pulumi.<stack>.yaml.
func FixtureDir(t testing.TB) string {
	return filepath.Join(RepoRoot(t), "internal", "testsupport", "testkit", "testdata")
}

// StackConfig reads the test stack's Pulumi.<stack>.yaml as the Pulumi CLI hands it to a
// program, plus the credentials a real stack holds encrypted (Token, and RegistryCredentials
// where the stack caches registries that need them).
func StackConfig(t testing.TB, stack string) map[string]string {
	t.Helper()
	return stackConfig(t, config.StackFile(FixtureDir(t), stack))
}

// RepoStackConfig is StackConfig for the repository's own Pulumi.<stack>.yaml: only for the
// tests that validate the repository's stack files.
func RepoStackConfig(t testing.TB, stack string) map[string]string {
	t.Helper()
	return StackFileConfig(t, config.StackFile(RepoRoot(t), stack))
}

// StackFileConfig is StackConfig for the stack file at path: the GitHub credential a real
// stack holds encrypted is added only where the file names none (a file bootstrap wrote with
// a GitHub App's keys keeps them: its encrypted key reads as config.SecretPlaceholder).
func StackFileConfig(t testing.TB, path string) map[string]string {
	t.Helper()
	return stackConfig(t, path)
}

func stackConfig(t testing.TB, file string) map[string]string {
	t.Helper()
	cfg, _, err := config.ReadStackFile(file)
	require.NoError(t, err)
	if cfg["lux-gpu-ci:githubToken"] == "" && cfg["lux-gpu-ci:githubAppId"] == "" && cfg["lux-gpu-ci:githubAppPrivateKey"] == "" {
		cfg["lux-gpu-ci:githubToken"] = Token
	}
	if creds := registryCredentialsFor(t, cfg["lux-gpu-ci:imageCache"]); creds != "" {
		cfg["lux-gpu-ci:registryCredentials"] = creds
	}
	return cfg
}

// registryCredentialsFor is RegistryCredentials for the registries of an imageCache value
// (its JSON) that need one; "" when none does.
func registryCredentialsFor(t testing.TB, imageCache string) string {
	t.Helper()
	var hosts []string
	if imageCache != "" {
		require.NoError(t, json.Unmarshal([]byte(imageCache), &hosts))
	}
	var all, creds map[string]config.RegistryCredential
	require.NoError(t, json.Unmarshal([]byte(RegistryCredentials), &all))
	for _, h := range hosts {
		if c, ok := all[h]; ok {
			if creds == nil {
				creds = map[string]config.RegistryCredential{}
			}
			creds[h] = c
		}
	}
	if creds == nil {
		return ""
	}
	b, err := json.Marshal(creds)
	require.NoError(t, err)
	return string(b)
}

// With returns a copy of cfg with the given keys set (Unset removes one). Project keys may
// be given without the "lux-gpu-ci:" prefix.
func With(cfg map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range cfg {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i]
		if !strings.Contains(k, ":") {
			k = config.Project + ":" + k
		}
		if kv[i+1] == Unset {
			delete(out, k)
		} else {
			out[k] = kv[i+1]
		}
	}
	return out
}

// Parse validates a stack's config as the program does, without the secret check.
func Parse(t testing.TB, stack string, cfg map[string]string) *config.Config {
	t.Helper()
	c, err := config.Parse(stack, func(k string) (string, bool) {
		v, ok := cfg[k]
		return v, ok
	}, nil)
	require.NoError(t, err)
	return c
}

// DevConfig is the test dev stack's validated configuration, with overrides as for With.
func DevConfig(t testing.TB, kv ...string) *config.Config {
	t.Helper()
	return Parse(t, "dev", With(StackConfig(t, "dev"), kv...))
}

// WarmPools is a gpuPools value: the test dev stack's two pools with warm windows: the runner-form pool on
// weekdays in Berlin, the container-form pool with its CUDA image on weekends in UTC.
const WarmPools = `[
	{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 2, "maxRunners": 1, "runnerScaleSetName": "lux-gpu-t4",
	 "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4"], "onDemandRetry": true,
	 "warm": {"timeZone": "Europe/Berlin", "windows": [{"days": "mon-fri", "from": "08:00", "to": "19:00", "nodes": 2}]}},
	{"name": "gpu-spot-container", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 1, "maxRunners": 1, "runnerScaleSetName": "lux-gpu-t4-container",
	 "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4-container"], "jobForm": "container", "runnerGroup": "gpu-trusted", "trustedRepositoriesOnly": true,
	 "warm": {"windows": [{"days": "sat,sun", "from": "10:00", "to": "12:30", "nodes": 1}], "images": ["nvidia/cuda:12.8.1-devel-ubuntu24.04"]}}
]`
