package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

// pulumi-eks 2.8.1 (dependencies.js) takes the first word of `aws --version`, strips
// "aws-cli/" and needs at least 2.7.0; it reads clientVersion.gitVersion from
// `kubectl version --client=true --output=json` and needs at least 1.24.0.
func TestTheProbesPassPulumiEKSChecks(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, awsCLI(&out, fakeaws.Config{}, []string{"--version"}))
	aws, err := version.ParseGeneric(strings.TrimPrefix(strings.Fields(out.String())[0], "aws-cli/"))
	require.NoError(t, err)
	assert.True(t, aws.AtLeast(version.MustParseGeneric("2.7.0")), "pulumi-eks needs aws-cli 2.7.0 or later, the stand-in says %s", aws)

	out.Reset()
	require.NoError(t, kubectl(&out, fakeaws.Config{}, []string{"version", "--client=true", "--output=json"}))
	var v struct {
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &v))
	kubectlVersion, err := version.ParseSemantic(v.ClientVersion.GitVersion)
	require.NoError(t, err)
	assert.True(t, kubectlVersion.AtLeast(version.MustParseSemantic("1.24.0")), "pulumi-eks needs kubectl 1.24.0 or later, the stand-in says %s", kubectlVersion)

	assert.Error(t, awsCLI(&out, fakeaws.Config{}, []string{"s3", "ls"}), "anything else is not faked")
}

// eks get-token hands out the configured client certificate as an ExecCredential, and the
// call (with the profile it ran as) is logged.
func TestGetToken(t *testing.T) {
	dir := t.TempDir()
	cfg := fakeaws.Config{Log: filepath.Join(dir, "log"), ClientCert: filepath.Join(dir, "c.crt"), ClientKey: filepath.Join(dir, "c.key")}
	require.NoError(t, os.WriteFile(cfg.ClientCert, []byte("CERT"), 0o600))
	require.NoError(t, os.WriteFile(cfg.ClientKey, []byte("KEY"), 0o600))
	t.Setenv("AWS_PROFILE", "ci")

	var out bytes.Buffer
	require.NoError(t, awsCLI(&out, cfg, []string{"eks", "get-token", "--cluster-name", "lux-gpu-ci", "--output", "json"}))
	var cred struct {
		Kind   string
		Status struct{ ClientCertificateData, ClientKeyData string }
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &cred))
	assert.Equal(t, "ExecCredential", cred.Kind)
	assert.Equal(t, "CERT", cred.Status.ClientCertificateData)
	assert.Equal(t, "KEY", cred.Status.ClientKeyData)

	calls, err := fakeaws.ReadCalls(cfg.Log)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, "ci", calls[0].Env["AWS_PROFILE"])
	assert.Error(t, awsCLI(&out, cfg, []string{"eks", "get-token"}), "a token needs a cluster name")
}
