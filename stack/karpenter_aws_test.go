package stack_test

// Karpenter's AWS side under mocks: queue, EventBridge rules, roles, access entry, Pod Identity, and the controller policies against upstream's.

import (
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

func TestKarpenterAWSDev(t *testing.T) {
	m := runDev(t)

	q := m.one(t, "aws:sqs/queue:Queue")
	assert.Equal(t, "lux-gpu-ci-", q.Inputs["namePrefix"], "named after the cluster, autonamed: SQS refuses a deleted queue's name for 60 s")
	assert.NotContains(t, q.Inputs, "name")
	assert.Equal(t, 300.0, q.Inputs["messageRetentionSeconds"])
	assert.Equal(t, true, q.Inputs["sqsManagedSseEnabled"])
	queueArn := "arn:aws:sqs:us-west-2:" + testAccount + ":" + testQueue

	qp := policyOf(t, m.one(t, "aws:sqs/queuePolicy:QueuePolicy"), "policy")
	assert.Equal(t, "EC2InterruptionPolicy", qp.ID)
	require.Len(t, qp.Statement, 2, "EventBridge's grant and the TLS deny: no one else may send")
	for _, st := range qp.Statement[:1] {
		assert.Equal(t, "Allow", st.Effect)
		assert.Equal(t, []string{"sqs:SendMessage"}, st.Action)
		assert.Equal(t, []string{queueArn}, st.Resource)
	}
	// EventBridge may send only for the stack's own five rules (aws:SourceArn), each by its ARN.
	assert.Equal(t, map[string]any{"Service": []any{"events.amazonaws.com"}}, qp.Statement[0].Principal)
	var ruleArns []string
	for _, r := range m.all("aws:cloudwatch/eventRule:EventRule") {
		ruleArns = append(ruleArns, "arn:aws:events:us-west-2:"+testAccount+":rule/"+r.Name)
	}
	require.Len(t, ruleArns, 5)
	require.Contains(t, qp.Statement[0].Condition, "ArnEquals")
	assert.ElementsMatch(t, ruleArns, qp.Statement[0].Condition["ArnEquals"]["aws:SourceArn"])
	assert.Len(t, qp.Statement[0].Condition, 1)
	assert.Equal(t, "DenyHTTP", qp.Statement[1].Sid)
	assert.Equal(t, "Deny", qp.Statement[1].Effect)
	assert.Equal(t, []string{"sqs:*"}, qp.Statement[1].Action)
	assert.Equal(t, "*", qp.Statement[1].Principal)
	assert.Equal(t, map[string]map[string][]string{"Bool": {"aws:SecureTransport": {"false"}}}, qp.Statement[1].Condition)
	// The rules exist before the policy names them, and the targets wait for the policy.
	for _, tg := range m.all("aws:cloudwatch/eventTarget:EventTarget") {
		assert.Contains(t, tg.Deps(), m.one(t, "aws:sqs/queuePolicy:QueuePolicy").Key(), "target %s sends once the queue admits it", tg.Name)
	}

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
	assert.Equal(t, "lux-gpu-ci-karpenter", controller.Inputs["name"])
	trust := assertTrust(t, controller, "pods.eks.amazonaws.com", "sts:AssumeRole", "sts:TagSession")
	assert.Equal(t, map[string]map[string][]string{"StringEquals": {
		"aws:RequestTag/eks-cluster-arn":            {"arn:aws:eks:us-west-2:" + testAccount + ":cluster/lux-gpu-ci"},
		"aws:RequestTag/kubernetes-namespace":       {"kube-system"},
		"aws:RequestTag/kubernetes-service-account": {"karpenter"},
	}}, trust.Condition, "only Karpenter's ServiceAccount, in this cluster, by Pod Identity's session tags")
	node := m.get(t, "aws:iam/role:Role", "karpenter-node-role")
	assert.Equal(t, "lux-gpu-ci-karpenter-node", node.Inputs["name"])
	assert.Empty(t, assertTrust(t, node, "ec2.amazonaws.com", "sts:AssumeRole").Condition)
	nodeArn := "arn:aws:iam::" + testAccount + ":role/lux-gpu-ci-karpenter-node"

	var nodePolicies []string
	for _, a := range m.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment") {
		if a.Inputs["role"] == "lux-gpu-ci-karpenter-node" {
			nodePolicies = append(nodePolicies, a.Inputs["policyArn"].(string))
		}
	}
	assert.ElementsMatch(t, []string{
		"arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
		"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
		"arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
		"arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
		// The image cache's first pull (TestImageCacheFirstPullPermission).
		"arn:aws:iam::" + testAccount + ":policy/lux-gpu-ci-image-cache-first-pull",
		// Nothing else from the account (TestNodesPullNothingElseFromTheAccount).
		"arn:aws:iam::" + testAccount + ":policy/lux-gpu-ci-node-image-pull",
	}, nodePolicies)

	entry := m.one(t, "aws:eks/accessEntry:AccessEntry")
	assert.Equal(t, "EC2_LINUX", entry.Inputs["type"])
	assert.Equal(t, nodeArn, entry.Inputs["principalArn"])
	assert.Equal(t, "lux-gpu-ci", entry.Inputs["clusterName"])
	assert.Contains(t, entry.Deps(), "eks:index:Cluster::cluster")

	pia := m.get(t, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "karpenter-controller")
	assert.Equal(t, "kube-system", pia.Inputs["namespace"])
	assert.Equal(t, "karpenter", pia.Inputs["serviceAccount"])
	assert.Equal(t, "arn:aws:iam::"+testAccount+":role/lux-gpu-ci-karpenter", pia.Inputs["roleArn"])
	assert.Contains(t, pia.Deps(), "aws:eks/addon:Addon::cluster-eks-pod-identity-agent")

	// The six controller policies, all attached to the controller role.
	attached := map[string]bool{}
	for _, a := range m.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment") {
		if a.Inputs["role"] == "lux-gpu-ci-karpenter" {
			attached[a.Inputs["policyArn"].(string)] = true
		}
	}
	assert.Len(t, attached, 6)
	require.Len(t, controllerPolicies(m), 6)
	for _, p := range controllerPolicies(m) {
		assert.True(t, attached["arn:aws:iam::"+testAccount+":policy/"+p.Inputs["name"].(string)], "%s is attached to the controller role", p.Inputs["name"])
	}
}

