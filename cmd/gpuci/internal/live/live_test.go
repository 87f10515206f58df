package live_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/luxfi/lux-gpu-ci/cmd/gpuci/internal/live"
	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakecluster"
)

func TestGPUNodesAreThePoolsNodes(t *testing.T) {
	c := fakecluster.Healthy()
	c.Objects = append(c.Objects,
		fakecluster.Node("gpu-1", map[string]string{"karpenter.sh/nodepool": "gpu-spot"}, true, 1),
		fakecluster.Node("other-1", map[string]string{"karpenter.sh/nodepool": "someone-elses"}, true, 1),
	)
	kube, _ := c.Clients()
	nodes, err := live.GPUNodes(context.Background(), kube, []config.GPUPool{{Name: "gpu-spot"}, {Name: "gpu-l4"}})
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Equal(t, "gpu-1", nodes[0].Name)
}

func TestScaleSet(t *testing.T) {
	_, dyn := fakecluster.Healthy().Clients()
	rs, err := live.GetScaleSet(context.Background(), dyn, "lux-gpu-t4")
	require.NoError(t, err)
	assert.Equal(t, live.ScaleSet{Labels: []string{"self-hosted", "linux", "amd64", "cuda", "gpu", "t4"}}, rs)
	_, err = live.GetScaleSet(context.Background(), dyn, "missing")
	assert.Error(t, err)
}

func TestConditions(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Launched", "status": "False", "reason": "InsufficientCapacity", "message": "no spot"},
		map[string]any{"type": "Ready", "status": "False", "reason": "NotLaunched"},
	}}}}
	status, reason := live.Condition(u, "Ready")
	assert.Equal(t, []string{"False", "NotLaunched"}, []string{status, reason})
	assert.Equal(t, "Launched=False InsufficientCapacity no spot; Ready=False NotLaunched", live.Conditions(u))
	status, reason = live.Condition(&unstructured.Unstructured{Object: map[string]any{}}, "Ready")
	assert.Equal(t, []string{"", "no status yet"}, []string{status, reason})
	assert.Equal(t, "no conditions", live.Conditions(&unstructured.Unstructured{Object: map[string]any{}}))
}

