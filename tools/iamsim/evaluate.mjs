// The sandbox's IAM evaluator (test world only; see internal/testenv/iamsim).
//
// Reads one JSON request per line on stdin and writes one JSON answer per
// line on stdout, in order:
//
//   request: {"id", "principal", "account", "action", "resource",
//             "context": {key: value | [values]},
//             "policies": [{"name", "document"}], "boundaries": [...],
//             "resourcePolicy": {...} (e.g. a role's trust policy)}
//   answer:  {"id", "decision": "Allowed" | "ImplicitlyDenied" |
//             "ExplicitlyDenied" | "Error", "errors", "ignored", "why"}
//
// The decision is the evaluator's (strict mode: a condition on a key the
// request does not carry fails, as AWS does); this file only moves JSON.
import { createInterface } from 'node:readline'
import { runSimulation, getDenialReasons } from '@cloud-copilot/iam-simulate'

const named = (docs, prefix) => (docs ?? []).map((d, i) => ({ name: d.name ?? `${prefix}${i}`, policy: d.document }))

// why lists the statements that matched the action but failed on resource
// or condition, so a denial in a test log says which clause refused.
function why(analysis) {
  const out = []
  for (const [kind, a] of [['identity', analysis?.identityAnalysis], ['boundary', analysis?.permissionBoundaryAnalysis], ['resource', analysis?.resourceAnalysis]]) {
    for (const s of a?.unmatchedStatements ?? []) {
      const e = s.explain
      if (!e.actionMatch) continue
      const failed = (e.conditions ?? []).filter(c => !c.matches).map(c => `${c.operator} ${c.conditionKeyValue}${c.failedBecauseMissing ? ' (missing from the request)' : ''}`)
      out.push(`${kind} ${s.policyId} ${e.identifier ?? ''}: resource ${e.resourceMatch ? 'matched' : 'did not match'}${failed.length ? '; failed ' + failed.join(', ') : ''}`)
    }
  }
  return out
}

async function evaluate(r) {
  const res = await runSimulation({
    request: {
      principal: r.principal,
      action: r.action,
      resource: { resource: r.resource, accountId: r.account },
      contextVariables: r.context ?? {},
    },
    identityPolicies: named(r.policies, 'inline'),
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    resourcePolicy: r.resourcePolicy ?? undefined,
    permissionBoundaryPolicies: r.boundaries?.length ? named(r.boundaries, 'boundary') : undefined,
  }, { simulationMode: 'Strict' })
  if (res.resultType === 'error') {
    return { decision: 'Error', errors: [JSON.stringify(res.errors)] }
  }
  const results = res.resultType === 'single' ? [res.result] : res.results
  const ignored = [...new Set(results.flatMap(x => x.ignoredContextKeys ?? []))]
  const denied = results.filter(x => x.analysis.result !== 'Allowed')
  return {
    decision: res.overallResult,
    ignored,
    why: denied.flatMap(x => [...getDenialReasons(x.analysis).map(d => JSON.stringify(d)), ...why(x.analysis)]),
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of lines) {
  if (!line.trim()) continue
  let id = null
  try {
    const r = JSON.parse(line)
    id = r.id
    process.stdout.write(JSON.stringify({ id, ...(await evaluate(r)) }) + '\n')
  } catch (e) {
    process.stdout.write(JSON.stringify({ id, decision: 'Error', errors: [String(e?.stack ?? e)] }) + '\n')
  }
}
