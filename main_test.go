package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	"github.com/pulumi/pulumi/sdk/v3/go/common/diag/colors"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/infra"
	"github.com/luxfi/lux-gpu-ci/internal/fakeaws"
)

// runDev runs the program with the dev stack's real configuration plus overrides.
func runDev(t *testing.T, overrides ...string) *mocks {
	t.Helper()
	m := newMocks()
	require.NoError(t, m.run(with(stackConfig(t, "dev"), overrides...)))
	return m
}

// TestDevStackResourceCounts pins how many of each resource the dev stack declares.
func TestDevStackResourceCounts(t *testing.T) {
	m := runDev(t)
	want := map[string]int{
		"lux-gpu-ci:infra:Network":                              1,
		"lux-gpu-ci:infra:Cluster":                              1,
		"lux-gpu-ci:infra:KarpenterAWS":                         1,
		"aws:ec2/vpc:Vpc":                                       1,
		"aws:ec2/internetGateway:InternetGateway":               1,
		"aws:ec2/subnet:Subnet":                                 4,
		"aws:ec2/routeTable:RouteTable":                         2,
		"aws:ec2/routeTableAssociation:RouteTableAssociation":   4,
		"aws:ec2/eip:Eip":                                       1,
		"aws:ec2/natGateway:NatGateway":                         1,
		"eks:index:Cluster":                                     1,
		"eks:index:ManagedNodeGroup":                            1,
		"aws:eks/addon:Addon":                                   4,
		"aws:ec2/tag:Tag":                                       1,
		"aws:sqs/queue:Queue":                                   1,
		"aws:sqs/queuePolicy:QueuePolicy":                       1,
		"aws:cloudwatch/eventRule:EventRule":                    5,
		"aws:cloudwatch/eventTarget:EventTarget":                5,
		"aws:iam/role:Role":                                     3, // system nodes, Karpenter nodes, Karpenter controller
		"aws:iam/policy:Policy":                                 6,
		"aws:iam/rolePolicyAttachment:RolePolicyAttachment":     4 + 4 + 6,
		"aws:eks/accessEntry:AccessEntry":                       1,
		"aws:eks/podIdentityAssociation:PodIdentityAssociation": 1,
		"aws:iam/serviceLinkedRole:ServiceLinkedRole":           0,
		"lux-gpu-ci:infra:Budget":                               0,
		"aws:budgets/budget:Budget":                             0,

		"lux-gpu-ci:k8s:GPUCI":                         1,
		"lux-gpu-ci:k8s:Karpenter":                     1,
		"lux-gpu-ci:k8s:DevicePlugin":                  1,
		"lux-gpu-ci:k8s:GPUPool":                       1,
		"lux-gpu-ci:k8s:Runners":                       1,
		"pulumi:providers:kubernetes":                  1,
		"kubernetes:helm.sh/v3:Release":                5, // karpenter-crd, karpenter, nvidia-device-plugin, arc, lux-gpu-t4
		"kubernetes:core/v1:Namespace":                 3, // nvidia-device-plugin, arc-systems, arc-runners
		"kubernetes:core/v1:Secret":                    1,
		"kubernetes:karpenter.sh/v1:NodePool":          1,
		"kubernetes:karpenter.k8s.aws/v1:EC2NodeClass": 1,
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

func TestNetworkDev(t *testing.T) {
	m := runDev(t)
	vpc := m.one(t, "aws:ec2/vpc:Vpc")
	assert.Equal(t, "10.0.0.0/16", vpc.Inputs["cidrBlock"])
	assert.Equal(t, true, vpc.Inputs["enableDnsHostnames"])
	assert.Equal(t, true, vpc.Inputs["enableDnsSupport"])

	var public, private []registered
	for _, s := range m.all("aws:ec2/subnet:Subnet") {
		if strings.Contains(s.Name, "public") {
			public = append(public, s)
		} else {
			private = append(private, s)
		}
	}
	require.Len(t, public, 2)
	require.Len(t, private, 2)
	// The first two AZs by name, whatever order the region lists them in.
	for i, az := range []string{"us-west-2a", "us-west-2b"} {
		assert.Equal(t, az, public[i].Inputs["availabilityZone"])
		assert.Equal(t, az, private[i].Inputs["availabilityZone"])
	}
	assert.Equal(t, []any{"10.0.0.0/18", "10.0.64.0/18"}, []any{private[0].Inputs["cidrBlock"], private[1].Inputs["cidrBlock"]})
	assert.Equal(t, []any{"10.0.192.0/21", "10.0.200.0/21"}, []any{public[0].Inputs["cidrBlock"], public[1].Inputs["cidrBlock"]})
	for _, s := range private {
		tags := s.Inputs["tags"].(map[string]any)
		assert.Equal(t, "lux-gpu-ci", tags["karpenter.sh/discovery"], s.Name)
		assert.Equal(t, "1", tags["kubernetes.io/role/internal-elb"], s.Name)
		assert.Equal(t, "shared", tags["kubernetes.io/cluster/lux-gpu-ci"], s.Name)
		assert.Equal(t, "dev", tags["env"], "common tags reach %s", s.Name)
	}
	for _, s := range public {
		tags := s.Inputs["tags"].(map[string]any)
		assert.NotContains(t, tags, "karpenter.sh/discovery", "nodes must not land in public subnets when there is a NAT")
		assert.Equal(t, "1", tags["kubernetes.io/role/elb"], s.Name)
		assert.Equal(t, false, s.Inputs["mapPublicIpOnLaunch"], s.Name)
	}

	nat := m.one(t, "aws:ec2/natGateway:NatGateway")
	assert.Equal(t, "network-public-0_id", nat.Inputs["subnetId"], "the NAT lives in the first public subnet")
	assert.Contains(t, nat.Deps(), "aws:ec2/internetGateway:InternetGateway::network-igw")
	privateRT := m.get(t, "aws:ec2/routeTable:RouteTable", "network-private-rt")
	routes := privateRT.Inputs["routes"].([]any)
	require.Len(t, routes, 1)
	assert.Equal(t, "0.0.0.0/0", routes[0].(map[string]any)["cidrBlock"])
	assert.Equal(t, "network-nat_id", routes[0].(map[string]any)["natGatewayId"])
}

func TestLeanProfileHasNoNATAndPublicNodes(t *testing.T) {
	m := runDev(t, "natMode", "none", "azCount", "3")
	assert.Empty(t, m.all("aws:ec2/natGateway:NatGateway"))
	assert.Empty(t, m.all("aws:ec2/eip:Eip"))
	subnets := m.all("aws:ec2/subnet:Subnet")
	require.Len(t, subnets, 3)
	for _, s := range subnets {
		assert.Contains(t, s.Name, "public")
		assert.Equal(t, true, s.Inputs["mapPublicIpOnLaunch"], s.Name)
		assert.Equal(t, "lux-gpu-ci", s.Inputs["tags"].(map[string]any)["karpenter.sh/discovery"], s.Name)
	}
	mng := m.one(t, "eks:index:ManagedNodeGroup")
	assert.Equal(t, []any{"network-public-0_id", "network-public-1_id", "network-public-2_id"}, mng.Inputs["subnetIds"])
	cl := m.one(t, "eks:index:Cluster")
	assert.NotContains(t, cl.Inputs, "privateSubnetIds")
}

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
	assert.Equal(t, []any{"network-private-0_id", "network-private-1_id"}, in["privateSubnetIds"])
	assert.Empty(t, in["accessEntries"])
	roles, sent := in["instanceRoles"]
	assert.True(t, sent, "instanceRoles is sent, as an empty list: unset, pulumi-eks creates an unused role")
	assert.Empty(t, roles, "a non-empty instanceRoles is refused with API authentication")

	mng := m.one(t, "eks:index:ManagedNodeGroup")
	assert.Equal(t, "AL2023_x86_64_STANDARD", mng.Inputs["amiType"])
	assert.Equal(t, []any{"t3.medium"}, mng.Inputs["instanceTypes"])
	assert.Equal(t, "ON_DEMAND", mng.Inputs["capacityType"])
	assert.Equal(t, map[string]any{"desiredSize": 1.0, "minSize": 1.0, "maxSize": 1.0}, mng.Inputs["scalingConfig"])
	assert.Equal(t, []any{"network-private-0_id", "network-private-1_id"}, mng.Inputs["subnetIds"])
	assert.NotContains(t, mng.Inputs, "kubeletExtraArgs", "pulumi-eks v2 renders AL2 user data for these")
	assert.NotContains(t, mng.Inputs, "bootstrapExtraArgs")
	assert.Equal(t, true, mng.Inputs["enableIMDSv2"])
	for _, dep := range []string{"aws:eks/addon:Addon::cluster-vpc-cni", "aws:eks/addon:Addon::cluster-kube-proxy", "aws:eks/addon:Addon::cluster-eks-pod-identity-agent"} {
		assert.Contains(t, mng.Deps(), dep, "nodes wait for the add-ons they need to become Ready")
	}
	for _, p := range []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly"} {
		assert.Contains(t, mng.Deps(), "aws:iam/rolePolicyAttachment:RolePolicyAttachment::cluster-system-node-"+p, "nodes wait for their role's policies")
	}

	addons := map[string]registered{}
	for _, a := range m.all("aws:eks/addon:Addon") {
		addons[a.Inputs["addonName"].(string)] = a
		assert.Equal(t, "lux-gpu-ci", a.Inputs["clusterName"])
		assert.Contains(t, a.Deps(), "eks:index:Cluster::cluster", "%s waits for the cluster", a.Name)
		assert.Equal(t, "OVERWRITE", a.Inputs["resolveConflictsOnCreate"], "takes over the self-managed add-on EKS installs")
		assert.Equal(t, "v-eks-default-"+a.Inputs["addonName"].(string), a.Inputs["addonVersion"])
	}
	assert.ElementsMatch(t, []string{"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"}, keys(addons))
	assert.Contains(t, addons["coredns"].Deps(), "eks:index:ManagedNodeGroup::cluster-system", "CoreDNS only turns ACTIVE on a node")

	tag := m.one(t, "aws:ec2/tag:Tag")
	assert.Equal(t, testClusterSG, tag.Inputs["resourceId"], "the EKS-managed cluster security group")
	assert.Equal(t, "karpenter.sh/discovery", tag.Inputs["key"])
	assert.Equal(t, "lux-gpu-ci", tag.Inputs["value"])

	systemRole := m.get(t, "aws:iam/role:Role", "cluster-system-node-role")
	assertTrust(t, systemRole, "ec2.amazonaws.com", "sts:AssumeRole")
}

