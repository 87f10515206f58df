package infra

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	awseks "github.com/pulumi/pulumi-aws/sdk/v6/go/aws/eks"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/s3"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// CompilerCacheArgs describes the stack's compiler cache bucket and who may use it.
type CompilerCacheArgs struct {
	// Boundary is the stack's permissions boundary, which every server's role carries ("" none).
	Boundary                                  string
	ClusterName, Region, Partition, AccountID string
	EKSClusterName                            pulumi.StringInput
	// PodIdentityAgent is the add-on that hands the services their credentials.
	PodIdentityAgent pulumi.Resource
	// Services are the cache servers (config.Config.CompilerCaches): each gets a role scoped
	// to its prefix, read-write or read-only.
	Services []config.CompilerCacheService
	// ExpiryDays is how long an object may go unused before S3 expires it.
	ExpiryDays int
	Tags       map[string]string
	// Gpuci is the gpuci the stack built for its pods (nil where it runs a release): stored in
	// the bucket under wellknown.GpuciKey, readable by every server's role and the retrier's.
	Gpuci *GpuciBinary
	// Retrier has the in-cluster retrier's account a role that reads the stored gpuci.
	Retrier bool
}

// GpuciBinary is gpuci built for the stack's pods (stack.BuildGpuci): the file and its
// SHA-256.
type GpuciBinary struct{ Path, SHA256 string }

// CompilerCache is the stack's bucket: behind the compiler cache servers (k8s.CompilerCache),
// and where the stack keeps the gpuci its pods run (when it builds its own), with each
// server's credentials and the retrier's: a role, by EKS Pod Identity, for its ServiceAccount only, that
// reaches its prefix only, and writes it only where the pool is read-write. No static key
// exists. The bucket is private (public access blocked, ACLs off), encrypted, refuses plain
// HTTP, expires what goes unused and is emptied and deleted with the stack: a cache holds
// nothing that must survive. The nodes reach it through the VPC's S3 gateway endpoint.
type CompilerCache struct {
	pulumi.ResourceState

	// Bucket is the bucket's name.
	Bucket pulumi.StringOutput
	// RetrierResources are the retrier's role and association (none without a retrier).
	RetrierResources []pulumi.Resource
	// Resources are what the servers need while they run (the bucket, its settings, the
	// roles and associations): the Kubernetes side depends on them.
	Resources []pulumi.Resource
}

// CompilerCacheReadActions are what a server needs to serve a hit (GetObject, which HEAD
// needs too); with ListBucket on its prefix S3 may tell it a missing key apart (404, not 403;
// bazel-remote's s3proxy.go Get counts either as a miss, the 403 with an error logged);
// CompilerCacheWriteActions what it needs to fill the cache.
var (
	CompilerCacheReadActions  = []string{"s3:GetObject"}
	CompilerCacheWriteActions = []string{"s3:PutObject"}
)

// CompilerCacheBucketPrefix begins the name of the cluster's compiler cache bucket (S3 adds a
// unique suffix): the cluster's name, then "--ccache-". The stack's deploy role and its
// permissions boundary reach the bucket by it; a cluster's name has no "--"
// (config: clusterName), so no cluster's prefix begins another's.
func CompilerCacheBucketPrefix(cluster string) string { return cluster + "--ccache-" }

