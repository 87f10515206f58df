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

// The deploy identity: the GitHub OIDC provider, a deploy role per stack, one preview role and
// a permissions boundary per stack, for the identity/ project (config.Identity says why it is
// a project of its own). Each role is assumable only by a workflow job of one repository
// running in one GitHub environment, on one ref: the stack's own environment from main for
// its deploy role, "preview" from a pull request for the preview role. What each may do is
// written down below, statement by statement, and make test judges it with an IAM evaluator
// someone else wrote (stack/identity_test.go).
//
// A deploy role cannot make itself or another role more than the stack needs: it creates and
// changes only roles and policies that carry its stack's ClusterTag, every role it creates or
// changes must carry the stack's permissions boundary (config.BoundaryPolicyName), which grants no
// IAM write and no state, and explicit denies keep it off the deploy identity itself and off
// every boundary. Tags, not role paths: a path cannot change without replacing the role, and
// the system node group with its role (docs/design.md, "The deploy identity").

// GitHub Actions' OIDC issuer, and the audience aws-actions/configure-aws-credentials asks
// for (v4.3.1 action.yml: `audience: default: sts.amazonaws.com`).
const (
	GitHubOIDCHost     = "token.actions.githubusercontent.com"
	GitHubOIDCAudience = "sts.amazonaws.com"
)

// MainRef is the only ref a deploy role trusts; PullRequestRefs the refs a preview runs on
// (a pull_request event's GITHUB_REF: refs/pull/<number>/merge).
const (
	MainRef         = "refs/heads/main"
	PullRequestRefs = "refs/pull/*/merge"
)

// ClusterTag names, on every IAM role and policy, EventBridge rule and SQS queue a stack makes
// (and its compiler cache bucket), the stack's cluster: the deploy role of one stack acts on
// what carries its own cluster's name (aws:ResourceTag), and creates nothing without it
// (aws:RequestTag).
const ClusterTag = "lux-gpu-ci/cluster"

// GitHubEnvironmentSubject is the `sub` claim of a job that runs in a GitHub environment:
// repo:<owner>/<name>:environment:<environment>, with no ref (GitHub's OIDC reference,
// "Filtering for a specific environment"). The ref is a claim of its own, which AWS STS
// checks too since 2026-01 (githubTrust).
func GitHubEnvironmentSubject(repository, environment string) string {
	return fmt.Sprintf("repo:%s:environment:%s", repository, environment)
}

