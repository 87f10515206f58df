package stack_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The retry runner (retryScaleSetName): a scale set of its own on the system nodes, in a
// runner group of its own, under an account that may read events in the two namespaces gpuci
// retry --cluster reads, nothing else (no pod, no Secret, no write); gone before the
// controller, its credentials and its account on destroy. make e2e runs gpuci retry --cluster
// under that account against the real API server's RBAC, and a hostile job under it.
func TestRetryRunner(t *testing.T) {
	none := runDev(t)
	for _, r := range none.all("kubernetes:helm.sh/v3:Release") {
		assert.NotEqual(t, "lux-gpu-retry", r.Inputs["name"])
	}
	for _, r := range none.all("kubernetes:core/v1:ServiceAccount") {
		assert.NotEqual(t, "gpuci-retry", path(r.Inputs, "metadata", "name"), "no retryScaleSetName: no retry account")
	}

	m := runDev(t, "retryScaleSetName", "lux-gpu-retry", "retryRunnerGroup", "lux-gpu-retry")
	rel := releaseNamed(t, m, "lux-gpu-retry")
	assert.Equal(t, "arc-runners", rel.Inputs["namespace"])
	v := rel.Inputs["values"]
	assert.Equal(t, "lux-gpu-retry", path(v, "runnerScaleSetName"))
	assert.Nil(t, path(v, "scaleSetLabels"), "reached by its name only: no GPU job's labels can land on it")
	assert.Equal(t, "lux-gpu-retry", path(v, "runnerGroup"), "in its own runner group, never Default")
	assert.Nil(t, path(v, "containerMode"))
	assert.Equal(t, 0.0, path(v, "minRunners"), "nothing idle")
	assert.Equal(t, 1.0, path(v, "maxRunners"), "one small runner on the system nodes at most")
	tmpl := path(v, "template")
	assert.Equal(t, "gpuci-retry", path(tmpl, "spec", "serviceAccountName"), "set, so the chart makes no account of its own")
	assert.Equal(t, map[string]any{"lux-gpu-ci.luxfi.com/node-role": "system"}, path(tmpl, "spec", "nodeSelector"))
	assert.Nil(t, path(tmpl, "spec", "tolerations"), "never on a GPU node")
	assert.Equal(t, map[string]any{"lux-gpu-ci.luxfi.com/runner-role": "relay"}, path(tmpl, "metadata", "labels"),
		"not a pool's pod (outside the running-jobs budget and its count); a relay to the API server for the NetworkPolicies")
	containers := path(tmpl, "spec", "containers").([]any)
	require.Len(t, containers, 1)
	assert.Equal(t, "runner", path(containers[0], "name"))
	assert.Equal(t, map[string]any{"cpu": "100m", "memory": "384Mi"}, path(containers[0], "resources", "requests"))
	assert.Nil(t, path(containers[0], "resources", "limits", "nvidia.com/gpu"))

	sa := m.get(t, "kubernetes:core/v1:ServiceAccount", "gpu-ci-arc-retry")
	assert.Equal(t, map[string]any{"name": "gpuci-retry", "namespace": "arc-runners"}, path(sa.Inputs, "metadata"))
	read := []any{"get", "list"}
	roles := map[string]any{}
	for _, ns := range []string{"default", "arc-runners"} {
		role := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:Role", "gpu-ci-arc-retry-"+ns)
		assert.Equal(t, map[string]any{"name": "gpuci-retry", "namespace": ns}, path(role.Inputs, "metadata"))
		roles[ns] = path(role.Inputs, "rules")
		binding := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "gpu-ci-arc-retry-"+ns)
		assert.Equal(t, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpuci-retry"}, path(binding.Inputs, "roleRef"))
		assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "gpuci-retry", "namespace": "arc-runners"}}, path(binding.Inputs, "subjects"))
		assert.Contains(t, rel.Deps(), role.Key())
		assert.Contains(t, rel.Deps(), binding.Key(), "the account's rights outlive its runner")
	}
	events := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"events"}, "verbs": read}}
	assert.Equal(t, map[string]any{"default": events, "arc-runners": events}, roles,
		"Karpenter's Node events and the runners' Scheduled events, read; no pod (a job pod's spec holds its job's secrets), no Secret, no write")
	for _, b := range m.all("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding") {
		assert.NotContains(t, fmt.Sprint(path(b.Inputs, "subjects")), "gpuci-retry", "nothing cluster-wide for the retry account: %s", b.Name)
	}

	deps := rel.Deps()
	assert.Contains(t, deps, sa.Key())
	assert.Contains(t, deps, releaseNamed(t, m, "arc").Key(), "uninstalled while the controller still cleans up")
	assert.Contains(t, deps, m.get(t, "kubernetes:core/v1:Secret", "gpu-ci-arc-github").Key(), "registered with the stack's credentials")
}
