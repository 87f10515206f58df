package stack_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/iamjudge"
	"github.com/luxfi/lux-gpu-ci/stack"
)

const retrierRelease = "3f1c2a9e0b7d4c5a6e8f9012345678901234567890abcdef1234567890abcdef"

func runWithRetrier(t *testing.T) *mocks {
	return runDev(t, "retrierGitHubToken", "github_pat_retrier", "retrierGpuciVersion", "v0.4.0", "retrierGpuciSha256", retrierRelease)
}

// The in-cluster retrier: its own namespace, account, token and Deployment; its account reads
// the events of default and of the runners' namespace, nothing else; its token is a Pulumi
// secret held only by its Secret, in its own namespace. Off, none of it exists.
func TestTheInClusterRetrier(t *testing.T) {
	off := runDev(t)
	assert.Empty(t, off.all("lux-gpu-ci:k8s:Retrier"), "no token, no retrier")

	m := runWithRetrier(t)
	m.one(t, "lux-gpu-ci:k8s:Retrier")
	ns := m.get(t, "kubernetes:core/v1:Namespace", "gpu-ci-retrier")
	assert.Equal(t, map[string]any{"pod-security.kubernetes.io/enforce": "restricted"}, path(ns.Inputs, "metadata", "labels"))

	secret := m.get(t, "kubernetes:core/v1:Secret", "gpu-ci-retrier-github")
	assert.Equal(t, map[string]any{"name": "gpuci-retrier-github", "namespace": "gpuci-retrier"}, path(secret.Inputs, "metadata"))
	data := secret.Raw.Inputs["stringData"]
	require.True(t, data.IsSecret(), "the token is a Pulumi secret")
	assert.Equal(t, map[string]any{"token": "github_pat_retrier"}, data.SecretValue().Element.Mappable())
	for _, r := range m.programResources() {
		if r.Key() != secret.Key() {
			assert.NotContains(t, fmt.Sprint(r.Inputs), "github_pat_retrier", "%s holds the retrier's token", r.Key())
		}
	}

	events := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"events"}, "verbs": []any{"get", "list"}}}
	// In default, where a Node's events are, it also records its own (a node taken out of
	// service for a broken GPU).
	record := map[string]any{"apiGroups": []any{""}, "resources": []any{"events"}, "verbs": []any{"create"}}
	d := m.get(t, "kubernetes:apps/v1:Deployment", "gpu-ci-retrier")
	for _, readNS := range []string{"arc-runners", "arc-jobs-gpu-spot-container", "default"} {
		role := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:Role", "gpu-ci-retrier-"+readNS)
		assert.Equal(t, map[string]any{"name": "gpuci-retrier", "namespace": readNS}, path(role.Inputs, "metadata"))
		want := events
		if readNS == "default" {
			want = append(append([]any{}, events...), record)
		}
		assert.Equal(t, want, path(role.Inputs, "rules"), "events only: no pod (a job pod's spec holds its job's secrets), no Secret")
		binding := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "gpu-ci-retrier-"+readNS)
		assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "gpuci-retrier", "namespace": "gpuci-retrier"}}, path(binding.Inputs, "subjects"))
		assert.Contains(t, d.Deps(), binding.Key(), "the retrier starts once it may read")
	}
	assert.Contains(t, d.Deps(), secret.Key())
	// On destroy it goes before the namespaces its Roles are in, and so before ARC's
	// controller, which the runners' namespace outlives.
	for _, ns := range []string{"gpu-ci-arc-runners", "gpu-ci-arc-arc-jobs-gpu-spot-container"} {
		assert.Contains(t, d.Deps(), "kubernetes:core/v1:Namespace::"+ns, "the retrier goes before the namespace %s", ns)
	}
	assert.Contains(t, m.get(t, "kubernetes:core/v1:Namespace", "gpu-ci-arc-runners").Deps(), "kubernetes:helm.sh/v3:Release::gpu-ci-arc-controller")
	assert.Equal(t, "gpuci-retrier", path(d.Inputs, "metadata", "namespace"))
	c := path(d.Inputs, "spec", "template", "spec", "containers").([]any)[0]
	assert.Equal(t, []any{"retry", "--org", "luxfi", "--scale-sets", "lux-gpu-t4,lux-gpu-t4-on-demand,lux-gpu-t4-container",
		"--pod-namespaces", "arc-runners,arc-jobs-gpu-spot-container",
		"--spot-cool-down", "30m0s", "--cool-down-node-pools", "lux-gpu-t4=gpu-spot-cool-down,lux-gpu-t4-container=gpu-spot-container-cool-down",
		"--gpu-pools", "gpu-spot,gpu-spot-on-demand,gpu-spot-container", "--every", "1m"}, path(c, "args"))

	// Cluster-wide, to take a broken GPU's node out of service: list Nodes, list and delete
	// NodeClaims; nothing else.
	oos := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "gpu-ci-retrier-out-of-service")
	assert.Equal(t, "gpuci-retrier-out-of-service", path(oos.Inputs, "metadata", "name"))
	assert.Equal(t, []any{
		map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes"}, "verbs": []any{"list"}},
		map[string]any{"apiGroups": []any{"karpenter.sh"}, "resources": []any{"nodeclaims"}, "verbs": []any{"list", "delete"}},
	}, path(oos.Inputs, "rules"))
	binding := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "gpu-ci-retrier-out-of-service")
	assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "gpuci-retrier", "namespace": "gpuci-retrier"}}, path(binding.Inputs, "subjects"))
	assert.Contains(t, d.Deps(), binding.Key(), "the retrier starts once it may act")
}

