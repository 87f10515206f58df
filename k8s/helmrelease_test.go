package k8s_test

// k8s.HelmRelease against the SDK it stands in for: both sources read with go/ast, the SDK's
// from the module cache at the version go.mod pins. It links neither SDK (that is the point
// of HelmRelease). It lives here, not in k8s/, because any test of package k8s links the
// whole program's SDKs into one more test binary (7 s of every make test); stack's links
// them anyway.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/gomodule"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// structFields maps a struct's pulumi tags to the Go type of each field, as source text
// (interface{} spelled any).
func structFields(t *testing.T, file, name string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	var fields map[string]string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != name {
			return true
		}
		fields = map[string]string{}
		for _, fld := range ts.Type.(*ast.StructType).Fields.List {
			if fld.Tag == nil {
				continue
			}
			tag, err := strconv.Unquote(fld.Tag.Value)
			require.NoError(t, err)
			key := reflect.StructTag(tag).Get("pulumi")
			typ := strings.ReplaceAll(exprString(fld.Type), "interface{}", "any")
			fields[key] = typ
		}
		return false
	})
	require.NotNil(t, fields, "no struct %s in %s", name, file)
	return fields
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.MapType:
		return "map[" + exprString(e.Key) + "]" + exprString(e.Value)
	case *ast.InterfaceType:
		return "interface{}"
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "?"
}

// ourHelmRelease is k8s/helmrelease.go, from this package's directory.
var ourHelmRelease = filepath.Join("..", "k8s", "helmrelease.go")

func sdkDir(t *testing.T) string {
	t.Helper()
	sdk, err := gomodule.Find("github.com/pulumi/pulumi-kubernetes/sdk/v4")
	require.NoError(t, err, "the pinned pulumi-kubernetes SDK is in the module cache (go mod download)")
	return filepath.Join(sdk.Dir, "go", "kubernetes", "helm", "v3")
}

// Every input HelmRelease sends is the SDK's, under the same name and of the same type.
func TestHelmReleaseInputsAreTheSDKs(t *testing.T) {
	ours := structFields(t, ourHelmRelease, "helmReleaseInputs")
	sdk := structFields(t, filepath.Join(sdkDir(t), "release.go"), "releaseArgs")
	require.GreaterOrEqual(t, len(ours), 10)
	for key, typ := range ours {
		want, ok := sdk[key]
		if !assert.True(t, ok, "input %q is not one of the SDK's Release inputs", key) {
			continue
		}
		if key == "repositoryOpts" {
			// An object on the wire: ours a map holding only repo, the SDK's a struct.
			assert.Equal(t, "*RepositoryOpts", want)
			assert.Equal(t, "map[string]string", typ)
			repo := structFields(t, filepath.Join(sdkDir(t), "pulumiTypes.go"), "RepositoryOpts")
			assert.Equal(t, "*string", repo["repo"], "RepositoryOpts.repo")
			continue
		}
		assert.Equal(t, want, typ, "input %q", key)
	}
}

// The SDK's NewRelease registers this type token and always sends compat "true"; so does
// newHelmRelease (stack/kubernetes_test.go checks every registered release).
func TestHelmReleaseRegistersAsTheSDKDoes(t *testing.T) {
	src := readFile(t, filepath.Join(sdkDir(t), "release.go"))
	assert.Contains(t, src, `args.Compat = pulumi.StringPtr("true")`)
	assert.Contains(t, src, `ctx.RegisterResource("kubernetes:helm.sh/v3:Release", name, args, &resource, opts...)`)
	ours := readFile(t, ourHelmRelease)
	assert.Contains(t, ours, `const helmReleaseType = "kubernetes:helm.sh/v3:Release"`)
	assert.Contains(t, ours, `args.Compat = pulumi.StringPtr("true")`)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// Helm's keep policy, as the pinned Helm reads it: the annotation and value wellknown names,
// and an uninstall that leaves the objects carrying it (pkg/action/uninstall.go filters them
// out of what it deletes).
func TestHelmKeepPolicyIsHelms(t *testing.T) {
	mod, err := gomodule.Find("helm.sh/helm/v3")
	require.NoError(t, err)
	helm := mod.Dir
	policy := readFile(t, filepath.Join(helm, "pkg", "kube", "resource_policy.go"))
	assert.Contains(t, policy, `const ResourcePolicyAnno = "`+wellknown.HelmResourcePolicyAnnotation+`"`)
	assert.Contains(t, policy, `const KeepPolicy = "`+wellknown.HelmKeep+`"`)
	uninstall := readFile(t, filepath.Join(helm, "pkg", "action", "uninstall.go"))
	assert.Contains(t, uninstall, "filesToKeep, filesToDelete := filterManifestsToKeep(files)")
}
