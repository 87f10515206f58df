package stack_test

// The EKS cluster under mocks: pulumi-eks arguments, add-ons, the system node group, optional features, the kubeconfig.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/infra"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

func TestClusterDev(t *testing.T) {
	m := runDev(t)
	cl := m.one(t, "eks:index:Cluster")
	in := cl.Inputs
	assert.Equal(t, "lux-gpu-ci", in["name"], "explicit physical name, known at preview")
	assert.Equal(t, "1.35", in["version"])
	assert.Equal(t, true, in["skipDefaultNodeGroup"], "v2's default node group uses Launch Configurations")
	assert.Equal(t, "API", in["authenticationMode"])
	assert.Equal(t, true, in["useDefaultVpcCni"], "otherwise pulumi-eks v2 applies its own CNI with kubectl")
	assert.Equal(t, false, in["createOidcProvider"])
	assert.Equal(t, true, in["endpointPrivateAccess"])
	assert.Equal(t, []any{"0.0.0.0/0"}, in["publicAccessCidrs"])
	assert.Equal(t, "network-vpc_id", in["vpcId"])
	assert.Equal(t, []any{"network-private-usw2-az1_id", "network-private-usw2-az2_id"}, in["privateSubnetIds"])
	assert.Empty(t, in["accessEntries"])
	roles, sent := in["instanceRoles"]
	assert.True(t, sent, "instanceRoles is sent, as an empty list: unset, pulumi-eks creates an unused role")
	assert.Empty(t, roles, "a non-empty instanceRoles is refused with API authentication")

	mng := m.one(t, "eks:index:ManagedNodeGroup")
	assert.Equal(t, "AL2023_x86_64_STANDARD", mng.Inputs["amiType"])
	assert.Equal(t, in["version"], mng.Inputs["version"], "the system nodes follow the control plane's version (EKS refuses a control-plane bump while a node group lags)")
	assert.Equal(t, "1.35", mng.Inputs["version"])
	assert.Equal(t, []any{"t3.medium"}, mng.Inputs["instanceTypes"])
	assert.Equal(t, "ON_DEMAND", mng.Inputs["capacityType"])
	assert.Equal(t, map[string]any{"desiredSize": 1.0, "minSize": 1.0, "maxSize": 1.0}, mng.Inputs["scalingConfig"])
	assert.Equal(t, []any{"network-private-usw2-az1_id", "network-private-usw2-az2_id"}, mng.Inputs["subnetIds"])
	assert.NotContains(t, mng.Inputs, "kubeletExtraArgs", "pulumi-eks v2 renders AL2 user data for these")
	assert.NotContains(t, mng.Inputs, "bootstrapExtraArgs")
	assert.NotContains(t, mng.Inputs, "enableIMDSv2", "our launch template sets IMDSv2 (the two exclude each other)")
	assert.Equal(t, map[string]any{"id": "cluster-system_id", "version": "1"}, mng.Inputs["launchTemplate"])
	for _, dep := range []string{"aws:eks/addon:Addon::cluster-vpc-cni", "aws:eks/addon:Addon::cluster-kube-proxy", "aws:eks/addon:Addon::cluster-eks-pod-identity-agent"} {
		assert.Contains(t, mng.Deps(), dep, "nodes wait for the add-ons they need to become Ready")
	}
	for _, p := range []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly"} {
		assert.Contains(t, mng.Deps(), "aws:iam/rolePolicyAttachment:RolePolicyAttachment::cluster-system-node-"+p, "nodes wait for their role's policies")
	}

	addons := map[string]registered{}
	configured := map[string]any{}
	for _, a := range m.all("aws:eks/addon:Addon") {
		if v, ok := a.Inputs["configurationValues"]; ok {
			configured[a.Inputs["addonName"].(string)] = v
		}
		addons[a.Inputs["addonName"].(string)] = a
		assert.Equal(t, "lux-gpu-ci", a.Inputs["clusterName"])
		assert.Contains(t, a.Deps(), "eks:index:Cluster::cluster", "%s waits for the cluster", a.Name)
		assert.Equal(t, "OVERWRITE", a.Inputs["resolveConflictsOnCreate"], "takes over the self-managed add-on EKS installs")
		assert.Equal(t, "v-eks-default-"+a.Inputs["addonName"].(string)+"-k8s1.35", a.Inputs["addonVersion"], "EKS's default for the cluster's version")
	}
	assert.ElementsMatch(t, []string{"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"}, keys(addons))
	// The VPC CNI enforces NetworkPolicies (its add-on schema's enableNetworkPolicy, a string)
	// in strict mode (its aws-node env NETWORK_POLICY_ENFORCING_MODE); no other add-on is
	// configured.
	assert.Equal(t, map[string]any{"vpc-cni": `{"enableNetworkPolicy":"true","env":{"NETWORK_POLICY_ENFORCING_MODE":"strict"}}`}, configured)
	standard := runDev(t, "networkPolicyEnforcingMode", "standard")
	for _, a := range standard.all("aws:eks/addon:Addon") {
		if a.Inputs["addonName"] == "vpc-cni" {
			assert.Equal(t, `{"enableNetworkPolicy":"true","env":{"NETWORK_POLICY_ENFORCING_MODE":"standard"}}`, a.Inputs["configurationValues"], "for one up of a stack from before strict mode")
		}
	}
	assert.Contains(t, addons["coredns"].Deps(), "eks:index:ManagedNodeGroup::cluster-system", "CoreDNS only turns ACTIVE on a node")

	tag := m.one(t, "aws:ec2/tag:Tag")
	assert.Equal(t, testClusterSG, tag.Inputs["resourceId"], "the EKS-managed cluster security group")
	assert.Equal(t, "karpenter.sh/discovery", tag.Inputs["key"])
	assert.Equal(t, "lux-gpu-ci", tag.Inputs["value"])

	systemRole := m.get(t, "aws:iam/role:Role", "cluster-system-node-role")
	assert.Empty(t, assertTrust(t, systemRole, "ec2.amazonaws.com", "sts:AssumeRole").Condition)
}

