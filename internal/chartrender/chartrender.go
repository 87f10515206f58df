// Package chartrender renders Helm charts client-side with the Helm SDK (what `helm template`
// does) and finds charts that Go modules carry, so tests and `gpuci render` can check our
// values against the real upstream charts.
package chartrender

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/versions"
)

// KubeVersion is the Kubernetes version charts are rendered for.
var KubeVersion = chartutil.KubeVersion{Version: "v1.35.0", Major: "1", Minor: "35"}

// Object is one rendered manifest.
type Object struct {
	Kind, Name, Namespace string
	YAML                  string
}

// ModuleDir returns a Go module's directory in the module cache, downloading it through the
// module proxy if needed. mod is "path" (the version go.mod requires) or "path@version".
func ModuleDir(mod string) (string, error) {
	args := []string{"list", "-m", "-json", mod}
	if strings.Contains(mod, "@") {
		args = []string{"mod", "download", "-json", mod}
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("module %s is not available: %s", mod, info.Error)
	}
	return info.Dir, nil
}

// Locate returns a local directory holding the chart: from its Go module when it has one,
// otherwise pulled from its repository into cacheDir (this needs network).
func Locate(c versions.Chart, cacheDir string) (string, error) {
	if c.Module != "" {
		dir, err := ModuleDir(c.Module)
		if err != nil {
			return "", fmt.Errorf("chart %s %s: %w", c.Chart, c.Version, err)
		}
		return filepath.Join(dir, c.Path), nil
	}
	if fi, err := os.Stat(c.Chart); err == nil && fi.IsDir() {
		return c.Chart, nil
	}
	dest := filepath.Join(cacheDir, strings.NewReplacer("/", "_", ":", "_").Replace(c.Chart)+"-"+c.Version)
	name := filepath.Base(c.Chart)
	if fi, err := os.Stat(filepath.Join(dest, name)); err == nil && fi.IsDir() {
		return filepath.Join(dest, name), nil
	}
	reg, err := registry.NewClient()
	if err != nil {
		return "", err
	}
	cfg := &action.Configuration{RegistryClient: reg}
	pull := action.NewPullWithOpts(action.WithConfig(cfg))
	pull.Settings = cli.New()
	pull.Version, pull.RepoURL = c.Version, c.Repo
	pull.Untar, pull.UntarDir, pull.DestDir = true, dest, dest
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return "", err
	}
	if _, err := pull.Run(c.Chart); err != nil {
		return "", fmt.Errorf("chart %s %s cannot be had (no Go module holds it, and pulling it failed): %w", c.Chart, c.Version, err)
	}
	return filepath.Join(dest, name), nil
}

// Render renders a chart directory as release in namespace with values, passing the values
// through JSON first, as Pulumi sends them.
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
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = release, namespace
	kv := KubeVersion
	install.KubeVersion = &kv
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", chartDir, err)
	}
	var out []Object
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", chartDir, err)
		}
		if meta.Kind != "" {
			out = append(out, Object{Kind: meta.Kind, Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, YAML: doc})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("chart %s rendered nothing", chartDir)
	}
	return out, nil
}
