//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

// registryCredentials is the dev stack's image cache credentials, set as a secret as a team
// sets it (Pulumi.dev.yaml caches ghcr.io and docker.io, which ECR accepts only with one).
const registryCredentials = `{"docker.io": {"username": "luxci", "accessToken": "dckr_pat_E2E"}, "ghcr.io": {"username": "luxci", "accessToken": "ghp_E2EREADPACKAGES"}}`

// assertImagePath checks the image path on the real state, as the real engine created it
// through the fake AWS (which keeps ECR's, Secrets Manager's and EC2's rules for these
// requests): the S3 gateway endpoint on the private route table, a cache rule per registry
// whose credential is a secret named as ECR requires, the nodes' first-pull permission, the
// stack output a workflow takes the cache's address from, and the runner images through it
// in the API server.
func assertImagePath(t *testing.T, ctx context.Context, outputs auto.OutputMap, resources []apitype.ResourceV3, kube dynamic.Interface) {
	registry := fakeaws.Account + ".dkr.ecr.us-west-2.amazonaws.com"
	assert.Equal(t, map[string]any{
		"ghcr.io":   registry + "/lux-gpu-ci/ghcr",
		"docker.io": registry + "/lux-gpu-ci/docker-hub",
	}, outputs["imageCache"].Value, "the stack exports where a job names its image")

	byType := map[string][]apitype.ResourceV3{}
	ids := map[string]string{}
	for _, r := range resources {
		byType[string(r.Type)] = append(byType[string(r.Type)], r)
		ids[string(r.URN)] = string(r.ID)
	}
	endpoints := byType["aws:ec2/vpcEndpoint:VpcEndpoint"]
	require.Len(t, endpoints, 1)
	assert.Equal(t, "com.amazonaws.us-west-2.s3", endpoints[0].Inputs["serviceName"])
	assert.Equal(t, []any{"network-private-rt_id"}, endpoints[0].Inputs["routeTableIds"])

	secretArns := map[string]bool{}
	for _, s := range byType["aws:secretsmanager/secret:Secret"] {
		secretArns[s.Outputs["arn"].(string)] = true
	}
	require.Len(t, secretArns, 2)
	rules := map[string]string{}
	for _, r := range byType["aws:ecr/pullThroughCacheRule:PullThroughCacheRule"] {
		rules[r.Inputs["upstreamRegistryUrl"].(string)] = r.Inputs["ecrRepositoryPrefix"].(string)
		assert.True(t, secretArns[r.Inputs["credentialArn"].(string)], "rule %s reads a secret the stack created", r.URN)
	}
	assert.Equal(t, map[string]string{"ghcr.io": "lux-gpu-ci/ghcr", "registry-1.docker.io": "lux-gpu-ci/docker-hub"}, rules)
	versions := byType["aws:secretsmanager/secretVersion:SecretVersion"]
	require.Len(t, versions, 2)
	for _, v := range versions {
		s, ok := v.Inputs["secretString"].(map[string]any)
		require.True(t, ok, "secretString is stored as a secret, not as text: %v", v.Inputs["secretString"])
		assert.Equal(t, resource.SecretSig, s[resource.SigKey], "encrypted in the state")
	}
	assert.Len(t, byType["aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate"], 2)

	var firstPull []string
	for _, a := range byType["aws:iam/rolePolicyAttachment:RolePolicyAttachment"] {
		if a.Inputs["policyArn"] == "arn:aws:iam::"+fakeaws.Account+":policy/lux-gpu-ci-image-cache-first-pull" {
			firstPull = append(firstPull, a.Inputs["role"].(string))
		}
	}
	assert.ElementsMatch(t, []string{"cluster-system-node-role", "lux-gpu-ci-karpenter-node"}, firstPull)

	for _, name := range []string{"lux-gpu-t4", "lux-gpu-t4-container"} {
		set, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, name)
		containers, _, _ := unstructured.NestedSlice(set.Object, "spec", "template", "spec", "containers")
		require.NotEmpty(t, containers, name)
		assert.Equal(t, registry+"/lux-gpu-ci/ghcr/actions/actions-runner:latest", containers[0].(map[string]any)["image"], "%s pulls its runner through the cache", name)
	}
}
