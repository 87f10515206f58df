package stack_test

// The dependency edges that make `pulumi destroy` safe.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/destroyorder"
)

// The edges that make `pulumi destroy` drain GPU nodes before anything they need goes:
// scale sets → NodePool → EC2NodeClass → Karpenter → CRDs → system nodes/IAM/queue → cluster.
func TestDestroyOrder(t *testing.T) {
	m := runDev(t)
	edge := func(from registered, to string, why string) {
		t.Helper()
		assert.Contains(t, from.Deps(), to, "%s must depend on %s: %s", from.Key(), to, why)
	}
	for _, name := range []string{"gpu-ci", "gpu-ci-crds"} {
		provider := m.get(t, "pulumi:providers:kubernetes", name)
		edge(provider, "eks:index:ManagedNodeGroup::cluster-system", "nothing schedules before the system nodes, and they go last")
	}

	crd := releaseNamed(t, m, "karpenter-crd")
	karpenter := releaseNamed(t, m, "karpenter")
	edge(karpenter, crd.Key(), "CRDs outlive the controller")
	edge(karpenter, "aws:eks/podIdentityAssociation:PodIdentityAssociation::karpenter-controller", "pods get credentials at creation")
	edge(karpenter, "aws:eks/accessEntry:AccessEntry::karpenter-node", "nodes must be able to join")
	edge(karpenter, "aws:sqs/queuePolicy:QueuePolicy::karpenter-interruption", "interruption handling")
	for _, p := range []string{"node-lifecycle", "iam-integration", "eks-integration", "interruption", "zonal-shift", "resource-discovery"} {
		edge(karpenter, "aws:iam/rolePolicyAttachment:RolePolicyAttachment::karpenter-"+p, "the controller keeps its permissions while it drains")
	}

	for _, pool := range []struct{ name, scaleSet string }{{"gpu-spot", "lux-gpu-t4"}, {"gpu-spot-container", "lux-gpu-t4-container"}} {
		nodeClass := m.get(t, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu-ci-"+pool.name+"-nodeclass")
		nodePool := m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-"+pool.name+"-nodepool")
		edge(nodeClass, karpenter.Key(), "Karpenter terminates the instances when the class goes")
		edge(nodeClass, "aws:iam/role:Role::karpenter-node-role", "the class names the node role")
		edge(nodePool, nodeClass.Key(), "the pool references the class")
		edge(nodePool, karpenter.Key(), "Karpenter drains the pool's nodes")
		for _, cr := range []registered{nodeClass, nodePool} {
			assert.Equal(t, "30m", cr.Raw.RegisterRPC.GetCustomTimeouts().GetDelete(), "%s gets time to drain", cr.Key())
			assert.True(t, cr.Raw.RegisterRPC.GetDeleteBeforeReplace(), "%s is named: replace must delete first", cr.Key())
			assert.False(t, cr.Raw.RegisterRPC.GetRetainOnDelete(), cr.Key())
			assert.Empty(t, cr.Raw.RegisterRPC.GetDeletedWith(), "%s must really be deleted, or instances leak", cr.Key())
		}

		scaleSet := releaseNamed(t, m, pool.scaleSet)
		edge(scaleSet, nodePool.Key(), "runners go before their nodes")
		edge(scaleSet, releaseNamed(t, m, "arc").Key(), "the controller cleans up its runners")
		edge(scaleSet, "kubernetes:core/v1:Secret::gpu-ci-arc-github", "runners register with it")
		var boundary []registered
		for _, np := range m.all("kubernetes:networking.k8s.io/v1:NetworkPolicy") {
			if path(np.Inputs, "metadata", "namespace") == "arc-runners" {
				boundary = append(boundary, np)
			}
		}
		require.Len(t, boundary, 4)
		for _, np := range boundary {
			edge(scaleSet, np.Key(), "no runner starts before the boundary, and it stands until the last job has drained")
		}
		server := m.get(t, "kubernetes:apps/v1:Deployment", "gpu-ci-compiler-cache-ccache-"+pool.name)
		edge(scaleSet, server.Key(), "a build reaches its cache until the last job has drained")
		edge(server, "aws:eks/podIdentityAssociation:PodIdentityAssociation::compiler-cache-"+pool.name, "the server gets its credentials when it starts")
		edge(server, "aws:iam/rolePolicy:RolePolicy::compiler-cache-"+pool.name, "and keeps its access while it serves")
	}
	withRetry := runDev(t, "retryScaleSetName", "lux-gpu-retry", "retryRunnerGroup", "lux-gpu-retry")
	retrySet := releaseNamed(t, withRetry, "lux-gpu-retry")
	for _, np := range withRetry.all("kubernetes:networking.k8s.io/v1:NetworkPolicy") {
		if path(np.Inputs, "metadata", "namespace") != "arc-runners" {
			continue
		}
		edge(retrySet, np.Key(), "the retry runner's job runs with a token: inside the boundary only")
	}
	// A container-form runner deletes its job pod with the hooks' account as it ends.
	containerSet := releaseNamed(t, m, "lux-gpu-t4-container")
	for _, dep := range []string{
		"kubernetes:core/v1:ConfigMap::gpu-ci-arc-lux-gpu-t4-container-job-pod",
		"kubernetes:core/v1:ServiceAccount::gpu-ci-arc-container-hooks",
		"kubernetes:rbac.authorization.k8s.io/v1:Role::gpu-ci-arc-container-hooks",
		"kubernetes:rbac.authorization.k8s.io/v1:RoleBinding::gpu-ci-arc-container-hooks",
	} {
		edge(containerSet, dep, "its runners and their job pods need it until they are gone")
	}
	runnersNS := m.get(t, "kubernetes:core/v1:Namespace", "gpu-ci-arc-runners")
	edge(runnersNS, releaseNamed(t, m, "arc").Key(), "only the controller removes ARC's cleanup finalizers, so the namespace goes first")

	for _, r := range m.programResources() {
		if strings.HasPrefix(r.Type, "kubernetes:") {
			assert.Contains(t, r.Raw.Provider, "pulumi:providers:kubernetes::gpu-ci", "%s uses the cluster's provider", r.Key())
		}
	}
}

// What the Kubernetes layer needs while its finalizers run is a real dependency of it, in
// both network profiles: the order then holds for targeted destroys, replacements and any
// engine scheduler, not just for a full destroy by dependency height. (make e2e checks the
// same rules on a real stack's state, with pulumi-eks's children.)
func TestDestroyOrderLifelines(t *testing.T) {
	for _, natMode := range []string{"single", "none"} {
		t.Run(natMode, func(t *testing.T) {
			m := runDev(t, "natMode", natMode)
			g := destroyorder.GraphFromMocks(m.programResources())
			assert.Empty(t, g.Violations(destroyorder.Rules))
		})
	}
}
