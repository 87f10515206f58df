// Package render is `make render`: it runs the real program under the test mocks with a
// stack's real configuration and writes what the program declares, deterministically, with
// no cloud credentials, plugins or network:
//
//	DIR/resources.json          every resource, sorted by URN: urn, type, name, parent,
//	                            dependsOn, inputs (secrets as "[secret]", policy documents
//	                            as objects)
//	DIR/k8s/<kind>-<name>.yaml  each Kubernetes object the program declares itself
//	DIR/k8s/release-<name>.yaml each Helm release: chart, repo, version, namespace, values
//	DIR/k8s/helm/<release>/     with Charts: the release rendered through the Helm SDK
//
// An invalid configuration returns the same error `pulumi up` gives, and writes nothing.
package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/chartrender"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/mockstack"
	"github.com/luxfi/lux-gpu-ci/stack"
	"github.com/luxfi/lux-gpu-ci/versions"
)

// Options say what to render.
type Options struct {
	// ProjectDir holds Pulumi.yaml and Pulumi.<Stack>.yaml.
	ProjectDir, Stack string
	// Out is the output directory; it is replaced as a whole.
	Out string
	// Charts names the releases to render through their charts ("all" for every one).
	Charts []string
}

// Run renders the stack into opts.Out.
func Run(opts Options) error {
	cfg, secretKeys, err := config.ReadStackFileOffline(config.StackFile(opts.ProjectDir, opts.Stack))
	if err != nil {
		return err
	}

	m := mockstack.New(config.Project, opts.Stack)
	if err := m.Run(stack.ProgramWith(stack.GpuciStandIn), cfg, secretKeys); err != nil {
		return err
	}
	files, err := build(m.Resources(), opts.Charts)
	if err != nil {
		return err
	}
	return writeAll(opts.Out, files)
}

// resourceEntry is one line of resources.json.
type resourceEntry struct {
	URN       string         `json:"urn"`
	Type      string         `json:"type"`
	Name      string         `json:"name"`
	Parent    string         `json:"parent,omitempty"`
	DependsOn []string       `json:"dependsOn"`
	Inputs    map[string]any `json:"inputs"`
}

// jsonStringInputs are inputs holding a JSON document, written out as objects.
var jsonStringInputs = []string{"policy", "assumeRolePolicy", "eventPattern"}

func build(resources []mockstack.Registration, charts []string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var entries []resourceEntry
	releases := map[string]mockstack.Registration{}
	for _, r := range resources {
		deps := slices.Clone(r.Raw.RegisterRPC.GetDependencies())
		sort.Strings(deps)
		inputs := map[string]any{}
		for k, v := range r.Raw.Inputs {
			inputs[string(k)] = plain(v, slices.Contains(jsonStringInputs, string(k)))
		}
		entries = append(entries, resourceEntry{
			URN: r.URN, Type: r.Type, Name: r.Name, Parent: r.Raw.RegisterRPC.GetParent(),
			DependsOn: append([]string{}, slices.Compact(deps)...), Inputs: inputs,
		})

		switch {
		case r.Type == "kubernetes:helm.sh/v3:Release":
			name, _ := inputs["name"].(string)
			releases[name] = r
			release := map[string]any{
				"chart": inputs["chart"], "version": inputs["version"], "namespace": inputs["namespace"], "values": inputs["values"],
			}
			if repo, ok, _ := unstructured.NestedString(inputs, "repositoryOpts", "repo"); ok {
				release["repo"] = repo
			}
			if err := putYAML(files, filepath.Join("k8s", "release-"+name+".yaml"), release); err != nil {
				return nil, err
			}
		case strings.HasPrefix(r.Type, "kubernetes:") && r.Type != "pulumi:providers:kubernetes":
			obj := kubernetesObject(r, inputs)
			if err := putYAML(files, filepath.Join("k8s", objectFileName(obj)), obj); err != nil {
				return nil, err
			}
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].URN < entries[j].URN })
	b, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return nil, err
	}
	files["resources.json"] = append(b, '\n')

	if err := renderCharts(files, releases, charts); err != nil {
		return nil, err
	}
	return files, nil
}

