package chartrender_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/chartrender"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// A chart from its Go module renders as `helm template` would, for the stack's Kubernetes.
func TestRenderAChartFromItsModule(t *testing.T) {
	dir, err := chartrender.Locate(versions.NvidiaDevicePluginChart, t.TempDir())
	require.NoError(t, err)
	objs, err := chartrender.Render(dir, "nvidia-device-plugin", "nvidia-device-plugin", map[string]any{})
	require.NoError(t, err)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.Kind+"/"+o.Name)
		assert.NotContains(t, o.YAML, "NOTES", "no NOTES.txt")
	}
	assert.Contains(t, kinds, "DaemonSet/nvidia-device-plugin")
	assert.Equal(t, "v"+versions.KubernetesDefault+".0", chartrender.KubeVersion.Version)
}

// Only Go modules, local directories and OCI registries are places a chart comes from.
func TestLocateNamesAChartItCannotHave(t *testing.T) {
	_, err := chartrender.Locate(versions.Chart{Chart: "some-chart", Repo: "https://charts.example.com", Version: "1.0.0"}, t.TempDir())
	assert.ErrorContains(t, err, "chart some-chart 1.0.0 cannot be had")
	dir := t.TempDir()
	got, err := chartrender.Locate(versions.Chart{Chart: dir}, t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, dir, got, "a local directory is used as is")
}
