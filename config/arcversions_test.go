package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// ARC's two charts move together: a scale-set chart of another minor than the controller's
// is refused (the controller would delete every scale set), a patch apart is not.
func TestARCChartsShareTheirMinorVersion(t *testing.T) {
	parse := func(charts string) error {
		cfg := testkit.With(testkit.StackConfig(t, "dev"), "helmCharts", charts)
		_, err := config.Parse("dev", func(k string) (string, bool) { v, ok := cfg[k]; return v, ok }, nil)
		return err
	}
	require.NoError(t, parse(`{}`), "the pins agree")
	require.NoError(t, parse(`{"gha-runner-scale-set": {"chart": "oci://mirror.example/gha-runner-scale-set", "version": "0.14.3"}}`), "a patch apart")

	err := parse(`{"gha-runner-scale-set": {"chart": "oci://mirror.example/gha-runner-scale-set", "version": "0.15.0"}}`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:helmCharts: ARC's charts are at 0.14.2 (gha-runner-scale-set-controller) and 0.15.0 (gha-runner-scale-set)")
	assert.Contains(t, err.Error(), "move gha-runner-scale-set-controller and gha-runner-scale-set together")

	// A local chart is at the version its Chart.yaml says.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: gha-runner-scale-set-controller\nversion: 0.15.1\n"), 0o644))
	err = parse(`{"gha-runner-scale-set-controller": {"chart": "` + dir + `"}}`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ARC's charts are at 0.15.1 (gha-runner-scale-set-controller) and 0.14.2 (gha-runner-scale-set)")
	require.NoError(t, parse(`{"gha-runner-scale-set-controller": {"chart": "`+dir+`"}, "gha-runner-scale-set": {"chart": "oci://mirror.example/gha-runner-scale-set", "version": "0.15.0"}}`), "moved together")

	err = parse(`{"gha-runner-scale-set-controller": {"chart": "` + filepath.Join(dir, "missing") + `"}}`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds no readable Chart.yaml")
}

func TestMajorMinor(t *testing.T) {
	for in, want := range map[string]string{"0.14.2": "0.14", "v1.2.3": "1.2", "0.15": "0.15", "canary-abc": "canary-abc"} {
		assert.Equal(t, want, config.MajorMinor(in), in)
	}
}
