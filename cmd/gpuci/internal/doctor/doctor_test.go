package doctor_test

// gpuci doctor against client-go fakes: a healthy cluster has no problem; each symptom of
// the troubleshooting table is found with its evidence.

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/doctor"
	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/stats"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakecluster"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

var doctorNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// doctorCluster is the healthy idle cluster plus a listener and the device plugin DaemonSet.
func doctorCluster() fakecluster.Cluster {
	c := fakecluster.Healthy()
	c.Objects = append(c.Objects,
		fakecluster.Pod("arc-systems", "lux-gpu-t4-listener", map[string]string{"actions.github.com/scale-set-name": "lux-gpu-t4"}, corev1.PodRunning),
		fakecluster.Pod("arc-systems", "lux-gpu-t4-on-demand-listener", map[string]string{"actions.github.com/scale-set-name": "lux-gpu-t4-on-demand"}, corev1.PodRunning),
		fakecluster.Pod("arc-systems", "lux-gpu-t4-container-listener", map[string]string{"actions.github.com/scale-set-name": "lux-gpu-t4-container"}, corev1.PodRunning),
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "nvidia-device-plugin", Name: "nvidia-device-plugin"}},
	)
	return c
}

func nodeClaim(name string, conds []any, deleting *time.Time) *unstructured.Unstructured {
	u := fakecluster.Custom(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}, "", name, map[string]any{"status": map[string]any{"conditions": conds}})
	if deleting != nil {
		ts := metav1.NewTime(*deleting)
		u.SetDeletionTimestamp(&ts)
		u.SetFinalizers([]string{"karpenter.sh/termination"})
	}
	return u
}

// examine runs gpuci doctor on a fake cluster, against the dev stack, at doctorNow.
func examine(t *testing.T, c fakecluster.Cluster) (doctor.Doctor, []doctor.Finding, string) {
	t.Helper()
	kube, dyn := c.Clients()
	d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: testkit.DevConfig(t), Now: func() time.Time { return doctorNow }}
	findings := d.Examine(context.Background())
	var out bytes.Buffer
	doctor.Write(&out, findings)
	return d, findings, out.String()
}

func problem(findings []doctor.Finding) []string {
	var s []string
	for _, f := range findings {
		if f.Problem {
			s = append(s, f.Symptom)
		}
	}
	return s
}

func TestDoctorHealthyCluster(t *testing.T) {
	_, findings, out := examine(t, doctorCluster())
	assert.Len(t, findings, 15)
	assert.Empty(t, problem(findings), out)
	assert.Contains(t, out, "listener lux-gpu-t4-listener Running; last log lines: fake logs")
}

