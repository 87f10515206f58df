//go:build e2e

package e2e

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWholeProgram is the stack's life through the real engine, the real pulumi-eks, a real
// API server, scheduler and Karpenter: each step a scenario, named for what it shows, in its
// concern's file. Phases that wait on Karpenter's timers run in the background beside steps
// that touch no node, and are awaited as steps of their own ("meanwhile, …").
// E2E_STOP_AFTER=<part of a step's name> ends the run after that step.
func TestWholeProgram(t *testing.T) {
	r := startRun(t)
	ctx, kube, core := r.ctx, r.kube, r.core
	step(t, "workspace: the repository's Pulumi.yaml and Pulumi."+stackName+".yaml", func(t *testing.T) { r.h = newHarness(t, ctx, r.e, r.work) })
	step(t, "preview of a new stack", func(t *testing.T) {
		_, err := r.h.preview(t, ctx)
		require.NoError(t, err, "preview")
	})
	step(t, "up", func(t *testing.T) {
		var err error
		r.up, err = r.h.up(t, ctx)
		require.NoError(t, err, "up")
		changes := *r.up.Summary.ResourceChanges
		t.Logf("up: %v", changes)
		assert.Equal(t, 0, changes["update"]+changes["replace"]+changes["delete"], "a new stack only creates")
		assert.Equal(t, 1, changes["import"], "the account's EC2 Spot service-linked role is adopted, not created twice")
	})
	step(t, "what up made", r.whatUpMade)
	step(t, "hostile jobs (runner form, container form, on the retry runner) are refused everything beyond their job by the real ServiceAccount admission, RBAC and Pod Security admission", func(t *testing.T) {
		hostileJobs(t, ctx, r.restCfg, core, kube)
	})
	step(t, "a build through the compiler cache, as the stack deploys it: the second build on a fresh runner and server hits for every compilation, from the bucket, under the pool's prefix; the read-only pool's builds hit and write nothing; behind each server its gate (the stack's gpuci, as the server's account, reading ARC's record of each job from the real API server) refuses a pull request's write and serves it main's entries, serves another repository none of them, and a runner with no job nothing", func(t *testing.T) {
		_, resources := r.h.state(t, ctx)
		compilerCacheBuilds(t, ctx, core, kube, resources, r.operatorsGpuci(t), r.kubeconfig())
	})

	// From here on nodes exist and pods run.
	r.startNodes(t)
	step(t, "gpuci verify against the API server", func(t *testing.T) { verifyHealthyCluster(t, ctx, r.gpuci, r.kubeconfig(), r.restCfg, kube) })
	var runner *corev1.Pod
	step(t, "CoreDNS, ARC's listeners, a container-form runner and the retry runner are placed on a system node by the real scheduler, none left Pending (the t3.medium's headroom logged)", func(t *testing.T) {
		runner = r.systemPodsPlaced(t)
	})
	step(t, "strict network policies: every pod running now (controllers, CoreDNS, listeners, runners, cache servers) is selected by a NetworkPolicy of its namespace", func(t *testing.T) {
		everyPodUnderAPolicy(t, ctx, core)
	})
	step(t, "a system-node drain cannot evict a running container-form job, and evicts a runner that waits for one", func(t *testing.T) {
		assertJobsSurviveADrain(t, ctx, core, kube, r.systemNodes, runner)
		require.NoError(t, core.CoreV1().Pods(runner.Namespace).Delete(ctx, runner.Name, metav1.DeleteOptions{}), "ARC ends the job")
	})
	step(t, "a job queued twenty minutes for a scale set that made no runner: gpuci doctor names it (not the container-form scale set, whose runner waits), --fix restarts only its listener", func(t *testing.T) {
		stuckListener(t, ctx, core, kube, r.systemNodes, r.gpuci, r.kubeconfig())
	})
	var journeyEnd func(t tb)
	step(t, "a GPU job through the real scheduler and the real Karpenter", func(t *testing.T) { journeyEnd = gpuJobJourney(t, ctx, core, kube, r.karp, r.systemNodes) })

	// What waits on Karpenter's timers runs while the next phases (which touch no node) run.
	ending := runInBackground(journeyEnd)
	interrupted := runInBackground(func(t tb) {
		spotInterruption(t, ctx, r.restCfg, core, kube, r.karp, r.gpuci, r.kubeconfig(), r.systemNodes)
	})
	rerun := runInBackground(func(t tb) { rerunOnTheTwin(t, ctx, core, kube, r.karp, r.systemNodes) })
	step(t, "preview after up: no changes", func(t *testing.T) {
		_, err := r.h.preview(t, ctx, optpreview.ExpectNoChanges())
		require.NoError(t, err, "a preview after up must show no changes (no perpetual diff)")
	})
	step(t, "update: gpuLimit 1 → 2, and a type only an earlier zone offers (which also gained the GPUs): only the NodePools change", func(t *testing.T) {
		poolEditedWhileAnEarlierZoneGainsItsTypes(t, ctx, r.h, kube)
	})
	// It touches no node or NodePool (the CRDs and NodePools stay), so it runs beside
	// Karpenter's timers too.
	step(t, "up --replace of ARC's CRD and Karpenter's CRD release: kept and adopted, no scale set or NodePool deleted", func(t *testing.T) { crdReplaced(t, ctx, r.h, kube, r.github) })
	step(t, "meanwhile, a container-form job's spot node interrupted: Karpenter records it and takes the node; gpuci doctor names the job from the real events; gpuci retry --cluster, as the retry runner's account, re-runs exactly that job; the stack's retrier, as its own account, with nothing in the repository, re-runs it with the fail-fast legs GitHub cancelled, its re-run on an on-demand node of the pool's cool-down NodePool, and ends the cool-down after", interrupted.Wait)
	step(t, "meanwhile, a container-form job's re-run: an on-demand node of the pool's twin, its instance terminated with it", rerun.Wait)

	// It replaces the system nodes, so it comes after the container-form jobs above ended
	// (their runners sit on system nodes); it runs beside the GPU job's timers.
	step(t, "kubernetesVersion 1.35 → 1.36 and Karpenter's charts bumped, in one up: the control plane, the system node group (its nodes replaced), the add-ons, karpenter-crd and karpenter, all in place (their order the dependency graph's, recorded, not varied); NodePools and EC2NodeClasses kept (a GPU node's AMI drift cannot happen here: the e2e's Karpenter keeps the version it started with)", func(t *testing.T) {
		r.systemNodes = platformBumped(t, ctx, r.h, core, kube, r.work, r.systemNodes)
	})
	step(t, "meanwhile, the GPU job's node: kept while its job ran (this does not tell WhenEmpty from WhenEmptyOrUnderutilized: one type, spot, a do-not-disrupt runner; stack/kubernetes_test.go holds WhenEmpty), consolidated once it ended, its instance terminated", ending.Wait)
	step(t, "a tag added and gpu-spot's images from a snapshot, while a container-form job runs on a system node: the node group's update fails with PodEvictionFailure and the job runs on; the next deploy (up --refresh) replaces the system nodes; everything else updated in place (the node group's failure and refresh as the fake AWS models pulumi-aws and EKS: internal/testsupport/fakeaws/nodegroup.go)", func(t *testing.T) {
		r.systemNodes = tagsAndSnapshotEdited(t, ctx, r.h, core, kube, r.systemNodes, r.gpuci, r.kubeconfig())
	})

	// A warm window opens at the next minute and closes two minutes later, while ARC's upgrade
	// and the pool phase (which touch no GPU pool) run; their jobs' runner pods sit on a
	// system node.
	var warm *background
	step(t, "warm windows on both pools, their placeholders starting at the next minute in "+warmZone+", the windows' lead (a minute) before they open; EC2 out of spot capacity for the container pool", func(t *testing.T) {
		warm = runInBackground(warmWindowConfigured(t, ctx, r.h, core, kube, r.karp, r.gpuci, r.kubeconfig()))
	})
	// Runner-form jobs on gpu-spot's twin, which no warm window holds and the phases below do
	// not use; its pods sit on GPU nodes only.
	broken := runInBackground(func(t tb) {
		brokenGPU(t, ctx, core, kube, r.karp, r.kubelet, r.gpuci, r.kubeconfig())
	})
	r.github.placeJobsOn(core, r.systemNodes[0])
	step(t, "ARC across a minor version: every scale set back in GitHub; the busy one removed only after its job ended, and its runner pod left running (ARC's stand-in: a deletion by ARC's own runner controller would not show)", func(t *testing.T) { arcMinorUpgrade(t, ctx, r.h, kube, r.github, r.work) })
	step(t, "a pool added, then removed while its runner holds a job", func(t *testing.T) { poolRemovedWhileItsJobRuns(t, ctx, r.h, kube, r.github) })
	step(t, "meanwhile, a GPU breaks under a runner-form job (its device plugin withdraws it): the real scheduler places no further job on the node; the stack's retrier, as its own account, records it, deletes its NodeClaim and re-runs the job it failed, no cool-down; the real Karpenter replaces the node and the re-run runs on the fresh one; a job on another node of the pool untouched; gpuci doctor lists the node taken out of service", broken.Wait)
	step(t, "meanwhile, the warm window: each pool's placeholders hold the nodes Karpenter launched (the container pool's on-demand, spot refused; gpuci doctor says so); the container pool's placeholder holds its node though one of its images has no sh; a runner-form runner and a container-form job pod each preempt one and run on its node at once; the container pool at its gpuLimit makes no new NodeClaim and its placeholder comes back after the job; the runner-form pool, a GPU to spare, gives its displaced placeholder exactly one new NodeClaim; at the window's end every node is consolidated", warm.Wait)
	// They touch no node and no GPU pool: they run while Karpenter still keeps the spot
	// offerings EC2 refused in the warm window out of its launches (three minutes from the
	// refusal: karpenter_test.go, spotRefusalsFreeAt), which the spot job below waits for.
	step(t, "bad config: refused before anything is sent", r.badConfigRefused)
	step(t, "the deploy identity's roles added to the running stack: pulumi-eks creates their access entries (cluster-admin, view), nothing replaced; removed again", func(t *testing.T) { deployIdentityAdded(t, ctx, r.h) })
	step(t, "zones and the system node group are kept: raising azCount, or a system instance type that would replace the group, is refused, naming the key", r.zonesAndSystemNodesKept)
	// Runner-form jobs on gpu-spot, which the warm window no longer holds. After the window,
	// not before it: Karpenter keeps an interrupted offering out of its launches for three
	// minutes, and with this interruption in one zone and the container form's in the other,
	// the warm window's spot launch, which EC2 refuses, would never be asked for in time
	// (karpenter_test.go: spotOfferingFreeAt).
	step(t, "a runner-form job's spot node interrupted: its runner gets the shutdown signal and GitHub concludes it and the two legs of its fail-fast matrix cancelled; the stack's retrier re-runs the three in one attempt, on an on-demand node of the pool's cool-down NodePool, and the run ends green; a run a person cancelled, with the same evidence, is left alone", func(t *testing.T) {
		runnerFormInterruption(t, ctx, core, kube, r.karp, r.gpuci, r.kubeconfig())
	})

	step(t, "destroy", r.destroyed)
	// SQS refuses a deleted queue's name for 60 s (the fake too): the stack must come back at
	// once all the same, with the pulumi-eks before the pin, then upgraded to the pin (the bump
	// a pull request moving go.mod and hack/eks-plugin makes). The run ends there: make e2e
	// discards the control plane and the fake account (a second destroy proves nothing more).
	step(t, "up again at once with the previous pulumi-eks, onto ARC CRDs an earlier Helm install left (gpuci crd-owners --fix takes Helm's fields over, the up removes what only Helm declared); pulumi-eks bumped to the pin: nothing replaced", func(t *testing.T) {
		installARCCRDsAsHelmDid(t, ctx, kube)
		r.h.useEKSPlugin(t, ctx, r.e.eksPluginPrevious)
		adoptedFromHelmWithTheirOwnersTaken(t, ctx, r.h, kube, r.gpuci, r.kubeconfig())
		r.h.useEKSPlugin(t, ctx, r.e.eksPlugin)
		pulumiEKSBumped(t, ctx, r.h)
	})
}
