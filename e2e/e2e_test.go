//go:build e2e

// Package e2e runs the whole program — stack.Program, exactly what `pulumi up` runs: config,
// then the AWS layer, then the Kubernetes layer — through the real Pulumi engine (Automation
// API, local file backend), from the repository's own Pulumi.yaml and Pulumi.dev.yaml, with:
//
//   - the real pulumi-eks component: the @pulumi/eks npm package at the version go.mod pins,
//     run by Node as the eks plugin, creating its own children;
//   - a fake AWS (hack/fakeaws, answering from internal/fakeaws like the unit tests' mocks)
//     as the aws plugin and the `aws`/`kubectl` CLIs, whose EKS cluster is
//   - a real kube-apiserver + etcd + kube-controller-manager on 127.0.0.1, reached with the
//     kubeconfig the program builds.
//
// It proves what neither the mocks nor an offline render can: the engine accepts the stack's
// config; pulumi-eks accepts our arguments and creates only what we expect; preview and up
// succeed; a second preview changes nothing; a gpuLimit change updates a pool (and its twin) in place;
// the destroy order holds on the real state; destroy leaves nothing.
//
// Run it with `make e2e` (hack/e2e.sh builds the tools and starts the API server). Run
// directly without them, it fails, naming what is missing.
package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/chartrender"
	"github.com/luxfi/lux-gpu-ci/internal/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testkit/destroyorder"
	"github.com/luxfi/lux-gpu-ci/internal/verify"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/stack"
	"github.com/luxfi/lux-gpu-ci/versions"
)

const (
	// stackName is the repository stack file the e2e deploys.
	stackName = "dev"
	token     = "ghp_E2ETOKEN_0123456789"
	// previousARCModule holds an older ARC (controller chart 0.6.1, v0.27.6 being the newest
	// ARC in a Go module): the e2e moves the stack to it and back to show that ARC's CRDs
	// follow the chart version. The pinned 0.14.2 charts come from their copy in k8s/arc.
	previousARCModule = "github.com/actions/actions-runner-controller@v0.27.6"
)

var (
	nodePools      = wellknown.NodePools
	ec2NodeClasses = wellknown.EC2NodeClasses
	crds           = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	namespaces     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	secrets        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMaps     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	runnerSets     = wellknown.AutoscalingRunnerSets
)

// overrides is everything the e2e changes in the repository's Pulumi.dev.yaml (besides the
// GitHub token, set as a secret): there is no kubelet, so releases cannot become ready; there
// is no registry, so charts come from Go modules; and it deploys with a named AWS profile,
// as a team does, which the kubeconfig must use too.
func overrides(t *testing.T) map[string]any {
	return map[string]any{
		config.Project + ":" + config.KeyHelmSkipAwait: true,
		config.Project + ":" + config.KeyHelmCharts:    localCharts(t),
		config.KeyAWSProfile:                           e2eProfile,
	}
}

// e2eProfile is the AWS profile the e2e deploys with.
const e2eProfile = "lux-gpu-ci-e2e"

// fakeAccount is the AWS account the e2e deploys into: one of its zones offers no GPU type,
// and it already has the EC2 Spot service-linked role.
func fakeAccount(work string) fakeaws.Cloud {
	return fakeaws.Cloud{
		Region:         "us-west-2",
		Offerings:      map[string][]string{"us-west-2a": {"t3.medium"}},
		SpotRoleExists: true,
		StateDir:       work,
	}
}

// localCharts are the upstream charts from Go modules, by directory (a local chart has no
// version to pin), as helmCharts config.
func localCharts(t *testing.T) map[string]any {
	out := map[string]any{}
	for _, c := range versions.Charts {
		var dir string
		switch {
		case c.Module != "":
			var err error
			dir, err = chartrender.Locate(c, t.TempDir())
			require.NoError(t, err)
		case c == versions.ARCControllerChart || c == versions.ARCScaleSetChart:
			dir = filepath.Join(repoRoot(t), "k8s", "arc", c.Name())
		default:
			t.Fatalf("chart %s: no Go module and no copy in the repository", c.Name())
		}
		out[c.Name()] = map[string]any{"chart": dir}
	}
	return out
}

