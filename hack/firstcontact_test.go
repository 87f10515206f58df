package hack_test

// First contact, counted: an empty organization with an AWS account and a laptop that has Go,
// git and make, taken from the README to a green smoke job and ten repositories running GPU
// jobs. The walk does only what the README, the docs and the bootstrap's own output tell it
// to, against stand-ins for aws, pulumi, gh and kubectl (bootstrap_test's), and counts each
// thing a person has to do: a command typed, a value chosen or copied, a page's step in
// GitHub, a file committed. What it counts comes from those texts, not from a list of its
// own: a prerequisite the bootstrap adds, a value the README adds, a line the hand-off adds,
// each moves the count.

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/testsupport/fakegithubapp"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// oneTimeActionsGoal is #50's goal: under 20 one-time actions.
const oneTimeActionsGoal = 20

// action is one thing a person does, and the text that told them to.
type action struct{ what, source string }

// walk is the newcomer's machine and what they did on it.
type walk struct {
	t         *testing.T
	work      string // a repository of theirs, where the smoke test goes
	installed string // where the tools they install go (first on PATH)
	base      string // the laptop's own tools: everything but the four bootstrap needs
	standIns  string // bootstrap_test's stand-ins, which "installing" copies from
	home      string // their home directory
	github    *fakegithubapp.GitHub
	env       map[string]string // what they exported
	output    string            // everything their commands printed
	actions   []action
}

func (w *walk) do(what, source string) { w.actions = append(w.actions, action{what, source}) }

// run runs a command in their copy, as they would, and counts it.
func (w *walk) run(cmdline, source string) (string, error) {
	w.t.Helper()
	w.do("run "+cmdline, source)
	c := exec.Command("bash", "-c", cmdline)
	c.Dir = testkit.RepoRoot(w.t) // their copy: the repository as it is
	c.Env = []string{"PATH=" + w.installed + ":" + w.base, "HOME=" + w.home, "GPUCI=" + gpuciBin,
		"GITHUB_SERVER_URL=" + w.github.URL, "GITHUB_API_URL=" + w.github.URL + "/api/v3"}
	for k, v := range w.env {
		c.Env = append(c.Env, k+"="+v)
	}
	pipe, err := c.StdoutPipe()
	require.NoError(w.t, err)
	c.Stderr = c.Stdout
	require.NoError(w.t, c.Start())
	// Read as they would, and press what it tells them to press in their browser.
	var out strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if m := openPage.FindStringSubmatch(line); m != nil {
			w.do("open the page it printed, press Create GitHub App", "bootstrap (gpuci github-app): "+line)
			resp, err := w.github.PressCreate(m[1])
			require.NoError(w.t, err)
			require.Equal(w.t, http.StatusFound, resp.StatusCode)
		}
		if m := pressInstall.FindStringSubmatch(line); m != nil {
			w.do("press Install", "bootstrap (gpuci github-app): "+line)
			require.NoError(w.t, w.github.Install(m[1]))
		}
	}
	err = c.Wait()
	w.output += out.String()
	return out.String(), err
}

var (
	openPage     = regexp.MustCompile(`^Open (http://127\.0\.0\.1:\d+/) in a browser`)
	pressInstall = regexp.MustCompile(`press Install on \S+/apps/([^/]+)/installations/new$`)
)

// install puts a stand-in on their PATH, as installing the tool would.
func (w *walk) install(tool, source string) {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.standIns, tool))
	require.NoError(w.t, err, "the walk has no stand-in for %s, which %s asks for", tool, source)
	require.NoError(w.t, os.WriteFile(filepath.Join(w.installed, tool), b, 0o755))
	w.do("install "+tool, source)
}

// needGH installs gh and logs it in, unless done: as an admin of their copy (the stand-in's
// FAKE_GH_ADMIN is true unless told otherwise).
func (w *walk) needGH(source string) {
	if w.has("gh") {
		return
	}
	w.install("gh", source)
	w.do("gh auth login", source)
	w.env["FAKE_GH_AUTH"] = "ok"
	w.env["FAKE_GH_LOG"] = filepath.Join(w.t.TempDir(), "gh.log")
}

