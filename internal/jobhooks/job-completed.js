'use strict';
// The runner's job-completed hook (ACTIONS_RUNNER_HOOK_JOB_COMPLETED): job-completed.sh, run
// by /bin/bash with a PATH no job chose (trusted-env.js says why).
require('./trusted-env.js').runBash(require('path').join(__dirname, 'job-completed.sh'));