// With the retrier, each spot pool has a cool-down NodePool: the pool's nodes on on-demand,
// tried first (weight), launching nothing (limit 0) until the retrier raises the limit, which
// the program then never sets back (ignoreChanges); deleted before Karpenter, as the pool's
// is. The retrier may get and patch those NodePools, by name, and nothing else cluster-wide.
// Without the retrier, or with retrierSpotCoolDown 0s, there is none.
func TestSpotPoolsCoolDownWithTheRetrier(t *testing.T) {
	m := runWithRetrier(t)
	for _, pool := range []string{"gpu-spot", "gpu-spot-container"} {
		np := m.get(t, "kubernetes:karpenter.sh/v1:NodePool", "gpu-ci-"+pool+"-cool-down")
		assert.Equal(t, pool+"-cool-down", path(np.Inputs, "metadata", "name"))
		assert.Equal(t, []string{"spec.limits"}, np.Raw.RegisterRPC.GetIgnoreChanges())
		spec := path(np.Inputs, "spec").(map[string]any)
		assert.Equal(t, map[string]any{"nvidia.com/gpu": "0"}, spec["limits"])
		assert.Equal(t, 50.0, spec["weight"])
		assert.Equal(t, pool, path(spec, "template", "metadata", "labels", "lux-gpu-ci.luxfi.com/pool"), "its nodes are the pool's")
		assert.Equal(t, pool, path(spec, "template", "spec", "nodeClassRef", "name"))
		assert.Contains(t, path(spec, "template", "spec", "requirements"), map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}})
		assert.Contains(t, np.Deps(), "kubernetes:helm.sh/v3:Release::gpu-ci-karpenter", "deleted while Karpenter runs")
		assert.Equal(t, "30m", np.Raw.RegisterRPC.GetCustomTimeouts().GetDelete(), "time to drain its nodes")
	}
	scaleSet := releaseNamed(t, m, "lux-gpu-t4")
	assert.Contains(t, scaleSet.Deps(), "kubernetes:karpenter.sh/v1:NodePool::gpu-ci-gpu-spot-cool-down", "runners go before the nodes they may run on")
	assert.NotContains(t, names(m.all("kubernetes:karpenter.sh/v1:NodePool")), "gpu-ci-gpu-spot-on-demand-cool-down", "the on-demand twin has none")

	role := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "gpu-ci-retrier-cool-down")
	assert.Equal(t, []any{map[string]any{"apiGroups": []any{"karpenter.sh"}, "resources": []any{"nodepools"},
		"resourceNames": []any{"gpu-spot-cool-down", "gpu-spot-container-cool-down"}, "verbs": []any{"get", "patch"}}}, path(role.Inputs, "rules"))
	binding := m.get(t, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "gpu-ci-retrier-cool-down")
	assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "gpuci-retrier", "namespace": "gpuci-retrier"}}, path(binding.Inputs, "subjects"))

	for name, off := range map[string]*mocks{"no retrier": runDev(t), "a retrier told not to": runDev(t, "retrierGitHubToken", "github_pat_retrier", "retrierGpuciVersion", "v0.4.0", "retrierGpuciSha256", retrierRelease, "retrierSpotCoolDown", "0s")} {
		assert.NotContains(t, names(off.all("kubernetes:karpenter.sh/v1:NodePool")), "gpu-ci-gpu-spot-cool-down", name)
		assert.NotContains(t, names(off.all("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")), "gpu-ci-retrier-cool-down", name)
	}
}

