package hack_test

// hack/bootstrap.sh, run as `make bootstrap` runs it.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// make bootstrap names every missing prerequisite before it touches anything.
func TestBootstrapNamesMissingPrerequisites(t *testing.T) {
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = []string{"PATH=/nonexistent", "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "bootstrap must stop: %s", out)
	for _, want := range []string{"pulumi is not installed", "go is not installed", "aws is not installed", "kubectl is not installed",
		"AWS_REGION is not set", "GITHUB_ORG is not set", "neither GITHUB_PAT nor GITHUB_APP_ID is set"} {
		assert.Contains(t, string(out), want)
	}
}

// standIns writes stand-ins for the CLIs bootstrap calls into a directory and returns a PATH
// with it first: `aws` answers from the environment (FAKE_STS=fail, FAKE_SPOT_ROLE=present,
// FAKE_QUOTA_<code>=<vCPUs>); `pulumi` and `kubectl` only exist. Go is the real one.
func standIns(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	scripts := map[string]string{
		"aws": `#!/usr/bin/env bash
case "$1 $2" in
"sts get-caller-identity") [[ ${FAKE_STS:-} == fail ]] && exit 255; echo "arn:aws:iam::123456789012:user/ci" ;;
"iam get-role") [[ ${FAKE_SPOT_ROLE:-} == present ]] || exit 254; echo AWSServiceRoleForEC2Spot ;;
"service-quotas get-service-quota")
	code=$(sed -n 's/.*--quota-code \([^ ]*\).*/\1/p' <<<"$*")
	var="FAKE_QUOTA_${code//-/_}"; [[ -n ${!var:-} ]] || exit 254; echo "${!var}" ;;
*) echo "stand-in aws: $* is not faked" >&2; exit 2 ;;
esac
`,
		// A secret set from standard input lands in $FAKE_PULUMI_SECRETS/<key>.
		"pulumi": `#!/usr/bin/env bash
echo "stand-in pulumi $*" >&2
if [[ "$1 $2 $3" == "config set --secret" && $# == 4 && -n ${FAKE_PULUMI_SECRETS:-} ]]; then cat >"$FAKE_PULUMI_SECRETS/$4"; fi
`,
		"kubectl": "#!/usr/bin/env bash\nexit 0\n",
	}
	for name, body := range scripts {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755))
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	return dir + ":" + filepath.Dir(goBin) + ":/usr/bin:/bin"
}

// preflight runs `make preflight` for the dev stack with the stand-ins and extra env.
func preflight(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "bootstrap.sh", "--preflight")
	cmd.Env = append(os.Environ(), append([]string{"PATH=" + standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR=" + testkit.FixtureDir(t)}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Preflight compares the account's G and VT vCPU quotas with what the dev stack's pools need
// (8 spot vCPUs, 4 on-demand for the retry twin) and stops with the exact request command
// when one is short.
func TestPreflightStopsOnAShortGPUQuota(t *testing.T) {
	out, err := preflight(t, "FAKE_QUOTA_L_3819A6DF=0.0", "FAKE_QUOTA_L_DB2E81BA=4.0")
	require.Error(t, err, out)
	assert.Contains(t, out, "the spot G and VT vCPU quota (L-3819A6DF) is 0 in us-west-2; pools gpu-spot,gpu-spot-container need 8")
	assert.Contains(t, out, "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-3819A6DF --desired-value 8 --region us-west-2")
	assert.NotContains(t, out, "stand-in pulumi", "nothing is changed")

	out, err = preflight(t, "FAKE_QUOTA_L_3819A6DF=16.0", "FAKE_QUOTA_L_DB2E81BA=0.0")
	require.Error(t, err, out)
	assert.Contains(t, out, "the on-demand G and VT vCPU quota (L-DB2E81BA) is 0 in us-west-2; pools gpu-spot-on-demand need 4")

	out, err = preflight(t, "FAKE_QUOTA_L_3819A6DF=16.0", "FAKE_QUOTA_L_DB2E81BA=4.0", "FAKE_SPOT_ROLE=present")
	require.NoError(t, err, out)
	assert.Contains(t, out, "spot G and VT vCPU quota (L-3819A6DF): 16, pools gpu-spot,gpu-spot-container need 8")
	assert.Contains(t, out, "EC2 Spot service-linked role: present (the stack adopts it)")
	assert.Contains(t, out, "preflight: ok")
}

func TestPreflightChecksCredentialsAndTheSpotRole(t *testing.T) {
	out, err := preflight(t, "FAKE_STS=fail")
	require.Error(t, err, out)
	assert.Contains(t, out, "AWS credentials do not work")

	out, err = preflight(t, "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4")
	require.NoError(t, err, out)
	assert.Contains(t, out, "EC2 Spot service-linked role: absent (the stack creates it")
	assert.Contains(t, out, "AWS credentials: arn:aws:iam::123456789012:user/ci")
}

// The image cache's credentials reach the stack as one secret, in the shape the program reads.
func TestBootstrapSetsTheRegistryCredentialsAsOneSecret(t *testing.T) {
	secrets := t.TempDir()
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = append(os.Environ(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
		"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4", "FAKE_PULUMI_SECRETS="+secrets,
		"DOCKERHUB_USERNAME=luxci", "DOCKERHUB_TOKEN=dckr_pat_1", "GHCR_USERNAME=luxbot", "GHCR_TOKEN=ghp_read")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(filepath.Join(secrets, "registryCredentials"))
	require.NoError(t, err, "registryCredentials was set with --secret: %s", out)
	var got map[string]map[string]string
	require.NoError(t, json.Unmarshal(b, &got), "%s", b)
	assert.Equal(t, map[string]map[string]string{
		"docker.io": {"username": "luxci", "accessToken": "dckr_pat_1"},
		"ghcr.io":   {"username": "luxbot", "accessToken": "ghp_read"},
	}, got, "config.RegistryCredential's shape")
	assert.NotContains(t, string(out), "dckr_pat_1", "never printed")

	again := exec.Command("bash", "bootstrap.sh")
	again.Env = append(cmd.Env, "GHCR_USERNAME=")
	out, err = again.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "GHCR_TOKEN is set: set GHCR_USERNAME too")
}
