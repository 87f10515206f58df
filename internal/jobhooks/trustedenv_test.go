package jobhooks_test

// The entry points against a job that controls the runner's PATH: a GITHUB_PATH line puts the
// job's directory first (actions/runner v2.336.0 FileCommandManager.cs:127-158, no check), and
// in the container form the hooks copy the job pod's file-command directory into the runner,
// executables included (runner-container-hooks v0.8.1 run-script-step.ts:95-106). Each test
// first shows the trap is live: the same PATH, without our entry point, runs the job's code.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/internal/jobhooks"
)

// plantedPath is a directory a job put first on the runner's PATH, holding an executable for
// every command the hooks run (each leaves a mark, then exits 0), and the PATH it makes.
func plantedPath(t *testing.T) (path, mark string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "_runner_file_commands", "job")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	mark = filepath.Join(t.TempDir(), "the-job-ran-here")
	for _, cmd := range []string{"bash", "sh", "curl", "cat", "date", "mkdir", "kill", "find", "stat", "awk", "sed", "grep", "printf", "node"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, cmd), []byte("#!/bin/sh\n/usr/bin/touch "+mark+"\n"), 0o755))
	}
	return dir + ":/usr/bin:/bin", mark
}

// The runner's job hooks: the runner finds a .sh hook's bash on the job's PATH; our .js entry
// points, run by the runner's own node, run the script with /bin/bash and a PATH of their own.
func TestAJobsPathRunsNothingInTheJobHooks(t *testing.T) {
	t.Parallel()
	path, mark := plantedPath(t)

	// The trap: a .sh hook, as the runner would run it (its bash found on that PATH).
	h := newHost(t, machine{noDevice: true})
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", `PATH="$1" exec bash -e "$2"`, "sh", path, filepath.Join(h.hooks, jobhooks.JobCompletedKey))
	cmd.Env = h.env
	_, _ = cmd.CombinedOutput()
	require.FileExists(t, mark, "a .sh hook run by the bash first on the job's PATH (%s is the real one) runs the job's code: the trap is live", bash)
	require.NoError(t, os.Remove(mark))

	// The entry points, as the runner runs them: node <hook>.js with the job's PATH.
	for _, form := range []string{"runner", "container"} {
		h := newHost(t, machine{withSMI: true, samples: fourSamples})
		for _, key := range []string{jobhooks.JobStartedKey, jobhooks.JobCompletedKey} {
			cmd := exec.Command(nodeBinary(t), filepath.Join(h.hooks, entryPoints[key]))
			cmd.Env = append(h.env, "PATH="+path, "GPUCI_JOB_FORM="+form, "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS=1", "GPUCI_FOLLOW_RETRY_SECONDS=0.05")
			out, _ := cmd.CombinedOutput()
			assert.NoFileExists(t, mark, "%s form, %s: nothing of the job's PATH runs (%s)", form, key, out)
		}
	}
}

// standInContainerHooks is the container hooks as far as the attack goes: they read their
// command on stdin, spawn sh by PATH (packages/k8s/src/k8s/index.ts:348-379), copy the job
// pod's file commands into the runner — here a job's directory with an executable, a link, an
// executable file-command file and the runner's own — and exit with the code the test asks.
const standInContainerHooks = `
const fs = require('fs'), path = require('path'), cp = require('child_process');
const input = fs.readFileSync(0, 'utf8');
fs.writeFileSync(process.env.GOT_STDIN, input);
cp.spawnSync('sh', ['-c', 'true'], { stdio: 'inherit' });
const dir = process.env.GPUCI_FILE_COMMANDS_DIR;
fs.mkdirSync(path.join(dir, 'job'), { recursive: true });
fs.writeFileSync(path.join(dir, 'job', 'bash'), '#!/bin/sh\n', { mode: 0o755 });
fs.symlinkSync('/home/runner/.credentials', path.join(dir, 'link'));
fs.writeFileSync(path.join(dir, 'add_path_1f2e'), path.join(dir, 'job') + '\n', { mode: 0o755 });
fs.writeFileSync(path.join(dir, 'set_env_1f2e'), 'A=b\n', { mode: 0o644 });
process.exit(Number(JSON.parse(input).exitWith));
`

// A container-form runner's container hooks, through container-hooks.js: the hooks' sh is
// not the job's, the command reaches them on stdin and their exit code the runner, and what
// they copied back leaves only the runner's own kind of file: regular, not executable.
func TestAJobsPathRunsNothingInTheContainerHooks(t *testing.T) {
	t.Parallel()
	path, mark := plantedPath(t)
	dir := t.TempDir()
	hooks := filepath.Join(dir, "index.js")
	require.NoError(t, os.WriteFile(hooks, []byte(standInContainerHooks), 0o644))
	fileCommands, stdin := filepath.Join(dir, "_runner_file_commands"), filepath.Join(dir, "stdin")
	env := append(os.Environ(), "GOT_STDIN="+stdin, "GPUCI_FILE_COMMANDS_DIR="+fileCommands)

	// The trap: the hooks run straight by the runner's node, with the job's PATH.
	direct := exec.Command(nodeBinary(t), hooks)
	direct.Env, direct.Stdin = append(env, "PATH="+path), strings.NewReader(`{"command": "run_script_step", "exitWith": 0}`)
	out, err := direct.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.FileExists(t, mark, "the hooks' sh is the job's when nothing resets PATH: the trap is live")
	require.NoError(t, os.Remove(mark))
	require.NoError(t, os.RemoveAll(fileCommands))

	entry := filepath.Join(dir, "hooks")
	require.NoError(t, os.MkdirAll(entry, 0o755))
	for key, script := range jobhooks.Files() {
		require.NoError(t, os.WriteFile(filepath.Join(entry, key), []byte(script), 0o555))
	}
	const command = `{"command": "run_script_step", "exitWith": 3}`
	cmd := exec.Command(nodeBinary(t), filepath.Join(entry, jobhooks.ContainerHooksEntryKey))
	cmd.Env, cmd.Stdin = append(env, "PATH="+path, "GPUCI_CONTAINER_HOOKS="+hooks), strings.NewReader(command)
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 3, exit.ExitCode(), "the hooks' exit code is the runner's")
	assert.NoFileExists(t, mark, "the hooks' sh is not the job's")
	got, err := os.ReadFile(stdin)
	require.NoError(t, err)
	assert.JSONEq(t, command, string(got), "the hooks read the runner's command")

	entries, err := os.ReadDir(fileCommands)
	require.NoError(t, err)
	left := map[string]os.FileMode{}
	for _, e := range entries {
		info, err := os.Lstat(filepath.Join(fileCommands, e.Name()))
		require.NoError(t, err)
		left[e.Name()] = info.Mode()
	}
	want, _ := json.Marshal(map[string]os.FileMode{"add_path_1f2e": 0o644, "set_env_1f2e": 0o644})
	have, _ := json.Marshal(left)
	assert.JSONEq(t, string(want), string(have), "only the runner's kind of file is left, none executable")
}
