package stack_test

// Strict network policy mode (networkPolicyEnforcingMode, k8s/boundary.go): a pod that no
// NetworkPolicy selects is denied everything. Every namespace the program puts pods in —
// its own, the Helm releases', kube-system where Karpenter runs — has a policy that selects
// every pod there (an empty podSelector), declared before the pods' workload, so no pod of
// the stack is left without one. make e2e checks the live pods with the API server's
// selection.

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEveryNamespaceOfTheStackHasItsPolicies(t *testing.T) {
	m := runWithRetrier(t) // dev, with the in-cluster retrier
	namespaces := map[string]bool{"kube-system": true}
	for _, ns := range m.all("kubernetes:core/v1:Namespace") {
		namespaces[path(ns.Inputs, "metadata", "name").(string)] = true
	}
	for _, r := range m.all("kubernetes:helm.sh/v3:Release") {
		namespaces[r.Inputs["namespace"].(string)] = true
	}
	require.GreaterOrEqual(t, len(namespaces), 7)
	coversAll := map[string][]string{} // namespace → its policies whose selector takes every pod
	for _, np := range m.all("kubernetes:networking.k8s.io/v1:NetworkPolicy") {
		if sel, _ := path(np.Inputs, "spec", "podSelector").(map[string]any); len(sel) == 0 {
			ns := path(np.Inputs, "metadata", "namespace").(string)
			coversAll[ns] = append(coversAll[ns], path(np.Inputs, "metadata", "name").(string))
		}
	}
	for ns := range namespaces {
		assert.NotEmpty(t, coversAll[ns], "namespace %s: no policy selects every pod, so strict mode would deny a pod there everything", ns)
	}
	// Where a job's code runs or a credential is held, that policy denies; elsewhere it allows.
	for _, ns := range []string{"arc-runners", "arc-jobs-gpu-spot-container", "arc-systems", "gpuci-cache", "gpuci-retrier", "gpuci-warm"} {
		if namespaces[ns] {
			assert.Contains(t, coversAll[ns], "deny-all", ns)
		}
	}
	for _, ns := range []string{"kube-system", "nvidia-device-plugin"} {
		assert.True(t, slices.Equal(coversAll[ns], []string{"allow-all"}), "%s keeps the network it had: %v", ns, coversAll[ns])
	}
}
