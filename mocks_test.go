package main

// Test helpers around internal/mockstack, which runs the real program under Pulumi's mocks.

import (
	"strings"
	"testing"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/fakeaws"
	"github.com/luxfi/lux-gpu-ci/internal/mockstack"
	"github.com/luxfi/lux-gpu-ci/stack"
)

const (
	testAccount   = mockstack.Account
	testClusterSG = mockstack.ClusterSG
	// testToken stands in for a GitHub PAT; tests check it never leaves a secret.
	testToken = "ghp_TESTTOKEN0123456789"
)

var testEndpoint = mockstack.Endpoint("us-west-2")

// secretKeys are the config keys a real stack stores with --secret.
var secretKeys = []string{"lux-gpu-ci:githubToken", "lux-gpu-ci:githubAppPrivateKey"}

type registered = mockstack.Registration

type mocks struct {
	*mockstack.Mocks
	// azs overrides the region's availability zones; secretKeys the secret config keys.
	azs        []fakeaws.AZ
	secretKeys []string
}

func newMocks() *mocks {
	return &mocks{Mocks: mockstack.New(config.Project, "dev"), secretKeys: secretKeys}
}

// run executes the real program (stack.Program) under mocks with the given config.
func (m *mocks) run(cfg map[string]string) error {
	m.AZs = m.azs
	return m.Run(stack.Program, cfg, m.secretKeys)
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

func names(rs []registered) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// stackConfig reads Pulumi.<stack>.yaml as the Pulumi CLI hands it to a program, plus the
// GitHub token a real stack holds encrypted (testToken).
func stackConfig(t *testing.T, stack string) map[string]string {
	t.Helper()
	cfg, _, err := config.ReadStackFile("Pulumi." + stack + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg["lux-gpu-ci:githubToken"] = testToken
	return cfg
}

// unset, as a value for with, removes the key.
const unset = "<unset>"

// with returns a copy of cfg with the given keys set. Project keys may be given without the
// "lux-gpu-ci:" prefix.
func with(cfg map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range cfg {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i]
		if !strings.Contains(k, ":") {
			k = config.Project + ":" + k
		}
		if kv[i+1] == unset {
			delete(out, k)
		} else {
			out[k] = kv[i+1]
		}
	}
	return out
}
