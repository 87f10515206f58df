//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// brokenGPU: two runner-form jobs run on gpu-spot's on-demand twin, each on a node the real
// Karpenter launched for it. One node's GPU breaks: its device plugin withdraws it (the
// kubelet stand-in's withdrawGPU, as the kubelet reports an unhealthy device), and the job
// there fails (its started hook's check, a failed step). The next job queued for the pool is
// not placed there by the real scheduler. The stack's retrier, as its Deployment runs it under
// its own account, takes the node out of service (its event on the Node, the NodeClaim
// deleted with the rights the program gave it), and in the same pass re-runs the failed job,
// with nothing in the repository and no cool-down; the real Karpenter terminates the broken
// node's instance and launches a fresh node, where the next job (the re-run's runner) runs.
// The other job and its node are untouched. gpuci doctor lists the node taken out of service.
// (It runs while the warm window is open, beside ARC's upgrade and the pool phase: the twin is
// no pool a warm window holds, and its runner pods sit on GPU nodes only. Its pods are made
// from the scale set's template at once, before ARC's upgrade replaces the scale sets.)
func brokenGPU(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, kubelet *kubeletStandIn, gpuci, adminKubeconfig string) {
	const pool, scaleSet = "gpu-spot-on-demand", "lux-gpu-t4-on-demand"
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	defer func() {
		if t.Failed() {
			dumpScheduling(t, ctx, core)
			t.Logf("karpenter on the twin:\n%s", k.logLines(pool))
		}
	}()
	started := time.Now()
	running := func(name string) *corev1.Pod {
		var p *corev1.Pod
		require.Eventually(t, func() bool {
			var err error
			p, err = pods.Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning
		}, time.Minute, 250*time.Millisecond, "%s runs on a node of %s", name, pool)
		return p
	}
	made := map[string]*corev1.Pod{}
	for _, name := range []string{"g1", "g2", "g3"} {
		made[name] = runnerPod(t, ctx, kube, scaleSet, scaleSet+"-e2e-runner-"+name)
	}
	for _, name := range []string{"g1", "g2"} {
		_, err := pods.Create(ctx, made[name], metav1.CreateOptions{})
		require.NoError(t, err)
	}
	broken, control := running(scaleSet+"-e2e-runner-g1"), running(scaleSet+"-e2e-runner-g2")
	require.NotEqual(t, broken.Spec.NodeName, control.Spec.NodeName, "one GPU each, one node each")
	// The platform bump's job left a node on the twin, which it deletes and Karpenter may
	// still be terminating: the disrupted taint keeps these jobs off it, and its NodeClaim,
	// being deleted, is not counted. The pods cannot wait for it to go: ARC's upgrade, beside
	// this phase, replaces the scale set and the account they run as.
	claims := slices.DeleteFunc(poolClaims(t, ctx, kube, pool), func(c karpv1.NodeClaim) bool { return c.DeletionTimestamp != nil })
	require.Len(t, claims, 2, "Karpenter launched a node for each job")
	claimOn := func(node string) karpv1.NodeClaim {
		i := slices.IndexFunc(claims, func(c karpv1.NodeClaim) bool { return c.Status.NodeName == node })
		require.GreaterOrEqual(t, i, 0, "the NodeClaim of node %s", node)
		return claims[i]
	}
	brokenClaim, controlClaim := claimOn(broken.Spec.NodeName), claimOn(control.Spec.NodeName)
	t.Logf("broken GPU: two jobs on two nodes after %s", time.Since(started).Round(100*time.Millisecond))

	// The GPU breaks; the kubelet's status says so; the job fails and its runner ends.
	kubelet.withdrawGPU(broken.Spec.NodeName)
	require.Eventually(t, func() bool {
		n, err := core.CoreV1().Nodes().Get(ctx, broken.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		c, a := n.Status.Capacity[wellknown.GPUResource], n.Status.Allocatable[wellknown.GPUResource]
		return c.Value() == 1 && a.IsZero()
	}, 15*time.Second, 250*time.Millisecond, "the kubelet reports the GPU in capacity, not allocatable")
	end := endOf(t, ctx, core, broken, nil)
	require.Equal(t, stepFailed, end, "the job failed on its own runner: GitHub records failure")
	require.NoError(t, pods.Delete(ctx, broken.Name, metav1.DeleteOptions{}), "ARC ends the runner after its job")
	gh := newGitHubRun(githubJob{id: 301, name: "cuda (broken gpu)", runner: broken.Name, end: end, started: started, completed: time.Now()})

	// The next job queued for the pool: the scheduler does not place it on the broken node
	// (no allocatable GPU there), and at the pool's limit Karpenter launches nothing yet.
	next, err := pods.Create(ctx, made["g3"], metav1.CreateOptions{})
	require.NoError(t, err)
	time.Sleep(3 * time.Second)
	p, err := pods.Get(ctx, next.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, p.Spec.NodeName, "the next job waits: not on the broken node, and the pool is at its limit")

	pass, _, done := retrierPasses(t, ctx, core, gpuci, adminKubeconfig, gh)
	defer done()
	out := pass()
	t.Logf("broken GPU: the retrier's pass done after %s", time.Since(started).Round(100*time.Millisecond))
	require.Len(t, out.OutOfService, 1, "the broken node, and only it, taken out of service")
	assert.Contains(t, out.OutOfService[0], "node "+broken.Spec.NodeName+" (")
	assert.Contains(t, out.OutOfService[0], "NodeClaim "+brokenClaim.Name+" deleted")
	assert.Empty(t, out.CoolDowns, "no cool-down: spot was not short")
	gh.mu.Lock()
	assert.Equal(t, 1, gh.failedJobsRerunCalls+len(gh.jobReruns), "the job the broken GPU failed, re-run once, with nothing in the repository")
	assert.Equal(t, 2, gh.attempt)
	gh.mu.Unlock()

	// Karpenter takes the broken node away; the next job gets a fresh node.
	require.NotEmpty(t, instanceID(&brokenClaim), "the broken node's instance, to see it go")
	require.Eventually(t, func() bool {
		acct, err := k.account()
		if err != nil {
			return false
		}
		for _, in := range acct.Instances {
			if in.ID == instanceID(&brokenClaim) {
				return false
			}
		}
		_, err = kube.Resource(nodeClaims).Get(ctx, brokenClaim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 500*time.Millisecond, "the broken node's NodeClaim and instance are gone")
	t.Logf("broken GPU: its node gone after %s", time.Since(started).Round(100*time.Millisecond))
	rerun := running(next.Name)
	t.Logf("broken GPU: the re-run runs on a fresh node after %s", time.Since(started).Round(100*time.Millisecond))
	assert.NotEqual(t, broken.Spec.NodeName, rerun.Spec.NodeName, "the re-run's runner is on a fresh node")
	c, err := kube.Resource(nodeClaims).Get(ctx, controlClaim.Name, metav1.GetOptions{})
	require.NoError(t, err, "the other job's node is kept")
	assert.Nil(t, c.GetDeletionTimestamp(), "and not being deleted")
	p, err = pods.Get(ctx, control.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "its job runs on")
	gh.rerunEnds("cuda (broken gpu)", rerun.Name, succeeded)
	gh.mu.Lock()
	status, conclusion := gh.status()
	gh.mu.Unlock()
	assert.Equal(t, []string{"completed", "success"}, []string{status, conclusion}, "the run is green")

	f := gpuciDoctor(t, ctx, gpuci, adminKubeconfig, "GPUs taken out of service")
	assert.True(t, f.Problem, "doctor lists it")
	evidence := strings.Join(f.Evidence, "\n")
	assert.Contains(t, evidence, broken.Spec.NodeName)
	assert.Contains(t, evidence, brokenClaim.Labels[corev1.LabelInstanceTypeStable]+" in "+brokenClaim.Labels[corev1.LabelTopologyZone]+": 1 node(s) out of service")

	// Both jobs end, and their nodes go.
	for _, p := range []*corev1.Pod{rerun, control} {
		require.NoError(t, pods.Delete(ctx, p.Name, metav1.DeleteOptions{}))
	}
	for _, c := range poolClaims(t, ctx, kube, pool) {
		require.NoError(t, kube.Resource(nodeClaims).Delete(ctx, c.Name, metav1.DeleteOptions{}))
	}
	require.Eventually(t, func() bool { return len(poolClaims(t, ctx, kube, pool)) == 0 }, time.Minute, 500*time.Millisecond, "the twin's nodes go")
	t.Logf("broken GPU: done after %s", time.Since(started).Round(100*time.Millisecond))
}