// has tells whether a tool is on their PATH.
func (w *walk) has(tool string) bool {
	for _, d := range []string{w.installed, w.base} {
		if _, err := os.Stat(filepath.Join(d, tool)); err == nil {
			return true
		}
	}
	return false
}

// readmeBootstrapBlock is the shell block of the README's Bootstrap section, line by line,
// comments and blank lines dropped (a line's trailing comment too).
func readmeBootstrapBlock(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)\n## Bootstrap\n.*?```sh\n(.*?)```").FindStringSubmatch(string(b))
	require.NotNil(t, m, "the README's Bootstrap section has a sh block")
	var lines []string
	for _, l := range strings.Split(m[1], "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	require.NotEmpty(t, lines)
	return lines
}

// docsSteps are the top-level numbered steps of the docs/operations.md section under heading
// (up to its next heading): each is a page or a choice a person goes through.
func docsSteps(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "docs", "operations.md"))
	require.NoError(t, err)
	text := string(b)
	i := strings.Index(text, heading)
	require.GreaterOrEqual(t, i, 0, "docs/operations.md has %q", heading)
	text = text[i:]
	if j := strings.Index(text[1:], "\n#"); j >= 0 {
		text = text[:j+1]
	}
	steps := regexp.MustCompile(`(?m)^\d+\. (.*)$`).FindAllStringSubmatch(text, -1)
	require.NotEmpty(t, steps, "%q has numbered steps", heading)
	var out []string
	for _, s := range steps {
		out = append(out, s[1])
	}
	return out
}

// theLaptop is a directory of links to this machine's tools, without the ones a newcomer's
// laptop does not have yet.
func theLaptop(t *testing.T, without ...string) string {
	t.Helper()
	dir := t.TempDir()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(goBin, filepath.Join(dir, "go")))
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			name := e.Name()
			if slices.Contains(without, name) {
				continue
			}
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				continue
			}
			require.NoError(t, os.Symlink(filepath.Join(d, name), filepath.Join(dir, name)))
		}
	}
	return dir
}

