package k8s_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// The in-cluster retrier: gpuci retry --org on the system nodes, at the restricted level, its
// token from the Secret in its own namespace, its gpuci the pinned release's.
func TestRetrierDeployment(t *testing.T) {
	pool := config.DefaultPool()
	pool.OnDemandRetry = true
	container := config.DefaultPool()
	container.Name, container.RunnerScaleSetName, container.JobForm = "gpu-c", "lux-gpu-c", config.JobFormContainer
	pools := []config.GPUPool{pool, pool.RetryTwin(), container}
	r := config.Retrier{GpuciVersion: "v0.4.0", GpuciSHA256: "00"}
	d := k8s.RetrierDeployment(r, config.GitHub{Org: "luxfi"}, pools, testCache)
	assert.Equal(t, wellknown.RetrierNamespace, d.Namespace)
	spec := d.Spec.Template.Spec
	assert.Equal(t, wellknown.RetrierServiceAccount, spec.ServiceAccountName)
	assert.Equal(t, map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue}, spec.NodeSelector)
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	for _, res := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &spec) {
		assert.True(t, res.Allowed, "%s: %s", res.ForbiddenReason, res.ForbiddenDetail)
	}
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, []string{"/opt/gpuci/gpuci"}, c.Command)
	assert.Equal(t, []string{"retry", "--org", "luxfi", "--scale-sets", "lux-gpu-t4,lux-gpu-t4-on-demand,lux-gpu-c",
		"--pod-namespaces", "arc-runners,arc-jobs-gpu-c", "--every", "1m"}, c.Args,
		"every pool's and twin's scale set, and where their runner and job pods run")
	require.Len(t, c.Env, 1)
	assert.Equal(t, "GITHUB_TOKEN", c.Env[0].Name)
	assert.Equal(t, wellknown.RetrierTokenSecret, c.Env[0].ValueFrom.SecretKeyRef.Name, "from the Secret in its own namespace")
	assert.Equal(t, testCache["ghcr.io"]+"/actions/actions-runner:latest", c.Image, "through the image cache")
	require.Len(t, spec.InitContainers, 1)
}

// The init container's command, run by sh as the kubelet runs it, with a stand-in curl that
// serves a "release": the binary it fetched is kept only when its SHA-256 is the pinned one.
func TestRetrierRunsOnlyThePinnedRelease(t *testing.T) {
	release := []byte("#!/bin/sh\necho gpuci v0.4.0\n")
	sum := sha256.Sum256(release)
	for name, tc := range map[string]struct {
		sha string
		ok  bool
	}{
		"the pinned sum":      {hex.EncodeToString(sum[:]), true},
		"a release rewritten": {hex.EncodeToString(make([]byte, 32)), false},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin, gpuci := filepath.Join(dir, "bin"), filepath.Join(dir, "gpuci-dir")
			require.NoError(t, os.MkdirAll(bin, 0o755))
			require.NoError(t, os.MkdirAll(gpuci, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), release, 0o644))
			// curl -fsSL --retry 3 -o <file> <url>: the release's bytes, when asked for the pinned version's binary.
			fake := "#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) out=$2; shift;; esac; shift; done\n" +
				"[ \"$1\" = \"https://github.com/luxfi/lux-gpu-ci/releases/download/v0.4.0/gpuci_linux_amd64\" ] || { echo \"asked for $1\" >&2; exit 22; }\n" +
				"cp " + filepath.Join(dir, "release") + " \"$out\"\n"
			require.NoError(t, os.WriteFile(filepath.Join(bin, "curl"), []byte(fake), 0o755))
			d := k8s.RetrierDeployment(config.Retrier{GpuciVersion: "v0.4.0", GpuciSHA256: tc.sha}, config.GitHub{Org: "luxfi"}, []config.GPUPool{config.DefaultPool()}, nil)
			init := d.Spec.Template.Spec.InitContainers[0]
			cmd := exec.Command(init.Command[0], init.Command[1:]...)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
			for _, e := range init.Env {
				v := e.Value
				if e.Name == "DIR" {
					v = gpuci
				}
				cmd.Env = append(cmd.Env, e.Name+"="+v)
			}
			out, err := cmd.CombinedOutput()
			if !tc.ok {
				require.Error(t, err, "a binary whose sum is not the pin: the pod never starts gpuci: %s", out)
				info, statErr := os.Stat(filepath.Join(gpuci, "gpuci"))
				assert.True(t, statErr != nil || info.Mode()&0o111 == 0, "and it is not left runnable")
				return
			}
			require.NoError(t, err, "%s", out)
			run, err := exec.Command(filepath.Join(gpuci, "gpuci")).Output()
			require.NoError(t, err)
			assert.Equal(t, "gpuci v0.4.0\n", string(run))
		})
	}
}
