package hack_test

// The gpuci CLI as a person runs it: --stack defaults to the selected Pulumi stack, never to a
// silent "dev", and `gpuci version` names its pins.

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// gpuci runs `go run ./cmd/gpuci args…` with PATH holding only go and, if selected is not
// empty, a stand-in pulumi whose selected stack is selected.
func gpuci(t *testing.T, selected string, args ...string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	if selected != "" {
		script := "#!/bin/sh\n[ \"$1 $2\" = \"stack --show-name\" ] && echo " + selected + " && exit 0\nexit 1\n"
		require.NoError(t, os.WriteFile(filepath.Join(bin, "pulumi"), []byte(script), 0o755))
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command("go", append([]string{"run", "./cmd/gpuci"}, args...)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+filepath.Dir(goBin)+":/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestGpuciStackIsTheSelectedOne(t *testing.T) {
	fixtures := testkit.FixtureDir(t)
	out, err := gpuci(t, "", "quota", "--project", fixtures)
	require.Error(t, err, out)
	assert.Contains(t, out, "no --stack given and no Pulumi stack selected", "never a silent dev")

	out, err = gpuci(t, "prod", "quota", "--project", fixtures)
	require.NoError(t, err, out)
	assert.Contains(t, out, "gpuci: stack prod (the selected Pulumi stack)")

	out, err = gpuci(t, "prod", "quota", "--project", fixtures, "--stack", "dev")
	require.NoError(t, err, out)
	assert.Contains(t, out, "spot\tL-3819A6DF\t8\tgpu-spot,gpu-spot-container", "--stack wins over the selection")
	assert.NotContains(t, out, "selected Pulumi stack")
}

func TestGpuciVersionNamesThePins(t *testing.T) {
	out, err := gpuci(t, "", "version")
	require.NoError(t, err, out)
	assert.Contains(t, out, "gpuci ")
	assert.Contains(t, out, "ARC "+versions.ARCControllerChart.Version)
	assert.Contains(t, out, "Karpenter "+versions.KarpenterChart.Version)
}
