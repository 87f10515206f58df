//go:build e2e

package e2e

// Day-2 edits of the running stack, each with its plan asserted before the up.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeeks"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// poolRemovedWhileItsJobRuns adds a pool to the running stack, then removes it while its
// runner holds a job, with runnerDrainTimeout at 10 s: the removal's up fails once the drain
// times out — the job's runner pod is not deleted (by the up: ARC's own controller is a
// stand-in here), its scale set stays in GitHub — and the next up, with the refresh
// deploy.yml runs, succeeds with no manual step; the scale set leaves GitHub when the job ends. It runs last before destroy: it leaves the stack file as it found it, and the
// state with its 10-second drain, ample for a destroy with no job running (about 4 s).
func poolRemovedWhileItsJobRuns(t *testing.T, ctx context.Context, h *harness, kube dynamic.Interface, github *fakeGitHub) {
	const pool, scaleSet = "gpu-extra", "lux-gpu-extra"
	before, err := os.ReadFile(h.stackFile)
	require.NoError(t, err)
	drain := config.Project + ":" + config.KeyRunnerDrainTimeout

	t.Run("add a pool", func(t *testing.T) {
		h.editStackFile(t, func(cfg map[string]any) {
			cfg[drain] = "10s"
			pools := cfg[config.Project+":"+config.KeyGPUPools].([]any)
			cfg[config.Project+":"+config.KeyGPUPools] = append(pools, map[string]any{
				"name": pool, "instanceTypes": []any{"g4dn.xlarge"}, "capacityTypes": []any{"spot"}, "gpuLimit": 1,
				"runnerScaleSetName": scaleSet, "runnerLabels": []any{"self-hosted", "linux", "amd64", "cuda", "gpu", "extra"}, "maxRunners": 1,
			})
		})
		changes, err := h.upWithOps(t, ctx)
		require.NoError(t, err)
		assert.Positive(t, changes[apitype.OpCreate], "the pool's NodePool, EC2NodeClass and scale set")
		assert.Zero(t, changes[apitype.OpReplace]+changes[apitype.OpDelete]+changes[apitype.OpDeleteReplaced], "nothing running is replaced or removed")
		require.Eventually(t, func() bool { return slices.Contains(github.Registered(), scaleSet) }, 10*time.Second, 100*time.Millisecond, "GitHub:\n%s", github.Log())
		assert.Contains(t, retrierScaleSets(t, ctx, kube), scaleSet, "the in-cluster retrier counts the new pool's runners")
	})

	github.StartJob(t, ctx, scaleSet)
	t.Run("remove it while its runner holds a job: the drain times out", func(t *testing.T) {
		h.editStackFile(t, func(cfg map[string]any) {
			pools := cfg[config.Project+":"+config.KeyGPUPools].([]any)
			cfg[config.Project+":"+config.KeyGPUPools] = slices.DeleteFunc(pools, func(p any) bool { return p.(map[string]any)["name"] == pool })
		})
		changes, err := h.upWithOps(t, ctx)
		require.Error(t, err, "the scale set's removal waits 10 s for a job that runs on")
		assert.Positive(t, changes[apitype.OpDelete], "the pool's resources are removed")
		assert.Zero(t, changes[apitype.OpReplace]+changes[apitype.OpDeleteReplaced], "nothing else is replaced")
		t.Logf("up: %v", err)
		ars, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, scaleSet, metav1.GetOptions{})
		require.NoError(t, err, "ARC keeps the scale set while its job runs")
		assert.NotNil(t, ars.GetDeletionTimestamp())
		assert.Contains(t, github.Registered(), scaleSet, "the job's scale set is still in GitHub")
		assert.True(t, github.JobsRunning(ctx, scaleSet), "the job's runner pod runs on (not deleted by the up; ARC's own controller, which could, is a stand-in here)\n%s", github.Log())
	})

	t.Run("the next up, with deploy.yml's refresh, succeeds by itself", func(t *testing.T) {
		res, err := h.up(t, ctx, optup.Refresh())
		require.NoError(t, err, "no manual step between the failed removal and the next deploy")
		t.Logf("up --refresh: %v", *res.Summary.ResourceChanges)
		github.EndJob(t, ctx, scaleSet)
		require.Eventually(t, func() bool {
			_, err := kube.Resource(runnerSets).Namespace("arc-runners").Get(ctx, scaleSet, metav1.GetOptions{})
			return apierrors.IsNotFound(err) && !slices.Contains(github.Registered(), scaleSet)
		}, 30*time.Second, 100*time.Millisecond, "once the job ends, ARC removes the scale set, from GitHub too\n%s", github.Log())
		assert.NotContains(t, retrierScaleSets(t, ctx, kube), scaleSet, "and the retrier no longer does")
		runnersCanStart(t, ctx, kube) // the other scale sets' accounts outlive the removal
	})

	// The stack file as it was, for the up after destroy.
	require.NoError(t, os.WriteFile(h.stackFile, before, 0o644))
}

