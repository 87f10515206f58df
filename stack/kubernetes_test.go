package stack_test

// The Kubernetes layer under mocks: every release's chart, version, namespace, name and values; credentials stay secret; the Karpenter objects.

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/gomodule"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

func TestHelmReleasesArePinned(t *testing.T) {
	m := runDev(t)
	want := []struct{ name, namespace, chart, repo, version string }{
		{"karpenter-crd", "kube-system", "oci://public.ecr.aws/karpenter/karpenter-crd", "", "1.14.1"},
		{"karpenter", "kube-system", "oci://public.ecr.aws/karpenter/karpenter", "", "1.14.1"},
		{"nvidia-device-plugin", "nvidia-device-plugin", "nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.19.3"},
		{"arc", "arc-systems", "oci://ghcr.io/actions/actions-runner-controller-charts/gha-runner-scale-set-controller", "", "0.14.2"},
		{"lux-gpu-t4", "arc-runners", "oci://ghcr.io/actions/actions-runner-controller-charts/gha-runner-scale-set", "", "0.14.2"},
		{"lux-gpu-t4-on-demand", "arc-runners", "oci://ghcr.io/actions/actions-runner-controller-charts/gha-runner-scale-set", "", "0.14.2"},
		{"lux-gpu-t4-container", "arc-runners", "oci://ghcr.io/actions/actions-runner-controller-charts/gha-runner-scale-set", "", "0.14.2"},
	}
	require.Len(t, m.all("kubernetes:helm.sh/v3:Release"), len(want))
	for _, w := range want {
		r := releaseNamed(t, m, w.name)
		assert.Equal(t, w.namespace, r.Inputs["namespace"], w.name)
		assert.Equal(t, w.chart, r.Inputs["chart"], w.name)
		assert.Equal(t, w.version, r.Inputs["version"], w.name)
		if w.repo == "" {
			assert.Nil(t, r.Inputs["repositoryOpts"], "%s is an OCI chart", w.name)
		} else {
			assert.Equal(t, w.repo, path(r.Inputs, "repositoryOpts", "repo"), w.name)
		}
		assert.Equal(t, false, r.Inputs["skipAwait"], "%s waits for readiness on a real cluster", w.name)
		wantTimeout := 600.0 // 3600 for a scale set: TestARCUpgradeAcrossAMinorReinstallsTheScaleSets
		if w.namespace == "arc-runners" {
			wantTimeout = 3600
		}
		assert.Equal(t, wantTimeout, r.Inputs["timeout"], w.name)
		assert.Contains(t, r.Raw.Provider, "pulumi:providers:kubernetes::gpu-ci", "%s uses the cluster's provider", w.name)
	}
	assert.Equal(t, true, releaseNamed(t, m, "karpenter").Inputs["skipCrds"], "CRDs come from the karpenter-crd release")
	// helmSkipAwait is for a test API server on the loopback network (the e2e's) only.
	m2 := newMocks()
	m2.Cloud.EKSEndpoint = "https://127.0.0.1:6443"
	require.NoError(t, m2.run(testkit.With(testkit.StackConfig(t, "dev"), "helmSkipAwait", "true")))
	releases := m2.all("kubernetes:helm.sh/v3:Release")
	require.Len(t, releases, 7)
	for _, r := range releases {
		scaleSet := r.Inputs["namespace"] == "arc-runners"
		assert.Equal(t, !scaleSet, r.Inputs["skipAwait"], "helmSkipAwait reaches %s, unless a scale set (TestARCUpgradeAcrossAMinorReinstallsTheScaleSets)", r.Inputs["name"])
	}
}

