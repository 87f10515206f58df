package infra

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
)

// The deploy identity: the GitHub OIDC provider, a deploy role per stack and one preview role,
// for the identity/ project (config.Identity says why it is a project of its own). Each role
// is assumable only by a workflow job of one repository running in one GitHub environment:
// the stack's own for its deploy role, "preview" for the preview role. What each may do is
// written down below, statement by statement.

// GitHub Actions' OIDC issuer, and the audience aws-actions/configure-aws-credentials asks
// for (v4.3.1 action.yml: `audience: default: sts.amazonaws.com`).
const (
	GitHubOIDCHost     = "token.actions.githubusercontent.com"
	GitHubOIDCAudience = "sts.amazonaws.com"
)

// GitHubEnvironmentSubject is the `sub` claim of a job that runs in a GitHub environment:
// repo:<owner>/<name>:environment:<environment>, with no ref (GitHub's OIDC reference,
// "Filtering for a specific environment"); which branches may use the environment is the
// environment's own deployment-branch rule.
func GitHubEnvironmentSubject(repository, environment string) string {
	return fmt.Sprintf("repo:%s:environment:%s", repository, environment)
}

// githubTrust lets a job of repository in environment assume a role through the OIDC provider.
func githubTrust(provider pulumi.StringInput, repository, environment string) []statement {
	return []statement{{
		Actions:          []string{"sts:AssumeRoleWithWebIdentity"},
		OutputPrincipals: []outputPrincipal{{Type: "Federated", Identifiers: pulumi.StringArray{provider}}},
		Conditions: []condition{
			{Test: "StringEquals", Variable: GitHubOIDCHost + ":aud", Values: []string{GitHubOIDCAudience}},
			{Test: "StringEquals", Variable: GitHubOIDCHost + ":sub", Values: []string{GitHubEnvironmentSubject(repository, environment)}},
		},
	}}
}

// identityScope is what the roles' statements name: the account, and for a deploy role its
// stack.
type identityScope struct {
	Partition, Account string
	Stack              config.IdentityStack
	// StateBucket and StatePrefix are the Pulumi state's place in S3 ("" bucket: not in S3).
	StateBucket, StatePrefix string
}

func (s identityScope) arn(service, region, resource string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", s.Partition, service, region, s.Account, resource)
}

func inRegion(region string) condition {
	return condition{Test: "StringEquals", Variable: "aws:RequestedRegion", Values: []string{region}}
}

// stateStatements read (and, for a deploy, write) the stacks' state in its S3 bucket.
func stateStatements(s identityScope, write bool) []statement {
	if s.StateBucket == "" {
		return nil
	}
	objects := "*"
	if s.StatePrefix != "" {
		objects = s.StatePrefix + "/*"
	}
	actions := []string{"s3:GetObject"}
	if write {
		// A deploy writes checkpoints, history and a lock, and removes the lock.
		actions = append(actions, "s3:PutObject", "s3:DeleteObject")
	}
	list := statement{Sid: "ListTheState", Actions: []string{"s3:ListBucket", "s3:GetBucketLocation"},
		Resources: pulumi.ToStringArray([]string{fmt.Sprintf("arn:%s:s3:::%s", s.Partition, s.StateBucket)})}
	if s.StatePrefix != "" {
		list.Conditions = []condition{{Test: "StringLike", Variable: "s3:prefix", Values: []string{s.StatePrefix, s.StatePrefix + "/*"}}}
	}
	return []statement{list, {Sid: "TheState", Actions: actions,
		Resources: pulumi.ToStringArray([]string{fmt.Sprintf("arn:%s:s3:::%s/%s", s.Partition, s.StateBucket, objects)})}}
}

