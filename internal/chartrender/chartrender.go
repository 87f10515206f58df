// Package chartrender renders Helm charts client-side with the Helm SDK (what `helm template`
// does) and finds charts that Go modules carry, so tests and `make render` can check our
// values against the real upstream charts.
package chartrender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/internal/gomodule"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// KubeVersion is the Kubernetes version charts are rendered for: a new stack's (versions).
var KubeVersion = func() chartutil.KubeVersion {
	major, minor, _ := strings.Cut(versions.KubernetesDefault, ".")
	return chartutil.KubeVersion{Version: "v" + versions.KubernetesDefault + ".0", Major: major, Minor: minor}
}()

// Object is one rendered manifest.
type Object struct {
	Kind, Name, Namespace string
	YAML                  string
}

// Locate returns a local directory holding the chart: from its Go module when it has one,
// a local directory as is, otherwise pulled from its OCI registry into cacheDir (this needs
// network).
func Locate(c versions.Chart, cacheDir string) (string, error) {
	if c.Module != "" {
		mod, err := gomodule.Find(c.Module)
		if err != nil {
			return "", fmt.Errorf("chart %s %s: %w", c.Chart, c.Version, err)
		}
		return filepath.Join(mod.Dir, c.Path), nil
	}
	if fi, err := os.Stat(c.Chart); err == nil && fi.IsDir() {
		return c.Chart, nil
	}
	if !strings.HasPrefix(c.Chart, "oci://") || c.Repo != "" {
		return "", fmt.Errorf("chart %s %s cannot be had: no Go module holds it, and only OCI charts are pulled", c.Chart, c.Version)
	}
	dest := filepath.Join(cacheDir, strings.NewReplacer("/", "_", ":", "_").Replace(c.Chart)+"-"+c.Version)
	dir := filepath.Join(dest, c.Name())
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	reg, err := registry.NewClient()
	if err != nil {
		return "", err
	}
	pulled, err := reg.Pull(strings.TrimPrefix(c.Chart, "oci://")+":"+c.Version, registry.PullOptWithChart(true))
	if err != nil {
		return "", fmt.Errorf("chart %s %s cannot be had (no Go module holds it, and pulling it failed): %w", c.Chart, c.Version, err)
	}
	if err := chartutil.Expand(dest, bytes.NewReader(pulled.Chart.Data)); err != nil {
		return "", fmt.Errorf("chart %s %s: %w", c.Chart, c.Version, err)
	}
	return dir, nil
}

// Render renders a chart directory as release in namespace with values, as `helm template`
// does (the template engine, client-side, for KubeVersion), passing the values through JSON
// first, as Pulumi sends them. It returns the chart's objects without its hooks and NOTES.
//
// It calls Helm's engine rather than its install action: the action links Helm's Kubernetes
// client, whose kustomize plugin loader forces external (cgo) linking of every binary that
// includes it, which tripled the link time of the tests.
func Render(chartDir, release, namespace string, values map[string]any) ([]Object, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	var vals map[string]any
	b, err := json.Marshal(values)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &vals); err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", chartDir, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = KubeVersion
	if kv := chrt.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart %s requires kubeVersion %s, which Kubernetes %s is not", chartDir, kv, caps.KubeVersion.String())
	}
	top, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", chartDir, err)
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", chartDir, err)
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", chartDir, err)
	}
	var out []Object
	for _, m := range manifests {
		for _, doc := range releaseutil.SplitManifests(m.Content) {
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name, Namespace string
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return nil, fmt.Errorf("rendering %s: %s: %w", chartDir, m.Name, err)
			}
			if meta.Kind != "" {
				out = append(out, Object{Kind: meta.Kind, Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, YAML: doc})
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("chart %s rendered nothing", chartDir)
	}
	return out, nil
}
