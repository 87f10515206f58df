package hack_test

// hack/bootstrap.sh, run as `make bootstrap` runs it.

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// make bootstrap names every missing prerequisite before it touches anything.
func TestBootstrapNamesMissingPrerequisites(t *testing.T) {
	cmd := exec.Command("bash", "bootstrap.sh")
	cmd.Env = []string{"PATH=/nonexistent", "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "bootstrap must stop: %s", out)
	for _, want := range []string{"pulumi is not installed", "go is not installed", "aws is not installed", "kubectl is not installed",
		"AWS_REGION is not set", "GITHUB_ORG is not set", "neither GITHUB_PAT nor GITHUB_APP_ID is set"} {
		assert.Contains(t, string(out), want)
	}
}
