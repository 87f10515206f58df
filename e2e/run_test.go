//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// run is what the scenarios of one whole-program run share: the stack under test, the clients
// of its control plane, the stand-ins, and what the run has started so far. Its fields fill in
// as the scenario goes (TestWholeProgram): the harness at "workspace", the nodes, Karpenter
// and gpuci once nodes start.
type run struct {
	ctx     context.Context
	e       env
	work    string // the scenario's directory: it holds the stack's state
	restCfg *rest.Config
	kube    dynamic.Interface
	core    kubernetes.Interface
	github  *fakeGitHub
	h       *harness
	up      auto.UpResult

	systemNodes []string
	karp        *karpenter
	kubelet     *kubeletStandIn
	gpuci       string
}

// startRun reads the e2e's environment (make e2e sets it), connects to the control plane and
// starts the ARC stand-in. A run that fails half-way destroys what it made.
func startRun(t *testing.T) *run {
	e := env{
		pulumi:     mustEnv(t, "E2E_PULUMI"),
		pulumiHome: mustEnv(t, "E2E_PULUMI_HOME"),
		clusterDir: mustEnv(t, "E2E_CLUSTER_DIR"),
		fakeBin:    mustEnv(t, "E2E_FAKEAWS_BIN"),
		eksPlugin:  mustEnv(t, "E2E_EKS_PLUGIN"),
		// What hack/e2e-tools.sh installs from hack/eks-plugin-previous.
		eksPluginPrevious: mustEnv(t, "E2E_EKS_PLUGIN_PREVIOUS"),
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(e.clusterDir, "kubeconfig"))
	require.NoError(t, err)
	// One client serves the test, the ARC stand-in and the kubelet stand-in, each a controller
	// of its own in a real cluster: client-go's default of 5 requests a second would queue
	// them behind each other (a stand-in's pass took 2–3.6 s, a scale set's removal 10 s).
	restCfg.QPS, restCfg.Burst = 500, 1000
	// arc-runners and arc-systems warn of the restricted Pod Security level (they enforce
	// baseline): the stand-ins' pods would fill the log with the API server's warnings.
	restCfg.WarningHandler = rest.NoWarnings{}
	r := &run{e: e, work: t.TempDir(), restCfg: restCfg, github: newFakeGitHub()}
	r.kube, err = dynamic.NewForConfig(restCfg)
	require.NoError(t, err)
	r.core, err = kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)
	meta, err := metadata.NewForConfig(restCfg)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	r.ctx = ctx
	t.Cleanup(func() {
		defer cancel()
		// Leave nothing behind when an assertion failed half-way. A run that passed has
		// destroyed once already (the destroy phase) and ends on a stack it keeps: make e2e
		// discards the control plane and the state with it.
		if !t.Failed() || r.h == nil {
			return
		}
		cleanup, stop := context.WithTimeout(context.Background(), 5*time.Minute)
		defer stop()
		_, _ = r.h.stack.Destroy(cleanup)
		_ = r.h.stack.Workspace().RemoveStack(cleanup, stackName)
	})
	go runARCStandIn(ctx, r.kube, meta, r.github)
	return r
}

// kubeconfig is the control plane's admin kubeconfig, as an operator's gpuci uses it.
func (r *run) kubeconfig() string { return filepath.Join(r.e.clusterDir, "kubeconfig") }

// startNodes starts what makes pods run: the kubelet stand-in, the system node group's nodes,
// the real Karpenter over a fake AWS seeded with what the program created, and the operator's
// gpuci (if the compiler cache's step has not built it).
func (r *run) startNodes(t *testing.T) {
	r.kubelet = newKubeletStandIn(r.core, r.kube)
	go r.kubelet.Run(r.ctx)
	_, resources := r.h.state(t, r.ctx)
	r.systemNodes = startSystemNodes(t, r.ctx, r.core, resources)
	r.karp = startKarpenter(t, r.ctx, r.core, r.kubeconfig(), r.work, resources)
	r.operatorsGpuci(t)
}

// operatorsGpuci builds gpuci once (buildGpuci): the operator's, and the one the stack's pods
// run (the compiler caches' gates, the retrier).
func (r *run) operatorsGpuci(t *testing.T) string {
	if r.gpuci == "" {
		r.gpuci = buildGpuci(t)
	}
	return r.gpuci
}
