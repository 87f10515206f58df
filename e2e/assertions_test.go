//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/destroyorder"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/stack"
)

// assertAccount checks what the stack chose in the account: the zones EKS accepts that
// offer the GPUs, and the spot role it found there, adopted.
func assertAccount(t *testing.T, outputs auto.OutputMap, resources []apitype.ResourceV3) {
	assert.Equal(t, []any{"us-west-2b (usw2-az2)", "us-west-2c (usw2-az3)"}, outputs["availabilityZones"].Value,
		"us-west-2a offers no GPU type of the pool")
	var spotRole []string
	for _, r := range resources {
		if r.Type == "aws:iam/serviceLinkedRole:ServiceLinkedRole" {
			spotRole = append(spotRole, string(r.ID))
			assert.True(t, r.RetainOnDelete)
		}
	}
	assert.Equal(t, []string{fakeaws.SpotRoleArn}, spotRole)
}

// assertEKSChildren names what pulumi-eks created itself and asserts it: the cluster with
// its service role and security groups, its own two Kubernetes providers, and for the node
// group a launch template — and nothing unused or registered twice.
func assertEKSChildren(t *testing.T, resources []apitype.ResourceV3) {
	cluster := descendants(resources, "eks:index:Cluster")
	nodeGroup := descendants(resources, "eks:index:ManagedNodeGroup")
	t.Logf("pulumi-eks created for the cluster:\n  %s", strings.Join(cluster, "\n  "))
	t.Logf("pulumi-eks created for the system node group:\n  %s", strings.Join(nodeGroup, "\n  "))

	count := func(list []string, typ string) int {
		return len(slices.DeleteFunc(slices.Clone(list), func(s string) bool { return !strings.HasPrefix(s, typ+"::") }))
	}
	assert.Equal(t, 1, count(cluster, "aws:eks/cluster:Cluster"))
	assert.Equal(t, 1, count(cluster, "aws:iam/role:Role"), "only the cluster's service role: no unused default instance role")
	assert.Zero(t, count(cluster, "aws:eks/accessEntry:AccessEntry"),
		"pulumi-eks registers no access entry: EKS makes the system node role's, the stack makes Karpenter's")
	assert.Zero(t, count(cluster, "kubernetes:core/v1:ConfigMap"), "no aws-auth ConfigMap with API authentication")
	assert.Zero(t, count(cluster, "aws:iam/instanceProfile:InstanceProfile"))
	assert.Equal(t, 1, count(nodeGroup, "aws:eks/nodeGroup:NodeGroup"))
	assert.Zero(t, count(nodeGroup, "aws:ec2/launchTemplate:LaunchTemplate"), "the node group uses the stack's tagged launch template")

	// Across the stack: one access entry, Karpenter's node role's, of type EC2_LINUX.
	var entries []string
	for _, r := range resources {
		if r.Type == "aws:eks/accessEntry:AccessEntry" {
			entries = append(entries, fmt.Sprintf("%s %v %v", r.URN.Name(), r.Inputs["principalArn"], r.Inputs["type"]))
		}
	}
	assert.Equal(t, []string{"karpenter-node arn:aws:iam::" + fakeaws.Account + ":role/lux-gpu-ci-karpenter-node EC2_LINUX"}, entries)
}

// assertFakeCalls checks the fake AWS's log: no call failed, and the program's kubeconfig
// authenticated with `aws eks get-token` for this cluster and region.
func assertFakeCalls(t *testing.T, calls []fakeaws.Call) {
	require.NotEmpty(t, calls)
	var failed, tokens []string
	invokes := map[string]int{}
	for _, c := range calls {
		if c.Error != "" {
			failed = append(failed, c.Method+" "+c.Type+c.Token+": "+c.Error)
		}
		if c.Method == "Invoke" {
			invokes[c.Token]++
		}
		if c.Method == "aws" && len(c.Args) > 1 && c.Args[1] == "get-token" {
			tokens = append(tokens, strings.Join(c.Args, " "))
		}
	}
	assert.Empty(t, failed, "calls the fake refused")
	t.Logf("invokes: %v", invokes)
	assert.Contains(t, tokens, "eks get-token --cluster-name lux-gpu-ci --region us-west-2 --profile "+e2eProfile+" --output json",
		"the program's kubeconfig reached the cluster as the identity that created it")
}