func TestDoctorFindsEachSymptom(t *testing.T) {
	gpuNode := func(gpus int64, age time.Duration) *corev1.Node {
		n := fakecluster.Node("ip-10-0-2-2", map[string]string{"karpenter.sh/nodepool": "gpu-spot", "node.kubernetes.io/instance-type": "g4dn.xlarge", "nvidia.com/gpu.present": "true"}, true, gpus)
		n.CreationTimestamp = metav1.NewTime(doctorNow.Add(-age))
		return n
	}
	// healthyPlugin: the device plugin runs on each GPU node (its DaemonSet's status says so),
	// so only the symptom under test shows.
	healthyPlugin := func(c *fakecluster.Cluster) {
		for _, o := range c.Objects {
			if ds, ok := o.(*appsv1.DaemonSet); ok {
				ds.Status.DesiredNumberScheduled++
				ds.Status.NumberReady++
			}
		}
	}
	longAgo := doctorNow.Add(-time.Hour)
	cases := map[string]struct {
		breakIt func(c *fakecluster.Cluster)
		symptom string
		want    string
	}{
		"job queued: labels drifted": {func(c *fakecluster.Cluster) {
			c.Custom[1].(*unstructured.Unstructured).Object["spec"] = map[string]any{"runnerScaleSetLabels": []any{"gpu"}}
		}, "Job stuck in Queued", "labels [gpu] (configured [self-hosted linux amd64 cuda gpu t4])"},
		"job queued: no listener": {func(c *fakecluster.Cluster) { c.Objects = append(c.Objects[:3], c.Objects[4:]...) }, "Job stuck in Queued", "no listener pod for lux-gpu-t4 in"},
		"runner pending": {func(c *fakecluster.Cluster) {
			c.Objects = append(c.Objects, fakecluster.Pod("arc-runners", "lux-gpu-t4-runner-abc", nil, corev1.PodPending))
			c.Custom = append(c.Custom, nodeClaim("gpu-spot-x1", []any{map[string]any{"type": "Launched", "status": "False", "reason": "LaunchFailed", "message": "no subnets found"}}, nil))
		}, "Runner pod Pending with no node", "NodeClaim gpu-spot-x1: Launched=False LaunchFailed no subnets found"},
		"runner pending: a snapshot larger than the volume": {func(c *fakecluster.Cluster) {
			c.Objects = append(c.Objects, fakecluster.Pod("arc-runners", "lux-gpu-t4-runner-def", nil, corev1.PodPending))
			c.Custom = append(c.Custom, fakecluster.Custom(schema.GroupVersionKind{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"}, "", "gpu-spot",
				map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "ValidationFailed", "message": "Volume of size 50GB is smaller than snapshot 'snap-0123456789abcdef0', expect size >= 60GB"}}}}))
		}, "Runner pod Pending with no node", "EC2NodeClass gpu-spot not Ready: Ready=False ValidationFailed Volume of size 50GB is smaller than snapshot"},
		"GPU not detected": {func(c *fakecluster.Cluster) {
			c.Objects = append(c.Objects, gpuNode(0, time.Minute), fakecluster.Pod("arc-runners", "r", nil, corev1.PodRunning))
		}, "GPU not detected on a GPU node", "nvidia.com/gpu allocatable 0"},
		"GPU not detected on Bottlerocket": {func(c *fakecluster.Cluster) {
			n := gpuNode(0, time.Minute)
			n.Labels["lux-gpu-ci.luxfi.com/node-os"] = "bottlerocket"
			c.Objects = append(c.Objects, n, fakecluster.Pod("arc-runners", "r", nil, corev1.PodRunning))
		}, "GPU not detected on a GPU node", "nvidia.com/gpu allocatable 0 (from Bottlerocket's own device plugin)"},
		"spot capacity": {func(c *fakecluster.Cluster) {
			c.Custom = append(c.Custom, nodeClaim("gpu-spot-x2", []any{map[string]any{"type": "Launched", "status": "False", "reason": "InsufficientCapacity", "message": "spot capacity"}}, nil))
		}, "Spot capacity", "InsufficientCapacity"},
		// Karpenter v1.14 deletes a NodeClaim EC2 refused and records why on it as an event.
		"spot capacity, from Karpenter's event": {func(c *fakecluster.Cluster) {
			c.Objects = append(c.Objects, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "gpu-spot-x3.1"},
				InvolvedObject: corev1.ObjectReference{Kind: "NodeClaim", Name: "gpu-spot-x3"},
				Reason:         "InsufficientCapacityError", Type: "Warning", LastTimestamp: metav1.NewTime(doctorNow.Add(-2 * time.Minute)),
				Message: "NodeClaim gpu-spot-x3 event: creating instance, insufficient capacity, all requested instance types were unavailable during launch",
			})
		}, "Spot capacity", "NodeClaim gpu-spot-x3: NodeClaim gpu-spot-x3 event: creating instance, insufficient capacity"},
		// Spot was short when a warm window opened: its node is on-demand all window.
		"a warm node on-demand": {func(c *fakecluster.Cluster) {
			placeholder := fakecluster.Pod(wellknown.WarmNamespace, "gpu-spot-warm-0-abcde", map[string]string{wellknown.WarmPoolLabel: "gpu-spot"}, corev1.PodRunning)
			placeholder.Spec.NodeName = "ip-10-0-2-2"
			claim := nodeClaim("gpu-spot-x5", nil, nil)
			claim.SetLabels(map[string]string{"karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "gpu-spot"})
			require.NoError(t, unstructured.SetNestedField(claim.Object, "ip-10-0-2-2", "status", "nodeName"))
			c.Objects = append(c.Objects, gpuNode(1, time.Minute), placeholder)
			c.Custom = append(c.Custom, claim)
			healthyPlugin(c)
		}, "Spot capacity", "warm node ip-10-0-2-2 of pool gpu-spot is on-demand (NodeClaim gpu-spot-x5): spot was short when its window opened"},
		"spot interruption": {func(c *fakecluster.Cluster) {
			runner := fakecluster.Pod("arc-runners", "lux-gpu-t4-7xk2p-runner-abcde", nil, corev1.PodRunning)
			runner.Spec.NodeName = "ip-10-0-2-2"
			c.Objects = append(c.Objects, gpuNode(1, time.Minute), runner, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "ip-10-0-2-2.18a"},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-2-2"},
				Reason:         "SpotInterrupted", Message: "Spot interruption warning was triggered", Type: "Normal", Source: corev1.EventSource{Component: "karpenter"},
				LastTimestamp: metav1.NewTime(doctorNow.Add(-10 * time.Minute)),
			}, &corev1.Event{ // the scheduler's record of where the runner went (the doctor reads events, not pods)
				ObjectMeta:     metav1.ObjectMeta{Namespace: "arc-runners", Name: "lux-gpu-t4-7xk2p-runner-abcde.17f"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "arc-runners", Name: runner.Name},
				Reason:         "Scheduled", Message: "Successfully assigned arc-runners/" + runner.Name + " to ip-10-0-2-2", Type: "Normal", Source: corev1.EventSource{Component: "default-scheduler"},
				LastTimestamp: metav1.NewTime(doctorNow.Add(-20 * time.Minute)),
			})
			healthyPlugin(c)
		}, "Jobs failed by spot interruptions", "2026-12-03T11:50:00Z: node ip-10-0-2-2: Spot interruption warning was triggered; runner pods on it: lux-gpu-t4-7xk2p-runner-abcde"},
		// The retrier took a node out of service (its event, with the type and zone it names):
		// listed, with how often that type and zone had one; a forged event is not.
		"GPU taken out of service": {func(c *fakecluster.Cluster) {
			msg := "node ip-10-0-2-9 (g4dn.xlarge, us-west-2a, spot, pool gpu-spot): its device plugin withdrew 1 of its 1 GPU(s) as unhealthy; NodeClaim gpu-spot-x9 deleted, Karpenter replaces the node"
			for i, src := range []string{"gpuci-retrier", "gpuci-retrier", "a-job"} {
				c.Objects = append(c.Objects, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("ip-10-0-2-9.%d", i)},
					InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-2-9"},
					Reason:         "GPUOutOfService", Message: msg, Type: "Warning", Source: corev1.EventSource{Component: src},
					LastTimestamp: metav1.NewTime(doctorNow.Add(-time.Duration(i+1) * time.Minute)),
				})
			}
		}, "GPUs taken out of service", "g4dn.xlarge in us-west-2a: 2 node(s) out of service in the last hour"},
		// No retrier: a node whose device plugin withdrew its GPU stays, and is named.
		"GPU withdrawn, node still in service": {func(c *fakecluster.Cluster) {
			n := gpuNode(0, time.Minute)
			n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
			n.Labels[wellknown.PoolLabel] = "gpu-spot"
			c.Objects = append(c.Objects, n)
			healthyPlugin(c)
		}, "GPUs taken out of service", "node ip-10-0-2-2 (g4dn.xlarge) is still in service with 1 of its 1 GPU(s) withdrawn by its device plugin"},
		"cost spike": {func(c *fakecluster.Cluster) {
			c.Objects = append(c.Objects, gpuNode(1, 3*time.Hour))
			healthyPlugin(c)
		}, "Cost spike: GPU nodes up without a job", "has no runner pod, up 3h0m0s"},
		"spot quota": {func(c *fakecluster.Cluster) {
			c.Custom = append(c.Custom, nodeClaim("gpu-spot-x4", []any{map[string]any{"type": "Launched", "status": "False", "reason": "LaunchFailed", "message": "creating instance, MaxSpotInstanceCountExceeded: Max spot instance count exceeded"}}, nil))
		}, "GPU vCPU quota", "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-3819A6DF --desired-value 8 --region us-west-2"},
		"ARC's CRDs co-owned": {func(c *fakecluster.Cluster) {
			c.Custom[len(c.Custom)-1] = fakecluster.ARCCRD("autoscalingrunnersets.actions.github.com", wellknown.ARCCRDFieldManager, "helm")
		}, "ARC's CRDs co-owned: an ARC upgrade would keep the fields it drops", "CRD autoscalingrunnersets.actions.github.com: fields also owned by helm"},
		"system node update held": {func(c *fakecluster.Cluster) {
			for _, o := range c.Objects {
				if n, ok := o.(*corev1.Node); ok && n.Name == "ip-10-0-1-1" {
					n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "eks.amazonaws.com/nodegroup", Value: "unschedulable", Effect: corev1.TaintEffectNoSchedule})
				}
			}
			runner := fakecluster.Pod("arc-runners", "lux-gpu-t4-container-7xk2p-runner-abcde", nil, corev1.PodRunning)
			runner.Spec.NodeName = "ip-10-0-1-1"
			c.Objects = append(c.Objects, runner)
		}, "System node update held by running jobs", "system node ip-10-0-1-1 tainted eks.amazonaws.com/nodegroup=unschedulable:NoSchedule; on it: runner pods lux-gpu-t4-container-7xk2p-runner-abcde"},
		"system node cordoned": {func(c *fakecluster.Cluster) {
			for _, o := range c.Objects {
				if n, ok := o.(*corev1.Node); ok && n.Name == "ip-10-0-1-1" {
					n.Spec.Unschedulable = true
				}
			}
		}, "System node update held by running jobs", "system node ip-10-0-1-1 cordoned; on it: no runner pod"},
		"stuck teardown": {func(c *fakecluster.Cluster) {
			c.Custom = append(c.Custom, nodeClaim("gpu-spot-x3", nil, &longAgo))
		}, "GPU nodes stuck at teardown", "deleting for 1h0m0s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := doctorCluster()
			tc.breakIt(&c)
			_, findings, out := examine(t, c)
			assert.Equal(t, []string{tc.symptom}, problem(findings), "this symptom, and no other: %s", out)
			assert.Contains(t, out, tc.want)
			assert.Contains(t, out, "→ ", "a problem comes with its fix")
		})
	}
}

