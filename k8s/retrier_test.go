package k8s_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/k8s"
)

// The in-cluster retrier: gpuci retry --org on the system nodes, at the restricted level, its
// token from the Secret in its own namespace, its gpuci the stack's own build, fetched from
// the stack's bucket by the AWS CLI with the pod's Pod Identity.
func TestRetrierDeployment(t *testing.T) {
	pool := config.DefaultPool()
	pool.OnDemandRetry = true
	container := config.DefaultPool()
	container.Name, container.RunnerScaleSetName, container.JobForm = "gpu-c", "lux-gpu-c", config.JobFormContainer
	pools := []config.GPUPool{pool, pool.RetryTwin(), container}
	d := k8s.RetrierDeployment(config.Retrier{}, config.GitHub{Org: "luxfi"}, pools, testCache, k8s.Gpuci{Stored: strings.Repeat("ab", 32)}, "us-west-2")
	assert.Equal(t, wellknown.RetrierNamespace, d.Namespace)
	spec := d.Spec.Template.Spec
	assert.Equal(t, wellknown.RetrierServiceAccount, spec.ServiceAccountName)
	assert.Equal(t, map[string]string{wellknown.SystemNodeLabel: wellknown.SystemNodeValue}, spec.NodeSelector)
	assertRestricted(t, "the retrier", d.Spec.Template)
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, []string{"/opt/gpuci/gpuci"}, c.Command)
	assert.Equal(t, []string{"retry", "--org", "luxfi", "--scale-sets", "lux-gpu-t4,lux-gpu-t4-on-demand,lux-gpu-c",
		"--pod-namespaces", "arc-runners,arc-jobs-gpu-c", "--gpu-pools", "gpu-spot,gpu-spot-on-demand,gpu-c", "--every", "1m"}, c.Args,
		"every pool's and twin's scale set, and where their runner and job pods run")
	require.Len(t, c.Env, 1)
	assert.Equal(t, "GITHUB_TOKEN", c.Env[0].Name)
	assert.Equal(t, wellknown.RetrierTokenSecret, c.Env[0].ValueFrom.SecretKeyRef.Name, "from the Secret in its own namespace")
	assert.Equal(t, "public.ecr.aws/aws-cli/aws-cli:2.36.7", c.Image, "the image its gpuci was fetched in, pinned: the pod holds the organization's token")
	require.Len(t, spec.InitContainers, 1)
	assert.Equal(t, "public.ecr.aws/aws-cli/aws-cli:2.36.7", spec.InitContainers[0].Image, "the CLI reads Pod Identity's credentials")
}

// The init container's command, run by sh as the kubelet runs it, with a stand-in curl that
// serves a release, or a stand-in aws that serves the stack's bucket: the binary it fetched is
// kept only when its SHA-256 is the pinned one.
func TestRetrierRunsOnlyThePinnedGpuci(t *testing.T) {
	binary := []byte("#!/bin/sh\necho gpuci v0.4.0\n")
	sum := sha256.Sum256(binary)
	pinned, rewritten := hex.EncodeToString(sum[:]), hex.EncodeToString(make([]byte, 32))
	// curl -fsSL --retry 3 -o <file> <url>: the bytes, when asked for the pinned version's binary.
	curl := "#!/bin/sh\nwhile [ $# -gt 1 ]; do case $1 in -o) out=$2; shift;; esac; shift; done\n" +
		"[ \"$1\" = \"https://github.com/luxfi/lux-gpu-ci/releases/download/v0.4.0/gpuci_linux_amd64\" ] || { echo \"asked for $1\" >&2; exit 22; }\n" +
		"cp \"$SERVED\" \"$out\"\n"
	// aws s3api get-object --bucket <b> --key <k> <file>: the bytes, when asked for the stack's
	// bucket and the build's key.
	aws := "#!/bin/sh\n[ \"$1 $2 $3 $4 $5 $6\" = \"s3api get-object --bucket the-stack-bucket --key gpuci/linux-amd64/" + pinned + "\" ] || { echo \"asked for $*\" >&2; exit 255; }\n" +
		"cp \"$SERVED\" \"$7\"\n"
	for name, tc := range map[string]struct {
		gpuci k8s.Gpuci
		ok    bool
	}{
		"the pinned release":    {k8s.Gpuci{Release: config.Gpuci{Version: "v0.4.0", SHA256: pinned}}, true},
		"a release rewritten":   {k8s.Gpuci{Release: config.Gpuci{Version: "v0.4.0", SHA256: rewritten}}, false},
		"the stack's own build": {k8s.Gpuci{Stored: pinned}, true},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin, gpuci := filepath.Join(dir, "bin"), filepath.Join(dir, "gpuci-dir")
			require.NoError(t, os.MkdirAll(bin, 0o755))
			require.NoError(t, os.MkdirAll(gpuci, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "served"), binary, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(bin, "curl"), []byte(curl), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(bin, "aws"), []byte(aws), 0o755))
			d := k8s.RetrierDeployment(config.Retrier{}, config.GitHub{Org: "luxfi"}, []config.GPUPool{config.DefaultPool()}, nil, tc.gpuci, "us-west-2")
			init := d.Spec.Template.Spec.InitContainers[0]
			cmd := exec.Command(init.Command[0], init.Command[1:]...)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "SERVED=" + filepath.Join(dir, "served")}
			for _, e := range init.Env {
				v := e.Value
				switch {
				case e.Name == "DIR":
					v = gpuci
				case e.ValueFrom != nil:
					require.Equal(t, k8s.RetrierBucketConfigMap, e.ValueFrom.ConfigMapKeyRef.Name, "the bucket's name, from the retrier's own ConfigMap")
					v = "the-stack-bucket"
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