// assertCluster checks what the Kubernetes layer put into the API server.
func assertCluster(t *testing.T, ctx context.Context, restCfg *rest.Config, kube dynamic.Interface) {
	np, err := kube.Resource(nodePools).Get(ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err, "NodePool")
	limit, _, _ := unstructured.NestedString(np.Object, "spec", "limits", "nvidia.com/gpu")
	assert.Equal(t, "1", limit)
	labels, _, _ := unstructured.NestedStringMap(np.Object, "spec", "template", "metadata", "labels")
	assert.Equal(t, "true", labels["nvidia.com/gpu.present"])
	nc, err := kube.Resource(ec2NodeClasses).Get(ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err, "EC2NodeClass")
	role, _, _ := unstructured.NestedString(nc.Object, "spec", "role")
	assert.Equal(t, "lux-gpu-ci-karpenter-node", role, "the role the AWS layer created, by its output")

	for ns, releases := range map[string][]string{
		"kube-system":          {"karpenter-crd", "karpenter"},
		"nvidia-device-plugin": {"nvidia-device-plugin"},
		"arc-systems":          {"arc"},
		"arc-runners":          configuredScaleSets(t),
	} {
		for _, rel := range releases {
			list, err := kube.Resource(secrets).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,status=deployed,name=" + rel})
			require.NoError(t, err)
			assert.Len(t, list.Items, 1, "Helm release %s/%s is deployed", ns, rel)
		}
	}
	karpenter, err := kube.Resource(secrets).Namespace("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=karpenter"})
	require.NoError(t, err)
	require.NotEmpty(t, karpenter.Items)
	// Metrics on, as ARC's chart renders the stack's values into the controller it runs: its
	// own, and the listeners' it configures (docs/operations.md, "Metrics").
	arc, err := kube.Resource(deployments).Namespace(wellknown.ARCNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=gha-rs-controller"})
	require.NoError(t, err)
	require.Len(t, arc.Items, 1, "ARC's controller Deployment")
	containers, _, _ := unstructured.NestedSlice(arc.Items[0].Object, "spec", "template", "spec", "containers")
	require.NotEmpty(t, containers)
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	for _, want := range []string{"--metrics-addr=:8080", "--listener-metrics-addr=:8080", "--listener-metrics-endpoint=/metrics"} {
		assert.Contains(t, args, want, "ARC's controller as deployed")
	}
	creds, err := kube.Resource(secrets).Namespace("arc-runners").Get(ctx, "arc-github-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	data, _, _ := unstructured.NestedStringMap(creds.Object, "data")
	assert.Equal(t, b64(token), data["github_token"], "the credential reached the cluster intact")
	runnerSet, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, "lux-gpu-t4", metav1.GetOptions{})
	require.NoError(t, err, "the scale set's AutoscalingRunnerSet")
	secretName, _, _ := unstructured.NestedString(runnerSet.Object, "spec", "githubConfigSecret")
	assert.Equal(t, "arc-github-credentials", secretName)
	_, err = kube.Resource(configMaps).Namespace("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no aws-auth ConfigMap (API authentication only): %v", err)
	assertContainerForm(t, ctx, restCfg, kube)

	// onDemandRetry: gpu-spot's twin, on-demand capacity only, with a scale set of its own.
	twin, err := kube.Resource(nodePools).Get(ctx, "gpu-spot-on-demand", metav1.GetOptions{})
	require.NoError(t, err, "the retry twin's NodePool")
	reqs, _, _ := unstructured.NestedSlice(twin.Object, "spec", "template", "spec", "requirements")
	assert.Contains(t, reqs, map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}})
	twinSet, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, "lux-gpu-t4-on-demand", metav1.GetOptions{})
	require.NoError(t, err, "the retry twin's scale set")
	minRunners, _, _ := unstructured.NestedInt64(twinSet.Object, "spec", "minRunners")
	assert.Zero(t, minRunners, "idle at zero")
}