func TestANewOrganizationsActionsAreCounted(t *testing.T) {
	t.Parallel()
	standIns := standIns(t)
	github := fakegithubapp.New()
	t.Cleanup(github.Close)
	w := &walk{t: t, work: t.TempDir(), installed: t.TempDir(), standIns: standIns[:strings.Index(standIns, ":")], home: t.TempDir(), github: github,
		base: theLaptop(t, "pulumi", "aws", "kubectl", "gh"), env: map[string]string{
			// The account and the machine as they start: no AWS credentials, no GPU quota, no
			// state bucket; the stand-ins keep what pulumi would (its selected stack, secrets).
			"FAKE_STS": "fail", "FAKE_QUOTA_L_3819A6DF": "0", "FAKE_QUOTA_L_DB2E81BA": "0", "FAKE_STATE_BUCKET": "absent",
			"FAKE_PULUMI_HOME": t.TempDir(), "FAKE_PULUMI_SECRETS": t.TempDir(),
			// Their checkout's origin: the copy the README's first line makes.
			"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "remote.origin.url", "GIT_CONFIG_VALUE_0": "https://github.com/newcomer-org/lux-gpu-ci.git",
			// Where bootstrap writes actionlint's labels and the smoke test: not this
			// repository's files.
			"ACTIONLINT_CONFIG": filepath.Join(t.TempDir(), "actionlint.yaml"),
			"SMOKE_WORKFLOW":    filepath.Join(t.TempDir(), "gpu-smoke-starter.yml"),
		}}

	// What the values the README asks for are, where they come from, and what GitHub makes
	// a person do first for each (the docs' numbered steps).
	key := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(key, []byte("-----BEGIN RSA PRIVATE KEY-----\nstand-in\n-----END RSA PRIVATE KEY-----\n"), 0o600))
	values := map[string]string{
		"AWS_REGION": "us-west-2", "GITHUB_ORG": "newcomer-org", "PULUMI_BACKEND_URL": "s3://newcomer-state",
		"GITHUB_APP_ID": "123", "GITHUB_APP_INSTALLATION_ID": "456", "GITHUB_APP_PRIVATE_KEY_FILE": key,
		"DEPLOY_REPOSITORY": "newcomer-org/lux-gpu-ci", "RETRIER_GITHUB_TOKEN": "github_pat_stand-in",
	}
	before := map[string]func(){
		"GITHUB_APP_ID": func() {
			for _, s := range docsSteps(t, "**A GitHub App first**") {
				if strings.HasPrefix(s, "Set them as the stack's config") {
					continue // the exports themselves, counted as values
				}
				w.do("GitHub App: "+s, "docs/operations.md, GitHub credentials")
			}
		},
		"RETRIER_GITHUB_TOKEN": func() {
			w.do("create the retrier's fine-grained token (Actions: read and write, every repository)", "docs/operations.md, retrierGitHubToken")
		},
	}

	// 1. The README's Bootstrap block, as written: every value it exports, every command.
	//    A command the prerequisites stop is run again once they are met, and counted again.
	handedOff := false
	for _, line := range readmeBootstrapBlock(t) {
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			for _, kv := range strings.Fields(rest) {
				name, _, _ := strings.Cut(kv, "=")
				v, ok := values[name]
				require.True(t, ok, "the README exports %s, which the walk has no value for", name)
				if f := before[name]; f != nil {
					f()
				}
				w.env[name] = v
				w.do("set "+name, "README, Bootstrap")
			}
			continue
		}
		require.Regexp(t, `^(make|git|gh) `, line, "a command of the README's Bootstrap block the walk does not know")
		if strings.HasPrefix(line, "git clone") {
			// Their organization's copy (this repository, here), made with gh.
			require.Contains(t, line, "gh repo create", "the README makes the organization's copy")
			w.needGH("README, Bootstrap: " + line)
			w.do("run "+line, "README, Bootstrap")
			continue
		}
		for attempt := 0; ; attempt++ {
			require.Less(t, attempt, 5, "%s never passed", line)
			out, err := w.run(line, "README, Bootstrap")
			if err == nil {
				if strings.HasPrefix(line, "make bootstrap") {
					w.handOff(out)
					handedOff = true
				}
				break
			}
			w.meet(out)
		}
	}

	// A README line that runs bootstrap some other way (make -s bootstrap) would skip the
	// hand-off and its actions, and the count would shrink.
	require.True(t, handedOff, "the README's Bootstrap block runs make bootstrap, and the walk took its hand-off")

	// The App it made is the stack's runner credential: its ID and installation in the
	// config, its key a secret, all kept 0600 for the next bootstrap.
	apps := w.github.Apps()
	require.Len(t, apps, 1, "one App, made once")
	secret, err := os.ReadFile(filepath.Join(w.env["FAKE_PULUMI_SECRETS"], "githubAppPrivateKey"))
	require.NoError(t, err, "the App's key went in with --secret")
	assert.Contains(t, string(secret), "-----BEGIN RSA PRIVATE KEY-----")
	assert.Contains(t, w.output, fmt.Sprintf("stand-in pulumi config set githubAppId %d\n", apps[0].ID))
	assert.Contains(t, w.output, fmt.Sprintf("stand-in pulumi config set githubAppInstallationId %d\n", apps[0].ID*10+1))
	kept, err := os.Stat(filepath.Join(w.home, ".config", "lux-gpu-ci", "github-app-newcomer-org.env"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), kept.Mode().Perm())

	// 2. The smoke test, which bootstrap wrote into their copy and the hand-off committed and
	//    ran: a job on the starter's scale set.
	smoke, err := os.ReadFile(w.env["SMOKE_WORKFLOW"])
	require.NoError(t, err, "bootstrap wrote the smoke test")
	assert.Contains(t, string(smoke), "runs-on: lux-starter-t4\n")
	oneTime := len(w.actions)

	// 3. Ten repositories, each given the line a GPU job needs and nothing else: no retry
	//    workflow, since the stack's retrier re-runs their interrupted jobs.
	require.Contains(t, w.env, "RETRIER_GITHUB_TOKEN", "the walk's stack has the retrier")
	perRepository := 1 // a job's runs-on: lux-starter-t4
	var list strings.Builder
	for i, a := range w.actions {
		fmt.Fprintf(&list, "%2d. %s  (%s)\n", i+1, a.what, a.source)
	}
	t.Logf("one-time actions: %d\n%s+ %d per repository: runs-on: lux-starter-t4", oneTime, list.String(), perRepository)
	readme, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "README.md"))
	require.NoError(t, err)
	said := regexp.MustCompile(`counts (\d+) one-time actions`).FindStringSubmatch(strings.Join(strings.Fields(string(readme)), " "))
	require.NotNil(t, said, "the README says how many one-time actions the walk counts")
	assert.Equal(t, fmt.Sprint(oneTime), said[1], "the README's count is the walk's")
	assert.Less(t, oneTime, oneTimeActionsGoal, "one-time actions, from an empty organization to a green smoke job:\n%s", list.String())
}

