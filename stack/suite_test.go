package stack_test

// The suite's helpers: the real program (stack.Program) under Pulumi's mocks with a stack's
// real configuration, and lookups into what it registered. One test package for the whole
// program, split by layer, so the big SDKs are linked once.

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/mockstack"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/stack"
)

// Stand-ins the fake AWS gives the program.
const (
	testAccount   = fakeaws.Account
	testClusterSG = fakeaws.ClusterSG
	// testQueue is the dev stack's interruption queue: its name prefix plus the autoname.
	testQueue = "lux-gpu-ci-" + fakeaws.AutonameSuffix
)

var testEndpoint = fakeaws.FakeEndpoint("us-west-2")

type registered = mockstack.Registration

type mocks struct {
	*mockstack.Mocks
	// secretKeys are the config keys stored as secrets.
	secretKeys []string
}

func newMocks() *mocks { return newStackMocks("dev") }

// newStackMocks runs the program as the given stack.
func newStackMocks(stack string) *mocks {
	return &mocks{Mocks: mockstack.New(config.Project, stack), secretKeys: testkit.SecretKeys}
}

// run executes the real program (stack.ProgramWith, its gpuci build stood in for) under mocks
// with the given config.
func (m *mocks) run(cfg map[string]string) error {
	return m.Run(stack.ProgramWith(stack.GpuciStandIn), cfg, m.secretKeys)
}

func (m *mocks) all(typ string) []registered { return m.All(typ) }

func (m *mocks) programResources() []registered { return m.Resources() }

// one returns the single registration of a type, failing the test unless there is exactly one.
func (m *mocks) one(t *testing.T, typ string) registered {
	t.Helper()
	rs := m.all(typ)
	if len(rs) != 1 {
		t.Fatalf("want exactly one %s, got %d: %v", typ, len(rs), names(rs))
	}
	return rs[0]
}

// get returns the registration with this type and name.
func (m *mocks) get(t *testing.T, typ, name string) registered {
	t.Helper()
	for _, r := range m.all(typ) {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %s named %s; have %v", typ, name, names(m.all(typ)))
	return registered{}
}

// decodeInputs reads a Kubernetes object's inputs into its upstream Go type (out).
func decodeInputs(t *testing.T, r registered, out any) {
	t.Helper()
	b, err := json.Marshal(r.Inputs)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}

func names(rs []registered) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// runDev runs the program with the test dev stack plus overrides. The program is
// deterministic and the tests only read what it registered, so each distinct configuration
// runs once per test binary (a run costs ~0.2 s of both cores: the big CRDs go through the
// mocks' property marshalling); TestDevRunsAreShared proves a second run records the same.
func runDev(t *testing.T, overrides ...string) *mocks {
	t.Helper()
	key := strings.Join(overrides, "\x00")
	devRunsMu.Lock()
	defer devRunsMu.Unlock()
	if m, ok := devRuns[key]; ok {
		return m
	}
	m := newMocks()
	require.NoError(t, m.run(testkit.With(testkit.StackConfig(t, "dev"), overrides...)))
	devRuns[key] = m
	return m
}

var (
	devRunsMu sync.Mutex
	devRuns   = map[string]*mocks{}
)

// runRepoStack runs the program on the repository's own Pulumi.<stack>.yaml (not a test
// fixture): once per stack and test binary, as runDev does.
func runRepoStack(t *testing.T, stack string) *mocks {
	t.Helper()
	devRunsMu.Lock()
	defer devRunsMu.Unlock()
	key := "\x01repo:" + stack
	if m, ok := devRuns[key]; ok {
		return m
	}
	m := newStackMocks(stack)
	require.NoError(t, m.run(testkit.RepoStackConfig(t, stack)), "Pulumi.%s.yaml must validate", stack)
	devRuns[key] = m
	return m
}

// repoStacks are the stacks the repository's Pulumi.<stack>.yaml files define.
func repoStacks(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testkit.RepoRoot(t), "Pulumi.*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 2, "dev and prod at least")
	var stacks []string
	for _, f := range files {
		stacks = append(stacks, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "Pulumi."), ".yaml"))
	}
	return stacks
}

func releaseNamed(t *testing.T, m *mocks, name string) registered {
	t.Helper()
	for _, r := range m.all("kubernetes:helm.sh/v3:Release") {
		if r.Inputs["name"] == name {
			return r
		}
	}
	t.Fatalf("no Helm release named %s", name)
	return registered{}
}

// path digs into nested maps: path(v, "a", "b") is v["a"]["b"].
func path(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	sort.Strings(out)
	return out
}

func unique(xs []string) []string {
	return slices.Compact(sorted(xs))
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A shared run is what a fresh one registers: same resources, same inputs.
func TestDevRunsAreShared(t *testing.T) {
	shared := runDev(t)
	fresh := newMocks()
	require.NoError(t, fresh.run(testkit.StackConfig(t, "dev")))
	byKey := func(rs []registered) map[string]registered {
		out := map[string]registered{}
		for _, r := range rs {
			out[r.Key()] = r
		}
		return out
	}
	want, got := byKey(fresh.programResources()), byKey(shared.programResources())
	require.NotEmpty(t, want)
	require.ElementsMatch(t, keys(want), keys(got), "the shared run registered other resources")
	for k, r := range want {
		require.Equal(t, r.Inputs, got[k].Inputs, "%s: a test changed the shared run's inputs", k)
	}
}
