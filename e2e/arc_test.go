//go:build e2e

package e2e

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// configuredScaleSets are the scale sets the repository's stack file configures.
func configuredScaleSets(t *testing.T) []string {
	cfg, err := config.ParseStackFileOffline(filepath.Join(repoRoot(t), "Pulumi."+stackName+".yaml"))
	require.NoError(t, err)
	var names []string
	for _, p := range cfg.Pools() {
		names = append(names, p.RunnerScaleSetName)
	}
	if r := cfg.RetryRunner.ScaleSetName; r != "" {
		names = append(names, r)
	}
	slices.Sort(names)
	require.NotEmpty(t, names)
	return names
}

// assertScaleSetsServe checks that every configured scale set is registered in GitHub and
// its AutoscalingRunnerSet exists, is not terminating, and is of ARC version.
func assertScaleSetsServe(t *testing.T, ctx context.Context, kube dynamic.Interface, github *fakeGitHub, version string) {
	t.Helper()
	want := configuredScaleSets(t)
	require.Eventually(t, func() bool { return slices.Equal(want, github.Registered()) }, 10*time.Second, 100*time.Millisecond,
		"every configured scale set is registered in GitHub; registered: %v\nGitHub:\n%s", github.Registered(), github.Log())
	for _, name := range want {
		ars, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "%s's AutoscalingRunnerSet exists", name)
		assert.Nil(t, ars.GetDeletionTimestamp(), "%s is not terminating", name)
		assert.Equal(t, version, ars.GetLabels()[versionLabel], name)
	}
}

// chartsAt copies charts, as the stack installs them (localCharts), with their version and
// appVersion set to version: the same templates released under another version, as helmCharts
// config. For ARC that is a release of another minor, as far as ARC's version rule can tell
// (it reads only the label the chart stamps from appVersion).
func chartsAt(t *testing.T, work, version string, charts ...versions.Chart) map[string]any {
	t.Helper()
	installed := localCharts(t, work)
	out := map[string]any{}
	for _, c := range charts {
		src := installed[c.Name()].(map[string]any)["chart"].(string)
		dst := filepath.Join(work, c.Name()+"-"+version, c.Name())
		require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
		chartYAML := filepath.Join(dst, "Chart.yaml")
		b, err := os.ReadFile(chartYAML)
		require.NoError(t, err)
		var meta map[string]any
		require.NoError(t, sigsyaml.Unmarshal(b, &meta))
		meta["version"], meta["appVersion"] = version, version
		b, err = sigsyaml.Marshal(meta)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(chartYAML, b, 0o644))
		out[c.Name()] = map[string]any{"chart": dst}
	}
	return out
}

// arcMinorUpgrade moves the stack's ARC across a minor version (0.14.2 → 0.15.0) with a job
// running on a scale set: the plan says so (the controller and every scale set replaced), the
// job finishes before its scale set goes, and at the end every configured scale set is
// registered in GitHub again, its AutoscalingRunnerSet of the new version, and a preview is
// empty. The stack stays on 0.15.0 for the phases after it.
func arcMinorUpgrade(t *testing.T, ctx context.Context, h *harness, kube dynamic.Interface, github *fakeGitHub, work string) {
	assertScaleSetsServe(t, ctx, kube, github, "0.14.2")
	scaleSets := len(configuredScaleSets(t))

	moveTo := func(charts map[string]any) {
		h.editStackFile(t, func(cfg map[string]any) {
			all := cfg[config.Project+":"+config.KeyHelmCharts].(map[string]any)
			maps.Copy(all, charts)
		})
	}

	t.Run("0.14.2 → 0.15.0 with a job running", func(t *testing.T) {
		moveTo(chartsAt(t, work, "0.15.0", versions.ARCControllerChart, versions.ARCScaleSetChart))
		const busy = "lux-gpu-t4"
		github.StartJob(t, ctx, busy)
		type result struct {
			res auto.UpResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := h.up(t, ctx)
			done <- result{res, err}
		}()
		// The busy scale set is being removed, and the up waits for its job.
		require.Eventually(t, func() bool {
			ars, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, busy, metav1.GetOptions{})
			return err == nil && ars.GetDeletionTimestamp() != nil
		}, 2*time.Minute, 100*time.Millisecond, "the up removes %s first", busy)
		time.Sleep(time.Second)
		select {
		case r := <-done:
			t.Fatalf("the up finished while a job ran on %s: %v\nGitHub:\n%s", busy, r.err, github.Log())
		default:
		}
		assert.Contains(t, github.Registered(), busy, "the scale set stays in GitHub while its job runs")
		assert.True(t, github.JobsRunning(ctx, busy), "its job runs on: its runner pod is there\n%s", github.Log())
		github.EndJob(t, ctx, busy)

		r := <-done
		require.NoError(t, r.err, "GitHub:\n%s", github.Log())
		changes := *r.res.Summary.ResourceChanges
		t.Logf("up: %v\nGitHub:\n%s", changes, github.Log())
		assert.Equal(t, 1+scaleSets, changes["replace"], "the controller and every scale set reinstalled")
		assert.Zero(t, changes["create"]+changes["delete"]+changes["update"],
			"and nothing else: the edits before it (the system nodes' replacement among them) left nothing to do")
		log := github.Log()
		assert.Less(t, strings.Index(log, "job ended on "+busy), strings.Index(log, "scale set "+busy+" deleted"), "the job finished before its scale set was removed")
		assertScaleSetsServe(t, ctx, kube, github, "0.15.0")
		runnersCanStart(t, ctx, kube)
		_, err := h.preview(t, ctx, optpreview.ExpectNoChanges())
		require.NoError(t, err, "a preview after the upgrade is empty")
	})
}

