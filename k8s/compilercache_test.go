package k8s_test

// A pool's compiler cache server, as the builder makes it.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// Each server runs on the system nodes under its own account, at the restricted level, its
// image through the cache; a read-write pool's server writes its prefix, a read-only pool's
// serves the writer's prefix and takes no write from anyone.
func TestCompilerCacheServer(t *testing.T) {
	cache := testCache
	servers := map[string]appsv1.Deployment{}
	for _, svc := range []config.CompilerCacheService{
		{Name: "gpu-spot", Prefix: "gpu-spot", Access: config.CacheReadWrite},
		{Name: "gpu-spot-container", Prefix: "gpu-spot", Access: config.CacheReadOnly},
	} {
		d := k8s.CompilerCacheServer(svc, "us-west-2", cache)
		servers[d.Name] = d
	}
	require.Len(t, servers, 2)

	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	for name, d := range servers {
		spec := d.Spec.Template.Spec
		assert.Equal(t, map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue}, spec.NodeSelector, name)
		assert.Equal(t, name, spec.ServiceAccountName, "the account its role is associated with")
		require.NotNil(t, spec.EnableServiceLinks)
		assert.False(t, *spec.EnableServiceLinks, "no BAZEL_REMOTE_* from a Service's variables")
		c := spec.Containers[0]
		assert.Equal(t, cache["docker.io"]+"/buchgr/bazel-remote-cache:v2.6.2", c.Image, "through the image cache")
		assert.Equal(t, []string{"/bazel-remote-linux-amd64"}, c.Command, "not the image's entrypoint, which opens a profiler on :6060")
		assert.Equal(t, "compiler-cache", c.Env[0].ValueFrom.ConfigMapKeyRef.Name)
		assert.Equal(t, "BAZEL_REMOTE_S3_BUCKET", c.Env[0].Name)
		for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &spec) {
			assert.True(t, r.Allowed, "%s: %s: %s", name, r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
	common := []string{"--dir=/data", "--max_size=2", "--http_address=:8080", "--grpc_address=none", "--disable_http_ac_validation",
		"--s3.auth_method=iam_role", "--s3.endpoint=s3.us-west-2.amazonaws.com", "--s3.region=us-west-2"}
	assert.Equal(t, append(common, "--s3.prefix=gpu-spot", "--s3.update_timestamps"), servers["ccache-gpu-spot"].Spec.Template.Spec.Containers[0].Args)
	assert.Equal(t, append(common, "--s3.prefix=gpu-spot", "--htpasswd_file=/etc/gpuci-cache/htpasswd", "--allow_unauthenticated_reads"),
		servers["ccache-gpu-spot-container"].Spec.Template.Spec.Containers[0].Args, "the writer's prefix, and no write from anyone")
}
