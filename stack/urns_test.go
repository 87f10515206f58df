package stack_test

// Resources whose replacement destroys what CI runs on. The engine replaces a resource whose
// URN changes (a new logical name, parent or type): for a CRD, or the karpenter-crd release
// whose templates they are, that deletes every object of its kind (scale sets, runners,
// NodePools, NodeClaims and their GPU instances); for a Kubernetes provider, it replaces
// everything the provider manages; for the cluster or its node group, the cluster itself.
// Their URNs are pinned: a refactor that changes one fails here, naming the alias to add.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stateful is whether a resource is one whose replacement loses state.
func stateful(r registered) bool {
	switch r.Type {
	case "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "pulumi:providers:kubernetes",
		"eks:index:Cluster", "eks:index:ManagedNodeGroup", "aws:ec2/vpc:Vpc":
		return true
	case "kubernetes:helm.sh/v3:Release":
		return r.Inputs["name"] == "karpenter-crd"
	}
	return false
}

func TestStatefulURNsArePinned(t *testing.T) {
	m := runDev(t)
	var got []string
	for _, r := range m.programResources() {
		if stateful(r) {
			got = append(got, r.URN)
		}
	}
	slices.Sort(got)
	b, err := os.ReadFile(filepath.Join("testdata", "stateful-urns.txt"))
	require.NoError(t, err)
	var want []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	require.NotEmpty(t, want)
	for _, u := range want {
		if !slices.Contains(got, u) {
			t.Errorf("%s is gone. If it was renamed, re-parented or retyped, the engine would replace it and lose what it holds: "+
				"give the new resource pulumi.Aliases([]pulumi.Alias{{URN: pulumi.URN(%q)}}) and keep this line", u, u)
		}
	}
	for _, u := range got {
		assert.Contains(t, want, u, "a new stateful resource: add its URN to stack/testdata/stateful-urns.txt")
	}
}
