#!/usr/bin/env bash
# make bootstrap: from an AWS account and a GitHub org to a running stack, in one phase.
#
#   export GITHUB_ORG=luxfi             # the organization runners register with (required)
#   export RETRIER_GITHUB_TOKEN=github_pat_...  # optional: the in-cluster retrier, which re-runs
#     interrupted jobs in every repository (it runs the stack's own build of gpuci; with
#     GPUCI_RELEASE=v0.4.0 GPUCI_RELEASE_SHA256=... a release instead)
#   make bootstrap                    # the starter stack; STACK=dev for another; make preflight: the checks only
#
# What it takes from the machine unless told (each said when taken; docs/design.md, "First
# contact"):
#   - the region: AWS_REGION, else the AWS CLI's (aws configure sso sets it);
#   - the state: PULUMI_BACKEND_URL, else the backend logged in to, else
#     s3://lux-gpu-ci-state-<account>-<region>, made versioned and private (LOCAL_STATE=1: this
#     machine's);
#   - the runners' credential: GITHUB_PAT, or GITHUB_APP_ID, GITHUB_APP_INSTALLATION_ID and
#     GITHUB_APP_PRIVATE_KEY_FILE, else the App an earlier bootstrap made for GITHUB_ORG
#     (~/.config/lux-gpu-ci), else it makes one: gpuci github-app, two presses in a browser;
#   - the deploying repository: DEPLOY_REPOSITORY (empty: none), else this checkout's origin when
#     it is a repository of GITHUB_ORG (never another organization's); bootstrap then makes the
#     roles deploy.yml assumes (hack/identity.sh) and, with gh logged in, the repository's
#     environments (the stack's: main only), variables and passphrase secret; DEPLOY_REVIEWERS=
#     alice,bob also makes deploys and previews wait for one of them, where the plan offers it;
#   - the passphrase: PULUMI_CONFIG_PASSPHRASE, else asked for once at the terminal;
#   - the image cache's credentials: DOCKERHUB_USERNAME/_TOKEN, GHCR_USERNAME/_TOKEN (a PAT with
#     read:packages), where the stack caches docker.io or ghcr.io.
#
# Preflight, before anything is changed: the prerequisites, working AWS credentials, the EC2 Spot
# service-linked role. Then it logs in to the backend, creates or selects the stack, sets the
# config (credentials as secrets), checks the account's G and VT vCPU quotas against what the
# stack's pools need (spot and on-demand are separate quotas; new accounts usually have 0) — a
# short one is requested from AWS, once, and the up goes on (the stack needs no GPU to come up;
# its jobs wait for the grant; make preflight only names the request) — and runs `pulumi up`.
# YES=1 skips the confirmation prompt. Each step prints a progress line with the time since the
# start.
set -euo pipefail
cd "$(dirname "$0")/.."
stack=${STACK:-starter}
# Where the quota check reads Pulumi.<stack>.yaml: the repository, unless told otherwise (the
# tests point it at their own test stacks, never at the operator's).
stack_dir=${STACK_FILE_DIR:-.}
# --preflight: the checks alone; --grow: a grown stack file's quotas (asked of AWS) and its up
# (make grow). Neither touches the GitHub side, which is the bootstrap's alone.
mode=bootstrap
case ${1:-} in --preflight) mode=preflight ;; --grow) mode=grow ;; esac
preflight_only=false
[[ $mode != bootstrap ]] && preflight_only=true
problems=()
# step prints a progress line: what starts now, and the time since bootstrap started.
# lower is its argument in lower case: GitHub's logins compare case-insensitively (bash 3.2,
# macOS's, has no ${x,,}).
lower() { tr '[:upper:]' '[:lower:]' <<<"$1"; }
step() { printf '[bootstrap %dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }
need() { command -v "$1" >/dev/null 2>&1 || problems+=("$1 is not installed: $2"); }
stop_if_problems() {
	if ((${#problems[@]})); then
		printf 'bootstrap cannot start:\n' >&2
		printf '  - %s\n' "${problems[@]}" >&2
		exit 1
	fi
}

# load_app_env takes the three GITHUB_APP_* variables from a file gpuci github-app wrote
# (NAME=value lines), and nothing else.
load_app_env() {
	local name value
	while IFS='=' read -r name value; do
		case $name in
		GITHUB_APP_ID | GITHUB_APP_INSTALLATION_ID | GITHUB_APP_PRIVATE_KEY_FILE) printf -v "$name" '%s' "$value" && export "${name?}" ;;
		esac
	done <"$1"
}
gpuci=(go run ./cmd/gpuci)
[[ -n ${GPUCI:-} ]] && gpuci=("$GPUCI")
make_app=false keep_credential=false

step "stack $stack: checking the prerequisites, the Pulumi backend and the AWS credentials"
need pulumi "https://www.pulumi.com/docs/install/ (CLI >= 3.181)"
need go "Go 1.26.8+ builds the program"
need aws "AWS CLI v2: the kubeconfig authenticates with 'aws eks get-token'"
need kubectl "pulumi-eks v2 checks for kubectl at deploy time"
if ! $preflight_only; then
	[[ -n ${GITHUB_ORG:-} ]] || problems+=("GITHUB_ORG is not set: the organization runners register with")
	# Runners' credentials: GITHUB_PAT or the GITHUB_APP_* variables, else the App an earlier
	# bootstrap made for the organization (its variables kept beside its key), else bootstrap
	# makes one below, once every check has passed: two presses in a browser (gpuci github-app).
	app_dir=${LUX_GPU_CI_HOME:-${HOME:-~}/.config/lux-gpu-ci}
	app_env=$app_dir/github-app-${GITHUB_ORG:-}.env
	# A stack file that holds a credential already (a stack bootstrapped before) keeps it:
	# bootstrap run again sets none and makes no App.
	keep_credential=false
	if [[ -z ${GITHUB_PAT:-} && -z ${GITHUB_APP_ID:-} ]] && grep -qE '^  lux-gpu-ci:(githubToken|githubAppId):' "$stack_dir/Pulumi.$stack.yaml" 2>/dev/null; then
		keep_credential=true
		echo "runners' credential: the one Pulumi.$stack.yaml holds (export GITHUB_PAT or the GITHUB_APP_* variables to replace it)"
	fi
	if ! $keep_credential && [[ -z ${GITHUB_PAT:-} && -z ${GITHUB_APP_ID:-} && -n ${GITHUB_ORG:-} ]]; then
		if [[ -r $app_env ]]; then
			load_app_env "$app_env"
			echo "GitHub App: $GITHUB_APP_ID, installation $GITHUB_APP_INSTALLATION_ID ($app_env, from an earlier bootstrap)"
		else
			make_app=true
		fi
	fi
	if [[ -n ${GITHUB_APP_ID:-} && (-z ${GITHUB_APP_INSTALLATION_ID:-} || ! -r ${GITHUB_APP_PRIVATE_KEY_FILE:-/nonexistent}) ]]; then
		problems+=("GitHub App auth needs GITHUB_APP_INSTALLATION_ID and a readable GITHUB_APP_PRIVATE_KEY_FILE")
	fi
	if [[ -n ${GPUCI_RELEASE:-} && -z ${GPUCI_RELEASE_SHA256:-} ]] || [[ -z ${GPUCI_RELEASE:-} && -n ${GPUCI_RELEASE_SHA256:-} ]]; then
		problems+=("set GPUCI_RELEASE and GPUCI_RELEASE_SHA256 together (a v* tag and its gpuci_linux_amd64's SHA-256, from its release notes), or neither: the stack then runs its own build of gpuci")
	fi
fi
# One state for one stack: bootstrap and deploy.yml (which reads vars.PULUMI_BACKEND_URL) must
# use the same backend, or the first deploy creates every resource a second time. So
# PULUMI_BACKEND_URL, or the backend already logged in to; the local file backend only when
# asked for (LOCAL_STATE=1), for a stack no workflow deploys.
# With none of these, the state goes to a bucket of the account's own, named for the account
# and the region (below, once the credentials are known), which bootstrap makes.
default_backend=false
if command -v pulumi >/dev/null 2>&1 && ! $preflight_only; then
	if [[ -z ${PULUMI_BACKEND_URL:-} && ${LOCAL_STATE:-} != 1 ]] && ! pulumi whoami >/dev/null 2>&1; then
		default_backend=true
	fi
fi
if ! $preflight_only; then
	# The state must be where deploy.yml reaches it with the AWS credentials it has, and no
	# other: S3 (or this machine's, with LOCAL_STATE=1).
	case ${PULUMI_BACKEND_URL:-} in
	"" | s3://* | file://*) ;;
	*) problems+=("PULUMI_BACKEND_URL=$PULUMI_BACKEND_URL: deploy.yml gives a workflow AWS credentials and no other, so the state must be in S3 (s3://<bucket>)") ;;
	esac
	# The deploying repository: DEPLOY_REPOSITORY (empty: none), else this checkout's origin when
	# it is a GitHub repository of GITHUB_ORG — the organization's copy the README makes. Never
	# a repository of another organization (a plain clone's origin is upstream's): the deploy
	# role trusts its workflows.
	if [[ -z ${DEPLOY_REPOSITORY+set} && -n ${GITHUB_ORG:-} ]]; then
		origin=$(git config --get remote.origin.url 2>/dev/null) || origin=
		if [[ $origin =~ ^(https://github\.com/|git@github\.com:|ssh://git@github\.com/)([^/]+)/([^/]+)$ ]] &&
			[[ $(lower "${BASH_REMATCH[2]}") == $(lower "$GITHUB_ORG") ]]; then
			DEPLOY_REPOSITORY=${BASH_REMATCH[2]}/${BASH_REMATCH[3]%.git}
			export DEPLOY_REPOSITORY
			echo "deploying repository: $DEPLOY_REPOSITORY, this checkout's origin (DEPLOY_REPOSITORY= for none)"
		fi
	fi
	# The passphrase that encrypts the stack's secrets: asked for once, here, so that pulumi
	# and the deploying repository's environment get the same one (never on a command line).
	if [[ -z ${PULUMI_CONFIG_PASSPHRASE:-} && -z ${PULUMI_CONFIG_PASSPHRASE_FILE:-} ]]; then
		if [[ -t 0 ]]; then
			read -rsp "A passphrase for the stack's secrets (keep it: every deploy needs it): " PULUMI_CONFIG_PASSPHRASE && echo
			read -rsp "Again: " again && echo
			if [[ -z $PULUMI_CONFIG_PASSPHRASE || $PULUMI_CONFIG_PASSPHRASE != "$again" ]]; then
				problems+=("the two passphrases were empty or differed: run make bootstrap again")
			fi
			export PULUMI_CONFIG_PASSPHRASE
		else
			problems+=("PULUMI_CONFIG_PASSPHRASE is not set, and there is no terminal to ask on: export PULUMI_CONFIG_PASSPHRASE (the stack's secrets' passphrase; every deploy needs it)")
		fi
	fi
	# The deploying repository is the organization's own copy (the deploy role trusts its
	# workflows), and gh administers it: its environments and secrets are set after the up,
	# which is too late to learn that they cannot be.
	if [[ -n ${DEPLOY_REPOSITORY:-} ]]; then
		if [[ $(lower "${DEPLOY_REPOSITORY%%/*}") != $(lower "${GITHUB_ORG:-}") ]]; then
			problems+=("DEPLOY_REPOSITORY=$DEPLOY_REPOSITORY is not in GITHUB_ORG=${GITHUB_ORG:-}: the deploy role would trust another organization's workflows; name your organization's copy, ${GITHUB_ORG:-<org>}/<repository>")
		elif [[ ${GH_SETUP:-1} == 1 ]] && command -v gh >/dev/null 2>&1 && gh auth status >/dev/null 2>&1 &&
			[[ $(gh api "repos/$DEPLOY_REPOSITORY" --jq .permissions.admin 2>/dev/null) != true ]]; then
			problems+=("gh is not an admin of $DEPLOY_REPOSITORY: bootstrap sets its environments, variables and secrets after the up (gh auth login as an admin of it, or GH_SETUP=0 to have them printed instead)")
		fi
	fi
fi
if command -v aws >/dev/null 2>&1; then
	if identity=$(aws sts get-caller-identity --query Arn --output text 2>/dev/null); then
		echo "AWS credentials: $identity"
		# The region: AWS_REGION, else the AWS CLI's own (aws configure sso asks for it).
		# (aws configure get reads the config file alone, not AWS_DEFAULT_REGION.)
		if [[ -z ${AWS_REGION:-} ]] && AWS_REGION=${AWS_DEFAULT_REGION:-$(aws configure get region 2>/dev/null)} && [[ -n $AWS_REGION ]]; then
			export AWS_REGION
			echo "region: $AWS_REGION, the AWS CLI's (export AWS_REGION for another)"
		fi
		[[ -n ${AWS_REGION:-} ]] || problems+=("AWS_REGION is not set, and the AWS CLI has no region: export AWS_REGION=us-west-2")
		if $default_backend && [[ -n ${AWS_REGION:-} ]]; then
			account=$(cut -d: -f5 <<<"$identity")
			PULUMI_BACKEND_URL=s3://lux-gpu-ci-state-$account-$AWS_REGION
			export PULUMI_BACKEND_URL
			echo "state: $PULUMI_BACKEND_URL, the account's (made if missing; export PULUMI_BACKEND_URL for another, LOCAL_STATE=1 for this machine's)"
		fi
	else
		problems+=("AWS credentials do not work: 'aws sts get-caller-identity' failed (log in: aws configure sso, which sets the CLI's region too)")
	fi
else
	# Said now, with the install, so that one run of bootstrap names both.
	problems+=("AWS credentials: none yet (once the AWS CLI is installed, log in: aws configure sso, which sets the CLI's region too)")
fi
stop_if_problems

step "checking the EC2 Spot service-linked role"
# Karpenter needs the account's EC2 Spot service-linked role to launch spot capacity; the stack
# creates it if absent (createSpotServiceLinkedRole, on by default) and adopts it otherwise.
if aws iam get-role --role-name AWSServiceRoleForEC2Spot >/dev/null 2>&1; then
	echo "EC2 Spot service-linked role: present (the stack adopts it)"
else
	echo "EC2 Spot service-linked role: absent (the stack creates it; set createSpotServiceLinkedRole=false to leave it alone)"
fi

# The G and VT vCPU quotas the stack's pools need (gpuci quota), against the account's.
check_quotas() {
	local capacity code want pools have needs
	step "checking the account's G and VT vCPU quotas against Pulumi.$stack.yaml (builds gpuci the first time: a minute)"
	# Not a process substitution: its failure would go unnoticed and the check pass empty.
	# GPUCI: a gpuci binary to use (the tests build one once); else it is built from source.
	local gpuci=(go run ./cmd/gpuci)
	[[ -n ${GPUCI:-} ]] && gpuci=("$GPUCI")
	needs=$("${gpuci[@]}" quota --tsv --project "$stack_dir" --stack "$stack") || {
		problems+=("cannot compute the quotas Pulumi.$stack.yaml needs: go run ./cmd/gpuci quota --stack $stack failed (above)")
		stop_if_problems
	}
	while IFS=$'\t' read -r capacity code want pools; do
		[[ -n $capacity ]] || continue
		if ! have=$(aws service-quotas get-service-quota --service-code ec2 --quota-code "$code" --region "$AWS_REGION" --query Quota.Value --output text 2>/dev/null); then
			problems+=("cannot read the $capacity G and VT vCPU quota ($code); check it: aws service-quotas get-service-quota --service-code ec2 --quota-code $code --region $AWS_REGION")
			continue
		fi
		have=${have%.*}
		request=(aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "$code" --desired-value "$want" --region "$AWS_REGION")
		if ((have < want)) && [[ $mode == preflight ]]; then
			problems+=("the $capacity G and VT vCPU quota ($code) is $have in $AWS_REGION; pools $pools need $want. Request it (approval can take a day): ${request[*]}")
		elif ((have < want)); then
			# The stack needs no GPU to come up, only its jobs do: bootstrap asks for the quota
			# (once: an open request is left to AWS) and goes on; a GPU job waits for the grant
			# (gpuci doctor names the refused launches meanwhile).
			open=$(aws service-quotas list-requested-service-quota-change-history-by-quota --service-code ec2 --quota-code "$code" --region "$AWS_REGION" \
				--query "RequestedQuotas[?Status=='PENDING' || Status=='CASE_OPENED'].DesiredValue" --output text 2>/dev/null) || open=
			if [[ -n $open && $open != None ]] && ((${open%%[.[:space:]]*} >= want)); then
				echo "$capacity G and VT vCPU quota ($code): $have, pools $pools need $want; a request for $open is open with AWS"
			elif [[ -n $open && $open != None ]]; then
				# AWS takes one open request per quota: a larger one waits for this one's answer.
				echo "$capacity G and VT vCPU quota ($code): $have, pools $pools need $want; a request for $open is open with AWS, less than needed: once AWS answers it, run make bootstrap again (or: ${request[*]})"
			elif "${request[@]}" --query RequestedQuota.Id --output text >/dev/null; then
				echo "$capacity G and VT vCPU quota ($code): $have, pools $pools need $want; requested (${request[*]}): AWS grants it in minutes to a day, and GPU jobs wait for it, not the stack"
			else
				problems+=("the $capacity G and VT vCPU quota ($code) is $have in $AWS_REGION; pools $pools need $want, and the request failed (above): ${request[*]}")
			fi
		else
			echo "$capacity G and VT vCPU quota ($code): $have, pools $pools need $want"
		fi
	done <<<"$needs"
	stop_if_problems
}

if [[ $mode == grow ]]; then
	pulumi stack select "$stack"
	check_quotas
	step "pulumi up: the pools' new limits"
	yes=()
	[[ ${YES:-} == 1 ]] && yes=(--yes)
	pulumi up --stack "$stack" ${yes[@]+"${yes[@]}"}
	exit 0
fi
if $preflight_only; then
	if [[ -f $stack_dir/Pulumi.$stack.yaml ]]; then
		check_quotas
	else
		echo "no Pulumi.$stack.yaml yet: make bootstrap checks the quotas once the stack is configured"
	fi
	echo "preflight: ok"
	exit 0
fi

if $make_app; then
	step "a GitHub App for $GITHUB_ORG's runners (self-hosted runners: read and write; metadata: read): two presses in a browser"
	mkdir -p "$app_dir" && chmod 700 "$app_dir"
	made=$("${gpuci[@]}" github-app --org "$GITHUB_ORG" --key-out "$app_dir/github-app-$GITHUB_ORG.pem")
	(umask 077 && printf '%s\n' "$made" >"$app_env")
	load_app_env "$app_env"
	echo "GitHub App: $GITHUB_APP_ID, installation $GITHUB_APP_INSTALLATION_ID (kept in $app_env for the next bootstrap)"
fi

# The state bucket, made here when it does not exist yet (no prerequisite of its own): in the
# stack's region, versioned (a state file can be recovered), no public access. One that
# exists is used as it is.
if [[ ${PULUMI_BACKEND_URL:-} == s3://* ]]; then
	state_bucket=${PULUMI_BACKEND_URL#s3://}
	state_bucket=${state_bucket%%[/?]*}
	if ! aws s3api head-bucket --bucket "$state_bucket" >/dev/null 2>&1; then
		step "creating the state bucket $state_bucket in $AWS_REGION: versioned, no public access"
		location=()
		[[ $AWS_REGION != us-east-1 ]] && location=(--create-bucket-configuration "LocationConstraint=$AWS_REGION")
		aws s3api create-bucket --bucket "$state_bucket" --region "$AWS_REGION" ${location[@]+"${location[@]}"} >/dev/null
		aws s3api put-bucket-versioning --bucket "$state_bucket" --versioning-configuration Status=Enabled
		aws s3api put-public-access-block --bucket "$state_bucket" \
			--public-access-block-configuration BlockPublicAcls=true,IgnorePublicAcls=true,BlockPublicPolicy=true,RestrictPublicBuckets=true
	fi
fi

step "logging in to the Pulumi backend, selecting stack $stack, setting its config"
if [[ -n ${PULUMI_BACKEND_URL:-} ]]; then
	pulumi login "$PULUMI_BACKEND_URL"
elif ! pulumi whoami >/dev/null 2>&1; then
	echo "LOCAL_STATE=1: the local file backend (~/.pulumi); no workflow can deploy this stack."
	pulumi login --local
fi
pulumi stack select "$stack" 2>/dev/null || pulumi stack init "$stack" --secrets-provider passphrase

pulumi config set aws:region "$AWS_REGION"
pulumi config set githubOrg "$GITHUB_ORG"
if $keep_credential; then
	:
elif [[ -n ${GITHUB_PAT:-} ]]; then
	printf '%s' "$GITHUB_PAT" | pulumi config set --secret githubToken
else
	pulumi config set githubAppId "$GITHUB_APP_ID"
	pulumi config set githubAppInstallationId "$GITHUB_APP_INSTALLATION_ID"
	pulumi config set --secret githubAppPrivateKey <"$GITHUB_APP_PRIVATE_KEY_FILE"
fi
# The image cache's registry credentials, as one secret (registryCredentials). A stack that
# caches a registry and has none stops at preview with the key and the command to set it.
creds=()
for r in "docker.io DOCKERHUB" "ghcr.io GHCR"; do
	read -r host var <<<"$r"
	user_var=${var}_USERNAME token_var=${var}_TOKEN
	[[ -n ${!token_var:-} ]] || continue
	if [[ -z ${!user_var:-} || ${!user_var}${!token_var} == *[\\\"]* ]]; then
		problems+=("$token_var is set: set $user_var too (neither may hold a quote or a backslash)")
		continue
	fi
	creds+=("\"$host\": {\"username\": \"${!user_var}\", \"accessToken\": \"${!token_var}\"}")
done
stop_if_problems
# The in-cluster retrier (docs/operations.md): its token; a gpuci release for the stack's pods
# if one is named (else the stack builds its own).
if [[ -n ${RETRIER_GITHUB_TOKEN:-} ]]; then
	printf '%s' "$RETRIER_GITHUB_TOKEN" | pulumi config set --secret retrierGitHubToken
fi
if [[ -n ${GPUCI_RELEASE:-} ]]; then
	pulumi config set retrierGpuciVersion "$GPUCI_RELEASE"
	pulumi config set retrierGpuciSha256 "$GPUCI_RELEASE_SHA256"
fi
if ((${#creds[@]})); then
	(IFS=,; printf '{%s}' "${creds[*]}") | pulumi config set --secret registryCredentials
fi
check_quotas

# The identity deploy.yml and preview.yml assume, when the repository that deploys is named:
# before the up, so the stack's first up gives its roles their access entries.
if [[ -n ${DEPLOY_REPOSITORY:-} ]]; then
	step "the deploy identity of $DEPLOY_REPOSITORY (identity/): GitHub OIDC, the deploy and preview roles"
	identity_vars=$(mktemp)
	trap 'rm -f "$identity_vars"' EXIT
	STACKS=$stack hack/identity.sh | tee "$identity_vars"
fi

step "pulumi install: the aws, eks and kubernetes provider plugins"
pulumi install
step "pulumi up: about 25 minutes (the EKS control plane takes ~15); the first run also builds the program (~14 minutes on 2 cores)"
yes=()
[[ ${YES:-} == 1 ]] && yes=(--yes)
# ${a[@]+…}: an empty array under set -u is an error in bash before 4.4 (macOS's is 3.2).
if ! pulumi up --stack "$stack" ${yes[@]+"${yes[@]}"}; then
	# A first up can fail late (a quota, a service-linked role, AWS's eventual consistency):
	# what this machine wrote must not be lost with it. The stack file already holds the
	# stack's secrets, encrypted, and their salt; pulumi up carries on from what it made.
	echo
	step "pulumi up failed (above); nothing made is lost"
	echo "The stack file holds the stack's secrets, encrypted with your passphrase, and their salt:"
	echo "keep it (commit it: deploy.yml needs it):"
	echo "  git add $stack_dir/Pulumi.$stack.yaml && git commit -m 'Stack $stack'"
	echo "Then fix what the up said (gpuci doctor --stack $stack explains a cluster that came up"
	echo "part way) and run the same make bootstrap again: it sets the same config, and pulumi up"
	echo "carries on from the resources the failed run made. To remove them instead: pulumi destroy --stack $stack"
	exit 1
fi
echo
step "done"
echo "Point a workflow at the runners with one of:"
pulumi stack output runsOn --stack "$stack" --json
backend=$(pulumi whoami --verbose 2>/dev/null | sed -n 's/^Backend URL: //p') || backend=""
echo
# The deploying repository's settings: the same state and an AWS role (docs/operations.md,
# "Deploying from GitHub Actions"). With DEPLOY_REPOSITORY named and gh logged in, bootstrap
# makes them itself (GH_SETUP=0 prints them instead): the two GitHub environments the
# workflows run in, the variables, and the passphrase as an environment secret, from standard
# input, never on a command line.
if [[ -n ${DEPLOY_REPOSITORY:-} && ${GH_SETUP:-1} == 1 ]] && command -v gh >/dev/null 2>&1 && gh auth status >/dev/null 2>&1; then
	repo=$DEPLOY_REPOSITORY
	step "the deploying repository $repo: its environments $stack and preview, its variables and the passphrase (gh)"
	# Only main deploys: the stack's environment admits the branch main alone (a deployment
	# branch policy of its own, GitHub's REST API "Deployment branch policies"), and its deploy
	# role trusts refs/heads/main alone besides (identity/: AWS STS checks the job's ref claim).
	# DEPLOY_REVIEWERS (GitHub logins) also makes a deploy wait for one of them, where the
	# repository's plan offers required reviewers; GitHub refuses them otherwise (422), and the
	# branch policy stands alone.
	reviewers= logins=${DEPLOY_REVIEWERS:-}
	for login in ${logins//,/ }; do
		id=$(gh api "users/$login" --jq .id) || { echo "DEPLOY_REVIEWERS: no GitHub user $login" >&2; exit 1; }
		reviewers+="${reviewers:+,}{\"type\":\"User\",\"id\":$id}"
	done
	branch_policy='"deployment_branch_policy":{"protected_branches":false,"custom_branch_policies":true}'
	if [[ -n $reviewers ]] && gh api -X PUT "repos/$repo/environments/$stack" --silent --input - <<<"{$branch_policy,\"reviewers\":[$reviewers]}" 2>/dev/null; then
		echo "environment $stack: main only, a deploy waits for one of $logins"
	else
		if [[ -n $reviewers ]]; then echo "environment $stack: GitHub refused required reviewers (the repository's plan has none); main only"; fi
		gh api -X PUT "repos/$repo/environments/$stack" --silent --input - <<<"{$branch_policy}"
	fi
	if ! gh api "repos/$repo/environments/$stack/deployment-branch-policies" --jq '.branch_policies[].name' | grep -qx main; then
		gh api -X POST "repos/$repo/environments/$stack/deployment-branch-policies" --silent -f name=main -f type=branch
	fi
	# Previews run a pull request's code: its environment waits for a reviewer where the plan
	# offers them (DEPLOY_REVIEWERS); its role reads, and trusts pull requests' refs alone.
	preview_reviewed=
	if [[ -n $reviewers ]] && gh api -X PUT "repos/$repo/environments/preview" --silent --input - <<<"{\"reviewers\":[$reviewers]}" 2>/dev/null; then
		echo "environment preview: a preview waits for one of $logins"
		preview_reviewed=1
	else
		gh api -X PUT "repos/$repo/environments/preview" --silent
	fi
	gh variable set PULUMI_BACKEND_URL --body "${backend:-}" --repo "$repo"
	gh variable set LUX_GPU_CI_STACK --body "$stack" --repo "$repo"
	# The roles' variables hack/identity.sh printed, each with its environment.
	while read -r name env arn; do
		gh variable set "$name" --env "$env" --body "$arn" --repo "$repo"
	done < <(sed -nE "s/^  gh variable set ([A-Z_]+) --env '?([a-z0-9-]+)'? --body '([^']+)'.*/\1 \2 \3/p" "$identity_vars")
	if [[ -n ${PULUMI_CONFIG_PASSPHRASE:-} ]]; then
		printf '%s' "$PULUMI_CONFIG_PASSPHRASE" | gh secret set PULUMI_CONFIG_PASSPHRASE --env "$stack" --repo "$repo"
	else
		echo "  gh secret set PULUMI_CONFIG_PASSPHRASE --env '$stack' --repo '$repo'   # the stack's passphrase (none was in this shell)"
	fi
	# A preview runs a pull request's code with the passphrase, which decrypts the stack's
	# credentials: the preview environment gets it only where a reviewer reads the code first.
	if [[ -n $preview_reviewed && -n ${PULUMI_CONFIG_PASSPHRASE:-} ]]; then
		printf '%s' "$PULUMI_CONFIG_PASSPHRASE" | gh secret set PULUMI_CONFIG_PASSPHRASE --env preview --repo "$repo"
	elif [[ -z $preview_reviewed ]]; then
		echo "environment preview: no required reviewer, so no passphrase: a pull request shows the offline render diff, not pulumi preview"
	fi
else
	echo "To deploy this stack from GitHub Actions (deploy.yml), give the repository the same state"
	echo "and an AWS role (docs/operations.md, \"Deploying from GitHub Actions\"), or run bootstrap"
	echo "with DEPLOY_REPOSITORY and gh logged in, which does it:"
	echo "  gh variable set PULUMI_BACKEND_URL --body '${backend:-<this backend>}'"
	echo "  gh variable set LUX_GPU_CI_STACK --body '$stack'"
	if [[ -z ${DEPLOY_REPOSITORY:-} ]]; then
		echo "  make identity DEPLOY_REPOSITORY=<owner>/<repository>   # the roles deploy.yml and preview.yml assume; it prints their variables"
	else
		grep '^  gh variable set' "$identity_vars"
	fi
	echo "  gh secret set PULUMI_CONFIG_PASSPHRASE --env '$stack'   # an environment secret, never a repository one"
fi
# actionlint (make lint, the test workflow) must know the new stack's runner labels: the file
# is generated from every stack file (gpuci actionlint-config), never edited by hand. Written
# where the stack file is the repository's (ACTIONLINT_CONFIG elsewhere).
actionlint_config=${ACTIONLINT_CONFIG:-}
[[ -z $actionlint_config && $stack_dir == . ]] && actionlint_config=.github/actionlint.yaml
if [[ -n $actionlint_config ]]; then
	"${gpuci[@]}" actionlint-config --project "$stack_dir" --out "$actionlint_config"
	echo "$actionlint_config: the runner labels of every stack file, Pulumi.$stack.yaml's included"
fi
# The GPU smoke test (a job per pool, named for the stack's scale sets) in this repository,
# the organization's copy, which the pools' runner groups admit: the first green job needs
# no other repository. SMOKE_WORKFLOW elsewhere.
smoke=${SMOKE_WORKFLOW:-}
[[ -z $smoke && $stack_dir == . ]] && smoke=.github/workflows/gpu-smoke-$stack.yml
if [[ -n $smoke ]]; then
	written=$(mktemp -d)
	"${gpuci[@]}" workflows --project "$stack_dir" --stack "$stack" --out "$written" >/dev/null
	mv "$written/cuda.yml" "$smoke"
	rm -rf "$written"
	echo "$smoke: the GPU smoke test, a job per pool"
fi
echo
# The hand-off: `pulumi config set` wrote the stack's encryption salt and its secrets
# (encrypted) into the stack file; deploy.yml reads them from the repository, and without
# them fails with "githubToken is not set".
echo "Commit the stack file: it now holds the stack's secrets, encrypted with your passphrase, and"
echo "their salt, which deploy.yml needs (without them its up fails: \"githubToken is not set\"):"
echo "  git add $stack_dir/Pulumi.$stack.yaml${actionlint_config:+ $actionlint_config}${smoke:+ $smoke} && git commit -m 'Stack $stack' && git push"
if [[ -n $smoke ]]; then
	echo "Then run the smoke test (a GPU node launches, the job runs on it, the node goes):"
	echo "  gh workflow run $(basename "$smoke")"
fi
echo
echo "In any repository the runner groups admit, a GPU job is one line: runs-on, a name printed"
echo "above (the stack's retrier, where it has one, re-runs interrupted jobs with nothing in the"
echo "repository; make workflows prints a whole job per pool, and the retry workflow for a stack without it)."
