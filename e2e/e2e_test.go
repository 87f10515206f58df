//go:build e2e

// Package e2e deploys the Kubernetes layer with the real Pulumi engine (Automation API,
// inline program, local file backend) into a real kube-apiserver on 127.0.0.1, and proves
// what mocks cannot: the CRDs arrive before the custom resources, every release installs,
// the API server accepts the NodePool and EC2NodeClass, a second `up` changes nothing, a
// config change updates in place, a bad config sends nothing, and destroy leaves nothing.
//
// Run it with `make e2e`, which builds the tools (hack/e2e-tools.sh) and starts the API
// server (hack/cluster-up.sh). Run directly without them, it fails, naming what is missing.
package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/infra"
	"github.com/luxfi/lux-gpu-ci/internal/chartrender"
	"github.com/luxfi/lux-gpu-ci/internal/verify"
	"github.com/luxfi/lux-gpu-ci/k8s"
	"github.com/luxfi/lux-gpu-ci/versions"
)

const (
	token = "ghp_E2ETOKEN_0123456789"
	// arcModule is the newest ARC version the Go module proxy serves with the scale-set
	// charts: v0.27.6 holds chart 0.6.1, not the 0.14.2 the product pins (0.14.x is in no
	// module version). It still proves the controller/scale-set wiring, names and secret.
	arcModule = "github.com/actions/actions-runner-controller@v0.27.6"
)

var (
	nodePools      = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	ec2NodeClasses = schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"}
	crds           = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	namespaces     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	secrets        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	runnerSets     = schema.GroupVersionResource{Group: "actions.github.com", Version: "v1alpha1", Resource: "autoscalingrunnersets"}
)

func mustEnv(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		t.Fatalf("%s is not set: run the e2e tests with `make e2e` (it builds the tools and starts the API server)", key)
	}
	return v
}

// localCharts are the upstream charts from Go modules, by directory (a local chart has no
// version to pin).
func localCharts(t *testing.T) k8s.Charts {
	local := func(c versions.Chart) versions.Chart {
		dir, err := chartrender.Locate(c, t.TempDir())
		require.NoError(t, err)
		return versions.Chart{Chart: dir}
	}
	arc, err := chartrender.ModuleDir(arcModule)
	require.NoError(t, err)
	return k8s.Charts{
		KarpenterCRD:       local(versions.KarpenterCRDChart),
		Karpenter:          local(versions.KarpenterChart),
		NvidiaDevicePlugin: local(versions.NvidiaDevicePluginChart),
		ARCController:      versions.Chart{Chart: filepath.Join(arc, "charts", "gha-runner-scale-set-controller")},
		ARCScaleSet:        versions.Chart{Chart: filepath.Join(arc, "charts", "gha-runner-scale-set")},
	}
}

// program is the Kubernetes layer as main.go wires it, with the stack's real config but
// fixed stand-ins for what the AWS layer would provide.
func program(kubeconfig string, charts k8s.Charts) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		cfg, err := config.Load(ctx)
		if err != nil {
			return err
		}
		_, err = k8s.New(ctx, "gpu-ci", &k8s.Args{
			Kubeconfig:              pulumi.ToSecret(pulumi.String(kubeconfig)).(pulumi.StringOutput),
			ClusterName:             cfg.ClusterName,
			Region:                  cfg.Region,
			KarpenterNamespace:      "kube-system",
			KarpenterServiceAccount: "karpenter",
			InterruptionQueue:       pulumi.String(cfg.ClusterName),
			NodeRoleName:            pulumi.String("KarpenterNodeRole-" + cfg.ClusterName),
			Tags:                    cfg.Tags,
			Pools:                   cfg.GPUPools,
			GitHub:                  cfg.GitHub,
			SkipAwait:               cfg.HelmSkipAwait,
			Charts:                  charts,
		})
		return err
	}
}

