package config

import "github.com/luxfi/lux-gpu-ci/versions"

// Project is the Pulumi project name and so the namespace of every key below.
const Project = "lux-gpu-ci"

// The project's config keys, without the "lux-gpu-ci:" namespace.
const (
	KeyClusterName                 = "clusterName"
	KeyKubernetesVersion           = "kubernetesVersion"
	KeyVpcCidr                     = "vpcCidr"
	KeyAzCount                     = "azCount"
	KeyNatMode                     = "natMode"
	KeyNetworkPolicyMode           = "networkPolicyEnforcingMode"
	KeySystemNodeInstanceType      = "systemNodeInstanceType"
	KeySystemNodeCount             = "systemNodeCount"
	KeyReplaceSystemNodes          = "replaceSystemNodes"
	KeyPublicAccessCidrs           = "publicAccessCidrs"
	KeyAdminPrincipals             = "adminPrincipals"
	KeyDeployRoleArn               = "deployRoleArn"
	KeyPreviewRoleArn              = "previewRoleArn"
	KeyTags                        = "tags"
	KeyAddonVersions               = "addonVersions"
	KeyBudget                      = "budget"
	KeyCreateSpotServiceLinkedRole = "createSpotServiceLinkedRole"
	KeyGPUPools                    = "gpuPools"
	KeyGitHubOrg                   = "githubOrg"
	KeyGitHubToken                 = "githubToken"
	KeyGitHubAppID                 = "githubAppId"
	KeyGitHubAppInstallationID     = "githubAppInstallationId"
	KeyGitHubAppPrivateKey         = "githubAppPrivateKey"
	KeyHelmSkipAwait               = "helmSkipAwait"
	KeyRunnerDrainTimeout          = "runnerDrainTimeout"
	KeyHelmCharts                  = "helmCharts"
	KeyImageCache                  = "imageCache"
	KeyRegistryCredentials         = "registryCredentials"
	KeyImageRepositories           = "imageRepositories"
	KeyRetryScaleSetName           = "retryScaleSetName"
	KeyRetryRunnerGroup            = "retryRunnerGroup"
	KeyRetrierGitHubToken          = "retrierGitHubToken"
	KeyRetrierGpuciVersion         = "retrierGpuciVersion"
	KeyRetrierGpuciSHA256          = "retrierGpuciSha256"
	KeyRetrierSpotCoolDown         = "retrierSpotCoolDown"
	KeyCompilerCacheExpiryDays     = "compilerCacheExpiryDays"
	KeyCompilerCacheWriteRefs      = "compilerCacheWriteRefs"

	// The AWS provider's own keys; read, not declared by this project.
	KeyRegion     = "aws:region"
	KeyAWSProfile = "aws:profile"
	KeyAssumeRole = "aws:assumeRole"
)

// NATMode is how the stack's nodes reach the internet (natMode).
type NATMode string

const (
	// NatSingle puts nodes in private subnets behind one NAT gateway (one AZ's NAT: the
	// cheap choice; a NAT outage cuts egress for every AZ).
	NatSingle NATMode = "single"
	// NatNone is the lean profile: no NAT gateway and no private subnets; nodes sit in public
	// subnets with a public IP and a security group that admits nothing from outside.
	NatNone NATMode = "none"
)

// NetworkPolicyMode is how the VPC CNI enforces NetworkPolicies (networkPolicyEnforcingMode):
// its NETWORK_POLICY_ENFORCING_MODE (amazon-vpc-cni-k8s README, v1.17.1+).
type NetworkPolicyMode string

const (
	// NetworkPoliciesStrict: a new pod is denied everything until its policies are in place,
	// and a pod no policy selects stays denied; the stack gives every namespace it runs pods in
	// its policies (k8s/boundary.go).
	NetworkPoliciesStrict NetworkPolicyMode = "strict"
	// NetworkPoliciesStandard: a pod is open until a policy selects it, and a new pod's
	// policies arrive after it starts (a container job's services could run unrestricted for
	// those seconds). For one up of a live stack that predates strict mode: its policies land
	// before the next up turns strict on (docs/operations.md, "Upgrading").
	NetworkPoliciesStandard NetworkPolicyMode = "standard"
)

// MaxAZs is the most availability zones the network spreads across.
const MaxAZs = 3

// budgetExample and helmChartsExample are the fixes shown for bad values of those keys; the
// chart's example is the pinned version, mirrored.
const budgetExample = `{"monthlyUsd": 250, "emails": ["you@example.com"]}`

var helmChartsExample = `{"karpenter": {"chart": "oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/karpenter/karpenter", "version": "` + versions.KarpenterChart.Version + `"}}`

