#!/usr/bin/env bash
# make bootstrap: from an AWS account and a GitHub org to a running stack, in one phase.
#
#   export AWS_REGION=us-west-2 GITHUB_ORG=luxfi GITHUB_PAT=ghp_...      # or, for a GitHub App:
#   export GITHUB_APP_ID=123 GITHUB_APP_INSTALLATION_ID=456 GITHUB_APP_PRIVATE_KEY_FILE=app.pem
#   make bootstrap STACK=dev
#
# It checks the prerequisites, logs in to the local file backend unless a backend is already
# configured, creates or selects the stack, sets the config (credentials as secrets) and
# runs `pulumi up`. Set YES=1 to skip the confirmation prompt.
set -euo pipefail
cd "$(dirname "$0")/.."
stack=${STACK:-dev}
problems=()
need() { command -v "$1" >/dev/null 2>&1 || problems+=("$1 is not installed: $2"); }

need pulumi "https://www.pulumi.com/docs/install/ (CLI >= 3.181)"
need go "Go 1.26.8+ builds the program"
need aws "AWS CLI v2: the kubeconfig authenticates with 'aws eks get-token'"
need kubectl "pulumi-eks v2 checks for kubectl at deploy time"
[[ -n ${AWS_REGION:-} ]] || problems+=("AWS_REGION is not set: export AWS_REGION=us-west-2")
[[ -n ${GITHUB_ORG:-} ]] || problems+=("GITHUB_ORG is not set: the organization runners register with")
if [[ -z ${GITHUB_PAT:-} && -z ${GITHUB_APP_ID:-} ]]; then
	problems+=("neither GITHUB_PAT nor GITHUB_APP_ID is set: runners need credentials")
fi
if [[ -n ${GITHUB_APP_ID:-} && ( -z ${GITHUB_APP_INSTALLATION_ID:-} || ! -r ${GITHUB_APP_PRIVATE_KEY_FILE:-/nonexistent} ) ]]; then
	problems+=("GitHub App auth needs GITHUB_APP_INSTALLATION_ID and a readable GITHUB_APP_PRIVATE_KEY_FILE")
fi
if command -v aws >/dev/null 2>&1 && ! aws sts get-caller-identity >/dev/null 2>&1; then
	problems+=("AWS credentials do not work: 'aws sts get-caller-identity' failed (aws configure / aws sso login)")
fi
if ((${#problems[@]})); then
	printf 'bootstrap cannot start:\n' >&2
	printf '  - %s\n' "${problems[@]}" >&2
	exit 1
fi

if ! pulumi whoami >/dev/null 2>&1; then
	echo "No Pulumi backend configured: using the local file backend (~/.pulumi)."
	pulumi login --local
fi
if [[ -z ${PULUMI_CONFIG_PASSPHRASE:-} && -z ${PULUMI_CONFIG_PASSPHRASE_FILE:-} ]]; then
	echo "Note: stacks use passphrase secrets; Pulumi will ask for the passphrase (or export PULUMI_CONFIG_PASSPHRASE)."
fi
pulumi stack select "$stack" 2>/dev/null || pulumi stack init "$stack" --secrets-provider passphrase

pulumi config set aws:region "$AWS_REGION"
pulumi config set githubOrg "$GITHUB_ORG"
if [[ -n ${GITHUB_PAT:-} ]]; then
	printf '%s' "$GITHUB_PAT" | pulumi config set --secret githubToken
else
	pulumi config set githubAppId "$GITHUB_APP_ID"
	pulumi config set githubAppInstallationId "$GITHUB_APP_INSTALLATION_ID"
	pulumi config set --secret githubAppPrivateKey <"$GITHUB_APP_PRIVATE_KEY_FILE"
fi

pulumi install
yes=()
[[ ${YES:-} == 1 ]] && yes=(--yes)
pulumi up --stack "$stack" "${yes[@]}"
echo
echo "Done. Point a workflow at the runners with one of:"
pulumi stack output runsOn --stack "$stack" --json
