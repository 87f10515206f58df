//go:build e2e

package e2e

// The ARC controller's stand-in. No pod runs here, so the real gha-runner-scale-set-controller
// cannot; this one carries each of its rules that an upgrade or a destroy of the stack depends
// on, each cited to actions/actions-runner-controller at gha-runner-scale-set-0.14.2, and the
// GitHub side the controller talks to: the org's scale sets and the jobs their runners run.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

const (
	// controllers/actions.github.com/autoscalingrunnerset_controller.go (const block).
	arsFinalizer         = "autoscalingrunnerset.actions.github.com/finalizer"
	arsScaleSetIDAnnot   = "runner-scale-set-id"
	arsScaleSetNameAnnot = "actions.github.com/runner-scale-set-name" // constants.go
	versionLabel         = "app.kubernetes.io/version"                // constants.go, LabelKeyKubernetesVersion
	// scaleSetNamespaceLabel is constants.go's LabelKeyGitHubScaleSetNamespace.
	scaleSetNamespaceLabel = "actions.github.com/scale-set-namespace"
	// arcCleanupFinalizer is put on a scale set's dependents by ARC's chart
	// (charts/gha-runner-scale-set/templates/*.yaml); the controller removes it once the
	// scale set is cleaned up (removeFinalizersFromDependentResources).
	arcCleanupFinalizer = "actions.github.com/cleanup-protection"
)

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// fakeGitHub is the org's side of ARC: the scale sets registered by name, and the jobs running
// on each one's runners. A job is its runner's pod, which runs on a system node until the job
// ends: whatever deletes the pod first (a namespace removed under it, a drain, a cleanup that
// does not wait) killed the job, and GitHub then has it ended, not running: `cancelled` when
// its runner got the shutdown signal, as github_runs_test.go's endOf derives it (the
// conclusion is not what these tests read: a killed job is a killed job). The tests read and
// drive it.
type fakeGitHub struct {
	mu     sync.Mutex
	nextID int
	sets   map[string]int      // scale set name → ID
	jobs   map[string][]string // scale set name → its jobs' runner pods, oldest first
	log    []string
	// core and node are where the jobs' runner pods run (placeJobsOn).
	core kubernetes.Interface
	node string
}

func newFakeGitHub() *fakeGitHub {
	return &fakeGitHub{sets: map[string]int{}, jobs: map[string][]string{}}
}

// placeJobsOn is the system node the jobs' runner pods run on from now on.
func (g *fakeGitHub) placeJobsOn(core kubernetes.Interface, node string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.core, g.node = core, node
}

func (g *fakeGitHub) logf(format string, args ...any) {
	g.log = append(g.log, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// Registered is the scale sets GitHub knows, sorted.
func (g *fakeGitHub) Registered() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for name := range g.sets {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// StartJob has a runner of the scale set pick up a job: the runner's pod, in the runners'
// namespace with the job role (the boundary's), running on the system node placeJobsOn named.
func (g *fakeGitHub) StartJob(t tb, ctx context.Context, set string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	require.NotNil(t, g.core, "placeJobsOn names where jobs run")
	name := fmt.Sprintf("%s-e2e-job-%d", set, len(g.log))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: wellknown.RunnersNamespace, Labels: map[string]string{
			arsScaleSetNameAnnot: set, wellknown.RunnerRoleLabel: wellknown.RunnerRoleJob,
		}},
		Spec: corev1.PodSpec{
			NodeName:                     g.node,
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "runner", Image: versions.RunnerImage, Command: []string{"/home/runner/run.sh"}}},
		},
	}
	_, err := g.core.CoreV1().Pods(wellknown.RunnersNamespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "the job's runner pod")
	require.Eventually(t, func() bool {
		p, err := g.core.CoreV1().Pods(wellknown.RunnersNamespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	}, 30*time.Second, 100*time.Millisecond, "the job's runner runs")
	g.jobs[set] = append(g.jobs[set], name)
	g.logf("job started on %s (runner pod %s)", set, name)
}

// running reports which of the scale set's jobs still run: their runner pods are there and
// not going.
func (g *fakeGitHub) running(ctx context.Context, set string) (alive, killed []string) {
	g.mu.Lock()
	names, core := slices.Clone(g.jobs[set]), g.core
	g.mu.Unlock()
	for _, n := range names {
		p, err := core.CoreV1().Pods(wellknown.RunnersNamespace).Get(ctx, n, metav1.GetOptions{})
		if err == nil && p.DeletionTimestamp == nil {
			alive = append(alive, n)
		} else {
			killed = append(killed, n)
		}
	}
	return alive, killed
}