// A Bottlerocket node advertises its GPU with the OS's own plugin: the stack's DaemonSet
// does not run there, and that is no problem.
func TestDoctorAcceptsBottlerocketNodesWithoutTheDaemonSet(t *testing.T) {
	c := doctorCluster()
	n := fakecluster.Node("ip-10-0-2-3", map[string]string{"karpenter.sh/nodepool": "gpu-spot", "node.kubernetes.io/instance-type": "g4dn.xlarge",
		"nvidia.com/gpu.present": "true", "lux-gpu-ci.luxfi.com/node-os": "bottlerocket"}, true, 1)
	n.CreationTimestamp = metav1.NewTime(doctorNow.Add(-time.Minute))
	runner := fakecluster.Pod("arc-runners", "lux-gpu-t4-runner-x2", nil, corev1.PodRunning)
	runner.Spec.NodeName = n.Name
	c.Objects = append(c.Objects, n, runner)
	_, findings, out := examine(t, c)
	assert.Empty(t, problem(findings), out)
	assert.Contains(t, out, "node ip-10-0-2-3: nvidia.com/gpu allocatable 1 (from Bottlerocket's own device plugin)")
	assert.Contains(t, out, "device plugin DaemonSet: 0 desired, 0 ready")

	// The same node on AL2023 with no plugin pod is the symptom.
	delete(n.Labels, "lux-gpu-ci.luxfi.com/node-os")
	_, findings, out = examine(t, c)
	assert.Equal(t, []string{"GPU not detected on a GPU node"}, problem(findings), out)
}