// githubTrust lets a job of repository in environment, on refs (StringLike: one ref or a
// pattern), assume a role through the OIDC provider. Besides the audience and the subject,
// the job's own claims: its environment, repository and ref, which AWS STS validates as
// condition keys of AssumeRoleWithWebIdentity (AWS, "AWS STS supports validation of identity
// provider claims", 2026-01; the Service Authorization Reference lists
// token.actions.githubusercontent.com:ref, :environment, :repository for the action). So a
// branch that reaches the environment despite its deployment-branch rule is still refused.
func githubTrust(provider pulumi.StringInput, repository, environment, refs string) []statement {
	claim := func(name string) string { return GitHubOIDCHost + ":" + name }
	return []statement{{
		Actions:          []string{"sts:AssumeRoleWithWebIdentity"},
		OutputPrincipals: []outputPrincipal{{Type: "Federated", Identifiers: pulumi.StringArray{provider}}},
		Conditions: []condition{
			{Test: "StringEquals", Variable: claim("aud"), Values: []string{GitHubOIDCAudience}},
			{Test: "StringEquals", Variable: claim("sub"), Values: []string{GitHubEnvironmentSubject(repository, environment)}},
			{Test: "StringEquals", Variable: claim("environment"), Values: []string{environment}},
			{Test: "StringEquals", Variable: claim("repository"), Values: []string{repository}},
			{Test: "StringLike", Variable: claim("ref"), Values: []string{refs}},
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
	// DeployRoles and PreviewRole are the identity's own roles' names, which no deploy role
	// may change.
	DeployRoles []string
	PreviewRole string
}

func (s identityScope) arn(service, region, resource string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", s.Partition, service, region, s.Account, resource)
}

func (s identityScope) iamARN(resource string) string {
	return fmt.Sprintf("arn:%s:iam::%s:%s", s.Partition, s.Account, resource)
}

func inRegion(region string) condition {
	return condition{Test: "StringEquals", Variable: "aws:RequestedRegion", Values: []string{region}}
}

// ownedBy: the resource carries the stack's ClusterTag.
func ownedBy(cluster string) condition {
	return condition{Test: "StringEquals", Variable: "aws:ResourceTag/" + ClusterTag, Values: []string{cluster}}
}

// taggedFor: the request tags what it creates with the stack's ClusterTag.
func taggedFor(cluster string) condition {
	return condition{Test: "StringEquals", Variable: "aws:RequestTag/" + ClusterTag, Values: []string{cluster}}
}

// boundedBy: the role carries (or is given) the stack's permissions boundary.
func boundedBy(boundary string) condition {
	return condition{Test: "StringEquals", Variable: "iam:PermissionsBoundary", Values: []string{boundary}}
}

// stateObjects are the state files of the stack's project under the backend's prefix, as the
// Pulumi CLI's diy backend lays them out (pulumi/pulumi pkg/v3 v3.276.0 backend/diy
// store.go:39-49,125-135 and lock.go:166-179, project mode): its checkpoint
// (.pulumi/stacks/<project>/<stack>.json, and its .gz/.zst/.bak forms), history, backups
// and locks (.pulumi/locks/<organization>/<project>/<stack>/, for a diy backend's
// "organization"). stack "" names every stack's.
func (s identityScope) stateObjects(project, stack string) []string {
	root := ".pulumi"
	if s.StatePrefix != "" {
		root = s.StatePrefix + "/.pulumi"
	}
	one := stack
	if one == "" {
		return []string{root + "/*"}
	}
	return []string{
		fmt.Sprintf("%s/stacks/%s/%s.json*", root, project, one),
		fmt.Sprintf("%s/history/%s/%s/*", root, project, one),
		fmt.Sprintf("%s/backups/%s/%s/*", root, project, one),
		fmt.Sprintf("%s/locks/organization/%s/%s/*", root, project, one),
	}
}

// stateStatements read the stacks' state in its S3 bucket (every stack's: a preview) or read
// and write one stack's (a deploy: its own, and the backend's meta.yaml).
func stateStatements(s identityScope, stack string) []statement {
	if s.StateBucket == "" {
		return nil
	}
	root := ".pulumi"
	if s.StatePrefix != "" {
		root = s.StatePrefix + "/.pulumi"
	}
	bucket := fmt.Sprintf("arn:%s:s3:::%s", s.Partition, s.StateBucket)
	objects := func(keys []string) pulumi.StringArray {
		var out pulumi.StringArray
		for _, k := range keys {
			out = append(out, pulumi.String(bucket+"/"+k))
		}
		return out
	}
	// Listing shows names, which is how the CLI finds a stack; the objects are the stack's.
	list := statement{Sid: "ListTheState", Actions: []string{"s3:ListBucket", "s3:GetBucketLocation"},
		Resources:  pulumi.ToStringArray([]string{bucket}),
		Conditions: []condition{{Test: "StringLike", Variable: "s3:prefix", Values: []string{root, root + "/*"}}}}
	if stack == "" {
		return []statement{list, {Sid: "TheState", Actions: []string{"s3:GetObject"}, Resources: objects(s.stateObjects(config.Project, ""))}}
	}
	return []statement{list,
		{Sid: "TheBackendsMeta", Actions: []string{"s3:GetObject"}, Resources: objects([]string{root + "/meta.yaml"})},
		// A deploy writes checkpoints, history, backups and a lock, and removes the lock.
		{Sid: "TheStacksState", Actions: []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, Resources: objects(s.stateObjects(config.Project, stack))},
	}
}

// identityWrites are the IAM actions that change a role, a policy or a boundary: what no
// deploy role may do to the deploy identity.
var identityWrites = []string{
	"iam:CreateRole", "iam:DeleteRole", "iam:UpdateRole", "iam:UpdateRoleDescription", "iam:UpdateAssumeRolePolicy",
	"iam:PutRolePolicy", "iam:DeleteRolePolicy", "iam:AttachRolePolicy", "iam:DetachRolePolicy",
	"iam:PutRolePermissionsBoundary", "iam:DeleteRolePermissionsBoundary", "iam:TagRole", "iam:UntagRole", "iam:PassRole",
	"iam:CreatePolicyVersion", "iam:DeletePolicyVersion", "iam:SetDefaultPolicyVersion", "iam:DeletePolicy", "iam:TagPolicy", "iam:UntagPolicy",
}

// deployStatements are what `pulumi up`, refresh and destroy of one stack do in AWS, by
// what the stack holds (infra/): a service the stack does not use is not in them, and where
// the stack names its resources the statement names them too, or holds to its ClusterTag.
func deployStatements(s identityScope) []statement {
	st := s.Stack
	region, cluster := st.Region, st.ClusterName
	boundary := s.iamARN("policy/" + config.BoundaryPolicyName(st.ClusterName))
	res := func(arns ...string) pulumi.StringArray { return pulumi.ToStringArray(arns) }
	roles, policies := s.iamARN("role/*"), s.iamARN("policy/*")
	out := []statement{
		{Sid: "TheNetworkAndTheSystemNodes", Actions: []string{"ec2:*"}, Resources: res("*"), Conditions: []condition{inRegion(region)}},
		{Sid: "TheCluster", Actions: []string{"eks:*"}, Resources: res(
			s.arn("eks", region, "cluster/"+cluster),
			s.arn("eks", region, "nodegroup/"+cluster+"/*"),
			s.arn("eks", region, "addon/"+cluster+"/*"),
			s.arn("eks", region, "access-entry/"+cluster+"/*"),
			s.arn("eks", region, "podidentityassociation/"+cluster+"/*"),
		)},
		// Account-wide reads: the region's clusters (is this one live?), add-on versions, and
		// the access policies an access entry is associated with.
		{Sid: "TheClustersOfTheRegion", Actions: []string{"eks:ListClusters", "eks:DescribeAddonVersions", "eks:ListAccessPolicies", "eks:DescribeClusterVersions"},
			Resources: res("*"), Conditions: []condition{inRegion(region)}},
		// IAM, read: a refresh reads every role and policy the stack holds.
		{Sid: "ReadTheAccountsRoles", Actions: []string{
			"iam:GetRole", "iam:ListRoleTags", "iam:GetRolePolicy", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies", "iam:ListInstanceProfilesForRole", "iam:ListRoles",
			"iam:GetPolicy", "iam:GetPolicyVersion", "iam:ListPolicyVersions", "iam:ListPolicyTags",
		}, Resources: res(roles, policies)},
		// A role is made only tagged for the stack and under its boundary.
		{Sid: "MakeTheStacksRoles", Actions: []string{"iam:CreateRole"}, Resources: res(roles),
			Conditions: []condition{taggedFor(cluster), boundedBy(boundary)}},
		// A role of the stack's changes only under the boundary (which PutRolePermissionsBoundary
		// sets: the key is the boundary being set).
		{Sid: "ChangeTheStacksRoles", Actions: []string{
			"iam:DeleteRole", "iam:UpdateRole", "iam:UpdateAssumeRolePolicy", "iam:PutRolePolicy", "iam:DeleteRolePolicy",
			"iam:AttachRolePolicy", "iam:DetachRolePolicy", "iam:PutRolePermissionsBoundary",
		}, Resources: res(roles), Conditions: []condition{ownedBy(cluster), boundedBy(boundary)}},
		{Sid: "DescribeTheStacksRoles", Actions: []string{"iam:UpdateRoleDescription"}, Resources: res(roles), Conditions: []condition{ownedBy(cluster)}},
		// Tags of the stack's roles: never another cluster's tag, never the tag taken off.
		{Sid: "TagTheStacksRoles", Actions: []string{"iam:TagRole"}, Resources: res(roles), Conditions: []condition{ownedBy(cluster),
			{Test: "StringEqualsIfExists", Variable: "aws:RequestTag/" + ClusterTag, Values: []string{cluster}}}},
		{Sid: "UntagTheStacksRoles", Actions: []string{"iam:UntagRole"}, Resources: res(roles), Conditions: []condition{ownedBy(cluster),
			{Test: "ForAllValues:StringNotEquals", Variable: "aws:TagKeys", Values: []string{ClusterTag}}}},
		// The stack's own managed policies (Karpenter's, the image cache's, the nodes' pulls).
		{Sid: "MakeTheStacksPolicies", Actions: []string{"iam:CreatePolicy"}, Resources: res(policies), Conditions: []condition{taggedFor(cluster)}},
		{Sid: "ChangeTheStacksPolicies", Actions: []string{
			"iam:CreatePolicyVersion", "iam:DeletePolicyVersion", "iam:SetDefaultPolicyVersion", "iam:DeletePolicy", "iam:TagPolicy", "iam:UntagPolicy",
		}, Resources: res(policies), Conditions: []condition{ownedBy(cluster)}},
		// A role goes only to the services that run the stack: EKS (the cluster, its node
		// groups), EC2 (the nodes) and EKS Pod Identity (Karpenter, the compiler caches); and
		// only a role of the stack's.
		{Sid: "PassTheStacksRolesToItsServices", Actions: []string{"iam:PassRole"}, Resources: res(roles),
			Conditions: []condition{ownedBy(cluster), {Test: "StringEquals", Variable: "iam:PassedToService",
				Values: []string{"eks.amazonaws.com", "ec2.amazonaws.com", "pods.eks.amazonaws.com"}}}},
		// The service-linked roles the stack makes (spot: createSpotServiceLinkedRole) or EKS
		// makes on its first cluster and node group.
		{Sid: "TheServiceLinkedRoles", Actions: []string{"iam:CreateServiceLinkedRole"},
			Resources: res(s.iamARN("role/aws-service-role/*")),
			Conditions: []condition{{Test: "StringEquals", Variable: "iam:AWSServiceName",
				Values: []string{"spot.amazonaws.com", "eks.amazonaws.com", "eks-nodegroup.amazonaws.com", "autoscaling.amazonaws.com"}}}},
		{Sid: "MakeTheInterruptionQueue", Actions: []string{"sqs:CreateQueue", "sqs:TagQueue"}, Resources: res(s.arn("sqs", region, cluster+"-*")),
			Conditions: []condition{taggedFor(cluster)}},
		{Sid: "TheInterruptionQueue", Actions: []string{"sqs:*"}, Resources: res(s.arn("sqs", region, cluster+"-*")), Conditions: []condition{ownedBy(cluster)}},
		{Sid: "MakeTheInterruptionRules", Actions: []string{"events:PutRule", "events:TagResource"}, Resources: res(s.arn("events", region, "rule/*")),
			Conditions: []condition{taggedFor(cluster)}},
		{Sid: "TheInterruptionRules", Actions: []string{"events:*"}, Resources: res(s.arn("events", region, "rule/*")), Conditions: []condition{ownedBy(cluster)}},
		{Sid: "TheImageCache", Actions: []string{
			"ecr:CreatePullThroughCacheRule", "ecr:DeletePullThroughCacheRule", "ecr:DescribePullThroughCacheRules", "ecr:UpdatePullThroughCacheRule", "ecr:ValidatePullThroughCacheRule",
			"ecr:CreateRepositoryCreationTemplate", "ecr:DeleteRepositoryCreationTemplate", "ecr:DescribeRepositoryCreationTemplates", "ecr:UpdateRepositoryCreationTemplate",
			"ecr:DescribeRegistry",
		}, Resources: res("*"), Conditions: []condition{inRegion(region)}},
		{Sid: "TheImageCachesCredentials", Actions: []string{"secretsmanager:*"},
			Resources: res(s.arn("secretsmanager", region, "secret:ecr-pullthroughcache/"+cluster+"/*"))},
		// Its compiler cache bucket, named for its cluster (CompilerCacheBucketPrefix).
		{Sid: "TheCompilerCache", Actions: []string{"s3:*"}, Resources: res(
			fmt.Sprintf("arn:%s:s3:::%s*", s.Partition, CompilerCacheBucketPrefix(cluster)),
			fmt.Sprintf("arn:%s:s3:::%s*/*", s.Partition, CompilerCacheBucketPrefix(cluster)),
		)},
		{Sid: "TheBudget", Actions: []string{"budgets:ViewBudget", "budgets:ModifyBudget", "budgets:ListTagsForResource", "budgets:TagResource", "budgets:UntagResource"},
			Resources: res(fmt.Sprintf("arn:%s:budgets::%s:budget/%s", s.Partition, s.Account, BudgetName(cluster)))},
	}
	out = append(out, stateStatements(s, st.Name)...)
	return append(out, identityDenies(s, boundary)...)
}

// identityDenies are the deploy role's explicit denies, whatever an Allow above says: no
// write to the deploy identity (the deploy roles, the preview role, every stack's boundary),
// and no boundary taken off any role.
func identityDenies(s identityScope, boundary string) []statement {
	var identity pulumi.StringArray
	for _, r := range append(slices.Clone(s.DeployRoles), s.PreviewRole) {
		identity = append(identity, pulumi.String(s.iamARN("role/"+r)))
	}
	identity = append(identity, pulumi.String(s.iamARN("policy/*-boundary")))
	return []statement{
		{Sid: "NeverTheDeployIdentity", Effect: "Deny", Actions: identityWrites, Resources: identity},
		{Sid: "NeverABoundaryOff", Effect: "Deny", Actions: []string{"iam:DeleteRolePermissionsBoundary"}, Resources: pulumi.ToStringArray([]string{"*"})},
	}
}

// boundaryStatements are a stack's permissions boundary: the most any role of the stack may
// do, whatever its own policies say. Everything AWS but IAM (what Karpenter, the nodes, the
// cache servers and the add-ons use); of IAM, reads, Karpenter's instance profiles, passing a
// role of the stack's to EC2 (Karpenter's nodes) and the service-linked roles EKS's services
// make. Never the state, and never another stack's compiler cache. So a role the deploy role
// makes or changes cannot make or change a role, write a policy, or read what deploys the
// stacks.
func boundaryStatements(s identityScope) []statement {
	cluster := s.Stack.ClusterName
	res := func(arns ...string) pulumi.StringArray { return pulumi.ToStringArray(arns) }
	out := []statement{
		{Sid: "EverythingButIAM", NotActions: []string{"iam:*", "sts:*", "organizations:*", "account:*"}, Resources: res("*")},
		{Sid: "ReadIAM", Actions: []string{"iam:Get*", "iam:List*"}, Resources: res("*")},
		{Sid: "KarpentersInstanceProfiles", Actions: []string{
			"iam:CreateInstanceProfile", "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile",
		}, Resources: res(s.iamARN("instance-profile/*"))},
		{Sid: "PassTheStacksRolesToEC2", Actions: []string{"iam:PassRole"}, Resources: res(s.iamARN("role/*")),
			Conditions: []condition{ownedBy(cluster), {Test: "StringEquals", Variable: "iam:PassedToService", Values: []string{"ec2.amazonaws.com"}}}},
		{Sid: "ServiceLinkedRoles", Actions: []string{"iam:CreateServiceLinkedRole"}, Resources: res(s.iamARN("role/aws-service-role/*"))},
		// Another stack's cache is not this stack's to read or write.
		{Sid: "OnlyItsOwnCompilerCache", Effect: "Deny", Actions: []string{"s3:*"}, NotResources: res(
			fmt.Sprintf("arn:%s:s3:::%s*", s.Partition, CompilerCacheBucketPrefix(cluster)),
			fmt.Sprintf("arn:%s:s3:::%s*/*", s.Partition, CompilerCacheBucketPrefix(cluster)),
		)},
	}
	return out
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
			Resources: pulumi.ToStringArray([]string{s.iamARN("role/*")})},
	}
	return append(out, stateStatements(s, "")...)
}

// DeployIdentityArgs configure a DeployIdentity.
type DeployIdentityArgs struct {
	Identity           *config.Identity
	Partition, Account string
}

// DeployIdentity is the component: the OIDC provider (unless the account has one), a deploy
// role and a permissions boundary per stack, the preview role.
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
	scope := identityScope{Partition: args.Partition, Account: args.Account, StateBucket: id.StateBucket, StatePrefix: id.StatePrefix,
		PreviewRole: PreviewRoleName(id.Repository)}
	for _, st := range id.Stacks {
		scope.DeployRoles = append(scope.DeployRoles, DeployRoleName(st))
	}

	var regions []string
	for _, st := range id.Stacks {
		scope := scope
		scope.Stack = st
		// The stack's roles carry it from the stack's next up (config: PermissionsBoundaryArn).
		if _, err := iam.NewPolicy(ctx, name+"-boundary-"+st.Name, &iam.PolicyArgs{
			Name:        pulumi.String(config.BoundaryPolicyName(st.ClusterName)),
			Description: pulumi.Sprintf("The most any role of stack %s may do (lux-gpu-ci identity/)", st.Name),
			Policy:      policyDocument(ctx, d, "", boundaryStatements(scope)...),
		}, pulumi.Parent(d)); err != nil {
			return nil, fmt.Errorf("creating the permissions boundary of stack %s: %w", st.Name, err)
		}
		role, err := iam.NewRole(ctx, name+"-deploy-"+st.Name, &iam.RoleArgs{
			Name:             pulumi.String(DeployRoleName(st)),
			Description:      pulumi.Sprintf("Deploys stack %s from %s's GitHub environment %s, on main (lux-gpu-ci identity/)", st.Name, id.Repository, st.Name),
			AssumeRolePolicy: policyDocument(ctx, d, "", githubTrust(provider, id.Repository, st.Name, MainRef)...),
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
		AssumeRolePolicy: policyDocument(ctx, d, "", githubTrust(provider, id.Repository, config.PreviewEnvironment, PullRequestRefs)...),
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
// account's region.
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
