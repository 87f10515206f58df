//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// platformBumped moves the running stack's platform, as one pull request bumping versions/ and
// the stack file would: kubernetesVersion one minor up (1.35 → 1.36) and Karpenter's two
// charts to another version (copies of the pinned ones at 1.15.0: same templates, new
// version). One up, through the real pulumi-eks:
//   - EKS: the control plane, then the system node group to the version the control plane
//     reports (the one after the other), and the add-ons to EKS's default for the new
//     minor, all in place; the node group's update replaces the system nodes (EKS's rules,
//     run by the fake AWS), and what ran on them runs on the new ones;
//   - Karpenter: the karpenter-crd release, then the controller's, both upgraded in place;
//     every NodePool and EC2NodeClass kept (same UID, same spec generation), and a job that
//     runs on a GPU node through the up still runs there after it;
//   - the API server's launched-capacity policy and its binding created (1.36 serves their API:
//     k8s.LaunchedCapacityPolicy), after the control plane's update;
//   - nothing else: nothing else created, nothing deleted or replaced, no other Kubernetes
//     resource changed.
//
// It returns the system nodes after.
// Which AWS changes force a replacement is pulumi-aws's rule, not the fake's, which updates in
// place; what the program and pulumi-eks send is the real thing.
func platformBumped(t *testing.T, ctx context.Context, h *harness, core kubernetes.Interface, kube dynamic.Interface, work string, systemNodes []string) []string {
	type kept struct {
		uid        string
		generation int64
	}
	karpenterObjects := func() map[string]kept {
		out := map[string]kept{}
		for _, gvr := range []schema.GroupVersionResource{nodePools, ec2NodeClasses} {
			list, err := kube.Resource(gvr).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			for _, o := range list.Items {
				out[gvr.Resource+"/"+o.GetName()] = kept{string(o.GetUID()), o.GetGeneration()}
			}
		}
		return out
	}
	before := karpenterObjects()
	require.NotEmpty(t, before)

	// A job runs on a GPU node through the whole up: the runner-form twin's (the other pools'
	// nodes belong to the phases running in the background).
	const twin, twinSet = "gpu-spot-on-demand", "lux-gpu-t4-on-demand"
	pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
	job, err := pods.Create(ctx, runnerPod(t, ctx, kube, twinSet, twinSet+"-e2e-platform-job"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := pods.Get(ctx, job.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			job = p
			return true
		}
		return false
	}, time.Minute, 250*time.Millisecond, "the job runs on a node Karpenter launched for %s", twin)
	claims := poolClaims(t, ctx, kube, twin)
	require.Len(t, claims, 1, "one node for the job")
	claim := claims[0].Name

	charts := chartsAt(t, work, "1.15.0", versions.KarpenterCRDChart, versions.KarpenterChart)
	h.editStackFile(t, func(cfg map[string]any) {
		require.Equal(t, "1.35", cfg[config.Project+":"+config.KeyKubernetesVersion], "the dev stack's version")
		cfg[config.Project+":"+config.KeyKubernetesVersion] = "1.36"
		all := cfg[config.Project+":"+config.KeyHelmCharts].(map[string]any)
		for name, c := range charts {
			all[name] = c
		}
	})

	up, steps, err := h.upWithSteps(t, ctx)
	require.NoError(t, err)
	changes := *up.Summary.ResourceChanges
	t.Logf("up: %v", changes)
	assert.Zero(t, changes["delete"]+changes["replace"], "nothing deleted or replaced")
	assert.Equal(t, 2, changes["create"], "the launched-capacity policy and its binding, and nothing else, created")

	_, after := h.state(t, ctx)
	crdRelease := releaseURN(t, after, wellknown.KarpenterCRDRelease)
	controllerRelease := releaseURN(t, after, wellknown.KarpenterRelease)
	var changed []string
	span := map[string]stepSpan{}
	var created []stepSpan
	for _, s := range changedSteps(steps) {
		if s.op == "create" {
			created = append(created, s)
			continue
		}
		span[s.urn] = s
		changed = append(changed, s.resource())
		if s.urn != crdRelease && s.urn != controllerRelease {
			assert.True(t, strings.HasPrefix(s.resource(), "aws:") || strings.HasPrefix(s.resource(), "eks:"), "%s changed: besides Karpenter's releases, only the AWS layer does", s.resource())
		}
	}
	t.Logf("changed: %v", changed)
	require.Len(t, changed, changes["update"], "every update step seen")
	for _, want := range []string{"aws:eks/cluster:Cluster::cluster-eksCluster", "aws:eks/nodeGroup:NodeGroup::cluster-system"} {
		assert.Contains(t, changed, want)
	}
	cluster, nodeGroup := stepNamed(t, steps, "aws:eks/cluster:Cluster"), stepNamed(t, steps, "aws:eks/nodeGroup:NodeGroup")
	// The fake EKS refuses a node group newer than its control plane and a control plane
	// update while its nodes lag (fakeaws versionSkew, from EKS's user guide): the order is
	// EKS's rule here, not only the dependency's.
	assert.LessOrEqual(t, cluster.end, nodeGroup.begin, "the control plane first, then the system nodes")
	require.Len(t, created, 2)
	for _, c := range created {
		assert.Contains(t, []string{"kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy::gpu-ci-arc-launched-capacity",
			"kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding::gpu-ci-arc-launched-capacity"}, c.resource())
		// The e2e's API server serves 1.36 all along: this is the dependency graph's order,
		// not a proof that the policy needs the new control plane.
		assert.LessOrEqual(t, cluster.end, c.begin, "%s is created after the control plane's update (the dependency graph's order)", c.resource())
	}
	require.Contains(t, span, crdRelease, "the karpenter-crd release is upgraded")
	require.Contains(t, span, controllerRelease, "the karpenter release is upgraded")
	assert.LessOrEqual(t, span[crdRelease].end, span[controllerRelease].begin, "the CRDs' release before the controller's (the dependency graph's order, as the program declares it)")

	assert.Equal(t, "1.36", findResource(t, after, "aws:eks/cluster:Cluster", "").Inputs["version"], "the control plane")
	assert.Equal(t, "1.36", findResource(t, after, "aws:eks/nodeGroup:NodeGroup", "").Inputs["version"], "the system nodes follow it")
	for _, addon := range []string{"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"} {
		a := findResource(t, after, "aws:eks/addon:Addon", "cluster-"+addon)
		assert.Equal(t, fakeaws.DefaultAddonVersion(addon, "1.36"), a.Inputs["addonVersion"], "%s at EKS's default for the new minor", addon)
	}
	deploy, err := kube.Resource(deployments).Namespace(wellknown.KarpenterNamespace).Get(ctx, wellknown.KarpenterRelease, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1.15.0", deploy.GetLabels()["app.kubernetes.io/version"], "the controller is the new chart's")
	assert.Equal(t, before, karpenterObjects(), "every NodePool and EC2NodeClass kept, its spec untouched")

	running, err := pods.Get(ctx, job.Name, metav1.GetOptions{})
	require.NoError(t, err, "the running job survived the up")
	assert.Nil(t, running.DeletionTimestamp, "the job was not evicted")
	assert.Equal(t, corev1.PodRunning, running.Status.Phase)
	assert.Equal(t, job.Spec.NodeName, running.Spec.NodeName, "on the node it started on")
	nc, err := kube.Resource(nodeClaims).Get(ctx, claim, metav1.GetOptions{})
	require.NoError(t, err, "its GPU node survived the up")
	assert.Nil(t, nc.GetDeletionTimestamp(), "its GPU node is not being disrupted")
	require.NoError(t, pods.Delete(ctx, job.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}), "ARC ends the job")
	launchedCapacityIsTheNodes(t, ctx, core, kube)
	// Its node goes now, not when Karpenter finds it empty (consolidateAfter, 30 s, then
	// Karpenter's own pass): the broken-GPU phase starts its jobs on the twin soon after, and a
	// job bound to this node as Karpenter chose to consolidate it would land on a dying node.
	require.NoError(t, kube.Resource(nodeClaims).Delete(ctx, claim, metav1.DeleteOptions{}))

	// The node group's new version replaced the system nodes (EKS's update, by the fake);
	// no job ran on them.
	return systemNodesRolled(t, ctx, core, systemNodes, "v1.36.0")
}

