package hack_test

// The docs' commands are the code's: every gpuci command a page shows, with each of its flags,
// is one gpuci has (asked of the built CLI, `gpuci -h` and `gpuci <command> -h`); every make
// verb is a Makefile target and every VAR= it is given is read by the Makefile or the script
// it runs; every namespace a kubectl line names is one the program creates or Karpenter
// runs in. A page that drifted from the code (a flag renamed, a namespace moved) fails here,
// not in front of the person following it.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
	"github.com/luxfi/lux-gpu-ci/internal/wellknown"
)

// docCode is one line of code in the docs: from a fenced block or an inline code span.
type docCode struct{ file, line string }

// docsCode is every line of code in README.md and docs/*.md.
func docsCode(t *testing.T) []docCode {
	t.Helper()
	root := testkit.RepoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	fenced := regexp.MustCompile("(?s)```.*?```")
	inline := regexp.MustCompile("`([^`\n]+)`")
	var code []docCode
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		text := string(b)
		rel, _ := filepath.Rel(root, page)
		for _, block := range fenced.FindAllString(text, -1) {
			for _, l := range strings.Split(block, "\n") {
				code = append(code, docCode{rel, strings.TrimSpace(l)})
			}
		}
		for _, m := range inline.FindAllStringSubmatch(fenced.ReplaceAllString(text, ""), -1) {
			code = append(code, docCode{rel, strings.TrimSpace(m[1])})
		}
	}
	return code
}

// commandAt matches a command where a shell would run it: at the start of a line (after a
// prompt or variable assignments), or after &&, ;, | or $( — not a word in prose.
func commandAt(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?:^|^\$ |&& |; |\| |\$\()(?:[A-Z_]+=\S+\s+)*` + name + `(?:\s+([^;&|)#]*))?`)
}

// gpuciFlags is every command gpuci lists in -h, with the flags its own -h lists.
func gpuciFlags(t *testing.T) map[string][]string {
	t.Helper()
	help := func(args ...string) string {
		out, _ := exec.Command(gpuciBin, args...).CombinedOutput() // -h exits 2 by the flag package's rule
		return string(out)
	}
	commands := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z][a-z-]+)\s{2,}`).FindAllStringSubmatch(help("-h"), -1) {
		for _, f := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(help(m[1], "-h"), -1) {
			commands[m[1]] = append(commands[m[1]], f[1])
		}
		if commands[m[1]] == nil {
			commands[m[1]] = []string{}
		}
	}
	require.Contains(t, commands, "retry", "gpuci -h lists its commands")
	require.Contains(t, commands["retry"], "run-id", "gpuci retry -h lists its flags")
	return commands
}

func TestDocsRunOnlyGpuciCommandsAndFlagsItHas(t *testing.T) {
	t.Parallel()
	commands := gpuciFlags(t)
	flag := regexp.MustCompile(`(?:^|\s)--?([a-z][a-z0-9-]*)`)
	seen, flagsSeen := 0, 0
	for _, c := range docsCode(t) {
		for _, m := range commandAt(`gpuci ([a-z][a-z-]*)`).FindAllStringSubmatch(c.line, -1) {
			seen++
			flags, ok := commands[m[1]]
			if !assert.True(t, ok, "%s: `%s` runs gpuci %s, which gpuci has no command for", c.file, c.line, m[1]) {
				continue
			}
			for _, f := range flag.FindAllStringSubmatch(m[2], -1) {
				flagsSeen++
				assert.True(t, f[1] == "h" || slices.Contains(flags, f[1]),
					"%s: `%s` gives gpuci %s --%s, which it does not take (its flags: %v)", c.file, c.line, m[1], f[1], flags)
			}
		}
	}
	t.Logf("%d found, %d flags", seen, flagsSeen)
	assert.Greater(t, seen, 60, "the docs' gpuci command lines found (108 when this test was written)")
	// A capture that stopped reaching the flags would check none of them.
	assert.Greater(t, flagsSeen, 15, "the flags those lines give (about 23 when this was written)")
}

func TestDocsRunOnlyMakeVerbsAndVariablesItHas(t *testing.T) {
	t.Parallel()
	root := testkit.RepoRoot(t)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(makefile), -1) {
		targets = append(targets, m[1])
	}
	// A variable given on make's command line is read by the Makefile or, through the
	// environment, by the script a verb runs.
	readers := string(makefile)
	scripts, err := filepath.Glob(filepath.Join(root, "hack", "*.sh"))
	require.NoError(t, err)
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		require.NoError(t, err)
		readers += string(b)
	}
	variable := regexp.MustCompile(`(?:^|\s)([A-Z][A-Z0-9_]*)=`)
	verb := regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	seen, varsSeen := 0, 0
	for _, c := range docsCode(t) {
		for _, m := range commandAt(`make`).FindAllStringSubmatch(c.line, -1) {
			words := strings.Fields(m[1])
			verbs := slices.DeleteFunc(slices.Clone(words), func(w string) bool { return strings.Contains(w, "=") || strings.HasPrefix(w, "-") })
			if len(verbs) == 0 || !verb.MatchString(verbs[0]) {
				continue // "make" in a sentence that happens to follow a code span's start
			}
			seen++
			assert.Contains(t, targets, verbs[0], "%s: `%s` runs make %s, which the Makefile has no target for", c.file, c.line, verbs[0])
			for _, v := range variable.FindAllStringSubmatch(m[1], -1) {
				varsSeen++
				// $(V) or ${V…} or $V, or a default the Makefile gives it (V ?=).
				read := regexp.MustCompile(`\$\(` + v[1] + `\)|\$\{` + v[1] + `\b|\$` + v[1] + `\b|\b` + v[1] + ` \?=`).MatchString(readers)
				assert.True(t, read, "%s: `%s` gives make %s=, which neither the Makefile nor hack/*.sh reads", c.file, c.line, v[1])
			}
		}
	}
	t.Logf("%d found, %d variables", seen, varsSeen)
	assert.Greater(t, seen, 60, "the docs' make command lines found (125 when this test was written)")
	assert.Greater(t, varsSeen, 10, "the variables those lines give (about 18 when this was written)")
}

func TestDocsKubectlNamespacesAreTheStacks(t *testing.T) {
	t.Parallel()
	// The namespaces the program creates (k8s/), Karpenter's, and a container-form pool's
	// jobs' namespace as the docs write it for any pool.
	namespaces := []string{
		wellknown.KarpenterNamespace, wellknown.DevicePluginNamespace, wellknown.ARCNamespace, wellknown.RunnersNamespace,
		wellknown.WarmNamespace, wellknown.CompilerCacheNamespace, wellknown.RetrierNamespace,
		wellknown.ContainerJobsNamespace("<pool>"),
	}
	namespace := regexp.MustCompile(`(?:-n|--namespace)[ =]+(\S+)`)
	seen := 0
	for _, c := range docsCode(t) {
		for _, m := range commandAt(`kubectl`).FindAllStringSubmatch(c.line, -1) {
			for _, ns := range namespace.FindAllStringSubmatch(m[1], -1) {
				seen++
				assert.Contains(t, namespaces, ns[1], "%s: `%s` looks in namespace %s, which the stack does not run anything in", c.file, c.line, ns[1])
			}
		}
	}
	t.Logf("%d found", seen)
	assert.Greater(t, seen, 10, "the docs' kubectl lines that name a namespace (15 when this test was written)")
}
