package stack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	mapType        = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy"
	mapBindingType = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding"
)

// On a control plane of Kubernetes 1.36 or later, the API server annotates a runners'
// namespace pod it binds to a Karpenter node with the node's capacity type, and a runner-form
// runner reads it through the downward API: the policy takes the Node as its parameter, fails
// open, and every scale set starts after it. On 1.35 (dev's version) its API is not served,
// and nothing is declared. make e2e shows the real API server annotating a runner it binds.
func TestTheAPIServerTellsARunnerItsCapacityType(t *testing.T) {
	dev := runDev(t)
	assert.Empty(t, dev.all(mapType), "1.35 serves no admissionregistration.k8s.io/v1 MutatingAdmissionPolicy")
	assert.Empty(t, dev.all(mapBindingType))

	m := runDev(t, "kubernetesVersion", "1.36")
	policy, binding := m.one(t, mapType), m.one(t, mapBindingType)
	assert.Equal(t, map[string]any{"apiVersion": "v1", "kind": "Node"}, path(policy.Inputs, "spec", "paramKind"))
	assert.Equal(t, []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"pods/binding"}}},
		path(policy.Inputs, "spec", "matchConstraints", "resourceRules"))
	assert.Equal(t, "Ignore", path(policy.Inputs, "spec", "failurePolicy"), "a pod binds whatever the policy does")
	// What the expressions do is make e2e's to show, against the real API server: here, that the
	// Node is matched before the mutation, which then needs no branch for the others.
	conditions := path(policy.Inputs, "spec", "matchConditions").([]any)
	require.Len(t, conditions, 1)
	assert.Equal(t, "params.metadata.name == object.target.name", path(conditions[0], "expression"))
	assert.Equal(t, "ApplyConfiguration", path(policy.Inputs, "spec", "mutations").([]any)[0].(map[string]any)["patchType"])
	assert.Equal(t, "gpuci-launched-capacity", path(binding.Inputs, "spec", "policyName"))
	assert.Equal(t, []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"arc-runners", "arc-jobs-gpu-spot-container"}}},
		path(binding.Inputs, "spec", "matchResources", "namespaceSelector", "matchExpressions"), "the runners' pods and the container-form jobs' only")
	assert.Equal(t, map[string]any{"matchExpressions": []any{map[string]any{"key": "karpenter.sh/capacity-type", "operator": "Exists"}}},
		path(binding.Inputs, "spec", "paramRef", "selector"), "the Nodes Karpenter launched")
	assert.Equal(t, "Allow", path(binding.Inputs, "spec", "paramRef", "parameterNotFoundAction"), "no GPU node yet is not an error")
	assert.Contains(t, binding.Deps(), policy.Key())

	scaleSets := 0
	for _, r := range m.all("kubernetes:helm.sh/v3:Release") {
		if path(r.Inputs, "namespace") != "arc-runners" || r.Name == "gpu-ci-arc-lux-gpu-retry" {
			continue
		}
		scaleSets++
		assert.Contains(t, r.Deps(), binding.Key(), "%s's runners are bound after the policy, and it stays while they run", r.Name)
	}
	require.Equal(t, 3, scaleSets, "dev's two pools and the twin")
}