// NewCompilerCache creates the bucket and the services' roles.
func NewCompilerCache(ctx *pulumi.Context, name string, args *CompilerCacheArgs, opts ...pulumi.ResourceOption) (*CompilerCache, error) {
	c := &CompilerCache{}
	if err := ctx.RegisterComponentResource("lux-gpu-ci:infra:CompilerCache", name, c, opts...); err != nil {
		return nil, err
	}
	parent := pulumi.Parent(c)
	tags := ownedTags(args.Tags, args.ClusterName)
	var made created

	// A generated name: S3's names are global, and one anyone could guess could be taken
	// first (and then written by its owner).
	bucket, err := s3.NewBucketV2(ctx, name, &s3.BucketV2Args{
		BucketPrefix: pulumi.String(CompilerCacheBucketPrefix(args.ClusterName)),
		ForceDestroy: pulumi.Bool(true),
		Tags:         tags,
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("creating the compiler cache bucket: %w", err)
	}
	made.add(bucket)
	block, err := s3.NewBucketPublicAccessBlock(ctx, name, &s3.BucketPublicAccessBlockArgs{
		Bucket:                bucket.ID(),
		BlockPublicAcls:       pulumi.Bool(true),
		BlockPublicPolicy:     pulumi.Bool(true),
		IgnorePublicAcls:      pulumi.Bool(true),
		RestrictPublicBuckets: pulumi.Bool(true),
	}, parent)
	if err != nil {
		return nil, err
	}
	owner, err := s3.NewBucketOwnershipControls(ctx, name, &s3.BucketOwnershipControlsArgs{
		Bucket: bucket.ID(),
		Rule:   &s3.BucketOwnershipControlsRuleArgs{ObjectOwnership: pulumi.String("BucketOwnerEnforced")},
	}, parent)
	if err != nil {
		return nil, err
	}
	sse, err := s3.NewBucketServerSideEncryptionConfigurationV2(ctx, name, &s3.BucketServerSideEncryptionConfigurationV2Args{
		Bucket: bucket.ID(),
		Rules: s3.BucketServerSideEncryptionConfigurationV2RuleArray{&s3.BucketServerSideEncryptionConfigurationV2RuleArgs{
			ApplyServerSideEncryptionByDefault: &s3.BucketServerSideEncryptionConfigurationV2RuleApplyServerSideEncryptionByDefaultArgs{
				SseAlgorithm: pulumi.String("AES256"),
			},
		}},
	}, parent)
	if err != nil {
		return nil, err
	}
	// Expiry counts from an object's last write; a read-write server rewrites an object it
	// serves (bazel-remote's --s3.update_timestamps), so what its builds still hit lives on.
	// Only the caches' prefixes expire: the stored gpuci lives as long as the stack runs it.
	var rules s3.BucketLifecycleConfigurationV2RuleArray
	for _, prefix := range CachePrefixes(args.Services) {
		rules = append(rules, &s3.BucketLifecycleConfigurationV2RuleArgs{
			Id:                             pulumi.String("expire-unused-" + prefix),
			Status:                         pulumi.String("Enabled"),
			Filter:                         &s3.BucketLifecycleConfigurationV2RuleFilterArgs{Prefix: pulumi.String(prefix + "/")},
			Expiration:                     &s3.BucketLifecycleConfigurationV2RuleExpirationArgs{Days: pulumi.Int(args.ExpiryDays)},
			AbortIncompleteMultipartUpload: &s3.BucketLifecycleConfigurationV2RuleAbortIncompleteMultipartUploadArgs{DaysAfterInitiation: pulumi.Int(1)},
		})
	}
	var lifecycle pulumi.Resource
	if len(rules) > 0 {
		lifecycle, err = s3.NewBucketLifecycleConfigurationV2(ctx, name, &s3.BucketLifecycleConfigurationV2Args{Bucket: bucket.ID(), Rules: rules}, parent)
	}
	if err != nil {
		return nil, err
	}
	policy, err := s3.NewBucketPolicy(ctx, name, &s3.BucketPolicyArgs{
		Bucket: bucket.ID(),
		Policy: policyDocument(ctx, c, "", statement{
			Sid:        "TLSOnly",
			Effect:     "Deny",
			Actions:    []string{"s3:*"},
			Resources:  pulumi.StringArray{bucket.Arn, pulumi.Sprintf("%s/*", bucket.Arn)},
			Principals: []principal{{Type: "*", Identifiers: []string{"*"}}},
			Conditions: []condition{{"Bool", "aws:SecureTransport", []string{"false"}}},
		}),
	}, parent, pulumi.DependsOn([]pulumi.Resource{block}))
	if err != nil {
		return nil, err
	}
	made.add(block, owner, sse, policy)
	if lifecycle != nil {
		made.add(lifecycle)
	}
	var gpuci pulumi.StringArray // the stored gpuci's ARN, for its readers
	if g := args.Gpuci; g != nil {
		obj, err := s3.NewBucketObjectv2(ctx, name+"-gpuci", &s3.BucketObjectv2Args{
			Bucket:      bucket.ID(),
			Key:         pulumi.String(wellknown.GpuciKey(g.SHA256)),
			Source:      pulumi.NewFileAsset(g.Path),
			ContentType: pulumi.String("application/octet-stream"),
			Tags:        tags,
		}, parent, pulumi.DependsOn([]pulumi.Resource{policy, sse}))
		if err != nil {
			return nil, fmt.Errorf("storing the stack's gpuci: %w", err)
		}
		made.add(obj)
		gpuci = pulumi.StringArray{pulumi.Sprintf("%s/%s", bucket.Arn, wellknown.GpuciKey(g.SHA256))}
	}

	for _, svc := range args.Services {
		sa := wellknown.CompilerCacheName(svc.Name)
		role, _, err := newRole(ctx, c, name+"-"+svc.Name, roleSpec{
			Name:        CompilerCacheRoleName(args.ClusterName, svc.Name),
			Description: fmt.Sprintf("Compiler cache server of pool %s in %s: %s on prefix %s/", svc.Name, args.ClusterName, svc.Access, svc.Prefix),
			Trust:       podIdentityTrust(args.Partition, args.Region, args.AccountID, args.ClusterName, wellknown.CompilerCacheNamespace, sa),
			Tags:        tags,
			Boundary:    args.Boundary,
		})
		if err != nil {
			return nil, err
		}
		access, err := iam.NewRolePolicy(ctx, name+"-"+svc.Name, &iam.RolePolicyArgs{
			Role:   role.Name,
			Name:   pulumi.String("compiler-cache"),
			Policy: policyDocument(ctx, c, "", append(CompilerCacheStatements(bucket.Arn, svc), readGpuci(gpuci)...)...),
		}, parent)
		if err != nil {
			return nil, err
		}
		// The agent hands a pod credentials when it asks, by the association: it must exist
		// before the server starts, and outlive it.
		assoc, err := awseks.NewPodIdentityAssociation(ctx, name+"-"+svc.Name, &awseks.PodIdentityAssociationArgs{
			ClusterName:    args.EKSClusterName,
			Namespace:      pulumi.String(wellknown.CompilerCacheNamespace),
			ServiceAccount: pulumi.String(sa),
			RoleArn:        role.Arn,
			Tags:           tags,
		}, parent, pulumi.DependsOn([]pulumi.Resource{args.PodIdentityAgent}))
		if err != nil {
			return nil, fmt.Errorf("creating the Pod Identity association of %s: %w", sa, err)
		}
		made.add(role, access, assoc)
	}

	if args.Retrier && gpuci != nil {
		sa := wellknown.RetrierServiceAccount
		role, _, err := newRole(ctx, c, name+"-retrier", roleSpec{
			Name:        RetrierRoleName(args.ClusterName),
			Description: "The in-cluster retrier of " + args.ClusterName + ": reads the gpuci the stack stored for it",
			Trust:       podIdentityTrust(args.Partition, args.Region, args.AccountID, args.ClusterName, wellknown.RetrierNamespace, sa),
			Tags:        tags,
			Boundary:    args.Boundary,
		})
		if err != nil {
			return nil, err
		}
		access, err := iam.NewRolePolicy(ctx, name+"-retrier", &iam.RolePolicyArgs{
			Role: role.Name, Name: pulumi.String("gpuci"), Policy: policyDocument(ctx, c, "", readGpuci(gpuci)...),
		}, parent)
		if err != nil {
			return nil, err
		}
		assoc, err := awseks.NewPodIdentityAssociation(ctx, name+"-retrier", &awseks.PodIdentityAssociationArgs{
			ClusterName: args.EKSClusterName, Namespace: pulumi.String(wellknown.RetrierNamespace), ServiceAccount: pulumi.String(sa),
			RoleArn: role.Arn, Tags: tags,
		}, parent, pulumi.DependsOn([]pulumi.Resource{args.PodIdentityAgent}))
		if err != nil {
			return nil, fmt.Errorf("creating the Pod Identity association of %s: %w", sa, err)
		}
		c.RetrierResources = []pulumi.Resource{role, access, assoc}
	}

	c.Bucket = bucket.Bucket
	c.Resources = made
	if err := ctx.RegisterResourceOutputs(c, pulumi.Map{"bucket": c.Bucket}); err != nil {
		return nil, err
	}
	return c, nil
}

// readGpuci lets a role read the stored gpuci, and nothing else of the bucket (none where the
// stack stores none).
func readGpuci(object pulumi.StringArray) []statement {
	if object == nil {
		return nil
	}
	return []statement{{Sid: "ReadTheStacksGpuci", Actions: []string{"s3:GetObject"}, Resources: object}}
}

// RetrierRoleName is the in-cluster retrier's role.
func RetrierRoleName(cluster string) string { return cluster + "-retrier" }

// CachePrefixes are the bucket's prefixes the caches fill (each read-write pool's), sorted.
func CachePrefixes(services []config.CompilerCacheService) []string {
	var out []string
	for _, s := range services {
		if s.Writes() && !slices.Contains(out, s.Prefix) {
			out = append(out, s.Prefix)
		}
	}
	slices.Sort(out)
	return out
}

// CompilerCacheStatements are what a cache server's role may do: read its prefix (and list
// it), and write it when the server is read-write. Nothing else in the
// bucket, and nothing at all elsewhere.
func CompilerCacheStatements(bucketArn pulumi.StringOutput, svc config.CompilerCacheService) []statement {
	objects := pulumi.StringArray{pulumi.Sprintf("%s/%s/*", bucketArn, svc.Prefix)}
	out := []statement{
		{Sid: "ReadItsPrefix", Actions: CompilerCacheReadActions, Resources: objects},
		{Sid: "ListItsPrefix", Actions: []string{"s3:ListBucket"}, Resources: pulumi.StringArray{bucketArn},
			Conditions: []condition{{"StringLike", "s3:prefix", []string{svc.Prefix + "/*"}}}},
	}
	if svc.Writes() {
		out = append(out, statement{Sid: "WriteItsPrefix", Actions: CompilerCacheWriteActions, Resources: objects})
	}
	return out
}

// CompilerCacheRoleName is a server's role: <cluster>-ccache-<pool>, cut to IAM's 64
// characters with a hash of the pool's name where it would not fit.
func CompilerCacheRoleName(cluster, pool string) string {
	n := cluster + "-ccache-" + pool
	if len(n) <= 64 {
		return n
	}
	sum := sha256.Sum256([]byte(pool))
	return n[:55] + "-" + hex.EncodeToString(sum[:])[:8]
}
