package k8s_test

// A pool's compiler cache server, as the builder makes it.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// Each server runs on the system nodes under its own account, at the restricted level, its
// image through the cache. Behind its gate (the stack pins a gpuci) it listens on the pod's
// loopback and the gate on the service's port: a read-write pool's gate lets main's jobs write
// its prefix, a read-only pool's serves the writer's prefix and lets no job write. Without a
// gate, no server takes a write from anyone.
func TestCompilerCacheServer(t *testing.T) {
	cache := testCache
	gpuci := k8s.Gpuci{Stored: strings.Repeat("ab", 32)}
	services := []config.CompilerCacheService{
		{Name: "gpu-spot", Prefix: "gpu-spot", Access: config.CacheReadWrite, WriteRefs: []string{"refs/heads/main"}, PodNamespaces: []string{"arc-runners"}},
		{Name: "gpu-spot-container", Prefix: "gpu-spot", Access: config.CacheReadOnly, PodNamespaces: []string{"arc-runners", "arc-jobs-gpu-spot-container"}},
	}
	gated, ungated := map[string]appsv1.Deployment{}, map[string]appsv1.Deployment{}
	for _, svc := range services {
		d := k8s.CompilerCacheServer(svc, "us-west-2", cache, gpuci)
		gated[d.Name] = d
		d = k8s.CompilerCacheServer(svc, "us-west-2", cache, k8s.Gpuci{})
		ungated[d.Name] = d
	}
	require.Len(t, gated, 2)

	for name, d := range gated {
		spec := d.Spec.Template.Spec
		assert.Equal(t, map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue}, spec.NodeSelector, name)
		assert.Equal(t, name, spec.ServiceAccountName, "the account its role is associated with")
		require.NotNil(t, spec.EnableServiceLinks)
		assert.False(t, *spec.EnableServiceLinks, "no BAZEL_REMOTE_* from a Service's variables")
		require.Len(t, spec.Containers, 2, "the server and its gate")
		c := spec.Containers[0]
		assert.Equal(t, cache["docker.io"]+"/buchgr/bazel-remote-cache:v2.6.2", c.Image, "through the image cache")
		assert.Equal(t, []string{"/bazel-remote-linux-amd64"}, c.Command, "not the image's entrypoint, which opens a profiler on :6060")
		assert.Equal(t, "compiler-cache", c.Env[0].ValueFrom.ConfigMapKeyRef.Name)
		assert.Equal(t, "BAZEL_REMOTE_S3_BUCKET", c.Env[0].Name)
		assert.Empty(t, c.Ports, "the server is reached through its gate only")
		gate := spec.Containers[1]
		assert.Equal(t, []string{"/opt/gpuci/gpuci"}, gate.Command, "the stack's gpuci")
		assert.Equal(t, "http", gate.Ports[0].Name, "the Service's target")
		assert.Equal(t, int32(wellknown.CompilerCachePort), gate.Ports[0].ContainerPort)
		require.Len(t, spec.InitContainers, 1)
		assert.Contains(t, spec.InitContainers[0].Env, corev1.EnvVar{Name: "SHA256", Value: gpuci.Stored}, "the pinned binary, or nothing")
		assertRestricted(t, name, d.Spec.Template)
	}
	common := func(listen string) []string {
		return []string{"--dir=/data", "--max_size=2", "--http_address=" + listen, "--grpc_address=none", "--disable_http_ac_validation",
			"--s3.auth_method=iam_role", "--s3.endpoint=s3.us-west-2.amazonaws.com", "--s3.region=us-west-2", "--s3.prefix=gpu-spot"}
	}
	noWriter := []string{"--htpasswd_file=/etc/gpuci-cache/htpasswd", "--allow_unauthenticated_reads"}
	args := func(d appsv1.Deployment, i int) []string { return d.Spec.Template.Spec.Containers[i].Args }
	assert.Equal(t, append(common("127.0.0.1:8081"), "--s3.update_timestamps"), args(gated["ccache-gpu-spot"], 0))
	assert.Equal(t, []string{"cache-gate", "--listen=:8080", "--upstream=http://127.0.0.1:8081", "--pool=gpu-spot", "--pod-namespaces=arc-runners", "--write-refs=refs/heads/main"},
		args(gated["ccache-gpu-spot"], 1), "main's jobs write")
	assert.Equal(t, append(common("127.0.0.1:8081"), noWriter...), args(gated["ccache-gpu-spot-container"], 0), "the writer's prefix, and no write from anyone")
	assert.Equal(t, []string{"cache-gate", "--listen=:8080", "--upstream=http://127.0.0.1:8081", "--pool=gpu-spot-container", "--pod-namespaces=arc-runners,arc-jobs-gpu-spot-container"},
		args(gated["ccache-gpu-spot-container"], 1), "no ref writes")
	for name, d := range ungated {
		require.Len(t, d.Spec.Template.Spec.Containers, 1, name)
		assert.Empty(t, d.Spec.Template.Spec.InitContainers, name)
		assert.Equal(t, append(common(":8080"), noWriter...), args(d, 0), "%s: no gate, no write", name)
	}
}

// A gate reads its pool's pods where they run and the EphemeralRunners, and nothing else.
func TestCompilerCacheGateReadsOnlyItsCallers(t *testing.T) {
	rules := k8s.CompilerCacheGateRules(config.CompilerCacheService{Name: "gpu-spot-container", PodNamespaces: []string{"arc-runners", "arc-jobs-gpu-spot-container"}})
	assert.Equal(t, map[string][]rbacv1.PolicyRule{
		"arc-runners": {
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
			{APIGroups: []string{"actions.github.com"}, Resources: []string{"ephemeralrunners"}, Verbs: []string{"get"}},
		},
		"arc-jobs-gpu-spot-container": {{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}, rules)
}
