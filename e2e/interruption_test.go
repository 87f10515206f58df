//go:build e2e

package e2e

import (
	"context"
	"strings"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// containerJobPod is the pod the runner container hooks (v0.8.1) create for a container-form
// job: the pool's hook template from its ConfigMap, as the runner mounts it, with the
// template's "$job" container as the job container (the workflow's container: names its
// image), named and labelled for its runner as the hooks name and label it, in the namespace
// the runner's env names to the hooks (ACTIONS_RUNNER_KUBERNETES_NAMESPACE: index.ts
// namespace(), which is the runner account's own namespace when unset).
func containerJobPod(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, scaleSet, runner string) *corev1.Pod {
	cm, err := core.CoreV1().ConfigMaps(wellknown.RunnersNamespace).Get(ctx, scaleSet+"-job-pod", metav1.GetOptions{})
	require.NoError(t, err, "the pool's hook template")
	var tmpl corev1.PodTemplateSpec
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["job-pod.yaml"]), &tmpl))
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace = runner[:min(len(runner), 63-len("-workflow"))]+"-workflow", wellknown.RunnersNamespace
	for _, e := range runnerPod(t, ctx, kube, scaleSet, runner).Spec.Containers[0].Env {
		if e.Name == "ACTIONS_RUNNER_KUBERNETES_NAMESPACE" {
			pod.Namespace = e.Value
		}
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels["runner-pod"] = runner
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	var job bool
	for i, c := range pod.Spec.Containers {
		if c.Name == "$job" {
			pod.Spec.Containers[i].Name, pod.Spec.Containers[i].Image, job = "job", "nvidia/cuda:12.8.1-devel-ubuntu24.04", true
		}
	}
	require.True(t, job, "the hook template has the $job container")
	return pod
}