func TestOptionalFeatures(t *testing.T) {
	admin := "arn:aws:iam::123456789012:role/platform-admins"
	m := runDev(t,
		"budget", `{"monthlyUsd": 250, "emails": ["platform@example.com"]}`,
		"createSpotServiceLinkedRole", "true",
		"adminPrincipals", `["`+admin+`"]`,
		"addonVersions", `{"coredns": "v1.12.4-eksbuild.1"}`,
		"publicAccessCidrs", `["203.0.113.0/24"]`,
		"azCount", "3",
	)

	b := m.one(t, "aws:budgets/budget:Budget")
	assert.Equal(t, "lux-gpu-ci-monthly", b.Inputs["name"])
	assert.Equal(t, "COST", b.Inputs["budgetType"])
	assert.Equal(t, "MONTHLY", b.Inputs["timeUnit"])
	assert.Equal(t, "250.00", b.Inputs["limitAmount"])
	assert.Equal(t, "USD", b.Inputs["limitUnit"])
	var alerts []string
	for _, n := range b.Inputs["notifications"].([]any) {
		n := n.(map[string]any)
		assert.Equal(t, []any{"platform@example.com"}, n["subscriberEmailAddresses"])
		assert.Equal(t, "PERCENTAGE", n["thresholdType"])
		alerts = append(alerts, n["notificationType"].(string)+">"+strings.TrimSuffix(strings.TrimSuffix(jsonNumber(n["threshold"]), ".0"), ".00"))
	}
	assert.ElementsMatch(t, []string{"ACTUAL>80", "FORECASTED>100"}, alerts)

	slr := m.one(t, "aws:iam/serviceLinkedRole:ServiceLinkedRole")
	assert.Equal(t, "spot.amazonaws.com", slr.Inputs["awsServiceName"])
	assert.True(t, slr.Raw.RegisterRPC.GetRetainOnDelete(), "the account-wide spot role survives destroy")

	cl := m.one(t, "eks:index:Cluster")
	assert.Equal(t, []any{"203.0.113.0/24"}, cl.Inputs["publicAccessCidrs"])
	entries := cl.Inputs["accessEntries"].(map[string]any)
	require.Len(t, entries, 1)
	e := entries["admin-0"].(map[string]any)
	assert.Equal(t, admin, e["principalArn"])
	policy := e["accessPolicies"].(map[string]any)["cluster-admin"].(map[string]any)
	assert.Equal(t, "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", policy["policyArn"])
	assert.Equal(t, map[string]any{"type": "cluster"}, policy["accessScope"])

	// The deploy identity's roles: deploy.yml's is admin, preview.yml's reads, and no Secret
	// (the preview job runs a pull request's code).
	deploy, preview := "arn:aws:iam::123456789012:role/lux-gpu-ci-deploy", "arn:aws:iam::123456789012:role/lux-gpu-ci-preview-luxfi-lux-gpu-ci"
	withIdentity := runDev(t, "adminPrincipals", `["`+admin+`"]`, "deployRoleArn", deploy, "previewRoleArn", preview)
	entries = withIdentity.one(t, "eks:index:Cluster").Inputs["accessEntries"].(map[string]any)
	require.Len(t, entries, 3)
	policyOf := func(key, assoc string) (string, any) {
		e := entries[key].(map[string]any)
		p := e["accessPolicies"].(map[string]any)[assoc].(map[string]any)
		return e["principalArn"].(string) + " " + p["policyArn"].(string), p["accessScope"]
	}
	got, scope := policyOf("deploy", "cluster-admin")
	assert.Equal(t, deploy+" arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", got)
	assert.Equal(t, map[string]any{"type": "cluster"}, scope)
	got, scope = policyOf("preview", "view")
	assert.Equal(t, preview+" arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy", got)
	assert.Equal(t, map[string]any{"type": "cluster"}, scope)

	var coredns []any
	for _, a := range m.all("aws:eks/addon:Addon") {
		if a.Inputs["addonName"] == "coredns" {
			coredns = append(coredns, a.Inputs["addonVersion"])
		}
	}
	assert.Equal(t, []any{"v1.12.4-eksbuild.1"}, coredns, "one CoreDNS add-on, at the pinned version")
	assert.Len(t, m.all("aws:ec2/subnet:Subnet"), 6)
}

