/**
 * Policy API objects read from a cluster (`ExternalMetricPolicy`, namespaced;
 * `ClusterExternalMetricPolicy`, cluster-scoped; CRDs in
 * infra/helm/external-metrics-bridge/files/crds/) compiled through the same path as
 * policy files (`load.ts` {@link compilePolicy}), and the `Accepted`
 * condition the loading component writes back to their `status`.
 *
 * Messages never name a file: the source of an object is
 * `ExternalMetricPolicy/<namespace>/<name>` or
 * `ClusterExternalMetricPolicy/<name>`, and condition messages are
 * `<field path>: <problem>` (e.g. `spec.rules[1].metric: invalid RE2
 * pattern: missing closing ]: [a`).
 *
 * Condition semantics are metav1.Condition's
 * (k8s.io/apimachinery `pkg/apis/meta/v1/types.go` Condition; updates as
 * `pkg/api/meta/conditions.go` SetStatusCondition: `lastTransitionTime`
 * changes only when `status` does).
 */
import { parseYamlDocuments, type ConfigIssue } from "../config/yaml.ts";
import type { CompiledPolicy } from "./evaluate.ts";
import { compilePolicy } from "./load.ts";
import { CLUSTER_POLICY_KIND, POLICY_KIND } from "./schema.ts";

/** The condition type the loader sets on every policy object. */
export const ACCEPTED = "Accepted";

/**
 * Reasons of the `Accepted` condition: `Valid` (status True); when False,
 * `InvalidPattern` (a rule's metric is not an RE2 pattern we accept, or is
 * over the cost bound of regex.ts `patternCost`),
 * `InvalidSelector` (a rule's selector does not parse: bad key, value or
 * operator), `InvalidSpec` (anything else: wrong kind, unknown field, a rule
 * with both selector and deny, a bad or duplicate `resources` entry, …).
 */
export type AcceptedReason = "Valid" | "InvalidPattern" | "InvalidSelector" | "InvalidSpec";

/** A metav1.Condition (`pkg/apis/meta/v1/types.go`). */
export interface Condition {
  /** CamelCase type, here always {@link ACCEPTED} */
  type: string;
  status: "True" | "False" | "Unknown";
  /** the object's `metadata.generation` the condition was computed for */
  observedGeneration?: number;
  /** RFC 3339 time, seconds precision (metav1.Time), of the last status change */
  lastTransitionTime: string;
  reason: string;
  /** at most {@link MAX_CONDITION_MESSAGE} characters */
  message: string;
}

/** Longest condition message (the CRD's and metav1.Condition's `maxLength`), characters. */
export const MAX_CONDITION_MESSAGE = 32768;

/** What {@link compilePolicyObject} returns. */
export interface PolicyObjectResult {
  /** the compiled policy; undefined when any problem was found (then this generation is not enforced: shared/proxy/policy/policies.ts keeps the last valid one, or denies the object's scope) */
  policy?: CompiledPolicy;
  /** every problem; `source` is the object's reference, `path` the field */
  issues: ConfigIssue[];
  /** `[Accepted]` for the object's `metadata.generation` */
  conditions: Condition[];
}

/**
 * `ExternalMetricPolicy/<namespace>/<name>` or `ClusterExternalMetricPolicy/<name>`
 * (what messages call the object); tolerant of malformed objects (`?` for a
 * missing name).
 */
export function policyObjectRef(obj: unknown): string {
  const o = (obj ?? {}) as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } };
  const kind = typeof o.kind === "string" && o.kind !== "" ? o.kind : POLICY_KIND;
  const name = typeof o.metadata?.name === "string" && o.metadata.name !== "" ? o.metadata.name : "?";
  const ns = o.metadata?.namespace;
  return kind !== CLUSTER_POLICY_KIND && typeof ns === "string" && ns !== "" ? `${kind}/${ns}/${name}` : `${kind}/${name}`;
}