// assertContainerForm checks the container-form pool as the API server holds it: the job pod
// template the runner mounts, the runner's account, and what that account may do according
// to the API server's own RBAC authorizer.
func assertContainerForm(t *testing.T, ctx context.Context, restCfg *rest.Config, kube dynamic.Interface) {
	set, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, "lux-gpu-t4-container", metav1.GetOptions{})
	require.NoError(t, err, "the container-form scale set")
	var tmpl corev1.PodTemplateSpec
	raw, _, _ := unstructured.NestedMap(set.Object, "spec", "template")
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl))
	const jobsNS = "arc-jobs-gpu-spot-container"
	account := wellknown.ContainerHooksAccount("gpu-spot-container")
	assert.Equal(t, account, tmpl.Spec.ServiceAccountName, "the pool's own account")
	// The job pod template, and the job hooks that write the job's summary.
	require.Len(t, tmpl.Spec.Volumes, 2)
	mounted := map[string]map[string]string{}
	for _, v := range tmpl.Spec.Volumes {
		require.NotNil(t, v.ConfigMap, "volume %s", v.Name)
		cm, err := kube.Resource(configMaps).Namespace("arc-runners").Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		require.NoError(t, err, "the runner mounts ConfigMap %s: it must exist", v.ConfigMap.Name)
		mounted[v.ConfigMap.Name], _, _ = unstructured.NestedStringMap(cm.Object, "data")
	}
	assert.Contains(t, mounted["gpuci-job-hooks"], "gpu-sampler.sh", "the job pod's GPU sampler, beside the runner's hooks")
	data := mounted["lux-gpu-t4-container-job-pod"]
	var job corev1.PodTemplateSpec
	require.NoError(t, sigsyaml.UnmarshalStrict([]byte(data["job-pod.yaml"]), &job))
	require.Len(t, job.Spec.Containers, 1)
	assert.Equal(t, "1", job.Spec.Containers[0].Resources.Limits.Name(wellknown.GPUResource, "").String(), "the job pod gets the GPU")
	assert.Equal(t, "gpu-spot-container", job.Spec.NodeSelector[wellknown.PoolLabel])
	sampler, err := kube.Resource(configMaps).Namespace(jobsNS).Get(ctx, "gpuci-job-hooks", metav1.GetOptions{})
	require.NoError(t, err, "the job pods mount the GPU sampler from their own namespace")
	_, found, _ := unstructured.NestedString(sampler.Object, "data", "gpu-sampler.sh")
	assert.True(t, found, "the sampler")

	core, err := kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)
	runner := "system:serviceaccount:arc-runners:" + account
	for _, c := range []struct {
		ns, verb, resource, subresource, group string
		allowed                                bool
	}{
		// What the hooks need, in the pool's jobs' namespace only.
		{jobsNS, "create", "pods", "", "", true},
		{jobsNS, "delete", "pods", "", "", true},
		{jobsNS, "create", "pods", "exec", "", true},
		{jobsNS, "watch", "pods", "log", "", true},
		{jobsNS, "create", "secrets", "", "", true},
		{jobsNS, "patch", "pods", "", "", false},
		{jobsNS, "create", "jobs", "", "batch", false},
		{jobsNS, "create", "rolebindings", "", "rbac.authorization.k8s.io", false},
		// Nothing where ARC's credential, the runners' JIT configs and the other pools' runners are.
		{"arc-runners", "get", "secrets", "", "", false},
		{"arc-runners", "list", "secrets", "", "", false},
		{"arc-runners", "create", "pods", "", "", false},
		{"arc-runners", "create", "pods", "exec", "", false},
		{"arc-systems", "get", "secrets", "", "", false},
		{"kube-system", "create", "pods", "", "", false},
		{"kube-system", "get", "secrets", "", "", false},
		// A job pod's node by its name, for the job summary's spot or on-demand; no listing.
		{"", "get", "nodes", "", "", true},
		{"", "list", "nodes", "", "", false},
		{"", "patch", "nodes", "", "", false},
	} {
		review, err := core.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: runner, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:arc-runners", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.subresource},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, c.allowed, review.Status.Allowed, "may the container-form runner %s %s/%s in %q?", c.verb, c.resource, c.subresource, c.ns)
	}
}