// deployStatements are what `pulumi up`, refresh and destroy of one stack do in AWS, by
// what the stack holds (infra/): a service the stack does not use is not in them, and where
// the stack names its resources the statement names them too. The IAM statement is the
// widest: the stack makes roles (Karpenter's, the nodes', each compiler cache's; pulumi-eks
// autonames its own), so it may make any role of the account — which lets whoever runs as
// this role give itself more. That is why its trust admits one environment of one repository
// (docs/operations.md, "Deploying from GitHub Actions": require reviewers on prod's).
func deployStatements(s identityScope) []statement {
	st := s.Stack
	region := st.Region
	res := func(arns ...string) pulumi.StringArray { return pulumi.ToStringArray(arns) }
	out := []statement{
		{Sid: "TheNetworkAndTheSystemNodes", Actions: []string{"ec2:*"}, Resources: res("*"), Conditions: []condition{inRegion(region)}},
		{Sid: "TheCluster", Actions: []string{"eks:*"}, Resources: res(
			s.arn("eks", region, "cluster/"+st.ClusterName),
			s.arn("eks", region, "nodegroup/"+st.ClusterName+"/*"),
			s.arn("eks", region, "addon/"+st.ClusterName+"/*"),
			s.arn("eks", region, "access-entry/"+st.ClusterName+"/*"),
			s.arn("eks", region, "podidentityassociation/"+st.ClusterName+"/*"),
		)},
		// Account-wide reads: the region's clusters (is this one live?), add-on versions, and
		// the access policies an access entry is associated with.
		{Sid: "TheClustersOfTheRegion", Actions: []string{"eks:ListClusters", "eks:DescribeAddonVersions", "eks:ListAccessPolicies", "eks:DescribeClusterVersions"},
			Resources: res("*"), Conditions: []condition{inRegion(region)}},
		{Sid: "TheStacksRoles", Actions: []string{
			"iam:CreateRole", "iam:DeleteRole", "iam:GetRole", "iam:UpdateRole", "iam:UpdateAssumeRolePolicy", "iam:TagRole", "iam:UntagRole", "iam:ListRoleTags",
			"iam:PutRolePolicy", "iam:GetRolePolicy", "iam:DeleteRolePolicy", "iam:ListRolePolicies",
			"iam:AttachRolePolicy", "iam:DetachRolePolicy", "iam:ListAttachedRolePolicies", "iam:ListInstanceProfilesForRole",
			"iam:CreatePolicy", "iam:DeletePolicy", "iam:GetPolicy", "iam:TagPolicy", "iam:UntagPolicy", "iam:ListPolicyTags",
			"iam:CreatePolicyVersion", "iam:DeletePolicyVersion", "iam:GetPolicyVersion", "iam:ListPolicyVersions",
			"iam:ListRoles",
		}, Resources: res(
			fmt.Sprintf("arn:%s:iam::%s:role/*", s.Partition, s.Account),
			fmt.Sprintf("arn:%s:iam::%s:policy/*", s.Partition, s.Account),
		)},
		// A role goes only to the services that run the stack: EKS (the cluster, its node
		// groups), EC2 (the nodes) and EKS Pod Identity (Karpenter, the compiler caches).
		{Sid: "PassTheStacksRolesToItsServices", Actions: []string{"iam:PassRole"},
			Resources: res(fmt.Sprintf("arn:%s:iam::%s:role/*", s.Partition, s.Account)),
			Conditions: []condition{{Test: "StringEquals", Variable: "iam:PassedToService",
				Values: []string{"eks.amazonaws.com", "ec2.amazonaws.com", "pods.eks.amazonaws.com"}}}},
		// The service-linked roles the stack makes (spot: createSpotServiceLinkedRole) or EKS
		// makes on its first cluster and node group.
		{Sid: "TheServiceLinkedRoles", Actions: []string{"iam:CreateServiceLinkedRole"},
			Resources: res(fmt.Sprintf("arn:%s:iam::%s:role/aws-service-role/*", s.Partition, s.Account)),
			Conditions: []condition{{Test: "StringEquals", Variable: "iam:AWSServiceName",
				Values: []string{"spot.amazonaws.com", "eks.amazonaws.com", "eks-nodegroup.amazonaws.com", "autoscaling.amazonaws.com"}}}},
		{Sid: "TheInterruptionQueue", Actions: []string{"sqs:*"}, Resources: res(s.arn("sqs", region, st.ClusterName+"-*"))},
		{Sid: "TheInterruptionRules", Actions: []string{"events:*"}, Resources: res(s.arn("events", region, "rule/karpenter-*"))},
		{Sid: "TheImageCache", Actions: []string{
			"ecr:CreatePullThroughCacheRule", "ecr:DeletePullThroughCacheRule", "ecr:DescribePullThroughCacheRules", "ecr:UpdatePullThroughCacheRule", "ecr:ValidatePullThroughCacheRule",
			"ecr:CreateRepositoryCreationTemplate", "ecr:DeleteRepositoryCreationTemplate", "ecr:DescribeRepositoryCreationTemplates", "ecr:UpdateRepositoryCreationTemplate",
			"ecr:DescribeRegistry",
		}, Resources: res("*"), Conditions: []condition{inRegion(region)}},
		{Sid: "TheImageCachesCredentials", Actions: []string{"secretsmanager:*"},
			Resources: res(s.arn("secretsmanager", region, "secret:ecr-pullthroughcache/"+st.ClusterName+"/*"))},
		{Sid: "TheCompilerCache", Actions: []string{"s3:*"}, Resources: res(
			fmt.Sprintf("arn:%s:s3:::%s*", s.Partition, CompilerCacheBucketPrefix),
			fmt.Sprintf("arn:%s:s3:::%s*/*", s.Partition, CompilerCacheBucketPrefix),
		)},
		{Sid: "TheBudget", Actions: []string{"budgets:ViewBudget", "budgets:ModifyBudget", "budgets:ListTagsForResource", "budgets:TagResource", "budgets:UntagResource"},
			Resources: res(fmt.Sprintf("arn:%s:budgets::%s:budget/%s-*", s.Partition, s.Account, st.ClusterName))},
	}
	return append(out, stateStatements(s, true)...)
}