func TestDoctorFixDeletesTheNodePools(t *testing.T) {
	d, _, _ := examine(t, doctorCluster())
	deleted, err := d.Fix(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu-spot", "gpu-spot-on-demand", "gpu-spot-container"}, deleted)
	_, err = d.Dyn.Resource(wellknown.NodePools).Get(context.Background(), "gpu-spot", metav1.GetOptions{})
	assert.Error(t, err, "the NodePool is gone")
}

// A runner GitHub refuses as too old is found in its log, and a pinned image is named.
func TestDoctorNamesAStaleRunner(t *testing.T) {
	c := doctorCluster()
	runner := fakecluster.Pod("arc-runners", "lux-gpu-t4-runner-x1", nil, corev1.PodRunning)
	runner.Spec.Containers = []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:2.334.0"}}
	c.Objects = append(c.Objects, runner)
	kube, dyn := c.Clients()
	cfg := testkit.DevConfig(t)
	cfg.GPUPools[0].RunnerImage = "ghcr.io/actions/actions-runner:2.334.0"
	d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: cfg, Now: func() time.Time { return doctorNow },
		Logs: func(_ context.Context, p corev1.Pod, _ int64) ([]byte, error) {
			if p.Name != runner.Name {
				return []byte("listening"), nil
			}
			return []byte("√ Connected to GitHub\nCurrent runner version: '2.334.0'\nAn error occured: Runner version v2.334.0 is deprecated and cannot receive messages.\nRunner listener exit with terminated error\n"), nil
		}}
	findings := d.Examine(context.Background())
	var out bytes.Buffer
	doctor.Write(&out, findings)
	assert.Equal(t, []string{"Job stuck in Queued: runner too old for GitHub"}, problem(findings), out.String())
	assert.Contains(t, out.String(), "runner pod lux-gpu-t4-runner-x1 (ghcr.io/actions/actions-runner:2.334.0): An error occured: Runner version v2.334.0 is deprecated and cannot receive messages.")
	assert.Contains(t, out.String(), "pool gpu-spot pins runnerImage ghcr.io/actions/actions-runner:2.334.0")
	assert.Contains(t, out.String(), "remove it (the current runner, pulled on each start)")

	// The default image follows the releases: nothing pinned to name, no problem.
	_, findings, text := examine(t, c)
	assert.Empty(t, problem(findings), text)
	assert.NotContains(t, text, "pins runnerImage")
}

