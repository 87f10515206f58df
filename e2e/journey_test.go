//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeeks"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// startSystemNodes starts the nodes the managed node group runs, as EKS does once it is
// created: its desired size, round-robin over its subnets' zones, with its labels.
func startSystemNodes(t *testing.T, ctx context.Context, core kubernetes.Interface, resources []apitype.ResourceV3) []string {
	zoneOf := map[string]string{}
	for _, r := range resources {
		if r.Type == "aws:ec2/subnet:Subnet" {
			zoneOf[r.ID.String()] = fmt.Sprint(r.Outputs["availabilityZone"])
		}
	}
	group := findResource(t, resources, "aws:eks/nodeGroup:NodeGroup", "")
	g, err := fakeeks.FromOutputs(resource.NewPropertyMapFromMap(group.Outputs), func(s string) string { return zoneOf[s] })
	require.NoError(t, err)
	require.Positive(t, g.DesiredSize, "the system node group runs nodes")
	names, err := fakeeks.Launch(ctx, core, g, g.DesiredSize)
	require.NoError(t, err)
	return names
}

// runnerPod is the pod ARC's EphemeralRunner controller creates for a job: the scale set's
// runner template, as the stack's release rendered it into the AutoscalingRunnerSet, with the
// scale set's name and namespace among its labels (resourcebuilder.go: newEphemeralRunnerSet's
// labels, lines 564-567, copied into each EphemeralRunner and its pod).
func runnerPod(t tb, ctx context.Context, kube dynamic.Interface, scaleSet, name string) *corev1.Pod {
	ars, err := kube.Resource(runnerSets).Namespace(wellknown.RunnersNamespace).Get(ctx, scaleSet, metav1.GetOptions{})
	require.NoError(t, err)
	tmpl, found, err := unstructured.NestedMap(ars.Object, "spec", "template")
	require.NoError(t, err)
	require.True(t, found, "the AutoscalingRunnerSet has a runner template")
	var pt corev1.PodTemplateSpec
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt))
	pod := &corev1.Pod{ObjectMeta: pt.ObjectMeta, Spec: pt.Spec}
	pod.Name, pod.Namespace = name, wellknown.RunnersNamespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[wellknown.ScaleSetLabel], pod.Labels[scaleSetNamespaceLabel] = scaleSet, wellknown.RunnersNamespace
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	return pod
}