func TestKarpenterAWSDev(t *testing.T) {
	m := runDev(t)

	q := m.one(t, "aws:sqs/queue:Queue")
	assert.Equal(t, "lux-gpu-ci", q.Inputs["name"], "upstream names the queue after the cluster")
	assert.Equal(t, 300.0, q.Inputs["messageRetentionSeconds"])
	assert.Equal(t, true, q.Inputs["sqsManagedSseEnabled"])
	queueArn := "arn:aws:sqs:us-west-2:" + testAccount + ":lux-gpu-ci"

	qp := policyOf(t, m.one(t, "aws:sqs/queuePolicy:QueuePolicy"), "policy")
	assert.Equal(t, "EC2InterruptionPolicy", qp.ID)
	require.Len(t, qp.Statement, 2)
	assert.Equal(t, "Allow", qp.Statement[0].Effect)
	assert.Equal(t, []string{"sqs:SendMessage"}, qp.Statement[0].Action)
	assert.Equal(t, []string{queueArn}, qp.Statement[0].Resource)
	assert.Equal(t, map[string]any{"Service": []any{"events.amazonaws.com", "sqs.amazonaws.com"}}, qp.Statement[0].Principal)
	assert.Equal(t, "DenyHTTP", qp.Statement[1].Sid)
	assert.Equal(t, "Deny", qp.Statement[1].Effect)
	assert.Equal(t, []string{"sqs:*"}, qp.Statement[1].Action)
	assert.Equal(t, "*", qp.Statement[1].Principal)
	assert.Equal(t, map[string]map[string][]string{"Bool": {"aws:SecureTransport": {"false"}}}, qp.Statement[1].Condition)

	// The five upstream EventBridge rules, each with one target on the queue.
	var patterns []string
	for _, r := range m.all("aws:cloudwatch/eventRule:EventRule") {
		var p map[string][]string
		require.NoError(t, json.Unmarshal([]byte(r.Inputs["eventPattern"].(string)), &p))
		assert.Len(t, p, 2, "pattern %s has only source and detail-type", r.Name)
		patterns = append(patterns, p["source"][0]+" / "+p["detail-type"][0])
	}
	assert.ElementsMatch(t, []string{
		"aws.health / AWS Health Event",
		"aws.ec2 / EC2 Spot Instance Interruption Warning",
		"aws.ec2 / EC2 Instance Rebalance Recommendation",
		"aws.ec2 / EC2 Instance State-change Notification",
		"aws.ec2 / EC2 Capacity Reservation Instance Interruption Warning",
	}, patterns)
	for _, tg := range m.all("aws:cloudwatch/eventTarget:EventTarget") {
		assert.Equal(t, "KarpenterInterruptionQueueTarget", tg.Inputs["targetId"])
		assert.Equal(t, queueArn, tg.Inputs["arn"])
		assert.Equal(t, tg.Name, tg.Inputs["rule"], "target %s points at its own rule", tg.Name)
	}

	controller := m.get(t, "aws:iam/role:Role", "karpenter-controller-role")
	assert.Equal(t, "KarpenterController-lux-gpu-ci", controller.Inputs["name"])
	assertTrust(t, controller, "pods.eks.amazonaws.com", "sts:AssumeRole", "sts:TagSession")
	node := m.get(t, "aws:iam/role:Role", "karpenter-node-role")
	assert.Equal(t, "KarpenterNodeRole-lux-gpu-ci", node.Inputs["name"])
	assertTrust(t, node, "ec2.amazonaws.com", "sts:AssumeRole")
	nodeArn := "arn:aws:iam::" + testAccount + ":role/KarpenterNodeRole-lux-gpu-ci"

	var nodePolicies []string
	for _, a := range m.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment") {
		if a.Inputs["role"] == "KarpenterNodeRole-lux-gpu-ci" {
			nodePolicies = append(nodePolicies, a.Inputs["policyArn"].(string))
		}
	}
	assert.ElementsMatch(t, []string{
		"arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
		"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
		"arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
		"arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
	}, nodePolicies)

	entry := m.one(t, "aws:eks/accessEntry:AccessEntry")
	assert.Equal(t, "EC2_LINUX", entry.Inputs["type"])
	assert.Equal(t, nodeArn, entry.Inputs["principalArn"])
	assert.Equal(t, "lux-gpu-ci", entry.Inputs["clusterName"])
	assert.Contains(t, entry.Deps(), "eks:index:Cluster::cluster")

	pia := m.one(t, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
	assert.Equal(t, "kube-system", pia.Inputs["namespace"])
	assert.Equal(t, "karpenter", pia.Inputs["serviceAccount"])
	assert.Equal(t, "arn:aws:iam::"+testAccount+":role/KarpenterController-lux-gpu-ci", pia.Inputs["roleArn"])
	assert.Contains(t, pia.Deps(), "aws:eks/addon:Addon::cluster-eks-pod-identity-agent")

	// The six controller policies, all attached to the controller role.
	attached := map[string]bool{}
	for _, a := range m.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment") {
		if a.Inputs["role"] == "KarpenterController-lux-gpu-ci" {
			attached[a.Inputs["policyArn"].(string)] = true
		}
	}
	assert.Len(t, attached, 6)
	for _, p := range m.all("aws:iam/policy:Policy") {
		assert.True(t, attached["arn:aws:iam::"+testAccount+":policy/"+p.Inputs["name"].(string)], "%s is attached to the controller role", p.Inputs["name"])
	}
}

