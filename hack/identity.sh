#!/usr/bin/env bash
# make identity: the deploy identity (identity/, a Pulumi project of its own) for the stacks
# deploy.yml deploys — GitHub's OIDC provider, a deploy role per stack that only the
# repository's GitHub environment of that stack may assume, a read-only preview role for its
# "preview" environment — and each stack's deployRoleArn and previewRoleArn, which give the
# roles their access entries at the stack's next up. make bootstrap runs it when
# DEPLOY_REPOSITORY is set.
#
#   DEPLOY_REPOSITORY=luxfi/lux-gpu-ci STACKS=dev,prod make identity
#
# DEPLOY_REPOSITORY: the repository whose workflows deploy (default: origin's GitHub
# repository). STACKS: the stacks (default: STACK, else the selected one). PULUMI_BACKEND_URL:
# the backend the stacks' state is in (default: the one logged in to). OIDC_PROVIDER_ARN: the
# account's GitHub OIDC provider, if it has one already. IDENTITY_STACK names the identity's
# own stack (github). YES=1 skips the confirmation prompt.
set -euo pipefail
cd "$(dirname "$0")/.."
problems=()
stacks=${STACKS:-${STACK:-$(pulumi stack --show-name 2>/dev/null || true)}}
[[ -n $stacks ]] || problems+=("no stack to deploy: STACKS=dev,prod (or select one: pulumi stack select <name>)")
repo=${DEPLOY_REPOSITORY:-}
if [[ -z $repo ]]; then
	origin=$(git remote get-url origin 2>/dev/null || true)
	repo=$(sed -nE 's#^(https://github\.com/|git@github\.com:)([^/]+/[^/]+)$#\2#p' <<<"${origin%.git}")
fi
[[ $repo == */* ]] || problems+=("DEPLOY_REPOSITORY is not set (and origin is not a GitHub repository): the owner/name whose workflows deploy")
backend=${PULUMI_BACKEND_URL:-$(pulumi whoami --verbose 2>/dev/null | sed -n 's/^Backend URL: //p' || true)}
[[ $backend == s3://* || $backend == https://* ]] ||
	problems+=("the stacks' backend (${backend:-none}) is not one a workflow reaches: export PULUMI_BACKEND_URL=s3://<bucket>")
region=${AWS_REGION:-}
[[ -n $region ]] || problems+=("AWS_REGION is not set: the region the identity's provider calls IAM from")
if ((${#problems[@]})); then
	printf 'make identity cannot start:\n' >&2
	printf '  - %s\n' "${problems[@]}" >&2
	exit 1
fi

identity_stack=${IDENTITY_STACK:-github}
echo "deploy identity $identity_stack: repository $repo, adding stacks $stacks"
pulumi -C identity stack select "$identity_stack" 2>/dev/null ||
	pulumi -C identity stack init "$identity_stack" --secrets-provider passphrase
pulumi -C identity config set aws:region "$region"
pulumi -C identity config set repository "$repo"
pulumi -C identity config set stateBackend "$backend"
if [[ -n ${OIDC_PROVIDER_ARN:-} ]]; then
	pulumi -C identity config set oidcProviderArn "$OIDC_PROVIDER_ARN"
fi
# The stacks the identity already has stay: a second environment's bootstrap adds its role and
# never deletes the first one's. (To drop a stack's role: pulumi -C identity config rm
# 'stacks[N]', then pulumi -C identity up.)
all=$(pulumi -C identity config get stacks 2>/dev/null | tr -d '[]" \n\t' || true)
for s in ${stacks//,/ }; do
	[[ ",$all," == *",$s,"* ]] || all=${all:+$all,}$s
done
pulumi -C identity config rm stacks >/dev/null 2>&1 || true
i=0
for s in ${all//,/ }; do
	pulumi -C identity config set --path "stacks[$i]" "$s"
	i=$((i + 1))
done
yes=()
[[ ${YES:-} == 1 ]] && yes=(--yes)
# ${yes[@]+…}: an empty array under set -u is an error in bash before 4.4 (macOS's 3.2).
pulumi -C identity up ${yes[@]+"${yes[@]}"}

# Each stack gives the roles their access entries (its next up creates them).
roles=$(pulumi -C identity stack output deployRoles --json)
preview=$(pulumi -C identity stack output previewRole)
vars=()
for s in ${stacks//,/ }; do
	arn=$(sed -nE "s/^ *\"$s\": *\"([^\"]+)\",?\$/\\1/p" <<<"$roles")
	[[ -n $arn ]] || { echo "the identity has no deploy role for stack $s" >&2; exit 1; }
	pulumi config set deployRoleArn "$arn" --stack "$s"
	pulumi config set previewRoleArn "$preview" --stack "$s"
	vars+=("gh variable set AWS_DEPLOY_ROLE_ARN --env '$s' --body '$arn' --repo '$repo'")
done
vars+=("gh variable set AWS_PREVIEW_ROLE_ARN --env preview --body '$preview' --repo '$repo'")
echo
echo "The workflows assume these roles from the GitHub environments of their names:"
printf '  %s\n' "${vars[@]}"
echo "Each stack's next up gives the roles their access entries (cluster-admin; preview: read-only)."
