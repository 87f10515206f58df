package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// validateARCVersions checks that ARC's two charts share a major.minor version. ARC's
// controller deletes every AutoscalingRunnerSet whose app.kubernetes.io/version label (the
// scale-set chart's version) differs from its own build in major.minor
// (controllers/actions.github.com/autoscalingrunnerset_controller.go, the IsVersionAllowed
// branch, and apis/actions.github.com/v1alpha1/version.go, at gha-runner-scale-set-0.14.2),
// and its cleanup removes the scale set from GitHub: a half-bumped pair would delete every
// scale set on each reconcile while `pulumi up` reports success.
func (c *Config) validateARCVersions(p *parser) {
	controller, err := c.chartVersion(versions.ARCControllerChart)
	if err != nil {
		p.fail(KeyHelmCharts, err.Error(), helmChartsExample)
		return
	}
	scaleSet, err := c.chartVersion(versions.ARCScaleSetChart)
	if err != nil {
		p.fail(KeyHelmCharts, err.Error(), helmChartsExample)
		return
	}
	c.arcVersion = controller
	if controller != "" && scaleSet != "" && MajorMinor(controller) != MajorMinor(scaleSet) {
		p.failHow(KeyHelmCharts, fmt.Sprintf("ARC's charts are at %s (%s) and %s (%s): ARC's controller deletes every scale set of another minor version, and GitHub's with it",
			controller, versions.ARCControllerChart.Name(), scaleSet, versions.ARCScaleSetChart.Name()),
			"move gha-runner-scale-set-controller and gha-runner-scale-set together (versions/versions.go, or both helmCharts overrides)")
	}
}

// chartVersion is the version of one of the stack's charts as configured: the pin, an
// override's version, or a local override's Chart.yaml.
func (c *Config) chartVersion(pin versions.Chart) (string, error) {
	o, overridden := c.HelmCharts[pin.Name()]
	switch {
	case !overridden:
		return pin.Version, nil
	case o.Version != "":
		return o.Version, nil
	case !filepath.IsAbs(o.Chart):
		return "", nil // validateHelmCharts refuses it
	}
	b, err := os.ReadFile(filepath.Join(o.Chart, "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("%s: %q holds no readable Chart.yaml: %v", pin.Name(), o.Chart, err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(b, &meta); err != nil || meta.Version == "" {
		return "", fmt.Errorf("%s: %s/Chart.yaml has no version", pin.Name(), o.Chart)
	}
	return meta.Version, nil
}

// MajorMinor is "0.14" for "0.14.2" (and for "v0.14.2"): what ARC compares.
func MajorMinor(version string) string {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}

// ARCVersion is the version of ARC the stack installs: its controller chart's, which its
// scale-set chart shares in major.minor (validateARCVersions, which read it).
func (c *Config) ARCVersion() string { return c.arcVersion }
