package e2e

// The real pulumi-eks that make e2e runs is the one go.mod pins. (No build tag: make test
// runs this check; only the files with the e2e build tag need the e2e tools.)

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
)

// The real pulumi-eks that make e2e runs is the one go.mod pins: @pulumi/eks, @pulumi/aws
// (whose plugin version the fake AWS reports) and @pulumi/kubernetes (whose plugin version
// hack/e2e-tools.sh installs) in hack/eks-plugin's lockfile match go.mod.
func TestE2EPluginPinsAgree(t *testing.T) {
	b, err := os.ReadFile("../hack/eks-plugin/package-lock.json")
	require.NoError(t, err)
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	require.NoError(t, json.Unmarshal(b, &lock))
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}",
		"github.com/pulumi/pulumi-eks/sdk/v2", "github.com/pulumi/pulumi-aws/sdk/v6", "github.com/pulumi/pulumi-kubernetes/sdk/v4").Output()
	require.NoError(t, err)
	mods := strings.Fields(string(out))
	require.Len(t, mods, 3)
	for i, pkg := range []string{"@pulumi/eks", "@pulumi/aws", "@pulumi/kubernetes"} {
		assert.Equal(t, mods[i], "v"+lock.Packages["node_modules/"+pkg].Version, "%s in hack/eks-plugin/package-lock.json", pkg)
	}
	assert.Equal(t, mods[1], "v"+fakeaws.PluginVersion, "the fake AWS plugin reports go.mod's pulumi-aws version")
	tools, err := os.ReadFile("../hack/e2e-tools.sh")
	require.NoError(t, err)
	assert.Contains(t, string(tools), "K8S_PLUGIN_VERSION="+strings.TrimPrefix(mods[2], "v"), "the kubernetes plugin the e2e builds")
}
