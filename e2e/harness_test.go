//go:build e2e

// Package e2e runs the whole program — stack.Program, exactly what `pulumi up` runs: config,
// then the AWS layer, then the Kubernetes layer — through the real Pulumi engine (Automation
// API, local file backend), from the repository's own Pulumi.yaml and Pulumi.dev.yaml, with:
//
//   - the real pulumi-eks component: the @pulumi/eks npm package at the version go.mod pins,
//     run by Node as the eks plugin, creating its own children;
//   - a fake AWS (hack/fakeaws, answering from internal/testsupport/fakeaws like the unit tests' mocks)
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
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/chartrender"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
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
	nodePools        = wellknown.NodePools
	ec2NodeClasses   = wellknown.EC2NodeClasses
	nodeClaims       = wellknown.NodeClaims
	crds             = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	namespaces       = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	secrets          = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMaps       = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	runnerSets       = wellknown.AutoscalingRunnerSets
	ephemeralRunners = wellknown.EphemeralRunners
)

// overrides is everything the e2e changes in the repository's Pulumi.dev.yaml (besides the
// GitHub token, set as a secret): there is no kubelet, so releases cannot become ready; there
// is no registry, so charts come from Go modules; and it deploys with a named AWS profile,
// as a team does, which the kubeconfig must use too.
func overrides(t *testing.T, work string) map[string]any {
	return map[string]any{
		config.Project + ":" + config.KeyHelmSkipAwait: true,
		config.Project + ":" + config.KeyHelmCharts:    localCharts(t, work),
		config.KeyAWSProfile:                           e2eProfile,
	}
}

// e2eConsolidateAfter is every pool's consolidateAfter in the e2e.
const e2eConsolidateAfter = "5s"

// e2eProfile is the AWS profile the e2e deploys with.
const e2eProfile = "lux-gpu-ci-e2e"

