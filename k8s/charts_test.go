package k8s_test

// Our Helm values rendered through the real upstream charts (Helm SDK, charts from the Go
// modules go.mod pins), and the pins that must agree.

import (
	"os/exec"
	"strings"
	"testing"

	awsapis "github.com/aws/karpenter-provider-aws/pkg/apis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/chartrender"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
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
	objs := renderChart(t, chartDir(t, versions.KarpenterChart), "karpenter", "kube-system", k8s.KarpenterValues("lux-gpu-ci", "us-west-2", "lux-gpu-ci"))

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
	objs := renderChart(t, chartDir(t, versions.KarpenterCRDChart), "karpenter-crd", "kube-system", map[string]any{})
	for name, embedded := range map[string][]byte{
		"nodepools.karpenter.sh":           awsapis.NodePoolCRD,
		"ec2nodeclasses.karpenter.k8s.aws": awsapis.EC2NodeClassCRD,
	} {
		var installed, validated apiextensionsv1.CustomResourceDefinition
		find(t, objs, "CustomResourceDefinition", name, &installed)
		require.NoError(t, yaml.Unmarshal(embedded, &validated))
		assert.Equal(t, validated.Spec, installed.Spec, "%s: chart and Go module disagree", name)
	}
}

func TestDevicePluginChartSchedulesOnGPUNodesOnly(t *testing.T) {
	objs := renderChart(t, chartDir(t, versions.NvidiaDevicePluginChart), "nvidia-device-plugin", wellknown.DevicePluginNamespace, k8s.DevicePluginValues())

	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", "nvidia-device-plugin", &ds)
	pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}

	np, err := k8s.NodePoolFor(config.DefaultPool())
	require.NoError(t, err)
	gpuNode := &corev1.Node{ObjectMeta: v1.ObjectMeta{Labels: map[string]string{
		"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "g4dn.xlarge", "karpenter.sh/nodepool": "gpu-spot",
	}}, Spec: corev1.NodeSpec{Taints: np.Spec.Template.Spec.Taints}}
	for k, v := range np.Spec.Template.Labels {
		gpuNode.Labels[k] = v
	}
	systemNode := &corev1.Node{ObjectMeta: v1.ObjectMeta{Labels: map[string]string{
		"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "t3.medium", "lux-gpu-ci.luxfi.com/node-role": "system",
	}}}

	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	ok, err := affinity.Match(gpuNode)
	require.NoError(t, err)
	assert.True(t, ok, "the device plugin's affinity selects a node of our GPU pool")
	ok, err = affinity.Match(systemNode)
	require.NoError(t, err)
	assert.False(t, ok, "the device plugin stays off the system node")

	for _, taint := range gpuNode.Spec.Taints {
		assert.True(t, corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, &taint, false), "the device plugin tolerates %s", taint.ToString())
	}
	// The runner pod lands on the same node: it tolerates the taint and selects the pool.
	tmpl, err := k8s.RunnerTemplate(config.DefaultPool())
	require.NoError(t, err)
	runner := &corev1.Pod{Spec: tmpl.Spec}
	for _, taint := range gpuNode.Spec.Taints {
		assert.True(t, corev1helpers.TolerationsTolerateTaint(klog.Background(), runner.Spec.Tolerations, &taint, false), "the runner tolerates %s", taint.ToString())
	}
	ok, err = nodeaffinity.GetRequiredNodeAffinity(runner).Match(gpuNode)
	require.NoError(t, err)
	assert.True(t, ok, "the runner's nodeSelector selects the pool's node")
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