// poolEditedWhileAnEarlierZoneGainsItsTypes has us-west-2a, which comes first by name and
// offered no GPU when the stack chose its zones, start offering every GPU type, and in the
// same edit raises gpu-spot's gpuLimit to 2 and adds a type only us-west-2a offers. Zones are
// kept once chosen, so the up changes gpu-spot's NodePool, its twin's and its cool-down's
// (which share its gpuLimit and types; the cool-down's limit stays the retrier's, 0 while it
// is not held, and its limit for a hold follows the pool's) and nothing of the network: no subnet, route or node group moves to the
// zone that offers the new type. The pool keeps both types from here on.
func poolEditedWhileAnEarlierZoneGainsItsTypes(t *testing.T, ctx context.Context, h *harness, kube dynamic.Interface) {
	gpuTypes := []string{"t3.medium", "g4dn.xlarge"}
	h.editAccount(t, func(c *fakeaws.Cloud) {
		c.Offerings = map[string][]string{
			"us-west-2a": append(slices.Clone(gpuTypes), "g4dn.2xlarge"),
			"us-west-2b": gpuTypes, "us-west-2c": gpuTypes, "us-west-2d": gpuTypes,
		}
	})
	h.editStackFile(t, func(cfg map[string]any) {
		setPoolField(t, cfg, "gpuLimit", 2)
		setPoolField(t, cfg, "instanceTypes", []any{"g4dn.xlarge", "g4dn.2xlarge"})
	})
	up, err := h.up(t, ctx)
	require.NoError(t, err)
	changes := *up.Summary.ResourceChanges
	t.Logf("up: %v", changes)
	assert.Equal(t, 3, changes["update"], "gpu-spot's NodePool, its twin's and its cool-down's")
	assert.Zero(t, changes["create"]+changes["delete"]+changes["replace"],
		"no subnet, route or node group moves to the zone that offers the new type")
	for _, name := range []string{"gpu-spot", "gpu-spot-on-demand"} {
		np, err := kube.Resource(nodePools).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		limit, _, _ := unstructured.NestedString(np.Object, "spec", "limits", "nvidia.com/gpu")
		assert.Equal(t, "2", limit, "%s (the twin follows its pool)", name)
		assert.ElementsMatch(t, []string{"g4dn.xlarge", "g4dn.2xlarge"}, instanceTypes(np), name)
	}
	cool, err := kube.Resource(nodePools).Get(ctx, "gpu-spot-cool-down", metav1.GetOptions{})
	require.NoError(t, err)
	limit, _, _ := unstructured.NestedString(cool.Object, "spec", "limits", "nvidia.com/gpu")
	assert.Equal(t, "0", limit, "the cool-down NodePool's limit is the retrier's")
	assert.Equal(t, "2", cool.GetAnnotations()[wellknown.CoolDownGPULimitAnnotation], "the limit a hold takes follows the pool's")
	assert.ElementsMatch(t, []string{"g4dn.xlarge", "g4dn.2xlarge"}, instanceTypes(cool), "its types follow the pool's")
}

// instanceTypes are a NodePool's instance-type requirement's values.
func instanceTypes(np *unstructured.Unstructured) []string {
	var types []string
	reqs, _, _ := unstructured.NestedSlice(np.Object, "spec", "template", "spec", "requirements")
	for _, r := range reqs {
		if r := r.(map[string]any); r["key"] == corev1.LabelInstanceTypeStable {
			for _, v := range r["values"].([]any) {
				types = append(types, v.(string))
			}
		}
	}
	return types
}