// The kubeconfig is a secret, and passes --region so it works without AWS_REGION set.
func TestKubeconfigIsSecretAndRegional(t *testing.T) {
	exec := kubeconfigExec(t, testkit.StackConfig(t, "dev"))
	assert.Equal(t, "aws", exec.Command)
	assert.Equal(t, []string{"eks", "get-token", "--cluster-name", "lux-gpu-ci", "--region", "us-west-2", "--output", "json"}, exec.Args)
}

// With credentials from stack config (a named profile, an assumed role), the kubeconfig
// mints its token as the same identity the AWS provider used: the one that created the
// cluster, and so the one EKS made its admin.
func TestKubeconfigAuthenticatesAsTheStacksIdentity(t *testing.T) {
	cfg := testkit.With(testkit.StackConfig(t, "dev"),
		"aws:profile", "platform-ci",
		"aws:assumeRole", `{"roleArn": "arn:aws:iam::123456789012:role/deployer", "sessionName": "pulumi"}`)
	exec := kubeconfigExec(t, cfg)
	assert.Equal(t, []string{"eks", "get-token", "--cluster-name", "lux-gpu-ci", "--region", "us-west-2",
		"--profile", "platform-ci", "--role-arn", "arn:aws:iam::123456789012:role/deployer", "--output", "json"}, exec.Args)

	m := newMocks()
	err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "aws:assumeRole", `{"roleArn": "deployer"}`))
	assert.ErrorContains(t, err, `aws:assumeRole: roleArn "deployer" is not an IAM role ARN`)
	assert.Empty(t, names(m.programResources()))
}

