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

// Layers, lowest first: the base (configuration, version pins, shared names, test support),
// the two layers of the program (infra: AWS; k8s: the cluster), the program that wires them
// (stack), and what runs it (the CLIs, tools and tests). A package imports from its own layer
// and those below, never above — tests included: test support that imported the program
// would test it with itself.
var layers = [][]string{
	{"config", "versions", "instancetypes", "pricing", "internal"},
	{"infra", "k8s"},
	{"stack"},
	{"main", "identity", "cmd", "hack", "e2e"},
}

// layerOf is the layer of a package of the module (by its first path element), -1 if none.
func layerOf(pkg string) int {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	if rel == "" {
		rel = "main"
	}
	first, _, _ := strings.Cut(rel, "/")
	for i, l := range layers {
		for _, name := range l {
			if first == name {
				return i
			}
		}
	}
	return -1
}

func TestNoPackageImportsALayerAboveIt(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-tags", "e2e", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list ./...")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Greater(t, len(lines), 20, "the module's packages")
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg := fields[0]
		at := layerOf(pkg)
		require.GreaterOrEqual(t, at, 0, "%s is in no layer: add its directory to layers", pkg)
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			assert.LessOrEqual(t, layerOf(imp), at, "%s imports %s, a layer above it", pkg, imp)
		}
	}
}
