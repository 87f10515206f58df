package config_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// A parsed configuration can be printed or logged whole: no format and no encoding shows a
// credential, and Reveal (what a layer hands to pulumi.ToSecret) still returns it.
func TestCredentialsNeverPrint(t *testing.T) {
	pat := testkit.DevConfig(t)
	app := testkit.DevConfig(t, "githubToken", "", "githubAppId", "123456", "githubAppInstallationId", "12345678", "githubAppPrivateKey", "-----BEGIN RSA PRIVATE KEY-----TESTKEY")
	require.NotNil(t, pat.GitHub.Token)
	require.NotNil(t, app.GitHub.App)
	require.NotEmpty(t, pat.ImageCache.Upstreams)

	assert.Equal(t, testkit.Token, pat.GitHub.Token.Reveal())
	assert.Equal(t, "-----BEGIN RSA PRIVATE KEY-----TESTKEY", app.GitHub.App.PrivateKey.Reveal())
	var withCredential int
	for _, u := range pat.ImageCache.Upstreams {
		if u.Credential != nil {
			withCredential++
			assert.Contains(t, u.Credential.Reveal(), "accessToken")
		}
	}
	require.Positive(t, withCredential, "the test stack caches a registry with a credential")

	for _, leak := range []string{testkit.Token, "TESTKEY", "dckr_pat_TESTTOKEN", "ghp_TESTREADPACKAGES"} {
		for _, cfg := range []any{pat, *pat, app, *app} {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
				assert.NotContains(t, fmt.Sprintf(verb, cfg), leak, "fmt %s of a Config", verb)
			}
			b, err := json.Marshal(cfg)
			require.NoError(t, err)
			assert.NotContains(t, string(b), leak, "JSON of a Config")
		}
	}
	assert.Contains(t, fmt.Sprintf("%+v", pat.GitHub), "[secret]", "a credential prints as [secret]")
}