// gpuJobJourney is a runner-form job's way through the real scheduler and the real Karpenter,
// on the pool gpu-spot (gpuLimit 1, one T4 per node): launched, placed, limited, kept while
// it works. It returns the journey's end, to run in the background: the busy node kept past
// consolidateAfter, then, the job done, consolidated.
func gpuJobJourney(t *testing.T, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface, k *karpenter, systemNodes []string) (end func(t tb)) {
	const pool, scaleSet = "gpu-spot", "lux-gpu-t4"
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	defer func() {
		if t.Failed() {
			dumpScheduling(t, ctx, core)
			t.Logf("karpenter on the jobs:\n%s", k.logLines(scaleSet+"-e2e-job-"))
		}
	}()
	np, err := kube.Resource(nodePools).Get(ctx, pool, metav1.GetOptions{})
	require.NoError(t, err)
	var nodePool karpv1.NodePool
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(np.Object, &nodePool))
	allowed := map[string][]string{}
	for _, r := range nodePool.Spec.Template.Spec.Requirements {
		allowed[r.Key] = r.Values
	}
	require.NotEmpty(t, allowed[corev1.LabelInstanceTypeStable])

	var claim karpv1.NodeClaim
	var node, instance string
	start := time.Now()
	step(t, "a queued job makes Karpenter launch one node of the pool's types and capacity, in a recorded zone", func(t *testing.T) {
		_, err := pods.Create(ctx, runnerPod(t, ctx, kube, scaleSet, scaleSet+"-e2e-job-1"), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			claims := poolClaims(t, ctx, kube, pool)
			if len(claims) == 1 && claims[0].Status.ProviderID != "" {
				claim = claims[0]
				return true
			}
			return false
		}, time.Minute, 250*time.Millisecond, "one NodeClaim with an instance for %s", pool)
		t.Logf("NodeClaim %s: %s %s in %s, %s after the job was queued", claim.Name, claim.Labels[corev1.LabelInstanceTypeStable],
			claim.Labels[karpv1.CapacityTypeLabelKey], claim.Labels[corev1.LabelTopologyZone], time.Since(start).Round(time.Second))
		assert.Contains(t, allowed[corev1.LabelInstanceTypeStable], claim.Labels[corev1.LabelInstanceTypeStable])
		assert.Contains(t, allowed[karpv1.CapacityTypeLabelKey], claim.Labels[karpv1.CapacityTypeLabelKey])
		assert.Contains(t, k.zones, claim.Labels[corev1.LabelTopologyZone], "a zone of the stack's availabilityZones output")
		acct, err := k.account()
		require.NoError(t, err)
		require.Len(t, acct.Instances, 1, "exactly one instance in the account")
		in := acct.Instances[0]
		assert.True(t, strings.HasSuffix(claim.Status.ProviderID, "/"+in.ID), "the NodeClaim is that instance")
		assert.Contains(t, k.nodeSubnets, in.Subnet, "in a subnet the stack tagged for nodes, of all the account's")
		assert.Equal(t, []string{claim.Labels[corev1.LabelInstanceTypeStable], claim.Labels[karpv1.CapacityTypeLabelKey], claim.Labels[corev1.LabelTopologyZone]},
			[]string{in.Type, in.CapacityType, in.Zone})
		node, instance = nodeNameFor(&claim), in.ID
	})

	step(t, "upstream Karpenter, as the e2e runs it (on a metrics port of the e2e's own), counts the NodeClaim it created for the pool", func(t *testing.T) {
		var body string
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + k.metrics + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return regexp.MustCompile(`(?m)^karpenter_nodeclaims_created_total\{[^}]*nodepool="` + pool + `"[^}]*\} 1$`).MatchString(body)
		}, 30*time.Second, 250*time.Millisecond, "karpenter_nodeclaims_created_total for %s:\n%s", pool, metricLines(body, "karpenter_nodeclaims_created_total"))
	})

	step(t, "the device plugin lands on the GPU node and on no system node", func(t *testing.T) {
		require.Eventually(t, func() bool {
			return len(podsOn(t, ctx, core, wellknown.DevicePluginNamespace, node, corev1.PodRunning)) == 1
		}, time.Minute, 250*time.Millisecond, "a device plugin pod runs on %s", node)
		for _, n := range systemNodes {
			assert.Empty(t, podsOn(t, ctx, core, wellknown.DevicePluginNamespace, n, ""), "no device plugin pod on system node %s", n)
		}
	})

	step(t, "the job's pod is scheduled there by the scheduler and holds the GPU", func(t *testing.T) {
		require.Eventually(t, func() bool {
			p, err := pods.Get(ctx, scaleSet+"-e2e-job-1", metav1.GetOptions{})
			return err == nil && p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning
		}, time.Minute, 250*time.Millisecond, "the runner pod runs on %s", node)
		n, err := core.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		gpus := n.Status.Allocatable[wellknown.GPUResource]
		assert.Equal(t, int64(1), gpus.Value(), "the node offers one GPU")
		assert.NotContains(t, n.Spec.Taints, karpv1.UnregisteredNoExecuteTaint, "Karpenter registered the node")
		// The API server copied the node's zone onto the bound pod (PodTopologyLabels), where
		// the job hooks read it (GPUCI_ZONE, from the downward API).
		p, err := pods.Get(ctx, scaleSet+"-e2e-job-1", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, n.Labels[corev1.LabelTopologyZone], p.Labels[corev1.LabelTopologyZone], "the runner pod knows its node's zone")
		assert.NotEmpty(t, p.Labels[corev1.LabelTopologyZone])
		// Its capacity type is not (the stack is at 1.35, whose API server serves no
		// MutatingAdmissionPolicy; the warm window's, after the 1.36 upgrade, is).
		assert.NotContains(t, p.Annotations, wellknown.LaunchedCapacityAnnotation, "1.35: no launched-capacity policy declared")
		t.Logf("queued → running: %s", time.Since(start).Round(time.Second))
	})

	step(t, "with gpuLimit reached, a second job waits and no second node is launched", func(t *testing.T) {
		_, err := pods.Create(ctx, runnerPod(t, ctx, kube, scaleSet, scaleSet+"-e2e-job-2"), metav1.CreateOptions{})
		require.NoError(t, err)
		// Karpenter says why it launches nothing: the pool's limit.
		require.Eventually(t, func() bool {
			events, err := core.CoreV1().Events(wellknown.RunnersNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + scaleSet + "-e2e-job-2"})
			if err != nil {
				return false
			}
			for _, e := range events.Items {
				if strings.Contains(e.Message, "limits") && strings.Contains(e.Message, pool) {
					return true
				}
			}
			return false
		}, time.Minute, 500*time.Millisecond, "Karpenter names %s's limit for the second job", pool)
		assert.Len(t, poolClaims(t, ctx, kube, pool), 1, "still one NodeClaim")
		acct, err := k.account()
		require.NoError(t, err)
		assert.Len(t, acct.Instances, 1, "still one instance")
		p, err := pods.Get(ctx, scaleSet+"-e2e-job-2", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, p.Spec.NodeName, "the second job waits")
		require.NoError(t, pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	})

	return func(t tb) {
		// Karpenter marks the node consolidatable once consolidateAfter has passed since its
		// last pod change, and its disruption loop weighs candidates every 10 s
		// (disruption/controller.go pollingPeriod, v1.14.1). The node is kept: under WhenEmpty
		// a node with a running pod of positive eviction cost is not empty (disruption/types.go
		// IsEmpty). WhenEmptyOrUnderutilized would keep it too here (one instance type, a spot
		// node, spot-to-spot replacement behind a feature gate that is off, and the runner's
		// karpenter.sh/do-not-disrupt), so this shows the node kept, not the policy: the
		// policy is held by stack/kubernetes_test.go (#53.1).
		require.Eventually(t, func() bool {
			c := poolClaims(t, ctx, kube, pool)
			return len(c) == 1 && c[0].StatusConditions().IsTrue(karpv1.ConditionTypeConsolidatable)
		}, time.Minute, 250*time.Millisecond, "Karpenter considers the node for consolidation")
		time.Sleep(11 * time.Second)
		p, err := pods.Get(ctx, scaleSet+"-e2e-job-1", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, p.DeletionTimestamp, "the running job was not evicted")
		c := poolClaims(t, ctx, kube, pool)
		require.Len(t, c, 1, "the node stays while its job runs")
		assert.Nil(t, c[0].DeletionTimestamp, "the node is not being disrupted")
		t.Logf("the busy node was kept past consolidateAfter and a disruption poll")

		// The job ends: the empty node goes (consolidateAfter, the next disruption poll,
		// Karpenter's 15 s emptiness validation, termination).
		require.NoError(t, pods.Delete(ctx, p.Name, metav1.DeleteOptions{}))
		done := time.Now()
		k.awaitGone(t, ctx, kube, pool, instance, 2*time.Minute, "the empty node is consolidated and its instance terminated")
		_, err = core.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		assert.True(t, err != nil, "the Node is gone")
		t.Logf("job done → instance terminated: %s (consolidateAfter %s)", time.Since(done).Round(time.Second), e2eConsolidateAfter)
	}
}