// A stuck listener: a job queued past the threshold for a scale set that has no runner pod.
// A runner pod coming, a job younger than the threshold, or a job for other labels is not one;
// --fix restarts only that scale set's listener.
func TestDoctorFindsAStuckListener(t *testing.T) {
	queued := []stats.QueuedJob{
		{Repo: "app", Name: "cuda", Labels: []string{"self-hosted", "t4"}, Created: doctorNow.Add(-23 * time.Minute)},
		{Repo: "app", Name: "fresh", Labels: []string{"lux-gpu-t4-container"}, Created: doctorNow.Add(-3 * time.Minute)},
		{Repo: "web", Name: "lint", Labels: []string{"ubuntu-latest"}, Created: doctorNow.Add(-time.Hour)},
	}
	run := func(c fakecluster.Cluster, q func(context.Context) ([]stats.QueuedJob, error)) (doctor.Doctor, doctor.Finding) {
		kube, dyn := c.Clients()
		d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: testkit.DevConfig(t), Now: func() time.Time { return doctorNow }, Queue: q}
		for _, f := range d.Examine(context.Background()) {
			if strings.Contains(f.Symptom, "stuck listener") {
				return d, f
			}
		}
		t.Fatal("no stuck-listener finding")
		return d, doctor.Finding{}
	}
	list := func(context.Context) ([]stats.QueuedJob, error) { return queued, nil }

	d, f := run(doctorCluster(), list)
	assert.True(t, f.Problem)
	require.Len(t, f.Evidence, 1, "one scale set: the fresh job is under ten minutes, the lint job is not ours")
	assert.Equal(t, `scale set lux-gpu-t4: 1 job(s) queued, the oldest luxfi/app "cuda" for 23m0s, and no runner pod in arc-runners`, f.Evidence[0])

	stuck := d.StuckListeners(context.Background(), queued, doctor.DefaultQueuedFor)
	restarted, err := d.RestartListeners(context.Background(), stuck)
	require.NoError(t, err)
	assert.Equal(t, []string{"lux-gpu-t4"}, restarted)
	left, err := d.Kube.CoreV1().Pods("arc-systems").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, p := range left.Items {
		names = append(names, p.Name)
	}
	assert.ElementsMatch(t, []string{"arc-gha-rs-controller-xyz", "lux-gpu-t4-on-demand-listener", "lux-gpu-t4-container-listener"}, names, "only the stuck scale set's listener goes")

	// A runner pod of the scale set exists: a slow start, not a stuck listener.
	c := doctorCluster()
	c.Objects = append(c.Objects, fakecluster.Pod("arc-runners", "lux-gpu-t4-abc12-runner-x1y2z", map[string]string{"actions.github.com/scale-set-name": "lux-gpu-t4"}, corev1.PodPending))
	_, f = run(c, list)
	assert.False(t, f.Problem, "%v", f.Evidence)

	// Without a GitHub token the check is not made, and says so.
	_, f = run(doctorCluster(), nil)
	assert.False(t, f.Problem)
	assert.Contains(t, f.Evidence[0], "not checked: GitHub's queued jobs need GITHUB_TOKEN")
}

