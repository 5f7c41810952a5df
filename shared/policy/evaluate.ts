/**
 * ExternalMetricPolicy evaluation (`../shared/POLICY.md`, "Evaluation"):
 *
 * 1. applicable policies: the cluster-scoped ones whose subjects match the
 *    caller, then the request namespace's ones whose subjects match (each
 *    group in load order);
 * 2. each gives Allow or Deny: the first rule whose `metric` pattern matches
 *    the whole lowercased metric name AND whose `resources` include the
 *    request's resource (`external`, or a custom read's group resource)
 *    decides — `deny: true` → Deny; `selector: S` → Allow only if the
 *    request selector (a custom read's `metricLabelSelector`) is a subset of
 *    S; no rule → the policy's `defaultAction` for an External read, and
 *    Deny for a custom read (fail closed: a custom read needs a rule naming
 *    its resource; issue 26, /work/wt/prompts/contracts26.md C1);
 * 3. the request is allowed only if every applicable policy allows it; with
 *    none applicable, the bridge's `policy.defaultAction` decides.
 *
 * A {@link PolicySet} is built once per config load; a request then costs
 * the subject checks of the policies in scope, a memoised first-rule lookup
 * per policy and metric name, and one selector containment check per policy
 * whose deciding rule has a selector.
 */
import { requirementToString, selectorToString, type Selector } from "../k8s/selector.ts";
import type { Caller } from "../identity.ts";
import type { MetricPattern } from "./regex.ts";
import { coversResource, EXTERNAL_RESOURCE, isCustomResource, type Action } from "./schema.ts";
import { PreparedSelector, selectorSubset } from "./subset.ts";

/** One compiled rule of a policy. */
export interface CompiledRule {
  /** position in `spec.rules`, 0-based */
  index: number;
  pattern: MetricPattern;
  /** the reads the rule covers: `external` and/or group resources (`pods`, `ingresses.networking.k8s.io`); `["external"]` when the rule has no `resources` */
  resources: readonly string[];
  /** the selector the rule allows; undefined for a `deny: true` rule */
  selector: Selector | undefined;
  /** `selector` in selector syntax (`""`: every series) */
  selectorText: string;
  /** 1-based line of the rule in its file */
  line: number;
}

/** A compiled ExternalMetricPolicy. */
export interface CompiledPolicy {
  name: string;
  /** undefined for a cluster-scoped policy */
  namespace: string | undefined;
  /** `namespace/name`, or `name` for a cluster-scoped policy */
  id: string;
  /** undefined: applies to every caller; else users (service accounts as their user names) and groups */
  subjects: { users: ReadonlySet<string>; groups: ReadonlySet<string> } | undefined;
  rules: CompiledRule[];
  defaultAction: Action;
  /** file and 1-based line the policy was loaded from */
  source: string;
  line: number;
}

/** What a policy decision is asked about. */
export interface PolicyRequest {
  caller: Caller;
  namespace: string;
  /** the metric name's lookup key: lowercased, `/` for `|` (`shared/metric-name.ts`) */
  metric: string;
  /** the request's parsed `labelSelector`; for a custom read the parsed `metricLabelSelector` */
  selector: Selector;
  /**
   * what is read: `external` (the default) or a custom read's group resource
   * as its path writes it (`pods`, `namespaces` for namespace metrics,
   * `ingresses.networking.k8s.io`), exact and lowercase
   */
  resource?: string;
}

/** Why a policy decided as it did. */
export type VerdictReason = "deny-rule" | "selector-subset" | "selector-not-subset" | "default-action" | "no-rule-for-resource";

/** One applicable policy's answer. */
export interface PolicyVerdict {
  /** policy id: `namespace/name` or `name` */
  policy: string;
  source: string;
  line: number;
  decision: Action;
  reason: VerdictReason;
  /** index of the deciding rule (absent for `default-action` and `no-rule-for-resource`) */
  rule?: number;
  /** the deciding rule's `metric` pattern */
  pattern?: string;
  /** the deciding rule's allowed selector, in selector syntax (`""` = every series) */
  allowedSelector?: string;
  /** for `selector-not-subset`: the requirement of the allowed selector the request does not imply */
  missing?: string;
  /** one sentence: policy, rule and why */
  explanation: string;
}

/** The outcome of {@link PolicySet.evaluate}. */
export interface Decision {
  decision: Action;
  /**
   * verdicts of the applicable policies in evaluation order; a request-path
   * evaluation stops at the first Deny, a `complete` one lists them all
   */
  verdicts: PolicyVerdict[];
  /** the first Deny verdict */
  deniedBy?: PolicyVerdict;
  /** true when no policy applied and the bridge's defaultAction decided */
  byDefault: boolean;
  /** one sentence stating the decision and what made it */
  message: string;
}