// kubeconfigExec runs the AWS layer with cfg and returns the kubeconfig's exec credential
// plugin, checking the kubeconfig is a secret and points at the cluster.
func kubeconfigExec(t *testing.T, cfg map[string]string) *clientcmdapi.ExecConfig {
	t.Helper()
	var exec *clientcmdapi.ExecConfig
	m := newMocks()
	err := m.Run(func(ctx *pulumi.Context) error {
		cfg, err := config.Parse(ctx.Stack(), ctx.GetConfig, ctx.IsConfigSecret)
		if err != nil {
			return err
		}
		out, err := infra.New(ctx, cfg, nil)
		if err != nil {
			return err
		}
		res, err := internals.UnsafeAwaitOutput(ctx.Context(), out.Kubeconfig)
		if err != nil {
			return err
		}
		assert.True(t, res.Known)
		assert.True(t, res.Secret, "kubeconfig must be a secret")
		var kc clientcmdapi.Config
		require.NoError(t, json.Unmarshal([]byte(res.Value.(string)), &kc))
		require.Len(t, kc.Clusters, 1)
		assert.Equal(t, testEndpoint, kc.Clusters[0].Cluster.Server)
		assert.Contains(t, string(kc.Clusters[0].Cluster.CertificateAuthorityData), "BEGIN CERTIFICATE")
		require.Len(t, kc.AuthInfos, 1)
		exec = kc.AuthInfos[0].AuthInfo.Exec
		return nil
	}, cfg, testkit.SecretKeys)
	require.NoError(t, err)
	require.NotNil(t, exec)
	return exec
}

// The stack's tags reach the system nodes' instances and volumes, through the node group's
// launch template (a managed node group's default template tags neither).
func TestSystemNodesCarryTheStackTags(t *testing.T) {
	m := runDev(t)
	lt := m.one(t, "aws:ec2/launchTemplate:LaunchTemplate")
	specs := lt.Inputs["tagSpecifications"].([]any)
	require.Len(t, specs, 2)
	var kinds []string
	for _, s := range specs {
		s := s.(map[string]any)
		kinds = append(kinds, s["resourceType"].(string))
		assert.Equal(t, map[string]any{"env": "dev", "team": "platform", "Name": "lux-gpu-ci-system"}, s["tags"], s["resourceType"])
	}
	assert.ElementsMatch(t, []string{"instance", "volume"}, kinds)
}

// No pod off the host network reaches IMDS on any node of the stack: every launch template
// the program declares (the system nodes') and every EC2NodeClass (Karpenter makes the GPU
// nodes' templates from it) asks for IMDSv2 tokens with a hop limit of 1, in every stack
// file. The numbers are literal here on purpose: the test holds the program to AWS's meaning
// of them, not to a constant it could change.
func TestEveryNodeKeepsIMDSToTheHost(t *testing.T) {
	for _, name := range repoStacks(t) {
		t.Run(name, func(t *testing.T) {
			m := runRepoStack(t, name)
			templates := m.all("aws:ec2/launchTemplate:LaunchTemplate")
			require.NotEmpty(t, templates, "the system nodes' launch template")
			for _, lt := range templates {
				assert.Equal(t, map[string]any{"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1.0},
					lt.Inputs["metadataOptions"], "launch template %s", lt.Name)
			}
			classes := m.all("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
			require.NotEmpty(t, classes, "a GPU pool's EC2NodeClass")
			for _, nc := range classes {
				md := path(nc.Inputs, "spec", "metadataOptions")
				assert.Equal(t, 1.0, path(md, "httpPutResponseHopLimit"), "EC2NodeClass %s", nc.Name)
				assert.Equal(t, "required", path(md, "httpTokens"), "EC2NodeClass %s", nc.Name)
			}
		})
	}
}