// systemDrainTimeout is how long the fake EKS's node group update retries a refused
// eviction before it fails with PodEvictionFailure (EKS: 15 minutes).
const systemDrainTimeout = 5 * time.Second

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
func localCharts(t *testing.T, work string) map[string]any {
	out := map[string]any{}
	for _, c := range versions.Charts {
		var dir string
		switch {
		case c.Module != "":
			var err error
			dir, err = chartrender.Locate(c, filepath.Join(work, "charts"))
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
	// pulumi-resource-eks (Node running @pulumi/eks), eksPluginPrevious the version before
	// the pin (hack/eks-plugin-previous).
	fakeBin, eksPlugin, eksPluginPrevious string
}

func mustEnv(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		t.Fatalf("%s is not set: run the e2e tests with `make e2e` (it builds the tools and starts the API server)", key)
	}
	return v
}

// step runs one phase of a scenario as a subtest and logs its time. A failed phase stops the
// scenario: later phases build on the state it leaves. For local iteration,
// E2E_STOP_AFTER=<part of a step's name> ends the scenario after that step
// (`E2E_STOP_AFTER=hostile make e2e`).
func step(t *testing.T, name string, phase func(t *testing.T)) {
	t.Helper()
	start := time.Now()
	ok := t.Run(name, phase)
	t.Logf("── %s: %s", name, time.Since(start).Round(100*time.Millisecond))
	if !ok {
		t.FailNow()
	}
	if stop := os.Getenv("E2E_STOP_AFTER"); stop != "" && strings.Contains(name, stop) {
		// Where CI runs (GitHub Actions sets CI), a stopped scenario is a failure, never a pass
		// (.ci/run refuses the switch before this; this holds for any other runner).
		if os.Getenv("CI") != "" {
			t.Fatalf("E2E_STOP_AFTER=%q stopped the scenario after %q where CI is set: CI runs it whole", stop, name)
		}
		t.Skipf("E2E_STOP_AFTER=%q: stopped after %q", stop, name)
	}
}

// harness is one stack of the repository's project in a scratch workspace.
type harness struct {
	work      string
	stackFile string
	fakeLog   string
	stack     auto.Stack
	// fakeCfg is the fake AWS's configuration, written to fakeCfgPath (editAccount).
	fakeCfg     fakeaws.Config
	fakeCfgPath string
}

// newHarness sets up the workspace in work, a directory that outlives the phase that calls it.
func newHarness(t *testing.T, ctx context.Context, e env, work string) *harness {
	h := &harness{work: work, stackFile: filepath.Join(work, "Pulumi."+stackName+".yaml"), fakeLog: filepath.Join(work, "fakeaws.log")}

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
		// The system nodes roll on this API server; a drain a job blocks fails after 5 s,
		// not EKS's 15 minutes (the rule is EKS's either way).
		Kubeconfig:      filepath.Join(e.clusterDir, "kubeconfig"),
		EvictionTimeout: systemDrainTimeout.String(),
	}
	fakeCfgPath := filepath.Join(work, "fakeaws.json")
	writeJSON(t, fakeCfgPath, fakeCfg)
	h.fakeCfg, h.fakeCfgPath = fakeCfg, fakeCfgPath

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
	h.editStackFile(t, func(cfg map[string]any) {
		for k, v := range overrides(t, work) {
			cfg[k] = v
		}
		// The real Karpenter runs: an empty node goes 5 s after its last job, not 30 s,
		// so the journey's waits stay short (the rule is Karpenter's either way).
		pools, _ := cfg[config.Project+":"+config.KeyGPUPools].([]any)
		require.NotEmpty(t, pools)
		for _, p := range pools {
			p.(map[string]any)["consolidateAfter"] = e2eConsolidateAfter
			// The container-form pool stands for one that runs public repositories' pull
			// requests: its builds read the runner-form pool's compiler cache, and write none.
			if p.(map[string]any)["name"] == "gpu-spot-container" {
				p.(map[string]any)["compilerCache"] = "read-only"
				p.(map[string]any)["compilerCacheFrom"] = "gpu-spot"
			}
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
			// The engine writes the whole state (1.6 MB here) after every step by default,
			// each step waiting for the write: the checkpoints that let a real deploy survive
			// its CLI's crash. The e2e never crashes the CLI mid-operation and reads the state
			// only between operations, so it takes the final write alone (pulumi v3.276.0
			// pkg/backend/snapshot.go:1048, unsafeServiceLoop: every mutation applied, the
			// snapshot saved when the operation closes, a failed one's too, as
			// pkg/backend/diy/backend.go:1442 closes it after any update). The first up went
			// from 26 s to 10 s.
			"PULUMI_SKIP_CHECKPOINTS": "true",
			// pulumi-eks probes `aws --version` and `kubectl version`; the kubeconfigs run
			// `aws eks get-token`: the fake's stand-ins answer, first on PATH.
			"PATH":            e.fakeBin + string(os.PathListSeparator) + os.Getenv("PATH"),
			fakeaws.ConfigEnv: fakeCfgPath,
		}),
	)
	require.NoError(t, err)
	require.NoError(t, h.stack.SetConfig(ctx, config.Project+":"+config.KeyGitHubToken, auto.ConfigValue{Value: token, Secret: true}))
	require.NoError(t, h.stack.SetConfig(ctx, config.Project+":"+config.KeyRegistryCredentials, auto.ConfigValue{Value: registryCredentials, Secret: true}))
	// The in-cluster retrier, as an organization turns it on (docs/operations.md): its token;
	// it runs the stack's own build of gpuci.
	require.NoError(t, h.stack.SetConfig(ctx, config.Project+":"+config.KeyRetrierGitHubToken, auto.ConfigValue{Value: retrierToken, Secret: true}))
	return h
}

func repoRoot(t tb) string {
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	return dir
}

