'use strict';
// What the runner starts for the stack's own code is chosen by nothing a job controls.
//
// A job can put any directory first on the runner's PATH: a GITHUB_PATH line is added to the
// runner's prepend path unchecked (actions/runner v2.336.0 src/Runner.Worker/
// FileCommandManager.cs:127-158), and in the container form the container hooks copy the job
// pod's _runner_file_commands back into the runner after every step, executables and all
// (runner-container-hooks v0.8.1 packages/k8s/src/hooks/run-script-step.ts:95-106). The runner
// then finds a .sh hook's bash (HostContext.cs:812-835, WhichUtil.cs: prepend path first) and
// the container hooks find their sh, find and stat (packages/k8s/src/k8s/index.ts:348-379)
// through that PATH. A .js file is run by the runner's own node, by absolute path
// (HostContext.cs GetDefaultShellForScript; ContainerHookManager.cs:147-163): so each of our
// entry points is a .js file whose first act is to replace PATH, and which starts what it runs
// by absolute path. Nothing else a job sets reaches a runner-side hook: GITHUB_ENV is not
// passed to job hooks (actions/runner#2459) and the container hooks get the step's env only as
// data for the job pod.

const childProcess = require('child_process');
const fs = require('fs');
const path = require('path');

// The runner image's own PATH (actions/runner v2.336.0 images/Dockerfile: Ubuntu's), unless
// the pod spec names another in GPUCI_HOOKS_PATH (runner-side env, which no job can set).
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

// trustedEnv is the process's environment with PATH replaced.
function trustedEnv() {
  return Object.assign({}, process.env, { PATH: process.env.GPUCI_HOOKS_PATH || SYSTEM_PATH });
}

// exitWith ends this process as the child ended: its status, or 1 if a signal ended it.
function exitWith(result) {
  if (result.error) {
    process.stderr.write(`gpuci: ${result.error.message}\n`);
  }
  process.exit(typeof result.status === 'number' ? result.status : 1);
}

// runBash runs a hook script as the runner would run a .sh hook (`bash -e {0}`,
// ScriptHandler.cs), but with /bin/bash and the trusted PATH.
function runBash(script) {
  exitWith(childProcess.spawnSync('/bin/bash', ['-e', script], { stdio: 'inherit', env: trustedEnv() }));
}

// keepOnlyFileCommands leaves in dir (the runner's _runner_file_commands) only regular files,
// none of them executable: what the runner itself writes there (one file per file command and
// step, its GITHUB_ENV, GITHUB_PATH, GITHUB_OUTPUT, GITHUB_STATE and GITHUB_STEP_SUMMARY).
// A job's directory, link or executable copied back from its pod is removed.
function keepOnlyFileCommands(dir) {
  let entries;
  try {
    entries = fs.readdirSync(dir);
  } catch (e) {
    return; // no step has run yet
  }
  for (const name of entries) {
    const p = path.join(dir, name);
    const st = fs.lstatSync(p);
    if (st.isFile()) {
      fs.chmodSync(p, 0o644);
    } else {
      fs.rmSync(p, { recursive: true, force: true });
    }
  }
}

module.exports = { SYSTEM_PATH, trustedEnv, exitWith, runBash, keepOnlyFileCommands };
