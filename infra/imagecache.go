package infra

import (
	"encoding/json"
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ecr"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/secretsmanager"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
)

// ImageCacheArgs describes the stack's ECR pull-through cache.
type ImageCacheArgs struct {
	ClusterName, Region, Partition, AccountID string
	// DNSSuffix is the partition's (amazonaws.com): registries are <account>.dkr.ecr.<region>.<suffix>.
	DNSSuffix string
	Upstreams []config.CachedUpstream
	// NodeRoleNames are the roles of the nodes that pull images: the system node group's and
	// Karpenter's.
	NodeRoleNames []pulumi.StringInput
	Tags          map[string]string
}

// ImageCache is one ECR pull-through cache rule per upstream registry, the Secrets Manager
// secret of each registry that needs a credential, a repository creation template that keeps
// each cached repository small, and the permission nodes need for a first pull.
type ImageCache struct {
	pulumi.ResourceState

	// Repositories maps each upstream registry's host to the ECR repository prefix that
	// serves it: "<account>.dkr.ecr.<region>.amazonaws.com/<prefix>" (known at preview).
	Repositories map[string]string
	// Resources are everything the cache is made of; nodes need them to pull.
	Resources []pulumi.Resource
}

// CachedImagesKept is how many images each cached repository keeps (the newest pushed):
// a CUDA image is gigabytes at $0.10 per GB-month, and a bumped tag leaves the old one behind.
// ECR's lifecycle counts a multi-platform tag's index and each platform's manifest as images
// (aws/containers-roadmap#2613), so 10 keeps a few tags.
const CachedImagesKept = 10

// FirstPullActions are what a node's role needs beyond ECR's pull actions
// (AmazonEC2ContainerRegistryPullOnly) on the first pull of an image no repository holds yet:
// ECR then creates the repository and imports the image as the puller (ECR user guide,
// "IAM permissions required to sync an upstream registry", pull-through-cache-iam.html).
// PullOnly grants BatchImportUpstreamImage on every repository; this scopes both to the cache.
var FirstPullActions = []string{"ecr:CreateRepository", "ecr:BatchImportUpstreamImage"}