func pool(gpuLimit int, capacity string) string {
	return fmt.Sprintf(`[{"name": "gpu-t4", "instanceTypes": ["g4dn.xlarge", "g5.xlarge"], "capacityTypes": [%q], "gpuLimit": %d, "maxRunners": %d, "runnerScaleSetName": "lux-gpu-t4", "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4"]}]`, capacity, gpuLimit, gpuLimit)
}

func phase(t *testing.T, name string) func() {
	start := time.Now()
	t.Logf("── %s", name)
	return func() { t.Logf("── %s took %s", name, time.Since(start).Round(100*time.Millisecond)) }
}

func TestKubernetesLayerLifecycle(t *testing.T) {
	kubeconfigPath := mustEnv(t, "E2E_KUBECONFIG")
	pulumiBin := mustEnv(t, "E2E_PULUMI")
	pulumiHome := mustEnv(t, "E2E_PULUMI_HOME")
	kubeconfig, err := os.ReadFile(kubeconfigPath)
	require.NoError(t, err)
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	require.NoError(t, err)
	kube, err := dynamic.NewForConfig(restCfg)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	go standInForARCController(ctx, kube)
	work := t.TempDir()
	// The Automation API looks for <root>/bin/pulumi.
	root := filepath.Join(work, "pulumi-root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	require.NoError(t, os.Symlink(pulumiBin, filepath.Join(root, "bin", "pulumi")))
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: root, SkipVersionCheck: true})
	require.NoError(t, err)

	state := filepath.Join(work, "state")
	require.NoError(t, os.MkdirAll(state, 0o755))
	done := phase(t, "create stack")
	stack, err := auto.UpsertStackInlineSource(ctx, "e2e", config.Project, program(string(kubeconfig), localCharts(t)),
		auto.Pulumi(cmd),
		auto.PulumiHome(pulumiHome),
		auto.WorkDir(work),
		auto.SecretsProvider("passphrase"),
		auto.Project(workspace.Project{
			Name:    config.Project,
			Runtime: workspace.NewProjectRuntimeInfo("go", nil),
			Backend: &workspace.ProjectBackend{URL: "file://" + state},
		}),
		auto.EnvVars(map[string]string{
			"PULUMI_CONFIG_PASSPHRASE":                    "e2e",
			"PULUMI_SKIP_UPDATE_CHECK":                    "true",
			"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		}),
	)
	require.NoError(t, err)
	setConfig := func(kv map[string]string) {
		t.Helper()
		for k, v := range kv {
			require.NoError(t, stack.SetConfig(ctx, config.Project+":"+k, auto.ConfigValue{Value: v}))
		}
	}
	require.NoError(t, stack.SetConfig(ctx, "aws:region", auto.ConfigValue{Value: "us-west-2"}))
	require.NoError(t, stack.SetConfig(ctx, config.Project+":githubToken", auto.ConfigValue{Value: token, Secret: true}))
	setConfig(map[string]string{
		"clusterName":   "lux-gpu-ci-e2e",
		"githubOrg":     "luxfi",
		"helmSkipAwait": "true", // no kubelet: workloads never become ready
		"gpuPools":      pool(1, "spot"),
	})
	done()
	defer func() {
		// Leave nothing behind even when an assertion failed half-way.
		cleanup, stop := context.WithTimeout(context.Background(), 3*time.Minute)
		defer stop()
		_, _ = stack.Destroy(cleanup)
		_ = stack.Workspace().RemoveStack(cleanup, "e2e")
	}()

	done = phase(t, "up")
	up, err := stack.Up(ctx, optup.SuppressProgress())
	require.NoError(t, err, "first up")
	done()
	changes := *up.Summary.ResourceChanges
	t.Logf("up: %v", changes)
	assert.Equal(t, 0, changes["update"]+changes["replace"]+changes["delete"], "a fresh stack only creates")
	assert.GreaterOrEqual(t, changes["create"], 15)

	// The API server accepted the Karpenter objects (its CRDs came from the karpenter-crd
	// release in the same update).
	np, err := kube.Resource(nodePools).Get(ctx, "gpu-t4", metav1.GetOptions{})
	require.NoError(t, err, "NodePool")
	limit, _, _ := unstructured.NestedString(np.Object, "spec", "limits", "nvidia.com/gpu")
	assert.Equal(t, "1", limit)
	labels, _, _ := unstructured.NestedStringMap(np.Object, "spec", "template", "metadata", "labels")
	assert.Equal(t, "true", labels["nvidia.com/gpu.present"])
	nc, err := kube.Resource(ec2NodeClasses).Get(ctx, "gpu-t4", metav1.GetOptions{})
	require.NoError(t, err, "EC2NodeClass")
	role, _, _ := unstructured.NestedString(nc.Object, "spec", "role")
	assert.Equal(t, "KarpenterNodeRole-lux-gpu-ci-e2e", role)

	for ns, releases := range map[string][]string{
		"kube-system":          {"karpenter-crd", "karpenter"},
		"nvidia-device-plugin": {"nvidia-device-plugin"},
		"arc-systems":          {"arc"},
		"arc-runners":          {"lux-gpu-t4"},
	} {
		for _, rel := range releases {
			list, err := kube.Resource(secrets).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,status=deployed,name=" + rel})
			require.NoError(t, err)
			assert.Len(t, list.Items, 1, "Helm release %s/%s is deployed", ns, rel)
		}
	}
	creds, err := kube.Resource(secrets).Namespace("arc-runners").Get(ctx, "arc-github-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	data, _, _ := unstructured.NestedStringMap(creds.Object, "data")
	assert.Equal(t, b64(token), data["github_token"], "the credential reached the cluster intact")
	runnerSet, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, "lux-gpu-t4", metav1.GetOptions{})
	require.NoError(t, err, "the scale set's AutoscalingRunnerSet")
	secretName, _, _ := unstructured.NestedString(runnerSet.Object, "spec", "githubConfigSecret")
	assert.Equal(t, "arc-github-credentials", secretName)

	done = phase(t, "gpuci verify against the API server")
	verifyHealthyCluster(t, ctx, restCfg, kube)
	done()

	done = phase(t, "second up: no changes")
	_, err = stack.Preview(ctx, optpreview.ExpectNoChanges(), optpreview.SuppressProgress())
	require.NoError(t, err, "a preview after up must show no changes (no perpetual diff)")
	again, err := stack.Up(ctx, optup.SuppressProgress())
	require.NoError(t, err)
	done()
	for op, n := range *again.Summary.ResourceChanges {
		if op != "same" {
			assert.Zero(t, n, "second up: %s", op)
		}
	}

	done = phase(t, "update: gpuLimit 1 → 2")
	setConfig(map[string]string{"gpuPools": pool(2, "spot")})
	upd, err := stack.Up(ctx, optup.SuppressProgress())
	require.NoError(t, err)
	done()
	changes = *upd.Summary.ResourceChanges
	t.Logf("update: %v", changes)
	assert.Positive(t, changes["update"], "the NodePool (and scale set) update in place")
	assert.Zero(t, changes["replace"]+changes["create"]+changes["delete"], "nothing is replaced")
	np, err = kube.Resource(nodePools).Get(ctx, "gpu-t4", metav1.GetOptions{})
	require.NoError(t, err)
	limit, _, _ = unstructured.NestedString(np.Object, "spec", "limits", "nvidia.com/gpu")
	assert.Equal(t, "2", limit)

	done = phase(t, "bad config: refused before anything is sent")
	before := np.GetResourceVersion()
	setConfig(map[string]string{"gpuPools": pool(2, "preemptible")})
	_, err = stack.Up(ctx, optup.SuppressProgress())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools")
	assert.Contains(t, err.Error(), `"preemptible" is not spot or on-demand`)
	np, err = kube.Resource(nodePools).Get(ctx, "gpu-t4", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before, np.GetResourceVersion(), "the NodePool was not touched")
	setConfig(map[string]string{"gpuPools": pool(2, "spot")})
	done()

	done = phase(t, "destroy")
	_, err = stack.Destroy(ctx, optdestroy.SuppressProgress())
	require.NoError(t, err)
	done()
	for _, ns := range []string{"nvidia-device-plugin", "arc-systems", "arc-runners"} {
		waitGone(t, ctx, kube.Resource(namespaces), ns)
	}
	// Karpenter's CRDs are templates of the karpenter-crd release, so they go with it.
	for _, crd := range []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"} {
		waitGone(t, ctx, kube.Resource(crds), crd)
	}
	// ARC ships its CRDs in the chart's crds/ directory, which Helm installs but never
	// deletes (by design: other installs' objects may use them). No object of ours is left
	// in them.
	sets, err := kube.Resource(runnerSets).Namespace("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, sets.Items, "no AutoscalingRunnerSet is left")
	helm, err := kube.Resource(secrets).Namespace("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	require.NoError(t, err)
	assert.Empty(t, helm.Items, "no Helm release is left in kube-system")
}

// verifyHealthyCluster writes what a healthy cluster would show — a Ready system node,
// Running Karpenter and ARC pods, a Ready NodePool — through the API (status subresources;
// no kubelet or controllers run here), then runs gpuci verify's checks against it.
func verifyHealthyCluster(t *testing.T, ctx context.Context, restCfg *rest.Config, kube dynamic.Interface) {
	t.Helper()
	core, err := kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)
	n, err := core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "system-1", Labels: map[string]string{
		infra.SystemNodeLabel: "system", corev1.LabelInstanceTypeStable: "t3.medium",
	}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	_, err = core.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	defer func() { _ = core.CoreV1().Nodes().Delete(context.Background(), "system-1", metav1.DeleteOptions{}) }()

	for _, p := range []struct{ ns, name, label, value string }{
		{"kube-system", "karpenter-e2e", "app.kubernetes.io/name", "karpenter"},
		{"arc-systems", "arc-gha-rs-controller-e2e", "app.kubernetes.io/part-of", "gha-rs-controller"},
	} {
		pod, err := core.CoreV1().Pods(p.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{p.label: p.value}},
			Spec:       corev1.PodSpec{NodeName: "system-1", Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod.Status.Phase = corev1.PodRunning
		_, err = core.CoreV1().Pods(p.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(t, err)
		defer func(ns, name string) {
			_ = core.CoreV1().Pods(ns).Delete(context.Background(), name, *metav1.NewDeleteOptions(0))
		}(p.ns, p.name)
	}

	np, err := kube.Resource(nodePools).Get(ctx, "gpu-t4", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedSlice(np.Object, []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}, "status", "conditions"))
	_, err = kube.Resource(nodePools).UpdateStatus(ctx, np, metav1.UpdateOptions{})
	require.NoError(t, err)

	cfg, err := config.Parse(func(k string) (string, bool) {
		v, ok := map[string]string{
			"aws:region": "us-west-2", "lux-gpu-ci:githubOrg": "luxfi", "lux-gpu-ci:githubToken": "x",
			"lux-gpu-ci:clusterName": "lux-gpu-ci-e2e", "lux-gpu-ci:gpuPools": pool(1, "spot"),
		}[k]
		return v, ok
	}, nil)
	require.NoError(t, err)
	checks := verify.Run(ctx, core, kube, cfg)
	var out strings.Builder
	verify.Write(&out, checks)
	t.Logf("gpuci verify:\n%s", out.String())
	for _, c := range checks {
		if c.Name == "runner scale set lux-gpu-t4" {
			// ARC chart 0.6.1 (the newest in a Go module) predates scaleSetLabels, so the
			// labels cannot match here; the scale set itself must exist.
			assert.Contains(t, c.Evidence, "runner(s); labels []")
			continue
		}
		assert.True(t, c.OK, "%s — %s", c.Name, c.Evidence)
	}
}

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

// waitGone waits for an object to disappear (namespaces finalize asynchronously).
func waitGone(t *testing.T, ctx context.Context, r dynamic.ResourceInterface, name string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := r.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s still exists after destroy (err=%v)", name, err)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