// tagsAndSnapshotEdited adds a tag to the running stack and gives gpu-spot an image
// snapshot, in one edit (one phase: the e2e's time budget), while a container-form job runs
// on a system node. Tags reach every AWS resource, the system nodes' launch template (a new
// version, so EKS replaces the nodes) and Karpenter's EC2NodeClasses; the snapshot moves
// gpu-spot and its twin to Bottlerocket with the data volume restored from it. All in place.
//
// The node group's update drains the old system nodes; the busy runners' budget refuses the
// job's eviction, so the update fails with PodEvictionFailure and the job runs on. The
// failed update leaves its new outputs in the state (the provider saves them, as
// terraform-plugin-sdk does), so only a refresh sees the nodes were not replaced: the next
// deploy (deploy.yml's up --refresh), once the job ended, replaces them with no manual step.
// That state, and what a refresh reads, is the fake's model of pulumi-aws and EKS, read in
// their sources (internal/testsupport/fakeaws's node group rules; docs/operations.md, "A
// system-node update a job holds"), not a recorded trace: it is asserted here as modelled.
// It returns the system nodes after.
func tagsAndSnapshotEdited(t *testing.T, ctx context.Context, h *harness, core kubernetes.Interface, kube dynamic.Interface, systemNodes []string, gpuci, kubeconfig string) []string {
	const snapshot = "snap-0123456789abcdef0"
	runner := runnerTakesJob(t, ctx, core, containerFormRunner(t, ctx, core, kube, systemNodes, "lux-gpu-t4-container-e2e-runner-t"))
	h.editStackFile(t, func(cfg map[string]any) {
		tags := cfg[config.Project+":"+config.KeyTags].(map[string]any)
		tags["cost-center"] = "gpu-ci"
		setPoolField(t, cfg, "imageSnapshotID", snapshot)
	})
	// The disruption controller counts the job before the drain comes.
	require.Eventually(t, func() bool {
		pdb, err := core.PolicyV1().PodDisruptionBudgets(wellknown.RunnersNamespace).Get(ctx, k8s.BusyRunnersBudget, metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration >= pdb.Generation && pdb.Status.CurrentHealthy >= 1 && pdb.Status.DisruptionsAllowed == 0
	}, time.Minute, 250*time.Millisecond, "the busy runners' budget counts the job")
	tr, upErr := h.upTraced(t, ctx)
	steps := tr.steps
	// The plan, as the up carried it out (a preview of its own would cost 10 s and show the same).
	assert.Zero(t, tr.ops[apitype.OpCreate]+tr.ops[apitype.OpDelete]+tr.ops[apitype.OpReplace]+tr.ops[apitype.OpDeleteReplaced], "a tag edit replaces nothing")
	for _, want := range []string{"update aws:ec2/launchTemplate:LaunchTemplate::cluster-system", "update aws:eks/nodeGroup:NodeGroup::cluster-system"} {
		assert.Contains(t, tr.begun, want, "the up rolls the system nodes: a new launch template version")
	}
	job, err := core.CoreV1().Pods(wellknown.RunnersNamespace).Get(ctx, runner.Name, metav1.GetOptions{})
	require.NoError(t, err, "the job's pod is still there")
	assert.Nil(t, job.DeletionTimestamp, "the job was not evicted")
	assert.Equal(t, corev1.PodRunning, job.Status.Phase)
	require.Error(t, upErr, "the node group's update cannot drain the job's node")
	assert.Contains(t, upErr.Error(), "PodEvictionFailure", "EKS's error, through the provider")
	done := stepsDone(steps)
	t.Logf("up (failed): %v", done)
	assert.Contains(t, done, "update aws:ec2/launchTemplate:LaunchTemplate::cluster-system", "the new launch template version is made")
	for _, d := range done {
		assert.NotContains(t, d, " kubernetes:", "the Kubernetes layer depends on the system nodes: its part of the edit waits for the next deploy")
	}

	nodes := systemNodesNow(t, ctx, core)
	assert.Contains(t, nodes[runner.Spec.NodeName].Spec.Taints, fakeeks.UnschedulableTaint, "the job's node keeps EKS's taint: no new pod lands there")
	assert.Greater(t, len(nodes), len(systemNodes), "the new nodes stay")
	// What the operator who sees the failed deploy finds.
	held := gpuciDoctor(t, ctx, gpuci, kubeconfig, "System node update held by running jobs")
	assert.True(t, held.Problem, "gpuci doctor reports the held update")
	assert.Contains(t, strings.Join(held.Evidence, "\n"), "system node "+runner.Spec.NodeName+" tainted eks.amazonaws.com/nodegroup=unschedulable:NoSchedule; on it: runner pods "+runner.Name)
	_, resources := h.state(t, ctx)
	group := findResource(t, resources, "aws:eks/nodeGroup:NodeGroup", "")
	template := findResource(t, resources, "aws:ec2/launchTemplate:LaunchTemplate", "cluster-system")
	assert.Equal(t, fmt.Sprint(template.Outputs["latestVersion"]), fmt.Sprint(group.Outputs["launchTemplate"].(map[string]any)["version"]),
		"as modelled: the state holds the failed update's launch template version, so an up without a refresh would see nothing to do")

	require.NoError(t, core.CoreV1().Pods(runner.Namespace).Delete(ctx, runner.Name, metav1.DeleteOptions{}), "ARC ends the job")
	next, steps, err := h.upWithSteps(t, ctx, optup.Refresh())
	require.NoError(t, err, "the next deploy replaces the nodes by itself")
	redone := stepsDone(steps)
	t.Logf("up --refresh: %v; changed %v", *next.Summary.ResourceChanges, redone)
	assert.Contains(t, redone, "update aws:eks/nodeGroup:NodeGroup::cluster-system", "the refresh read the nodes' real launch template version")
	after := systemNodesRolled(t, ctx, core, systemNodes, "v1.36.0")
	// Nothing is left to do: the next phase's up (ARC's upgrade) replaces ARC's releases and
	// changes nothing else (a preview here would cost 7 s of the e2e's budget and say the same).

	nc, err := kube.Resource(ec2NodeClasses).Get(ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err)
	tags, _, _ := unstructured.NestedStringMap(nc.Object, "spec", "tags")
	assert.Equal(t, "gpu-ci", tags["cost-center"], "Karpenter's GPU nodes carry the new tag")

	// Admitted by Karpenter's real CRD (schema and CEL) in the API server, twin included.
	for _, name := range []string{"gpu-spot", "gpu-spot-on-demand"} {
		nc, err := kube.Resource(ec2NodeClasses).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		terms, _, _ := unstructured.NestedSlice(nc.Object, "spec", "amiSelectorTerms")
		assert.Equal(t, []any{map[string]any{"alias": "bottlerocket@v1.64.0"}}, terms, name)
		devices, _, _ := unstructured.NestedSlice(nc.Object, "spec", "blockDeviceMappings")
		require.Len(t, devices, 2, name)
		id, _, _ := unstructured.NestedString(devices[1].(map[string]any), "ebs", "snapshotID")
		assert.Equal(t, snapshot, id, "%s: the data volume comes from the snapshot", name)
		np, err := kube.Resource(nodePools).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		nodeOS, _, _ := unstructured.NestedString(np.Object, "spec", "template", "metadata", "labels", "lux-gpu-ci.luxfi.com/node-os")
		assert.Equal(t, "bottlerocket", nodeOS, "%s: the stack's device plugin keeps off its nodes", name)
	}
	other, err := kube.Resource(ec2NodeClasses).Get(ctx, "gpu-spot-container", metav1.GetOptions{})
	require.NoError(t, err)
	terms, _, _ := unstructured.NestedSlice(other.Object, "spec", "amiSelectorTerms")
	assert.Equal(t, []any{map[string]any{"alias": "al2023@v20260714"}}, terms, "the other pool stays on AL2023")
	return after
}

// deployIdentityAdded gives the running stack the deploy identity's roles (identity/; make
// identity sets these keys) and takes them away again. pulumi-eks v2.8.1 turns each
// accessEntries key into an AccessEntry and its AccessPolicyAssociation
// (nodejs/eks/authenticationMode.ts:177-215): the up creates exactly those four, the deploy
// role's associated with cluster-admin and the preview role's with the view policy (no
// Secrets), replaces nothing, and leaves an empty preview; removing the keys deletes the four.
func deployIdentityAdded(t *testing.T, ctx context.Context, h *harness) {
	const (
		deploy  = "arn:aws:iam::123456789012:role/lux-gpu-ci-deploy"
		preview = "arn:aws:iam::123456789012:role/lux-gpu-ci-preview-luxfi-lux-gpu-ci"
	)
	before, err := os.ReadFile(h.stackFile)
	require.NoError(t, err)
	h.editStackFile(t, func(cfg map[string]any) {
		cfg[config.Project+":"+config.KeyDeployRoleArn] = deploy
		cfg[config.Project+":"+config.KeyPreviewRoleArn] = preview
	})
	up, err := h.up(t, ctx)
	require.NoError(t, err)
	changes := *up.Summary.ResourceChanges
	t.Logf("up: %v", changes)
	assert.Equal(t, 4, changes["create"], "two access entries and their policy associations")
	assert.Zero(t, changes["replace"]+changes["delete"], "nothing replaced: the cluster keeps running")

	_, resources := h.state(t, ctx)
	policies := map[string]string{}
	for _, r := range resources {
		if r.Type == "aws:eks/accessPolicyAssociation:AccessPolicyAssociation" {
			policies[fmt.Sprint(r.Inputs["principalArn"])] = fmt.Sprint(r.Inputs["policyArn"])
		}
	}
	assert.Equal(t, "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", policies[deploy], "deploy.yml's role administers the cluster")
	assert.Equal(t, "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy", policies[preview], "preview.yml's role only views it, Secrets excepted")
	_, err = h.preview(t, ctx, optpreview.ExpectNoChanges())
	require.NoError(t, err, "a preview after the up is empty")

	require.NoError(t, os.WriteFile(h.stackFile, before, 0o644))
	up, err = h.up(t, ctx)
	require.NoError(t, err)
	changes = *up.Summary.ResourceChanges
	assert.Equal(t, 4, changes["delete"], "the roles' access entries go with their keys")
	assert.Zero(t, changes["create"]+changes["replace"])
}

// badConfigRefused: a pool edit the config refuses is refused before anything is sent — the
// NodePool untouched, no AWS create, update or delete, no resource of any provider changed in
// the state (a Kubernetes one would have).
func (r *run) badConfigRefused(t *testing.T) {
	np, err := r.kube.Resource(nodePools).Get(r.ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err)
	// Its generation counts changes of its spec (Karpenter writes its status all along).
	before := np.GetGeneration()
	_, state := r.h.state(t, r.ctx)
	sent := mutations(r.h.calls(t))
	r.h.editStackFile(t, func(cfg map[string]any) { setPoolField(t, cfg, "capacityTypes", []any{"preemptible"}) })
	_, err = r.h.up(t, r.ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools")
	assert.Contains(t, err.Error(), `"preemptible" is not spot or on-demand`)
	np, err = r.kube.Resource(nodePools).Get(r.ctx, "gpu-spot", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before, np.GetGeneration(), "the NodePool was not touched")
	// Nothing reached a provider: no AWS create, update or delete, and no resource of any
	// provider changed in the state (a Kubernetes one would have).
	assert.Equal(t, sent, mutations(r.h.calls(t)), "no create, update or delete reached the fake AWS")
	_, after := r.h.state(t, r.ctx)
	require.NotEmpty(t, state)
	assert.Equal(t, withoutCiphertexts(state), withoutCiphertexts(after), "no resource of any provider changed")
	r.h.editStackFile(t, func(cfg map[string]any) { setPoolField(t, cfg, "capacityTypes", []any{"spot", "on-demand"}) })
}

// zonesAndSystemNodesKept: what would move the zones of a running stack (a higher azCount),
// or replace its system node group (another instance type), is refused, naming the key, and
// the state is as it was.
func (r *run) zonesAndSystemNodesKept(t *testing.T) {
	_, before := r.h.state(t, r.ctx)
	r.h.editStackFile(t, func(cfg map[string]any) { cfg[config.Project+":"+config.KeyAzCount] = 3 })
	_, err := r.h.up(t, r.ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:azCount: the stack's subnets are in 2 availability zones")
	assert.Contains(t, err.Error(), "fix: pulumi config set azCount 2")
	r.h.editStackFile(t, func(cfg map[string]any) { delete(cfg, config.Project+":"+config.KeyAzCount) })
	// EKS would delete the old group's nodes, its drain cut off after 5 minutes.
	r.h.editStackFile(t, func(cfg map[string]any) { cfg[config.Project+":"+config.KeySystemNodeInstanceType] = "t3.large" })
	_, err = r.h.up(t, r.ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:systemNodeInstanceType: the system node group ")
	assert.Contains(t, err.Error(), "would be replaced (instance type t3.medium → t3.large)")
	r.h.editStackFile(t, func(cfg map[string]any) { cfg[config.Project+":"+config.KeySystemNodeInstanceType] = "t3.medium" })
	// The state is as it was, resource by resource (a preview would say the same, in 6 s).
	// The failed up wrote the checkpoint again, each secret encrypted anew: secrets are
	// compared as secrets, not by ciphertext.
	_, after := r.h.state(t, r.ctx)
	require.NotEmpty(t, before)
	assert.Equal(t, withoutCiphertexts(before), withoutCiphertexts(after), "nothing was changed")
}

// retrierScaleSets are the scale sets the in-cluster retrier's Deployment counts as the
// stack's (its --scale-sets), as the API server holds it.
func retrierScaleSets(t *testing.T, ctx context.Context, kube dynamic.Interface) []string {
	t.Helper()
	d, err := kube.Resource(deployments).Namespace(wellknown.RetrierNamespace).Get(ctx, wellknown.RetrierName, metav1.GetOptions{})
	require.NoError(t, err, "the stack's retrier")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	i := slices.Index(args, "--scale-sets")
	require.GreaterOrEqual(t, i, 0, "its args: %v", args)
	require.Less(t, i+1, len(args))
	return strings.Split(args[i+1], ",")
}