// env is what hack/e2e.sh provides.
type env struct {
	pulumi, pulumiHome string
	// clusterDir holds the local control plane's kubeconfig and certificates.
	clusterDir string
	// fakeBin holds hack/fakeaws as pulumi-resource-aws, aws and kubectl; eksPlugin holds
	// pulumi-resource-eks (Node running @pulumi/eks).
	fakeBin, eksPlugin string
}

func mustEnv(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		t.Fatalf("%s is not set: run the e2e tests with `make e2e` (it builds the tools and starts the API server)", key)
	}
	return v
}

func phase(t *testing.T, name string) func() {
	start := time.Now()
	t.Logf("── %s", name)
	return func() { t.Logf("── %s took %s", name, time.Since(start).Round(100*time.Millisecond)) }
}

// harness is one stack of the repository's project in a scratch workspace.
type harness struct {
	t         *testing.T
	work      string
	stackFile string
	fakeLog   string
	stack     auto.Stack
}

func newHarness(t *testing.T, ctx context.Context, e env) *harness {
	work := t.TempDir()
	h := &harness{t: t, work: work, stackFile: filepath.Join(work, "Pulumi."+stackName+".yaml"), fakeLog: filepath.Join(work, "fakeaws.log")}

	// The fake AWS's EKS cluster is the local API server.
	kubeconfig, err := clientcmd.LoadFromFile(filepath.Join(e.clusterDir, "kubeconfig"))
	require.NoError(t, err)
	server := kubeconfig.Clusters[kubeconfig.Contexts[kubeconfig.CurrentContext].Cluster].Server
	ca, err := os.ReadFile(filepath.Join(e.clusterDir, "ca.crt"))
	require.NoError(t, err)
	cloud := fakeAccount(work)
	cloud.EKSEndpoint, cloud.EKSCA = server, base64.StdEncoding.EncodeToString(ca)
	fakeCfg := fakeaws.Config{
		Cloud:      cloud,
		Log:        h.fakeLog,
		ClientCert: filepath.Join(e.clusterDir, "admin.crt"),
		ClientKey:  filepath.Join(e.clusterDir, "admin.key"),
	}
	fakeCfgPath := filepath.Join(work, "fakeaws.json")
	writeJSON(t, fakeCfgPath, fakeCfg)

	// The repository's project, plus where its plugins come from and where state goes.
	project, err := workspace.LoadProject(filepath.Join(repoRoot(t), "Pulumi.yaml"))
	require.NoError(t, err)
	state := filepath.Join(work, "state")
	require.NoError(t, os.MkdirAll(state, 0o755))
	project.Backend = &workspace.ProjectBackend{URL: "file://" + state}
	project.Plugins = &workspace.Plugins{Providers: []workspace.PluginOptions{
		{Name: "aws", Path: e.fakeBin},
		{Name: "eks", Path: e.eksPlugin},
	}}

	// The repository's stack file, with the e2e's overrides.
	h.editStackFile(func(cfg map[string]any) {
		for k, v := range overrides(t) {
			cfg[k] = v
		}
	}, filepath.Join(repoRoot(t), "Pulumi."+stackName+".yaml"))

	// The Automation API looks for <root>/bin/pulumi.
	root := filepath.Join(work, "pulumi-root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	require.NoError(t, os.Symlink(e.pulumi, filepath.Join(root, "bin", "pulumi")))
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: root, SkipVersionCheck: true})
	require.NoError(t, err)

	h.stack, err = auto.UpsertStackInlineSource(ctx, stackName, project.Name.String(), stack.Program,
		auto.Pulumi(cmd),
		auto.PulumiHome(e.pulumiHome),
		auto.WorkDir(work),
		auto.SecretsProvider("passphrase"),
		auto.Project(*project),
		auto.EnvVars(map[string]string{
			"PULUMI_CONFIG_PASSPHRASE":                    "e2e",
			"PULUMI_SKIP_UPDATE_CHECK":                    "true",
			"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
			// pulumi-eks probes `aws --version` and `kubectl version`; the kubeconfigs run
			// `aws eks get-token`: the fake's stand-ins answer, first on PATH.
			"PATH":            e.fakeBin + string(os.PathListSeparator) + os.Getenv("PATH"),
			fakeaws.ConfigEnv: fakeCfgPath,
		}),
	)
	require.NoError(t, err)
	require.NoError(t, h.stack.SetConfig(ctx, config.Project+":"+config.KeyGitHubToken, auto.ConfigValue{Value: token, Secret: true}))
	require.NoError(t, h.stack.SetConfig(ctx, config.Project+":"+config.KeyRegistryCredentials, auto.ConfigValue{Value: registryCredentials, Secret: true}))
	return h
}

