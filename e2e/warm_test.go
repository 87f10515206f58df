//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// warmZone is the warm windows' time zone in the e2e: not UTC (the machine's), so a window
// that opens on time proves the CronJob controller read the schedule in the window's zone.
const warmZone = "Asia/Kolkata"

// warmWindowConfigured gives both of dev's pools a warm window that opens at the next minute
// in warmZone and stays open warmWindowLength: the container-form pool as many nodes as its
// gpuLimit (so a job's pod can only start on a warm node, and a displaced placeholder can only
// wait), the runner-form pool one fewer (so a displaced placeholder gets a node of its own),
// and the container-form pool the CUDA image its jobs run and an image without a shell
// (shelllessImage). It returns the window's life, which
// the scenario runs in the background: the job pods are built now, from the templates the
// stack deployed, while nothing else changes them.
//
// EC2 has no spot capacity for the container-form pool's types from then on, until its warm
// node is up: Karpenter falls back to on-demand (the pool allows both), and gpuci doctor names
// the refused launch from Karpenter's events.
func warmWindowConfigured(t *testing.T, ctx context.Context, h *harness, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, gpuci, kubeconfig string) (window func(t tb)) {
	loc, err := time.LoadLocation(warmZone)
	require.NoError(t, err)
	// The up takes some 7 s: the window opens at the first minute after it (a window does not
	// cross midnight: one that would opens at midnight), and once Karpenter may try spot again
	// in a zone: the e2e's spot interruptions took the type out of its launches for three
	// minutes, zone by zone, and the refused spot launch below must be asked for.
	from := time.Now().Add(20 * time.Second)
	if free := k.spotOfferingFreeAt(); free.After(from) {
		t.Logf("the window waits for Karpenter's memory of the spot interruptions: until %s", free.Format(time.TimeOnly))
		from = free
	}
	opens := from.In(loc).Truncate(time.Minute).Add(time.Minute)
	if closes := opens.Add(warmWindowLength); closes.Day() != opens.Day() {
		opens = time.Date(closes.Year(), closes.Month(), closes.Day(), 0, 0, 0, 0, loc)
	}
	closes := opens.Add(warmWindowLength)
	nodes, limits := map[string]int{}, map[string]int{}
	h.editStackFile(t, func(cfg map[string]any) {
		pools, _ := cfg[config.Project+":"+config.KeyGPUPools].([]any)
		for _, p := range pools {
			pool := p.(map[string]any)
			name := pool["name"].(string)
			limit := 1
			if l, ok := pool["gpuLimit"].(int); ok {
				limit = l
			}
			// The stack file's jobForm is a plain string (config.JobForm is typed: compared
			// as any, the two would never be equal).
			container := pool["jobForm"] == string(config.JobFormContainer)
			n := limit
			if !container {
				n = limit - 1
			}
			// The window's from is a minute after opens, and its lead that minute: the real
			// CronJob controller starts the placeholders at opens, from the lead's schedule.
			warm := map[string]any{"timeZone": warmZone, "lead": "1m", "windows": []any{map[string]any{
				"days": strings.ToLower(opens.Weekday().String()[:3]), "from": opens.Add(warmLead).Format("15:04"), "to": closes.Format("15:04"), "nodes": n,
			}}}
			if container {
				warm["images"] = []any{cudaImage, shelllessImage}
			}
			pool["warm"] = warm
			nodes[name], limits[name] = n, limit
		}
	})
	require.Equal(t, map[string]int{"gpu-spot": 2, "gpu-spot-container": 1}, limits, "dev's pools, gpu-spot at the gpuLimit an earlier phase raised")
	require.Equal(t, map[string]int{"gpu-spot": 1, "gpu-spot-container": 1}, nodes, "the runner-form pool a GPU to spare, the container pool none")
	res, err := h.up(t, ctx)
	require.NoError(t, err)
	t.Logf("up: %v; the window opens at %s (%s) for %s", *res.Summary.ResourceChanges, opens.Format("15:04"), warmZone, warmWindowLength)
	require.True(t, time.Now().Before(opens), "the up ended before the window opens (else its CronJob waits a day)")

	runner := runnerPod(t, ctx, kube, "lux-gpu-t4", "lux-gpu-t4-warm-runner-a")
	job := containerJobPod(t, ctx, core, kube, "lux-gpu-t4-container", "lux-gpu-t4-container-warm-runner-b")

	// No spot capacity of the container-form pool's types, in any of the stack's zones.
	np, err := kube.Resource(nodePools).Get(ctx, "gpu-spot-container", metav1.GetOptions{})
	require.NoError(t, err)
	var nodePool karpv1.NodePool
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(np.Object, &nodePool))
	var refused []capacityPool
	sawCapacity := false
	for _, r := range nodePool.Spec.Template.Spec.Requirements {
		switch r.Key {
		case karpv1.CapacityTypeLabelKey:
			sawCapacity = true
			require.ElementsMatch(t, []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}, r.Values, "dev's pools fall back to on-demand")
		case corev1.LabelInstanceTypeStable:
			for _, it := range r.Values {
				for _, z := range k.zones {
					refused = append(refused, capacityPool{CapacityType: karpv1.CapacityTypeSpot, InstanceType: it, Zone: z})
				}
			}
		}
	}
	require.True(t, sawCapacity, "the pool names its capacity types")
	require.NotEmpty(t, refused)
	k.shortage(t, refused)
	return func(t tb) {
		defer k.shortage(t, nil)
		warmWindow(t, ctx, core, kube, k, nodes, limits, runner, job, opens, closes, func() {
			// The shortage's mark: the container pool's warm node is on-demand (so may gpu-spot's
			// be, which shares its type).
			claims := poolClaims(t, ctx, kube, "gpu-spot-container")
			require.NotEmpty(t, claims)
			for _, c := range claims {
				assert.Equal(t, karpv1.CapacityTypeOnDemand, c.Labels[karpv1.CapacityTypeLabelKey], "gpu-spot-container's warm node %s, spot refused", c.Name)
			}
			f := gpuciDoctor(t, ctx, gpuci, kubeconfig, "Spot capacity")
			assert.True(t, f.Problem, "gpuci doctor names the refused spot launch")
			// Karpenter remembers an offering EC2 refused (its unavailable-offerings cache), so
			// only the first NodeClaim of the shared type meets the refusal: either pool's.
			assert.True(t, slices.ContainsFunc(f.Evidence, func(e string) bool {
				return strings.Contains(e, "NodeClaim gpu-spot") && strings.Contains(e, "InsufficientInstanceCapacity")
			}),
				"from Karpenter's event on a warm NodeClaim of the refused type: %v", f.Evidence)
			// and flags the window's on-demand node, which stays on-demand all window.
			assert.True(t, slices.ContainsFunc(f.Evidence, func(e string) bool {
				return strings.HasPrefix(e, "warm node ") && strings.Contains(e, " of pool gpu-spot-container is on-demand")
			}), "gpuci doctor flags the container pool's on-demand warm node: %v", f.Evidence)
			k.refusals(t, ctx, core)
			k.shortage(t, nil)
		})
	}
}