// A container-form scale set keeps a runner waiting, which is Ready only while it runs a job:
// a queued job with a runner that waits (or starts) is a slow start; with every runner busy at
// maxRunners, a job waiting its turn; with every runner busy below maxRunners, a listener that
// made no runner for it.
func TestDoctorTellsABusyContainerRunnerFromAWaitingOne(t *testing.T) {
	old := []stats.QueuedJob{{Repo: "app", Name: "cuda-container", Labels: []string{"lux-gpu-t4-container"}, Created: doctorNow.Add(-30 * time.Minute)}}
	check := func(ready corev1.ConditionStatus, maxRunners int) doctor.Finding {
		t.Helper()
		c := doctorCluster()
		runner := fakecluster.Pod("arc-runners", "lux-gpu-t4-container-abc12-runner-q", map[string]string{"actions.github.com/scale-set-name": "lux-gpu-t4-container"}, corev1.PodRunning)
		runner.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
		c.Objects = append(c.Objects, runner)
		kube, dyn := c.Clients()
		cfg := testkit.DevConfig(t)
		for i := range cfg.GPUPools {
			if cfg.GPUPools[i].RunnerScaleSetName == "lux-gpu-t4-container" {
				cfg.GPUPools[i].MaxRunners = maxRunners
			}
		}
		d := doctor.Doctor{Kube: kube, Dyn: dyn, Cfg: cfg, Now: func() time.Time { return doctorNow },
			Queue: func(context.Context) ([]stats.QueuedJob, error) { return old, nil }}
		for _, f := range d.Examine(context.Background()) {
			if strings.Contains(f.Symptom, "stuck listener") {
				return f
			}
		}
		t.Fatal("no stuck-listener finding")
		return doctor.Finding{}
	}
	f := check(corev1.ConditionFalse, 2)
	assert.False(t, f.Problem, "a runner waits for the job: %v", f.Evidence)
	f = check(corev1.ConditionTrue, 1)
	assert.False(t, f.Problem, "its one runner is busy at maxRunners 1: the job waits its turn: %v", f.Evidence)
	f = check(corev1.ConditionTrue, 2)
	assert.True(t, f.Problem, "its one runner is busy, and the listener made no second")
	assert.Equal(t, []string{`scale set lux-gpu-t4-container: 1 job(s) queued, the oldest luxfi/app "cuda-container" for 30m0s, and its 1 runner(s) all busy with other jobs, below its maxRunners 2`}, f.Evidence)
}