// JobsRunning reports whether every job started on the scale set still runs: none was killed.
func (g *fakeGitHub) JobsRunning(ctx context.Context, set string) bool {
	alive, killed := g.running(ctx, set)
	return len(alive) > 0 && len(killed) == 0
}

// EndJob ends the scale set's oldest job: its runner exits and ARC deletes the pod. A job
// whose pod was gone already was killed, which fails the test.
func (g *fakeGitHub) EndJob(t tb, ctx context.Context, set string) {
	g.mu.Lock()
	require.NotEmpty(t, g.jobs[set], "a job runs on %s", set)
	name := g.jobs[set][0]
	g.jobs[set] = g.jobs[set][1:]
	g.mu.Unlock()
	pods := g.core.CoreV1().Pods(wellknown.RunnersNamespace)
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil || p.DeletionTimestamp != nil {
		g.logf("job killed on %s: its runner pod %s went before the job ended", set, name)
		t.Errorf("the job on %s was killed: its runner pod %s went before the job ended (%v)", set, name, err)
		return
	}
	require.NoError(t, pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	g.logf("job ended on %s", set)
}

// Log is what happened on the GitHub side, in order.
func (g *fakeGitHub) Log() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Join(g.log, "\n")
}

// createRunnerScaleSet: a scale set of the name is adopted if GitHub has it, else created
// (autoscalingrunnerset_controller.go, createRunnerScaleSet: GetRunnerScaleSet, then
// CreateRunnerScaleSet).
func (g *fakeGitHub) createRunnerScaleSet(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.sets[name]; ok {
		g.logf("scale set %s adopted (id %d)", name, id)
		return id
	}
	g.nextID++
	g.sets[name] = g.nextID
	g.logf("scale set %s registered (id %d)", name, g.nextID)
	return g.nextID
}

// deleteRunnerScaleSet removes a scale set by ID, unless a runner still has a job: GitHub
// refuses to remove a busy runner, and the controller requeues
// (ephemeralrunner_controller.go: RemoveRunner, scaleset.JobStillRunningError). A killed job
// is over (failed), and holds nothing.
func (g *fakeGitHub) deleteRunnerScaleSet(ctx context.Context, name string, id int) (done bool) {
	if alive, _ := g.running(ctx, name); len(alive) > 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sets[name] == id {
		delete(g.sets, name)
		g.logf("scale set %s deleted (id %d)", name, id)
	}
	return true
}

// arcStandIn reconciles AutoscalingRunnerSets as the controller does.
type arcStandIn struct {
	kube dynamic.Interface
	// meta reads only objects' metadata, as a controller that handles finalizers does: the
	// dependents' pass would otherwise read every Secret, Helm's release records included.
	meta   metadata.Interface
	github *fakeGitHub
}

func runARCStandIn(ctx context.Context, kube dynamic.Interface, meta metadata.Interface, github *fakeGitHub) {
	a := arcStandIn{kube: kube, meta: meta, github: github}
	for ctx.Err() == nil {
		a.reconcile(ctx)
		time.Sleep(400 * time.Millisecond) // ARC reacts to watch events; this is as quick as these tests need and keeps the API server unloaded
	}
}