// meet does what a failed bootstrap asked for, each problem one action.
func (w *walk) meet(out string) {
	w.t.Helper()
	quota := regexp.MustCompile(`(aws service-quotas request-service-quota-increase .*--quota-code (L-[0-9A-F]+) --desired-value (\d+).*)$`)
	met := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		problem, ok := strings.CutPrefix(sc.Text(), "  - ")
		if !ok {
			continue
		}
		met++
		switch {
		case strings.Contains(problem, " is not installed"):
			w.install(strings.Fields(problem)[0], "bootstrap: "+problem)
		case strings.HasPrefix(problem, "AWS credentials"):
			// aws configure sso asks for the CLI's region too.
			w.do("log in to AWS (aws configure sso)", "bootstrap: "+problem)
			delete(w.env, "FAKE_STS")
			w.env["FAKE_AWS_REGION"] = "us-west-2"
		case strings.HasPrefix(problem, "PULUMI_CONFIG_PASSPHRASE is not set"):
			// At a terminal bootstrap asks for it instead: the same one choice.
			w.do("choose the stack's passphrase", "bootstrap: "+problem)
			w.env["PULUMI_CONFIG_PASSPHRASE"] = "correct horse"
		case strings.HasPrefix(problem, "AWS_REGION is not set"):
			w.do("set AWS_REGION", "bootstrap: "+problem)
			w.env["AWS_REGION"] = "us-west-2"
		case quota.MatchString(problem):
			m := quota.FindStringSubmatch(problem)
			w.do("run "+m[1]+", and wait for AWS to grant it", "bootstrap: "+problem[:strings.Index(problem, ";")])
			w.env["FAKE_QUOTA_"+strings.ReplaceAll(m[2], "-", "_")] = m[3]
		default:
			w.t.Fatalf("bootstrap asked for something the walk cannot do: %s\n%s", problem, out)
		}
	}
	require.Positive(w.t, met, "bootstrap failed without naming a problem:\n%s", out)
}

// handOff does what a bootstrap that ended printed for a person to do: each command line
// (two spaces, then a command) one action, with the repository it writes into a directory of
// theirs.
func (w *walk) handOff(out string) {
	w.t.Helper()
	if !strings.Contains(out, "--yes") {
		w.do("read pulumi up's plan and confirm it", "pulumi up")
	}
	done := strings.Index(out, "] done")
	require.GreaterOrEqual(w.t, done, 0, "bootstrap ends with done:\n%s", out)
	n := 0
	for _, line := range strings.Split(out[done:], "\n") {
		cmd, ok := strings.CutPrefix(line, "  ")
		if !ok || !regexp.MustCompile(`^(git|make|gh|pulumi|aws) `).MatchString(cmd) {
			continue
		}
		n++
		if i := strings.Index(cmd, "   #"); i >= 0 {
			cmd = cmd[:i]
		}
		// A command of a tool they do not have yet: installed first (and gh logged in).
		if tool := strings.Fields(cmd)[0]; tool == "gh" {
			w.needGH("bootstrap's hand-off: " + cmd)
		} else if !w.has(tool) {
			w.install(tool, "bootstrap's hand-off: "+cmd)
		}
		w.do("run "+cmd, "bootstrap's hand-off")
	}
	require.Positive(w.t, n, "bootstrap's hand-off names what to do:\n%s", out)
}