// previewStatements are what `pulumi preview` (no refresh: preview.yml) reads in AWS: the
// program's own lookups (infra/preflight.go: zones, instance offerings, subnets, the region's
// clusters and the live node group, the spot role) and the state. A preview diffs the rest
// against the state, not against AWS; nothing here writes.
func previewStatements(s identityScope, regions []string) []statement {
	var regional []condition
	if len(regions) > 0 {
		regional = []condition{{Test: "StringEquals", Variable: "aws:RequestedRegion", Values: regions}}
	}
	out := []statement{
		{Sid: "TheProgramsLookups", Actions: []string{
			"ec2:DescribeAvailabilityZones", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeSubnets",
			"eks:ListClusters", "eks:DescribeCluster", "eks:ListNodegroups", "eks:DescribeNodegroup",
		}, Resources: pulumi.ToStringArray([]string{"*"}), Conditions: regional},
		{Sid: "TheAccountsRoles", Actions: []string{"iam:ListRoles", "iam:GetRole"},
			Resources: pulumi.ToStringArray([]string{fmt.Sprintf("arn:%s:iam::%s:role/*", s.Partition, s.Account)})},
	}
	return append(out, stateStatements(s, false)...)
}

// DeployIdentityArgs configure a DeployIdentity.
type DeployIdentityArgs struct {
	Identity           *config.Identity
	Partition, Account string
}

// DeployIdentity is the component: the OIDC provider (unless the account has one), a deploy
// role per stack, the preview role.
type DeployIdentity struct {
	pulumi.ResourceState

	OIDCProvider pulumi.StringOutput
	// DeployRoles are the deploy roles' ARNs by stack.
	DeployRoles map[string]pulumi.StringOutput
	PreviewRole pulumi.StringOutput
}