func repoRoot(t *testing.T) string {
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	return dir
}

func writeJSON(t *testing.T, path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// editStackFile rewrites the workspace's stack file (read from `from`, or from itself),
// changing its config. Structured values stay YAML lists and objects, as the engine's type
// checks against Pulumi.yaml require.
func (h *harness) editStackFile(edit func(cfg map[string]any), from ...string) {
	src := h.stackFile
	if len(from) > 0 {
		src = from[0]
	}
	b, err := os.ReadFile(src)
	require.NoError(h.t, err)
	var file map[string]any
	require.NoError(h.t, yaml.Unmarshal(b, &file))
	cfg, _ := file["config"].(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	edit(cfg)
	file["config"] = cfg
	out, err := yaml.Marshal(file)
	require.NoError(h.t, err)
	require.NoError(h.t, os.WriteFile(h.stackFile, out, 0o644))
}

// state is the stack's current state, as `pulumi stack export` gives it.
func (h *harness) state(ctx context.Context) (apitype.UntypedDeployment, []apitype.ResourceV3) {
	d, err := h.stack.Export(ctx)
	require.NoError(h.t, err)
	var dep apitype.DeploymentV3
	require.NoError(h.t, json.Unmarshal(d.Deployment, &dep))
	return d, dep.Resources
}

// calls reads the fake AWS's log.
func (h *harness) calls() []fakeaws.Call {
	calls, err := fakeaws.ReadCalls(h.fakeLog)
	require.NoError(h.t, err)
	return calls
}

func TestWholeProgram(t *testing.T) {
	e := env{
		pulumi:     mustEnv(t, "E2E_PULUMI"),
		pulumiHome: mustEnv(t, "E2E_PULUMI_HOME"),
		clusterDir: mustEnv(t, "E2E_CLUSTER_DIR"),
		fakeBin:    mustEnv(t, "E2E_FAKEAWS_BIN"),
		eksPlugin:  mustEnv(t, "E2E_EKS_PLUGIN"),
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(e.clusterDir, "kubeconfig"))
	require.NoError(t, err)
	kube, err := dynamic.NewForConfig(restCfg)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	go standInForARCController(ctx, kube)

	done := phase(t, "workspace: the repository's Pulumi.yaml and Pulumi."+stackName+".yaml")
	h := newHarness(t, ctx, e)
	done()
	defer func() {
		// Leave nothing behind even when an assertion failed half-way.
		cleanup, stop := context.WithTimeout(context.Background(), 5*time.Minute)
		defer stop()
		_, _ = h.stack.Destroy(cleanup)
		_ = h.stack.Workspace().RemoveStack(cleanup, stackName)
	}()

	done = phase(t, "preview of a new stack")
	_, err = h.stack.Preview(ctx, optpreview.SuppressProgress())
	require.NoError(t, err, "preview")
	done()

	done = phase(t, "up")
	up, err := h.stack.Up(ctx, optup.SuppressProgress())
	require.NoError(t, err, "up")
	done()
	changes := *up.Summary.ResourceChanges
	t.Logf("up: %v", changes)
	assert.Equal(t, 0, changes["update"]+changes["replace"]+changes["delete"], "a new stack only creates")
	assert.Equal(t, 1, changes["import"], "the account's EC2 Spot service-linked role is adopted, not created twice")

	deployment, resources := h.state(ctx)
	t.Run("the account is as the stack found it", func(t *testing.T) { assertAccount(t, up.Outputs, resources) })
	t.Run("pulumi-eks creates only what we expect", func(t *testing.T) { assertEKSChildren(t, resources) })
	t.Run("the fake AWS was asked only what it knows", func(t *testing.T) { assertFakeCalls(t, h.calls()) })
	t.Run("destroy order holds on the real state", func(t *testing.T) {
		g, err := destroyorder.GraphFromDeployment(deployment)
		require.NoError(t, err)
		assert.Empty(t, g.Violations(destroyorder.Rules))
	})
	t.Run("the cluster holds the Kubernetes layer", func(t *testing.T) { assertCluster(t, ctx, restCfg, kube) })
	t.Run("images come through the cache, inside AWS", func(t *testing.T) { assertImagePath(t, ctx, up.Outputs, resources, kube) })

	done = phase(t, "gpuci verify against the API server")
	verifyHealthyCluster(t, ctx, restCfg, kube)
	done()

	done = phase(t, "preview after up: no changes")
	_, err = h.stack.Preview(ctx, optpreview.ExpectNoChanges(), optpreview.SuppressProgress())
	require.NoError(t, err, "a preview after up must show no changes (no perpetual diff)")
	done()

	done = phase(t, "update: gpuLimit 1 → 2")
	h.editStackFile(func(cfg map[string]any) { setPoolField(t, cfg, "gpuLimit", 2) })
	upd, err := h.stack.Up(ctx, optup.SuppressProgress())
	require.NoError(t, err)
	done()
	changes = *upd.Summary.ResourceChanges
	t.Logf("update: %v", changes)
	assert.Equal(t, 2, changes["update"], "only gpu-spot's NodePool and its retry twin's (which shares its gpuLimit) change")
	assert.Zero(t, changes["replace"]+changes["create"]+changes["delete"], "nothing is replaced")
	np, err := kube.Resource(nodePools).Get(ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err)
	limit, _, _ := unstructured.NestedString(np.Object, "spec", "limits", "nvidia.com/gpu")
	assert.Equal(t, "2", limit)
	twin, err := kube.Resource(nodePools).Get(ctx, "gpu-spot-on-demand", metav1.GetOptions{})
	require.NoError(t, err)
	limit, _, _ = unstructured.NestedString(twin.Object, "spec", "limits", "nvidia.com/gpu")
	assert.Equal(t, "2", limit, "the twin follows its pool")

	done = phase(t, "bad config: refused before anything is sent")
	before := np.GetResourceVersion()
	h.editStackFile(func(cfg map[string]any) { setPoolField(t, cfg, "capacityTypes", []any{"preemptible"}) })
	_, err = h.stack.Up(ctx, optup.SuppressProgress())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools")
	assert.Contains(t, err.Error(), `"preemptible" is not spot or on-demand`)
	np, err = kube.Resource(nodePools).Get(ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before, np.GetResourceVersion(), "the NodePool was not touched")
	h.editStackFile(func(cfg map[string]any) { setPoolField(t, cfg, "capacityTypes", []any{"spot"}) })
	done()

	done = phase(t, "ARC version change: its CRDs follow the controller chart")
	arcVersionChange(t, ctx, h, kube)
	done()

	done = phase(t, "destroy")
	_, err = h.stack.Destroy(ctx, optdestroy.SuppressProgress())
	require.NoError(t, err)
	done()
	_, left := h.state(ctx)
	assert.Empty(t, left, "destroy leaves nothing in the state")
	assertClusterEmpty(t, ctx, kube)

	// SQS refuses a deleted queue's name for 60 s (the fake too): the stack must come back at
	// once all the same.
	done = phase(t, "up again at once, onto ARC CRDs an earlier Helm install left, then destroy")
	installARCCRDsAsHelmDid(t, ctx, kube)
	_, err = h.stack.Up(ctx, optup.SuppressProgress())
	require.NoError(t, err, "the stack is recreatable right after a destroy, and adopts the CRDs it finds")
	_, err = h.stack.Destroy(ctx, optdestroy.SuppressProgress())
	require.NoError(t, err)
	done()
	_, left = h.state(ctx)
	assert.Empty(t, left)
	assertClusterEmpty(t, ctx, kube)
	for _, c := range h.calls() {
		if c.Method == "Delete" {
			assert.NotEqual(t, "aws:iam/serviceLinkedRole:ServiceLinkedRole", c.Type, "the account-wide spot role is kept on destroy")
		}
	}
}

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

// setPoolField sets a field of the stack's first GPU pool.
func setPoolField(t *testing.T, cfg map[string]any, field string, v any) {
	pools, _ := cfg[config.Project+":"+config.KeyGPUPools].([]any)
	require.NotEmpty(t, pools, "the stack file configures gpuPools")
	pools[0].(map[string]any)[field] = v
}

// descendants lists the resources under any resource of type ancestor, as type::name.
func descendants(resources []apitype.ResourceV3, ancestor string) []string {
	byURN := map[string]apitype.ResourceV3{}
	for _, r := range resources {
		byURN[string(r.URN)] = r
	}
	var out []string
	for _, r := range resources {
		for p, ok := byURN[string(r.Parent)]; ok; p, ok = byURN[string(p.Parent)] {
			if string(p.Type) == ancestor {
				out = append(out, string(r.Type)+"::"+r.URN.Name())
				break
			}
		}
	}
	sort.Strings(out)
	return out
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
		"arc-runners":          {"lux-gpu-t4", "lux-gpu-t4-on-demand", "lux-gpu-t4-container"},
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
	assert.Equal(t, wellknown.ContainerHooksServiceAccount, tmpl.Spec.ServiceAccountName)
	require.Len(t, tmpl.Spec.Volumes, 1)
	cmName := tmpl.Spec.Volumes[0].ConfigMap.Name

	cm, err := kube.Resource(configMaps).Namespace("arc-runners").Get(ctx, cmName, metav1.GetOptions{})
	require.NoError(t, err, "the runner mounts ConfigMap %s: it must exist", cmName)
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	var job corev1.PodTemplateSpec
	require.NoError(t, sigsyaml.UnmarshalStrict([]byte(data["job-pod.yaml"]), &job))
	require.Len(t, job.Spec.Containers, 1)
	assert.Equal(t, "1", job.Spec.Containers[0].Resources.Limits.Name(wellknown.GPUResource, "").String(), "the job pod gets the GPU")
	assert.Equal(t, "gpu-spot-container", job.Spec.NodeSelector[wellknown.NodePoolLabel])

	core, err := kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)
	runner := "system:serviceaccount:arc-runners:" + wellknown.ContainerHooksServiceAccount
	for _, c := range []struct {
		ns, verb, resource, subresource, group string
		allowed                                bool
	}{
		{"arc-runners", "create", "pods", "", "", true},
		{"arc-runners", "delete", "pods", "", "", true},
		{"arc-runners", "create", "pods", "exec", "", true},
		{"arc-runners", "watch", "pods", "log", "", true},
		{"arc-runners", "create", "secrets", "", "", true},
		{"arc-runners", "patch", "pods", "", "", false},
		{"arc-runners", "create", "jobs", "", "batch", false},
		{"arc-runners", "create", "rolebindings", "", "rbac.authorization.k8s.io", false},
		{"kube-system", "create", "pods", "", "", false},
		{"kube-system", "get", "secrets", "", "", false},
		{"", "list", "nodes", "", "", false},
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
	for _, ns := range []string{"nvidia-device-plugin", "arc-systems", "arc-runners"} {
		waitGone(t, ctx, kube.Resource(namespaces), ns)
	}
	// Karpenter's CRDs are templates of the karpenter-crd release, so they go with it; ARC's
	// are the program's own.
	for _, crd := range []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws",
		"autoscalingrunnersets.actions.github.com", "autoscalinglisteners.actions.github.com",
		"ephemeralrunnersets.actions.github.com", "ephemeralrunners.actions.github.com"} {
		waitGone(t, ctx, kube.Resource(crds), crd)
	}
	// Deleting a CRD deletes every object of its kind: with it gone, no AutoscalingRunnerSet
	// can be left (a List that succeeded would mean the CRD is back).
	_, err := kube.Resource(runnerSets).Namespace("").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsNotFound(err), "AutoscalingRunnerSets cannot exist without their CRD: %v", err)
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
		wellknown.SystemNodeLabel: wellknown.SystemNodeValue, corev1.LabelInstanceTypeStable: "t3.medium",
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

	for _, pool := range []string{"gpu-spot", "gpu-spot-on-demand", "gpu-spot-container"} {
		np, err := kube.Resource(nodePools).Get(ctx, pool, metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedSlice(np.Object, []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		}}, "status", "conditions"))
		_, err = kube.Resource(nodePools).UpdateStatus(ctx, np, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	cfg, err := config.ParseStackFileOffline(filepath.Join(repoRoot(t), "Pulumi."+stackName+".yaml"))
	require.NoError(t, err)
	checks := verify.Run(ctx, core, kube, cfg)
	var out strings.Builder
	verify.Write(&out, checks)
	t.Logf("gpuci verify:\n%s", out.String())
	for _, c := range checks {
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
		h.editStackFile(func(cfg map[string]any) {
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