/**
 * Compile an API object of either kind (as a watch or a list returns it:
 * `metadata` with uid, resourceVersion, managedFields…, and `status`, are
 * fine). `kind: ClusterExternalMetricPolicy` → cluster-scoped (namespace
 * undefined, id = name); `kind: ExternalMetricPolicy` → the namespace of
 * `metadata.namespace`. Never throws on bad input: every problem is an issue
 * and the condition says so.
 *
 * @param obj the object (JSON from the API server)
 * @param now the time stamped on the condition (default: now)
 * @returns the compiled policy when valid, the issues, and `[Accepted]` for
 *   `metadata.generation`
 */
export function compilePolicyObject(obj: unknown, now: Date = new Date()): PolicyObjectResult {
  const source = policyObjectRef(obj);
  const generation = (obj as { metadata?: { generation?: unknown } } | null)?.metadata?.generation;
  const issues: ConfigIssue[] = [];
  let policy: CompiledPolicy | undefined;
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    issues.push({ source, line: 1, column: 1, path: "", message: `expected a ${POLICY_KIND} or ${CLUSTER_POLICY_KIND} object` });
  } else {
    // JSON is YAML: the object goes through exactly the files' path (positions are meaningless here and not shown).
    const [sd] = parseYamlDocuments(JSON.stringify(obj), source);
    policy = compilePolicy(sd!, issues);
  }
  return {
    ...(policy !== undefined ? { policy } : {}),
    issues,
    conditions: [acceptedCondition(issues, typeof generation === "number" ? generation : undefined, now)],
  };
}

/** The reason an issue makes a policy not accepted, from the field it is about. */
export function issueReason(issue: ConfigIssue): Exclude<AcceptedReason, "Valid"> {
  if (/^spec\.rules\[\d+\]\.metric$/.test(issue.path)) return "InvalidPattern";
  if (/^spec\.rules\[\d+\]\.selector(\.|\[|$)/.test(issue.path)) return "InvalidSelector";
  return "InvalidSpec";
}

/**
 * The `Accepted` condition for a compile result.
 *
 * @param issues the problems found (none → True, reason `Valid`)
 * @param generation `metadata.generation` of the compiled object
 * @param now `lastTransitionTime` (seconds precision, as metav1.Time)
 * @returns status False with the first issue's reason and every issue as
 *   `path: message`, joined by `; `, cut to {@link MAX_CONDITION_MESSAGE}
 *   characters; never a file name (issues carry their source separately)
 */
export function acceptedCondition(issues: readonly ConfigIssue[], generation: number | undefined, now: Date = new Date()): Condition {
  const base = {
    type: ACCEPTED,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    lastTransitionTime: metaTime(now),
  };
  if (issues.length === 0) {
    return { ...base, status: "True", reason: "Valid", message: "the policy compiled and is enforced" };
  }
  let message = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
  if (message.length > MAX_CONDITION_MESSAGE) message = `${message.slice(0, MAX_CONDITION_MESSAGE - 1)}…`;
  return { ...base, status: "False", reason: issueReason(issues[0]!), message };
}

/**
 * Put `next` into `conditions` as apimachinery's `meta.SetStatusCondition`
 * does: replace the condition of the same type, keeping its
 * `lastTransitionTime` when `status` did not change; append otherwise.
 *
 * @returns the new list (the input is not modified) and whether anything but
 *   a timestamp of an unchanged status differs, i.e. whether a status write
 *   is needed
 */
export function setCondition(conditions: readonly Condition[] | undefined, next: Condition): { conditions: Condition[]; changed: boolean } {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  if (i < 0) return { conditions: [...list, next], changed: true };
  const prev = list[i]!;
  const merged: Condition = { ...next, lastTransitionTime: prev.status === next.status ? prev.lastTransitionTime : next.lastTransitionTime };
  const changed =
    prev.status !== merged.status ||
    prev.reason !== merged.reason ||
    prev.message !== merged.message ||
    prev.observedGeneration !== merged.observedGeneration ||
    prev.lastTransitionTime !== merged.lastTransitionTime;
  list[i] = merged;
  return { conditions: list, changed };
}

/** metav1.Time's wire form: RFC 3339 in UTC with whole seconds. */
function metaTime(d: Date): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}
