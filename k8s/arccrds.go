package k8s

// ARC's CRDs ship in the controller chart's crds/, which Helm installs once and never
// upgrades or deletes: bumping the chart would leave the old CRDs (and a new controller
// writing fields they prune). So the program manages them itself, from the chart of the
// version it installs, and the controller's release skips them: an ARC bump is a CRD update
// in the same `pulumi up`. The program never deletes one (deleting a CRD deletes every object
// of its kind): on destroy they stay, empty, and go with the EKS cluster (runners.go).

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sync"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/internal/apiobject"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// arcCharts is ARC's two charts at the pinned version, copied verbatim from upstream (they
// are in no Go module; k8s/arc/README.md says from where and how to refresh them). The
// program reads the controller chart's CRDs from it; tests render both charts.
//
//go:embed arc/gha-runner-scale-set-controller/Chart.yaml arc/gha-runner-scale-set-controller/crds/*.yaml
var arcCharts embed.FS

const arcControllerDir = "arc/gha-runner-scale-set-controller"

// ARCCRDs are the CRDs of the ARC controller chart c as the program declares them (each as
// its unstructured object): for a local chart directory (a helmCharts override), its crds/;
// for a chart from the registry, the copy in k8s/arc, which must be of the same version.
//
// Their schemas' descriptions are left out: they are three quarters of the 1.6 MB, serve
// only `kubectl explain`, and would otherwise sit twice in the stack's state, which Pulumi
// rewrites after every step of an update. Validation is unchanged.
func ARCCRDs(c versions.Chart) ([]map[string]any, error) {
	if c.Version == "" {
		return readARCCRDs(os.DirFS(c.Chart), ".", c.Chart)
	}
	have, err := chartVersion(arcCharts, path.Join(arcControllerDir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if have != c.Version {
		return nil, fmt.Errorf("ARC controller chart %s: the program holds ARC's CRDs of chart %s (k8s/arc); refresh k8s/arc to %s (see its README), or point helmCharts at a local chart directory", c.Version, have, c.Version)
	}
	embeddedOnce.Do(func() { embeddedCRDs, embeddedErr = readARCCRDs(arcCharts, arcControllerDir, "k8s/arc") })
	return embeddedCRDs, embeddedErr
}

// The copy in k8s/arc is parsed once per process (the tests run the program many times).
var (
	embeddedOnce sync.Once
	embeddedCRDs []map[string]any
	embeddedErr  error
)

func readARCCRDs(fsys fs.FS, dir, where string) ([]map[string]any, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("ARC controller chart %s has no crds/*.yaml", where)
	}
	slices.Sort(files)
	var crds []map[string]any
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		// One CRD per file, after an optional leading document separator.
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(bytes.TrimPrefix(bytes.TrimSpace(b), []byte("---")), &crd); err != nil {
			return nil, fmt.Errorf("ARC CRD %s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
			return nil, fmt.Errorf("ARC CRD %s: not a named CustomResourceDefinition", f)
		}
		u, err := apiobject.ToMap(crd)
		if err != nil {
			return nil, err
		}
		for _, v := range u["spec"].(map[string]any)["versions"].([]any) {
			dropDescriptions(v.(map[string]any)["schema"])
		}
		crds = append(crds, u)
	}
	return crds, nil
}

// dropDescriptions removes the schema keyword "description" (a string) everywhere below v;
// a property named description has a schema (an object) as its value and stays.
func dropDescriptions(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["description"].(string); ok {
			delete(v, "description")
		}
		for _, x := range v {
			dropDescriptions(x)
		}
	case []any:
		for _, x := range v {
			dropDescriptions(x)
		}
	}
}

func chartVersion(fsys fs.FS, chartYAML string) (string, error) {
	b, err := fs.ReadFile(fsys, chartYAML)
	if err != nil {
		return "", err
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(b, &meta); err != nil {
		return "", fmt.Errorf("%s: %w", chartYAML, err)
	}
	return meta.Version, nil
}

// newARCCRDs declares ARC's CRDs, through opts' provider (k8s.go: server-side apply, which
// the 1.2 MB AutoscalingRunnerSet CRD needs — client-side apply's annotation cannot hold it —
// and adopting CRDs an earlier Helm install left).
func newARCCRDs(ctx *pulumi.Context, name string, chart versions.Chart, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	crds, err := ARCCRDs(chart)
	if err != nil {
		return nil, err
	}
	var out []pulumi.Resource
	for _, crd := range crds {
		md := crd["metadata"].(map[string]any)
		crdName := md["name"].(string)
		annotations := map[string]string{
			// The program is these CRDs' one authority: server-side apply takes over the
			// fields an earlier Helm install of crds/ owns, instead of failing on them.
			"pulumi.com/patchForce": "true",
			// One manager for every resource that ever applies them (wellknown says why).
			"pulumi.com/patchFieldManager": wellknown.ARCCRDFieldManager,
		}
		if upstream, ok := md["annotations"].(map[string]any); ok {
			for k, v := range upstream {
				annotations[k] = fmt.Sprint(v)
			}
		}
		meta := &metav1.ObjectMetaArgs{Name: pulumi.String(crdName), Annotations: pulumi.ToStringMap(annotations)}
		r, err := apiextensions.NewCustomResource(ctx, name+"-"+crdName, &apiextensions.CustomResourceArgs{
			ApiVersion:  pulumi.String("apiextensions.k8s.io/v1"),
			Kind:        pulumi.String("CustomResourceDefinition"),
			Metadata:    meta,
			OtherFields: kubernetes.UntypedArgs{"spec": crd["spec"]},
		}, opts...)
		if err != nil {
			return nil, fmt.Errorf("ARC CRD %s: %w", crdName, err)
		}
		out = append(out, r)
	}
	return out, nil
}