/**
 * Most memoised (resource, metric name) pairs per policy (the bridge asks
 * only about configured names; the proxy's cluster layer about what callers
 * send, so the memo is bounded in bytes too).
 */
const MEMO_LIMIT = 4096;
/** Most estimated bytes of one policy's memo (keys as UTF-16 plus 64 bytes an entry); a key over an eighth of it is not memoised. */
const MEMO_BYTES = 512 * 1024;

/** One policy's first-rule memo: rule index (-1: none) by key, and its estimated bytes. */
interface RuleMemo {
  rules: Map<string, number>;
  bytes: number;
}

/** The user name of a service account (`pkg/serviceaccount/util.go` `MakeUsername`). */
export function serviceAccountUser(namespace: string, name: string): string {
  return `system:serviceaccount:${namespace}:${name}`;
}

/** A selector for messages: `"queue=a"`, or `"" (every series)`. */
export function showSelector(text: string): string {
  return text === "" ? `"" (every series)` : JSON.stringify(text);
}

/** Compiled policies plus the bridge's default: evaluates requests. */
export class PolicySet {
  readonly policies: readonly CompiledPolicy[];
  /** the decision when no policy applies */
  readonly defaultAction: Action;
  /** appended to the message of a decision made by {@link defaultAction} (e.g. why the default is what it is) */
  readonly defaultNote: string | undefined;
  readonly #cluster: CompiledPolicy[] = [];
  readonly #byNamespace = new Map<string, CompiledPolicy[]>();
  readonly #memo = new Map<CompiledPolicy, RuleMemo>();

  /**
   * @param policies in load order (ids must be unique; the loader checks)
   * @param defaultAction the bridge's `policy.defaultAction`
   * @param defaultNote appended to the message when no policy applies
   */
  constructor(policies: readonly CompiledPolicy[], defaultAction: Action, defaultNote?: string) {
    this.policies = policies;
    this.defaultAction = defaultAction;
    this.defaultNote = defaultNote;
    for (const p of policies) {
      if (p.namespace === undefined) this.#cluster.push(p);
      else {
        const list = this.#byNamespace.get(p.namespace);
        if (list === undefined) this.#byNamespace.set(p.namespace, [p]);
        else list.push(p);
      }
      this.#memo.set(p, { rules: new Map(), bytes: 0 });
    }
  }

  /** Entries and estimated bytes of `policy`'s first-rule memo (tests and metrics; zeros for a policy not in this set). */
  memoStats(policy: CompiledPolicy): { entries: number; bytes: number } {
    const memo = this.#memo.get(policy);
    return { entries: memo?.rules.size ?? 0, bytes: memo?.bytes ?? 0 };
  }

