// Package config reads a stack's configuration once, fills in defaults and validates it
// before the program registers any resource. Every error names the config key and says
// how to fix it, and all problems are reported together.
//
//	keys.go      the keys, their defaults, which are required
//	config.go    the validated Config, and Load/Parse
//	parse.go     reading raw values, and how an error names its fix
//	validate.go  the rules for the stack-wide keys
//	pool.go      a GPU pool, its defaults and its rules
//	github.go    where runners register, and the credentials (secrets from the start)
//	imagecache.go  the registries nodes pull through ECR's pull-through cache
//	compilercache.go  the compiler cache: each pool's access, the services that serve it
//	stackfile.go reading Pulumi.<stack>.yaml as the engine hands it over, for offline tools
//
// The keys, their types and defaults are also declared in Pulumi.yaml's `config:` block;
// a unit test keeps the two in step.
package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// Config is the validated stack configuration.
type Config struct {
	// Stack is the Pulumi stack's name.
	Stack  string
	Region string
	// AWS is how `pulumi up` authenticates to AWS; the kubeconfig authenticates the same way.
	AWS AWSAuth
	// ClusterName is the EKS cluster's name, and the stem of every physical name derived
	// from it (IAM roles, queue, budget): "lux-gpu-ci-<stack>" unless configured.
	ClusterName       string
	KubernetesVersion string
	Network           Network
	SystemNodes       SystemNodes
	// PublicAccessCIDRs may reach the EKS API endpoint.
	PublicAccessCIDRs []string
	// AdminPrincipals are IAM role/user ARNs given cluster-admin access entries, besides
	// the identity that runs `pulumi up` (EKS makes that one admin itself).
	AdminPrincipals []string
	// DeployRoleArn and PreviewRoleArn are the deploy identity's roles for this stack
	// (identity/: deployRoles[<stack>] and previewRole): cluster-admin and read-only (no
	// Secrets) access entries, so deploy.yml and preview.yml reach the cluster. "": none.
	DeployRoleArn, PreviewRoleArn string
	// Tags go on every AWS resource that takes tags.
	Tags map[string]string
	// AddonVersions pins EKS add-on versions by add-on name; an add-on not listed gets the
	// default version EKS publishes for the cluster's Kubernetes version.
	AddonVersions map[string]string
	// Budget is nil unless the budget guard is configured.
	Budget                      *Budget
	CreateSpotServiceLinkedRole bool

	// GPUPools are the kinds of GPU runner as the stack file configures them; each is a
	// NodePool, an EC2NodeClass and a runner scale set. A pool's retry twin is not among them:
	// Pools derives it.
	GPUPools []GPUPool
	GitHub   GitHub
	// HelmSkipAwait installs Helm releases without waiting for their workloads to become
	// ready. Off for real clusters; on where no kubelet runs (the e2e API server).
	HelmSkipAwait bool
	// RunnerDrainTimeout bounds how long removing a scale set (a pool removed or renamed, an
	// ARC upgrade across a minor version, destroy) waits for ARC to clean it up, which waits for
	// its runners' running jobs: the longest job the pools run. Past it the up fails; the next
	// up with a refresh (deploy.yml's) finishes the removal by itself.
	RunnerDrainTimeout time.Duration
	// ImageCache is the ECR pull-through cache: which registries' images nodes pull from ECR.
	ImageCache ImageCache
	// HelmCharts overrides where charts come from, by chart name (a mirror registry, or a
	// local directory); a chart not listed comes from versions.
	HelmCharts map[string]versions.Chart
	// RetryRunner is the stack's retry runner, where a retry workflow runs `gpuci retry
	// --cluster`; its zero value is none.
	RetryRunner RetryRunner
	// Retrier is the in-cluster retrier; its zero value is none.
	Retrier Retrier
	// Gpuci is a gpuci release the stack's pods run (the retrier, the compiler caches' gates)
	// instead of the stack's own build; the zero value is the build.
	Gpuci Gpuci
	// CompilerCacheExpiryDays is how long an object of the compiler cache may go unused
	// before S3 expires it (CompilerCaches: which pools have one).
	CompilerCacheExpiryDays int
	// CompilerCacheWriteRefs are the refs (path patterns) whose jobs write a read-write
	// pool's compiler cache; a job of any other ref reads it.
	CompilerCacheWriteRefs []string

	// arcVersion is ARCVersion's, read once while validating (a local chart's from its
	// Chart.yaml).
	arcVersion string
}

// RetryRunner is a runner scale set of the stack's own (k8s.RetryScaleSetValues): a small
// runner on the system nodes whose account may read the cluster's events. Whatever a job on it
// runs reads them too, so it registers in a runner group of its own, which the organization
// limits to the repositories (and, where the plan allows, the one workflow) that re-run jobs.
type RetryRunner struct {
	// ScaleSetName is its scale set and `runs-on:` value; "" for no retry runner.
	ScaleSetName string
	// RunnerGroup is the GitHub runner group it registers in: never the Default group.
	RunnerGroup string
}

