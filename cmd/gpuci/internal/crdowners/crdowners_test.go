package crdowners_test

// Field ownership of ARC's CRDs: the managers other than the stack's are found, and taken
// over into the stack's one entry with the union of their fields. make e2e proves the effect
// on a real API server: after Take, the stack's next apply removes what it no longer declares.

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/crdowners"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

var now = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func entry(manager string, op metav1.ManagedFieldsOperationType, subresource, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{
		Manager: manager, Operation: op, Subresource: subresource, APIVersion: "apiextensions.k8s.io/v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)},
	}
}

// adopted is what an ARC CRD holds after the stack adopted a Helm install's and was then
// replaced once under pulumi-kubernetes' random manager names: Helm owns spec.versions and an
// annotation, an earlier resource of the stack owns spec.names.shortNames (which a later ARC
// dropped), and the API server owns the status.
func adopted() []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{
		entry(wellknown.ARCCRDFieldManager, metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:group":{},"f:names":{"f:kind":{}}}}`),
		entry("pulumi-kubernetes-3f1a2b", metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:group":{},"f:names":{"f:shortNames":{}}}}`),
		entry("helm", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:group":{},"f:versions":{}},"f:metadata":{"f:annotations":{".":{},"f:controller-gen.kubebuilder.io/version":{}}}}`),
		entry("kube-apiserver", metav1.ManagedFieldsOperationUpdate, "status", `{"f:status":{"f:acceptedNames":{}}}`),
	}
}

func fieldSet(t *testing.T, e metav1.ManagedFieldsEntry) *fieldpath.Set {
	t.Helper()
	var s fieldpath.Set
	require.NoError(t, s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)))
	return &s
}

