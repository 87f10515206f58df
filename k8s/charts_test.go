package k8s_test

// Our Helm values rendered through the real upstream charts (Helm SDK, charts from the Go
// modules go.mod pins), and the pins that must agree.

import (
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	awsapis "github.com/aws/karpenter-provider-aws/pkg/apis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/chartrender"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
	"github.com/luxfi/lux-gpu-ci/k8s/nodepools"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// chartDir locates a pinned chart in its Go module; failing to, the test fails.
func chartDir(t *testing.T, c versions.Chart) string {
	t.Helper()
	require.NotEmpty(t, c.Module, "chart %s has no Go module", c.Chart)
	dir, err := chartrender.Locate(c, t.TempDir())
	require.NoError(t, err, "the chart's module must be available (module proxy or cache)")
	return dir
}

func renderChart(t *testing.T, dir, release, namespace string, values map[string]any) []chartrender.Object {
	t.Helper()
	objs, err := chartrender.Render(dir, release, namespace, values)
	require.NoError(t, err)
	return objs
}

func find(t *testing.T, objs []chartrender.Object, kind, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			require.NoError(t, yaml.Unmarshal([]byte(o.YAML), into))
			return
		}
	}
	var have []string
	for _, o := range objs {
		have = append(have, o.Kind+"/"+o.Name)
	}
	t.Fatalf("no %s/%s rendered; have %v", kind, name, have)
}

func TestKarpenterChartRendersOurValues(t *testing.T) {
	// Two system nodes (prod): a replica on each, which the chart's anti-affinity spreads and
	// its disruption budget drains one at a time.
	objs := renderChart(t, chartDir(t, versions.KarpenterChart), "karpenter", "kube-system", k8s.KarpenterValues("lux-gpu-ci", "us-west-2", "lux-gpu-ci", 3))
	var two appsv1.Deployment
	find(t, objs, "Deployment", "karpenter", &two)
	require.NotNil(t, two.Spec.Replicas)
	assert.Equal(t, int32(2), *two.Spec.Replicas, "two replicas on two or more system nodes")
	require.NotNil(t, two.Spec.Template.Spec.Affinity)
	require.NotNil(t, two.Spec.Template.Spec.Affinity.PodAntiAffinity)
	anti := two.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, anti, 1)
	assert.Equal(t, "kubernetes.io/hostname", anti[0].TopologyKey, "on different nodes")
	var pdb policyv1.PodDisruptionBudget
	find(t, objs, "PodDisruptionBudget", "karpenter", &pdb)
	require.NotNil(t, pdb.Spec.MaxUnavailable)
	assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue(), "a drain takes one at a time")

	objs = renderChart(t, chartDir(t, versions.KarpenterChart), "karpenter", "kube-system", k8s.KarpenterValues("lux-gpu-ci", "us-west-2", "lux-gpu-ci", 1))
	var dep appsv1.Deployment
	find(t, objs, "Deployment", "karpenter", &dep)
	require.NotNil(t, dep.Spec.Replicas)
	assert.Equal(t, int32(1), *dep.Spec.Replicas, "one replica fits one system node")
	assert.Equal(t, "kube-system", dep.Namespace)
	pod := dep.Spec.Template.Spec
	assert.Equal(t, "karpenter", pod.ServiceAccountName, "the Pod Identity association names this ServiceAccount")
	require.Len(t, pod.Containers, 1)
	env := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "lux-gpu-ci", env["CLUSTER_NAME"])
	assert.Equal(t, "lux-gpu-ci", env["INTERRUPTION_QUEUE"])
	assert.Equal(t, "us-west-2", env["AWS_REGION"])
	assert.Equal(t, "250m", pod.Containers[0].Resources.Requests.Cpu().String())
	assert.Equal(t, "512Mi", pod.Containers[0].Resources.Requests.Memory().String())

	var sa corev1.ServiceAccount
	find(t, objs, "ServiceAccount", "karpenter", &sa)
	for _, o := range objs {
		assert.NotEqual(t, "CustomResourceDefinition", o.Kind, "CRDs come from the karpenter-crd chart")
	}
}

