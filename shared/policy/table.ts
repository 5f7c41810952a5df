/**
 * Table-driven policy tests (`policy test`): expectations kept in git next to
 * the policies and run in CI.
 *
 * ```yaml
 * apiVersion: external-metrics-bridge.io/v1alpha1
 * kind: ExternalMetricPolicyTest
 * config: bridge.yaml            # optional: its policies and policy.defaultAction
 * policies: [team-a.yaml]        # optional: more policy files (relative to this file)
 * defaultAction: Deny            # optional: overrides the config's
 * cases:
 *   - name: team-a's HPA reads its own queue
 *     namespace: team-a
 *     metric: queue_messages_ready
 *     selector: queue=team-a-jobs           # the labelSelector as sent, or a metav1.LabelSelector
 *     expect: Allow
 *   - name: nor another team's
 *     caller: { serviceAccount: team-a/ci } # or { user, groups }; omitted: the HPA controller
 *     namespace: team-a
 *     metric: queue_messages_ready
 *     selector: { matchLabels: { queue: team-b-orders } }
 *     expect: Deny
 *     deniedBy: { policy: team-a/queues, rule: 0 }   # optional
 *   - name: team-a's HPA reads its pods' request rate (custom.metrics.k8s.io)
 *     namespace: team-a
 *     resource: pods                        # default external; selector is then the metricLabelSelector
 *     metric: http_requests_per_second
 *     expect: Allow
 * ```
 *
 * ExternalMetricPolicy documents in the same file are used too.
 */
import * as z from "../config/zod.ts";
import { issueAt, locate, zodIssues, type ConfigIssue, type SourceDocument } from "../config/yaml.ts";
import type { Caller } from "../identity.ts";
import { SelectorError, type Selector } from "../k8s/selector.ts";
import { metricKey } from "../metric-name.ts";
import type { Decision, PolicySet } from "./evaluate.ts";
import { callerFrom, requestResource, requestSelector } from "./explain.ts";
import { actionSchema, namespaceSchema, POLICY_API_VERSION, selectorInputSchema, serviceAccountRefSchema, type Action } from "./schema.ts";

/** The kind of test tables. */
export const TEST_KIND = "ExternalMetricPolicyTest";

const caseSchema = z.strictObject({
  name: z.string().check(z.minLength(1)),
  caller: z.optional(
    z.strictObject({
      user: z.optional(z.string().check(z.minLength(1))),
      groups: z.optional(z.array(z.string().check(z.minLength(1)))),
      serviceAccount: z.optional(serviceAccountRefSchema),
    }),
  ),
  /** "" for a cluster-scoped object of a custom read */
  namespace: z.union([namespaceSchema, z.literal("")]),
  /** `external` (default) or a custom read's group resource */
  resource: z.optional(z.string().check(z.minLength(1), z.maxLength(512))),
  metric: z.string().check(z.minLength(1), z.maxLength(512)),
  selector: z._default(selectorInputSchema, ""),
  expect: actionSchema,
  deniedBy: z.optional(
    z.strictObject({ policy: z.string().check(z.minLength(1)), rule: z.optional(z.number().check(z.int(), z.minimum(0))) }),
  ),
});

/** Schema of an ExternalMetricPolicyTest document. */
export const testTableSchema = z.strictObject({
  apiVersion: z.literal(POLICY_API_VERSION),
  kind: z.literal(TEST_KIND),
  metadata: z.optional(z.looseObject({ name: z.optional(z.string()) })),
  /** a BridgeConfig file (relative to this file) whose policies and default apply */
  config: z.optional(z.string().check(z.minLength(1))),
  /** policy files, relative to this file */
  policies: z._default(z.array(z.string().check(z.minLength(1))), []),
  defaultAction: z.optional(actionSchema),
  cases: z.array(caseSchema).check(z.minLength(1)),
});
/** A validated test table. */
export type TestTable = z.infer<typeof testTableSchema>;

/** One compiled case. */
export interface TestCase {
  name: string;
  line: number;
  caller: Caller;
  namespace: string;
  metric: string;
  /** `external` or a custom read's group resource */
  resource: string;
  /** the labelSelector; for a custom read the metricLabelSelector */
  selector: Selector;
  expect: Action;
  deniedBy?: { policy: string; rule?: number | undefined } | undefined;
}

/** A case's outcome. */
export interface CaseResult {
  case: TestCase;
  decision: Decision;
  pass: boolean;
  /** what did not match the expectation */
  mismatch?: string;
}

/**
 * Validate a test table document and compile its cases.
 *
 * @returns the table and its cases, or undefined with the problems in `issues`
 */
export function compileTestTable(sd: SourceDocument, issues: ConfigIssue[]): { table: TestTable; cases: TestCase[] } | undefined {
  const parsed = testTableSchema.safeParse(sd.value);
  if (!parsed.success) {
    issues.push(...zodIssues(sd, parsed.error));
    return undefined;
  }
  const before = issues.length;
  const cases: TestCase[] = [];
  parsed.data.cases.forEach((c, i) => {
    const path = ["cases", i];
    let caller: Caller;
    try {
      caller = callerFrom(c.caller ?? {});
    } catch (err) {
      issues.push(issueAt(sd, [...path, "caller"], (err as Error).message));
      return;
    }
    let resource: string;
    try {
      resource = requestResource(c.resource);
    } catch (err) {
      issues.push(issueAt(sd, [...path, "resource"], (err as Error).message));
      return;
    }
    let selector: Selector;
    try {
      selector = requestSelector(c.selector);
    } catch (err) {
      if (!(err instanceof SelectorError)) throw err;
      issues.push(issueAt(sd, [...path, "selector"], `invalid selector: ${err.message}`));
      return;
    }
    cases.push({
      name: c.name,
      line: locate(sd, path).line,
      caller,
      namespace: c.namespace,
      metric: c.metric,
      resource,
      selector,
      expect: c.expect,
      deniedBy: c.deniedBy,
    });
  });
  return issues.length > before ? undefined : { table: parsed.data, cases };
}

/** Run cases against a policy set. Never throws. */
export function runTestCases(cases: readonly TestCase[], policies: PolicySet): CaseResult[] {
  return cases.map((c) => {
    const decision = policies.evaluate(
      { caller: c.caller, namespace: c.namespace, metric: metricKey(c.metric), selector: c.selector, resource: c.resource },
      { complete: true },
    );
    let mismatch: string | undefined;
    if (decision.decision !== c.expect) {
      mismatch = `expected ${c.expect}, got ${decision.decision}: ${decision.message}`;
    } else if (c.deniedBy !== undefined) {
      const d = decision.deniedBy;
      if (d === undefined) mismatch = `expected a denial by ${c.deniedBy.policy}, but ${decision.message}`;
      else if (d.policy !== c.deniedBy.policy || (c.deniedBy.rule !== undefined && d.rule !== c.deniedBy.rule)) {
        const want = `${c.deniedBy.policy}${c.deniedBy.rule !== undefined ? ` rules[${c.deniedBy.rule}]` : ""}`;
        mismatch = `expected denial by ${want}, got: ${d.explanation}`;
      }
    }
    return { case: c, decision, pass: mismatch === undefined, ...(mismatch !== undefined ? { mismatch } : {}) };
  });
}
