'use strict';
// Judges IAM requests with @cloud-copilot/iam-simulate (an evaluator of AWS's policy logic
// someone else wrote; iamjudge.go installs the version package-lock.json pins). Reads
// {"cases": [...]} on stdin, writes one verdict per case on stdout, in order.
const { runSimulation } = require('@cloud-copilot/iam-simulate');

async function judge(c) {
  const result = await runSimulation({
    request: {
      principal: c.principal,
      action: c.action,
      resource: { resource: c.resource, accountId: c.accountId },
      contextVariables: c.context || {},
    },
    identityPolicies: (c.identity || []).map((policy, i) => ({ name: `identity-${i}`, policy })),
    permissionBoundaryPolicies: (c.boundary || []).map((policy, i) => ({ name: `boundary-${i}`, policy })),
    resourcePolicy: c.resourcePolicy || undefined,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
  }, {});
  if (result.resultType === 'error') {
    return { name: c.name, error: JSON.stringify(result.errors) };
  }
  if (result.resultType !== 'single') {
    return { name: c.name, error: `a ${result.resultType} result: name one resource, not a pattern` };
  }
  return { name: c.name, verdict: result.overallResult, ignoredContextKeys: result.result.ignoredContextKeys || [] };
}

(async () => {
  const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
  const out = [];
  for (const c of input.cases) {
    out.push(await judge(c));
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e));
  process.exit(1);
});
