//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

// kubernetesVersionBumped moves the running stack one Kubernetes minor up (kubernetesVersion
// 1.35 → 1.36), through the real pulumi-eks: one up updates the control plane, then the
// system node group to the version the control plane reports, and the add-ons to EKS's
// default for the new minor, all in place. Nothing is created, deleted or replaced, and the
// Kubernetes layer — its provider included — does not change: no scale set, NodePool or
// runner is touched. (Which AWS changes force a replacement is pulumi-aws's rule, not the
// fake's, which updates in place; what the program and pulumi-eks send is real.)
func kubernetesVersionBumped(t *testing.T, ctx context.Context, h *harness) {
	h.editStackFile(t, func(cfg map[string]any) {
		require.Equal(t, "1.35", cfg[config.Project+":"+config.KeyKubernetesVersion], "the dev stack's version")
		cfg[config.Project+":"+config.KeyKubernetesVersion] = "1.36"
	})

	up, steps, err := h.upWithSteps(t, ctx)
	require.NoError(t, err)
	changes := *up.Summary.ResourceChanges
	t.Logf("up: %v", changes)
	assert.Zero(t, changes["create"]+changes["delete"]+changes["replace"], "nothing created, deleted or replaced")
	var changed []string
	for _, s := range steps {
		if s.op != "same" {
			u := resource.URN(s.urn)
			changed = append(changed, string(u.Type())+"::"+u.Name())
		}
	}
	t.Logf("changed: %v", changed)
	require.Len(t, changed, changes["update"], "every update step seen")
	for _, c := range changed {
		assert.True(t, strings.HasPrefix(c, "aws:") || strings.HasPrefix(c, "eks:"), "%s changed: only the AWS layer does", c)
	}
	for _, want := range []string{"aws:eks/cluster:Cluster::cluster-eksCluster", "aws:eks/nodeGroup:NodeGroup::cluster-system"} {
		assert.Contains(t, changed, want)
	}

	_, after := h.state(t, ctx)
	assert.Equal(t, "1.36", findResource(t, after, "aws:eks/cluster:Cluster", "").Inputs["version"], "the control plane")
	assert.Equal(t, "1.36", findResource(t, after, "aws:eks/nodeGroup:NodeGroup", "").Inputs["version"], "the system nodes follow it")
	for _, addon := range []string{"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"} {
		a := findResource(t, after, "aws:eks/addon:Addon", "cluster-"+addon)
		assert.Equal(t, fakeaws.DefaultAddonVersion(addon, "1.36"), a.Inputs["addonVersion"], "%s at EKS's default for the new minor", addon)
	}
}

// findResource is the one resource of type typ (named name, if not empty) in resources.
func findResource(t *testing.T, resources []apitype.ResourceV3, typ, name string) apitype.ResourceV3 {
	t.Helper()
	var found []apitype.ResourceV3
	for _, r := range resources {
		if string(r.Type) == typ && (name == "" || r.URN.Name() == name) {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "one %s %s in the state", typ, name)
	return found[0]
}