// runnersCanStart: the account each scale set's runner template names exists and is not
// being deleted, so ARC can create its runners (the ServiceAccount admission refuses a pod whose
// account is missing). A reinstall under the same release name recreates the chart's accounts
// while the old ones wait on ARC's cleanup finalizer.
func runnersCanStart(t tb, ctx context.Context, kube dynamic.Interface) {
	sets, err := kube.Resource(runnerSets).Namespace(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, sets.Items)
	for _, ars := range sets.Items {
		sa, _, _ := unstructured.NestedString(ars.Object, "spec", "template", "spec", "serviceAccountName")
		require.NotEmpty(t, sa, "%s's runners name their account", ars.GetName())
		acct, err := kube.Resource(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}).Namespace(wellknown.RunnersNamespace).Get(ctx, sa, metav1.GetOptions{})
		if assert.NoError(t, err, "%s's runners' account %s exists", ars.GetName(), sa) {
			assert.Nil(t, acct.GetDeletionTimestamp(), "%s's runners' account %s is not being deleted (finalizers %v)", ars.GetName(), sa, acct.GetFinalizers())
		}
	}
}

// installARCCRDsAsHelmDid creates ARC's CRDs the way a Helm install of the controller chart
// does (crds/, as the Helm CLI's manager, with no owner): what a cluster deployed before the
// program managed them holds. The next up must adopt them rather than fail with
// AlreadyExists. Each also carries a field the program does not declare, standing for one a
// later ARC drops: spec.names.categories (outside spec.versions, which an apply replaces whole).
func installARCCRDsAsHelmDid(t *testing.T, ctx context.Context, kube dynamic.Interface) {
	t.Helper()
	for _, crd := range arcCRDs { // the ones the stack retained on destroy
		_ = kube.Resource(crds).Delete(ctx, crd, metav1.DeleteOptions{})
		waitGone(t, ctx, kube.Resource(crds), crd)
	}
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "k8s", "arc", "gha-runner-scale-set-controller", "crds", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 4)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var obj map[string]any
		require.NoError(t, sigsyaml.Unmarshal(b, &obj))
		require.NoError(t, unstructured.SetNestedStringSlice(obj, []string{droppedCategory}, "spec", "names", "categories"))
		_, err = kube.Resource(crds).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "helm"})
		require.NoError(t, err, f)
	}
}

// droppedCategory is the CRD field installARCCRDsAsHelmDid adds for one a later ARC drops.
const droppedCategory = "arc-dropped"

// crdReplaced replaces the AutoscalingRunnerSet CRD's resource and the karpenter-crd release
// (`up --replace`, as a provider change would): the live CRDs are kept and adopted, so no
// scale set and no NodePool is deleted.
func crdReplaced(t *testing.T, ctx context.Context, h *harness, kube dynamic.Interface, github *fakeGitHub) {
	before, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, "lux-gpu-t4", metav1.GetOptions{})
	require.NoError(t, err)
	_, resources := h.state(t, ctx)
	var urn string
	for _, r := range resources {
		if string(r.Type) == "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition" && strings.HasSuffix(string(r.URN), "autoscalingrunnersets.actions.github.com") {
			urn = string(r.URN)
		}
	}
	require.NotEmpty(t, urn, "the state holds the AutoscalingRunnerSet CRD")
	// Karpenter's CRDs are the karpenter-crd release's: a replace of the release uninstalls it.
	karpenterCRDRelease := releaseURN(t, resources, wellknown.KarpenterCRDRelease)
	poolBefore, err := kube.Resource(nodePools).Get(ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err)
	crdBefore, err := kube.Resource(crds).Get(ctx, "nodepools.karpenter.sh", metav1.GetOptions{})
	require.NoError(t, err)

	res, err := h.up(t, ctx, optup.Replace([]string{urn, karpenterCRDRelease}))
	require.NoError(t, err)
	t.Logf("up --replace: %v", *res.Summary.ResourceChanges)
	assert.Equal(t, 2, (*res.Summary.ResourceChanges)["replace"], "the ARC CRD's resource and the karpenter-crd release are replaced")
	after, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, "lux-gpu-t4", metav1.GetOptions{})
	require.NoError(t, err, "the scale set survives its CRD's replacement")
	assert.Equal(t, before.GetUID(), after.GetUID(), "never deleted")
	assertScaleSetsServe(t, ctx, kube, github, "0.14.2")

	// The release was uninstalled and installed again: its CRDs were kept (Helm's keep policy)
	// and adopted, so the NodePool — and on AWS its NodeClaims and their instances — stayed.
	crdAfter, err := kube.Resource(crds).Get(ctx, "nodepools.karpenter.sh", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, crdBefore.GetUID(), crdAfter.GetUID(), "the NodePool CRD was never deleted")
	poolAfter, err := kube.Resource(nodePools).Get(ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err, "the NodePool survives its CRD release's replacement")
	assert.Equal(t, poolBefore.GetUID(), poolAfter.GetUID(), "never deleted")

	// The replacement applied as the same field manager as the resource it replaced, so no
	// earlier manager keeps owning a field: what a later ARC drops, the next apply removes.
	for _, crd := range arcCRDs {
		assert.Equal(t, []string{wellknown.ARCCRDFieldManager + "/Apply"}, crdManagers(t, ctx, kube, crd), "%s: the stack is its only field manager", crd)
	}
}