// The CRDs the karpenter-crd chart installs are the ones the CRD tests validate against.
func TestKarpenterCRDChartInstallsTheCRDsWeValidateAgainst(t *testing.T) {
	objs := renderChart(t, chartDir(t, versions.KarpenterCRDChart), "karpenter-crd", "kube-system", k8s.KarpenterCRDValues())
	for name, embedded := range map[string][]byte{
		"nodepools.karpenter.sh":           awsapis.NodePoolCRD,
		"ec2nodeclasses.karpenter.k8s.aws": awsapis.EC2NodeClassCRD,
	} {
		var installed, validated apiextensionsv1.CustomResourceDefinition
		find(t, objs, "CustomResourceDefinition", name, &installed)
		require.NoError(t, yaml.Unmarshal(embedded, &validated))
		assert.Equal(t, validated.Spec, installed.Spec, "%s: chart and Go module disagree", name)
	}
	// Through the chart's own additionalAnnotations, every CRD it installs carries Helm's keep
	// policy: an uninstall of the release (a replace, a rename, a destroy) leaves them and the
	// NodePools, EC2NodeClasses and NodeClaims they hold.
	crds := 0
	for _, o := range objs {
		if o.Kind != "CustomResourceDefinition" {
			continue
		}
		crds++
		var crd apiextensionsv1.CustomResourceDefinition
		find(t, objs, "CustomResourceDefinition", o.Name, &crd)
		assert.Equal(t, "keep", crd.Annotations["helm.sh/resource-policy"], o.Name)
	}
	assert.GreaterOrEqual(t, crds, 3, "nodepools, nodeclaims, ec2nodeclasses at least")
}

func TestDevicePluginChartSchedulesOnGPUNodesOnly(t *testing.T) {
	objs := renderChart(t, chartDir(t, versions.NvidiaDevicePluginChart), "nvidia-device-plugin", wellknown.DevicePluginNamespace, k8s.DevicePluginValues())

	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", "nvidia-device-plugin", &ds)
	pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
	require.NotEmpty(t, pod.Spec.Containers)
	assert.Equal(t, versions.NvidiaDevicePluginImage, pod.Spec.Containers[0].Image, "gpuci cost prices the image the chart runs (nvcr.io: never through the cache)")

	np := nodepools.NodePoolFor(config.DefaultPool())
	gpuNode := &corev1.Node{ObjectMeta: v1.ObjectMeta{Labels: map[string]string{
		"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "g4dn.xlarge", "karpenter.sh/nodepool": "gpu-spot",
	}}, Spec: corev1.NodeSpec{Taints: np.Spec.Template.Spec.Taints}}
	for k, v := range np.Spec.Template.Labels {
		gpuNode.Labels[k] = v
	}
	systemNode := &corev1.Node{ObjectMeta: v1.ObjectMeta{Labels: map[string]string{
		"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "t3.medium", "lux-gpu-ci.luxfi.com/node-role": "system",
	}}}

	// Every check below loops over the GPU node's taints: without the taint they would pass
	// by checking nothing ("a container-form runner keeps off GPU nodes" most of all).
	require.Equal(t, []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}, gpuNode.Spec.Taints)
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	ok, err := affinity.Match(gpuNode)
	require.NoError(t, err)
	assert.True(t, ok, "the device plugin's affinity selects a node of our GPU pool")
	ok, err = affinity.Match(systemNode)
	require.NoError(t, err)
	assert.False(t, ok, "the device plugin stays off the system node")

	// A pool whose images come from a snapshot runs Bottlerocket, whose NVIDIA variant runs a
	// device plugin of its own: ours stays off, the pool's runner still lands there.
	snapPool := config.DefaultPool()
	snapPool.ImageSnapshotID = "snap-0123456789abcdef0"
	bnp := nodepools.NodePoolFor(snapPool)
	bottlerocketNode := &corev1.Node{ObjectMeta: v1.ObjectMeta{Labels: map[string]string{
		"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "g4dn.xlarge", "karpenter.sh/nodepool": snapPool.Name,
	}}, Spec: corev1.NodeSpec{Taints: bnp.Spec.Template.Spec.Taints}}
	for k, v := range bnp.Spec.Template.Labels {
		bottlerocketNode.Labels[k] = v
	}
	ok, err = affinity.Match(bottlerocketNode)
	require.NoError(t, err)
	assert.False(t, ok, "the device plugin stays off a Bottlerocket node")
	snapRunner, err := k8s.RunnerTemplate(snapPool, nil)
	require.NoError(t, err)
	ok, err = nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: snapRunner.Spec}).Match(bottlerocketNode)
	require.NoError(t, err)
	assert.True(t, ok, "the snapshot pool's runner selects its Bottlerocket node")

	for _, taint := range gpuNode.Spec.Taints {
		assert.True(t, corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &taint, false), "the device plugin tolerates %s", taint.ToString())
	}
	// The runner pod lands on the same node: it tolerates the taint and selects the pool.
	tmpl, err := k8s.RunnerTemplate(config.DefaultPool(), nil)
	require.NoError(t, err)
	runner := &corev1.Pod{Spec: tmpl.Spec}
	for _, taint := range gpuNode.Spec.Taints {
		assert.True(t, corev1helpers.TolerationsTolerateTaint(klog.Background(), runner.Spec.Tolerations, &taint, false), "the runner tolerates %s", taint.ToString())
	}
	ok, err = nodeaffinity.GetRequiredNodeAffinity(runner).Match(gpuNode)
	require.NoError(t, err)
	assert.True(t, ok, "the runner's nodeSelector selects the pool's node")

	// In the container form the job pod lands there instead, and the runner on the system node.
	pool := config.DefaultPool()
	pool.JobForm = config.JobFormContainer
	job, err := k8s.JobPodTemplate(pool)
	require.NoError(t, err)
	gpuNode.Labels["karpenter.sh/nodepool"] = pool.Name
	for _, taint := range gpuNode.Spec.Taints {
		assert.True(t, corev1helpers.TolerationsTolerateTaint(klog.Background(), job.Spec.Tolerations, &taint, false), "the job pod tolerates %s", taint.ToString())
	}
	ok, err = nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: job.Spec}).Match(gpuNode)
	require.NoError(t, err)
	assert.True(t, ok, "the job pod selects the pool's node")
	tmpl, err = k8s.RunnerTemplate(pool, nil)
	require.NoError(t, err)
	for _, taint := range gpuNode.Spec.Taints {
		assert.False(t, corev1helpers.TolerationsTolerateTaint(klog.Background(), tmpl.Spec.Tolerations, &taint, false), "a container-form runner keeps off GPU nodes")
	}
	ok, err = nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: tmpl.Spec}).Match(systemNode)
	require.NoError(t, err)
	assert.True(t, ok, "a container-form runner runs on the system node")
}

