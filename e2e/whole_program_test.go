//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/destroyorder"
)

func TestWholeProgram(t *testing.T) {
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
	kube, err := dynamic.NewForConfig(restCfg)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	github := newFakeGitHub()
	meta, err := metadata.NewForConfig(restCfg)
	require.NoError(t, err)
	go runARCStandIn(ctx, kube, meta, github)

	var h *harness
	work := t.TempDir() // the scenario's, not a phase's: it holds the stack's state
	step(t, "workspace: the repository's Pulumi.yaml and Pulumi."+stackName+".yaml", func(t *testing.T) { h = newHarness(t, ctx, e, work) })
	defer func() {
		// Leave nothing behind when an assertion failed half-way. A run that passed has
		// destroyed once already (the destroy phase) and ends on a stack it keeps: make e2e
		// discards the control plane and the state with it.
		if !t.Failed() {
			return
		}
		cleanup, stop := context.WithTimeout(context.Background(), 5*time.Minute)
		defer stop()
		_, _ = h.stack.Destroy(cleanup)
		_ = h.stack.Workspace().RemoveStack(cleanup, stackName)
	}()

	step(t, "preview of a new stack", func(t *testing.T) {
		_, err := h.preview(t, ctx)
		require.NoError(t, err, "preview")
	})

	var up auto.UpResult
	step(t, "up", func(t *testing.T) {
		var err error
		up, err = h.up(t, ctx)
		require.NoError(t, err, "up")
		changes := *up.Summary.ResourceChanges
		t.Logf("up: %v", changes)
		assert.Equal(t, 0, changes["update"]+changes["replace"]+changes["delete"], "a new stack only creates")
		assert.Equal(t, 1, changes["import"], "the account's EC2 Spot service-linked role is adopted, not created twice")
	})

	step(t, "what up made", func(t *testing.T) {
		deployment, resources := h.state(t, ctx)
		t.Run("the account is as the stack found it", func(t *testing.T) { assertAccount(t, up.Outputs, resources) })
		t.Run("pulumi-eks creates only what we expect", func(t *testing.T) { assertEKSChildren(t, resources) })
		t.Run("the fake AWS was asked only what it knows", func(t *testing.T) { assertFakeCalls(t, h.calls(t)) })
		t.Run("destroy order holds on the real state", func(t *testing.T) {
			g, err := destroyorder.GraphFromDeployment(deployment)
			require.NoError(t, err)
			assert.Empty(t, g.Violations(destroyorder.Rules))
		})
		t.Run("the cluster holds the Kubernetes layer", func(t *testing.T) { assertCluster(t, ctx, restCfg, kube) })
		t.Run("ARC registered every scale set in GitHub", func(t *testing.T) { assertScaleSetsServe(t, ctx, kube, github, "0.14.2") })
		t.Run("images come through the cache, inside AWS", func(t *testing.T) { assertImagePath(t, ctx, up.Outputs, resources, kube) })
	})

	core, err := kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)
	step(t, "hostile jobs (runner form, container form, on the retry runner) are refused everything beyond their job by the real ServiceAccount admission, RBAC and Pod Security admission", func(t *testing.T) {
		hostileJobs(t, ctx, restCfg, core, kube)
	})

	step(t, "a build through the compiler cache, as the stack deploys it: the second build on a fresh runner and server hits for every compilation, from the bucket, under the pool's prefix; the read-only pool's builds hit and write nothing, and a job's own write is refused", func(t *testing.T) {
		_, resources := h.state(t, ctx)
		compilerCacheBuilds(t, ctx, core, kube, resources)
	})

	// From here on nodes exist and pods run: the system node group's nodes, and the real
	// Karpenter over a fake AWS seeded with what the program created.
	kubelet := newKubeletStandIn(core, kube)
	go kubelet.Run(ctx)
	_, resources := h.state(t, ctx)
	systemNodes := startSystemNodes(t, ctx, core, resources)
	karp := startKarpenter(t, ctx, core, filepath.Join(e.clusterDir, "kubeconfig"), work, resources)
	gpuci := buildGpuci(t, ctx, work)

	step(t, "gpuci verify against the API server", func(t *testing.T) {
		verifyHealthyCluster(t, ctx, gpuci, filepath.Join(e.clusterDir, "kubeconfig"), restCfg, kube)
	})

	var runner *corev1.Pod
	step(t, "CoreDNS, ARC's listeners, a container-form runner and the retry runner are placed on a system node by the real scheduler, none left Pending (the t3.medium's headroom logged)", func(t *testing.T) {
		startCoreDNS(t, ctx, core)
		runner = containerFormRunner(t, ctx, core, kube, systemNodes, drainedRunner)
		retry := systemRunner(t, ctx, core, kube, systemNodes, retryScaleSet, retryScaleSet+"-e2e-runner-r")
		assertSystemNodesFit(t, ctx, core, systemNodes)
		require.NoError(t, core.CoreV1().Pods(retry.Namespace).Delete(ctx, retry.Name, metav1.DeleteOptions{}), "ARC ends the retry job")
	})
	step(t, "a system-node drain cannot evict a running container-form job, and evicts a runner that waits for one", func(t *testing.T) {
		assertJobsSurviveADrain(t, ctx, core, kube, systemNodes, runner)
		require.NoError(t, core.CoreV1().Pods(runner.Namespace).Delete(ctx, runner.Name, metav1.DeleteOptions{}), "ARC ends the job")
	})

	step(t, "a job queued twenty minutes for a scale set that made no runner: gpuci doctor names it (not the container-form scale set, whose runner waits), --fix restarts only its listener", func(t *testing.T) {
		stuckListener(t, ctx, core, kube, systemNodes, gpuci, filepath.Join(e.clusterDir, "kubeconfig"))
	})

	var journeyEnd func(t tb)
	step(t, "a GPU job through the real scheduler and the real Karpenter", func(t *testing.T) {
		journeyEnd = gpuJobJourney(t, ctx, core, kube, karp, systemNodes)
	})

	// What waits on Karpenter's timers runs while the next phases (which touch no node) run.
	ending := runInBackground(journeyEnd)
	interrupted := runInBackground(func(t tb) {
		spotInterruption(t, ctx, core, kube, karp, gpuci, filepath.Join(e.clusterDir, "kubeconfig"), systemNodes)
	})
	rerun := runInBackground(func(t tb) { rerunOnTheTwin(t, ctx, core, kube, karp, systemNodes) })

	step(t, "preview after up: no changes", func(t *testing.T) {
		_, err := h.preview(t, ctx, optpreview.ExpectNoChanges())
		require.NoError(t, err, "a preview after up must show no changes (no perpetual diff)")
	})

	// Day 2: an edit of a pool changes its NodePools and nothing else; what would move the
	// zones of a running stack moves nothing (here), or is refused (azCount, below).
	step(t, "update: gpuLimit 1 → 2, and a type only an earlier zone offers (which also gained the GPUs): only the NodePools change", func(t *testing.T) {
		poolEditedWhileAnEarlierZoneGainsItsTypes(t, ctx, h, kube)
	})

	step(t, "bad config: refused before anything is sent", func(t *testing.T) {
		np, err := kube.Resource(nodePools).Get(ctx, "gpu-spot", metav1.GetOptions{})
		require.NoError(t, err)
		// Its generation counts changes of its spec (Karpenter writes its status all along).
		before := np.GetGeneration()
		_, state := h.state(t, ctx)
		sent := mutations(h.calls(t))
		h.editStackFile(t, func(cfg map[string]any) { setPoolField(t, cfg, "capacityTypes", []any{"preemptible"}) })
		_, err = h.up(t, ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools")
		assert.Contains(t, err.Error(), `"preemptible" is not spot or on-demand`)
		np, err = kube.Resource(nodePools).Get(ctx, "gpu-spot", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, before, np.GetGeneration(), "the NodePool was not touched")
		// Nothing reached a provider: no AWS create, update or delete, and no resource of any
		// provider changed in the state (a Kubernetes one would have).
		assert.Equal(t, sent, mutations(h.calls(t)), "no create, update or delete reached the fake AWS")
		_, after := h.state(t, ctx)
		require.NotEmpty(t, state)
		assert.Equal(t, withoutCiphertexts(state), withoutCiphertexts(after), "no resource of any provider changed")
		h.editStackFile(t, func(cfg map[string]any) { setPoolField(t, cfg, "capacityTypes", []any{"spot", "on-demand"}) })
	})

	step(t, "the deploy identity's roles added to the running stack: pulumi-eks creates their access entries (cluster-admin, view), nothing replaced; removed again", func(t *testing.T) {
		deployIdentityAdded(t, ctx, h)
	})

	step(t, "zones and the system node group are kept: raising azCount, or a system instance type that would replace the group, is refused, naming the key", func(t *testing.T) {
		_, before := h.state(t, ctx)
		h.editStackFile(t, func(cfg map[string]any) { cfg[config.Project+":"+config.KeyAzCount] = 3 })
		_, err := h.up(t, ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "lux-gpu-ci:azCount: the stack's subnets are in 2 availability zones")
		assert.Contains(t, err.Error(), "fix: pulumi config set azCount 2")
		h.editStackFile(t, func(cfg map[string]any) { delete(cfg, config.Project+":"+config.KeyAzCount) })
		// EKS would delete the old group's nodes, its drain cut off after 5 minutes.
		h.editStackFile(t, func(cfg map[string]any) { cfg[config.Project+":"+config.KeySystemNodeInstanceType] = "t3.large" })
		_, err = h.up(t, ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "lux-gpu-ci:systemNodeInstanceType: the system node group ")
		assert.Contains(t, err.Error(), "would be replaced (instance type t3.medium → t3.large)")
		h.editStackFile(t, func(cfg map[string]any) { cfg[config.Project+":"+config.KeySystemNodeInstanceType] = "t3.medium" })
		// The state is as it was, resource by resource (a preview would say the same, in 6 s).
		// The failed up wrote the checkpoint again, each secret encrypted anew: secrets are
		// compared as secrets, not by ciphertext.
		_, after := h.state(t, ctx)
		require.NotEmpty(t, before)
		assert.Equal(t, withoutCiphertexts(before), withoutCiphertexts(after), "nothing was changed")
	})

	// It touches no node or NodePool (the CRDs and NodePools stay), so it runs beside
	// Karpenter's timers too.
	step(t, "up --replace of ARC's CRD and Karpenter's CRD release: kept and adopted, no scale set or NodePool deleted", func(t *testing.T) { crdReplaced(t, ctx, h, kube, github) })

	step(t, "meanwhile, a container-form job's spot node interrupted: Karpenter records it and takes the node; gpuci doctor names the job from the real events; gpuci retry --cluster, as the retry runner's account, re-runs exactly that job", interrupted.Wait)
	step(t, "meanwhile, a container-form job's re-run: an on-demand node of the pool's twin, its instance terminated with it", rerun.Wait)

	// It changes the AWS layer (here, the fake's) and Karpenter's releases, whose controller
	// runs outside the cluster here: it runs beside the GPU job's timers, while its node is
	// up. It replaces the system nodes, so it comes after the container-form jobs above
	// ended (their runners sit on system nodes: the tag edit below shows a job holding the
	// update).
	step(t, "kubernetesVersion 1.35 → 1.36 and Karpenter's charts bumped, in one up: the control plane, the system node group (its nodes replaced), the add-ons, then karpenter-crd, then karpenter, all in place; NodePools and EC2NodeClasses kept (a GPU node's AMI drift cannot happen here: the e2e's Karpenter keeps the version it started with)", func(t *testing.T) {
		systemNodes = platformBumped(t, ctx, h, core, kube, work, systemNodes)
	})

	step(t, "meanwhile, the GPU job's node: not consolidated while its job ran (WhenEmpty), consolidated once it ended, its instance terminated", ending.Wait)

	step(t, "a tag added and gpu-spot's images from a snapshot, while a container-form job runs on a system node: the node group's update fails with PodEvictionFailure and the job runs on; the next deploy (up --refresh) replaces the system nodes; everything else updated in place", func(t *testing.T) {
		systemNodes = tagsAndSnapshotEdited(t, ctx, h, core, kube, systemNodes, gpuci, filepath.Join(e.clusterDir, "kubeconfig"))
	})

	// A warm window opens at the next minute and closes two minutes later: it runs while ARC's
	// upgrade and the pool phase below (which touch no GPU pool) run.
	var warm *background
	step(t, "warm windows on both pools, opening at the next minute in "+warmZone+"; EC2 out of spot capacity for the container pool", func(t *testing.T) {
		warm = runInBackground(warmWindowConfigured(t, ctx, h, core, kube, karp, gpuci, filepath.Join(e.clusterDir, "kubeconfig")))
	})

	// The jobs the ARC and pool phases hold run on a system node, as runner pods.
	github.placeJobsOn(core, systemNodes[0])
	step(t, "ARC across a minor version: every scale set back in GitHub, no job killed", func(t *testing.T) { arcMinorUpgrade(t, ctx, h, kube, github, work) })

	step(t, "a pool added, then removed while its runner holds a job", func(t *testing.T) { poolRemovedWhileItsJobRuns(t, ctx, h, kube, github) })

	step(t, "meanwhile, the warm window: each pool's placeholders hold the nodes Karpenter launched (the container pool's on-demand, spot refused; gpuci doctor says so); a runner-form runner and a container-form job pod each preempt one and run on its node with no new NodeClaim, the pool at its gpuLimit; each placeholder comes back after its job; at the window's end every node is consolidated", warm.Wait)

	step(t, "destroy", func(t *testing.T) {
		_, err := h.destroy(t, ctx)
		require.NoError(t, err)
		_, left := h.state(t, ctx)
		assert.Empty(t, left, "destroy leaves nothing in the state")
		assertClusterEmpty(t, ctx, kube)
		assertAccountEmpty(t, karp)
		assert.Empty(t, github.Registered(), "destroy removes the scale sets from GitHub (ARC's cleanup ran before its controller went)\n%s", github.Log())
		deletes := 0
		for _, c := range h.calls(t) {
			if c.Method == "Delete" {
				deletes++
				assert.NotEqual(t, "aws:iam/serviceLinkedRole:ServiceLinkedRole", c.Type, "the account-wide spot role is kept on destroy")
			}
		}
		assert.Positive(t, deletes, "the fake AWS saw the destroy")
	})

	// SQS refuses a deleted queue's name for 60 s (the fake too): the stack must come back at
	// once all the same. It comes back with the pulumi-eks before the pin, and is then
	// upgraded to the pin: the bump a pull request moving go.mod and hack/eks-plugin makes.
	// The run ends there: the destroy above proved what a destroy must leave, and make e2e
	// discards the control plane and the fake account (a second destroy would cost 25 s of
	// the time budget and prove nothing more).
	step(t, "up again at once with the previous pulumi-eks, onto ARC CRDs an earlier Helm install left (gpuci crd-owners --fix takes Helm's fields over, the up removes what only Helm declared); pulumi-eks bumped to the pin: nothing replaced", func(t *testing.T) {
		installARCCRDsAsHelmDid(t, ctx, kube)
		h.useEKSPlugin(t, ctx, e.eksPluginPrevious)
		adoptedFromHelmWithTheirOwnersTaken(t, ctx, h, kube, gpuci, filepath.Join(e.clusterDir, "kubeconfig"))
		h.useEKSPlugin(t, ctx, e.eksPlugin)
		pulumiEKSBumped(t, ctx, h)
	})
}