  /** The policies that apply to `caller` in `namespace`, in evaluation order. */
  applicable(caller: Caller, namespace: string): CompiledPolicy[] {
    const out: CompiledPolicy[] = [];
    for (const p of this.#cluster) if (subjectsMatch(p, caller)) out.push(p);
    for (const p of this.#byNamespace.get(namespace) ?? []) if (subjectsMatch(p, caller)) out.push(p);
    return out;
  }

  /**
   * The first rule of `policy` whose pattern matches `metric` (a lookup key)
   * and whose `resources` include `resource` (default `external`), memoised
   * per (resource, metric), at most {@link MEMO_LIMIT} pairs and
   * {@link MEMO_BYTES} per policy (then the memo starts over).
   */
  firstRule(policy: CompiledPolicy, metric: string, resource: string = EXTERNAL_RESOURCE): CompiledRule | undefined {
    let memo = this.#memo.get(policy);
    if (memo === undefined) {
      memo = { rules: new Map(), bytes: 0 };
      this.#memo.set(policy, memo);
    }
    // "\u0000" is in neither a resource nor a lookup key
    const memoKey = resource === EXTERNAL_RESOURCE ? metric : `${resource}\u0000${metric}`;
    const known = memo.rules.get(memoKey);
    if (known !== undefined) return known < 0 ? undefined : policy.rules[known];
    const rule = policy.rules.find((r) => coversResource(r.resources, resource) && r.pattern.matches(metric));
    const bytes = 64 + memoKey.length * 2;
    if (bytes > MEMO_BYTES / 8) return rule;
    if (memo.rules.size >= MEMO_LIMIT || memo.bytes + bytes > MEMO_BYTES) {
      memo.rules.clear();
      memo.bytes = 0;
    }
    memo.rules.set(memoKey, rule?.index ?? -1);
    memo.bytes += bytes;
    return rule;
  }

  /** One policy's verdict on a request. */
  verdict(policy: CompiledPolicy, request: PolicyRequest, prepared?: PreparedSelector, requestedText?: string): PolicyVerdict {
    const base = { policy: policy.id, source: policy.source, line: policy.line };
    const resource = request.resource ?? EXTERNAL_RESOURCE;
    const custom = isCustomResource(resource);
    const rule = this.firstRule(policy, request.metric, resource);
    if (rule === undefined) {
      if (custom) {
        return {
          ...base,
          decision: "Deny",
          reason: "no-rule-for-resource",
          explanation:
            `policy ${policy.id} has no rule for metric "${request.metric}" on resource "${resource}": a custom read needs a rule ` +
            `naming its resource in resources (the policy's defaultAction ${policy.defaultAction} decides External reads only)`,
        };
      }
      return {
        ...base,
        decision: policy.defaultAction,
        reason: "default-action",
        explanation: `policy ${policy.id} has no rule for metric "${request.metric}" and its defaultAction is ${policy.defaultAction}`,
      };
    }
    const at = `policy ${policy.id} rules[${rule.index}] (metric "${rule.pattern.source}"${custom ? `, resource "${resource}"` : ""})`;
    const ruleInfo = { rule: rule.index, pattern: rule.pattern.source };
    if (rule.selector === undefined) {
      return { ...base, ...ruleInfo, decision: "Deny", reason: "deny-rule", explanation: `${at} is a deny rule` };
    }
    const allowedSelector = rule.selectorText;
    const q = prepared ?? new PreparedSelector(request.selector);
    const result = selectorSubset(q, rule.selector);
    const requested = requestedText ?? selectorToString(request.selector);
    if (result.subset) {
      return {
        ...base,
        ...ruleInfo,
        allowedSelector,
        decision: "Allow",
        reason: "selector-subset",
        explanation: `${at} allows selector ${showSelector(allowedSelector)}, which contains the request's selector ${showSelector(requested)}`,
      };
    }
    const missing = result.missing === undefined ? undefined : requirementToString(result.missing);
    return {
      ...base,
      ...ruleInfo,
      allowedSelector,
      ...(missing !== undefined ? { missing } : {}),
      decision: "Deny",
      reason: "selector-not-subset",
      explanation:
        missing === undefined
          ? `${at} allows a selector that matches no series`
          : `${at} allows only selector ${showSelector(allowedSelector)}, and the request's selector ` +
            `${showSelector(requested)} does not imply "${missing}"`,
    };
  }

  /**
   * Decide a request.
   *
   * @param options.complete evaluate every applicable policy (for `explain`)
   *   instead of stopping at the first Deny
   * @returns the decision; never throws
   */
  evaluate(request: PolicyRequest, options: { complete?: boolean } = {}): Decision {
    const applicable = this.applicable(request.caller, request.namespace);
    const who = `user ${JSON.stringify(request.caller.user)}`;
    if (applicable.length === 0) {
      const resource = request.resource ?? EXTERNAL_RESOURCE;
      const where = request.namespace === "" ? "for a cluster-scoped object" : `in namespace "${request.namespace}"`;
      return {
        decision: this.defaultAction,
        verdicts: [],
        byDefault: true,
        message:
          `no ExternalMetricPolicy applies to ${who} ${isCustomResource(resource) ? `reading ${resource} ` : ""}${where}, ` +
          `and the bridge's policy.defaultAction is ${this.defaultAction}` +
          (this.defaultNote !== undefined ? `: ${this.defaultNote}` : ""),
      };
    }
    const prepared = new PreparedSelector(request.selector);
    const requestedText = selectorToString(request.selector);
    const verdicts: PolicyVerdict[] = [];
    let deniedBy: PolicyVerdict | undefined;
    for (const policy of applicable) {
      const v = this.verdict(policy, request, prepared, requestedText);
      verdicts.push(v);
      if (v.decision === "Deny" && deniedBy === undefined) {
        deniedBy = v;
        if (options.complete !== true) break;
      }
    }
    if (deniedBy !== undefined) {
      return { decision: "Deny", verdicts, deniedBy, byDefault: false, message: deniedBy.explanation };
    }
    const by = verdicts.map((v) => (v.rule !== undefined ? `${v.policy} rules[${v.rule}]` : `${v.policy} (defaultAction)`));
    return { decision: "Allow", verdicts, byDefault: false, message: `allowed by every applicable policy: ${by.join(", ")}` };
  }
}

/** Whether a policy's subjects include the caller (no subjects: everyone). */
function subjectsMatch(policy: CompiledPolicy, caller: Caller): boolean {
  const s = policy.subjects;
  if (s === undefined) return true;
  if (s.users.has(caller.user)) return true;
  for (const g of caller.groups) if (s.groups.has(g)) return true;
  return false;
}
