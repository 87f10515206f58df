package stack_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const retrierRelease = "3f1c2a9e0b7d4c5a6e8f9012345678901234567890abcdef1234567890abcdef"

func runWithRetrier(t *testing.T) *mocks {
	return runDev(t, "retrierGitHubToken", "github_pat_retrier", "retrierGpuciVersion", "v0.4.0", "retrierGpuciSha256", retrierRelease)
}

// The in-cluster retrier: its own namespace, account, token and Deployment; its account reads
// the events of default and of the runners' namespace, nothing else; its token is a Pulumi
// secret held only by its Secret, in its own namespace. Off, none of it exists.
func TestTheInClusterRetrier(t *testing.T) {
	off := runDev(t)
	assert.Empty(t, off.all("lux-gpu-ci:k8s:Retrier"), "no token, no retrier")

	m := runWithRetrier(t)
	m.one(t, "lux-gpu-ci:k8s:Retrier")
	ns := m.get(t, "kubernetes:core/v1:Namespace", "gpu-ci-retrier")
	assert.Equal(t, map[string]any{"pod-security.kubernetes.io/enforce": "restricted"}, path(ns.Inputs, "metadata", "labels"))

	secret := m.get(t, "kubernetes:core/v1:Secret", "gpu-ci-retrier-github")
	assert.Equal(t, map[string]any{"name": "gpuci-retrier-github", "namespace": "gpuci-retrier"}, path(secret.Inputs, "metadata"))
	data := secret.Raw.Inputs["stringData"]
	require.True(t, data.IsSecret(), "the token is a Pulumi secret")
	assert.Equal(t, map[string]any{"token": "github_pat_retrier"}, data.SecretValue().Element.Mappable())
	for _, r := range m.programResources() {
		if r.Key() != secret.Key() {
			assert.NotContains(t, fmt.Sprint(r.Inputs), "github_pat_retrier", "%s holds the retrier's token", r.Key())
		}
	}

	events := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"events"}, "verbs": []any{"get", "list"}}}
	d := m.get(t, "kubernetes:apps/v1:Deployment", "gpu-ci-retrier")
	for _, readNS := range []string{"arc-runners", "arc-jobs-gpu-spot-container", "default"} {
		role := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:Role", "gpu-ci-retrier-"+readNS)
		assert.Equal(t, map[string]any{"name": "gpuci-retrier", "namespace": readNS}, path(role.Inputs, "metadata"))
		assert.Equal(t, events, path(role.Inputs, "rules"), "events only: no pod (a job pod's spec holds its job's secrets), no Secret")
		binding := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "gpu-ci-retrier-"+readNS)
		assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "gpuci-retrier", "namespace": "gpuci-retrier"}}, path(binding.Inputs, "subjects"))
		assert.Contains(t, d.Deps(), binding.Key(), "the retrier starts once it may read")
	}
	assert.Contains(t, d.Deps(), secret.Key())
	for _, r := range []string{"kubernetes:core/v1:Namespace::gpu-ci-arc-runners", "kubernetes:helm.sh/v3:Release::gpu-ci-arc-controller"} {
		assert.Contains(t, d.Deps(), r, "on destroy it goes before ARC and the runners' namespace")
	}
	assert.Equal(t, "gpuci-retrier", path(d.Inputs, "metadata", "namespace"))
	c := path(d.Inputs, "spec", "template", "spec", "containers").([]any)[0]
	assert.Equal(t, []any{"retry", "--org", "luxfi", "--scale-sets", "lux-gpu-t4,lux-gpu-t4-on-demand,lux-gpu-t4-container",
		"--pod-namespaces", "arc-runners,arc-jobs-gpu-spot-container", "--every", "1m"}, path(c, "args"))
}
