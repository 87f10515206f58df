package hack_test

// The repository's layout by direction: what we ship (the Pulumi program, the gpuci CLI)
// never links test support, and the CLI does not link the Pulumi SDK it has no use for.

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/luxfi/lux-gpu-ci"

func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps %s", pkg)
	lines := strings.Fields(string(out))
	require.Contains(t, lines, module+"/config", "%s links the configuration", pkg)
	return lines
}

func TestShippedBinariesLinkNoTestSupport(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{".", "./cmd/gpuci"} {
		for _, d := range deps(t, bin) {
			for _, forbidden := range []string{module + "/internal/testsupport", module + "/hack", module + "/e2e", "github.com/stretchr/testify"} {
				assert.False(t, d == forbidden || strings.HasPrefix(d, forbidden+"/"), "%s links %s", bin, d)
			}
		}
	}
}

func TestGpuciLinksNoPulumiSDK(t *testing.T) {
	t.Parallel()
	for _, d := range deps(t, "./cmd/gpuci") {
		assert.False(t, strings.HasPrefix(d, "github.com/pulumi/"), "gpuci links %s: keep Pulumi types out of config and the CLI", d)
	}
}