// A pool's pod whose node cannot pull its image waits for ever, its job Queued: doctor names
// the pod, the image and what the runtime said, and what to do for where the image comes
// from. The statuses are the kubelet's (kubernetes v1.36.3 pkg/kubelet/images/
// image_manager.go: ErrImagePull with the runtime's error, then ImagePullBackOff with "Back-off
// pulling image …: ErrImagePull: …") around containerd's errors (v1.7.30
// remotes/docker/authorizer.go:337, resolver.go:573, remotes/errors/errors.go:36).
func TestDoctorNamesAnImageItsNodesCannotPull(t *testing.T) {
	waiting := func(ns, name, image, reason, message string) *corev1.Pod {
		p := fakecluster.Pod(ns, name, nil, corev1.PodPending)
		p.Spec.NodeName = "ip-10-0-2-2"
		p.Spec.Containers = []corev1.Container{{Name: "runner", Image: image}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runner", Image: image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
		return p
	}
	const private = "ghcr.io/luxfi/lux-cuda-runner:cuda12.8"
	refused := `failed to pull and unpack image "` + private + `": failed to resolve reference "` + private + `": failed to authorize: failed to fetch anonymous token: unexpected status from GET request to https://ghcr.io/token?scope=repository%3Aluxfi%2Flux-cuda-runner%3Apull&service=ghcr.io: 401 Unauthorized`
	cached := "123456789012.dkr.ecr.us-west-2.amazonaws.com/ghcr/luxfi/lux-cuda-runner:cuda12.9"
	missing := `failed to pull and unpack image "` + cached + `": failed to resolve reference "` + cached + `": ` + cached + `: not found`
	cases := map[string]struct {
		pod  *corev1.Pod
		want []string
	}{
		"a private GHCR package, backing off": {
			waiting("arc-runners", "lux-gpu-t4-runner-p1", private, "ImagePullBackOff", `Back-off pulling image "`+private+`": ErrImagePull: `+refused),
			[]string{"pod arc-runners/lux-gpu-t4-runner-p1 container runner (" + private + "): ImagePullBackOff: Back-off pulling image", "401 Unauthorized",
				"GitHub's container registry makes a new package private", "add ghcr.io to imageCache"}},
		"a tag the cache's upstream does not have": {
			waiting("arc-jobs-gpu-spot-container", "lux-gpu-t4-container-runner-c1-workflow", cached, "ErrImagePull", missing),
			[]string{"pod arc-jobs-gpu-spot-container/lux-gpu-t4-container-runner-c1-workflow container runner (" + cached + "): ErrImagePull:",
				"comes through the stack's image cache"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := doctorCluster()
			c.Objects = append(c.Objects, tc.pod)
			_, findings, out := examine(t, c)
			assert.Equal(t, []string{"A pool's pod cannot pull its image"}, problem(findings), out)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
		})
	}

	// A runner that pulled its image and runs, or waits for another reason, is not one.
	c := doctorCluster()
	c.Objects = append(c.Objects, waiting("arc-runners", "lux-gpu-t4-runner-ok", private, "ContainerCreating", ""))
	_, findings, out := examine(t, c)
	assert.Empty(t, problem(findings), out)
	assert.Contains(t, out, "no pool pod waits for an image")
}
