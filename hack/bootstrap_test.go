package hack_test

// hack/bootstrap.sh, run as `make bootstrap` runs it.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// make bootstrap names every missing prerequisite before it touches anything.
func TestBootstrapNamesMissingPrerequisites(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = []string{"PATH=/nonexistent", "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "bootstrap must stop: %s", out)
	for _, want := range []string{"pulumi is not installed", "go is not installed", "aws is not installed", "kubectl is not installed",
		"AWS credentials: none yet (once the AWS CLI is installed, log in: aws configure sso", "GITHUB_ORG is not set"} {
		assert.Contains(t, string(out), want)
	}
}

// standIns writes stand-ins for the CLIs bootstrap calls into a directory and returns a PATH
// with it first: `aws` answers from the environment (FAKE_STS=fail, FAKE_SPOT_ROLE=present,
// FAKE_QUOTA_<code>=<vCPUs>, FAKE_QUOTA_OPEN=<an open request's vCPUs>, FAKE_AWS_REGION=<its
// configured region>; FAKE_STATE_BUCKET=absent; the calls that make a bucket or request a
// quota logged to FAKE_AWS_LOG); `pulumi` logs its calls, answers whoami and keeps secrets set from
// standard input, and the stack selected (FAKE_PULUMI_HOME); `kubectl` only exists. Go is the
// real one.
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
"s3api head-bucket") [[ ${FAKE_STATE_BUCKET:-} == absent ]] && exit 254; exit 0 ;;
"configure get") [[ -n ${FAKE_AWS_REGION:-} ]] || exit 1; echo "$FAKE_AWS_REGION" ;;
"service-quotas list-requested-service-quota-change-history-by-quota") echo "${FAKE_QUOTA_OPEN:-None}" ;;
"service-quotas request-service-quota-increase") echo "aws $*" >>"${FAKE_AWS_LOG:-/dev/null}"; echo 0123456789abcdef ;;
"s3api create-bucket" | "s3api put-bucket-versioning" | "s3api put-public-access-block") echo "aws $*" >>"${FAKE_AWS_LOG:-/dev/null}" ;;
*) echo "stand-in aws: $* is not faked" >&2; exit 2 ;;
esac
`,
		// A secret set from standard input lands in $FAKE_PULUMI_SECRETS/<key>.
		// whoami fails with FAKE_PULUMI_WHOAMI=fail (no backend logged in to).
		"pulumi": `#!/usr/bin/env bash
echo "stand-in pulumi $*" >&2
# FAKE_PULUMI_UP=fail: the up fails, late, as a first one can.
[[ $1 == up && ${FAKE_PULUMI_UP:-} == fail ]] && { echo "error: update failed" >&2; exit 255; }
if [[ $1 == whoami ]]; then
	[[ ${FAKE_PULUMI_WHOAMI:-} == fail ]] && exit 255
	[[ ${2:-} == --verbose ]] && echo "Backend URL: s3://lux-gpu-ci-state"
	exit 0