// AWSAuth is the AWS provider's own credential settings, which the program reads so that
// everything it hands out (the kubeconfig) acts as the identity that runs `pulumi up`.
type AWSAuth struct {
	// Profile is aws:profile: a named profile of the AWS CLI's config.
	Profile string
	// AssumeRoleArn is aws:assumeRole's roleArn: the role the provider assumes.
	AssumeRoleArn string
}

// Network is the VPC layout.
type Network struct {
	CIDR    string
	AZCount int
	NatMode NATMode
	// NetworkPolicyMode is the VPC CNI's enforcing mode (networkPolicyEnforcingMode).
	NetworkPolicyMode NetworkPolicyMode
}

// SystemNodes is the always-on managed node group that runs Karpenter, CoreDNS and ARC.
type SystemNodes struct {
	InstanceType string
	Count        int
	// Replace lets an up replace the live group (a new instance type, AMI type or subnets): EKS
	// deletes the old group's nodes with a drain it gives up on after 5 minutes, so a
	// container-form job running there is killed. Off, such a change is refused.
	Replace bool
}

// Budget is the opt-in AWS Budgets guard: e-mail when actual spend passes 80% of the monthly
// limit, and when forecast spend passes 100%.
type Budget struct {
	MonthlyUSD float64  `json:"monthlyUsd"`
	Emails     []string `json:"emails"`
}

// Getter returns a raw config value and whether it is set. Keys are fully qualified
// ("lux-gpu-ci:azCount", "aws:region").
type Getter func(key string) (string, bool)

// Parse builds stack's Config from raw values, applying defaults. isSecret tells whether a
// key is stored as a Pulumi secret (nil: do not check). It returns every problem it finds,
// joined, so one run shows them all; no message ever contains a secret's value.
func Parse(stack string, get Getter, isSecret func(key string) bool) (*Config, error) {
	p := &parser{get: get, isSecret: isSecret}
	c := &Config{
		Stack:             stack,
		Region:            p.region(),
		AWS:               p.awsAuth(),
		ClusterName:       p.clusterName(stack),
		KubernetesVersion: p.str(KeyKubernetesVersion),
		Network: Network{
			CIDR:              p.str(KeyVpcCidr),
			AZCount:           p.integer(KeyAzCount),
			NatMode:           NATMode(p.str(KeyNatMode)),
			NetworkPolicyMode: NetworkPolicyMode(p.str(KeyNetworkPolicyMode)),
		},
		SystemNodes: SystemNodes{
			InstanceType: p.str(KeySystemNodeInstanceType),
			Count:        p.integer(KeySystemNodeCount),
			Replace:      p.boolean(KeyReplaceSystemNodes),
		},
		CreateSpotServiceLinkedRole: p.boolean(KeyCreateSpotServiceLinkedRole),
		HelmSkipAwait:               p.boolean(KeyHelmSkipAwait),
		RunnerDrainTimeout:          p.drainTimeout(),
		RetryRunner:                 RetryRunner{ScaleSetName: p.str(KeyRetryScaleSetName), RunnerGroup: p.str(KeyRetryRunnerGroup)},
		CompilerCacheExpiryDays:     p.integer(KeyCompilerCacheExpiryDays),
	}
	c.GPUPools = p.parsePools()
	c.GitHub = p.parseGitHub()
	c.ImageCache = p.parseImageCache(c.ClusterName)
	p.object(KeyCompilerCacheWriteRefs, &c.CompilerCacheWriteRefs)
	c.Gpuci = p.parseGpuci()
	c.Retrier = p.parseRetrier()
	p.object(KeyPublicAccessCidrs, &c.PublicAccessCIDRs)
	p.object(KeyAdminPrincipals, &c.AdminPrincipals)
	c.DeployRoleArn, c.PreviewRoleArn = p.str(KeyDeployRoleArn), p.str(KeyPreviewRoleArn)
	p.object(KeyTags, &c.Tags)
	p.object(KeyAddonVersions, &c.AddonVersions)
	p.object(KeyHelmCharts, &c.HelmCharts)
	// The budget guard is off unless configured: the default {} (or an unset key) is off.
	var budget Budget
	p.object(KeyBudget, &budget)
	if budget.MonthlyUSD != 0 || len(budget.Emails) > 0 {
		c.Budget = &budget
	}
	if len(p.errs) == 0 {
		c.validate(p)
		c.validatePools(p)
		c.validateRetryRunner(p)
		c.validateCompilerCache(p)
	}
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("invalid stack configuration:\n  %w", errors.Join(p.errs...))
	}
	return c, nil
}
