package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

const releaseSHA = "3f1c2a9e0b7d4c5a6e8f9012345678901234567890abcdef1234567890abcdef"

func parseRetrier(t *testing.T, secret bool, kv ...string) (*config.Config, error) {
	t.Helper()
	cfg := testkit.StackConfig(t, "dev")
	for i := 0; i+1 < len(kv); i += 2 {
		cfg = testkit.With(cfg, kv[i], kv[i+1])
	}
	return config.Parse("dev", func(k string) (string, bool) { v, ok := cfg[k]; return v, ok },
		func(k string) bool { return secret || k != "lux-gpu-ci:retrierGitHubToken" })
}

// The in-cluster retrier is on with its token, and runs the stack's own gpuci or a release it
// can check; every half-configured form is refused naming its key.
func TestTheRetrierIsConfiguredWhole(t *testing.T) {
	c, err := parseRetrier(t, true)
	require.NoError(t, err)
	assert.False(t, c.Retrier.Enabled(), "off by default")

	c, err = parseRetrier(t, true, "retrierGitHubToken", "github_pat_x")
	require.NoError(t, err, "no release: the stack builds its own gpuci")
	assert.True(t, c.Retrier.Enabled())
	assert.False(t, c.Gpuci.Pinned())

	c, err = parseRetrier(t, true, "retrierGitHubToken", "github_pat_x", "retrierGpuciVersion", "v0.4.0", "retrierGpuciSha256", releaseSHA)
	require.NoError(t, err)
	require.True(t, c.Retrier.Enabled())
	assert.Equal(t, "github_pat_x", c.Retrier.GitHubToken.Reveal())
	assert.Equal(t, config.Gpuci{Version: "v0.4.0", SHA256: releaseSHA}, c.Gpuci)
	assert.Equal(t, 30*time.Minute, c.Retrier.SpotCoolDown, "the default cool-down")

	for name, tc := range map[string]struct {
		secret bool
		kv     []string
		key    string
	}{
		"a branch, not a tag":   {true, []string{"retrierGitHubToken", "github_pat_x", "retrierGpuciVersion", "main", "retrierGpuciSha256", releaseSHA}, "retrierGpuciVersion"},
		"a short sum":           {true, []string{"retrierGitHubToken", "github_pat_x", "retrierGpuciVersion", "v0.4.0", "retrierGpuciSha256", "3f1c2a9e"}, "retrierGpuciSha256"},
		"a release, no sum":     {true, []string{"retrierGpuciVersion", "v0.4.0"}, "retrierGpuciSha256"},
		"a cool-down of a day":  {true, []string{"retrierGitHubToken", "github_pat_x", "retrierGpuciVersion", "v0.4.0", "retrierGpuciSha256", releaseSHA, "retrierSpotCoolDown", "24h"}, "retrierSpotCoolDown"},
		"a cool-down in days":   {true, []string{"retrierGitHubToken", "github_pat_x", "retrierGpuciVersion", "v0.4.0", "retrierGpuciSha256", releaseSHA, "retrierSpotCoolDown", "1d"}, "retrierSpotCoolDown"},
		"a token in plain text": {false, []string{"retrierGitHubToken", "github_pat_x", "retrierGpuciVersion", "v0.4.0", "retrierGpuciSha256", releaseSHA}, "retrierGitHubToken"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseRetrier(t, tc.secret, tc.kv...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "lux-gpu-ci:"+tc.key)
			assert.NotContains(t, err.Error(), "github_pat_x", "no message holds the token")
		})
	}
}
