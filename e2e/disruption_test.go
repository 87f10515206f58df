//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// containerFormRunner is the container-form pool's runner pod, from its scale set's template,
// placed by the scheduler: on a system node, where that form's runners sit (the job pod gets
// the GPU node), and running there.
func containerFormRunner(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, systemNodes []string, name string) *corev1.Pod {
	return systemRunner(t, ctx, core, kube, systemNodes, "lux-gpu-t4-container", name)
}

// drainedRunner is the container-form runner the drain phase holds a job on; its job ends
// there, on a system node no interruption touched.
const drainedRunner = "lux-gpu-t4-container-e2e-runner-x"

// systemRunner is a runner pod of a scale set whose runners sit on the system nodes (the
// container form's, the retry runner), from its template, placed by the scheduler, running.
func systemRunner(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, systemNodes []string, scaleSet, name string) *corev1.Pod {
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	runner, err := pods.Create(ctx, runnerPod(t, ctx, kube, scaleSet, name), metav1.CreateOptions{})
	require.NoError(t, err)
	if !assert.Eventually(t, func() bool {
		runner, err = pods.Get(ctx, runner.Name, metav1.GetOptions{})
		return err == nil && runner.Status.Phase == corev1.PodRunning
	}, time.Minute, 250*time.Millisecond, "%s's runner is scheduled and runs", scaleSet) {
		for _, c := range runner.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				t.Errorf("the scheduler on %s: %s", runner.Name, c.Message) // e.g. Insufficient memory: the system nodes are full
			}
		}
		t.FailNow()
	}
	assert.Contains(t, systemNodes, runner.Spec.NodeName, "%s's runners sit on a system node", scaleSet)
	return runner
}

