package stack_test

// What the dev stack declares, by type, and where each resource sits.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDevStackResourceCounts pins how many of each resource the dev stack declares.
func TestDevStackResourceCounts(t *testing.T) {
	m := runDev(t)
	want := map[string]int{
		"lux-gpu-ci:infra:Network":                            1,
		"lux-gpu-ci:infra:Cluster":                            1,
		"lux-gpu-ci:infra:KarpenterAWS":                       1,
		"aws:ec2/vpc:Vpc":                                     1,
		"aws:ec2/internetGateway:InternetGateway":             1,
		"aws:ec2/subnet:Subnet":                               4,
		"aws:ec2/routeTable:RouteTable":                       2,
		"aws:ec2/routeTableAssociation:RouteTableAssociation": 4,
		"aws:ec2/eip:Eip":                                     1,
		"aws:ec2/natGateway:NatGateway":                       1,
		"eks:index:Cluster":                                   1,
		"eks:index:ManagedNodeGroup":                          1,
		"aws:eks/addon:Addon":                                 4,
		"aws:ec2/tag:Tag":                                     1,
		"aws:sqs/queue:Queue":                                 1,
		"aws:sqs/queuePolicy:QueuePolicy":                     1,
		"aws:cloudwatch/eventRule:EventRule":                  5,
		"aws:cloudwatch/eventTarget:EventTarget":              5,
		"aws:iam/role:Role":                                   3 + 2,     // system nodes, Karpenter nodes, Karpenter controller; the cache servers
		"aws:iam/policy:Policy":                               6 + 1 + 1, // Karpenter's controller, the image cache's first pull, the nodes' pull scope
		"aws:iam/rolePolicyAttachment:RolePolicyAttachment":   4 + 4 + 6 + 2 + 2,
		"lux-gpu-ci:infra:NodeImagePull":                      1,
		"aws:ec2/vpcEndpoint:VpcEndpoint":                     1, // S3, on the private route table
		// The image cache: ghcr.io (runner images) and docker.io (CUDA images), each with
		// its credential's secret, a rule and a repository template.
		"lux-gpu-ci:infra:ImageCache":                                   1,
		"aws:secretsmanager/secret:Secret":                              2,
		"aws:secretsmanager/secretVersion:SecretVersion":                2,
		"aws:ecr/pullThroughCacheRule:PullThroughCacheRule":             2,
		"aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate": 2,
		"aws:eks/accessEntry:AccessEntry":                               1,
		"aws:eks/podIdentityAssociation:PodIdentityAssociation":         1 + 2, // Karpenter, the two cache servers
		"aws:iam/serviceLinkedRole:ServiceLinkedRole":                   1,     // the account has none yet: created
		"aws:ec2/launchTemplate:LaunchTemplate":                         1,     // the system nodes
		// The compiler cache: one bucket, and a server's role for each pool (the twin shares
		// its pool's), with its inline policy.
		"lux-gpu-ci:infra:CompilerCache":                                                             1,
		"aws:s3/bucketV2:BucketV2":                                                                   1,
		"aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock":                                     1,
		"aws:s3/bucketOwnershipControls:BucketOwnershipControls":                                     1,
		"aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2": 1,
		"aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2":                       1,
		"aws:s3/bucketPolicy:BucketPolicy":                                                           1,
		"aws:iam/rolePolicy:RolePolicy":                                                              2,
		"lux-gpu-ci:infra:Budget":                                                                    0,
		"aws:budgets/budget:Budget":                                                                  0,

		"lux-gpu-ci:k8s:GPUCI":                         1,
		"lux-gpu-ci:k8s:Karpenter":                     1,
		"lux-gpu-ci:k8s:DevicePlugin":                  1,
		"lux-gpu-ci:k8s:GPUPool":                       3, // gpu-spot (runner form), its on-demand twin, gpu-spot-container
		"lux-gpu-ci:k8s:Runners":                       1,
		"pulumi:providers:kubernetes":                  2, // the cluster's, and the one that adopts ARC's CRDs
		"kubernetes:helm.sh/v3:Release":                7, // karpenter-crd, karpenter, nvidia-device-plugin, arc, lux-gpu-t4(-on-demand, -container)
		"kubernetes:core/v1:Namespace":                 5, // nvidia-device-plugin, arc-systems, arc-runners, gpuci-cache, arc-jobs-gpu-spot-container
		"kubernetes:core/v1:Secret":                    1,
		"kubernetes:karpenter.sh/v1:NodePool":          3,
		"kubernetes:karpenter.k8s.aws/v1:EC2NodeClass": 3,
		// ARC's four CRDs, from the controller chart of the pinned version.
		"kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition": 4,
		// The container-form pool's job pod template and its jobs' sampler; the cache servers'
		// bucket name; the runners' job hooks. Accounts: the container-form pool's and the one
		// its runners had before (k8s.LegacyContainerHooksAccount), the cache servers'.
		"kubernetes:core/v1:ConfigMap":      1 + 1 + 1 + 1,
		"kubernetes:core/v1:ServiceAccount": 2 + 2,
		// The hooks' accounts; each cache server's gate reads its pool's pods where they run
		// (gpu-spot: the runners' namespace; gpu-spot-container: that and its jobs').
		"kubernetes:rbac.authorization.k8s.io/v1:Role":        2 + 1 + 2,
		"kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": 2 + 1 + 2,
		// The container hooks' accounts read a job pod's Node (its capacity type).
		"kubernetes:rbac.authorization.k8s.io/v1:ClusterRole":        1,
		"kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": 2,
		// No drain evicts a pod that holds a job: the job pods' (in the runners' namespace and
		// in the container-form pool's), the container-form runners'.
		"kubernetes:policy/v1:PodDisruptionBudget": 2 + 1,
		// The runners' namespace's boundary: deny all, then each role's egress; the
		// container-form pool's jobs': deny all, the jobs' egress; the cache servers': deny
		// all, their egress, each server's clients; arc-systems': deny all, the controllers'
		// egress, the metrics' ingress; kube-system's and the device plugin's: allow all
		// (strict mode: k8s/boundary.go).
		"kubernetes:networking.k8s.io/v1:NetworkPolicy": 4 + 2 + 4 + 3 + 2,
		// A compiler cache server per pool, and its Service.
		"lux-gpu-ci:k8s:CompilerCache": 1,
		// The gpuci the stack built for its pods (the gates), in the stack's bucket.
		"aws:s3/bucketObjectv2:BucketObjectv2": 1,
		"kubernetes:apps/v1:Deployment":        2,
		"kubernetes:core/v1:Service":           2,
	}
	got := map[string]int{}
	for _, r := range m.programResources() {
		got[r.Type]++
	}
	for typ, n := range want {
		assert.Equal(t, n, got[typ], "number of %s", typ)
	}
	for typ := range got {
		_, known := want[typ]
		assert.True(t, known, "unexpected resource type %s: add it to this test", typ)
	}
}