// The retrier runs the gpuci the stack built: stored in the stack's bucket (the bucket exists
// for it even where no pool has a compiler cache), fetched by the AWS CLI with the retrier's
// own Pod Identity, whose role reads that one object and nothing else (judged by the IAM
// evaluator). With a release pinned, nothing is stored and curl fetches the release.
func TestTheRetrierRunsTheStacksOwnGpuci(t *testing.T) {
	m := runDev(t, "retrierGitHubToken", "github_pat_retrier", "gpuPools", `[{"name": "gpu-spot", "instanceTypes": ["g4dn.xlarge"], "compilerCache": "none"}]`)
	m.one(t, "aws:s3/bucketV2:BucketV2")
	obj := m.one(t, "aws:s3/bucketObjectv2:BucketObjectv2")
	assert.Equal(t, "gpuci/linux-amd64/"+stack.GpuciStandInSHA256, obj.Inputs["key"])
	assert.Empty(t, m.all("aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2"), "no cache prefix to expire; the build never expires")

	role := m.get(t, "aws:iam/role:Role", "compiler-cache-retrier-role")
	assert.Equal(t, "lux-gpu-ci-retrier", role.Inputs["name"])
	trust := policyOf(t, role, "assumeRolePolicy")
	require.Len(t, trust.Statement, 1)
	assert.Equal(t, []string{"gpuci-retrier"}, trust.Statement[0].Condition["StringEquals"]["aws:RequestTag/kubernetes-service-account"], "the retrier's account only")
	assoc := m.get(t, "aws:eks/podIdentityAssociation:PodIdentityAssociation", "compiler-cache-retrier")
	assert.Equal(t, "gpuci-retrier", assoc.Inputs["namespace"])
	doc := policyOf(t, m.get(t, "aws:iam/rolePolicy:RolePolicy", "compiler-cache-retrier"), "policy")
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	asks := map[string]struct {
		action, arn string
		allowed     bool
	}{
		"reads the stored build":    {"s3:GetObject", bucketArn + "/gpuci/linux-amd64/" + stack.GpuciStandInSHA256, true},
		"reads another object":      {"s3:GetObject", bucketArn + "/gpu-spot/ac/ab", false},
		"replaces the stored build": {"s3:PutObject", bucketArn + "/gpuci/linux-amd64/" + stack.GpuciStandInSHA256, false},
		"lists the bucket":          {"s3:ListBucket", bucketArn, false},
	}
	var cases []iamjudge.Case
	for name, a := range asks {
		cases = append(cases, iamjudge.Case{Name: name, Principal: "arn:aws:iam::" + testAccount + ":role/lux-gpu-ci-retrier",
			Action: a.action, Resource: a.arn, Account: testAccount, Identity: []json.RawMessage{b}})
	}
	verdicts := iamjudge.Judge(t, cases)
	for name, a := range asks {
		assert.Equal(t, a.allowed, verdicts[name] == iamjudge.Allowed, "%s: %s", name, verdicts[name])
	}

	var d appsv1.Deployment
	decodeInputs(t, m.get(t, "kubernetes:apps/v1:Deployment", "gpu-ci-retrier"), &d)
	fetch := d.Spec.Template.Spec.InitContainers[0]
	assert.Equal(t, "public.ecr.aws/aws-cli/aws-cli:2.36.7", fetch.Image)
	assert.Contains(t, fetch.Env, corev1.EnvVar{Name: "SHA256", Value: stack.GpuciStandInSHA256}, "the build's pin")
	cm := m.get(t, "kubernetes:core/v1:ConfigMap", "gpu-ci-retrier-bucket")
	assert.Equal(t, map[string]any{"bucket": "lux-gpu-ci--ccache-20261203000000000000000001"}, cm.Inputs["data"])
	dd := m.get(t, "kubernetes:apps/v1:Deployment", "gpu-ci-retrier")
	for _, r := range []registered{cm, assoc} {
		assert.Contains(t, dd.Deps(), r.Key(), "the retrier starts once it can fetch its gpuci")
	}
	assert.Equal(t, "true", path(dd.Inputs, "metadata", "annotations", "pulumi.com/skipAwait"), "a retrier that cannot start fails nothing else of the up")

	released := runWithRetrier(t)
	assert.Empty(t, released.all("aws:s3/bucketObjectv2:BucketObjectv2"), "a pinned release: nothing built, nothing stored")
	decodeInputs(t, released.get(t, "kubernetes:apps/v1:Deployment", "gpu-ci-retrier"), &d)
	assert.Contains(t, d.Spec.Template.Spec.InitContainers[0].Env, corev1.EnvVar{Name: "SHA256", Value: retrierRelease})
}