// k8s/arc holds ARC's charts (in no Go module) at exactly the pinned versions: the program
// declares the CRDs of its controller chart, and the tests render its scale-set chart.
func TestARCChartCopiesArePinned(t *testing.T) {
	for _, c := range []versions.Chart{versions.ARCControllerChart, versions.ARCScaleSetChart} {
		chrt, err := loader.Load(filepath.Join(testkit.RepoRoot(t), "k8s", "arc", c.Name()))
		require.NoError(t, err)
		assert.Equal(t, c.Version, chrt.Metadata.Version, "k8s/arc/%s is not the pinned chart: refresh it (k8s/arc/README.md)", c.Name())
	}
	crds, err := k8s.ARCCRDs(versions.ARCControllerChart)
	require.NoError(t, err)
	assert.Len(t, crds, 4)
	newer := versions.ARCControllerChart
	newer.Version = "0.15.0"
	_, err = k8s.ARCCRDs(newer)
	assert.ErrorContains(t, err, "refresh k8s/arc to 0.15.0", "a bumped pin without a refreshed copy fails loudly")
}

// Both job forms through ARC's own scale-set chart at the pinned version (k8s/arc: it is in
// no Go module): what reaches the AutoscalingRunnerSet's pod template is what each form
// needs, and the chart adds no permissions of its own.
func TestScaleSetChartRendersBothJobForms(t *testing.T) {
	dir := filepath.Join(testkit.RepoRoot(t), "k8s", "arc", "gha-runner-scale-set")
	chrt, err := loader.Load(dir)
	require.NoError(t, err)
	require.Equal(t, versions.ARCScaleSetChart.Version, chrt.Metadata.Version, "the copy in %s is not the pinned chart: refresh it (see k8s/arc/README.md)", dir)

	type runnerSet struct {
		Spec struct {
			RunnerScaleSetLabels []string               `json:"runnerScaleSetLabels"`
			RunnerGroup          string                 `json:"runnerGroup"`
			Template             corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	render := func(form config.JobForm) (runnerSet, []chartrender.Object) {
		pool := config.DefaultPool()
		pool.JobForm = form
		values, err := k8s.ScaleSetValues(pool, config.GitHub{ConfigURL: "https://github.com/luxfi"}, nil)
		require.NoError(t, err)
		objs := renderChart(t, dir, pool.RunnerScaleSetName, wellknown.RunnersNamespace, values)
		var set runnerSet
		find(t, objs, "AutoscalingRunnerSet", pool.RunnerScaleSetName, &set)
		return set, objs
	}
	env := func(c corev1.Container) map[string]string {
		out := map[string]string{}
		for _, e := range c.Env {
			out[e.Name] = e.Value
		}
		return out
	}
	gpu := corev1.ResourceName(wellknown.GPUResource)

	set, objs := render(config.JobFormRunner)
	assert.Equal(t, config.DefaultPool().RunnerLabels, set.Spec.RunnerScaleSetLabels)
	pod := set.Spec.Template.Spec
	assert.Equal(t, "lux-gpu-t4-gha-rs-no-permission", pod.ServiceAccountName, "the runner form needs no Kubernetes API")
	require.NotNil(t, pod.AutomountServiceAccountToken, "the chart keeps the template's automountServiceAccountToken")
	assert.False(t, *pod.AutomountServiceAccountToken, "and the job's code, which runs in the runner, gets no token at all")
	require.Len(t, pod.Containers, 1)
	assert.Equal(t, "1", pod.Containers[0].Resources.Limits.Name(gpu, "").String(), "the runner holds the GPU")
	assert.Equal(t, map[string]string{wellknown.PoolLabel: "gpu-spot"}, pod.NodeSelector)
	runnerEnv := env(pod.Containers[0])
	assert.NotContains(t, runnerEnv, "ACTIONS_RUNNER_CONTAINER_HOOKS", "no container hooks")
	for k, v := range map[string]string{
		"CCACHE_REMOTE_STORAGE": "http://ccache-gpu-spot.gpuci-cache.svc.cluster.local:8080|layout=bazel|connect-timeout=1000|operation-timeout=10000",
		"CCACHE_BASEDIR":        "/home/runner/_work",
		"CCACHE_COMPILERCHECK":  "content",
		// The runner's job hooks, from their ConfigMap.
		"ACTIONS_RUNNER_HOOK_JOB_STARTED":   "/opt/gpuci/hooks/job-started.js",
		"ACTIONS_RUNNER_HOOK_JOB_COMPLETED": "/opt/gpuci/hooks/job-completed.js",
		"GPUCI_POOL":                        "gpu-spot",
	} {
		assert.Equal(t, v, runnerEnv[k], "%s, through the chart's merge", k)
	}
	zone := slices.IndexFunc(pod.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "GPUCI_ZONE" })
	require.GreaterOrEqual(t, zone, 0, "the hooks learn the node's zone")
	require.NotNil(t, pod.Containers[0].Env[zone].ValueFrom)
	assert.Equal(t, "metadata.labels['topology.kubernetes.io/zone']", pod.Containers[0].Env[zone].ValueFrom.FieldRef.FieldPath, "from the pod's own label, through the chart's merge")
	launched := slices.IndexFunc(pod.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "GPUCI_LAUNCHED_CAPACITY" })
	require.GreaterOrEqual(t, launched, 0, "the hooks learn the node's capacity type")
	require.NotNil(t, pod.Containers[0].Env[launched].ValueFrom)
	assert.Equal(t, "metadata.annotations['"+wellknown.LaunchedCapacityAnnotation+"']", pod.Containers[0].Env[launched].ValueFrom.FieldRef.FieldPath,
		"from the annotation the API server sets as it binds the pod (k8s.LaunchedCapacityPolicy), through the chart's merge")
	require.Len(t, pod.Containers[0].VolumeMounts, 1, "the hooks' volume, through the chart's merge")
	assert.Equal(t, corev1.VolumeMount{Name: "gpuci-job-hooks", MountPath: "/opt/gpuci/hooks", ReadOnly: true}, pod.Containers[0].VolumeMounts[0])
	require.Len(t, pod.Volumes, 1)
	require.NotNil(t, pod.Volumes[0].ConfigMap)
	assert.Equal(t, k8s.JobHooksConfigMap, pod.Volumes[0].ConfigMap.Name)
	assert.Equal(t, int32(0o555), *pod.Volumes[0].ConfigMap.DefaultMode, "the runner runs them")

	// The on-demand retry twin: a scale set of its own, on its own NodePool, its own label.
	twin := config.DefaultPool().RetryTwin()
	values, err := k8s.ScaleSetValues(twin, config.GitHub{ConfigURL: "https://github.com/luxfi"}, nil)
	require.NoError(t, err)
	var twinSet runnerSet
	find(t, renderChart(t, dir, twin.RunnerScaleSetName, wellknown.RunnersNamespace, values), "AutoscalingRunnerSet", "lux-gpu-t4-on-demand", &twinSet)
	assert.Equal(t, []string{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4-on-demand"}, twinSet.Spec.RunnerScaleSetLabels)
	assert.Equal(t, map[string]string{wellknown.PoolLabel: "gpu-spot-on-demand"}, twinSet.Spec.Template.Spec.NodeSelector)

	set, objs = render(config.JobFormContainer)
	pod = set.Spec.Template.Spec
	assert.Equal(t, wellknown.ContainerHooksAccount("gpu-spot"), pod.ServiceAccountName, "the pool's own account")
	assertRestricted(t, "a container-form runner", set.Spec.Template)
	assert.Nil(t, pod.AutomountServiceAccountToken, "the hooks reach the API server with the runner's token")
	for _, o := range objs {
		assert.False(t, o.Kind == "ServiceAccount" || strings.HasSuffix(o.Name, "-kube-mode"), "the chart adds %s/%s: our account replaces it", o.Kind, o.Name)
	}
	require.Len(t, pod.Containers, 1)
	runner := pod.Containers[0]
	assert.True(t, runner.Resources.Limits.Name(gpu, "").IsZero(), "the runner has no GPU: the job pod does")
	assert.Empty(t, pod.Tolerations)
	assert.Equal(t, map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue}, pod.NodeSelector)
	e := env(runner)
	assert.Equal(t, "/home/runner/job-pod-template/job-pod.yaml", e["ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"], "our variable survives the chart's merge")
	assert.Equal(t, "1200", e["ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS"], "our job pod wait survives the chart's merge")
	assert.Equal(t, "/opt/gpuci/hooks/container-hooks.js", e["ACTIONS_RUNNER_CONTAINER_HOOKS"], "our entry point to the hooks survives the chart's merge (it would set the image's own)")
	assert.Equal(t, "/home/runner/k8s-novolume/index.js", e["GPUCI_CONTAINER_HOOKS"], "which runs the image's")
	assert.Equal(t, "arc-jobs-gpu-spot", e["ACTIONS_RUNNER_KUBERNETES_NAMESPACE"], "the job pods go to the pool's own namespace")
	assert.Equal(t, "true", e["ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER"])
	// Its job hooks follow the job container's log and write the summary; the zone is the job
	// pod's, which the sampler there reports, not this system node's.
	assert.Equal(t, "/opt/gpuci/hooks/job-completed.js", e["ACTIONS_RUNNER_HOOK_JOB_COMPLETED"], "through the chart's merge")
	assert.Equal(t, "container", e["GPUCI_JOB_FORM"], "through the chart's merge")
	assert.NotContains(t, e, "GPUCI_ZONE")
	require.Len(t, runner.VolumeMounts, 2)
	require.Len(t, pod.Volumes, 2)
	mounts := map[string]string{}
	for i, v := range pod.Volumes {
		require.NotNil(t, v.ConfigMap)
		assert.Equal(t, runner.VolumeMounts[i].Name, v.Name)
		mounts[runner.VolumeMounts[i].MountPath] = v.ConfigMap.Name
	}
	assert.Equal(t, map[string]string{"/home/runner/job-pod-template": "lux-gpu-t4-job-pod", "/opt/gpuci/hooks": k8s.JobHooksConfigMap}, mounts)

	// The retry runner: its own read-only account, no chart-made one; no labels beyond its name.
	values, err = k8s.RetryScaleSetValues(config.RetryRunner{ScaleSetName: "lux-gpu-retry", RunnerGroup: "gpu-retry"}, config.GitHub{ConfigURL: "https://github.com/luxfi"}, nil)
	require.NoError(t, err)
	objs = renderChart(t, dir, "lux-gpu-retry", wellknown.RunnersNamespace, values)
	var retrySet runnerSet
	find(t, objs, "AutoscalingRunnerSet", "lux-gpu-retry", &retrySet)
	assert.Equal(t, wellknown.RetryServiceAccount, retrySet.Spec.Template.Spec.ServiceAccountName, "the account gpuci retry --cluster reads with")
	assertRestricted(t, "the retry runner", retrySet.Spec.Template)
	assert.Equal(t, "gpu-retry", retrySet.Spec.RunnerGroup, "registered in its own runner group, where the chart puts it for the controller")
	for _, o := range objs {
		assert.False(t, o.Kind == "ServiceAccount", "the chart adds %s/%s: our account replaces it", o.Kind, o.Name)
	}
	assert.Empty(t, retrySet.Spec.RunnerScaleSetLabels)
	assert.Equal(t, map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue}, retrySet.Spec.Template.Spec.NodeSelector)
}