// The cluster's evidence of a spot interruption: Karpenter's event on the node, and where
// the runner's pod (or a container-form runner's job pod, <runner>-workflow) ran, from the
// scheduler's Scheduled events. Only events: a pod's spec is never read (a container-form job
// pod carries its job's container.env), so what ARC and the hooks deleted and what still runs
// are known alike.
func TestInterruptions(t *testing.T) {
	at := func(hh, mm int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 3, hh, mm, 0, 0, time.UTC)) }
	// Runners in the runners' namespace, a container-form pool's job pods in its own.
	const jobs = "arc-jobs-gpu-spot-container"
	scheduledIn := func(ns, pod, node string, when metav1.Time) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod + ".s"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod},
			Reason: "Scheduled", Message: "Successfully assigned " + ns + "/" + pod + " to " + node, LastTimestamp: when,
			Source: corev1.EventSource{Component: "default-scheduler"}}
	}
	scheduled := func(pod, node string, when metav1.Time) *corev1.Event {
		ns := "arc-runners"
		if strings.HasSuffix(pod, "-workflow") {
			ns = jobs
		}
		return scheduledIn(ns, pod, node, when)
	}
	// ARC names runners <scale set>-<5>-runner-<5>: a 45-character scale set makes a runner
	// name too long for the hooks' job pod name, which they cut to fit.
	long := strings.Repeat("s", 45) + "-abcde-runnerfghij"
	kube := fake.NewClientset(
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ip-10-0-3-7.1"}, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-3-7"},
			Reason: "SpotInterrupted", Message: "Spot interruption warning was triggered", LastTimestamp: at(11, 58), Source: corev1.EventSource{Component: "karpenter"}},
		// The same reason on another node, written by someone other than Karpenter: not evidence.
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ip-10-0-3-8.forged"}, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-3-8"},
			Reason: "SpotInterrupted", Message: "Spot interruption warning was triggered", LastTimestamp: at(11, 59), Source: corev1.EventSource{Component: "gpuci-job"}},
		// A Scheduled event the scheduler did not write, placing a runner on the interrupted node.
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "arc-runners", Name: "forged.s"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "arc-runners", Name: "lux-gpu-t4-x-runner-h"},
			Reason: "Scheduled", Message: "Successfully assigned arc-runners/lux-gpu-t4-x-runner-h to ip-10-0-3-7", LastTimestamp: at(11, 30), ReportingController: "mallory"},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "ip-10-0-3-8"}, Reason: "NodeReady"},
		// A container-form runner on a system node, its job pod on the interrupted GPU node.
		scheduled("lux-gpu-t4-container-x-runner-a", "ip-10-0-1-1", at(11, 20)),
		scheduled("lux-gpu-t4-container-x-runner-a-workflow", "ip-10-0-3-7", at(11, 21)),
		scheduled("lux-gpu-t4-x-runner-b", "ip-10-0-3-8", at(11, 10)),
		scheduled("lux-gpu-t4-x-runner-c", "ip-10-0-3-7", at(11, 50)),
		scheduled(long[:54]+"-workflow", "ip-10-0-3-7", at(11, 40)),
		// Later pods on a node of the same name (private IPs are reused): not interrupted.
		scheduled("lux-gpu-t4-x-runner-d", "ip-10-0-3-7", at(12, 5)),
		// Created at 11:30, Pending until it was bound at 12:10, after the interruption.
		scheduled("lux-gpu-t4-x-runner-e", "ip-10-0-3-7", at(12, 10)),
		// A pod's spec would say where it runs, but it is not read: without its event, the
		// cluster cannot vouch for it.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "arc-runners", Name: "lux-gpu-t4-x-runner-f"}, Spec: corev1.PodSpec{NodeName: "ip-10-0-3-7"}},
		// A pod of another namespace, where the pools' pods do not run: not ours.
		scheduledIn("team-x", "lux-gpu-t4-x-runner-g", "ip-10-0-3-7", at(11, 45)),
	)
	in, err := live.ReadInterruptions(context.Background(), kube, []string{"arc-runners", jobs})
	require.NoError(t, err)
	require.Len(t, in.Events, 1)
	// The jobs ran from 11:00 to 12:30, GitHub says: the 11:58 interruption is theirs.
	jobStart, jobEnd := at(11, 0).Time, at(12, 30).Time
	assert.Equal(t, []string{"lux-gpu-t4-container-x-runner-a-workflow", "lux-gpu-t4-x-runner-c", long[:54] + "-workflow"}, in.Events[0].Pods,
		"the pods placed on the node before its interruption, from their events")

	evidence, known, cause := in.Runner("lux-gpu-t4-container-x-runner-a", jobStart, jobEnd)
	assert.True(t, known)
	assert.Equal(t, live.SpotInterrupted, cause, "its job pod's node was interrupted")
	assert.Equal(t, "cluster: pod lux-gpu-t4-container-x-runner-a-workflow was on node ip-10-0-3-7, spot-interrupted at 2026-12-03T11:58:00Z (Spot interruption warning was triggered)", evidence)

	evidence, known, cause = in.Runner("lux-gpu-t4-x-runner-b", jobStart, jobEnd)
	assert.True(t, known)
	assert.Empty(t, cause)
	assert.Equal(t, "cluster: pod lux-gpu-t4-x-runner-b ran on node ip-10-0-3-8, which had no spot interruption and no broken GPU while the job ran", evidence)

	_, known, cause = in.Runner("lux-gpu-t4-x-runner-c", jobStart, jobEnd)
	assert.True(t, known && cause == live.SpotInterrupted, "its Scheduled event places it on the interrupted node")
	_, known, cause = in.Runner(long, jobStart, jobEnd)
	assert.True(t, known && cause == live.SpotInterrupted, "the hooks' cut job pod name is found")
	_, known, cause = in.Runner("lux-gpu-t4-x-runner-d", jobStart, jobEnd)
	assert.True(t, known)
	assert.Empty(t, cause, "placed after the interruption")
	_, known, cause = in.Runner("lux-gpu-t4-x-runner-e", jobStart, jobEnd)
	assert.True(t, known)
	assert.Empty(t, cause, "created before the interruption, but bound to the node after it (it sat Pending)")

	// Evidence is bounded by the job: an interruption after the job ended (or before it
	// started) did not end it.
	_, known, cause = in.Runner("lux-gpu-t4-x-runner-c", at(11, 0).Time, at(11, 57).Time)
	assert.True(t, known)
	assert.Empty(t, cause, "the job had ended at 11:57, before the 11:58 interruption")
	_, _, cause = in.Runner("lux-gpu-t4-x-runner-c", at(11, 59).Time, at(12, 30).Time)
	assert.Empty(t, cause, "a job that started at 11:59, after the interruption")
	_, _, cause = in.Runner("lux-gpu-t4-x-runner-c", time.Time{}, time.Time{})
	assert.Equal(t, live.SpotInterrupted, cause, "no times from GitHub: unbounded")

	evidence, known, _ = in.Runner("lux-gpu-t4-x-runner-gone", jobStart, jobEnd)
	assert.False(t, known, "its events gone: the cluster cannot tell")
	assert.Contains(t, evidence, "no event left of pod lux-gpu-t4-x-runner-gone")
	_, known, _ = in.Runner("lux-gpu-t4-x-runner-f", jobStart, jobEnd)
	assert.False(t, known, "a pod is never read, only events")
}