// stepsDone are the changed steps as "op type::name", the reads of a refresh left out.
func stepsDone(steps []stepSpan) []string {
	var out []string
	for _, s := range changedSteps(steps) {
		if s.op != "refresh" {
			out = append(out, s.op+" "+s.resource())
		}
	}
	return out
}

// changedSteps are the steps that changed a resource (every one but "same").
func changedSteps(steps []stepSpan) []stepSpan {
	var out []stepSpan
	for _, s := range steps {
		if s.op != "same" {
			out = append(out, s)
		}
	}
	return out
}

// stepNamed is the one step on a resource of type typ.
func stepNamed(t *testing.T, steps []stepSpan, typ string) stepSpan {
	t.Helper()
	var found []stepSpan
	for _, s := range steps {
		if strings.HasPrefix(s.resource(), typ+"::") {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "one step on a %s", typ)
	return found[0]
}

// releaseURN is the URN of the Helm release named name in the state.
func releaseURN(t *testing.T, resources []apitype.ResourceV3, name string) string {
	t.Helper()
	for _, r := range resources {
		if string(r.Type) == "kubernetes:helm.sh/v3:Release" && r.Inputs["name"] == name {
			return string(r.URN)
		}
	}
	t.Fatalf("no release %s in the state", name)
	return ""
}

// findResource is the one resource of type typ (named name, if not empty) in resources.
func findResource(t *testing.T, resources []apitype.ResourceV3, typ, name string) apitype.ResourceV3 {
	t.Helper()
	var found []apitype.ResourceV3
	for _, r := range resources {
		if string(r.Type) == typ && (name == "" || r.URN.Name() == name) {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "one %s %s in the state", typ, name)
	return found[0]
}

// pulumiEKSBumped runs up with the pinned pulumi-eks on a stack the previous one deployed
// (hack/eks-plugin-previous): the component's own code changes, and with it possibly the
// children it creates and their inputs. Nothing may be created, deleted or replaced, and no
// Kubernetes resource change; what the new version updates in place is logged.
func pulumiEKSBumped(t *testing.T, ctx context.Context, h *harness) {
	up, steps, err := h.upWithSteps(t, ctx)
	require.NoError(t, err)
	changes := *up.Summary.ResourceChanges
	t.Logf("up with the pinned pulumi-eks: %v", changes)
	assert.Zero(t, changes["create"]+changes["delete"]+changes["replace"], "a pulumi-eks bump creates, deletes and replaces nothing")
	require.NotEmpty(t, steps, "the engine's steps, read from its events")
	var changed []string
	updates := 0
	for _, s := range changedSteps(steps) {
		changed = append(changed, s.resource())
		if s.op == "update" {
			updates++
		}
		assert.False(t, strings.HasPrefix(s.resource(), "kubernetes:"), "%s changed with pulumi-eks", s.urn)
	}
	t.Logf("changed: %v", changed)
	// Steps lost from the events would check no Kubernetes resource at all.
	assert.Equal(t, changes["update"], updates, "every update the summary counts, seen as a step")
	assert.Positive(t, changes["same"], "the up ran over the stack the previous version deployed")
}

// launchedCapacityIsTheNodes: the API server's launched-capacity policy, now served, gives a
// runner pod bound to a spot node "spot" and to an on-demand node "on-demand" (the node's
// label, not a constant): the scheduler's Binding, made here through the same subresource, for
// a pod of each to a Node of each type (tainted, so nothing else lands there).
func launchedCapacityIsTheNodes(t *testing.T, ctx context.Context, core kubernetes.Interface, kube dynamic.Interface) {
	for _, capacity := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "e2e-launched-" + capacity, Labels: map[string]string{karpv1.CapacityTypeLabelKey: capacity}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "e2e.luxfi.com/no-pods", Effect: corev1.TaintEffectNoExecute}}}}
		_, err := core.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(t, err)
		// The API server reads the Node from its informer cache (the policy fails open while
		// the new Node is not in it yet): a pod bound before that gets no annotation, so each
		// attempt is a new pod, for a few seconds.
		pods := core.CoreV1().Pods(wellknown.RunnersNamespace)
		var got string
		deadline := time.Now().Add(15 * time.Second)
		for attempt := 0; time.Now().Before(deadline); attempt++ {
			pod := runnerPod(t, ctx, kube, "lux-gpu-t4", fmt.Sprintf("lux-gpu-t4-e2e-launched-%s-%d", capacity, attempt))
			_, err = pods.Create(ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err)
			require.NoError(t, pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node.Name}}, metav1.CreateOptions{}))
			bound, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, node.Name, bound.Spec.NodeName)
			got = bound.Annotations[wellknown.LaunchedCapacityAnnotation]
			require.NoError(t, pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
			if got != "" {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		assert.Equal(t, capacity, got, "a pod bound to a %s node is told so", capacity)
		require.NoError(t, core.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}))
	}
}