// buildVersion is the running controller's version, or "" when none runs: the controller's
// binary carries it (build.Version), and the chart runs the image of its appVersion and labels
// the Deployment with it (charts/gha-runner-scale-set-controller/templates/_helpers.tpl).
// Its image is the controller's, which the listeners run too.
func (a arcStandIn) buildVersion(ctx context.Context) (version, image string) {
	list, err := a.kube.Resource(deployments).Namespace(wellknown.ARCNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=gha-rs-controller"})
	if err != nil {
		return "", ""
	}
	for _, d := range list.Items {
		if d.GetDeletionTimestamp() == nil {
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			if len(containers) > 0 {
				image, _ = containers[0].(map[string]any)["image"].(string)
			}
			return d.GetLabels()[versionLabel], image
		}
	}
	return "", ""
}

func (a arcStandIn) reconcile(ctx context.Context) {
	build, image := a.buildVersion(ctx)
	sets, err := a.kube.Resource(runnerSets).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, ars := range sets.Items {
		a.reconcileSet(ctx, &ars, build, image)
	}
	if build != "" { // the controller releases them
		a.releaseDependents(ctx, sets.Items)
	}
}

// reconcileSet follows AutoscalingRunnerSetReconciler.Reconcile
// (autoscalingrunnerset_controller.go) in its order: deletion, the version rule, the
// finalizer, the scale set in GitHub.
func (a arcStandIn) reconcileSet(ctx context.Context, ars *unstructured.Unstructured, build, image string) {
	name := ars.GetName()
	scaleSet, _, _ := unstructured.NestedString(ars.Object, "spec", "runnerScaleSetName")
	if scaleSet == "" {
		scaleSet = name
	}
	// Only a running controller reconciles: with its Deployment gone, a deleted scale set
	// keeps its finalizer and its uninstall waits until it times out, as on a real cluster
	// (a destroy or upgrade that removed the controller first would hang: #42).
	if build == "" {
		return
	}
	if ars.GetDeletionTimestamp() != nil {
		// Cleanup: the listener and the ephemeral runner sets go first (their runners wait for
		// their jobs), then the scale set is deleted from GitHub, then the finalizer.
		if !slices.Contains(ars.GetFinalizers(), arsFinalizer) {
			return
		}
		_ = a.kube.Resource(pods).Namespace(wellknown.ARCNamespace).Delete(ctx, listenerName(ars), metav1.DeleteOptions{})
		id, _ := strconv.Atoi(ars.GetAnnotations()[arsScaleSetIDAnnot])
		if !a.github.deleteRunnerScaleSet(ctx, scaleSet, id) {
			return
		}
		a.patchMeta(ctx, runnerSets, ars, map[string]any{"finalizers": without(ars.GetFinalizers(), arsFinalizer)})
		return
	}
	// The version rule: IsVersionAllowed (apis/actions.github.com/v1alpha1/version.go) allows
	// only the same major.minor; anything else is deleted.
	if v := ars.GetLabels()[versionLabel]; v != build && config.MajorMinor(v) != config.MajorMinor(build) {
		a.github.mu.Lock()
		a.github.logf("controller %s deletes AutoscalingRunnerSet %s/%s of version %s", build, ars.GetNamespace(), name, v)
		a.github.mu.Unlock()
		_ = a.kube.Resource(runnerSets).Namespace(ars.GetNamespace()).Delete(ctx, name, metav1.DeleteOptions{})
		return
	}
	if !slices.Contains(ars.GetFinalizers(), arsFinalizer) {
		a.patchMeta(ctx, runnerSets, ars, map[string]any{"finalizers": append(slices.Clone(ars.GetFinalizers()), arsFinalizer)})
		return
	}
	// GitHub puts the scale set in the spec's runner group (Default when none is named), and
	// ARC records which (wellknown.ARCRunnerGroupAnnotation): on create, and on a later change
	// of the spec's group (autoscalingrunnerset_controller.go:200-205, 563, 611). The fake org
	// has every group it is asked for.
	group, _, _ := unstructured.NestedString(ars.Object, "spec", "runnerGroup")
	if group == "" {
		group = "Default"
	}
	if id, err := strconv.Atoi(ars.GetAnnotations()[arsScaleSetIDAnnot]); err != nil || id <= 0 {
		id := a.github.createRunnerScaleSet(scaleSet)
		a.patchMeta(ctx, runnerSets, ars, map[string]any{
			"annotations": map[string]string{arsScaleSetIDAnnot: strconv.Itoa(id), arsScaleSetNameAnnot: scaleSet, wellknown.ARCRunnerGroupAnnotation: group},
		})
		return
	}
	if current, ok := ars.GetAnnotations()[wellknown.ARCRunnerGroupAnnotation]; !ok || !strings.EqualFold(current, group) {
		a.patchMeta(ctx, runnerSets, ars, map[string]any{"annotations": map[string]string{wellknown.ARCRunnerGroupAnnotation: group}})
		return
	}
	a.ensureListener(ctx, ars, image)
}

var pods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// listenerName is the listener's pod's name. ARC's also carries a hash of the scale set's
// namespace (scaleSetListenerName, resourcebuilder.go).
func listenerName(ars *unstructured.Unstructured) string { return ars.GetName() + "-listener" }

// ensureListener runs a registered scale set's listener as the controller does, in the
// controller's namespace (resourcebuilder.go, newScaleSetListenerPod): one container,
// "listener", of the controller's image, running /ghalistener, labelled with its scale set's
// name and namespace (newAutoScalingListener's labels, lines 103-109, which the pod copies).
// Deleted, it is started again on the next pass, as the controller re-creates it. The
// stack sets no listenerTemplate, so the pod requests nothing and selects no node: the
// scheduler places it where it fits, which is a system node (the GPU nodes are tainted).
func (a arcStandIn) ensureListener(ctx context.Context, ars *unstructured.Unstructured, image string) {
	if image == "" {
		return
	}
	pod := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: listenerName(ars), Namespace: wellknown.ARCNamespace, Labels: map[string]string{
			"app.kubernetes.io/component": "runner-scale-set-listener",
			wellknown.ScaleSetLabel:       ars.GetName(),
			scaleSetNamespaceLabel:        ars.GetNamespace(),
		}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "listener", Image: image, Command: []string{"/ghalistener"}}},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod)
	if err != nil {
		return
	}
	// AlreadyExists is the usual answer: the listener runs.
	_, _ = a.kube.Resource(pods).Namespace(wellknown.ARCNamespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
}