// warmWindowLength is how long the e2e's placeholders stay, their lead (warmLead) included:
// the jobs below take well under it.
const warmWindowLength, warmLead = 2 * time.Minute, time.Minute

// cudaImage is the CUDA image the smoke workflow's container job runs.
const cudaImage = "nvidia/cuda:12.8.1-devel-ubuntu24.04"

// shelllessImage is a job image with no sh (FROM scratch): its pull cannot start its
// container, which must cost the placeholder nothing (the kubelet stand-in's imagesWithoutShell).
const shelllessImage = "hello-world:linux"

// warmWindow is a warm window's life through the real CronJob, Job and scheduler controllers
// and the real Karpenter: at the window's start each pool's placeholders hold as many nodes
// as Karpenter launches for them (the container pool's despite a pull that cannot start); a
// runner-form runner pod and a container-form job pod each preempt a placeholder and are bound
// to its node at once. Where the window's nodes are the pool's gpuLimit, the displaced
// placeholder waits, with no new NodeClaim, and is back on that node when the job ends; where
// the pool has a GPU to spare, Karpenter gives it exactly one new NodeClaim, and it stays
// there. At the window's end the placeholders go and Karpenter consolidates every node.
// opened runs once every warm node is up.
func warmWindow(t tb, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, nodes, limits map[string]int, runner, job *corev1.Pod, opens, closes time.Time, opened func()) {
	defer func() {
		if t.Failed() {
			dumpScheduling(t, ctx, core)
			for pool := range nodes {
				for _, c := range poolClaims(t, ctx, kube, pool) {
					t.Logf("NodeClaim %s (%s): node %q, capacity %v", c.Name, pool, c.Status.NodeName, c.Status.Capacity)
				}
			}
			t.Logf("karpenter on the warm pools:\n%s", k.logLines("gpu-spot"))
		}
	}()
	placeholders := func(pool string) []corev1.Pod {
		list, err := core.CoreV1().Pods(wellknown.WarmNamespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.WarmPoolLabel + "=" + pool})
		require.NoError(t, err)
		return list.Items
	}
	running := func(pool string) map[string]string { // node → placeholder
		out := map[string]string{}
		for _, p := range placeholders(pool) {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out[p.Spec.NodeName] = p.Name
			}
		}
		return out
	}
	claims := func(pool string) []string {
		var out []string
		for _, c := range poolClaims(t, ctx, kube, pool) {
			out = append(out, c.Name)
		}
		slices.Sort(out)
		return out
	}

	// The window opens: each pool's placeholders hold a node each, which Karpenter launched.
	warm := map[string][]string{} // pool → its warm NodeClaims
	for pool, n := range nodes {
		require.Eventually(t, func() bool { return len(running(pool)) == n }, time.Until(opens)+90*time.Second, time.Second,
			"%s: %d placeholders run on nodes of their own once the window opens", pool, n)
		warm[pool] = claims(pool)
		require.Len(t, warm[pool], n, "%s: one NodeClaim per warm node", pool)
	}
	jobs, err := core.BatchV1().Jobs(wellknown.WarmNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, jobs.Items, len(nodes), "a window's Job per pool")
	for _, j := range jobs.Items {
		require.NotNil(t, j.Status.StartTime)
		started := j.Status.StartTime.Time
		assert.WithinDuration(t, opens, started, 20*time.Second, "%s opened at %s %s, by the CronJob controller", j.Name, opens.Format("15:04"), warmZone)
	}
	t.Logf("window open at %s: %v warm", time.Now().Format("15:04:05"), warm)
	// The container pool's placeholder pulled an image it cannot start (no sh): that pull
	// ended with StartError, and the placeholder holds its node all the same; the Job counts
	// no failure.
	var shellless []corev1.ContainerStatus
	for _, p := range placeholders("gpu-spot-container") {
		if p.Status.Phase == corev1.PodRunning {
			for _, c := range p.Status.ContainerStatuses {
				if strings.Contains(c.Image, "hello-world") {
					shellless = append(shellless, c)
				}
			}
		}
	}
	require.Len(t, shellless, 1, "the running placeholder's pull of %s", shelllessImage)
	require.NotNil(t, shellless[0].State.Terminated, "%s's pull has ended", shelllessImage)
	assert.Equal(t, "StartError", shellless[0].State.Terminated.Reason)
	for _, j := range mustJobs(t, ctx, core) {
		assert.Zero(t, j.Status.Failed, "%s: no placeholder counted failed", j.Name)
	}
	opened()

	// A job takes a warm node: its pod preempts the placeholder there and is bound at once.
	takes := func(pool string, pod *corev1.Pod) string {
		// ARC's upgrade may be reinstalling the scale set as the job arrives: the runner's
		// account is back with it, and ARC makes the runner then (the ServiceAccount admission
		// refuses a pod whose account is missing).
		var created *corev1.Pod
		require.Eventually(t, func() bool {
			var err error
			created, err = core.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil && !(apierrors.IsForbidden(err) && strings.Contains(err.Error(), "serviceaccount")) {
				require.NoError(t, err)
			}
			return err == nil
		}, time.Minute, 500*time.Millisecond, "%s's job pod %s is admitted once its scale set's account exists", pool, pod.Name)
		start := time.Now()
		var bound *corev1.Pod
		require.Eventually(t, func() bool {
			bound, err = core.CoreV1().Pods(pod.Namespace).Get(ctx, created.Name, metav1.GetOptions{})
			return err == nil && bound.Spec.NodeName != "" && bound.Status.Phase == corev1.PodRunning
		}, 10*time.Second, 100*time.Millisecond, "%s's job pod %s runs on a warm node within seconds (README, \"How soon a job starts\")", pool, pod.Name)
		t.Logf("%s: job pod %s bound and running %s after it was created, on warm node %s", pool, pod.Name, time.Since(start).Round(100*time.Millisecond), bound.Spec.NodeName)
		nodeClaims := poolClaims(t, ctx, kube, pool)
		onWarm := slices.ContainsFunc(nodeClaims, func(c karpv1.NodeClaim) bool {
			return c.Status.NodeName == bound.Spec.NodeName && slices.Contains(warm[pool], c.Name)
		})
		assert.True(t, onWarm, "%s: the job's pod is on one of the window's nodes", pool)
		_, placeholder := running(pool)[bound.Spec.NodeName]
		assert.False(t, placeholder, "%s: the placeholder on %s made way", pool, bound.Spec.NodeName)
		// The control plane is at 1.36 now: the API server annotated the pod with its node's
		// capacity type as it bound it (k8s.LaunchedCapacityPolicy), which a runner-form job's
		// summary reads.
		n, err := core.CoreV1().Nodes().Get(ctx, bound.Spec.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, n.Labels[karpv1.CapacityTypeLabelKey])
		assert.Equal(t, n.Labels[karpv1.CapacityTypeLabelKey], bound.Annotations[wellknown.LaunchedCapacityAnnotation],
			"%s: the API server told the job pod its node's capacity type", pool)
		t.Logf("%s: the job pod's annotation: %s=%s", pool, wellknown.LaunchedCapacityAnnotation, bound.Annotations[wellknown.LaunchedCapacityAnnotation])
		// The Job replaces the placeholder once it has ended: at once when it exited 0 (its
		// hold traps SIGTERM, and every pull had exited 0); after the Job controller's backoff
		// when a pull could not start, since the pod then ends Failed (the failure policy keeps
		// that from counting against backoffLimit, not from the backoff). At the gpuLimit the
		// replacement waits: no NodeClaim for it, none for the job.
		replacedAfter := func() time.Duration {
			var newest time.Time
			for _, p := range placeholders(pool) {
				if p.DeletionTimestamp == nil && p.CreationTimestamp.After(newest) {
					newest = p.CreationTimestamp.Time
				}
			}
			return newest.Sub(created.CreationTimestamp.Time)
		}
		pending := func() int {
			n := 0
			for _, p := range placeholders(pool) {
				if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
					n++
				}
			}
			return n
		}
		if limits[pool] == nodes[pool] {
			require.Eventually(t, func() bool { return pending() == 1 }, 30*time.Second, 250*time.Millisecond, "%s: the Job replaced the placeholder", pool)
			t.Logf("%s: the Job's replacement placeholder created %s after the job's pod (API server times, to the second)", pool, replacedAfter())
			time.Sleep(8 * time.Second) // Karpenter's batch window (1–10 s) and a provisioning pass
			assert.Equal(t, warm[pool], claims(pool), "%s: no new NodeClaim, for the job or the displaced placeholder", pool)
			assert.Equal(t, 1, pending(), "%s: the replacement waits for a node", pool)
			return bound.Spec.NodeName
		}
		// A GPU to spare: Karpenter launches one node for the displaced placeholder, none for
		// the job's pod (it was nominated to the warm node: IsProvisionable), and the
		// replacement runs there.
		var fresh []string
		require.Eventually(t, func() bool {
			fresh = slices.DeleteFunc(claims(pool), func(c string) bool { return slices.Contains(warm[pool], c) })
			return len(fresh) == 1 && pending() == 0 && len(running(pool)) == nodes[pool]
		}, 60*time.Second, 250*time.Millisecond, "%s: the displaced placeholder runs on a node of its own, the pool's spare GPU", pool)
		time.Sleep(8 * time.Second) // Karpenter's batch window (1–10 s) and a provisioning pass
		assert.Len(t, slices.DeleteFunc(claims(pool), func(c string) bool { return slices.Contains(warm[pool], c) }), 1,
			"%s: exactly one new NodeClaim, the displaced placeholder's", pool)
		t.Logf("%s: the Job's replacement placeholder created %s after the job's pod (API server times, to the second); its new NodeClaim: %s", pool, replacedAfter(), fresh[0])
		// This pool's placeholder pulls nothing beside its hold, so it ended Succeeded (its
		// shell's trap) and the Job replaced it at once, before any backoff (10 s).
		assert.LessOrEqual(t, replacedAfter(), 5*time.Second, "%s: a placeholder that exited 0 is replaced at once", pool)
		warm[pool] = append(warm[pool], fresh...)
		slices.Sort(warm[pool])
		return bound.Spec.NodeName
	}
	back := func(pool, node string, pod *corev1.Pod) {
		held := running(pool)
		require.NoError(t, core.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}), "the job ends")
		if limits[pool] == nodes[pool] {
			require.Eventually(t, func() bool { _, ok := running(pool)[node]; return ok }, 45*time.Second, 250*time.Millisecond,
				"%s: once the job ends, a placeholder holds %s again", pool, node)
			assert.Equal(t, warm[pool], claims(pool), "%s: on the same node", pool)
			return
		}
		// The displaced placeholder stays on its new node; the job's node is empty now, for
		// Karpenter to consolidate (checked at the window's end with the rest).
		require.Eventually(t, func() bool {
			_, err := core.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 250*time.Millisecond, "%s: the job's pod is gone", pool)
		assert.Equal(t, held, running(pool), "%s: the placeholders stay where they are, none back on the job's node", pool)
	}

	node := takes("gpu-spot", runner)
	back("gpu-spot", node, runner)
	node = takes("gpu-spot-container", job)
	back("gpu-spot-container", node, job)

	// The window closes: the Jobs' deadline takes the placeholders, and Karpenter consolidates.
	for pool := range nodes {
		require.Eventually(t, func() bool { return len(placeholders(pool)) == 0 }, time.Until(closes)+60*time.Second, time.Second,
			"%s: the placeholders go at the window's end", pool)
	}
	// One Job per pool opened the window; each ends Failed by its deadline. The job controller writes
	// FailureTarget first and Failed once its pods are gone, so the Failed condition is waited for.
	var warmJobs []batchv1.Job
	ended := func() bool {
		warmJobs = mustJobs(t, ctx, core)
		for _, j := range warmJobs {
			if !jobFailedBy(j, "DeadlineExceeded") {
				return false
			}
		}
		return len(warmJobs) == len(nodes)
	}
	ok := assert.Eventually(t, ended, 30*time.Second, time.Second, "one Job per pool, each ended by its deadline (the window's end)")
	require.True(t, ok, "the warm Jobs: %v", jobConditions(warmJobs))
	for pool := range nodes {
		require.Eventually(t, func() bool { return len(claims(pool)) == 0 }, 90*time.Second, time.Second,
			"%s: no NodeClaim is left once the window has closed", pool)
	}
	t.Logf("window closed at %s: every warm node consolidated", time.Now().Format("15:04:05"))
}

func mustJobs(t tb, ctx context.Context, core kubernetes.Interface) []batchv1.Job {
	jobs, err := core.BatchV1().Jobs(wellknown.WarmNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	return jobs.Items
}

func jobConditions(jobs []batchv1.Job) map[string][]batchv1.JobCondition {
	out := map[string][]batchv1.JobCondition{}
	for _, j := range jobs {
		out[j.Name] = j.Status.Conditions
	}
	return out
}

func jobFailedBy(j batchv1.Job, reason string) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

// shortage makes the fake EC2 refuse capacity of the given pools from now on (nil ends it).
func (k *karpenter) shortage(t tb, pools []capacityPool) {
	b, err := json.Marshal(pools)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, "http://"+k.control+"/shortage", bytes.NewReader(b))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(pools) == 0 && k.short {
		k.shortageLifted = time.Now()
	}
	k.short = len(pools) > 0
}

// capacityPool is upstream's fake.CapacityPool as the control endpoint takes it.
type capacityPool struct {
	CapacityType, InstanceType, Zone string
}