// On a real cluster helmSkipAwait would remove the teardown order: refused, naming the key.
func TestHelmSkipAwaitIsRefusedOffLoopback(t *testing.T) {
	m := newMocks()
	err := m.run(testkit.With(testkit.StackConfig(t, "dev"), "helmSkipAwait", "true"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `lux-gpu-ci:helmSkipAwait: true, but the cluster's API server "`+testEndpoint+`" is not on the loopback network`)
	assert.Contains(t, err.Error(), "fix: pulumi config set helmSkipAwait false")
	assert.Empty(t, m.all("kubernetes:helm.sh/v3:Release"), "nothing in the cluster is declared")
}

// helmCharts moves a chart to a mirror registry or a local directory; the others stay pinned.
func TestHelmChartsOverride(t *testing.T) {
	mirror := "oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/karpenter/karpenter"
	local := filepath.Join(testkit.RepoRoot(t), "k8s", "arc", "gha-runner-scale-set")
	m := runDev(t, "helmCharts", `{"karpenter": {"chart": "`+mirror+`", "version": "1.14.1"}, "gha-runner-scale-set": {"chart": "`+local+`"}}`)
	karpenter := releaseNamed(t, m, "karpenter")
	assert.Equal(t, mirror, karpenter.Inputs["chart"])
	assert.Equal(t, "1.14.1", karpenter.Inputs["version"])
	scaleSet := releaseNamed(t, m, "lux-gpu-t4")
	assert.Equal(t, local, scaleSet.Inputs["chart"])
	assert.NotContains(t, scaleSet.Inputs, "version", "a local chart has no version to pin")
	assert.Equal(t, "oci://public.ecr.aws/karpenter/karpenter-crd", releaseNamed(t, m, "karpenter-crd").Inputs["chart"], "charts not listed stay pinned upstream")
}

func TestKarpenterValues(t *testing.T) {
	m := runDev(t)
	v := releaseNamed(t, m, "karpenter").Inputs["values"]
	assert.Equal(t, "lux-gpu-ci", path(v, "settings", "clusterName"))
	assert.Equal(t, testQueue, path(v, "settings", "interruptionQueue"), "the queue's name, not its URL or ARN")
	assert.Equal(t, "karpenter", path(v, "serviceAccount", "name"), "matches the Pod Identity association")
	assert.Equal(t, 1.0, path(v, "replicas"), "the chart's 2 cannot both fit one system node")
	prod := newStackMocks("prod")
	require.NoError(t, prod.run(testkit.StackConfig(t, "prod")))
	assert.Equal(t, 2.0, path(releaseNamed(t, prod, "karpenter").Inputs["values"], "replicas"), "prod's two system nodes run a replica each")
	assert.Equal(t, "250m", path(v, "controller", "resources", "requests", "cpu"))
	assert.Equal(t, "512Mi", path(v, "controller", "resources", "requests", "memory"))
	assert.Equal(t, "1Gi", path(v, "controller", "resources", "limits", "memory"))
	assert.Equal(t, []any{map[string]any{"name": "AWS_REGION", "value": "us-west-2"}}, path(v, "controller", "env"))
	assert.NotContains(t, v, "webhook", "Karpenter v1.1+ has no webhook values")
}

func TestDevicePluginValues(t *testing.T) {
	m := runDev(t)
	v := releaseNamed(t, m, "nvidia-device-plugin").Inputs["values"]
	assert.Contains(t, path(v, "tolerations"), map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
	terms := path(v, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	assert.Equal(t, []any{map[string]any{"matchExpressions": []any{
		map[string]any{"key": "nvidia.com/gpu.present", "operator": "In", "values": []any{"true"}},
		map[string]any{"key": "lux-gpu-ci.luxfi.com/node-os", "operator": "NotIn", "values": []any{"bottlerocket"}},
	}}}, terms)
	ns := m.get(t, "kubernetes:core/v1:Namespace", "gpu-ci-nvidia")
	assert.Equal(t, "nvidia-device-plugin", path(ns.Inputs, "metadata", "name"))
}

func TestRunnerScaleSetValues(t *testing.T) {
	m := runDev(t)
	controller := releaseNamed(t, m, "arc")
	assert.Equal(t, "arc-gha-rs-controller", path(controller.Inputs["values"], "serviceAccount", "name"))

	v := releaseNamed(t, m, "lux-gpu-t4").Inputs["values"]
	assert.Equal(t, "https://github.com/luxfi", path(v, "githubConfigUrl"))
	assert.Equal(t, "arc-github-credentials", path(v, "githubConfigSecret"), "a Secret name, never the credential")
	assert.Equal(t, "lux-gpu-t4", path(v, "runnerScaleSetName"))
	assert.Equal(t, []any{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4"}, path(v, "scaleSetLabels"))
	assert.Equal(t, 0.0, path(v, "minRunners"), "scale to zero")
	assert.Equal(t, 1.0, path(v, "maxRunners"))
	assert.Equal(t, map[string]any{"namespace": "arc-systems", "name": "arc-gha-rs-controller"}, path(v, "controllerServiceAccount"))
	assert.NotContains(t, v, "runnerGroup", "no group: the organization's default")

	tmpl := path(v, "template")
	assert.Equal(t, "true", path(tmpl, "metadata", "annotations", "karpenter.sh/do-not-disrupt"))
	assert.Equal(t, map[string]any{"lux-gpu-ci.luxfi.com/pool": "gpu-spot"}, path(tmpl, "spec", "nodeSelector"))
	assert.Equal(t, []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}, path(tmpl, "spec", "tolerations"))
	containers := path(tmpl, "spec", "containers").([]any)
	require.Len(t, containers, 1)
	runner := containers[0]
	assert.Equal(t, "runner", path(runner, "name"), "ARC requires the container name runner")
	assert.Equal(t, testRegistry+"/lux-gpu-ci/ghcr/actions/actions-runner:latest", path(runner, "image"), "ARC's default, the current runner release, through the image cache")
	assert.Equal(t, "Always", path(runner, "imagePullPolicy"), "a node may hold an older :latest")
	assert.Equal(t, []any{"/home/runner/run.sh"}, path(runner, "command"))
	// Fits g4dn.xlarge (4 vCPU, 16 GiB; 3920m / 14481Mi allocatable).
	assert.Equal(t, map[string]any{"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}, path(runner, "resources", "requests"))
	assert.Equal(t, map[string]any{"memory": "12Gi", "nvidia.com/gpu": "1"}, path(runner, "resources", "limits"))
	assert.NotContains(t, tmpl, "creationTimestamp")
}

// Credentials are Pulumi secrets from config to the Kubernetes Secret, and appear in no
// other resource's inputs.
func TestGitHubCredentialsStaySecret(t *testing.T) {
	m := runDev(t)
	s := m.one(t, "kubernetes:core/v1:Secret")
	assert.Equal(t, "arc-github-credentials", path(s.Inputs, "metadata", "name"))
	assert.Equal(t, "arc-runners", path(s.Inputs, "metadata", "namespace"))
	data := s.Raw.Inputs["stringData"]
	require.True(t, data.IsSecret(), "stringData is a secret")
	assert.Equal(t, map[string]any{"github_token": testkit.Token}, data.SecretValue().Element.Mappable())

	for _, r := range m.programResources() {
		for k, v := range r.Raw.Inputs {
			assertNoPlain(t, r.Key()+"."+string(k), v, testkit.Token)
		}
	}
}

func TestGitHubAppCredentials(t *testing.T) {
	cfg := testkit.With(testkit.StackConfig(t, "dev"), "githubToken", testkit.Unset,
		"githubAppId", "123456", "githubAppInstallationId", "987654", "githubAppPrivateKey", "-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----")
	m := newMocks()
	require.NoError(t, m.run(cfg))
	data := m.one(t, "kubernetes:core/v1:Secret").Raw.Inputs["stringData"]
	require.True(t, data.IsSecret())
	got := data.SecretValue().Element.Mappable().(map[string]any)
	assert.Equal(t, "123456", got["github_app_id"])
	assert.Equal(t, "987654", got["github_app_installation_id"])
	assert.Contains(t, got["github_app_private_key"], "BEGIN RSA PRIVATE KEY")
	assert.NotContains(t, got, "github_token")
}

func TestNodePoolAndNodeClassDev(t *testing.T) {
	m := runDev(t)
	np := m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-gpu-spot-nodepool")
	assert.Equal(t, "karpenter.sh/v1", np.Inputs["apiVersion"])
	assert.Equal(t, "gpu-spot", path(np.Inputs, "metadata", "name"))
	spec := np.Inputs["spec"]
	assert.Equal(t, map[string]any{"nvidia.com/gpu.present": "true", "workload": "gpu-ci", "lux-gpu-ci.luxfi.com/pool": "gpu-spot"}, path(spec, "template", "metadata", "labels"))
	assert.ElementsMatch(t, []any{
		map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"spot"}},
		map[string]any{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": []any{"g4dn.xlarge"}},
		map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}},
		map[string]any{"key": "kubernetes.io/os", "operator": "In", "values": []any{"linux"}},
	}, path(spec, "template", "spec", "requirements"))
	assert.Equal(t, []any{map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}}, path(spec, "template", "spec", "taints"))
	assert.Equal(t, map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu-spot"}, path(spec, "template", "spec", "nodeClassRef"))
	assert.Equal(t, "24h0m0s", path(spec, "template", "spec", "expireAfter"))
	assert.Equal(t, "6h0m0s", path(spec, "template", "spec", "terminationGracePeriod"))
	assert.Equal(t, "WhenEmpty", path(spec, "disruption", "consolidationPolicy"))
	assert.Equal(t, "30s", path(spec, "disruption", "consolidateAfter"))
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "1"}, path(spec, "limits"))

	nc := m.get(t, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu-ci-gpu-spot-nodeclass")
	ncs := nc.Inputs["spec"]
	assert.Equal(t, "lux-gpu-ci-karpenter-node", path(ncs, "role"))
	assert.Equal(t, []any{map[string]any{"alias": "al2023@v20260714"}}, path(ncs, "amiSelectorTerms"))
	discovery := []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "lux-gpu-ci"}}}
	assert.Equal(t, discovery, path(ncs, "subnetSelectorTerms"))
	assert.Equal(t, discovery, path(ncs, "securityGroupSelectorTerms"))
	assert.Equal(t, map[string]any{"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1.0, "httpTokens": "required"}, path(ncs, "metadataOptions"))
	assert.Equal(t, []any{map[string]any{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": map[string]any{
		"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": true, "deleteOnTermination": true, "throughput": 125.0, "iops": 3000.0,
	}}}, path(ncs, "blockDeviceMappings"))
	assert.Equal(t, "RAID0", path(ncs, "instanceStorePolicy"), "images, kubelet and pod logs on the NVMe")
	assert.Nil(t, path(ncs, "associatePublicIPAddress"), "nodes are private behind the NAT")
	assert.Equal(t, map[string]any{"env": "dev", "team": "platform"}, path(ncs, "tags"))

	lean := runDev(t, "natMode", "none")
	assert.Equal(t, true, path(lean.get(t, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu-ci-gpu-spot-nodeclass").Inputs["spec"], "associatePublicIPAddress"), "lean nodes need a public IP for egress")
}

func TestSeveralPools(t *testing.T) {
	m := runDev(t, "gpuPools", `[
		{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "runnerScaleSetName": "lux-gpu-t4"},
		{"name": "gpu-l4x4", "instanceTypes": ["g6.12xlarge"], "capacityTypes": ["spot", "on-demand"], "gpuLimit": 8, "maxRunners": 8, "runnerGroup": "gpu-ci-large", "runnerImage": "ghcr.io/luxfi/cuda-runner:2.334.0-cuda12.9"}
	]`)
	assert.Len(t, m.all("kubernetes:karpenter.sh/v1:NodePool"), 2)
	assert.Len(t, m.all("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"), 2)
	big := releaseNamed(t, m, "lux-gpu-l4x4")
	v := big.Inputs["values"]
	assert.Equal(t, []any{"self-hosted", "linux", "amd64", "cuda", "gpu", "gpu-l4x4"}, path(v, "scaleSetLabels"), "labels derive from the pool name")
	assert.Equal(t, 8.0, path(v, "maxRunners"))
	assert.Equal(t, "gpu-ci-large", path(v, "runnerGroup"))
	// g6.12xlarge: 48 vCPU, 192 GiB, 4 GPUs → per GPU 12 vCPU, 48 GiB → 75%.
	runner := path(v, "template", "spec", "containers").([]any)[0]
	assert.Equal(t, map[string]any{"cpu": "9", "memory": "36Gi", "nvidia.com/gpu": "1"}, path(runner, "resources", "requests"))
	assert.Equal(t, testRegistry+"/lux-gpu-ci/ghcr/luxfi/cuda-runner:2.334.0-cuda12.9", path(runner, "image"), "a pinned image through the cache too")
	assert.Equal(t, "IfNotPresent", path(runner, "imagePullPolicy"), "a pinned image never changes")
	assert.Contains(t, big.Deps(), "kubernetes:karpenter.sh/v1:NodePool::gpu-ci-gpu-l4x4-nodepool", "each scale set depends on its own pool")
	np := m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-gpu-l4x4-nodepool")
	require.Equal(t, "gpu-l4x4", path(np.Inputs, "metadata", "name"))
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "8"}, path(np.Inputs["spec"], "limits"))
	assert.Contains(t, path(np.Inputs["spec"], "template", "spec", "requirements"),
		map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"spot", "on-demand"}})
}