// runnerTakesJob is a container-form runner starting a job: its worker starts, and its
// readiness probe (k8s.RunnerBusyProbe, whose command TestRunnerBusyProbeSeesTheJobsWorker
// runs over a process table) succeeds, so the kubelet reports the pod Ready.
func runnerTakesJob(t tb, ctx context.Context, core kubernetes.Interface, runner *corev1.Pod) *corev1.Pod {
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	var busy *corev1.Pod
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, runner.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		require.True(t, probesAJob(p), "a container-form runner's readiness is its job")
		require.False(t, podReady(p), "%s waits for a job: not Ready", p.Name)
		now := metav1.Now()
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = corev1.ConditionTrue, now
			}
		}
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = true
		}
		busy, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}))
	return busy
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// assertJobsSurviveADrain stands in for a managed node group update draining a system node
// while a container-form runner holds a job there and another waits for one (ARC's
// minRunners): the runner pods as ARC would create them, on system nodes; the API server's
// eviction API, which a drain uses, and the real disruption controller (kube-controller-
// manager) with the stack's PodDisruptionBudgets. The busy runner's eviction is refused; the
// idle runner's is not (ARC would start it again elsewhere); a direct delete (ARC ending the
// job) is not refused either.
func assertJobsSurviveADrain(t *testing.T, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, systemNodes []string, runner *corev1.Pod) {
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	require.Equal(t, "gpu-spot-container", runner.Labels[wellknown.PoolLabel], "the runner carries its pool's label")
	runner = runnerTakesJob(t, ctx, core, runner)
	idle := containerFormRunner(t, ctx, core, kube, systemNodes, "lux-gpu-t4-container-e2e-runner-idle")
	require.False(t, podReady(idle), "the waiting runner is not Ready")

	// The disruption controller counts both runners under the busy runners' budget, and only
	// the busy one as healthy.
	pdbs := core.PolicyV1().PodDisruptionBudgets(wellknown.RunnersNamespace)
	require.Eventually(t, func() bool {
		pdb, err := pdbs.Get(ctx, k8s.BusyRunnersBudget, metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration >= pdb.Generation && pdb.Status.CurrentHealthy == 1 && pdb.Status.ExpectedPods == 2
	}, time.Minute, 500*time.Millisecond, "the disruption controller sees both runners under the busy runners' budget, one healthy")

	err := pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: runner.Name, Namespace: wellknown.RunnersNamespace}})
	require.Error(t, err, "a drain must not evict a runner that holds a job")
	assert.True(t, apierrors.IsTooManyRequests(err), "refused by the disruption budget: %v", err)
	_, err = pods.Get(ctx, runner.Name, metav1.GetOptions{})
	assert.NoError(t, err, "the runner is still there")

	require.NoError(t, pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: idle.Name, Namespace: wellknown.RunnersNamespace}}),
		"a drain moves a runner that waits for a job: a roll is never held by an idle runner")
	assert.Eventually(t, func() bool {
		_, err := pods.Get(ctx, idle.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 250*time.Millisecond, "the idle runner is gone")
}

// assertSystemNodesFit: every pod the stack runs outside the GPU nodes was placed by the
// scheduler on a system node — the controllers (from their releases' Deployments), ARC's
// listener per scale set, CoreDNS (eksaddons_test.go), a container-form runner and the retry
// runner — and what they request fits a t3.medium's allocatable. It logs the headroom; EKS's
// DaemonSets (kube-proxy, the VPC CNI, the pod identity agent) are not in this API server and
// need their share of it.
func assertSystemNodesFit(t *testing.T, ctx context.Context, core kubernetes.Interface, systemNodes []string) {
	// A pod made before the nodes joined waits out the scheduler's back-off (up to
	// podMaxBackoffSeconds, 10 s by default) before it is tried again: placed within 20 s.
	var unplaced []string
	require.Eventually(t, func() bool {
		unplaced = nil
		for _, ns := range []string{wellknown.KarpenterNamespace, wellknown.ARCNamespace, wellknown.DevicePluginNamespace} {
			pods, err := core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" {
					unplaced = append(unplaced, ns+"/"+p.Name)
				}
			}
		}
		return len(unplaced) == 0
	}, 20*time.Second, 250*time.Millisecond, "every controller and listener is scheduled")
	assert.Empty(t, unplaced, "every controller and listener is scheduled")
	for _, name := range systemNodes {
		node, err := core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		pods, err := core.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		require.NoError(t, err)
		cpu, memory := resourceSum(), resourceSum()
		var names []string
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			names = append(names, p.Namespace+"/"+p.Name)
			for _, c := range p.Spec.Containers {
				cpu.Add(c.Resources.Requests[corev1.ResourceCPU])
				memory.Add(c.Resources.Requests[corev1.ResourceMemory])
			}
		}
		slices.Sort(names)
		allocCPU, allocMemory := node.Status.Allocatable[corev1.ResourceCPU], node.Status.Allocatable[corev1.ResourceMemory]
		t.Logf("system node %s runs %v: requests cpu %s of %s, memory %dMi of %dMi; headroom cpu %dm, memory %dMi",
			name, names, cpu.String(), allocCPU.String(), memory.Value()>>20, allocMemory.Value()>>20,
			allocCPU.MilliValue()-cpu.MilliValue(), (allocMemory.Value()-memory.Value())>>20)
		// The sums are the log's: the scheduler never binds past allocatable, so they cannot
		// exceed it. The fit is the placement above and below — every pod bound, each
		// controller on this node (#42).
		wants := []string{wellknown.KarpenterNamespace + "/karpenter", wellknown.ARCNamespace + "/arc-gha-rs-controller",
			"kube-system/coredns", wellknown.RunnersNamespace + "/lux-gpu-t4-container", wellknown.RunnersNamespace + "/" + retryScaleSet}
		for _, scaleSet := range configuredScaleSets(t) {
			wants = append(wants, wellknown.ARCNamespace+"/"+scaleSet+"-listener")
		}
		for _, want := range wants {
			assert.True(t, slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, want) }), "%s… runs on %s", want, name)
		}
	}
}

func resourceSum() *resource.Quantity { return resource.NewQuantity(0, resource.DecimalSI) }

// systemPodsPlaced: CoreDNS, a container-form runner and the retry runner are placed by the
// scheduler on the system nodes, beside the controllers and listeners, and fit a t3.medium.
// It returns the container-form runner (for the drain).
func (r *run) systemPodsPlaced(t *testing.T) *corev1.Pod {
	startCoreDNS(t, r.ctx, r.core)
	runner := containerFormRunner(t, r.ctx, r.core, r.kube, r.systemNodes, drainedRunner)
	retry := systemRunner(t, r.ctx, r.core, r.kube, r.systemNodes, retryScaleSet, retryScaleSet+"-e2e-runner-r")
	assertSystemNodesFit(t, r.ctx, r.core, r.systemNodes)
	require.NoError(t, r.core.CoreV1().Pods(retry.Namespace).Delete(r.ctx, retry.Name, metav1.DeleteOptions{}), "ARC ends the retry job")
	return runner
}
