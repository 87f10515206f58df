package stack_test

// The image path under mocks: the S3 gateway endpoint, the ECR pull-through cache (rules,
// credentials as secrets, repository templates), the first-pull permission of both node
// roles, the runner images through the cache, the root volume's performance.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

const testRegistry = testAccount + ".dkr.ecr.us-west-2.amazonaws.com"

// The private subnets reach S3 through a gateway endpoint: image layers from ECR never cross
// the NAT. The lean profile has no NAT and no endpoint.
func TestS3GatewayEndpointOnThePrivateRouteTable(t *testing.T) {
	m := runDev(t)
	ep := m.one(t, "aws:ec2/vpcEndpoint:VpcEndpoint")
	assert.Equal(t, "com.amazonaws.us-west-2.s3", ep.Inputs["serviceName"])
	assert.Equal(t, "Gateway", ep.Inputs["vpcEndpointType"])
	assert.Equal(t, []any{"network-private-rt_id"}, ep.Inputs["routeTableIds"], "the private route table, which the nodes' subnets use")
	assert.Equal(t, "network-vpc_id", ep.Inputs["vpcId"])
	assert.Equal(t, "dev", ep.Inputs["tags"].(map[string]any)["env"])

	lean := runDev(t, "natMode", "none")
	assert.Empty(t, lean.all("aws:ec2/vpcEndpoint:VpcEndpoint"))
}

func TestImageCacheRules(t *testing.T) {
	m := runDev(t)
	rules := map[string]registered{}
	for _, r := range m.all("aws:ecr/pullThroughCacheRule:PullThroughCacheRule") {
		rules[r.Inputs["upstreamRegistryUrl"].(string)] = r
	}
	require.ElementsMatch(t, []string{"ghcr.io", "registry-1.docker.io"}, keys(rules), "dev caches the runner images' and the CUDA images' registries")
	assert.Equal(t, "lux-gpu-ci/ghcr", rules["ghcr.io"].Inputs["ecrRepositoryPrefix"])
	assert.Equal(t, "lux-gpu-ci/docker-hub", rules["registry-1.docker.io"].Inputs["ecrRepositoryPrefix"])

	// Each rule's credential is a secret of its own, named as ECR requires, holding exactly
	// the registry's credential — encrypted in the state, never in plain text anywhere.
	var creds map[string]map[string]string
	require.NoError(t, json.Unmarshal([]byte(testkit.RegistryCredentials), &creds))
	for url, host := range map[string]string{"ghcr.io": "ghcr.io", "registry-1.docker.io": "docker.io"} {
		rule := rules[url]
		secretName := "image-cache-" + map[string]string{"ghcr.io": "ghcr", "docker.io": "docker-hub"}[host]
		secret := m.get(t, "aws:secretsmanager/secret:Secret", secretName)
		assert.Equal(t, "ecr-pullthroughcache/"+rule.Inputs["ecrRepositoryPrefix"].(string)+"-", secret.Inputs["namePrefix"])
		assert.EqualValues(t, 0, secret.Inputs["recoveryWindowInDays"], "deleted at once, so an up right after a destroy can reuse nothing stale")
		assert.Contains(t, rule.Deps(), "aws:secretsmanager/secretVersion:SecretVersion::"+secretName, "the rule waits for the credential's value")
		assert.Contains(t, rule.Inputs["credentialArn"], ":secret:ecr-pullthroughcache/")

		version := m.get(t, "aws:secretsmanager/secretVersion:SecretVersion", secretName)
		raw := version.Raw.Inputs["secretString"]
		require.True(t, raw.IsSecret(), "%s's credential is a Pulumi secret", host)
		var got map[string]string
		require.NoError(t, json.Unmarshal([]byte(raw.SecretValue().Element.StringValue()), &got))
		assert.Equal(t, creds[host], got, "ECR's secret shape: username and accessToken")
	}
	for _, r := range m.programResources() {
		for k, v := range r.Raw.Inputs {
			assertNoPlain(t, r.Key()+"."+string(k), v, "dckr_pat_TESTTOKEN", "ghp_TESTREADPACKAGES")
		}
	}

	// Cached repositories keep their newest images only: a bumped CUDA tag leaves gigabytes.
	for _, tmpl := range m.all("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate") {
		assert.Equal(t, []any{"PULL_THROUGH_CACHE"}, tmpl.Inputs["appliedFors"], tmpl.Name)
		var lp struct {
			Rules []struct {
				Selection struct {
					CountType   string `json:"countType"`
					CountNumber int    `json:"countNumber"`
				} `json:"selection"`
				Action struct{ Type string } `json:"action"`
			} `json:"rules"`
		}
		require.NoError(t, json.Unmarshal([]byte(tmpl.Inputs["lifecyclePolicy"].(string)), &lp), tmpl.Name)
		require.Len(t, lp.Rules, 1)
		assert.Equal(t, "imageCountMoreThan", lp.Rules[0].Selection.CountType)
		assert.Equal(t, 10, lp.Rules[0].Selection.CountNumber)
		assert.Equal(t, "expire", lp.Rules[0].Action.Type)
	}
	prefixes := []any{}
	for _, tmpl := range m.all("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate") {
		prefixes = append(prefixes, tmpl.Inputs["prefix"])
	}
	assert.ElementsMatch(t, []any{"lux-gpu-ci/ghcr", "lux-gpu-ci/docker-hub"}, prefixes)
}

