package stack_test

// make render: the program under mocks with a stack's real config, written out.

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/crdvalidation"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/stack/render"
)

func renderDev(t *testing.T, charts ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	require.NoError(t, render.Run(render.Options{ProjectDir: testkit.FixtureDir(t), Stack: "dev", Out: out, Charts: charts}))
	return out
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = b
		return err
	}))
	return files
}

// The dev stack rendered twice: the renders agree byte for byte, and the first is checked
// for what it must hold.
func TestRenderDev(t *testing.T) {
	out := renderDev(t)
	t.Run("deterministic", func(t *testing.T) {
		a, b := readTree(t, out), readTree(t, renderDev(t))
		require.NotEmpty(t, a)
		require.Equal(t, len(a), len(b))
		for name, content := range a {
			assert.True(t, bytes.Equal(content, b[name]), "%s differs between two renders", name)
		}
	})
	t.Run("every resource", func(t *testing.T) { checkRenderedResources(t, out) })
	t.Run("the Kubernetes objects", func(t *testing.T) { checkRenderedKubernetesObjects(t, out) })
}

func checkRenderedResources(t *testing.T, out string) {
	var entries []struct {
		URN, Type, Name, Parent string
		DependsOn               []string
		Inputs                  map[string]any
	}
	raw, err := os.ReadFile(filepath.Join(out, "resources.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &entries))

	assert.Len(t, entries, len(runDev(t).programResources()), "one entry per resource the program declares")
	types := map[string]bool{}
	for i, e := range entries {
		types[e.Type] = true
		if i > 0 {
			assert.Less(t, entries[i-1].URN, e.URN, "sorted by URN")
		}
		assert.True(t, strings.HasPrefix(e.URN, "urn:pulumi:dev::lux-gpu-ci::"), e.URN)
		assert.True(t, strings.HasSuffix(e.URN, "::"+e.Name), e.URN)
	}
	for _, typ := range []string{"aws:ec2/vpc:Vpc", "eks:index:Cluster", "aws:iam/policy:Policy", "aws:sqs/queue:Queue",
		"kubernetes:helm.sh/v3:Release", "kubernetes:karpenter.sh/v1:NodePool", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"} {
		assert.True(t, types[typ], "resources.json has %s", typ)
	}
	for _, e := range entries {
		switch e.Type {
		case "aws:iam/policy:Policy":
			_, isObject := e.Inputs["policy"].(map[string]any)
			assert.True(t, isObject, "policy documents are written as objects")
		case "kubernetes:core/v1:Secret":
			assert.Equal(t, "[secret]", e.Inputs["stringData"], "secrets are redacted")
		case "aws:secretsmanager/secretVersion:SecretVersion":
			assert.Equal(t, "[secret]", e.Inputs["secretString"], "registry credentials are redacted")
		}
	}
	var nodePoolDeps [][]string
	for _, e := range entries {
		if e.Name == "gpu-ci-gpu-spot-nodepool" {
			nodePoolDeps = append(nodePoolDeps, e.DependsOn)
		}
	}
	require.Len(t, nodePoolDeps, 1, "resources.json has gpu-spot's NodePool once")
	assert.Contains(t, nodePoolDeps[0], "urn:pulumi:dev::lux-gpu-ci::lux-gpu-ci:k8s:GPUCI$lux-gpu-ci:k8s:GPUPool$kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::gpu-ci-gpu-spot-nodeclass")
	for name, content := range readTree(t, out) {
		assert.NotContains(t, string(content), "ghp_", "%s holds no token", name)
		assert.NotContains(t, string(content), "dckr_pat_", "%s holds no registry credential", name)
	}
}

// The Kubernetes files parse, and the Karpenter objects pass Karpenter's CRDs.
func checkRenderedKubernetesObjects(t *testing.T, out string) {
	v, err := crdvalidation.Karpenter()
	require.NoError(t, err)
	files := readTree(t, filepath.Join(out, "k8s"))
	for _, want := range []string{"nodepool-gpu-spot.yaml", "ec2nodeclass-gpu-spot.yaml", "namespace-arc-systems.yaml",
		"secret-arc-runners-arc-github-credentials.yaml", "release-karpenter.yaml", "release-lux-gpu-t4.yaml"} {
		assert.Contains(t, files, want)
	}
	for name, content := range files {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(content, &obj), name)
		if strings.HasPrefix(name, "nodepool-") || strings.HasPrefix(name, "ec2nodeclass-") {
			assert.Empty(t, v.Validate(obj), "%s passes Karpenter's CRD", name)
		}
		if strings.HasPrefix(name, "secret-") {
			assert.Equal(t, map[string]any{"github_token": "[secret]"}, obj["stringData"], "keys kept, values redacted")
		}
		if strings.HasPrefix(name, "release-") {
			for _, k := range []string{"chart", "version", "namespace", "values"} {
				assert.Contains(t, obj, k, name)
			}
		}
	}
}

func TestRenderChartsFromTheModuleProxy(t *testing.T) {
	out := renderDev(t, "karpenter", "nvidia-device-plugin")
	files := readTree(t, filepath.Join(out, "k8s", "helm"))
	assert.Contains(t, files, "karpenter/deployment-karpenter.yaml")
	assert.Contains(t, files, "nvidia-device-plugin/daemonset-nvidia-device-plugin.yaml")
	assert.Contains(t, string(files["karpenter/deployment-karpenter.yaml"]), "replicas: 1")

	err := render.Run(render.Options{ProjectDir: testkit.FixtureDir(t), Stack: "dev", Out: filepath.Join(t.TempDir(), "x"), Charts: []string{"karpenterr"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no Helm release "karpenterr"`)
}

func TestRenderRefusesBadConfigAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(testkit.FixtureDir(t), "Pulumi.dev.yaml"))
	require.NoError(t, err)
	b = append(b, []byte("  lux-gpu-ci:azCount: 1\n")...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Pulumi.dev.yaml"), b, 0o644))
	out := filepath.Join(dir, "out")
	require.NoError(t, os.Mkdir(out, 0o755))
	err = render.Run(render.Options{ProjectDir: dir, Stack: "dev", Out: out})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lux-gpu-ci:azCount: must be 2 or 3")
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing is written")
}
