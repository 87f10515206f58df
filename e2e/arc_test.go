//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/chartrender"
)

// arcCleanupFinalizer is put on a scale set's objects by ARC's chart; the ARC controller
// removes it once it has cleaned up after the scale set.
const arcCleanupFinalizer = "actions.github.com/cleanup-protection"

// standInForARCController does the one thing the ARC controller would do here if pods could
// run: release its cleanup finalizer from objects being deleted. Without it (or the
// controller) the runners' namespace never finishes terminating.
func standInForARCController(ctx context.Context, kube dynamic.Interface) {
	kinds := []schema.GroupVersionResource{
		runnerSets,
		{Version: "v1", Resource: "serviceaccounts"},
		{Version: "v1", Resource: "secrets"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
	for ctx.Err() == nil {
		for _, gvr := range kinds {
			list, err := kube.Resource(gvr).Namespace("").List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, obj := range list.Items {
				fins := obj.GetFinalizers()
				if obj.GetDeletionTimestamp() == nil || !slices.Contains(fins, arcCleanupFinalizer) {
					continue
				}
				keep := slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == arcCleanupFinalizer })
				patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": keep, "resourceVersion": obj.GetResourceVersion()}})
				_, _ = kube.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// arcVersionChange moves the stack's ARC controller chart to an older release and back, as a
// pin change would, and checks that ARC's CRDs in the API server follow it each time — Helm
// alone would have left the first ones forever — without replacing them, which would have
// deleted every scale set.
func arcVersionChange(t *testing.T, ctx context.Context, h *harness, kube dynamic.Interface) {
	const controller = "gha-runner-scale-set-controller"
	set, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, "lux-gpu-t4", metav1.GetOptions{})
	require.NoError(t, err)
	// The scale set's CRD as the API server serves it: the controller-gen version that made
	// it, and whether its schema knows the 0.14 scale-set labels.
	crd := func() (string, bool) {
		u, err := kube.Resource(crds).Get(ctx, "autoscalingrunnersets.actions.github.com", metav1.GetOptions{})
		require.NoError(t, err)
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		require.NotEmpty(t, versions)
		_, labels, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "runnerScaleSetLabels")
		return u.GetAnnotations()["controller-gen.kubebuilder.io/version"], labels
	}
	gen, labels := crd()
	assert.Equal(t, "v0.20.1", gen, "ARC 0.14.2's CRDs")
	assert.True(t, labels)

	upWith := func(chartDir string) map[string]int {
		h.editStackFile(t, func(cfg map[string]any) {
			charts := cfg[config.Project+":"+config.KeyHelmCharts].(map[string]any)
			charts[controller] = map[string]any{"chart": chartDir}
		})
		res, err := h.stack.Up(ctx, optup.SuppressProgress())
		require.NoError(t, err)
		changes := *res.Summary.ResourceChanges
		t.Logf("up: %v", changes)
		return changes
	}
	previous, err := chartrender.ModuleDir(previousARCModule)
	require.NoError(t, err)
	changes := upWith(filepath.Join(previous, "charts", controller))
	assert.Equal(t, 4+1, changes["update"], "the four CRDs and the controller's release")
	assert.Zero(t, changes["replace"]+changes["create"]+changes["delete"], "updated in place")
	gen, labels = crd()
	assert.Equal(t, "v0.11.3", gen, "chart 0.6.1's CRDs")
	assert.False(t, labels)

	changes = upWith(filepath.Join(repoRoot(t), "k8s", "arc", controller))
	assert.Equal(t, 4+1, changes["update"])
	assert.Zero(t, changes["replace"]+changes["create"]+changes["delete"])
	gen, labels = crd()
	assert.Equal(t, "v0.20.1", gen, "back on the pinned chart's CRDs")
	assert.True(t, labels)

	after, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, "lux-gpu-t4", metav1.GetOptions{})
	require.NoError(t, err, "the scale set survived both CRD changes")
	assert.Equal(t, set.GetUID(), after.GetUID(), "never deleted and recreated")
}

// installARCCRDsAsHelmDid creates ARC's CRDs the way a Helm install of the controller chart
// does (crds/, verbatim, no owner): what a cluster deployed before the program managed them
// holds. The next up must adopt them rather than fail with AlreadyExists.
func installARCCRDsAsHelmDid(t *testing.T, ctx context.Context, kube dynamic.Interface) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "k8s", "arc", "gha-runner-scale-set-controller", "crds", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 4)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var obj map[string]any
		require.NoError(t, sigsyaml.Unmarshal(b, &obj))
		_, err = kube.Resource(crds).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "helm"})
		require.NoError(t, err, f)
	}
}