// Every resource sits under one of our components, never at the stack root.
func TestEveryResourceHasAComponentParent(t *testing.T) {
	m := runDev(t)
	for _, r := range m.programResources() {
		parent := r.Parent()
		if strings.HasPrefix(r.Type, "lux-gpu-ci:") {
			assert.True(t, parent == "pulumi:pulumi:Stack::lux-gpu-ci-dev" || strings.HasPrefix(parent, "lux-gpu-ci:"), "component %s under %s", r.Key(), parent)
			continue
		}
		assert.NotEqual(t, "pulumi:pulumi:Stack::lux-gpu-ci-dev", parent, "%s is at the stack root", r.Key())
	}
}

// No Kubernetes object is declared with a status (an empty one, as the typed objects' zero
// value marshals, aside): the API server writes it, so a declared one differs from the live
// one after every refresh, a change each up would make again.
func TestNoObjectDeclaresAStatus(t *testing.T) {
	m := runWithRetrier(t)
	checked := 0
	for _, r := range m.programResources() {
		if !strings.HasPrefix(r.Type, "kubernetes:") || strings.HasPrefix(r.Type, "kubernetes:helm.sh/") {
			continue
		}
		checked++
		status, _ := r.Inputs["status"].(map[string]any)
		for k, v := range status {
			assert.Equal(t, map[string]any{}, v, "%s %s declares its status's %s", r.Type, r.Name, k)
		}
	}
	assert.Greater(t, checked, 40)
}
