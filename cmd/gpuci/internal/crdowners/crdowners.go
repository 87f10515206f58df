// Package crdowners is `gpuci crd-owners`: which field managers own ARC's CRDs besides the
// stack, and the one-time step that makes the stack their only owner.
//
// The stack applies ARC's CRDs with server-side apply, as wellknown.ARCCRDFieldManager. The
// API server removes a field the applier no longer sends only if no other manager owns it, so
// a field that a later ARC drops stays in the live CRD for as long as another manager holds it.
// spec.versions (every schema and stored version) is an atomic list, which the stack's forced
// apply replaces whole; what stays is outside it: spec.names (shortNames, categories, …),
// spec.conversion, labels and annotations. Other managers are there when:
//   - the CRDs were adopted from a Helm install of the controller chart's crds/: "helm" for
//     the Helm CLI, "pulumi-resource-kubernetes" for the Helm inside pulumi-kubernetes (an
//     earlier stack's controller release);
//   - an earlier program applied them as pulumi-kubernetes' per-resource manager
//     ("pulumi-kubernetes-<random>"), a new one at every replace or rename.
//
// pulumi-kubernetes takes over only its own and kubectl's client-side managers, and only on
// an update (fixCSAFieldManagers, provider/pkg/await/await.go at v4.32.0); nothing takes over
// "helm" or an earlier Apply manager. Take does, with the API server's own field sets
// (structured-merge-diff): it merges every other manager's fields of the CRD into the
// stack's and drops them, so the stack's next apply removes whatever it no longer declares.
// It never changes the CRD itself, and the status subresource stays the API server's.
package crdowners

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// CRD is one of ARC's CRDs and the managers of its fields other than the stack's.
type CRD struct {
	Name          string   `json:"name"`
	OtherManagers []string `json:"otherManagers"`
	// TakenOver says the stack now owns what OtherManagers owned (Take only).
	TakenOver bool `json:"takenOver,omitempty"`
}

// Examine lists ARC's CRDs in the cluster (by API group, so any ARC version's) and their
// other managers.
func Examine(ctx context.Context, dyn dynamic.Interface) ([]CRD, error) {
	crds, err := arcCRDs(ctx, dyn)
	if err != nil {
		return nil, err
	}
	var out []CRD
	for _, c := range crds {
		out = append(out, CRD{Name: c.GetName(), OtherManagers: OtherManagers(&c)})
	}
	return out, nil
}

// Take makes the stack the only manager of every ARC CRD's fields (see the package comment).
// Each patch carries the resourceVersion it was computed from (as client-go's csaupgrade
// does), so a CRD written meanwhile — the API server writes a new CRD's status right after its
// creation — is read again and the patch recomputed.
func Take(ctx context.Context, dyn dynamic.Interface, now time.Time) ([]CRD, error) {
	crds, err := arcCRDs(ctx, dyn)
	if err != nil {
		return nil, err
	}
	client := dyn.Resource(wellknown.CustomResourceDefinitions)
	var out []CRD
	for _, c := range crds {
		result := CRD{Name: c.GetName()}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := client.Get(ctx, c.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			result.OtherManagers = OtherManagers(live)
			if len(result.OtherManagers) == 0 {
				return nil
			}
			fields, err := TakenOver(live.GetManagedFields(), live.GetAPIVersion(), now)
			if err != nil {
				return err
			}
			patch, err := json.Marshal([]map[string]any{
				{"op": "replace", "path": "/metadata/managedFields", "value": fields},
				{"op": "replace", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
			})
			if err != nil {
				return err
			}
			_, err = client.Patch(ctx, c.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
			result.TakenOver = err == nil
			return err
		})
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.GetName(), err)
		}
		out = append(out, result)
	}
	return out, nil
}

// OtherManagers are the managers of crd's own fields (not its status) other than the stack's
// Apply manager, sorted, each once.
func OtherManagers(crd *unstructured.Unstructured) []string {
	var out []string
	for _, e := range crd.GetManagedFields() {
		if e.Subresource == "" && !ours(e) {
			out = append(out, e.Manager)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TakenOver returns entries with the fields of every manager of the object itself merged
// into the stack's Apply entry (created if missing, at apiVersion); status entries are kept.
func TakenOver(entries []metav1.ManagedFieldsEntry, apiVersion string, now time.Time) ([]metav1.ManagedFieldsEntry, error) {
	union := fieldpath.NewSet()
	var kept []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.Subresource != "" {
			kept = append(kept, e)
			continue
		}
		if e.FieldsV1 == nil {
			continue
		}
		var s fieldpath.Set
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("the fields of manager %s: %w", e.Manager, err)
		}
		union = union.Union(&s)
	}
	raw, err := union.ToJSON()
	if err != nil {
		return nil, err
	}
	stack := metav1.ManagedFieldsEntry{
		Manager:    wellknown.ARCCRDFieldManager,
		Operation:  metav1.ManagedFieldsOperationApply,
		APIVersion: apiVersion,
		Time:       &metav1.Time{Time: now.UTC().Truncate(time.Second)},
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: raw},
	}
	return append([]metav1.ManagedFieldsEntry{stack}, kept...), nil
}

func ours(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == wellknown.ARCCRDFieldManager && e.Operation == metav1.ManagedFieldsOperationApply
}

func arcCRDs(ctx context.Context, dyn dynamic.Interface) ([]unstructured.Unstructured, error) {
	list, err := dyn.Resource(wellknown.CustomResourceDefinitions).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	var out []unstructured.Unstructured
	for _, c := range list.Items {
		if g, _, _ := unstructured.NestedString(c.Object, "spec", "group"); g == wellknown.ARCGroup {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}