// upstreamActions is the complete action list of Karpenter v1.14's controller policies
// (../shared/reference/upstream.md §1.2), written out by hand.
var upstreamActions = []string{
	"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:CreateTags", "ec2:TerminateInstances",
	"ec2:DeleteLaunchTemplate", "ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances",
	"ec2:DescribeInstanceStatus", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes",
	"ec2:DescribeLaunchTemplates", "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups",
	"ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
	"iam:PassRole", "iam:CreateInstanceProfile", "iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile",
	"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile", "iam:ListInstanceProfiles", "iam:GetInstanceProfile",
	"eks:DescribeCluster", "sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage", "ssm:GetParameter",
	"pricing:GetProducts", "arc-zonal-shift:GetManagedResource",
}

func TestKarpenterControllerPoliciesMatchUpstream(t *testing.T) {
	require.Len(t, upstreamActions, 32)
	m := runDev(t)

	raw, err := os.ReadFile("testdata/karpenter-controller-policies.json")
	require.NoError(t, err)
	subst := strings.NewReplacer(
		"${P}", "aws", "${R}", "us-west-2", "${A}", testAccount, "${C}", "lux-gpu-ci",
		"${NodeRoleArn}", "arn:aws:iam::"+testAccount+":role/KarpenterNodeRole-lux-gpu-ci",
		"${QueueArn}", "arn:aws:sqs:us-west-2:"+testAccount+":lux-gpu-ci",
	)
	var reference map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(subst.Replace(string(raw))), &reference))
	delete(reference, "_source")

	var actions []string
	got := map[string]bool{}
	for _, p := range m.all("aws:iam/policy:Policy") {
		name := strings.TrimSuffix(p.Inputs["name"].(string), "-lux-gpu-ci")
		got[name] = true
		want, ok := reference[name]
		if !assert.True(t, ok, "policy %s is not in upstream's template", name) {
			continue
		}
		var wantStmts []policyStatement
		require.NoError(t, json.Unmarshal(want, &wantStmts))
		doc := policyOf(t, p, "policy")
		assert.Equal(t, normalise(wantStmts), normalise(doc.Statement), "policy %s", name)
		for _, s := range doc.Statement {
			actions = append(actions, s.Action...)
		}
	}
	for name := range reference {
		assert.True(t, got[name], "upstream policy %s is missing", name)
	}
	assert.ElementsMatch(t, upstreamActions, unique(actions))
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

	for _, a := range m.all("aws:eks/addon:Addon") {
		if a.Inputs["addonName"] == "coredns" {
			assert.Equal(t, "v1.12.4-eksbuild.1", a.Inputs["addonVersion"], "a pinned version wins")
		}
	}
	assert.Len(t, m.all("aws:ec2/subnet:Subnet"), 6)
}