// The Karpenter chart version, the module the tests take its charts and CRDs from, and the
// Go API types the NodePools are built with are one version.
func TestKarpenterPinsAgree(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}}@{{.Version}}", "github.com/aws/karpenter-provider-aws", "sigs.k8s.io/karpenter").Output()
	require.NoError(t, err)
	mods := strings.Fields(string(out))
	want := "v" + versions.KarpenterChart.Version
	assert.Equal(t, []string{"github.com/aws/karpenter-provider-aws@" + want, "sigs.k8s.io/karpenter@" + want}, mods)
	assert.Equal(t, versions.KarpenterChart.Version, versions.KarpenterCRDChart.Version)
	assert.Equal(t, mods[0], versions.KarpenterChart.Module)
	assert.Equal(t, mods[0], versions.KarpenterCRDChart.Module)
}

// The names the tools select by are the ones upstream's code uses.
func TestWellKnownNamesMatchUpstream(t *testing.T) {
	assert.Equal(t, karpv1.NodePoolLabelKey, wellknown.NodePoolLabel)
	assert.Equal(t, karpv1.DoNotDisruptAnnotationKey, wellknown.DoNotDisrupt)
}

// ARC's metrics, as its own controller chart at the pin renders our values: the controller's
// and the listeners' addresses and endpoint on the manager's flags, and the metrics port.
func TestARCControllerChartTurnsMetricsOn(t *testing.T) {
	dir := filepath.Join(testkit.RepoRoot(t), "k8s", "arc", "gha-runner-scale-set-controller")
	objs := renderChart(t, dir, wellknown.ARCControllerRelease, wellknown.ARCNamespace, k8s.ControllerValues())
	var d appsv1.Deployment
	find(t, objs, "Deployment", wellknown.ARCControllerRelease+"-gha-rs-controller", &d)
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	c := d.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{"--metrics-addr=:8080", "--listener-metrics-addr=:8080", "--listener-metrics-endpoint=/metrics"} {
		assert.Contains(t, c.Args, arg)
	}
	assert.Contains(t, c.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 8080, Protocol: corev1.ProtocolTCP})
}

// assertRestricted: the pod, as the chart renders it, meets Pod Security's restricted level,
// judged by the pod-security-admission library the API server runs (its default checks at
// the latest version).
func assertRestricted(t *testing.T, what string, tmpl corev1.PodTemplateSpec) {
	t.Helper()
	evaluator, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	require.NoError(t, err)
	results := evaluator.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec)
	require.NotEmpty(t, results, "the restricted level's checks ran")
	for _, r := range results {
		assert.True(t, r.Allowed, "%s breaks the restricted level: %s: %s", what, r.ForbiddenReason, r.ForbiddenDetail)
	}
}
