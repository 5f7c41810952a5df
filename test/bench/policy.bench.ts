/**
 * `npm run bench:policy`: the cost of ExternalMetricPolicy evaluation in the
 * request path, for 100 policies × 20 rules, against baselines measured in
 * the same run (an evaluation with no policy, one RE2 match, one native
 * RegExp test). Prints figures; asserts nothing.
 *
 * Scenarios:
 * - all 100 policies apply to the request (the worst case: every policy's
 *   verdict is needed), the deciding rule is the 20th of each, the
 *   selector is checked for containment each time;
 * - the same without the per-policy memo of "first rule for this metric
 *   name" (2000 RE2 matches per evaluation: what a name costs the first time);
 * - 100 namespaced policies in 100 namespaces, one applies (the usual shape).
 */
import { loadConfig } from "../../shared/config/config.ts";
import { HPA_CONTROLLER } from "../../shared/identity.ts";
import { parseSelector } from "../../shared/k8s/selector.ts";
import { PolicySet, type PolicyRequest } from "../../shared/policy/evaluate.ts";
import { compileMetricPattern } from "../../shared/policy/regex.ts";

const POLICIES = 100;
const RULES = 20;

function configText(namespaced: boolean): string {
  const docs = [
    `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { sqs: { type: aws-sqs, region: us-east-1 } }
metrics: [{ name: queue_messages_ready, provider: sqs }]
policy: { defaultAction: Deny }`,
  ];
  for (let p = 0; p < POLICIES; p++) {
    const rules: string[] = [];
    for (let r = 0; r < RULES - 1; r++) {
      rules.push(`    - { metric: "team${p}_metric${r}_(total|rate|p[0-9]+)", selector: "queue in (q${p}_${r},q${p}_x)" }`);
    }
    rules.push(`    - { metric: "queue_messages_(ready|delayed)", selector: { matchExpressions: [{ key: queue, operator: In, values: [jobs, mail, q${p}] }] } }`);
    const ns = namespaced ? `, namespace: ns-${p}` : "";
    docs.push(`apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: p${p}${ns} }
spec:
  subjects: { groups: [system:serviceaccounts] }
  rules:
${rules.join("\n")}
  defaultAction: Deny`);
  }
  return docs.join("\n---\n");
}

/** Calls per second of `fn`, measured for about `ms` after a warm-up. */
function rate(fn: () => unknown, ms = 1000): number {
  for (let i = 0; i < 2000; i++) fn();
  let calls = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(ms) * 1_000_000n;
  let now = start;
  while (now < end) {
    for (let i = 0; i < 200; i++) fn();
    calls += 200;
    now = process.hrtime.bigint();
  }
  return calls / (Number(now - start) / 1e9);
}

function fmt(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(2)} M/s` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} k/s` : `${n.toFixed(0)} /s`;
}

const request: PolicyRequest = { caller: HPA_CONTROLLER, namespace: "ns-7", metric: "queue_messages_ready", selector: parseSelector("queue=jobs") };

let t = performance.now();
const cluster = loadConfig(configText(false), "bench.yaml").config.policy!.policies;
const loadMs = performance.now() - t;
t = performance.now();
const namespaced = loadConfig(configText(true), "bench.yaml").config.policy!.policies;
const loadNsMs = performance.now() - t;
const empty = new PolicySet([], "Allow");

// sanity: the scenarios decide what they claim
const check = cluster.evaluate(request, { complete: true });
if (check.decision !== "Allow" || check.verdicts.length !== POLICIES || check.verdicts.some((v) => v.rule !== RULES - 1)) {
  throw new Error("bench setup: expected every policy to allow by its last rule");
}
if (namespaced.evaluate(request, { complete: true }).verdicts.length !== 1) throw new Error("bench setup: expected one applicable policy");

const re2 = compileMetricPattern("queue_messages_(ready|delayed)");
const native = /^(?:queue_messages_(ready|delayed))$/i;

const baseEmpty = rate(() => empty.evaluate(request));
const baseRe2 = rate(() => re2.matches("queue_messages_ready"));
const baseNative = rate(() => native.test("queue_messages_ready"));
const warm = rate(() => cluster.evaluate(request));
const scan = rate(() => {
  // the uncached path: first matching rule of each policy by RE2, then containment
  for (const p of cluster.policies) p.rules.find((r) => r.pattern.matches(request.metric));
  return cluster.evaluate(request);
}, 2000);
const one = rate(() => namespaced.evaluate(request));

console.log(`policy evaluation benchmark (${POLICIES} policies x ${RULES} rules), node ${process.version}`);
console.log(`  config load + compile:          ${loadMs.toFixed(0)} ms cluster-scoped set, ${loadNsMs.toFixed(0)} ms namespaced set (once per config load)`);
console.log("baselines (same run):");
console.log(`  empty evaluation (no policies): ${fmt(baseEmpty)}`);
console.log(`  one RE2 whole-name match:       ${fmt(baseRe2)}`);
console.log(`  one native RegExp test:         ${fmt(baseNative)}`);
console.log("evaluations:");
console.log(`  all 100 apply, memo warm:       ${fmt(warm)}  = ${(baseEmpty / warm).toFixed(0)}x an empty evaluation, ${(baseRe2 / warm).toFixed(0)} RE2 matches' time`);
console.log(`  all 100 apply, 2000 RE2 matches:${fmt(scan).padStart(10)}  = ${(baseEmpty / scan).toFixed(0)}x an empty evaluation (a metric name's first request)`);
console.log(`  1 of 100 namespaced applies:    ${fmt(one)}  = ${(baseEmpty / one).toFixed(1)}x an empty evaluation`);
console.log(`  per request: ${(1e6 / warm).toFixed(1)} µs worst case (warm), ${(1e6 / one).toFixed(2)} µs usual case`);