// The kubeconfig is a secret, and passes --region so it works without AWS_REGION set.
func TestKubeconfigIsSecretAndRegional(t *testing.T) {
	m := newMocks()
	err := m.Run(func(ctx *pulumi.Context) error {
		cfg, err := config.Load(ctx)
		if err != nil {
			return err
		}
		out, err := infra.New(ctx, cfg)
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
		exec := kc.AuthInfos[0].AuthInfo.Exec
		require.NotNil(t, exec)
		assert.Equal(t, "aws", exec.Command)
		assert.Equal(t, []string{"eks", "get-token", "--cluster-name", "lux-gpu-ci", "--region", "us-west-2", "--output", "json"}, exec.Args)
		return nil
	}, stackConfig(t, "dev"), secretKeys)
	require.NoError(t, err)
}

// Bad configuration fails with an error naming the key and registers nothing.
func TestInvalidConfigNamesKeyAndCreatesNothing(t *testing.T) {
	cases := []struct {
		name, wantKey string
		kv            []string
	}{
		{"region missing", "aws:region", []string{"aws:region", unset}},
		{"region malformed", "aws:region", []string{"aws:region", "Oregon"}},
		{"cluster name with capitals", "lux-gpu-ci:clusterName", []string{"clusterName", "GPU_CI"}},
		{"cluster name too long", "lux-gpu-ci:clusterName", []string{"clusterName", strings.Repeat("a", 41)}},
		{"kubernetes version not minor", "lux-gpu-ci:kubernetesVersion", []string{"kubernetesVersion", "v1.35.2"}},
		{"kubernetes version too old", "lux-gpu-ci:kubernetesVersion", []string{"kubernetesVersion", "1.29"}},
		{"kubernetes version too new", "lux-gpu-ci:kubernetesVersion", []string{"kubernetesVersion", "1.37"}},
		{"vpc cidr garbage", "lux-gpu-ci:vpcCidr", []string{"vpcCidr", "10.0.0.0"}},
		{"vpc cidr public range", "lux-gpu-ci:vpcCidr", []string{"vpcCidr", "8.8.0.0/16"}},
		{"vpc cidr too small", "lux-gpu-ci:vpcCidr", []string{"vpcCidr", "10.0.0.0/24"}},
		{"vpc cidr host bits", "lux-gpu-ci:vpcCidr", []string{"vpcCidr", "10.0.0.1/16"}},
		{"one AZ", "lux-gpu-ci:azCount", []string{"azCount", "1"}},
		{"AZ count not a number", "lux-gpu-ci:azCount", []string{"azCount", "two"}},
		{"unknown NAT mode", "lux-gpu-ci:natMode", []string{"natMode", "multi"}},
		{"instance type malformed", "lux-gpu-ci:systemNodeInstanceType", []string{"systemNodeInstanceType", "t3medium"}},
		{"no system nodes", "lux-gpu-ci:systemNodeCount", []string{"systemNodeCount", "0"}},
		{"public access empty", "lux-gpu-ci:publicAccessCidrs", []string{"publicAccessCidrs", `[]`}},
		{"public access not a CIDR", "lux-gpu-ci:publicAccessCidrs", []string{"publicAccessCidrs", `["203.0.113.7"]`}},
		{"public access not a list", "lux-gpu-ci:publicAccessCidrs", []string{"publicAccessCidrs", `"0.0.0.0/0"`}},
		{"admin not an ARN", "lux-gpu-ci:adminPrincipals", []string{"adminPrincipals", `["alice"]`}},
		{"admin listed twice", "lux-gpu-ci:adminPrincipals", []string{"adminPrincipals", `["arn:aws:iam::123456789012:role/a","arn:aws:iam::123456789012:role/a"]`}},
		{"reserved tag", "lux-gpu-ci:tags", []string{"tags", `{"aws:owner": "x"}`}},
		{"tag we own", "lux-gpu-ci:tags", []string{"tags", `{"karpenter.sh/discovery": "x"}`}},
		{"unknown add-on", "lux-gpu-ci:addonVersions", []string{"addonVersions", `{"ebs-csi": "v1.0.0-eksbuild.1"}`}},
		{"budget typo", "lux-gpu-ci:budget", []string{"budget", `{"monthly_usd": 100, "emails": ["a@example.com"]}`}},
		{"budget zero", "lux-gpu-ci:budget", []string{"budget", `{"monthlyUsd": 0, "emails": ["a@example.com"]}`}},
		{"budget without e-mail", "lux-gpu-ci:budget", []string{"budget", `{"monthlyUsd": 100, "emails": []}`}},
		{"spot role flag not bool", "lux-gpu-ci:createSpotServiceLinkedRole", []string{"createSpotServiceLinkedRole", "yes please"}},
		{"helm chart we do not install", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"cert-manager": {"chart": "oci://registry.example.com/cert-manager", "version": "1.0.0"}}`}},
		{"helm chart from a registry, unpinned", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"karpenter": {"chart": "oci://registry.example.com/karpenter"}}`}},
		{"helm chart in a relative directory", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"karpenter": {"chart": "charts/karpenter"}}`}},
		{"helm chart with a misspelt field", "lux-gpu-ci:helmCharts", []string{"helmCharts", `{"karpenter": {"chart": "/srv/karpenter", "versoin": "1"}}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMocks()
			err := m.run(with(stackConfig(t, "dev"), tc.kv...))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantKey+":", "the error names the key")
			assert.Contains(t, err.Error(), "fix:", "the error says how to fix it")
			assert.Empty(t, names(m.programResources()), "nothing may be registered")
		})
	}
}