// crdManagers are the field managers of a CRD itself (not its status), as manager/operation.
func crdManagers(t tb, ctx context.Context, kube dynamic.Interface, name string) []string {
	crd, err := kube.Resource(crds).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	var out []string
	for _, e := range crd.GetManagedFields() {
		if e.Subresource == "" {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
	}
	return out
}

// adoptedFromHelmWithTheirOwnersTaken is the adoption of ARC CRDs a Helm install left
// (installARCCRDsAsHelmDid: Helm owns every field, a category the program does not declare
// included). Where the stack applied that field once too, its apply without it leaves it
// (Helm still owns it): a server-side dry run shows it. gpuci crd-owners names Helm and exits non-zero; --fix makes
// the stack the only owner; the up's apply then removes the field — as the next ARC upgrade
// removes what its new version dropped.
func adoptedFromHelmWithTheirOwnersTaken(t *testing.T, ctx context.Context, h *harness, kube dynamic.Interface, gpuci, kubeconfig string) {
	crdOwners := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, gpuci, append([]string{"crd-owners", "--project", repoRoot(t), "--stack", stackName, "--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	categories := func(crd *unstructured.Unstructured) []string {
		c, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "categories")
		return c
	}

	// Without the takeover: the stack applied the field once (an earlier ARC declared it), so
	// it co-owns it with Helm; its next apply without the field (an ARC that dropped it) would
	// leave it, because Helm still owns it.
	const probe = "autoscalingrunnersets.actions.github.com"
	live, err := kube.Resource(crds).Get(ctx, probe, metav1.GetOptions{})
	require.NoError(t, err)
	applied := map[string]any{"apiVersion": live.GetAPIVersion(), "kind": live.GetKind(), "metadata": map[string]any{"name": probe}, "spec": live.Object["spec"]}
	stackApply := func(dryRun ...string) *unstructured.Unstructured {
		out, err := kube.Resource(crds).Apply(ctx, probe, &unstructured.Unstructured{Object: applied},
			metav1.ApplyOptions{FieldManager: wellknown.ARCCRDFieldManager, Force: true, DryRun: dryRun})
		require.NoError(t, err)
		return out
	}
	stackApply()
	unstructured.RemoveNestedField(applied, "spec", "names", "categories")
	assert.Equal(t, []string{droppedCategory}, categories(stackApply(metav1.DryRunAll)), "without the takeover, Helm keeps a field the stack no longer declares")

	out, err := crdOwners()
	require.Error(t, err, "co-owned CRDs are a problem: %s", out)
	for _, crd := range arcCRDs {
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(crd)+` +helm +co-owned`, out)
	}
	out, err = crdOwners("--fix")
	require.NoError(t, err, out)
	for _, crd := range arcCRDs {
		assert.Equal(t, []string{wellknown.ARCCRDFieldManager + "/Apply"}, crdManagers(t, ctx, kube, crd), "%s: taken over", crd)
	}

	_, err = h.up(t, ctx)
	require.NoError(t, err, "the stack is recreatable right after a destroy, and adopts the CRDs it finds")
	for _, crd := range arcCRDs {
		live, err := kube.Resource(crds).Get(ctx, crd, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, categories(live), "%s: the up removed the field only Helm declared", crd)
		assert.Equal(t, []string{wellknown.ARCCRDFieldManager + "/Apply"}, crdManagers(t, ctx, kube, crd), crd)
	}
	out, err = crdOwners("--json")
	require.NoError(t, err, "nothing left to take over: %s", out)
}
