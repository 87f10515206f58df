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
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// The real pulumi-eks that make e2e runs is the one go.mod pins: @pulumi/eks, @pulumi/aws
// (whose plugin version the fake AWS reports) and @pulumi/kubernetes (whose plugin version
// hack/e2e-tools.sh installs) in hack/eks-plugin's lockfile match go.mod.
func TestE2EPluginPinsAgree(t *testing.T) {
	lock := npmLock(t, "../hack/eks-plugin/package-lock.json")
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}",
		"github.com/pulumi/pulumi-eks/sdk/v2", "github.com/pulumi/pulumi-aws/sdk/v6", "github.com/pulumi/pulumi-kubernetes/sdk/v4").Output()
	require.NoError(t, err)
	mods := strings.Fields(string(out))
	require.Len(t, mods, 3)
	for i, pkg := range []string{"@pulumi/eks", "@pulumi/aws", "@pulumi/kubernetes"} {
		assert.Equal(t, mods[i], "v"+lock[pkg], "%s in hack/eks-plugin/package-lock.json", pkg)
	}

	// The e2e upgrades a stack the previous pulumi-eks deployed to the pin: an older
	// @pulumi/eks, with the same @pulumi/aws and @pulumi/kubernetes (the plugins the e2e has).
	previous := npmLock(t, "../hack/eks-plugin-previous/package-lock.json")
	assert.Equal(t, -1, semver.Compare("v"+previous["@pulumi/eks"], mods[0]), "hack/eks-plugin-previous holds a pulumi-eks before the pin (%s): bump it to the old pin when the pin moves", previous["@pulumi/eks"])
	for _, pkg := range []string{"@pulumi/aws", "@pulumi/kubernetes"} {
		assert.Equal(t, lock[pkg], previous[pkg], "%s in hack/eks-plugin-previous/package-lock.json", pkg)
	}
	assert.Equal(t, mods[1], "v"+fakeaws.PluginVersion, "the fake AWS plugin reports go.mod's pulumi-aws version")
	tools, err := os.ReadFile("../hack/e2e-tools.sh")
	require.NoError(t, err)
	assert.Contains(t, string(tools), "K8S_PLUGIN_VERSION="+strings.TrimPrefix(mods[2], "v"), "the kubernetes plugin the e2e builds")
}

// npmLock is a package-lock.json's installed versions, by package name.
func npmLock(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	require.NoError(t, json.Unmarshal(b, &lock))
	out := map[string]string{}
	for k, p := range lock.Packages {
		if name, ok := strings.CutPrefix(k, "node_modules/"); ok && !strings.Contains(name, "/node_modules/") {
			out[name] = p.Version
		}
	}
	return out
}

// The Karpenter that make e2e runs (hack/karpenter, a module of its own) is the one go.mod
// pins: the provider and core modules at the program's versions, and the same two with each
// other (the provider module's own go.mod requires its core).
func TestE2EKarpenterPinsAgree(t *testing.T) {
	program, err := modfile.Parse("go.mod", must(os.ReadFile("../go.mod")), nil)
	require.NoError(t, err)
	tool, err := modfile.Parse("go.mod", must(os.ReadFile("../hack/karpenter/go.mod")), nil)
	require.NoError(t, err)
	versions := func(f *modfile.File) map[string]string {
		out := map[string]string{}
		for _, r := range f.Require {
			out[r.Mod.Path] = r.Mod.Version
		}
		return out
	}
	want, got := versions(program), versions(tool)
	for _, m := range []string{"github.com/aws/karpenter-provider-aws", "sigs.k8s.io/karpenter"} {
		require.NotEmpty(t, want[m], "go.mod requires %s", m)
		assert.Equal(t, want[m], got[m], "%s in hack/karpenter/go.mod", m)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The compiler cache server make e2e builds and runs is the version the stack deploys.
func TestE2ECompilerCacheServerIsTheDeployedOne(t *testing.T) {
	tools, err := os.ReadFile("../hack/e2e-tools.sh")
	require.NoError(t, err)
	assert.Contains(t, string(tools), "\nBAZEL_REMOTE_VERSION="+versions.CompilerCacheServerVersion+" ", "hack/e2e-tools.sh builds versions.CompilerCacheServerVersion")
}
