package k8s_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/k8s"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// The pods that run the stack's gpuci hold what a job must never reach (the retrier the
// organization's token, a gate the cache's writer credential), so every container of theirs,
// init containers too, runs an image pinned to a version, never the runner image's moving tag:
// whoever can push that tag would otherwise run code beside the token (#49.6). Either way the
// pod gets its gpuci: the stack's own build and a pinned release.
func TestGpuciPodsRunOnlyPinnedImages(t *testing.T) {
	pool := config.DefaultPool()
	pool.Name, pool.RunnerScaleSetName = "gpu-spot", "lux-gpu-t4"
	svc := config.CompilerCacheService{Name: "gpu-spot", Prefix: "gpu-spot", Access: config.CacheReadWrite, WriteRefs: []string{"refs/heads/main"}, PodNamespaces: []string{"arc-runners"}}
	sum := strings.Repeat("ab", 32)
	moving := testCache.Pull(versions.RunnerImage)
	for form, g := range map[string]k8s.Gpuci{
		"the stack's own build": {Stored: sum},
		"a pinned release":      {Release: config.Gpuci{Version: "v0.4.0", SHA256: sum}},
	} {
		pods := map[string]corev1.PodSpec{
			"the retrier":        k8s.RetrierDeployment(config.Retrier{}, config.GitHub{Org: "luxfi"}, []config.GPUPool{pool}, testCache, g, "us-west-2").Spec.Template.Spec,
			"the cache's server": k8s.CompilerCacheServer(svc, "us-west-2", testCache, g).Spec.Template.Spec,
		}
		for name, spec := range pods {
			containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
			require.GreaterOrEqual(t, len(containers), 2, "%s (%s): a fetcher and what runs gpuci", name, form)
			for _, c := range containers {
				assert.NotEqual(t, moving, c.Image, "%s (%s): %s runs the runner image", name, form, c.Name)
				assert.Contains(t, []string{versions.AWSCLIImage, testCache.Pull(versions.CompilerCacheServerImage)}, c.Image, "%s (%s): %s runs an image the stack pins", name, form, c.Name)
			}
		}
	}
}