// spotInterruption: a container-form job runs — its runner on a system node, its job pod on a
// spot GPU node Karpenter launched for it — when AWS announces that the instance will be
// reclaimed (EC2's interruption warning, in EventBridge's shape, on the stack's queue).
// Karpenter's own interruption controller reads it, records SpotInterrupted on the Node and
// takes the node away; gpuci doctor, reading only the events the real controllers emitted
// (Karpenter's, and the scheduler's Scheduled), names the job pod and so its runner. No event
// in this test is written by hand. Then the retry workflow's step, on the stack's retry runner:
// gpuci retry --cluster under the retry account re-runs exactly that job (retryFromTheCluster);
// the re-run's on-demand node is rerunOnTheTwin's.
// (It runs on the container pool while gpu-spot's empty node is being consolidated.)
func spotInterruption(t tb, ctx context.Context, restCfg *rest.Config, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, gpuci, kubeconfig string, systemNodes []string) {
	const pool, scaleSet = "gpu-spot-container", "lux-gpu-t4-container"
	defer func() {
		if t.Failed() {
			dumpScheduling(t, ctx, core)
			t.Logf("karpenter on the job pod:\n%s", k.logLines(scaleSet+"-e2e-runner-y"))
		}
	}()
	started := time.Now() // GitHub's started_at of the job this runner takes
	runner, placed, claim := containerJobOnANewNode(t, ctx, core, kube, systemNodes, pool, scaleSet, scaleSet+"-e2e-runner-y")
	name, node := placed.Name, placed.Spec.NodeName
	assert.Equal(t, karpv1.CapacityTypeSpot, claim.Labels[karpv1.CapacityTypeLabelKey])
	instance := instanceID(&claim)
	summaryReadsTheJobsNode(t, ctx, restCfg, core, runner, placed)

	k.interrupt(t, instance)
	require.Eventually(t, func() bool {
		events, err := core.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=SpotInterrupted"})
		if err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node {
				return true
			}
		}
		return false
	}, time.Minute, 250*time.Millisecond, "Karpenter records SpotInterrupted on %s", node)
	require.Eventually(t, func() bool {
		c := poolClaims(t, ctx, kube, pool)
		return len(c) == 0 || c[0].DeletionTimestamp != nil
	}, time.Minute, 250*time.Millisecond, "Karpenter takes the interrupted node away")

	f := gpuciDoctor(t, ctx, gpuci, kubeconfig, "Jobs failed by spot interruptions")
	assert.True(t, f.Problem, "doctor reports the interruption")
	evidence := strings.Join(f.Evidence, "\n")
	assert.Contains(t, evidence, "node "+node, "the interrupted node")
	assert.Contains(t, evidence, name, "the job pod it ended, named for its runner "+runner.Name)

	// EC2 reclaims the instance two minutes after its warning, and the job's pod goes with it;
	// the runner, on its system node, fails the job (GitHub records how: endOf), and ARC ends it.
	require.NoError(t, core.CoreV1().Pods(placed.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	end := endOf(t, ctx, core, runner, placed)
	require.Equal(t, jobPodLost, end, "the job pod gone, its runner alive: a failed step, not a shutdown")
	require.NoError(t, core.CoreV1().Pods(runner.Namespace).Delete(ctx, runner.Name, metav1.DeleteOptions{}))
	k.awaitGone(t, ctx, kube, pool, instance, time.Minute, "the interrupted node and its instance are gone")

	// The job failed; the retry workflow runs on the stack's retry runner, its pods gone.
	retryFromTheCluster(t, ctx, core, gpuci, kubeconfig, runner.Name, drainedRunner, node, end, started)
	// The same job, with nothing in its repository: the stack's in-cluster retrier, whose
	// re-run goes to the pool's on-demand nodes for the cool-down.
	retrierSweepsTheOrg(t, ctx, core, kube, gpuci, kubeconfig, runner.Name, drainedRunner, end, started, func() string {
		return rerunInTheCoolDown(t, ctx, core, kube, k, systemNodes, pool, scaleSet)
	})
}

// rerunInTheCoolDown is the re-run of the interrupted job, with the plain runs-on line it had:
// the same scale set's runner and job pod, which Karpenter places on an on-demand node of the
// pool's cool-down NodePool (tried first, now that the retrier raised its limit), none of the
// spot NodePool's. Its NodeClaim is deleted after, and its instance terminated.
func rerunInTheCoolDown(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, systemNodes []string, pool, scaleSet string) (runnerName string) {
	coolDown := wellknown.CoolDownNodePool(pool)
	runner, job, claim := containerJobOnANewNode(t, ctx, core, kube, systemNodes, coolDown, scaleSet, scaleSet+"-e2e-runner-y2")
	assert.Equal(t, karpv1.CapacityTypeOnDemand, claim.Labels[karpv1.CapacityTypeLabelKey], "on-demand while the pool cools down")
	assert.Equal(t, pool, claim.Labels[wellknown.PoolLabel], "a node of the pool, for the pool's runs-on")
	assert.Empty(t, poolClaims(t, ctx, kube, pool), "none of the spot NodePool's")
	jobAndNodeEnd(t, ctx, core, kube, k, runner, job, claim, coolDown, "the cool-down node and its instance go")
	return runner.Name
}

// jobAndNodeEnd ends a container-form job (its pod, then its runner) and takes its node away
// as a NodePool removal does: its NodeClaim deleted, which Karpenter's termination turns into
// a terminated instance without consolidation's waits (consolidateAfter, then
// commandValidationDelay's 15 s in sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/disruption/consolidation.go; the journey shows an empty node consolidated).
func jobAndNodeEnd(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, runner, job *corev1.Pod, claim karpv1.NodeClaim, nodePool, msg string) {
	require.NoError(t, core.CoreV1().Pods(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	require.NoError(t, core.CoreV1().Pods(runner.Namespace).Delete(ctx, runner.Name, metav1.DeleteOptions{}))
	require.NoError(t, kube.Resource(nodeClaims).Delete(ctx, claim.Name, metav1.DeleteOptions{}))
	k.awaitGone(t, ctx, kube, nodePool, instanceID(&claim), time.Minute, msg)
}

// summaryReadsTheJobsNode: the container-form runner's job summary (job-completed.sh) says
// whether its job pod's node is spot or on-demand. With the runner's own token, the real API
// server gives it the Node by the name the job pod's sampler reports (GPUCI_NODE, the job
// pod's spec.nodeName), carrying the capacity type Karpenter launched; it lists no Node.
func summaryReadsTheJobsNode(t tb, ctx context.Context, restCfg *rest.Config, core kubernetes.Interface, runner, job *corev1.Pod) {
	hooks := asPod(t, ctx, restCfg, core, runner)
	node, err := hooks.CoreV1().Nodes().Get(ctx, job.Spec.NodeName, metav1.GetOptions{})
	require.NoError(t, err, "the runner's account reads its job pod's node")
	assert.Equal(t, karpv1.CapacityTypeSpot, node.Labels[karpv1.CapacityTypeLabelKey], "the capacity type Karpenter launched")
	_, err = hooks.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "and lists none: %v", err)
}

// rerunOnTheTwin is the re-run's second attempt: cuda.yml's runs-on sends it to the pool's
// on-demand twin, whose runner and job pod come from the twin's own templates; Karpenter
// launches an on-demand node of the twin's NodePool for the job pod (none of the spot pool's),
// and terminates its instance when the node goes. The twin is a pool of its own, so this runs
// beside the interruption rather than after it.
func rerunOnTheTwin(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, systemNodes []string) {
	const twin, scaleSet = "gpu-spot-container-on-demand", "lux-gpu-t4-container-on-demand"
	runner, job, claim := containerJobOnANewNode(t, ctx, core, kube, systemNodes, twin, scaleSet, scaleSet+"-e2e-runner-z")
	assert.Equal(t, wellknown.ContainerJobsNamespace("gpu-spot-container"), job.Namespace, "a twin's job pods are its pool's, in its pool's namespace")
	assert.Equal(t, karpv1.CapacityTypeOnDemand, claim.Labels[karpv1.CapacityTypeLabelKey], "on-demand: no second interruption")
	for _, c := range poolClaims(t, ctx, kube, "gpu-spot-container") {
		assert.NotEqual(t, job.Spec.NodeName, c.Status.NodeName, "not on a node of the spot pool")
	}

	jobAndNodeEnd(t, ctx, core, kube, k, runner, job, claim, twin, "the twin's node and its instance go")
}

// containerJobOnANewNode is a container-form job as ARC and the hooks start it: the scale
// set's runner on a system node, its job pod from the pool's hook template, which makes
// Karpenter launch exactly one node of the pool, where the job pod runs.
func containerJobOnANewNode(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, systemNodes []string, pool, scaleSet, runnerName string) (runner, job *corev1.Pod, claim karpv1.NodeClaim) {
	runner = systemRunner(t, ctx, core, kube, systemNodes, scaleSet, runnerName)
	jobPod := containerJobPod(t, ctx, core, kube, scaleSet, runner.Name)
	pods := core.CoreV1().Pods(jobPod.Namespace)
	created, err := pods.Create(ctx, jobPod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		job, err = pods.Get(ctx, created.Name, metav1.GetOptions{})
		return err == nil && job.Spec.NodeName != "" && job.Status.Phase == corev1.PodRunning
	}, time.Minute, 250*time.Millisecond, "%s's job pod runs on a new node of %s", scaleSet, pool)
	claims := poolClaims(t, ctx, kube, pool)
	require.Len(t, claims, 1, "Karpenter launched one node of %s for the job pod", pool)
	assert.Equal(t, claims[0].Status.NodeName, job.Spec.NodeName, "the job pod is on that node")
	assert.NotContains(t, systemNodes, job.Spec.NodeName, "the job pod holds a GPU node, not a system node")
	return runner, job, claims[0]
}

// runnerFormInterruption: a runner-form job's spot node is interrupted. The runner holds the
// GPU on that node, so the reclaim ends the runner itself: the node's graceful shutdown sends
// it SIGTERM (its pod deleted with a grace period), and GitHub concludes the job `cancelled`,
// and the two legs of its fail-fast matrix `cancelled` with it (endOf, githubJob). The stack's
// retrier, as its Deployment runs it, re-runs all three in one attempt and puts gpu-spot on
// on-demand for the cool-down: the re-run's runner lands on an on-demand node of the pool's
// cool-down NodePool from the real Karpenter, and the run ends green. The same cluster
// evidence under a run a person cancelled re-runs nothing. (It runs once the warm window has
// closed and its nodes are gone: gpu-spot is free then.)
func runnerFormInterruption(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, gpuci, adminKubeconfig string) {
	const pool, scaleSet = "gpu-spot", "lux-gpu-t4"
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	defer func() {
		if t.Failed() {
			dumpScheduling(t, ctx, core)
			t.Logf("karpenter on the runner:\n%s", k.logLines(scaleSet+"-e2e-runner-s"))
		}
	}()
	// The job must land on spot: not before the spot offerings EC2 refused in the warm window
	// are back in Karpenter's launches (else it launches on-demand, as it should).
	if wait := time.Until(k.spotRefusalsFreeAt()); wait > 0 {
		t.Logf("waiting %s for Karpenter's memory of the warm window's refused spot launches", wait.Round(time.Second))
		time.Sleep(wait)
	}
	started := time.Now()
	rerunPod := runnerPod(t, ctx, kube, scaleSet, scaleSet+"-e2e-runner-s2")
	runner, err := pods.Create(ctx, runnerPod(t, ctx, kube, scaleSet, scaleSet+"-e2e-runner-s1"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		runner, err = pods.Get(ctx, runner.Name, metav1.GetOptions{})
		return err == nil && runner.Spec.NodeName != "" && runner.Status.Phase == corev1.PodRunning
	}, time.Minute, 250*time.Millisecond, "the runner runs on a node Karpenter launched for %s", pool)
	claims := poolClaims(t, ctx, kube, pool)
	require.Len(t, claims, 1, "one node for the job")
	claim := claims[0]
	require.Equal(t, runner.Spec.NodeName, claim.Status.NodeName)
	require.Equal(t, karpv1.CapacityTypeSpot, claim.Labels[karpv1.CapacityTypeLabelKey])

	k.interrupt(t, instanceID(&claim))
	require.Eventually(t, func() bool {
		events, err := core.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=SpotInterrupted,involvedObject.name=" + runner.Spec.NodeName})
		return err == nil && len(events.Items) > 0
	}, time.Minute, 250*time.Millisecond, "Karpenter records SpotInterrupted on %s", runner.Spec.NodeName)
	// The reclaim: the node's graceful shutdown stops the runner with a grace period.
	grace := int64(5)
	require.NoError(t, pods.Delete(ctx, runner.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}))
	end := endOf(t, ctx, core, runner, nil)
	require.Equal(t, runnerShutDown, end, "the runner got the shutdown signal: GitHub records cancelled")
	k.awaitGone(t, ctx, kube, pool, instanceID(&claim), time.Minute, "Karpenter takes the interrupted node away, and its instance")

	// A person cancelled this run as the node went: the same evidence re-runs nothing.
	byHand := newGitHubRun(githubJob{id: 201, name: "cuda (12.9)", runner: runner.Name, end: cancelledByHand, started: started, completed: time.Now()})
	passByHand, _, doneByHand := retrierPasses(t, ctx, core, gpuci, adminKubeconfig, byHand)
	p := passByHand()
	doneByHand()
	byHand.mu.Lock()
	assert.Zero(t, byHand.failedJobsRerunCalls+len(byHand.jobReruns), "a run cancelled by hand is left alone")
	byHand.mu.Unlock()
	assert.Empty(t, p.CoolDowns, "and its pool stays on spot")

	// The premise, by the stand-in's rule (githubJob.conclusion, cited there): GitHub records
	// every leg cancelled, so the retrier below is held to what GitHub records, not to failure.
	gh := interruptedMatrix("cuda", runner.Name, scaleSet+"-e2e-runner-s0", end, started)
	require.NotEmpty(t, gh.jobs)
	for _, j := range gh.jobs {
		require.Equal(t, "cancelled", j.conclusion(), "%s: GitHub concludes every leg cancelled", j.name)
	}
	pass, _, done := retrierPasses(t, ctx, core, gpuci, adminKubeconfig, gh)
	defer done()
	p = pass()
	coolDown := wellknown.CoolDownNodePool(pool)
	require.Len(t, p.CoolDowns, 1, "the interrupted job's pool goes on-demand")
	assert.Contains(t, p.CoolDowns[0], coolDown+" until ")
	gh.mu.Lock()
	assert.Equal(t, 1, gh.failedJobsRerunCalls, "the interrupted leg and the two it cancelled, in one attempt")
	assert.Equal(t, 2, gh.attempt)
	gh.mu.Unlock()

	// The re-run's runner: an on-demand node of the cool-down NodePool, none of the spot one's.
	rerun, err := pods.Create(ctx, rerunPod, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rerun, err = pods.Get(ctx, rerun.Name, metav1.GetOptions{})
		return err == nil && rerun.Spec.NodeName != "" && rerun.Status.Phase == corev1.PodRunning
	}, time.Minute, 250*time.Millisecond, "the re-run's runner runs")
	cooled := poolClaims(t, ctx, kube, coolDown)
	require.Len(t, cooled, 1, "Karpenter launched one node of %s for the re-run", coolDown)
	assert.Equal(t, rerun.Spec.NodeName, cooled[0].Status.NodeName)
	assert.Equal(t, karpv1.CapacityTypeOnDemand, cooled[0].Labels[karpv1.CapacityTypeLabelKey], "on-demand while the pool cools down")
	assert.Empty(t, poolClaims(t, ctx, kube, pool), "none of the spot NodePool's")
	gh.rerunEnds("cuda (12.9)", rerun.Name, succeeded)
	gh.rerunEnds("cuda (13.0)", scaleSet+"-e2e-runner-s3", succeeded)
	gh.rerunEnds("cuda (13.1)", scaleSet+"-e2e-runner-s4", succeeded)
	gh.mu.Lock()
	status, conclusion := gh.status()
	gh.mu.Unlock()
	assert.Equal(t, []string{"completed", "success"}, []string{status, conclusion}, "the run is green")

	require.NoError(t, pods.Delete(ctx, rerun.Name, metav1.DeleteOptions{}))
	require.NoError(t, kube.Resource(nodeClaims).Delete(ctx, cooled[0].Name, metav1.DeleteOptions{}))
	k.awaitGone(t, ctx, kube, coolDown, instanceID(&cooled[0]), time.Minute, "the cool-down node and its instance go")
	coolDownEnds(t, ctx, kube, pass, coolDown)
	t.Logf("runner-form interruption: done after %s", time.Since(started).Round(100*time.Millisecond))
}