func poolClaims(t tb, ctx context.Context, kube dynamic.Interface, pool string) []karpv1.NodeClaim {
	list, err := kube.Resource(nodeClaims).List(ctx, metav1.ListOptions{LabelSelector: karpv1.NodePoolLabelKey + "=" + pool})
	require.NoError(t, err)
	var out []karpv1.NodeClaim
	for _, u := range list.Items {
		var nc karpv1.NodeClaim
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc))
		out = append(out, nc)
	}
	return out
}

// podsOn lists a namespace's pods bound to a node (in a phase, when given).
func podsOn(t tb, ctx context.Context, core kubernetes.Interface, namespace, node string, phase corev1.PodPhase) []string {
	list, err := core.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	require.NoError(t, err)
	var out []string
	for _, p := range list.Items {
		if phase == "" || p.Status.Phase == phase {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// dumpScheduling logs what decides where pods go — nodes (labels, taints, allocatable),
// DaemonSets, pods that are not running, recent events — when a journey step fails.
func dumpScheduling(t tb, ctx context.Context, core kubernetes.Interface) {
	if nodes, err := core.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			t.Logf("node %s labels=%v taints=%v allocatable=%v", n.Name, n.Labels, n.Spec.Taints, n.Status.Allocatable)
		}
	}
	if dss, err := core.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, d := range dss.Items {
			t.Logf("daemonset %s/%s desired=%d scheduled=%d affinity=%v tolerations=%v", d.Namespace, d.Name, d.Status.DesiredNumberScheduled,
				d.Status.CurrentNumberScheduled, d.Spec.Template.Spec.Affinity, d.Spec.Template.Spec.Tolerations)
		}
	}
	if pods, err := core.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s/%s node=%q phase=%s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
	if events, err := core.CoreV1().Events("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items[max(0, len(events.Items)-30):] {
			t.Logf("event %s %s/%s: %s %s", e.Source.Component, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// metricLines are the lines of a metrics page that name the metric.
func metricLines(page, metric string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, metric) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