func TestOtherManagersAreEveryManagerOfTheCRDButTheStacksApply(t *testing.T) {
	crd := &unstructured.Unstructured{}
	crd.SetManagedFields(adopted())
	assert.Equal(t, []string{"helm", "pulumi-kubernetes-3f1a2b"}, crdowners.OtherManagers(crd), "the status is the API server's, not an owner of the CRD")

	ownOnly := &unstructured.Unstructured{}
	ownOnly.SetManagedFields([]metav1.ManagedFieldsEntry{adopted()[0], adopted()[3]})
	assert.Empty(t, crdowners.OtherManagers(ownOnly))

	// The stack's name with Update (a client-side write) is not the stack's apply.
	updated := &unstructured.Unstructured{}
	updated.SetManagedFields([]metav1.ManagedFieldsEntry{entry(wellknown.ARCCRDFieldManager, metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{}}`)})
	assert.Equal(t, []string{wellknown.ARCCRDFieldManager}, crdowners.OtherManagers(updated))
}

func TestTakenOverMergesEveryOwnersFieldsIntoTheStacks(t *testing.T) {
	in := adopted()
	out, err := crdowners.TakenOver(in, "apiextensions.k8s.io/v1", now)
	require.NoError(t, err)
	require.Len(t, out, 2, "the stack's entry and the status entry")
	stack := out[0]
	assert.Equal(t, wellknown.ARCCRDFieldManager, stack.Manager)
	assert.Equal(t, metav1.ManagedFieldsOperationApply, stack.Operation)
	assert.Equal(t, "apiextensions.k8s.io/v1", stack.APIVersion)
	assert.Equal(t, in[3], out[1], "the status entry is kept as it was")

	got := fieldSet(t, stack)
	for _, e := range in[:3] {
		owned := fieldSet(t, e)
		assert.True(t, owned.Difference(got).Empty(), "the stack owns every field %s owned: missing %v", e.Manager, owned.Difference(got))
	}
	assert.False(t, got.Has(fieldpath.MakePathOrDie("status")), "not the status")
	assert.True(t, got.Has(fieldpath.MakePathOrDie("spec", "names", "shortNames")), "the earlier resource's field")
	assert.True(t, got.Has(fieldpath.MakePathOrDie("metadata", "annotations", "controller-gen.kubebuilder.io/version")), "Helm's field")

	// A CRD the stack never applied (taken over before its first up) gets the entry too.
	fresh, err := crdowners.TakenOver(in[2:], "apiextensions.k8s.io/v1", now)
	require.NoError(t, err)
	require.Len(t, fresh, 2)
	assert.Equal(t, wellknown.ARCCRDFieldManager, fresh[0].Manager)
	assert.True(t, fieldSet(t, in[2]).Equals(fieldSet(t, fresh[0])))
}

func crdObject(name, group string, fields []metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name, "resourceVersion": "7"},
		"spec":     map[string]any{"group": group},
	}}
	u.SetManagedFields(fields)
	return u
}

func TestTakeRewritesOnlyARCsCRDs(t *testing.T) {
	helmOnly := []metav1.ManagedFieldsEntry{adopted()[2]}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{wellknown.CustomResourceDefinitions: "CustomResourceDefinitionList"},
		crdObject("autoscalingrunnersets.actions.github.com", "actions.github.com", adopted()),
		crdObject("ephemeralrunners.actions.github.com", "actions.github.com", []metav1.ManagedFieldsEntry{adopted()[0]}),
		// Karpenter's CRDs are its CRD release's, which Helm upgrades by its own patches.
		crdObject("nodepools.karpenter.sh", "karpenter.sh", helmOnly),
	)
	ctx := context.Background()

	before, err := crdowners.Examine(ctx, dyn)
	require.NoError(t, err)
	assert.Equal(t, []crdowners.CRD{
		{Name: "autoscalingrunnersets.actions.github.com", OtherManagers: []string{"helm", "pulumi-kubernetes-3f1a2b"}},
		{Name: "ephemeralrunners.actions.github.com"},
	}, before)

	taken, err := crdowners.Take(ctx, dyn, now)
	require.NoError(t, err)
	assert.Equal(t, []crdowners.CRD{
		{Name: "autoscalingrunnersets.actions.github.com", OtherManagers: []string{"helm", "pulumi-kubernetes-3f1a2b"}, TakenOver: true},
		{Name: "ephemeralrunners.actions.github.com"},
	}, taken)

	after, err := crdowners.Examine(ctx, dyn)
	require.NoError(t, err)
	for _, c := range after {
		assert.Empty(t, c.OtherManagers, c.Name)
	}
	require.Len(t, after, 2)
	karpenter, err := dyn.Resource(wellknown.CustomResourceDefinitions).Get(ctx, "nodepools.karpenter.sh", metav1.GetOptions{})
	require.NoError(t, err)
	kept := karpenter.GetManagedFields()
	require.Len(t, kept, 1, "Karpenter's CRDs are left to Helm")
	assert.Equal(t, "helm", kept[0].Manager)
	assert.True(t, fieldSet(t, helmOnly[0]).Equals(fieldSet(t, kept[0])), "Karpenter's CRDs are left to Helm")
}

// The API server writes a new CRD's status right after creating it: a patch computed before
// that write is refused (409), and Take reads the CRD again and recomputes it.
func TestTakeRetriesWhenTheCRDChangedMeanwhile(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{wellknown.CustomResourceDefinitions: "CustomResourceDefinitionList"},
		crdObject("autoscalingrunnersets.actions.github.com", "actions.github.com", adopted()),
	)
	patches := 0
	dyn.PrependReactor("patch", "customresourcedefinitions", func(action k8stesting.Action) (bool, runtime.Object, error) {
		patches++
		if patches == 1 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "autoscalingrunnersets.actions.github.com", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	taken, err := crdowners.Take(context.Background(), dyn, now)
	require.NoError(t, err)
	assert.Equal(t, 2, patches, "refused once, then recomputed and sent again")
	require.Len(t, taken, 1)
	assert.True(t, taken[0].TakenOver)
}