fi
if [[ "$1 $2 $3" == "config set --secret" && $# == 4 && -n ${FAKE_PULUMI_SECRETS:-} ]]; then cat >"$FAKE_PULUMI_SECRETS/$4"; fi
# The stack selected, kept in $FAKE_PULUMI_HOME (as pulumi keeps it in the workspace).
if [[ "$1 $2" == "stack select" || "$1 $2" == "stack init" ]] && [[ -n ${FAKE_PULUMI_HOME:-} ]]; then echo "$3" >"$FAKE_PULUMI_HOME/selected"; fi
if [[ "$1 $2" == "stack --show-name" ]]; then cat "${FAKE_PULUMI_HOME:-/nonexistent}/selected" 2>/dev/null; exit; fi
# The deploy identity's outputs (identity/), as pulumi prints them.
if [[ "$*" == "-C identity stack output deployRoles --json" ]]; then
	printf '{\n  "%s": "arn:aws:iam::123456789012:role/%s-deploy"\n}\n' "${FAKE_IDENTITY_STACK:-starter}" "${FAKE_IDENTITY_STACK:-starter}"
fi
[[ "$*" == "-C identity stack output previewRole" ]] && echo "arn:aws:iam::123456789012:role/lux-gpu-ci-preview-luxfi-lux-gpu-ci"
# The identity's stacks so far (FAKE_IDENTITY_STACKS, as JSON), as pulumi config get prints a list.
if [[ "$*" == "-C identity config get stacks" ]]; then [[ -n ${FAKE_IDENTITY_STACKS:-} ]] || exit 255; echo "$FAKE_IDENTITY_STACKS"; fi
exit 0
`,
		"kubectl": "#!/usr/bin/env bash\nexit 0\n",
		// gh, logged in with FAKE_GH_AUTH=ok; each call is a line of $FAKE_GH_LOG, and a secret
		// set from standard input lands in $FAKE_GH_LOG.<name>.
		// An environment's body (--input -) lands in $FAKE_GH_LOG.env.<environment>; with
		// FAKE_GH_PLAN=free, GitHub refuses required reviewers (422) as a plan without them does.
		"gh": `#!/usr/bin/env bash
if [[ "$1 $2" == "auth status" ]]; then [[ ${FAKE_GH_AUTH:-} == ok ]]; exit; fi
echo "gh $*" >>"${FAKE_GH_LOG:-/dev/null}"
if [[ "$1 $2" == "secret set" ]]; then cat >"${FAKE_GH_LOG:-/dev/null}.$3"; fi
if [[ "$1 $2 $3" == "api -X PUT" && "$*" == *"--input -"* ]]; then
	body=$(cat)
	if [[ $body == *reviewers* && ${FAKE_GH_PLAN:-} == free ]]; then echo "gh: HTTP 422" >&2; exit 1; fi
	printf '%s' "$body" >"${FAKE_GH_LOG:-/dev/null}.env.${4##*/}"
fi
[[ "$1 $2" == "api users/alice" ]] && echo 4242
# The deploying repository's permissions: admin unless FAKE_GH_ADMIN=false.
[[ "$1 $3 $4" == "api --jq .permissions.admin" ]] && echo "${FAKE_GH_ADMIN:-true}"
exit 0
`,
	}
	for name, body := range scripts {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755))
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	return dir + ":" + filepath.Dir(goBin) + ":/usr/bin:/bin"
}

// bootstrapEnv is the environment every bootstrap run of these tests starts from: the
// process's, with gpuci built once (GPUCI) rather than by each run.
func bootstrapEnv() []string {
	// This checkout's origin is not the deploying repository (bootstrap defaults
	// DEPLOY_REPOSITORY to an origin of GITHUB_ORG): git takes the last remote.origin.url, the
	// environment's. A passphrase, as if typed.
	return append(os.Environ(), "GPUCI="+gpuciBin, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=remote.origin.url", "GIT_CONFIG_VALUE_0=/not/github",
		"PULUMI_CONFIG_PASSPHRASE=stand-in passphrase")
}

// preflight runs `make preflight` for the dev stack with the stand-ins and extra env.
func preflight(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "bootstrap.sh", "--preflight")
	cmd.Env = append(bootstrapEnv(), append([]string{"PATH=" + standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR=" + testkit.FixtureDir(t)}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Preflight compares the account's G and VT vCPU quotas with what the dev stack's pools need
// (8 spot vCPUs, 4 on-demand for the retry twin) and stops with the exact request command
// when one is short.
func TestPreflightStopsOnAShortGPUQuota(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	secrets := t.TempDir()
	actionlint := filepath.Join(t.TempDir(), "actionlint.yaml")
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
		"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4", "FAKE_PULUMI_SECRETS="+secrets,
		"DOCKERHUB_USERNAME=luxci", "DOCKERHUB_TOKEN=dckr_pat_1", "GHCR_USERNAME=luxbot", "GHCR_TOKEN=ghp_read", "ACTIONLINT_CONFIG="+actionlint)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	// The stack's runner labels reach actionlint's config by the generator, and the hand-off
	// commits it with the stack file (#50: no undocumented edit for a new stack).
	lint, err := os.ReadFile(actionlint)
	require.NoError(t, err, "bootstrap writes actionlint's config: %s", out)
	assert.Contains(t, string(lint), "- lux-gpu-t4-on-demand\n", "the stack's labels, its twin's included")
	assert.Contains(t, string(out), "git add "+testkit.FixtureDir(t)+"/Pulumi.dev.yaml "+actionlint+" && git commit")
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

// A state bucket that does not exist yet is made by bootstrap (no prerequisite of its own):
// in the stack's region, versioned, no public access; one that exists is left as it is.
func TestBootstrapMakesTheStateBucket(t *testing.T) {
	t.Parallel()
	run := func(bucket string) (string, string) {
		log := filepath.Join(t.TempDir(), "aws.log")
		cmd := exec.Command("bash", "bootstrap.sh")
		cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=eu-west-1", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
			"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4",
			"PULUMI_BACKEND_URL=s3://acme-gpu-ci-state/stacks?region=eu-west-1", "FAKE_STATE_BUCKET="+bucket, "FAKE_AWS_LOG="+log)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		calls, _ := os.ReadFile(log)
		return string(out), string(calls)
	}
	out, calls := run("absent")
	assert.Contains(t, out, "creating the state bucket acme-gpu-ci-state in eu-west-1")
	assert.Equal(t, "aws s3api create-bucket --bucket acme-gpu-ci-state --region eu-west-1 --create-bucket-configuration LocationConstraint=eu-west-1\n"+
		"aws s3api put-bucket-versioning --bucket acme-gpu-ci-state --versioning-configuration Status=Enabled\n"+
		"aws s3api put-public-access-block --bucket acme-gpu-ci-state --public-access-block-configuration BlockPublicAcls=true,IgnorePublicAcls=true,BlockPublicPolicy=true,RestrictPublicBuckets=true\n", calls)
	out, calls = run("present")
	assert.NotContains(t, out, "creating the state bucket")
	assert.Empty(t, calls, "a bucket that exists is used as it is")
}

// A first up that fails late loses nothing this machine wrote: bootstrap says to keep (commit)
// the stack file that holds the secrets and their salt, and how to carry on, and fails (#50).
func TestBootstrapHandsOffAfterAFailedUp(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
		"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4", "FAKE_PULUMI_UP=fail")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "a failed up fails bootstrap: %s", out)
	for _, want := range []string{
		"pulumi up failed (above); nothing made is lost",
		"git add " + testkit.FixtureDir(t) + "/Pulumi.dev.yaml && git commit -m 'Stack dev'",
		"run the same make bootstrap again",
	} {
		assert.Contains(t, string(out), want)
	}
	assert.NotContains(t, string(out), "Point a workflow at the runners", "nothing past the failure")
}

// Unless told otherwise, bootstrap creates the starter stack, which needs 4 spot vCPUs and
// nothing on-demand: the least quota a new account can ask for. (This reads the starter as
// shipped, testkit's copy: the operator grows the repository's own, which only has to stay
// valid — stack/config_test.go TestEveryStackFileIsValid.)
func TestBootstrapStartsWithTheStarterStack(t *testing.T) {
	t.Parallel()
	preflightDefault := func(env ...string) (string, error) {
		cmd := exec.Command("make", "-s", "-C", "..", "preflight")
		base := slices.DeleteFunc(bootstrapEnv(), func(kv string) bool {
			return strings.HasPrefix(kv, "STACK=") || strings.HasPrefix(kv, "STACK_FILE_DIR=")
		})
		cmd.Env = append(base, append([]string{"PATH=" + standIns(t), "AWS_REGION=us-west-2", "STACK_FILE_DIR=" + testkit.FixtureDir(t)}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := preflightDefault("FAKE_QUOTA_L_3819A6DF=0", "FAKE_QUOTA_L_DB2E81BA=0")
	require.Error(t, err, out)
	assert.Contains(t, out, "the spot G and VT vCPU quota (L-3819A6DF) is 0 in us-west-2; pools gpu-spot need 4")
	assert.Contains(t, out, "--quota-code L-3819A6DF --desired-value 4 --region us-west-2")
	assert.NotContains(t, out, "L-DB2E81BA", "no on-demand quota needed")

	out, err = preflightDefault("FAKE_QUOTA_L_3819A6DF=4")
	require.NoError(t, err, out)
	assert.Contains(t, out, "spot G and VT vCPU quota (L-3819A6DF): 4, pools gpu-spot need 4")
}

// One stack, one state: bootstrap refuses a backend deploy.yml cannot reach, logs in to
// PULUMI_BACKEND_URL when given, and with none (and none logged in to, and no LOCAL_STATE)
// keeps the state in a bucket of the account's, named for the account and the region, which it
// makes; it names the repository variables the workflow needs.
func TestBootstrapUsesTheWorkflowsBackend(t *testing.T) {
	t.Parallel()
	run := func(env ...string) (string, error) {
		cmd := exec.Command("bash", "bootstrap.sh")
		cmd.Env = append(bootstrapEnv(), append([]string{"PATH=" + standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR=" + testkit.FixtureDir(t), "YES=1",
			"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4", "FAKE_PULUMI_SECRETS=" + t.TempDir()}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("PULUMI_BACKEND_URL=https://api.pulumi.com")
	require.Error(t, err, out)
	assert.Contains(t, out, "deploy.yml gives a workflow AWS credentials and no other, so the state must be in S3")
	assert.NotContains(t, out, "stand-in pulumi stack", "nothing is changed")

	made := filepath.Join(t.TempDir(), "aws.log")
	out, err = run("FAKE_PULUMI_WHOAMI=fail", "FAKE_STATE_BUCKET=absent", "FAKE_AWS_LOG="+made)
	require.NoError(t, err, out)
	assert.Contains(t, out, "stand-in pulumi login s3://lux-gpu-ci-state-123456789012-us-west-2\n")
	log, err := os.ReadFile(made)
	require.NoError(t, err, out)
	assert.Contains(t, string(log), "aws s3api create-bucket --bucket lux-gpu-ci-state-123456789012-us-west-2 --region us-west-2")

	out, err = run("FAKE_PULUMI_WHOAMI=fail", "LOCAL_STATE=1")
	require.NoError(t, err, out)
	assert.Contains(t, out, "stand-in pulumi login --local")

	out, err = run("PULUMI_BACKEND_URL=s3://lux-gpu-ci-state")
	require.NoError(t, err, out)
	assert.Contains(t, out, "stand-in pulumi login s3://lux-gpu-ci-state")
	assert.Contains(t, out, "gh variable set PULUMI_BACKEND_URL --body 's3://lux-gpu-ci-state'")
	assert.Contains(t, out, "gh variable set LUX_GPU_CI_STACK --body 'dev'")
	// Progress lines with the time since the start, at each step.
	for _, step := range []string{"stack dev: checking the prerequisites", "checking the account's G and VT vCPU quotas", "logging in to the Pulumi backend", "pulumi up: about 25 minutes", "done"} {
		assert.Regexp(t, `(?m)^\[bootstrap \d+m\d\ds\] `+regexp.QuoteMeta(step), out)
	}
}

// With the repository that deploys named, bootstrap makes the identity deploy.yml and
// preview.yml assume (identity/) before the stack's up — so that first up gives the roles
// their access entries — and prints the variables with the roles' ARNs, no placeholder.
func TestBootstrapMakesTheDeployIdentity(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
		"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4", "FAKE_PULUMI_SECRETS="+t.TempDir(),
		"PULUMI_BACKEND_URL=s3://lux-gpu-ci-state", "DEPLOY_REPOSITORY=luxfi/lux-gpu-ci", "FAKE_IDENTITY_STACK=dev")
	b, err := cmd.CombinedOutput()
	out := string(b)
	require.NoError(t, err, out)
	order := []string{
		"stand-in pulumi -C identity config set repository luxfi/lux-gpu-ci",
		"stand-in pulumi -C identity config set stateBackend s3://lux-gpu-ci-state",
		"stand-in pulumi -C identity config set --path stacks[0] dev",
		"stand-in pulumi -C identity up --yes",
		"stand-in pulumi config set deployRoleArn arn:aws:iam::123456789012:role/dev-deploy --stack dev",
		"stand-in pulumi config set previewRoleArn arn:aws:iam::123456789012:role/lux-gpu-ci-preview-luxfi-lux-gpu-ci --stack dev",
		"stand-in pulumi up --stack dev --yes",
		"gh variable set AWS_DEPLOY_ROLE_ARN --env 'dev' --body 'arn:aws:iam::123456789012:role/dev-deploy' --repo 'luxfi/lux-gpu-ci'",
		"gh variable set AWS_PREVIEW_ROLE_ARN --env preview --body 'arn:aws:iam::123456789012:role/lux-gpu-ci-preview-luxfi-lux-gpu-ci'",
	}
	at := 0
	for _, want := range order {
		i := strings.Index(out[at:], want)
		require.GreaterOrEqual(t, i, 0, "%q, after the steps before it:\n%s", want, out)
		at += i + len(want)
	}
	assert.NotContains(t, out, "make identity DEPLOY_REPOSITORY=", "no hint for what was done")
}

// With gh logged in, bootstrap makes the deploying repository's settings itself: the two
// environments the workflows run in, the variables (the roles' ARNs in their environments),
// and the passphrase as the stack's environment secret, from standard input, never on a
// command line. With the retrier's token, it configures the retrier.
func TestBootstrapConfiguresTheDeployingRepository(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "gh.log")
	secrets := t.TempDir()
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
		"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4", "FAKE_PULUMI_SECRETS="+secrets,
		"PULUMI_BACKEND_URL=s3://lux-gpu-ci-state", "DEPLOY_REPOSITORY=luxfi/lux-gpu-ci", "FAKE_IDENTITY_STACK=dev",
		"FAKE_GH_AUTH=ok", "FAKE_GH_LOG="+log, "PULUMI_CONFIG_PASSPHRASE=correct horse",
		"RETRIER_GITHUB_TOKEN=github_pat_retrier", "GPUCI_RELEASE=v0.4.0", "GPUCI_RELEASE_SHA256="+strings.Repeat("ab", 32))
	b, err := cmd.CombinedOutput()
	out := string(b)
	require.NoError(t, err, out)
	calls, err := os.ReadFile(log)
	require.NoError(t, err, "bootstrap called gh: %s", out)
	assert.Equal(t, []string{
		"gh api repos/luxfi/lux-gpu-ci --jq .permissions.admin",
		"gh api -X PUT repos/luxfi/lux-gpu-ci/environments/dev --silent --input -",
		"gh api repos/luxfi/lux-gpu-ci/environments/dev/deployment-branch-policies --jq .branch_policies[].name",
		"gh api -X POST repos/luxfi/lux-gpu-ci/environments/dev/deployment-branch-policies --silent -f name=main -f type=branch",
		"gh api -X PUT repos/luxfi/lux-gpu-ci/environments/preview --silent",
		"gh variable set PULUMI_BACKEND_URL --body s3://lux-gpu-ci-state --repo luxfi/lux-gpu-ci",
		"gh variable set LUX_GPU_CI_STACK --body dev --repo luxfi/lux-gpu-ci",
		"gh variable set AWS_DEPLOY_ROLE_ARN --env dev --body arn:aws:iam::123456789012:role/dev-deploy --repo luxfi/lux-gpu-ci",
		"gh variable set AWS_PREVIEW_ROLE_ARN --env preview --body arn:aws:iam::123456789012:role/lux-gpu-ci-preview-luxfi-lux-gpu-ci --repo luxfi/lux-gpu-ci",
		"gh secret set PULUMI_CONFIG_PASSPHRASE --env dev --repo luxfi/lux-gpu-ci",
	}, strings.Split(strings.TrimSpace(string(calls)), "\n"))
	// The stack's environment admits the branches its own policies name (main), no other.
	body, err := os.ReadFile(log + ".env.dev")
	require.NoError(t, err)
	assert.JSONEq(t, `{"deployment_branch_policy": {"protected_branches": false, "custom_branch_policies": true}}`, string(body))
	passphrase, err := os.ReadFile(log + ".PULUMI_CONFIG_PASSPHRASE")
	require.NoError(t, err)
	assert.Equal(t, "correct horse", string(passphrase), "from standard input")
	assert.NotContains(t, string(calls)+out, "correct horse", "never on a command line or in the output")
	assert.NotContains(t, out, "gh variable set LUX_GPU_CI_STACK", "nothing left to do by hand")

	token, err := os.ReadFile(filepath.Join(secrets, "retrierGitHubToken"))
	require.NoError(t, err, "the retrier's token went in with --secret")
	assert.Equal(t, "github_pat_retrier", string(token))
	assert.Contains(t, out, "stand-in pulumi config set retrierGpuciVersion v0.4.0")
	assert.NotContains(t, out, "github_pat_retrier")

	// A release without its sum stops before anything is changed.
	cmd = exec.Command("bash", "bootstrap.sh")
	cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
		"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4", "PULUMI_BACKEND_URL=s3://lux-gpu-ci-state",
		"RETRIER_GITHUB_TOKEN=github_pat_retrier", "GPUCI_RELEASE=v0.4.0")
	b, err = cmd.CombinedOutput()
	require.Error(t, err, "%s", b)
	assert.Contains(t, string(b), "set GPUCI_RELEASE and GPUCI_RELEASE_SHA256 together")
	assert.NotContains(t, string(b), "stand-in pulumi", "nothing was changed")
}

// Before anything is changed, bootstrap refuses what would fail after the long up or deploy
// the wrong code: a deploying repository outside GITHUB_ORG (upstream's, say), one gh does not
// administer, and a backend deploy.yml cannot reach with AWS credentials alone.
func TestBootstrapRefusesWhatWouldFailAfterTheUp(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"upstream's repository": {[]string{"DEPLOY_REPOSITORY=someone-else/lux-gpu-ci"}, "DEPLOY_REPOSITORY=someone-else/lux-gpu-ci is not in GITHUB_ORG=luxfi"},
		"gh not an admin":       {[]string{"DEPLOY_REPOSITORY=luxfi/lux-gpu-ci", "FAKE_GH_ADMIN=false"}, "gh is not an admin of luxfi/lux-gpu-ci"},
		"Pulumi Cloud":          {[]string{"PULUMI_BACKEND_URL=https://api.pulumi.com"}, "the state must be in S3"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("bash", "bootstrap.sh")
			cmd.Env = append(bootstrapEnv(), append([]string{"PATH=" + standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR=" + testkit.FixtureDir(t), "YES=1",
				"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4", "PULUMI_BACKEND_URL=s3://lux-gpu-ci-state",
				"FAKE_GH_AUTH=ok"}, tc.env...)...)
			b, err := cmd.CombinedOutput()
			require.Error(t, err, "%s", b)
			assert.Contains(t, string(b), tc.want)
			assert.NotContains(t, string(b), "stand-in pulumi up", "nothing was changed")
			assert.NotContains(t, string(b), "stand-in pulumi stack", "nothing was changed")
		})
	}
}

// DEPLOY_REVIEWERS makes a deploy and a preview wait for a reviewer where the plan offers
// required reviewers; where GitHub refuses them, the branch policy stands alone and bootstrap
// says so.
func TestBootstrapAsksForReviewersWhereThePlanAllows(t *testing.T) {
	t.Parallel()
	for plan, want := range map[string]string{
		"team": `{"deployment_branch_policy": {"protected_branches": false, "custom_branch_policies": true}, "reviewers": [{"type": "User", "id": 4242}]}`,
		"free": `{"deployment_branch_policy": {"protected_branches": false, "custom_branch_policies": true}}`,
	} {
		log := filepath.Join(t.TempDir(), "gh.log")
		cmd := exec.Command("bash", "bootstrap.sh")
		cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
			"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4",
			"PULUMI_BACKEND_URL=s3://lux-gpu-ci-state", "DEPLOY_REPOSITORY=luxfi/lux-gpu-ci", "FAKE_IDENTITY_STACK=dev",
			"FAKE_GH_AUTH=ok", "FAKE_GH_LOG="+log, "FAKE_GH_PLAN="+plan, "DEPLOY_REVIEWERS=alice", "PULUMI_CONFIG_PASSPHRASE=correct horse")
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
		// The preview environment holds the passphrase only where a reviewer reads a pull
		// request's code before it runs with it.
		calls, err := os.ReadFile(log)
		require.NoError(t, err)
		previewSecret := "gh secret set PULUMI_CONFIG_PASSPHRASE --env preview --repo luxfi/lux-gpu-ci"
		if plan == "free" {
			assert.NotContains(t, string(calls), previewSecret, "no reviewer: no passphrase for a pull request's code")
			assert.Contains(t, string(b), "no required reviewer, so no passphrase")
		} else {
			assert.Contains(t, string(calls), previewSecret)
		}
		body, err := os.ReadFile(log + ".env.dev")
		require.NoError(t, err)
		assert.JSONEq(t, want, string(body), "plan %s", plan)
		if plan == "free" {
			assert.Contains(t, string(b), "GitHub refused required reviewers")
		} else {
			preview, err := os.ReadFile(log + ".env.preview")
			require.NoError(t, err)
			assert.JSONEq(t, `{"reviewers": [{"type": "User", "id": 4242}]}`, string(preview))
		}
	}
}

// make identity stops, changing nothing, without a repository, a backend a workflow reaches,
// or a stack to deploy.
func TestIdentityNamesWhatItMisses(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("bash", "identity.sh")
	dir := t.TempDir() // not a git checkout: no origin to take the repository from
	cmd.Dir = "."
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "STACK=") || strings.HasPrefix(kv, "PULUMI_BACKEND_URL=") || strings.HasPrefix(kv, "DEPLOY_REPOSITORY=")
	}), "PATH="+standIns(t), "FAKE_PULUMI_WHOAMI=fail", "GIT_DIR="+dir)
	b, err := cmd.CombinedOutput()
	out := string(b)
	require.Error(t, err, out)
	for _, want := range []string{
		"no stack to deploy: STACKS=dev,prod",
		"DEPLOY_REPOSITORY is not set",
		"is not one a workflow reaches: export PULUMI_BACKEND_URL=s3://<bucket>",
		"AWS_REGION is not set",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "stand-in pulumi -C identity", "nothing is changed")
}

// A second environment's identity run adds its stack's deploy role and keeps the first one's:
// the identity's stacks are read back and the new one appended, never replaced.
func TestIdentityAddsAStackAndKeepsTheOthers(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("bash", "identity.sh")
	cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACKS=prod", "YES=1",
		"PULUMI_BACKEND_URL=s3://lux-gpu-ci-state", "DEPLOY_REPOSITORY=luxfi/lux-gpu-ci", "FAKE_IDENTITY_STACK=prod", `FAKE_IDENTITY_STACKS=["dev"]`)
	b, err := cmd.CombinedOutput()
	out := string(b)
	require.NoError(t, err, out)
	set := regexp.MustCompile(`stand-in pulumi -C identity config set --path (stacks\[\d\] \S+)`).FindAllStringSubmatch(out, -1)
	var stacks []string
	for _, m := range set {
		stacks = append(stacks, m[1])
	}
	assert.Equal(t, []string{"stacks[0] dev", "stacks[1] prod"}, stacks, "dev's role kept, prod's added:\n%s", out)
	assert.Contains(t, out, "stand-in pulumi -C identity up --yes")
	assert.Contains(t, out, "gh variable set AWS_DEPLOY_ROLE_ARN --env 'prod'")

	// Run again for prod: nothing doubled.
	cmd = exec.Command("bash", "identity.sh")
	cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACKS=prod", "YES=1",
		"PULUMI_BACKEND_URL=s3://lux-gpu-ci-state", "DEPLOY_REPOSITORY=luxfi/lux-gpu-ci", "FAKE_IDENTITY_STACK=prod", `FAKE_IDENTITY_STACKS=["dev","prod"]`)
	b, err = cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	assert.Equal(t, 2, strings.Count(string(b), "config set --path stacks["), string(b))
}

// A short GPU quota does not stop make bootstrap: the stack needs no GPU to come up, so it asks
// AWS for the quota (once: an open request is left alone) and goes on to the up.
func TestBootstrapAsksForTheGPUQuotaAndGoesOn(t *testing.T) {
	t.Parallel()
	run := func(env ...string) (string, string) {
		log := filepath.Join(t.TempDir(), "aws.log")
		cmd := exec.Command("bash", "bootstrap.sh")
		cmd.Env = append(bootstrapEnv(), append([]string{"PATH=" + standIns(t), "AWS_REGION=us-west-2", "STACK=starter", "STACK_FILE_DIR=" + testkit.FixtureDir(t), "YES=1",
			"GITHUB_ORG=luxfi", "GITHUB_PAT=ghp_x", "PULUMI_BACKEND_URL=s3://lux-gpu-ci-state", "FAKE_PULUMI_SECRETS=" + t.TempDir(), "FAKE_AWS_LOG=" + log}, env...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		b, _ := os.ReadFile(log)
		return string(out), string(b)
	}
	out, calls := run("FAKE_QUOTA_L_3819A6DF=0")
	assert.Contains(t, calls, "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-3819A6DF --desired-value 4 --region us-west-2")
	assert.Contains(t, out, "spot G and VT vCPU quota (L-3819A6DF): 0, pools gpu-spot need 4; requested")
	assert.Contains(t, out, "stand-in pulumi up --stack starter --yes", "the up goes on")

	out, calls = run("FAKE_QUOTA_L_3819A6DF=0", "FAKE_QUOTA_OPEN=4.0")
	assert.NotContains(t, calls, "request-service-quota-increase", "an open request is not made twice")
	assert.Contains(t, out, "a request for 4.0 is open with AWS\n")

	// A smaller request still open (the starter's, before dev's): AWS takes one at a time.
	out, calls = run("FAKE_QUOTA_L_3819A6DF=0", "FAKE_QUOTA_OPEN=2.0")
	assert.NotContains(t, calls, "request-service-quota-increase")
	assert.Contains(t, out, "a request for 2.0 is open with AWS, less than needed: once AWS answers it, run make bootstrap again")
}

// The deploying repository defaults to this checkout's origin only when that is a repository of
// GITHUB_ORG (the copy the README makes): never upstream's, which a plain clone's origin is.
func TestBootstrapDeploysFromTheOrganizationsCopyOnly(t *testing.T) {
	t.Parallel()
	run := func(origin string) string {
		log := filepath.Join(t.TempDir(), "gh.log")
		cmd := exec.Command("bash", "bootstrap.sh")
		cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=dev", "STACK_FILE_DIR="+testkit.FixtureDir(t), "YES=1",
			"GITHUB_ORG=newcomer-org", "GITHUB_PAT=ghp_x", "PULUMI_BACKEND_URL=s3://lux-gpu-ci-state", "FAKE_QUOTA_L_3819A6DF=8", "FAKE_QUOTA_L_DB2E81BA=4",
			"FAKE_PULUMI_SECRETS="+t.TempDir(), "FAKE_GH_AUTH=ok", "FAKE_GH_LOG="+log, "FAKE_IDENTITY_STACK=dev", "GIT_CONFIG_VALUE_0="+origin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		b, _ := os.ReadFile(log)
		return string(out) + string(b)
	}
	out := run("git@github.com:newcomer-org/gpu-ci.git")
	assert.Contains(t, out, "deploying repository: newcomer-org/gpu-ci, this checkout's origin")
	assert.Contains(t, out, "gh api -X PUT repos/newcomer-org/gpu-ci/environments/dev")
	// GitHub's logins are case-insensitive: gh writes the canonical one.
	out = run("https://github.com/Newcomer-Org/gpu-ci.git")
	assert.Contains(t, out, "deploying repository: Newcomer-Org/gpu-ci, this checkout's origin")
	out = run("https://github.com/luxfi/lux-gpu-ci.git")
	assert.NotContains(t, out, "deploying repository:")
	assert.NotContains(t, out, "repos/luxfi/lux-gpu-ci/environments", "upstream's workflows are never trusted")
}

// Bootstrap run again for a stack whose file holds its runners' credential keeps it: no
// GitHub App is made and no credential is set (a second one beside the first would fail the
// config: "both set").
func TestBootstrapAgainKeepsTheStacksCredential(t *testing.T) {
	t.Parallel()
	stacks := t.TempDir()
	starter, err := os.ReadFile(filepath.Join(testkit.FixtureDir(t), "Pulumi.starter.yaml"))
	require.NoError(t, err)
	withToken := string(starter) + "  lux-gpu-ci:githubToken:\n    secure: v1:c3RhbmQtaW4=\n"
	require.NoError(t, os.WriteFile(filepath.Join(stacks, "Pulumi.starter.yaml"), []byte(withToken), 0o644))
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = append(bootstrapEnv(), "PATH="+standIns(t), "AWS_REGION=us-west-2", "STACK=starter", "STACK_FILE_DIR="+stacks, "YES=1",
		"GITHUB_ORG=luxfi", "PULUMI_BACKEND_URL=s3://lux-gpu-ci-state", "FAKE_QUOTA_L_3819A6DF=4", "HOME="+t.TempDir(),
		"GITHUB_SERVER_URL=http://127.0.0.1:1", "GITHUB_API_URL=http://127.0.0.1:1/api/v3")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "runners' credential: the one Pulumi.starter.yaml holds")
	assert.NotContains(t, string(out), "a GitHub App for", "no App made")
	assert.NotRegexp(t, `pulumi config set (--secret )?github(Token|App)`, string(out), "no credential set")
	assert.Contains(t, string(out), "stand-in pulumi up --stack starter --yes")
}