// The container form: the runner pod (no GPU, system nodes, the hooks' account, the job pod
// template mounted) starts each job's `container:` as a pod that holds the GPU on the pool's
// nodes. The runner form is untouched and creates none of this.
func TestContainerJobForm(t *testing.T) {
	runnerOnly := runDev(t, "gpuPools", `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "runnerScaleSetName": "lux-gpu-t4", "compilerCache": "none"}]`)
	assert.Empty(t, runnerOnly.all("kubernetes:core/v1:ServiceAccount"), "no container-form pool: no hooks account")
	assert.Equal(t, []string{"gpu-ci-arc-job-hooks"}, names(runnerOnly.all("kubernetes:core/v1:ConfigMap")), "only the job hooks")
	assert.Empty(t, runnerOnly.all("kubernetes:rbac.authorization.k8s.io/v1:Role"))
	assert.Empty(t, runnerOnly.all("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"))

	// The dev stack has one pool of each form.
	m := runDev(t)
	assert.NotContains(t, releaseNamed(t, m, "lux-gpu-t4").Inputs["values"], "containerMode", "runner form: ARC's default mode")
	v := releaseNamed(t, m, "lux-gpu-t4-container").Inputs["values"]
	assert.Equal(t, map[string]any{"type": "kubernetes-novolume"}, path(v, "containerMode"))
	// One container-form runner waits on a system node; a runner-form one would hold a GPU
	// node, and a twin takes only re-runs.
	assert.Equal(t, 1.0, path(v, "minRunners"), "a container-form runner waits for the next job")
	assert.Equal(t, 0.0, path(releaseNamed(t, m, "lux-gpu-t4").Inputs["values"], "minRunners"), "no idle runner-form runner: it would hold a GPU node")
	assert.Equal(t, 0.0, path(releaseNamed(t, m, "lux-gpu-t4-on-demand").Inputs["values"], "minRunners"), "no idle runner on a twin")
	tmpl := path(v, "template")
	assert.Equal(t, map[string]any{"lux-gpu-ci.luxfi.com/node-role": "system"}, path(tmpl, "spec", "nodeSelector"), "the runner pod is no GPU pod")
	assert.Nil(t, path(tmpl, "spec", "tolerations"), "cannot land on (and keep up) a GPU node")
	assert.Nil(t, path(tmpl, "metadata", "annotations"), "system nodes are not Karpenter's to disrupt")
	runner := path(tmpl, "spec", "containers").([]any)[0]
	assert.Equal(t, "runner", path(runner, "name"))
	assert.Equal(t, []any{"sh", "-c", "grep -qs 'Runner[.]Worker' /proc/[0-9]*/cmdline"}, path(runner, "readinessProbe", "exec", "command"),
		"Ready only while it runs a job, so that a roll moves it only while it waits")
	assert.Equal(t, map[string]any{"cpu": "100m", "memory": "384Mi"}, path(runner, "resources", "requests"), "no GPU")
	assert.Equal(t, map[string]any{"memory": "1Gi"}, path(runner, "resources", "limits"))
	env := path(runner, "env").([]any)
	require.Greater(t, len(env), 2)
	assert.Equal(t, []any{
		map[string]any{"name": "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE", "value": "/home/runner/job-pod-template/job-pod.yaml"},
		map[string]any{"name": "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS", "value": "1200"},
	}, env[:2], "the hook template, and a wait for the job pod that covers a cold GPU node")
	assert.Contains(t, env, map[string]any{"name": "GPUCI_JOB_FORM", "value": "container"}, "then its job hooks' env (k8s/charts_test.go)")
	assert.Equal(t, []any{
		map[string]any{"name": "job-pod-template", "mountPath": "/home/runner/job-pod-template", "readOnly": true},
		map[string]any{"name": "gpuci-job-hooks", "mountPath": "/opt/gpuci/hooks", "readOnly": true},
	}, path(runner, "volumeMounts"))
	assert.Equal(t, []any{
		map[string]any{"name": "job-pod-template", "configMap": map[string]any{"name": "lux-gpu-t4-container-job-pod"}},
		map[string]any{"name": "gpuci-job-hooks", "configMap": map[string]any{"name": "gpuci-job-hooks", "defaultMode": 365.0}},
	}, path(tmpl, "spec", "volumes"))

	// The job pod template, read back as the hooks read it.
	cm := m.get(t, "kubernetes:core/v1:ConfigMap", "gpu-ci-arc-lux-gpu-t4-container-job-pod")
	assert.Equal(t, "lux-gpu-t4-container-job-pod", path(cm.Inputs, "metadata", "name"))
	assert.Equal(t, "arc-runners", path(cm.Inputs, "metadata", "namespace"))
	// What the hooks read is the builder's template (k8s/containerjobs_test.go reads it back).
	var container config.GPUPool
	for _, p := range testkit.DevConfig(t).Pools() {
		if p.RunnerScaleSetName == "lux-gpu-t4-container" {
			container = p
		}
	}
	want, err := k8s.JobPodTemplateYAML(container)
	require.NoError(t, err)
	assert.Equal(t, want, path(cm.Inputs, "data", "job-pod.yaml"))

	// The pool's own account, in the runners' namespace, with the hooks' permissions (their
	// own requiredPermissions) in the pool's jobs' namespace and nowhere else.
	const jobsNS, account = "arc-jobs-gpu-spot-container", "arc-hooks-gpu-spot-container"
	assert.Equal(t, account, path(tmpl, "spec", "serviceAccountName"), "set, so the chart makes no Role of its own")
	assert.Contains(t, env, map[string]any{"name": "ACTIONS_RUNNER_KUBERNETES_NAMESPACE", "value": jobsNS}, "the hooks start the job pods there")
	sa := m.get(t, "kubernetes:core/v1:ServiceAccount", "gpu-ci-arc-"+account)
	assert.Equal(t, map[string]any{"name": account, "namespace": "arc-runners"}, sa.Inputs["metadata"])
	ns := m.get(t, "kubernetes:core/v1:Namespace", "gpu-ci-arc-"+jobsNS)
	assert.Equal(t, map[string]any{
		"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/warn": "restricted",
		"lux-gpu-ci.luxfi.com/container-jobs": "true",
	}, path(ns.Inputs, "metadata", "labels"), "the runners' Pod Security levels; marked as a jobs' namespace")
	hooksRules := []any{
		map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get", "list", "create", "delete"}},
		map[string]any{"apiGroups": []any{""}, "resources": []any{"pods/exec"}, "verbs": []any{"get", "create"}},
		map[string]any{"apiGroups": []any{""}, "resources": []any{"pods/log"}, "verbs": []any{"get", "list", "watch"}},
		map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get", "list", "create", "delete"}},
	}
	role := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:Role", "gpu-ci-arc-"+account)
	assert.Equal(t, map[string]any{"name": account, "namespace": jobsNS}, role.Inputs["metadata"])
	assert.Equal(t, hooksRules, path(role.Inputs, "rules"))
	binding := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "gpu-ci-arc-"+account)
	assert.Equal(t, jobsNS, path(binding.Inputs, "metadata", "namespace"))
	assert.Equal(t, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account}, path(binding.Inputs, "roleRef"))
	assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": account, "namespace": "arc-runners"}}, path(binding.Inputs, "subjects"))
	for _, b := range m.all("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding") {
		if path(b.Inputs, "metadata", "namespace") == "arc-runners" {
			assert.NotContains(t, fmt.Sprint(b.Inputs["subjects"]), account, "%s grants the pool's account nothing in the runners' namespace (ARC's credential, the runners' JIT configs)", b.Name)
		}
	}
	// Cluster-wide, one read: a job pod's Node by name, for the summary's spot or on-demand.
	nodes := m.one(t, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
	assert.Equal(t, []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes"}, "verbs": []any{"get"}}}, path(nodes.Inputs, "rules"))
	nodesBinding := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "gpu-ci-arc-"+account+"-nodes")
	assert.Equal(t, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "arc-container-hooks-nodes"}, path(nodesBinding.Inputs, "roleRef"))
	assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": account, "namespace": "arc-runners"}}, path(nodesBinding.Inputs, "subjects"))
	// The jobs' namespace's own boundary, budget and the sampler its job pods mount.
	var policies []string
	for _, np := range m.all("kubernetes:networking.k8s.io/v1:NetworkPolicy") {
		if path(np.Inputs, "metadata", "namespace") == jobsNS {
			policies = append(policies, path(np.Inputs, "metadata", "name").(string))
		}
	}
	assert.Equal(t, []string{"deny-all", "job-egress"}, policies)
	pdb := m.get(t, "kubernetes:policy/v1:PodDisruptionBudget", "gpu-ci-arc-"+jobsNS+"-running-jobs")
	assert.Equal(t, jobsNS, path(pdb.Inputs, "metadata", "namespace"))
	assert.Equal(t, map[string]any{"lux-gpu-ci.luxfi.com/runner-role": "job"}, path(pdb.Inputs, "spec", "selector", "matchLabels"))
	sampler := m.get(t, "kubernetes:core/v1:ConfigMap", "gpu-ci-arc-"+jobsNS+"-job-hooks")
	assert.Equal(t, map[string]any{"name": "gpuci-job-hooks", "namespace": jobsNS}, sampler.Inputs["metadata"])
	assert.Equal(t, []string{"gpu-sampler.sh"}, slices.Collect(maps.Keys(sampler.Inputs["data"].(map[string]any))), "the job pod's sampler only")

	// The account every container-form runner had before, kept for the runners an up leaves
	// running (k8s.LegacyContainerHooksAccount); no runner template names it.
	legacy := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:Role", "gpu-ci-arc-container-hooks")
	assert.Equal(t, map[string]any{"name": "arc-container-hooks", "namespace": "arc-runners"}, legacy.Inputs["metadata"])
	for _, r := range m.all("kubernetes:helm.sh/v3:Release") {
		assert.NotEqual(t, "arc-container-hooks", path(r.Inputs["values"], "template", "spec", "serviceAccountName"), "%s's runners", r.Name)
	}

	// Destroy: the scale set (and so its runners) goes before what its runners and jobs use.
	deps := releaseNamed(t, m, "lux-gpu-t4-container").Deps()
	for _, r := range []registered{cm, sa, ns, role, binding, nodes, nodesBinding, pdb, sampler, legacy} {
		assert.Contains(t, deps, r.Key())
	}
	assert.NotContains(t, releaseNamed(t, m, "lux-gpu-t4").Deps(), cm.Key(), "the runner-form scale set does not wait for it")
}