// assertClusterEmpty checks that destroy left nothing of ours in the API server.
func assertClusterEmpty(t *testing.T, ctx context.Context, kube dynamic.Interface) {
	for _, ns := range []string{"nvidia-device-plugin", "arc-systems", "arc-runners", "arc-jobs-gpu-spot-container", "gpuci-retrier"} {
		waitGone(t, ctx, kube.Resource(namespaces), ns)
	}
	// Karpenter's CRDs carry Helm's keep policy (k8s.KarpenterCRDValues): the karpenter-crd
	// release's uninstall leaves them, empty — every NodePool and EC2NodeClass was deleted by
	// the program while Karpenter still ran. ARC's are the program's own and never deleted.
	// On AWS both go with the cluster.
	for _, crd := range karpenterCRDs {
		c, err := kube.Resource(crds).Get(ctx, crd, metav1.GetOptions{})
		if assert.NoError(t, err, "%s is kept on destroy", crd) {
			assert.Equal(t, "keep", c.GetAnnotations()["helm.sh/resource-policy"], crd)
		}
	}
	for _, kind := range []schema.GroupVersionResource{nodePools, ec2NodeClasses, nodeClaims} {
		left, err := kube.Resource(kind).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, left.Items, "no %s is left", kind.Resource)
	}
	for _, crd := range arcCRDs {
		_, err := kube.Resource(crds).Get(ctx, crd, metav1.GetOptions{})
		assert.NoError(t, err, "%s is retained on destroy", crd)
	}
	sets, err := kube.Resource(runnerSets).Namespace("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, sets.Items, "no AutoscalingRunnerSet is left")
	helm, err := kube.Resource(secrets).Namespace("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	require.NoError(t, err)
	assert.Empty(t, helm.Items, "no Helm release is left in kube-system")
}

// karpenterCRDs are the karpenter-crd chart's CRDs the stack uses.
var karpenterCRDs = []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"}

// arcCRDs are ARC's four CRDs, which the program declares and retains.
var arcCRDs = []string{"autoscalingrunnersets.actions.github.com", "autoscalinglisteners.actions.github.com",
	"ephemeralrunnersets.actions.github.com", "ephemeralrunners.actions.github.com"}

// verifyHealthyCluster writes what a healthy cluster would show — a Ready system node,
// Running Karpenter and ARC pods, a Ready NodePool — through the API (status subresources;
// no kubelet or controllers run here), then runs the gpuci verify command against it.
func verifyHealthyCluster(t *testing.T, ctx context.Context, gpuci, kubeconfig string, restCfg *rest.Config, kube dynamic.Interface) {
	t.Helper()
	core, err := kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)
	// Everything verify reads is live: the controllers' pods, which kube-controller-manager
	// made from the releases' Deployments and the scheduler placed on a system node, and the
	// NodePools, whose status the real Karpenter writes.
	for _, p := range []struct{ ns, selector string }{
		{wellknown.KarpenterNamespace, wellknown.KarpenterPods},
		{wellknown.ARCNamespace, wellknown.ARCControllerPods},
	} {
		require.Eventually(t, func() bool {
			pods, err := core.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: p.selector})
			return err == nil && len(pods.Items) > 0 && pods.Items[0].Status.Phase == corev1.PodRunning
		}, time.Minute, 250*time.Millisecond, "a %s pod runs in %s", p.selector, p.ns)
	}
	for _, pool := range []string{"gpu-spot", "gpu-spot-on-demand", "gpu-spot-container", "gpu-spot-container-on-demand"} {
		require.Eventually(t, func() bool {
			np, err := kube.Resource(nodePools).Get(ctx, pool, metav1.GetOptions{})
			if err != nil {
				return false
			}
			conditions, _, _ := unstructured.NestedSlice(np.Object, "status", "conditions")
			for _, c := range conditions {
				if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
					return true
				}
			}
			return false
		}, time.Minute, 250*time.Millisecond, "Karpenter reports NodePool %s Ready", pool)
	}

	// The operator's command itself, as a team runs it, reading the repository's stack file
	// and this API server's kubeconfig, and the organization's runner groups the stack file
	// trusts from GitHub (a stand-in answering in the REST API's shapes: "List self-hosted
	// runner groups for an organization", "List repository access to a self-hosted runner
	// group"), as the organization's settings should have them.
	gh := http.NewServeMux()
	orgRunnerGroups(gh)
	srv := httptest.NewServer(gh)
	defer srv.Close()
	cmd := exec.CommandContext(ctx, gpuci, "verify", "--project", repoRoot(t), "--stack", stackName, "--kubeconfig", kubeconfig, "--json")
	cmd.Env = append(os.Environ(), "GITHUB_TOKEN=ghs_e2e", "GITHUB_API_URL="+srv.URL, "DEPLOY_REPOSITORY=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("gpuci verify --json:\n%s%s", stdout.String(), stderr.String())
	var checks []struct {
		Name     string `json:"name"`
		OK       bool   `json:"ok"`
		Evidence string `json:"evidence"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &checks), "gpuci verify --json prints its checks")
	require.NotEmpty(t, checks, "gpuci verify ran no checks")
	var groupsChecked int
	for _, c := range checks {
		assert.True(t, c.OK, "%s — %s", c.Name, c.Evidence)
		if strings.HasPrefix(c.Name, "runner group ") {
			groupsChecked++
		}
	}
	assert.Equal(t, 2, groupsChecked, "the container-form pool's group and the retry runner's, as GitHub has them")
	require.NoError(t, runErr, "gpuci verify exits 0 only when every check holds")
}

// orgRunnerGroups serves the organization's runner groups the stack file trusts, as its
// settings should have them (GitHub's REST reference: "List self-hosted runner groups for an
// organization", "List repository access to a self-hosted runner group"): the container-form
// pool's and the retry runner's, each limited to selected private repositories.
func orgRunnerGroups(mux *http.ServeMux) {
	groups := []map[string]any{
		{"id": 2, "name": "gpu-trusted", "visibility": "selected", "allows_public_repositories": false},
		{"id": 3, "name": retryScaleSet, "visibility": "selected", "allows_public_repositories": false},
	}
	mux.HandleFunc("GET /api/v3/orgs/luxfi/actions/runner-groups", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"total_count": len(groups), "runner_groups": groups})
	})
	mux.HandleFunc("GET /api/v3/orgs/luxfi/actions/runner-groups/{id}/repositories", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"total_count": 1, "repositories": []map[string]any{{"full_name": "luxfi/app", "private": true}}})
	})
}

// buildGpuci is gpuci built from cmd/gpuci: the build the program made for the stack's pods
// (stack.BuildGpuci, once per process, the inline program's being this one), which is the
// operator's command too (a static linux/amd64 binary, as a team on Linux installs it).
func buildGpuci(t *testing.T) string {
	b, err := stack.BuildGpuci()
	require.NoError(t, err)
	return b.Path
}

// doctorFinding is one finding of `gpuci doctor --json`.
type doctorFinding struct {
	Symptom  string   `json:"symptom"`
	Problem  bool     `json:"problem"`
	Evidence []string `json:"evidence"`
}

// gpuciDoctor runs `gpuci doctor --json` as an operator does, with env added to the
// environment, and returns the finding named symptom (the run fails if doctor does not
// examine it).
func gpuciDoctor(t tb, ctx context.Context, gpuci, kubeconfig, symptom string, env ...string) doctorFinding {
	t.Helper()
	cmd := exec.CommandContext(ctx, gpuci, "doctor", "--project", repoRoot(t), "--stack", stackName, "--kubeconfig", kubeconfig, "--json")
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run() // doctor exits non-zero when it finds a problem
	var findings []doctorFinding
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &findings), "gpuci doctor --json: %s%s", stdout.String(), stderr.String())
	for _, f := range findings {
		if f.Symptom == symptom {
			t.Logf("gpuci doctor: %s:\n%s", f.Symptom, strings.Join(f.Evidence, "\n"))
			return f
		}
	}
	require.Fail(t, "gpuci doctor does not examine "+symptom, stdout.String())
	return doctorFinding{}
}

// whatUpMade: the account, pulumi-eks's children, the fake AWS's calls, the destroy order on
// the real state, the cluster, ARC's scale sets in GitHub and the image path, after the first up.
func (r *run) whatUpMade(t *testing.T) {
	deployment, resources := r.h.state(t, r.ctx)
	t.Run("the account is as the stack found it", func(t *testing.T) { assertAccount(t, r.up.Outputs, resources) })
	t.Run("pulumi-eks creates only what we expect", func(t *testing.T) { assertEKSChildren(t, resources) })
	t.Run("the fake AWS was asked only what it knows", func(t *testing.T) { assertFakeCalls(t, r.h.calls(t)) })
	t.Run("destroy order holds on the real state", func(t *testing.T) {
		g, err := destroyorder.GraphFromDeployment(deployment)
		require.NoError(t, err)
		assert.Empty(t, g.Violations(destroyorder.Rules))
	})
	t.Run("the cluster holds the Kubernetes layer", func(t *testing.T) { assertCluster(t, r.ctx, r.restCfg, r.kube) })
	t.Run("ARC registered every scale set in GitHub", func(t *testing.T) { assertScaleSetsServe(t, r.ctx, r.kube, r.github, "0.14.2") })
	t.Run("images come through the cache, inside AWS", func(t *testing.T) { assertImagePath(t, r.ctx, r.up.Outputs, resources, r.kube) })
}

// destroyed: the destroy leaves nothing in the state, the cluster or the account but the
// account-wide spot role, and ARC removed the scale sets from GitHub before its controller went.
func (r *run) destroyed(t *testing.T) {
	_, err := r.h.destroy(t, r.ctx)
	require.NoError(t, err)
	_, left := r.h.state(t, r.ctx)
	assert.Empty(t, left, "destroy leaves nothing in the state")
	assertClusterEmpty(t, r.ctx, r.kube)
	assertAccountEmpty(t, r.karp)
	assert.Empty(t, r.github.Registered(), "destroy removes the scale sets from GitHub (ARC's cleanup ran before its controller went)\n%s", r.github.Log())
	deletes := 0
	for _, c := range r.h.calls(t) {
		if c.Method == "Delete" {
			deletes++
			assert.NotEqual(t, "aws:iam/serviceLinkedRole:ServiceLinkedRole", c.Type, "the account-wide spot role is kept on destroy")
		}
	}
	assert.Positive(t, deletes, "the fake AWS saw the destroy")
}