// NewDeployIdentity registers the deploy identity.
func NewDeployIdentity(ctx *pulumi.Context, name string, args *DeployIdentityArgs, opts ...pulumi.ResourceOption) (*DeployIdentity, error) {
	d := &DeployIdentity{DeployRoles: map[string]pulumi.StringOutput{}}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:DeployIdentity", name, d, opts...); err != nil {
		return nil, err
	}
	id := args.Identity
	provider := pulumi.String(id.OIDCProviderArn).ToStringOutput()
	if id.OIDCProviderArn == "" {
		// IAM checks GitHub's certificate against its own trusted CAs: no thumbprint (the
		// field is optional in pulumi-aws v6, and ignored for this issuer).
		p, err := iam.NewOpenIdConnectProvider(ctx, name+"-github", &iam.OpenIdConnectProviderArgs{
			Url:           pulumi.String("https://" + GitHubOIDCHost),
			ClientIdLists: pulumi.ToStringArray([]string{GitHubOIDCAudience}),
		}, pulumi.Parent(d))
		if err != nil {
			return nil, fmt.Errorf("creating the GitHub OIDC provider: %w", err)
		}
		provider = p.Arn
	}
	d.OIDCProvider = provider
	scope := identityScope{Partition: args.Partition, Account: args.Account, StateBucket: id.StateBucket, StatePrefix: id.StatePrefix}

	var regions []string
	for _, st := range id.Stacks {
		scope := scope
		scope.Stack = st
		role, err := iam.NewRole(ctx, name+"-deploy-"+st.Name, &iam.RoleArgs{
			Name:             pulumi.String(DeployRoleName(st)),
			Description:      pulumi.Sprintf("Deploys stack %s from %s's GitHub environment %s (lux-gpu-ci identity/)", st.Name, id.Repository, st.Name),
			AssumeRolePolicy: policyDocument(ctx, d, "", githubTrust(provider, id.Repository, st.Name)...),
			// A deploy waits up to runnerDrainTimeout (≤ 5 h) for running jobs; deploy.yml's
			// job may take 6 h, GitHub's limit for a hosted job.
			MaxSessionDuration: pulumi.Int(6 * 3600),
			InlinePolicies: iam.RoleInlinePolicyArray{iam.RoleInlinePolicyArgs{
				Name:   pulumi.String("deploy-" + st.Name),
				Policy: policyDocument(ctx, d, "", deployStatements(scope)...),
			}},
		}, pulumi.Parent(d))
		if err != nil {
			return nil, fmt.Errorf("creating the deploy role of stack %s: %w", st.Name, err)
		}
		d.DeployRoles[st.Name] = role.Arn
		if !slices.Contains(regions, st.Region) {
			regions = append(regions, st.Region)
		}
	}
	preview, err := iam.NewRole(ctx, name+"-preview", &iam.RoleArgs{
		Name:             pulumi.String(PreviewRoleName(id.Repository)),
		Description:      pulumi.Sprintf("Previews the stacks of %s from its GitHub environment %s, read-only (lux-gpu-ci identity/)", id.Repository, config.PreviewEnvironment),
		AssumeRolePolicy: policyDocument(ctx, d, "", githubTrust(provider, id.Repository, config.PreviewEnvironment)...),
		InlinePolicies: iam.RoleInlinePolicyArray{iam.RoleInlinePolicyArgs{
			Name:   pulumi.String("preview"),
			Policy: policyDocument(ctx, d, "", previewStatements(scope, regions)...),
		}},
	}, pulumi.Parent(d))
	if err != nil {
		return nil, fmt.Errorf("creating the preview role: %w", err)
	}
	d.PreviewRole = preview.Arn

	outs := pulumi.Map{"oidcProvider": provider, "previewRole": preview.Arn}
	for n, arn := range d.DeployRoles {
		outs["deployRole-"+n] = arn
	}
	return d, ctx.RegisterResourceOutputs(d, outs)
}

// DeployRoleName is a stack's deploy role: named for its cluster, which is unique in the
// account's region, and whose name every statement of the role scopes to.
func DeployRoleName(st config.IdentityStack) string { return st.ClusterName + "-deploy" }

var nonRoleChars = regexp.MustCompile(`[^A-Za-z0-9+=,.@_-]`)

// PreviewRoleName is the repository's preview role (an IAM role name: 64 characters at most).
func PreviewRoleName(repository string) string {
	n := "lux-gpu-ci-preview-" + nonRoleChars.ReplaceAllString(strings.ReplaceAll(repository, "/", "-"), "-")
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}