// kubernetesObject is the object as the provider would send it; a Secret's values are
// redacted but its keys kept.
func kubernetesObject(r mockstack.Registration, inputs map[string]any) map[string]any {
	obj := map[string]any{}
	for k, v := range inputs {
		obj[k] = v
	}
	for _, field := range []string{"stringData", "data"} {
		if v, ok := r.Raw.Inputs[resource.PropertyKey(field)]; ok && v.IsSecret() {
			redacted := map[string]any{}
			if inner := v.SecretValue().Element; inner.IsObject() {
				for k := range inner.ObjectValue() {
					redacted[string(k)] = config.SecretPlaceholder
				}
			}
			obj[field] = redacted
		}
	}
	return obj
}

func objectFileName(obj map[string]any) string {
	kind, _ := obj["kind"].(string)
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	parts := []string{strings.ToLower(kind)}
	if ns, _, _ := unstructured.NestedString(obj, "metadata", "namespace"); ns != "" {
		parts = append(parts, ns)
	}
	return strings.Join(append(parts, name), "-") + ".yaml"
}

// plain converts an input to plain JSON values: secrets become "[secret]", resource
// references their URN, and (with parseJSON) JSON documents held in strings objects.
func plain(v resource.PropertyValue, parseJSON bool) any {
	switch {
	case v.IsSecret():
		return config.SecretPlaceholder
	case v.IsOutput():
		if !v.OutputValue().Known {
			return "[unknown]"
		}
		return plain(v.OutputValue().Element, parseJSON)
	case v.IsResourceReference():
		return string(v.ResourceReferenceValue().URN)
	case v.IsObject():
		out := map[string]any{}
		for k, x := range v.ObjectValue() {
			out[string(k)] = plain(x, false)
		}
		return out
	case v.IsArray():
		out := []any{}
		for _, x := range v.ArrayValue() {
			out = append(out, plain(x, false))
		}
		return out
	case v.IsString() && parseJSON:
		var doc any
		if err := json.Unmarshal([]byte(v.StringValue()), &doc); err == nil {
			return doc
		}
	}
	return v.Mappable()
}

// renderCharts renders the named releases (or all) through their charts.
func renderCharts(files map[string][]byte, releases map[string]mockstack.Registration, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if slices.Contains(names, "all") {
		names = nil
		for n := range releases {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	cache, err := os.MkdirTemp("", "gpuci-charts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	for _, name := range names {
		r, ok := releases[name]
		if !ok {
			return fmt.Errorf("--charts: the stack has no Helm release %q (it has %s)", name, strings.Join(slices.Sorted(maps.Keys(releases)), ", "))
		}
		dir, err := chartrender.Locate(chartOf(r), cache)
		if err != nil {
			return fmt.Errorf("--charts: release %s: %w", name, err)
		}
		values, _ := plain(r.Raw.Inputs["values"], false).(map[string]any)
		ns, _ := r.Inputs["namespace"].(string)
		objs, err := chartrender.Render(dir, name, ns, values)
		if err != nil {
			return fmt.Errorf("--charts: release %s: %w", name, err)
		}
		for _, o := range objs {
			file := strings.ToLower(o.Kind) + "-" + o.Name + ".yaml"
			files[filepath.Join("k8s", "helm", name, file)] = []byte(o.YAML + "\n")
		}
	}
	return nil
}

// chartOf is the chart a release installs: the pinned chart of that name and version when it
// is one (so a Go module can supply it offline), else the release's own reference (a mirror
// registry or a local directory from helmCharts).
func chartOf(r mockstack.Registration) versions.Chart {
	c := versions.Chart{}
	c.Chart, _ = r.Inputs["chart"].(string)
	c.Version, _ = r.Inputs["version"].(string)
	c.Repo, _, _ = unstructured.NestedString(r.Inputs, "repositoryOpts", "repo")
	if pinned, ok := versions.ChartNamed(c.Name()); ok && pinned.Version == c.Version {
		return pinned
	}
	return c
}

func putYAML(files map[string][]byte, name string, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	files[name] = b
	return nil
}

// writeAll replaces out with files, writing to a sibling directory first so a failure
// leaves out as it was.
func writeAll(out string, files map[string][]byte) error {
	tmp := out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	for name, b := range files {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