// upstreamActions is the complete action list of Karpenter v1.14's controller policies
// (aws/karpenter-provider-aws, website/content/en/v1.14/getting-started/
// getting-started-with-karpenter/cloudformation.yaml), written out by hand.
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
		"${NodeRoleArn}", "arn:aws:iam::"+testAccount+":role/lux-gpu-ci-karpenter-node",
		"${QueueArn}", "arn:aws:sqs:us-west-2:"+testAccount+":"+testQueue,
	)
	var reference map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(subst.Replace(string(raw))), &reference))
	delete(reference, "_source")

	var actions []string
	got := map[string]bool{}
	for _, p := range controllerPolicies(m) {
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

// assertTrust checks a role's trust policy: one statement, letting service do actions; it
// returns the statement, for its conditions.
func assertTrust(t *testing.T, role registered, service string, actions ...string) fakeaws.PolicyStatement {
	t.Helper()
	doc := policyOf(t, role, "assumeRolePolicy")
	require.Len(t, doc.Statement, 1, "%s trust", role.Name)
	s := doc.Statement[0]
	assert.Equal(t, "Allow", s.Effect)
	assert.ElementsMatch(t, actions, s.Action, "%s trust actions", role.Name)
	assert.Equal(t, map[string]any{"Service": []any{service}}, s.Principal, "%s trusted principal", role.Name)
	return s
}

// controllerPolicies are the policies of Karpenter's AWS side (the controller's six).
func controllerPolicies(m *mocks) []registered {
	var out []registered
	for _, p := range m.all("aws:iam/policy:Policy") {
		if p.Parent() == "lux-gpu-ci:infra:KarpenterAWS::karpenter" {
			out = append(out, p)
		}
	}
	return out
}
