package hack_test

// CI runs the whole e2e: .ci/run refuses to start when a switch that stops or skips part of it
// is in its environment, before it builds or runs anything.

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCIRefusesASkipSwitch(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	// The environment a developer runs make test in may hold a switch itself.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "E2E_STOP_AFTER=") || strings.HasPrefix(kv, "E2E_SKIP")
	})
	// go and make, were they reached, leave a mark.
	for _, tool := range []string{"go", "make"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, tool), []byte("#!/bin/sh\necho \"$0 $*\" >>"+ran+"\n"), 0o755))
	}
	for _, skip := range []string{"E2E_STOP_AFTER=hostile", "E2E_SKIP_WARM=1"} {
		cmd := exec.Command("bash", filepath.Join("..", ".ci", "run"))
		cmd.Env = append(slices.Clone(env), "PATH="+bin+":/usr/bin:/bin", skip)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s: %s", skip, out)
		assert.Equal(t, 2, exit.ExitCode(), skip)
		assert.Contains(t, string(out), "refuses to start", skip)
		assert.NoFileExists(t, ran, "%s: nothing was built or run", skip)
	}
	// Without one, it starts (and reaches the toolchain).
	cmd := exec.Command("bash", filepath.Join("..", ".ci", "run"))
	cmd.Env = append(env, "PATH="+bin+":/usr/bin:/bin")
	_, _ = cmd.CombinedOutput()
	assert.FileExists(t, ran, "without a skip switch, CI runs")
}