// All problems are reported at once.
func TestInvalidConfigReportsEveryProblem(t *testing.T) {
	m := newMocks()
	err := m.run(with(stackConfig(t, "dev"), "azCount", "9", "natMode", "both", "systemNodeCount", "0"))
	require.Error(t, err)
	for _, key := range []string{"azCount", "natMode", "systemNodeCount"} {
		assert.Contains(t, err.Error(), "lux-gpu-ci:"+key+":")
	}
}

func TestTooFewAvailabilityZonesIsAConfigError(t *testing.T) {
	m := newMocks()
	m.azs = []fakeaws.AZ{{Name: "us-west-2a", ID: "usw2-az1"}, {Name: "us-west-2b", ID: "usw2-az2"}}
	err := m.run(with(stackConfig(t, "dev"), "azCount", "3"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:azCount")
	assert.Empty(t, names(m.programResources()))
}

// Pulumi.yaml declares exactly the keys config.Defaults knows, with the same defaults.
func TestPulumiYamlDeclaresTheConfig(t *testing.T) {
	b, err := os.ReadFile("Pulumi.yaml")
	require.NoError(t, err)
	var project struct {
		Name   string `yaml:"name"`
		Config map[string]struct {
			Type        string `yaml:"type"`
			Default     any    `yaml:"default"`
			Secret      bool   `yaml:"secret"`
			Description string `yaml:"description"`
		} `yaml:"config"`
	}
	require.NoError(t, yaml.Unmarshal(b, &project))
	assert.Equal(t, config.Project, project.Name)
	for key, def := range config.Defaults {
		decl, ok := project.Config[key]
		if !assert.True(t, ok, "Pulumi.yaml does not declare %s", key) {
			continue
		}
		assert.Equal(t, jsonOf(t, def), jsonOf(t, decl.Default), "default of %s", key)
	}
	// The engine requires every key Pulumi.yaml declares without a default, before the
	// program runs: only the keys config.Required names may lack one.
	for key, decl := range project.Config {
		_, ok := config.Defaults[key]
		assert.True(t, ok || slices.Contains(config.Required, key), "Pulumi.yaml declares %s, which config does not read", key)
		if slices.Contains(config.Required, key) {
			assert.Nil(t, decl.Default, "%s is required: no default", key)
		} else {
			assert.NotNil(t, decl.Default, "%s is optional, so Pulumi.yaml must give it a default, or the engine refuses every stack that leaves it unset", key)
		}
	}
	// The engine checks that a key declared secret holds an encrypted value, its plain
	// default included: a secret key with a default breaks every stack that leaves it unset.
	// So the optional credentials are not declared secret; the program refuses them in plain
	// text (TestPlainTextCredentialIsRefused).
	for key, decl := range project.Config {
		assert.False(t, decl.Secret && decl.Default != nil, "%s is declared secret with a default, which the engine refuses", key)
	}
	for _, key := range []string{config.KeyGitHubToken, config.KeyGitHubAppPrivateKey} {
		assert.Contains(t, project.Config[key].Description, "--secret", "pulumi config describes how to set %s", key)
	}
}

func TestSubnetLayoutStaysInsideTheVPC(t *testing.T) {
	for _, vpc := range []string{"10.0.0.0/16", "172.20.0.0/18", "192.168.16.0/20"} {
		private, public, err := infra.SubnetCIDRs(vpc, 3)
		require.NoError(t, err)
		all := append(append([]string{}, private...), public...)
		assert.Len(t, unique(all), 6, "subnets of %s are distinct", vpc)
		for _, s := range all {
			assert.True(t, within(t, s, vpc), "%s lies in %s", s, vpc)
		}
		for i, a := range all {
			for _, b := range all[i+1:] {
				assert.False(t, overlaps(t, a, b), "%s overlaps %s", a, b)
			}
		}
	}
}

type (
	policyStatement = fakeaws.PolicyStatement
	policyDoc       = fakeaws.PolicyDocument
)

func policyOf(t *testing.T, r registered, field string) policyDoc {
	t.Helper()
	var d policyDoc
	require.NoError(t, json.Unmarshal([]byte(r.Inputs[field].(string)), &d), "%s.%s", r.Key(), field)
	return d
}

// normalise sorts every list so statements compare as upstream's sets.
func normalise(ss []policyStatement) []policyStatement {
	out := slices.Clone(ss)
	for i := range out {
		out[i].Action = sorted(out[i].Action)
		out[i].Resource = sorted(out[i].Resource)
		for _, vars := range out[i].Condition {
			for k, v := range vars {
				vars[k] = sorted(v)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sid < out[j].Sid })
	return out
}

func assertTrust(t *testing.T, role registered, service string, actions ...string) {
	t.Helper()
	doc := policyOf(t, role, "assumeRolePolicy")
	require.Len(t, doc.Statement, 1, "%s trust", role.Name)
	s := doc.Statement[0]
	assert.Equal(t, "Allow", s.Effect)
	assert.ElementsMatch(t, actions, s.Action, "%s trust actions", role.Name)
	assert.Equal(t, map[string]any{"Service": []any{service}}, s.Principal, "%s trusted principal", role.Name)
	assert.Empty(t, s.Condition)
}

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	sort.Strings(out)
	return out
}

func unique(xs []string) []string {
	return slices.Compact(sorted(xs))
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// jsonOf is v's canonical JSON (object keys sorted), for comparing values of different types.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var generic any
	require.NoError(t, json.Unmarshal(b, &generic))
	b, err = json.Marshal(generic)
	require.NoError(t, err)
	return string(b)
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func within(t *testing.T, inner, outer string) bool {
	t.Helper()
	i, o := netip.MustParsePrefix(inner), netip.MustParsePrefix(outer)
	return o.Contains(i.Addr()) && i.Bits() >= o.Bits()
}

func overlaps(t *testing.T, a, b string) bool {
	t.Helper()
	return netip.MustParsePrefix(a).Overlaps(netip.MustParsePrefix(b))
}

// Every stack file in the repository passes validation and builds the whole program.
func TestEveryStackFileIsValid(t *testing.T) {
	files, err := filepath.Glob("Pulumi.*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 2, "dev and prod")
	for _, f := range files {
		stack := strings.TrimSuffix(strings.TrimPrefix(f, "Pulumi."), ".yaml")
		t.Run(stack, func(t *testing.T) {
			m := newMocks()
			require.NoError(t, m.run(stackConfig(t, stack)), "%s must validate", f)
			assert.NotEmpty(t, m.all("kubernetes:karpenter.sh/v1:NodePool"))
		})
	}
}

func TestProdDiffersFromDevWhereItShould(t *testing.T) {
	m := newMocks()
	require.NoError(t, m.run(stackConfig(t, "prod")))
	assert.Equal(t, "lux-gpu-ci-prod", m.one(t, "eks:index:Cluster").Inputs["name"])
	assert.Len(t, m.all("kubernetes:karpenter.sh/v1:NodePool"), 2)
	assert.Len(t, m.all("aws:budgets/budget:Budget"), 1)
	assert.Len(t, m.all("aws:ec2/subnet:Subnet"), 6)
	for _, np := range m.all("kubernetes:karpenter.sh/v1:NodePool") {
		assert.Contains(t, path(np.Inputs["spec"], "template", "spec", "requirements"),
			map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"spot", "on-demand"}}, "on-demand fallback")
	}
}

// actionlint knows every runs-on label and scale-set name our stacks register.
func TestActionlintKnowsOurRunnerLabels(t *testing.T) {
	b, err := os.ReadFile(".github/actionlint.yaml")
	require.NoError(t, err)
	var cfg struct {
		SelfHostedRunner struct {
			Labels []string `yaml:"labels"`
		} `yaml:"self-hosted-runner"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	builtin := []string{"self-hosted", "linux", "x64", "arm64"}
	files, _ := filepath.Glob("Pulumi.*.yaml")
	for _, f := range files {
		raw, _, err := config.ReadStackFile(f)
		require.NoError(t, err)
		c, err := config.Parse(func(k string) (string, bool) {
			if k == "lux-gpu-ci:githubToken" {
				return "x", true
			}
			v, ok := raw[k]
			return v, ok
		}, nil)
		require.NoError(t, err, f)
		for _, p := range c.GPUPools {
			for _, l := range append(slices.Clone(p.RunnerLabels), p.RunnerScaleSetName) {
				assert.True(t, slices.Contains(cfg.SelfHostedRunner.Labels, l) || slices.Contains(builtin, l), "%s: add %q to .github/actionlint.yaml", f, l)
			}
		}
	}
}

// make bootstrap names every missing prerequisite before it touches anything.
func TestBootstrapNamesMissingPrerequisites(t *testing.T) {
	cmd := exec.Command("bash", "hack/bootstrap.sh")
	cmd.Env = []string{"PATH=/nonexistent", "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "bootstrap must stop: %s", out)
	for _, want := range []string{"pulumi is not installed", "go is not installed", "aws is not installed", "kubectl is not installed",
		"AWS_REGION is not set", "GITHUB_ORG is not set", "neither GITHUB_PAT nor GITHUB_APP_ID is set"} {
		assert.Contains(t, string(out), want)
	}
}

// The Pulumi SDK's own loaders accept Pulumi.yaml (validated against Pulumi's project
// schema, config declarations included) and every stack file.
func TestPulumiLoadsTheProjectAndStacks(t *testing.T) {
	project, err := workspace.LoadProject("Pulumi.yaml")
	require.NoError(t, err)
	assert.Equal(t, "lux-gpu-ci", string(project.Name))
	assert.Equal(t, "go", project.Runtime.Name())
	files, _ := filepath.Glob("Pulumi.*.yaml")
	sink := diag.DefaultSink(io.Discard, io.Discard, diag.FormatOptions{Color: colors.Never})
	for _, f := range files {
		stack, err := workspace.LoadProjectStack(sink, project, f)
		require.NoError(t, err, f)
		assert.NotEmpty(t, stack.Config, f)
	}
}

// engineConfig is the config the engine hands the program for a stack file: the stack's
// values, plus Pulumi.yaml's default for every declared key the stack leaves unset (as
// pkg/workspace.ValidateStackConfigAndApplyProjectConfig does: scalars as text, lists and
// objects as JSON), plus the token a real stack holds encrypted.
func engineConfig(t *testing.T, stack string) map[string]string {
	t.Helper()
	project, err := workspace.LoadProject("Pulumi.yaml")
	require.NoError(t, err)
	cfg := stackConfig(t, stack)
	for key, decl := range project.Config {
		k := config.Project + ":" + key
		if _, set := cfg[k]; set || decl.Default == nil {
			continue
		}
		switch v := decl.Default.(type) {
		case string, bool, int:
			cfg[k] = fmt.Sprint(v)
		default:
			b, err := json.Marshal(v)
			require.NoError(t, err)
			cfg[k] = string(b)
		}
	}
	return cfg
}

// The program accepts what the engine really hands it: every default of Pulumi.yaml applied,
// "" for the credentials a stack leaves unset, {} for an unset budget.
func TestProgramAcceptsTheEngineDefaults(t *testing.T) {
	for _, stack := range []string{"dev", "prod"} {
		t.Run(stack, func(t *testing.T) {
			cfg := engineConfig(t, stack)
			assert.Equal(t, "", cfg["lux-gpu-ci:githubAppId"], "the engine sets unset optional keys to their default")
			m := newMocks()
			require.NoError(t, m.run(cfg))
			assert.NotEmpty(t, m.all("kubernetes:karpenter.sh/v1:NodePool"))
			if stack == "dev" {
				assert.Empty(t, m.all("aws:budgets/budget:Budget"), "budget {} is off")
			}
		})
	}
}