// A node's first pull of an image ECR does not hold yet creates its repository and imports
// it, as the node's role: both node roles may do exactly that, in the cache's repositories.
func TestImageCacheFirstPullPermission(t *testing.T) {
	m := runDev(t)
	policy := m.get(t, "aws:iam/policy:Policy", "image-cache-first-pull")
	assert.Equal(t, "lux-gpu-ci-image-cache-first-pull", policy.Inputs["name"])
	var doc struct {
		Statement []struct {
			Effect   string
			Action   any
			Resource any
		}
	}
	require.NoError(t, json.Unmarshal([]byte(policy.Inputs["policy"].(string)), &doc))
	require.Len(t, doc.Statement, 1)
	st := doc.Statement[0]
	assert.Equal(t, "Allow", st.Effect)
	assert.ElementsMatch(t, []any{"ecr:CreateRepository", "ecr:BatchImportUpstreamImage"}, st.Action)
	assert.ElementsMatch(t, []any{
		"arn:aws:ecr:us-west-2:" + testAccount + ":repository/lux-gpu-ci/ghcr/*",
		"arn:aws:ecr:us-west-2:" + testAccount + ":repository/lux-gpu-ci/docker-hub/*",
	}, st.Resource, "the cache's repositories, nothing else")

	var roles []any
	for _, a := range m.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment") {
		if a.Inputs["policyArn"] == "arn:aws:iam::"+testAccount+":policy/lux-gpu-ci-image-cache-first-pull" {
			roles = append(roles, a.Inputs["role"])
		}
	}
	assert.ElementsMatch(t, []any{"cluster-system-node-role", "lux-gpu-ci-karpenter-node"}, roles, "the system nodes (container-form runners) and Karpenter's GPU nodes pull")
}

// The runner image comes through the cache in both forms (the container form's job pod
// pulls it again for its fs-init container: the chart passes the runner's image on).
func TestRunnerImagesComeThroughTheCache(t *testing.T) {
	m := runDev(t)
	want := testRegistry + "/lux-gpu-ci/ghcr/actions/actions-runner:latest"
	for _, name := range []string{"lux-gpu-t4", "lux-gpu-t4-on-demand", "lux-gpu-t4-container"} {
		v := releaseNamed(t, m, name).Inputs["values"]
		containers := path(v, "template", "spec", "containers").([]any)
		require.Len(t, containers, 1, name)
		assert.Equal(t, want, containers[0].(map[string]any)["image"], name)
		assert.Equal(t, "Always", containers[0].(map[string]any)["imagePullPolicy"], "%s follows the runner release, through the cache too", name)
	}

	off := runDev(t, "imageCache", "[]", "registryCredentials", testkit.Unset)
	v := releaseNamed(t, off, "lux-gpu-t4").Inputs["values"]
	assert.Equal(t, "ghcr.io/actions/actions-runner:latest", path(v, "template", "spec", "containers").([]any)[0].(map[string]any)["image"], "no cache: straight from ghcr.io")
	assert.Empty(t, off.all("aws:ecr/pullThroughCacheRule:PullThroughCacheRule"))
	assert.Empty(t, off.all("lux-gpu-ci:infra:ImageCache"))
	assert.Len(t, off.all("aws:ec2/vpcEndpoint:VpcEndpoint"), 1, "the S3 endpoint is free and serves ECR's own images (EKS add-ons) too")
}