// patchMeta merges meta into obj's metadata, at the resourceVersion read (a conflict is
// retried on the next pass, as a controller's requeue would).
func (a arcStandIn) patchMeta(ctx context.Context, gvr schema.GroupVersionResource, obj metav1.Object, meta map[string]any) {
	meta["resourceVersion"] = obj.GetResourceVersion()
	patch, _ := json.Marshal(map[string]any{"metadata": meta})
	_, _ = a.kube.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
}

func without(xs []string, x string) []string {
	return slices.DeleteFunc(slices.Clone(xs), func(y string) bool { return y == x })
}

// cleanupDependents are the dependents a scale set names in its annotations, by annotation,
// and their kind: what removeFinalizersFromDependentResources
// (autoscalingrunnerset_controller.go) releases at the end of the scale set's cleanup.
var cleanupDependents = map[string]schema.GroupVersionResource{
	"actions.github.com/cleanup-github-secret-name":                   {Version: "v1", Resource: "secrets"},
	"actions.github.com/cleanup-manager-role-binding":                 {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"actions.github.com/cleanup-manager-role-name":                    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"actions.github.com/cleanup-kubernetes-mode-role-binding-name":    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"actions.github.com/cleanup-kubernetes-mode-role-name":            {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"actions.github.com/cleanup-kubernetes-mode-service-account-name": {Version: "v1", Resource: "serviceaccounts"},
	"actions.github.com/cleanup-no-permission-service-account-name":   {Version: "v1", Resource: "serviceaccounts"},
}

// releaseDependents removes the cleanup-protection finalizer from a deleted dependent once no
// scale set that names it still holds its own finalizer: the controller releases a scale
// set's dependents when that scale set's cleanup is done (removeFinalizersFromDependentResources),
// and a dependent no scale set names has nothing left to wait for. Without it a scale set's
// uninstall and the runners' namespace never finish.
func (a arcStandIn) releaseDependents(ctx context.Context, sets []unstructured.Unstructured) {
	type key struct {
		gvr             schema.GroupVersionResource
		namespace, name string
	}
	held := map[key]bool{}
	for _, s := range sets {
		if !slices.Contains(s.GetFinalizers(), arsFinalizer) {
			continue
		}
		for annotation, gvr := range cleanupDependents {
			if name := s.GetAnnotations()[annotation]; name != "" {
				held[key{gvr, s.GetNamespace(), name}] = true
			}
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "serviceaccounts"},
		{Version: "v1", Resource: "secrets"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	} {
		list, err := a.meta.Resource(gvr).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, obj := range list.Items {
			fins := obj.GetFinalizers()
			if obj.GetDeletionTimestamp() == nil || !slices.Contains(fins, arcCleanupFinalizer) || held[key{gvr, obj.GetNamespace(), obj.GetName()}] {
				continue
			}
			a.patchMeta(ctx, gvr, &obj, map[string]any{"finalizers": without(fins, arcCleanupFinalizer)})
		}
	}
}
