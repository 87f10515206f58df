package hack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upstreamCitation marks a line that cites another project's file: beside its version
// ("at v1.14.1", "gha-runner-scale-set-0.14.2", "containerd 2.1.4") or as upstream's.
var upstreamCitation = regexp.MustCompile(`(?i)upstream|\bv?\d+\.\d+\.\d+|\bv\d+\.\d+\b`)

// Every path of this repository that a comment or a doc names exists: comments carry the
// design here, and a pointer to a moved or deleted file sends the reader nowhere. A path is
// text that starts with one of the repository's top-level directories (stack/kubernetes_test.go,
// internal/jobhooks; a Go file may be named without its .go). Not ours, so not checked: a
// file cited within two lines of an upstream version or of the word upstream, either one
// level deep (bazel-remote's config/s3.go at v2.6.1: which project's, only the words say) or
// under a directory two deep this repository does not have (Karpenter's
// cmd/controller/main.go at v1.14.1: we have cmd/gpuci; a cited cmd/gpuci/... is checked),
// a template (Pulumi.<stack>.yaml), and
// the indented entries of a tree listing in the docs, which are relative to their parent.
func TestNamedPathsExist(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..")
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	require.NoError(t, err, "git ls-files")
	files := strings.Fields(string(out))
	tops := map[string]bool{}
	for _, f := range files {
		if dir, _, ok := strings.Cut(f, "/"); ok {
			tops[regexp.QuoteMeta(dir)] = true
		}
	}
	require.Contains(t, tops, "stack", "the repository's directories")
	// Our tree's directories two deep (k8s/arc, cmd/gpuci): a cited path under one of them is
	// ours whatever its line says, and is checked.
	twoDeep := map[string]bool{}
	for _, f := range files {
		if parts := strings.SplitN(f, "/", 3); len(parts) == 3 {
			twoDeep[parts[0]+"/"+parts[1]] = true
		}
	}
	var alts []string
	for d := range tops {
		alts = append(alts, d)
	}
	path := regexp.MustCompile(`(?:^|[^\w./@:-])((?:` + strings.Join(alts, "|") + `)/[\w./-]*\w)(\.?[<*{$]?)`)

	checked := 0
	for _, f := range files {
		ext := filepath.Ext(f)
		if (ext != ".go" && ext != ".md") || strings.HasPrefix(f, "k8s/arc/") || strings.Contains(f, "/testdata/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		lines := strings.Split(string(b), "\n")
		for i, line := range lines {
			text := line
			if ext == ".go" {
				at := strings.Index(line, "//")
				if at < 0 {
					continue
				}
				text = line[at:]
			}
			window := strings.Join(lines[max(0, i-2):i+1], " ")
			for _, m := range path.FindAllStringSubmatch(text, -1) {
				p := strings.TrimSuffix(m[1], ".")
				if strings.TrimPrefix(m[2], ".") != "" {
					continue // a template
				}
				if parts := strings.SplitN(p, "/", 3); upstreamCitation.MatchString(window) && (len(parts) < 3 || !twoDeep[parts[0]+"/"+parts[1]]) {
					continue // another project's file, under a directory we do not have
				}
				if ext == ".md" && strings.HasPrefix(strings.TrimLeft(line, " "), p) && strings.HasPrefix(line, " ") {
					continue // a tree listing's entry, relative to its parent
				}
				checked++
				_, err := os.Stat(filepath.Join(root, p))
				if err != nil {
					_, err = os.Stat(filepath.Join(root, p+".go"))
				}
				assert.NoError(t, err, "%s:%d names %s, which is not in the repository: point it at where that moved", f, i+1, p)
			}
		}
	}
	assert.Greater(t, checked, 150, "the comments and docs name many of the repository's files")
}