// NewImageCache creates the cache rules and what they need.
func NewImageCache(ctx *pulumi.Context, name string, args *ImageCacheArgs, opts ...pulumi.ResourceOption) (*ImageCache, error) {
	c := &ImageCache{Repositories: map[string]string{}}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:ImageCache", name, c, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(c)
	tags := ownedTags(args.Tags, args.ClusterName)
	registry := fmt.Sprintf("%s.dkr.ecr.%s.%s", args.AccountID, args.Region, args.DNSSuffix)
	lifecycle, err := lifecyclePolicy(CachedImagesKept)
	if err != nil {
		return nil, err
	}
	var created created
	var repositories pulumi.StringArray
	for _, u := range args.Upstreams {
		short := name + "-" + u.Registry.Short
		rule := &ecr.PullThroughCacheRuleArgs{
			EcrRepositoryPrefix: pulumi.String(u.RepositoryPrefix),
			UpstreamRegistryUrl: pulumi.String(u.Registry.URL),
		}
		var ruleDeps []pulumi.Resource
		if u.Credential != nil {
			secret, err := secretsmanager.NewSecret(ctx, short, &secretsmanager.SecretArgs{
				// ECR reads only secrets whose name starts with ecr-pullthroughcache/.
				NamePrefix:  pulumi.String("ecr-pullthroughcache/" + u.RepositoryPrefix + "-"),
				Description: pulumi.String(fmt.Sprintf("%s credential of the %s pull-through cache rule", u.Registry.Host, args.ClusterName)),
				// Deleted at once on destroy: a secret in its recovery window holds its name,
				// and this stack holds nothing worth recovering (the credential is in config).
				RecoveryWindowInDays: pulumi.Int(0),
				Tags:                 tags,
			}, parent)
			if err != nil {
				return nil, fmt.Errorf("creating the %s credential secret: %w", u.Registry.Host, err)
			}
			version, err := secretsmanager.NewSecretVersion(ctx, short, &secretsmanager.SecretVersionArgs{
				SecretId: secret.ID(),
				// A Pulumi secret: encrypted in the state, masked in every diff.
				SecretString: pulumi.ToSecret(pulumi.String(u.Credential.Reveal())).(pulumi.StringOutput),
			}, parent)
			if err != nil {
				return nil, fmt.Errorf("storing the %s credential: %w", u.Registry.Host, err)
			}
			rule.CredentialArn = secret.Arn
			ruleDeps = append(ruleDeps, version)
			created.add(secret, version)
		}
		r, err := ecr.NewPullThroughCacheRule(ctx, short, rule, parent, pulumi.DependsOn(ruleDeps))
		if err != nil {
			return nil, fmt.Errorf("creating the %s pull-through cache rule: %w", u.Registry.Host, err)
		}
		tmpl, err := ecr.NewRepositoryCreationTemplate(ctx, short, &ecr.RepositoryCreationTemplateArgs{
			Prefix:             pulumi.String(u.RepositoryPrefix),
			AppliedFors:        pulumi.StringArray{pulumi.String("PULL_THROUGH_CACHE")},
			Description:        pulumi.String(fmt.Sprintf("Repositories the %s cache of %s creates", u.Registry.Host, args.ClusterName)),
			ImageTagMutability: pulumi.String("MUTABLE"), // ECR updates a cached tag from upstream
			LifecyclePolicy:    pulumi.String(lifecycle),
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("creating the %s repository template: %w", u.Registry.Host, err)
		}
		created.add(r, tmpl)
		c.Repositories[u.Registry.Host] = registry + "/" + u.RepositoryPrefix
		repositories = append(repositories, pulumi.Sprintf("arn:%s:ecr:%s:%s:repository/%s/*", args.Partition, args.Region, args.AccountID, u.RepositoryPrefix))
	}

	policy, err := iam.NewPolicy(ctx, name+"-first-pull", &iam.PolicyArgs{
		Name:        pulumi.String(args.ClusterName + "-image-cache-first-pull"),
		Description: pulumi.String("First pull of an image through the pull-through cache of " + args.ClusterName),
		Policy:      policyDocument(ctx, c, "", statement{Sid: "PullThroughCacheFirstPull", Actions: FirstPullActions, Resources: repositories}),
		Tags:        tags,
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("creating the image cache policy: %w", err)
	}
	created.add(policy)
	for i, role := range args.NodeRoleNames {
		a, err := iam.NewRolePolicyAttachment(ctx, fmt.Sprintf("%s-first-pull-%d", name, i), &iam.RolePolicyAttachmentArgs{
			Role: role, PolicyArn: policy.Arn,
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("attaching the image cache policy: %w", err)
		}
		created.add(a)
	}

	c.Resources = created
	if err := ctx.RegisterResourceOutputs(c, pulumi.Map{"repositories": pulumi.ToStringMap(c.Repositories)}); err != nil {
		return nil, err
	}
	return c, nil
}

// lifecyclePolicy keeps the newest kept images of a repository (ECR's lifecycle policy
// document, LifecyclePolicies.html).
func lifecyclePolicy(kept int) (string, error) {
	type selection struct {
		TagStatus   string `json:"tagStatus"`
		CountType   string `json:"countType"`
		CountNumber int    `json:"countNumber"`
	}
	type rule struct {
		RulePriority int               `json:"rulePriority"`
		Description  string            `json:"description"`
		Selection    selection         `json:"selection"`
		Action       map[string]string `json:"action"`
	}
	b, err := json.Marshal(map[string][]rule{"rules": {{
		RulePriority: 1,
		Description:  fmt.Sprintf("keep the %d newest cached images", kept),
		Selection:    selection{TagStatus: "any", CountType: "imageCountMoreThan", CountNumber: kept},
		Action:       map[string]string{"type": "expire"},
	}}})
	return string(b), err
}