// ARC's CRDs are the program's, from the controller chart it installs (Helm would install
// crds/ once and never upgrade them): the release skips them and waits for them, and a
// different chart version declares different CRDs under the same names, so `up` updates them
// in place (make e2e does it against a real API server).
func TestARCCRDsFollowTheControllerChart(t *testing.T) {
	m := runDev(t)
	controller := releaseNamed(t, m, "arc")
	assert.Equal(t, true, controller.Inputs["skipCrds"], "Helm never upgrades crds/: the program owns them")
	crds := m.all("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
	var names []string
	for _, crd := range crds {
		names = append(names, path(crd.Inputs, "metadata", "name").(string))
		assert.Contains(t, controller.Deps(), crd.Key(), "the controller goes before its CRDs")
		assert.Equal(t, "v0.20.1", path(crd.Inputs, "metadata", "annotations", "controller-gen.kubebuilder.io/version"), "ARC 0.14.2's CRDs")
		assert.Equal(t, "true", path(crd.Inputs, "metadata", "annotations", "pulumi.com/patchForce"), "takes over the fields a Helm install of crds/ owns (make e2e adopts such CRDs)")
		assert.Equal(t, "lux-gpu-ci", path(crd.Inputs, "metadata", "annotations", "pulumi.com/patchFieldManager"), "every resource that applies it applies as one manager, so a replace leaves no earlier manager owning fields (make e2e replaces one)")
		assert.True(t, crd.Raw.RegisterRPC.GetDeleteBeforeReplace(), "%s: created first, a replacement would adopt the live CRD and the old one's delete remove it", crd.Key())
		assert.True(t, crd.Raw.RegisterRPC.GetRetainOnDelete(), "%s: never deleted (it would take every scale set and runner with it), on a replace, a rename or a destroy", crd.Key())
		assert.NotContains(t, fmt.Sprint(crd.Inputs["spec"]), "description:", "descriptions are left out of the state")
	}
	assert.ElementsMatch(t, []string{
		"autoscalinglisteners.actions.github.com", "autoscalingrunnersets.actions.github.com",
		"ephemeralrunners.actions.github.com", "ephemeralrunnersets.actions.github.com",
	}, names)
	// An earlier version let Helm install these CRDs: on such a cluster they exist, unowned,
	// and only their provider adopts existing objects; every other resource uses the one that
	// does not.
	crdProvider := m.get(t, "pulumi:providers:kubernetes", "gpu-ci-crds")
	assert.Equal(t, true, crdProvider.Inputs["upsertExistingObjects"])
	assert.Equal(t, true, crdProvider.Inputs["enableServerSideApply"], "the 1.2 MB CRD needs server-side apply")
	assert.Nil(t, m.get(t, "pulumi:providers:kubernetes", "gpu-ci").Inputs["upsertExistingObjects"])
	for _, r := range m.programResources() {
		if strings.HasPrefix(r.Type, "kubernetes:") {
			isCRD := r.Type == "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
			assert.Equal(t, isCRD, strings.Contains(r.Raw.Provider, "::gpu-ci-crds::"), "%s: provider %s", r.Key(), r.Raw.Provider)
		}
	}
	labels := func(m *mocks) any {
		set := m.get(t, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "gpu-ci-arc-crd-autoscalingrunnersets.actions.github.com")
		versions := path(set.Inputs, "spec", "versions").([]any)
		return path(versions[0], "schema", "openAPIV3Schema", "properties", "spec", "properties", "runnerScaleSetLabels", "type")
	}
	assert.Equal(t, "array", labels(m), "0.14's scale-set labels are in the schema, so the API server keeps them")

	// ARC v0.27.6's charts (0.6.1), as local directories: the two move together.
	arcModule, err := gomodule.Find("github.com/actions/actions-runner-controller@v0.27.6")
	require.NoError(t, err)
	arc := arcModule.Dir // the two charts move together
	old := runDev(t, "helmCharts", `{"gha-runner-scale-set-controller": {"chart": "`+filepath.Join(arc, "charts", "gha-runner-scale-set-controller")+`"}, "gha-runner-scale-set": {"chart": "`+filepath.Join(arc, "charts", "gha-runner-scale-set")+`"}}`)
	oldCRDs := old.all("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
	require.Len(t, oldCRDs, len(crds))
	for i := range crds {
		assert.Equal(t, crds[i].Key(), oldCRDs[i].Key(), "same resources: a version change is an update, never a replacement (which would delete every scale set)")
	}
	assert.Nil(t, labels(old), "chart 0.6.1's CRD predates the labels")
}

// onDemandRetry: the pool's twin is an on-demand NodePool and a scale set of its own, idle
// at zero, with the pool's GPU types, form and sizes; only its name and its own label route
// a retry to it, and neither scale set's labels contain the other's.
func TestOnDemandRetryTwin(t *testing.T) {
	m := runDev(t)
	spot := m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-gpu-spot-nodepool")
	twin := m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-gpu-spot-on-demand-nodepool")
	assert.Equal(t, "gpu-spot-on-demand", path(twin.Inputs, "metadata", "name"))
	reqs := func(r registered) map[string]any {
		out := map[string]any{}
		for _, req := range path(r.Inputs["spec"], "template", "spec", "requirements").([]any) {
			out[path(req, "key").(string)] = path(req, "values")
		}
		return out
	}
	assert.Equal(t, []any{"on-demand"}, reqs(twin)["karpenter.sh/capacity-type"], "the twin never waits for spot")
	assert.Equal(t, []any{"spot"}, reqs(spot)["karpenter.sh/capacity-type"])
	assert.Equal(t, reqs(spot)["node.kubernetes.io/instance-type"], reqs(twin)["node.kubernetes.io/instance-type"], "the same GPUs")
	assert.Equal(t, path(spot.Inputs["spec"], "limits"), path(twin.Inputs["spec"], "limits"))
	assert.Equal(t, path(spot.Inputs["spec"], "template", "spec", "taints"), path(twin.Inputs["spec"], "template", "spec", "taints"))
	m.get(t, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu-ci-gpu-spot-on-demand-nodeclass")

	v := releaseNamed(t, m, "lux-gpu-t4-on-demand").Inputs["values"]
	assert.Equal(t, "lux-gpu-t4-on-demand", path(v, "runnerScaleSetName"))
	assert.Equal(t, []any{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4-on-demand"}, path(v, "scaleSetLabels"))
	assert.Equal(t, 0.0, path(v, "minRunners"), "idle at zero: nothing while no retry waits")
	assert.Equal(t, 1.0, path(v, "maxRunners"))
	assert.Equal(t, map[string]any{"lux-gpu-ci.luxfi.com/pool": "gpu-spot-on-demand"}, path(v, "template", "spec", "nodeSelector"))
	spotValues := releaseNamed(t, m, "lux-gpu-t4").Inputs["values"]
	runner := func(v any) map[string]any {
		return path(v, "template", "spec", "containers").([]any)[0].(map[string]any)
	}
	for _, field := range []string{"image", "command", "resources", "volumeMounts"} {
		assert.Equal(t, runner(spotValues)[field], runner(v)[field], "the same runner: %s", field)
	}
	// Its job summary prices the twin's on-demand minutes.
	env := map[string]any{}
	for _, e := range runner(v)["env"].([]any) {
		env[e.(map[string]any)["name"].(string)] = e.(map[string]any)["value"]
	}
	assert.Equal(t, "on-demand", env["GPUCI_CAPACITY"])
	assert.Contains(t, strings.Fields(env["GPUCI_PRICES"].(string)), "g4dn.xlarge=0.526", "on-demand prices")
	assert.Contains(t, strings.Fields(env["GPUCI_PRICES"].(string)), "g5.xlarge=1.006", "of every catalogued type, not only the pool's")
	assert.Contains(t, releaseNamed(t, m, "lux-gpu-t4-on-demand").Deps(), twin.Key(), "the twin's runners go before its nodes")

	// A pool without onDemandRetry has no twin.
	assert.Len(t, m.all("kubernetes:karpenter.sh/v1:NodePool"), 3, "gpu-spot, its twin, gpu-spot-container")
}

// A drain (a managed node group update rolling the system nodes) must not evict a runner or a
// job pod while its job runs: two budgets with disjoint selectors (one pod, one budget) allow
// no eviction of a Ready pod; the job pods' none even of a starting one, the container-form
// runners' any that is not Ready (an idle one: its readiness is its job).
func TestRunningJobsBudgets(t *testing.T) {
	m := runDev(t)
	budgets := map[string]map[string]any{}
	var jobsBudget map[string]any
	for _, pdb := range m.all("kubernetes:policy/v1:PodDisruptionBudget") {
		switch ns := path(pdb.Inputs, "metadata", "namespace"); ns {
		case "arc-runners":
			budgets[path(pdb.Inputs, "metadata", "name").(string)] = pdb.Inputs["spec"].(map[string]any)
		case "arc-jobs-gpu-spot-container":
			assert.Equal(t, "running-jobs", path(pdb.Inputs, "metadata", "name"))
			jobsBudget = pdb.Inputs["spec"].(map[string]any)
		default:
			t.Errorf("a budget in namespace %v", ns)
		}
	}
	require.Len(t, budgets, 2)
	assert.Equal(t, budgets["running-jobs"], jobsBudget, "the container-form pool's job pods, in their own namespace, under the same budget")
	pool := []any{map[string]any{"key": "lux-gpu-ci.luxfi.com/pool", "operator": "Exists"}}
	jobs, runners := budgets["running-jobs"], budgets["busy-runners"]
	assert.Equal(t, pool, path(jobs, "selector", "matchExpressions"), "a pool's pods")
	assert.Equal(t, map[string]any{"lux-gpu-ci.luxfi.com/runner-role": "job"}, path(jobs, "selector", "matchLabels"), "where a job's code runs")
	assert.Equal(t, "IfHealthyBudget", jobs["unhealthyPodEvictionPolicy"], "not even a starting job's pod")
	assert.Equal(t, pool, path(runners, "selector", "matchExpressions"))
	assert.Equal(t, map[string]any{"lux-gpu-ci.luxfi.com/runner-role": "relay"}, path(runners, "selector", "matchLabels"), "the container-form runners")
	assert.Equal(t, "AlwaysAllow", runners["unhealthyPodEvictionPolicy"], "a runner that is not Ready (idle) may go")
	for _, b := range budgets {
		assert.EqualValues(t, 6, b["minAvailable"], "dev's three scale sets, one runner each, each with at most a job pod: 6 pods at most, so no eviction of a Ready pod is ever allowed")
		assert.Nil(t, b["maxUnavailable"], "maxUnavailable needs a scale subresource ARC's EphemeralRunner does not have")
	}
	assert.Contains(t, m.get(t, "kubernetes:policy/v1:PodDisruptionBudget", "gpu-ci-arc-busy-runners").Deps(), "kubernetes:policy/v1:PodDisruptionBudget::gpu-ci-arc-running-jobs",
		"created after the running-jobs budget has narrowed: never two budgets over one runner")
	for _, name := range []string{"lux-gpu-t4", "lux-gpu-t4-on-demand", "lux-gpu-t4-container"} {
		for _, b := range []string{"running-jobs", "busy-runners"} {
			assert.Contains(t, releaseNamed(t, m, name).Deps(), "kubernetes:policy/v1:PodDisruptionBudget::gpu-ci-arc-"+b, "%s's runners start under the budgets, and they outlive them", name)
		}
	}
}

// An ARC upgrade across a minor version reinstalls ARC in ARC's own order (remove the scale
// sets, upgrade the controller, install the scale sets): the minor is the controller's
// replacement trigger (delete-first), every scale set is replaced with the controller, and a
// scale set's release always waits, so its uninstall blocks until ARC has cleaned it up.
func TestARCUpgradeAcrossAMinorReinstallsTheScaleSets(t *testing.T) {
	check := func(t *testing.T, m *mocks, minor string) {
		controller := releaseNamed(t, m, "arc")
		rpc := controller.Raw.RegisterRPC
		require.NotNil(t, rpc.GetReplacementTrigger(), "the controller has a replacement trigger")
		assert.Equal(t, minor, rpc.GetReplacementTrigger().GetStringValue(), "the trigger is ARC's major.minor, so a patch bump is an in-place upgrade")
		assert.True(t, rpc.GetDeleteBeforeReplace(), "the old controller goes before the new one is installed")
		assert.Equal(t, "ARC "+minor+": a change of minor version reinstalls the controller and every scale set", controller.Inputs["description"], "a preview shows the minor change")

		var scaleSets int
		for _, r := range m.all("kubernetes:helm.sh/v3:Release") {
			if r.Inputs["namespace"] != "arc-runners" {
				continue
			}
			scaleSets++
			assert.Equal(t, []string{controller.URN}, r.Raw.RegisterRPC.GetReplaceWith(), "%s is replaced with the controller", r.Name)
			assert.Contains(t, r.Deps(), controller.Key(), "%s is installed after the controller", r.Name)
			assert.Equal(t, false, r.Inputs["skipAwait"], "%s: its uninstall waits for ARC's cleanup", r.Name)
			assert.EqualValues(t, 3600, r.Inputs["timeout"], "%s: runnerDrainTimeout's default hour for the running jobs", r.Name)
		}
		assert.Equal(t, 3, scaleSets, "the dev stack's three scale sets")
	}
	t.Run("the pinned ARC", func(t *testing.T) { check(t, runDev(t), "0.14") })
	t.Run("even where the other releases skip their waits", func(t *testing.T) {
		m := newMocks()
		m.Cloud.EKSEndpoint = "https://127.0.0.1:6443"
		require.NoError(t, m.run(testkit.With(testkit.StackConfig(t, "dev"), "helmSkipAwait", "true")))
		assert.Equal(t, true, releaseNamed(t, m, "karpenter").Inputs["skipAwait"])
		check(t, m, "0.14")
	})
	t.Run("a drain of runnerDrainTimeout", func(t *testing.T) {
		m := runDev(t, "runnerDrainTimeout", "90m")
		for _, name := range []string{"lux-gpu-t4", "lux-gpu-t4-on-demand", "lux-gpu-t4-container"} {
			assert.EqualValues(t, 5400, releaseNamed(t, m, name).Inputs["timeout"], name)
		}
		assert.EqualValues(t, 600, releaseNamed(t, m, "arc").Inputs["timeout"], "the controller's own wait is unchanged")
	})
	t.Run("ARC 0.6", func(t *testing.T) {
		arc, err := gomodule.Find("github.com/actions/actions-runner-controller@v0.27.6")
		require.NoError(t, err)
		check(t, runDev(t, "helmCharts", `{"gha-runner-scale-set-controller": {"chart": "`+filepath.Join(arc.Dir, "charts", "gha-runner-scale-set-controller")+`"}, "gha-runner-scale-set": {"chart": "`+filepath.Join(arc.Dir, "charts", "gha-runner-scale-set")+`"}}`), "0.6")
	})
}

// Every Helm release is registered as pulumi-kubernetes' SDK registers one: its type token,
// compat "true" (live stacks hold it in their state) and only inputs the SDK names
// (k8s/helmrelease_test.go compares the two sources).
func TestReleasesRegisterAsTheSDKDoes(t *testing.T) {
	m := runDev(t)
	releases := m.all("kubernetes:helm.sh/v3:Release")
	require.Len(t, releases, 7, "Karpenter and its CRDs, the device plugin, ARC's controller and three scale sets")
	for _, r := range releases {
		assert.Equal(t, "true", r.Inputs["compat"], r.Key())
		assert.Subset(t, []string{"chart", "compat", "description", "name", "namespace", "repositoryOpts", "skipAwait", "skipCrds", "timeout", "values", "version"}, keys(r.Inputs), r.Key())
	}
	assert.Equal(t, map[string]any{"repo": "https://nvidia.github.io/k8s-device-plugin"}, releaseNamed(t, m, "nvidia-device-plugin").Inputs["repositoryOpts"])
	assert.NotContains(t, releaseNamed(t, m, "karpenter").Inputs, "repositoryOpts", "an OCI chart is named whole in chart")
}

// The karpenter-crd release keeps its CRDs when it is uninstalled (the chart annotates them
// with Helm's keep policy) and, under its pinned name, is replaced by deleting it first.
func TestKarpenterCRDReleaseKeepsItsCRDs(t *testing.T) {
	m := runDev(t)
	r := releaseNamed(t, m, "karpenter-crd")
	assert.Equal(t, map[string]any{"additionalAnnotations": map[string]any{"helm.sh/resource-policy": "keep"}}, r.Inputs["values"])
	assert.True(t, r.Raw.RegisterRPC.GetDeleteBeforeReplace(), "a new install under a name in use would fail")
}

// Day 2: a pool's instanceTypes edit (one more size of the same GPU) changes its NodePools and
// leaves its scale set's values alone, so ARC does not roll the pool's runners; make e2e's
// pool edit holds the whole plan to the two NodePools.
func TestAnInstanceTypesEditLeavesTheScaleSetAlone(t *testing.T) {
	before := releaseNamed(t, runDev(t), "lux-gpu-t4").Inputs["values"]
	m := runDev(t, "gpuPools", `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge", "g4dn.2xlarge"], "capacityTypes": ["spot"], "gpuLimit": 1, "consolidateAfter": "30s",
		"runnerScaleSetName": "lux-gpu-t4", "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4"], "maxRunners": 1, "onDemandRetry": true},
		{"name": "gpu-spot-container", "instanceTypes": ["g4dn.xlarge"], "capacityTypes": ["spot"], "gpuLimit": 1, "consolidateAfter": "30s",
		"runnerScaleSetName": "lux-gpu-t4-container", "runnerLabels": ["self-hosted", "linux", "amd64", "cuda", "gpu", "t4-container"], "maxRunners": 1, "jobForm": "container", "runnerGroup": "gpu-trusted", "trustedRepositoriesOnly": true}]`)
	assert.Equal(t, before, releaseNamed(t, m, "lux-gpu-t4").Inputs["values"])
	// The on-demand twin too, whose table prices g4dn.2xlarge.
	assert.Equal(t, releaseNamed(t, runDev(t), "lux-gpu-t4-on-demand").Inputs["values"], releaseNamed(t, m, "lux-gpu-t4-on-demand").Inputs["values"])
}