// GPU nodes' root volume gets the configured throughput and IOPS.
func TestRootVolumePerformance(t *testing.T) {
	m := runDev(t)
	nc := m.get(t, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu-ci-gpu-spot-nodeclass")
	bdm := path(nc.Inputs, "spec", "blockDeviceMappings").([]any)
	require.Len(t, bdm, 1)
	ebs := bdm[0].(map[string]any)["ebs"].(map[string]any)
	assert.EqualValues(t, 125, ebs["throughput"], "the default: gp3's baseline, since the images go to the NVMe")
	assert.EqualValues(t, 3000, ebs["iops"])
	assert.Equal(t, "RAID0", path(nc.Inputs, "spec", "instanceStorePolicy"), "an AL2023 pool's images and kubelet on the instance's NVMe")

	m = runDev(t, "gpuPools", `[{"name": "fast", "instanceTypes": ["g4dn.xlarge"], "rootVolumeThroughput": 1000, "rootVolumeIOPS": 4000}]`)
	ebs = path(m.get(t, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu-ci-fast-nodeclass").Inputs, "spec", "blockDeviceMappings").([]any)[0].(map[string]any)["ebs"].(map[string]any)
	assert.EqualValues(t, 1000, ebs["throughput"])
	assert.EqualValues(t, 4000, ebs["iops"])
}

func assertNoPlain(t *testing.T, where string, v resource.PropertyValue, needles ...string) {
	t.Helper()
	switch {
	case v.IsSecret():
		return
	case v.IsString():
		for _, n := range needles {
			assert.NotContains(t, v.StringValue(), n, "a credential leaks in plain text at %s", where)
		}
	case v.IsArray():
		for _, x := range v.ArrayValue() {
			assertNoPlain(t, where, x, needles...)
		}
	case v.IsObject():
		for k, x := range v.ObjectValue() {
			assertNoPlain(t, where+"."+string(k), x, needles...)
		}
	case v.IsOutput():
		assertNoPlain(t, where, v.OutputValue().Element, needles...)
	}
}

// A pool with an image snapshot, through the whole program: its EC2NodeClass (and its retry
// twin's) restores the data volume from the snapshot on Bottlerocket, at the pool's size and
// speed; the other pools stay on AL2023.
func TestImageSnapshotPoolThroughTheProgram(t *testing.T) {
	m := runDev(t, "gpuPools", `[{"name": "warm", "instanceTypes": ["g4dn.xlarge"], "imageSnapshotID": "snap-0123456789abcdef0", "rootVolumeGi": 60, "onDemandRetry": true},
		{"name": "cold", "instanceTypes": ["g4dn.xlarge"]}]`)
	for _, name := range []string{"warm", "warm-on-demand"} {
		nc := m.get(t, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu-ci-"+name+"-nodeclass")
		assert.Equal(t, []any{map[string]any{"alias": "bottlerocket@v1.64.0"}}, path(nc.Inputs, "spec", "amiSelectorTerms"), name)
		bdm := path(nc.Inputs, "spec", "blockDeviceMappings").([]any)
		require.Len(t, bdm, 2, name)
		data := bdm[1].(map[string]any)
		assert.Equal(t, "/dev/xvdb", data["deviceName"])
		assert.Equal(t, true, data["rootVolume"])
		assert.Equal(t, "snap-0123456789abcdef0", path(data, "ebs", "snapshotID"), name)
		assert.Equal(t, "60Gi", path(data, "ebs", "volumeSize"), name)
		np := m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-"+name+"-nodepool")
		assert.Equal(t, "bottlerocket", path(np.Inputs, "spec", "template", "metadata", "labels", "lux-gpu-ci.luxfi.com/node-os"), name)
	}
	cold := m.get(t, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu-ci-cold-nodeclass")
	assert.Equal(t, []any{map[string]any{"alias": "al2023@v20260714"}}, path(cold.Inputs, "spec", "amiSelectorTerms"))
	assert.Len(t, path(cold.Inputs, "spec", "blockDeviceMappings"), 1)
}

// The nodes' roles pull from the account's own ECR repositories only through the stack's
// cache rules and the repositories imageRepositories names: one Deny, on both node roles,
// takes the rest back from AWS's PullOnly policy (which EKS's own images, in AWS's accounts,
// still need). Without a cache or extra repositories, the whole account is denied.
func TestNodesPullNothingElseFromTheAccount(t *testing.T) {
	scope := func(m *mocks) fakeaws.PolicyStatement {
		t.Helper()
		p := m.get(t, "aws:iam/policy:Policy", "node-image-pull")
		doc := policyOf(t, p, "policy")
		require.Len(t, doc.Statement, 1)
		st := doc.Statement[0]
		assert.Equal(t, "Deny", st.Effect)
		assert.ElementsMatch(t, []string{"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchImportUpstreamImage", "ecr:BatchCheckLayerAvailability"}, st.Action)
		var roles []any
		for _, a := range m.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment") {
			if strings.HasPrefix(a.Name, "node-image-pull-") {
				roles = append(roles, a.Inputs["role"])
			}
		}
		require.Len(t, roles, 2, "both node roles")
		assert.Contains(t, roles, "lux-gpu-ci-karpenter-node")
		return st
	}

	dev := scope(runDev(t, "imageRepositories", `["team-a/cuda-base", "team-b/*"]`))
	assert.Empty(t, dev.Resource)
	assert.ElementsMatch(t, []string{
		"arn:aws:ecr:us-west-2:" + testAccount + ":repository/lux-gpu-ci/ghcr/*",
		"arn:aws:ecr:us-west-2:" + testAccount + ":repository/lux-gpu-ci/docker-hub/*",
		"arn:aws:ecr:us-west-2:" + testAccount + ":repository/team-a/cuda-base",
		"arn:aws:ecr:us-west-2:" + testAccount + ":repository/team-b/*",
	}, dev.NotResource, "all but the cache's repositories and the ones named")
	assert.Equal(t, map[string]map[string][]string{"StringEquals": {"aws:ResourceAccount": {testAccount}}}, dev.Condition, "in this account only: EKS's own registries stay pullable")

	none := scope(runDev(t, "imageCache", "[]", "registryCredentials", testkit.Unset))
	assert.Equal(t, []string{"arn:aws:ecr:*:" + testAccount + ":repository/*"}, none.Resource, "no cache: none of the account's repositories")
	assert.Empty(t, none.NotResource)
	assert.Empty(t, none.Condition)
}

// An image the stack's own pools pull from the account's ECR, in a repository the Deny above
// covers, would fail at job time: the program refuses it before creating anything, naming
// imageRepositories. Listed, or in the stack's cache, it is fine.
func TestAnOwnImageTheNodesMayNotPullIsRefused(t *testing.T) {
	own := testAccount + ".dkr.ecr.us-west-2.amazonaws.com/"
	pools := func(runnerImage, warmImage string) string {
		return `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 1, "runnerScaleSetName": "lux-gpu-t4", "runnerLabels": ["self-hosted", "gpu", "r"],
		  "runnerImage": "` + runnerImage + `"},
		 {"name": "gpu-spot-container", "instanceTypes": ["g4dn.xlarge"], "gpuLimit": 1, "runnerScaleSetName": "lux-gpu-t4-container", "runnerLabels": ["self-hosted", "gpu", "c"], "jobForm": "container", "runnerGroup": "gpu-trusted", "trustedRepositoriesOnly": true,
		  "warm": {"windows": [{"days": "daily", "from": "08:00", "to": "09:00", "nodes": 1}], "images": ["` + warmImage + `"]}}]`
	}
	cases := []struct {
		name, runner, warm, repositories string
		refused                          []string
	}{
		{"a runner image in a repository not listed", own + "team-c/runner:2.330.0", "nvidia/cuda:12.8.1-devel-ubuntu24.04", `["team-a/*"]`, []string{own + "team-c/runner:2.330.0"}},
		{"a warm image in another region of the account", "ghcr.io/actions/actions-runner:2.330.0", testAccount + ".dkr.ecr.eu-west-1.amazonaws.com/team-a/cuda:12", `["team-a/*"]`, []string{testAccount + ".dkr.ecr.eu-west-1.amazonaws.com/team-a/cuda:12"}},
		{"both, none listed", own + "team-c/runner:2.330.0", own + "team-a/cuda:12", `[]`, []string{own + "team-a/cuda:12", own + "team-c/runner:2.330.0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMocks()
			err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "gpuPools", pools(c.runner, c.warm), "imageRepositories", c.repositories))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "imageRepositories:", "names the key")
			assert.Contains(t, err.Error(), "fix:")
			for _, image := range c.refused {
				assert.Contains(t, err.Error(), image)
			}
			assert.Empty(t, m.all("aws:ec2/vpc:Vpc"), "refused before anything is created")
		})
	}

	ok := runDev(t, "gpuPools", pools(own+"team-c/runner:2.330.0", own+"lux-gpu-ci/docker-hub/nvidia/cuda:12"), "imageRepositories", `["team-c/runner"]`)
	assert.NotEmpty(t, ok.all("aws:iam/policy:Policy"), "a listed repository, and the cache's own, are the nodes' to pull")
}
