'use strict';
// The runner's job-started hook (ACTIONS_RUNNER_HOOK_JOB_STARTED): job-started.sh, run by
// /bin/bash with a PATH no job chose (trusted-env.js says why).
require('./trusted-env.js').runBash(require('path').join(__dirname, 'job-started.sh'));