func writeJSON(t *testing.T, path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// editAccount changes the fake AWS account (what its zones offer, say) for the plugin
// processes of the next operation.
func (h *harness) editAccount(t *testing.T, edit func(c *fakeaws.Cloud)) {
	edit(&h.fakeCfg.Cloud)
	writeJSON(t, h.fakeCfgPath, h.fakeCfg)
}

// editStackFile rewrites the workspace's stack file (read from `from`, or from itself),
// changing its config. Structured values stay YAML lists and objects, as the engine's type
// checks against Pulumi.yaml require.
func (h *harness) editStackFile(t *testing.T, edit func(cfg map[string]any), from ...string) {
	src := h.stackFile
	if len(from) > 0 {
		src = from[0]
	}
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	var file map[string]any
	require.NoError(t, yaml.Unmarshal(b, &file))
	cfg, _ := file["config"].(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	edit(cfg)
	file["config"] = cfg
	out, err := yaml.Marshal(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(h.stackFile, out, 0o644))
}

// withoutCiphertexts is resources by URN, each secret's ciphertext (which every write of the
// checkpoint makes anew) replaced by a placeholder. By URN, since their order in the checkpoint
// is no change: an update that fails puts the resources its program registered before the
// error first and the rest after (pulumi v3.276.0 pkg/backend/snapshot.go:809-826), and how
// many the engine has when a Go program returns its error is a race (RegisterResource's RPC
// is made in a goroutine).
func withoutCiphertexts(resources []apitype.ResourceV3) map[resource.URN]apitype.ResourceV3 {
	var strip func(v any) any
	strip = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, x := range v {
				out[k] = strip(x)
			}
			if _, secret := v[resource.SigKey]; secret {
				if _, ok := v["ciphertext"]; ok {
					out["ciphertext"] = "<ciphertext>"
				}
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				out[i] = strip(x)
			}
			return out
		}
		return v
	}
	out := map[resource.URN]apitype.ResourceV3{}
	for _, r := range resources {
		r.Inputs, _ = strip(r.Inputs).(map[string]any)
		r.Outputs, _ = strip(r.Outputs).(map[string]any)
		out[r.URN] = r
	}
	return out
}

// useEKSPlugin makes the stack's next operations run the pulumi-eks plugin in dir: the
// project's plugin path, which the engine takes whatever version the program asks for.
func (h *harness) useEKSPlugin(t *testing.T, ctx context.Context, dir string) {
	t.Helper()
	ws := h.stack.Workspace()
	project, err := ws.ProjectSettings(ctx)
	require.NoError(t, err)
	require.NotNil(t, project.Plugins)
	found := false
	for i, p := range project.Plugins.Providers {
		if p.Name == "eks" {
			project.Plugins.Providers[i].Path, found = dir, true
		}
	}
	require.True(t, found, "the project names an eks plugin path")
	require.NoError(t, ws.SaveProjectSettings(ctx, project))
}

// state is the stack's current state, as `pulumi stack export` gives it.
//
// It reads the checkpoint the engine wrote to the file backend, which is what `pulumi stack
// export` prints, without starting the CLI for it (about 2 s a call, eight calls a run).
func (h *harness) state(t *testing.T, _ context.Context) (apitype.UntypedDeployment, []apitype.ResourceV3) {
	files, err := filepath.Glob(filepath.Join(h.work, "state", ".pulumi", "stacks", "*", stackName+".json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "the file backend holds the stack's checkpoint")
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var versioned apitype.VersionedCheckpoint
	require.NoError(t, json.Unmarshal(b, &versioned))
	// Version 4 is version 3's structure plus features the engine lists (the CLI decodes both
	// into CheckpointV3).
	require.Contains(t, []int{apitype.DeploymentSchemaVersionCurrent, apitype.DeploymentSchemaVersionLatest}, versioned.Version, "a checkpoint of a version this harness reads")
	var checkpoint apitype.CheckpointV3
	require.NoError(t, json.Unmarshal(versioned.Checkpoint, &checkpoint))
	if checkpoint.Latest == nil {
		return apitype.UntypedDeployment{Version: versioned.Version, Deployment: json.RawMessage(`{}`)}, nil
	}
	d, err := json.Marshal(checkpoint.Latest)
	require.NoError(t, err)
	return apitype.UntypedDeployment{Version: versioned.Version, Deployment: d}, checkpoint.Latest.Resources
}

// calls reads the fake AWS's log.
func (h *harness) calls(t *testing.T) []fakeaws.Call {
	calls, err := fakeaws.ReadCalls(h.fakeLog)
	require.NoError(t, err)
	return calls
}

// mutations are the calls in the fake AWS's log that change something (Create, Update,
// Delete), as "method type name" lines.
func mutations(calls []fakeaws.Call) []string {
	var out []string
	for _, c := range calls {
		if c.Method == "Create" || c.Method == "Update" || c.Method == "Delete" {
			out = append(out, c.Method+" "+c.Type+" "+c.Name)
		}
	}
	return out
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