// Addons are the EKS managed add-ons the cluster runs, in the order they are listed in docs.
var Addons = []string{"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"}

// Defaults are the values a key takes when the stack does not set it. Pulumi.yaml declares
// the same defaults (checked by a test), and the engine hands them to the program: a key
// Pulumi.yaml declares without a default is one the engine requires. So every optional key
// has a default here that means "off": "" for the credentials a stack may leave unset, {}
// for the budget.
var Defaults = map[string]any{
	// "": lux-gpu-ci-<stack>, so two stacks in one account never share IAM names.
	KeyClusterName:            "",
	KeyKubernetesVersion:      versions.KubernetesDefault,
	KeyVpcCidr:                "10.0.0.0/16",
	KeyAzCount:                2,
	KeyNatMode:                string(NatSingle),
	KeyNetworkPolicyMode:      string(NetworkPoliciesStrict),
	KeySystemNodeInstanceType: "t3.medium",
	KeySystemNodeCount:        1,
	// false: an up refuses what would replace the live system node group (see
	// SystemNodes.Replace).
	KeyReplaceSystemNodes: false,
	KeyPublicAccessCidrs:  []string{"0.0.0.0/0"},
	KeyAdminPrincipals:    []string{},
	// "": no deploy identity (identity/) has access entries; whoever runs `pulumi up` has.
	KeyDeployRoleArn:  "",
	KeyPreviewRoleArn: "",
	KeyTags:           map[string]string{},
	KeyAddonVersions:  map[string]string{},
	// true: create the account's EC2 Spot service-linked role if it does not exist yet.
	KeyCreateSpotServiceLinkedRole: true,
	KeyGPUPools:                    []GPUPool{DefaultPool()},
	KeyHelmSkipAwait:               false,
	// How long removing a scale set waits for its running jobs (see Config.RunnerDrainTimeout).
	KeyRunnerDrainTimeout:      "1h",
	KeyHelmCharts:              map[string]versions.Chart{},
	KeyBudget:                  map[string]any{},
	KeyGitHubToken:             "",
	KeyGitHubAppID:             "",
	KeyGitHubAppInstallationID: "",
	KeyGitHubAppPrivateKey:     "",
	// []: no pull-through cache rule; images come from their registries through the NAT.
	KeyImageCache:          []string{},
	KeyRegistryCredentials: "",
	// []: nodes pull from no private ECR repository of the account but the image cache's.
	KeyImageRepositories: []string{},
	// "": no retry runner; gpuci retry then runs where a workflow puts it, on GitHub's evidence.
	KeyRetryScaleSetName: "",
	// "": required once retryScaleSetName is set (validateRetryRunner): the retry runner's
	// account reads the cluster, so it is never left in the Default group every repository may use.
	KeyRetryRunnerGroup: "",
	// "": no in-cluster retrier (config.Retrier); with a token, the gpuci release it runs.
	KeyRetrierGitHubToken:  "",
	KeyRetrierGpuciVersion: "",
	KeyRetrierGpuciSHA256:  "",
	// How long, after the retrier re-runs a job a spot interruption ended, the job's pool
	// launches on-demand nodes (config.Retrier.SpotCoolDown); "0s" for never.
	KeyRetrierSpotCoolDown: "30m",
	// Days an object of the compiler cache may go unused before S3 expires it.
	KeyCompilerCacheExpiryDays: DefaultCompilerCacheExpiryDays,
	// The refs whose jobs write a read-write pool's compiler cache (its gate decides, by the
	// job ARC recorded); every other job of the pool reads.
	KeyCompilerCacheWriteRefs: DefaultCompilerCacheWriteRefs,
}

// Required are the keys a stack must set: Pulumi.yaml declares them without a default, so the
// engine refuses a stack without them before the program runs.
var Required = []string{KeyGitHubOrg}

// structured keys hold lists or objects; they are edited in the stack file rather than
// with a one-line `pulumi config set`.
var structured = map[string]bool{
	KeyPublicAccessCidrs: true, KeyAdminPrincipals: true, KeyTags: true, KeyAddonVersions: true, KeyBudget: true, KeyGPUPools: true,
	KeyImageCache: true, KeyImageRepositories: true, KeyCompilerCacheWriteRefs: true,
}

// credentials are set with `pulumi config set --secret`.
var credentials = map[string]bool{KeyGitHubToken: true, KeyGitHubAppPrivateKey: true, KeyRegistryCredentials: true, KeyRetrierGitHubToken: true}

// qualify turns a project key into the fully qualified key the engine uses.
func qualify(key string) string { return Project + ":" + key }
