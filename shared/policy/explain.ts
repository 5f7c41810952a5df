/**
 * What the admin tools need around {@link PolicySet.evaluate}: callers from
 * command-line or table fields, request selectors as an HPA sends them, and
 * decisions rendered for people (lines) and machines (JSON).
 */
import { HPA_CONTROLLER, type Caller } from "../identity.ts";
import { fromLabelSelector, parseSelector, selectorToString, type Selector } from "../k8s/selector.ts";
import type { Decision, PolicyVerdict } from "./evaluate.ts";
import { serviceAccountUser, showSelector } from "./evaluate.ts";
import { EXTERNAL_RESOURCE, isCustomResource, POLICY_LIMITS, type SelectorInput } from "./schema.ts";
import { isGroupResource } from "../k8s/request-path.ts";

/** A caller as written on the command line or in a test table. */
export interface CallerSpec {
  user?: string | undefined;
  groups?: string[] | undefined;
  /** `NAMESPACE/NAME` */
  serviceAccount?: string | undefined;
}

/**
 * The user a service account authenticates as, with the groups the
 * apiserver adds (`pkg/serviceaccount/util.go` `MakeUsername`,
 * `MakeGroupNames`; `system:authenticated` from the authenticator union).
 */
export function serviceAccountCaller(namespace: string, name: string): Caller {
  return {
    user: serviceAccountUser(namespace, name),
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
    extra: {},
  };
}

/**
 * The caller a spec describes: a service account (`ns/name`), or a user with
 * the groups given (none are added), or — with neither — the HPA
 * controller (`shared/identity.ts` `HPA_CONTROLLER`), the caller of every
 * HPA read.
 *
 * @throws Error when both user and serviceAccount are given, or the
 *   service account is not `NAMESPACE/NAME`
 */
export function callerFrom(spec: CallerSpec): Caller {
  if (spec.serviceAccount !== undefined) {
    if (spec.user !== undefined) throw new Error("give a user or a service account, not both");
    const [ns, name, ...rest] = spec.serviceAccount.split("/");
    if (ns === undefined || name === undefined || ns === "" || name === "" || rest.length > 0) {
      throw new Error(`service account ${JSON.stringify(spec.serviceAccount)} is not NAMESPACE/NAME`);
    }
    const caller = serviceAccountCaller(ns, name);
    return { ...caller, groups: [...caller.groups, ...(spec.groups ?? [])] };
  }
  if (spec.user !== undefined) return { user: spec.user, groups: [...(spec.groups ?? [])], extra: {} };
  if (spec.groups !== undefined && spec.groups.length > 0) throw new Error("groups need a user");
  return HPA_CONTROLLER;
}

/**
 * The selector a request carries: a string is the `labelSelector` query
 * parameter as sent; an object is a `metav1.LabelSelector` (an HPA's
 * `metric.selector`), converted as the HPA controller does —
 * `metav1.LabelSelectorAsSelector(...).String()` on the wire (so a missing
 * selector is sent as `""`, every series), then parsed by the bridge.
 *
 * @throws SelectorError with apimachinery's message
 */
export function requestSelector(input: SelectorInput | null | undefined): Selector {
  if (typeof input === "string") return parseSelector(input);
  return parseSelector(selectorToString(fromLabelSelector(input ?? null)));
}

/** A decision request as the tools describe it. */
export interface ExplainedRequest {
  caller: Caller;
  namespace: string;
  /** the metric name as given */
  metric: string;
  /** the labelSelector; for a custom read the metricLabelSelector */
  selector: Selector;
  /** `external` (absent) or a custom read's group resource */
  resource?: string | undefined;
}

/**
 * A resource as the tools take it (`--resource`, a test case's
 * `resource:`): `external` or a lowercase group resource as the custom
 * paths write it, as a rule's `resources` entries.
 *
 * @throws Error naming the value when it is neither
 */
export function requestResource(text: string | undefined): string {
  if (text === undefined) return EXTERNAL_RESOURCE;
  if (text.length > POLICY_LIMITS.resource || !isGroupResource(text)) {
    throw new Error(
      `resource ${JSON.stringify(text.slice(0, 80))} is not external or a lowercase group resource as the custom metrics paths write it (pods, namespaces, ingresses.networking.k8s.io)`,
    );
  }
  return text;
}

/** One verdict, one line: `team-a/queues  Deny  rules[0] … (file:line)`; `(kind/namespace/name)` for a cluster object (line 0). */
function verdictLine(v: PolicyVerdict): string {
  return `${v.decision.padEnd(5)} ${v.explanation} (${v.line > 0 ? `${v.source}:${v.line}` : v.source})`;
}

/** A decision for people: a headline, then one line per applicable policy. */
export function describeDecision(request: ExplainedRequest, decision: Decision): string[] {
  const custom = isCustomResource(request.resource);
  const lines = [
    `${decision.decision}: ${JSON.stringify(request.metric)}${custom ? ` on ${request.resource}` : ""} ` +
      `${request.namespace === "" ? "of a cluster-scoped object" : `in namespace ${JSON.stringify(request.namespace)}`} ` +
      `with ${custom ? "metricLabelSelector" : "selector"} ${showSelector(selectorToString(request.selector))}`,
    `  caller: user ${JSON.stringify(request.caller.user)}, groups [${request.caller.groups.join(", ")}]`,
  ];
  if (decision.byDefault) {
    lines.push(`  ${decision.message}`);
    return lines;
  }
  lines.push(`  applicable policies (${decision.verdicts.length}), every one must allow:`);
  for (const v of decision.verdicts) lines.push(`    ${verdictLine(v)}`);
  const d = decision.deniedBy;
  if (d !== undefined) {
    const by = d.rule !== undefined ? `rules[${d.rule}]` : d.reason === "no-rule-for-resource" ? `(no rule for ${request.resource})` : "(its defaultAction)";
    lines.push(`  denied by ${d.policy} ${by}`);
  }
  return lines;
}

/** A decision for machines. */
export function decisionJson(request: ExplainedRequest, decision: Decision): Record<string, unknown> {
  return {
    decision: decision.decision,
    message: decision.message,
    byDefault: decision.byDefault,
    request: {
      user: request.caller.user,
      groups: request.caller.groups,
      namespace: request.namespace,
      metric: request.metric,
      resource: request.resource ?? EXTERNAL_RESOURCE,
      selector: selectorToString(request.selector),
    },
    deniedBy: decision.deniedBy ?? null,
    verdicts: decision.verdicts,
  };
}
