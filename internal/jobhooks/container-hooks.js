'use strict';
// A container-form runner's container hooks (ACTIONS_RUNNER_CONTAINER_HOOKS): the runner
// image's own (runner-container-hooks, GPUCI_CONTAINER_HOOKS), run by this same node with a
// PATH no job chose, the runner's stdin (the hook's command) passed on; after each command,
// what the hooks copied back into the runner's _runner_file_commands is left as the runner's
// own files only: no job's directory, link or executable (trusted-env.js says why).
const { trustedEnv, keepOnlyFileCommands, exitWith } = require('./trusted-env.js');
const childProcess = require('child_process');

// The pod spec names them (k8s: jobhooks.RunnerContainerHooks); runner-side env, as above.
const hooks = process.env.GPUCI_CONTAINER_HOOKS || '/home/runner/k8s-novolume/index.js';
// The runner's RUNNER_TEMP is /home/runner/_work/_temp, where the hooks copy the job pod's
// /__w/_temp/_runner_file_commands (run-script-step.ts:95-106).
const fileCommands = process.env.GPUCI_FILE_COMMANDS_DIR || '/home/runner/_work/_temp/_runner_file_commands';

const result = childProcess.spawnSync(process.execPath, [hooks], { stdio: 'inherit', env: trustedEnv() });
keepOnlyFileCommands(fileCommands);
exitWith(result);
