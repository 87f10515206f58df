package fakeaws_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

// A launch template's update makes a new version as terraform-provider-aws does: for a change
// of its tag specifications, not of its resource tags alone (though the plan shows the
// version unknown for both), and for its description (though the plan does not show it).
func TestLaunchTemplateVersions(t *testing.T) {
	c := &fakeaws.Cloud{}
	typ := "aws:ec2/launchTemplate:LaunchTemplate"
	in := resource.NewPropertyMapFromMap(map[string]any{
		"description": "system", "tags": map[string]any{"a": "1"},
		"tagSpecifications": []any{map[string]any{"resourceType": "instance", "tags": map[string]any{"a": "1"}}},
	})
	id, olds, err := c.Create(typ, "lt", in, false)
	require.NoError(t, err)
	require.Equal(t, 1.0, olds["latestVersion"].NumberValue())

	edit := func(key string, v any) resource.PropertyMap {
		news := in.Copy()
		news[resource.PropertyKey(key)] = resource.NewPropertyValue(v)
		return news
	}
	for _, tc := range []struct {
		name          string
		news          resource.PropertyMap
		planUnknown   bool
		latestVersion float64
	}{
		{"resource tags only", edit("tags", map[string]any{"a": "2"}), true, 1},
		{"tag specifications", edit("tagSpecifications", []any{map[string]any{"resourceType": "instance", "tags": map[string]any{"a": "2"}}}), true, 2},
		{"description", edit("description", "system nodes"), false, 2},
		{"nothing", in.Copy(), false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := c.Update(typ, "lt", id, olds, tc.news, true)
			require.NoError(t, err)
			assert.Equal(t, tc.planUnknown, plan["latestVersion"].IsComputed(), "the plan")
			applied, err := c.Update(typ, "lt", id, olds, tc.news, false)
			require.NoError(t, err)
			assert.Equal(t, tc.latestVersion, applied["latestVersion"].NumberValue(), "the update")
		})
	}
}

// nodeGroupsStub is EKS's node replacement, failing while blocked (a drain a job holds).
type nodeGroupsStub struct {
	blocked bool
	updates int
}

func (s *nodeGroupsStub) Update(context.Context, resource.PropertyMap, func(string) string) error {
	s.updates++
	if s.blocked {
		return errors.New("ip-10-0-0-10.us-west-2.compute.internal: PodEvictionFailure: Reached max retries while trying to evict pods from nodes in node group system")
	}
	return nil
}

// A node group update that fails (PodEvictionFailure) returns its new outputs with the error,
// as the bridge does, so the engine keeps them and a plain diff sees nothing to do; a refresh
// reads what the nodes were really launched from, and the diff then replaces them. An update
// that does not change what the nodes are launched from replaces none.
func TestNodeGroupUpdateThatFailsIsSeenOnlyByARefresh(t *testing.T) {
	ctx := context.Background()
	eks := &nodeGroupsStub{blocked: true}
	p := fakeaws.NewProvider(fakeaws.Cloud{StateDir: t.TempDir()}, "")
	p.NodeGroups = eks
	const urn = "urn:pulumi:dev::p::aws:eks/nodeGroup:NodeGroup::system"
	props := func(version string, tags map[string]any) *structpb.Struct {
		s, err := plugin.MarshalProperties(resource.NewPropertyMapFromMap(map[string]any{
			"clusterName": "lux", "nodeGroupName": "system", "version": "1.35", "tags": tags,
			"launchTemplate": map[string]any{"id": "lt-1", "version": version},
		}), plugin.MarshalOptions{})
		require.NoError(t, err)
		return s
	}
	launchVersion := func(s *structpb.Struct) string {
		m, err := plugin.UnmarshalProperties(s, plugin.MarshalOptions{})
		require.NoError(t, err)
		return m["launchTemplate"].ObjectValue()["version"].StringValue()
	}
	diff := func(olds, news *structpb.Struct) []string {
		d, err := p.Diff(ctx, &pulumirpc.DiffRequest{Urn: urn, Olds: olds, OldInputs: props("1", nil), News: news})
		require.NoError(t, err)
		return d.GetDiffs()
	}

	created, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: urn, Properties: props("1", nil)})
	require.NoError(t, err)
	id := created.GetId()

	_, err = p.Update(ctx, &pulumirpc.UpdateRequest{Urn: urn, Id: id, Olds: created.GetProperties(), News: props("1", map[string]any{"team": "ci"})})
	require.NoError(t, err, "a tag replaces no node")
	assert.Zero(t, eks.updates)

	_, err = p.Update(ctx, &pulumirpc.UpdateRequest{Urn: urn, Id: id, Olds: created.GetProperties(), News: props("2", map[string]any{"team": "gpu"})})
	require.Error(t, err)
	assert.Equal(t, 1, eks.updates)
	st := status.Convert(err)
	assert.Contains(t, st.Message(), "PodEvictionFailure")
	var partial *pulumirpc.ErrorResourceInitFailed
	for _, d := range st.Details() {
		if f, ok := d.(*pulumirpc.ErrorResourceInitFailed); ok {
			partial = f
		}
	}
	require.NotNil(t, partial, "the new outputs come with the error")
	saved := partial.GetProperties()
	assert.Equal(t, "2", launchVersion(saved))
	assert.Empty(t, diff(saved, props("2", map[string]any{"team": "gpu"})), "an up without a refresh sees nothing to do, the tag included")
	_, err = p.Update(ctx, &pulumirpc.UpdateRequest{Urn: urn, Id: id, Olds: saved, News: props("2", map[string]any{"team": "ml"})})
	require.NoError(t, err, "a later tag edit alone")
	assert.Equal(t, 1, eks.updates, "replaces no node")

	read, err := p.Read(ctx, &pulumirpc.ReadRequest{Urn: urn, Id: id, Properties: saved})
	require.NoError(t, err)
	assert.Equal(t, "1", launchVersion(read.GetProperties()), "the nodes still come from version 1")
	assert.Equal(t, []string{"launchTemplate"}, diff(read.GetProperties(), props("2", map[string]any{"team": "gpu"})), "after a refresh, the update is planned again")

	eks.blocked = false
	_, err = p.Update(ctx, &pulumirpc.UpdateRequest{Urn: urn, Id: id, Olds: read.GetProperties(), News: props("2", map[string]any{"team": "gpu"})})
	require.NoError(t, err)
	assert.Equal(t, 2, eks.updates)
	read, err = p.Read(ctx, &pulumirpc.ReadRequest{Urn: urn, Id: id, Properties: saved})
	require.NoError(t, err)
	assert.Equal(t, "2", launchVersion(read.GetProperties()))
}
