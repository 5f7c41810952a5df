/**
 * `check-hpa`: for each External, Pods and Object metric of an
 * `autoscaling/v2` HorizontalPodAutoscaler, what the bridge would do with
 * the HPA controller's request — without any network call:
 *
 * 1. the request: `GET …/namespaces/{hpa namespace}/{metric.name}` with
 *    `labelSelector = LabelSelectorAsSelector(metric.selector).String()`
 *    (kubernetes `pkg/controller/podautoscaler/replica_calculator.go`,
 *    `GetExternalMetricReplicas`; k8s.io/metrics
 *    `pkg/client/external_metrics/client.go`);
 * 2. the metric rule it resolves to (by lookup key, as the app does);
 * 3. the backend query it would send: the provider's `plan(request)`
 *    (`shared/providers/types.ts`), which also refuses unmappable selectors;
 * 4. the policy decision for the HPA controller's identity
 *    (`shared/identity.ts` `HPA_CONTROLLER`).
 *
 * Pods and Object metrics are custom.metrics.k8s.io reads (kubernetes
 * `pkg/controller/podautoscaler/metrics/client.go`: `GetRawMetric` reads
 * `GetForObjects(Pod, <scale target's selector>, metric, metricSelector)`,
 * `GetObjectMetric` reads `GetForObject(<describedObject's kind>, name, …)`
 * in the HPA's namespace, and a core `Namespace` as namespace metrics of
 * the HPA's own namespace): the policies decide them with their resource
 * (`pods`; the describedObject's group resource, {@link guessGroupResource};
 * `namespaces`) and the metric's `selector` as the `metricLabelSelector`;
 * the pods' selector is not a series selector and is not checked. With the
 * config, the rule is the `describes:` rule of that resource and metric;
 * the backend query is not shown (it depends on the objects the proxy
 * resolves).
 *
 * Manifests may hold other kinds (skipped) and `kind: List` (`kubectl get
 * -o yaml`), whose items are checked.
 */
import * as z from "../config/zod.ts";
import { issueAt, locate, formatPath, type ConfigIssue, type SourceDocument } from "../config/yaml.ts";
import type { BridgeConfig } from "../config/config.ts";
import { HPA_CONTROLLER } from "../identity.ts";
import { SelectorError, selectorToString, type Selector } from "../k8s/selector.ts";
import { StatusError } from "../k8s/status.ts";
import { metricKey } from "../metric-name.ts";
import type { Provider } from "../providers/types.ts";
import type { Decision, PolicySet } from "./evaluate.ts";
import { requestSelector } from "./explain.ts";
import { EXTERNAL_RESOURCE, labelSelectorObjectSchema } from "./schema.ts";

/** `autoscaling/v2` MetricIdentifier (k8s.io/api `autoscaling/v2/types.go`). */
const metricIdentifierSchema = z.looseObject({ name: z.string().check(z.minLength(1)), selector: z.nullish(labelSelectorObjectSchema) });
const targetSchema = z.optional(z.looseObject({ type: z.optional(z.string()) }));

const hpaSchema = z.looseObject({
  apiVersion: z.literal("autoscaling/v2"),
  kind: z.literal("HorizontalPodAutoscaler"),
  metadata: z.looseObject({ name: z.string().check(z.minLength(1)), namespace: z.optional(z.string().check(z.minLength(1))) }),
  spec: z.looseObject({
    metrics: z._default(
      z.array(
        z.looseObject({
          type: z.string(),
          external: z.optional(z.looseObject({ metric: metricIdentifierSchema, target: targetSchema })),
          pods: z.optional(z.looseObject({ metric: metricIdentifierSchema, target: targetSchema })),
          object: z.optional(
            z.looseObject({
              /** CrossVersionObjectReference */
              describedObject: z.looseObject({
                apiVersion: z.optional(z.string().check(z.maxLength(317))),
                kind: z.string().check(z.minLength(1), z.maxLength(253)),
                name: z.string().check(z.minLength(1), z.maxLength(253)),
              }),
              metric: metricIdentifierSchema,
              target: targetSchema,
            }),
          ),
        }),
      ),
      [],
    ),
  }),
});

/** Kinds whose plural is the kind itself (apimachinery `pkg/api/meta/restmapper.go` `unpluralizedSuffixes`). */
const UNPLURALIZED_SUFFIXES = ["endpoints"];

/**
 * The group resource of a kind, guessed from its name: a port of
 * apimachinery's `meta.UnsafeGuessKindToResource`
 * (k8s.io/apimachinery `pkg/api/meta/restmapper.go`: lowercase; a name
 * ending in `endpoints` is its own plural; `…s` → `…ses`, `…y` → `…ies`,
 * else `…s`), with the group of `apiVersion` as
 * `schema.FromAPIVersionAndKind` parses it (`v1` → the core group; a
 * malformed apiVersion → the core group), written as a custom metrics path
 * writes it: `<plural>` or `<plural>.<group>`. The HPA controller asks
 * discovery (a RESTMapper) instead; the two agree for kinds with regular
 * plurals (every built-in kind the HPA reads). Checked against the Go
 * function by test/policy/kind-resource.oracle.test.ts.
 *
 * @returns `""` for an empty kind (as the Go function's empty resource)
 */
export function guessGroupResource(apiVersion: string, kind: string): string {
  if (kind === "") return "";
  const singular = kind.toLowerCase();
  let plural: string;
  if (UNPLURALIZED_SUFFIXES.some((s) => singular.endsWith(s))) plural = singular;
  else if (singular.endsWith("s")) plural = `${singular}es`;
  else if (singular.endsWith("y")) plural = `${singular.slice(0, -1)}ies`;
  else plural = `${singular}s`;
  const group = apiGroupOf(apiVersion);
  return group === "" ? plural : `${plural}.${group}`;
}

/** The group of an apiVersion as apimachinery's `schema.ParseGroupVersion` reads it (`""` for `v1`, `""` and anything with more than one `/`). */
function apiGroupOf(apiVersion: string): string {
  const parts = apiVersion.split("/");
  return parts.length === 2 ? parts[0]! : "";
}

/** The outcome for one External, Pods or Object metric of one HPA. */
export interface HpaMetricCheck {
  /** `namespace/name` of the HPA */
  hpa: string;
  source: string;
  line: number;
  /** field path of the metric, e.g. `spec.metrics[0]` or `items[1].spec.metrics[0]` */
  path: string;
  namespace: string;
  /** the metric's `type` in the HPA */
  type: "External" | "Pods" | "Object";
  /** what the read is about: `external`, `pods`, or the described object's group resource (`namespaces` for a core Namespace) */
  resource: string;
  /** an Object metric's describedObject */
  describedObject?: { apiVersion: string; kind: string; name: string };
  /** the metric name as written */
  metric: string;
  /** the labelSelector (External) or metricLabelSelector (Pods, Object) as the HPA controller sends it */
  selector: string;
  /** the metric rule it resolves to */
  rule?: { name: string; provider: string };
  /** the backend query the provider would send */
  query?: string;
  /** the policy decision for the HPA controller (absent when the bridge authorizes nothing) */
  decision?: Decision;
  /** everything that would make the HPA's read fail */
  problems: string[];
  ok: boolean;
}

/** What {@link checkHpaDocuments} needs from the bridge. */
export interface BridgeView {
  config: BridgeConfig;
  providers: ReadonlyMap<string, Provider>;
  /** the policies to evaluate; undefined when the config has no policy section */
  policies: PolicySet | undefined;
}

/**
 * Check every External, Pods and Object metric of every HPA in `docs`.
 *
 * @param namespace overrides the HPAs' `metadata.namespace` (default `default`, as kubectl)
 * @returns checks; `skipped`: `autoscaling/v1` HPAs (that version has no
 *   External metrics, only `targetCPUUtilizationPercentage`:
 *   k8s.io/api `autoscaling/v1/types.go`), each with a note; issues for HPA
 *   documents that are malformed or of another version
 */
export function checkHpaDocuments(
  docs: readonly SourceDocument[],
  bridge: BridgeView,
  namespace?: string,
): { checks: HpaMetricCheck[]; issues: ConfigIssue[]; skipped: SkippedHpa[] } {
  const checks: HpaMetricCheck[] = [];
  const issues: ConfigIssue[] = [];
  const skipped: SkippedHpa[] = [];
  const rules = new Map(bridge.config.metrics.map((r) => [r.key, r]));
  const customRules = new Map(bridge.config.customMetrics.map((r) => [customRuleKey(r.describes!.resource, r.key), r]));
  const visit = (sd: SourceDocument, value: unknown, prefix: PropertyKey[]) => {
    const kind = (value as { kind?: unknown } | null)?.kind;
    if (kind === "List") {
      const items = (value as { items?: unknown }).items;
      if (Array.isArray(items)) items.forEach((item, i) => visit(sd, item, [...prefix, "items", i]));
      return;
    }
    if (kind !== "HorizontalPodAutoscaler") return;
    if ((value as { apiVersion?: unknown }).apiVersion === "autoscaling/v1") {
      const meta = (value as { metadata?: { name?: unknown; namespace?: unknown } }).metadata;
      skipped.push({
        hpa: `${typeof meta?.namespace === "string" ? meta.namespace : (namespace ?? "default")}/${String(meta?.name ?? "")}`,
        source: sd.source,
        line: locate(sd, prefix).line,
        path: formatPath(prefix),
        note: AUTOSCALING_V1_NOTE,
      });
      return;
    }
    const one = checkHpaObject(value, { rules, customRules, providers: bridge.providers, policies: bridge.policies }, namespace);
    if ("issues" in one) {
      for (const issue of one.issues) issues.push(issueAt(sd, [...prefix, ...issue.path], issue.message));
      return;
    }
    for (const m of one.metrics) {
      const path = [...prefix, "spec", "metrics", m.index];
      checks.push({ hpa: one.hpa, source: sd.source, line: locate(sd, path).line, path: formatPath(path), ...m.check });
    }
  };
  for (const sd of docs) visit(sd, sd.value, []);
  return { checks, issues, skipped };
}

/** Why an `autoscaling/v1` HPA is skipped. */
export const AUTOSCALING_V1_NOTE =
  "autoscaling/v1 has no External metrics (only targetCPUUtilizationPercentage): skipped; write autoscaling/v2 to use this bridge's metrics";

/** An HPA {@link checkHpaDocuments} did not check, and why. */
export interface SkippedHpa {
  /** `namespace/name` */
  hpa: string;
  source: string;
  line: number;
  /** field path of the object in its document (`""`, or `items[2]` in a List) */
  path: string;
  note: string;
}

/**
 * What {@link checkHpaObject} checks against. Every part is optional, so a
 * component without the bridge's config (the in-cluster proxy's admission
 * webhook) runs the checks that need none:
 *
 * | check | needs |
 * |---|---|
 * | `metric.selector` parses (LabelSelectorAsSelector) | nothing |
 * | `target.type: Utilization` on an External metric | nothing |
 * | the policy decision for the HPA controller | `policies` |
 * | a metric no metric rule defines (the bridge's 404) | `rules` (bridge config) |
 * | a selector the rule's provider cannot map (`plan()`'s 400) | `rules` + `providers` (bridge config) |
 */
export interface HpaCheckView {
  /** the bridge's metric rules by lookup key */
  rules?: ReadonlyMap<string, BridgeConfig["metrics"][number]>;
  /** the bridge's custom.metrics.k8s.io rules by {@link customRuleKey} (with `rules`: the bridge config is known) */
  customRules?: ReadonlyMap<string, BridgeConfig["customMetrics"][number]>;
  providers?: ReadonlyMap<string, Provider>;
  policies?: PolicySet | undefined;
}

/** The key of a custom rule in {@link HpaCheckView.customRules}: its resource and lookup key (as custom-read.ts keys its rules). */
export function customRuleKey(resource: string, key: string): string {
  return `${resource}\u0000${key}`;
}

/**
 * Most External, Pods and Object metrics of one HPA that are checked: the
 * HPA controller reads each one every sync period (15 s), and no autoscaler
 * has a real use for more than a few (the HPA takes the largest of the
 * replica counts they give). An HPA over it is refused (the webhook: 422)
 * without its metrics being parsed.
 */
export const MAX_HPA_EXTERNAL_METRICS = 64;
/** The metric types whose reads go through this bridge (External Metrics and Custom Metrics API). */
const CHECKED_TYPES: ReadonlySet<unknown> = new Set(["External", "Pods", "Object"]);
/** Most entries of `spec.metrics` (of any type) of one HPA that are checked; refused beyond, as {@link MAX_HPA_EXTERNAL_METRICS}. */
export const MAX_HPA_METRICS = 256;

/**
 * Count the entries of an HPA object's `spec.metrics` and those of `type:
 * External`, `Pods` or `Object` (the ones checked), without parsing
 * anything else (microseconds for any size).
 *
 * @returns zeros when `value` has no `spec.metrics` array; `external` is the
 *   count of checked metrics (External, Pods, Object)
 */
export function hpaMetricCount(value: unknown): { metrics: number; external: number } {
  const metrics = (value as { spec?: { metrics?: unknown } } | null | undefined)?.spec?.metrics;
  if (!Array.isArray(metrics)) return { metrics: 0, external: 0 };
  let external = 0;
  for (const m of metrics) if (CHECKED_TYPES.has((m as { type?: unknown } | null)?.type)) external++;
  return { metrics: metrics.length, external };
}

/** One External, Pods or Object metric of one HPA, checked ({@link checkHpaObject}). */
export interface HpaObjectMetric {
  /** position in `spec.metrics` */
  index: number;
  check: Omit<HpaMetricCheck, "hpa" | "source" | "line" | "path">;
}

/**
 * Check one `autoscaling/v2` HorizontalPodAutoscaler object (no file, no
 * network): each External metric's selector, target type, and — as far as
 * `view` allows (see {@link HpaCheckView}) — metric rule, backend query and
 * the policy decision for the HPA controller's identity.
 *
 * @param namespace overrides `metadata.namespace` (default `default`, as kubectl)
 * @returns the HPA's `namespace/name` and one check per External metric, or
 *   the schema problems (field paths relative to the object) when `value` is
 *   not a well-formed `autoscaling/v2` HPA or has more than
 *   {@link MAX_HPA_METRICS} metrics or {@link MAX_HPA_EXTERNAL_METRICS} External ones
 */
export function checkHpaObject(
  value: unknown,
  view: HpaCheckView,
  namespace?: string,
): { hpa: string; namespace: string; metrics: HpaObjectMetric[] } | { issues: { path: PropertyKey[]; message: string }[] } {
  const count = hpaMetricCount(value);
  if (count.metrics > MAX_HPA_METRICS) {
    return { issues: [{ path: ["spec", "metrics"], message: `${count.metrics} metrics, more than the ${MAX_HPA_METRICS} that are checked; split the HorizontalPodAutoscaler` }] };
  }
  if (count.external > MAX_HPA_EXTERNAL_METRICS) {
    return {
      issues: [
        {
          path: ["spec", "metrics"],
          message: `${count.external} External, Pods and Object metrics, more than the ${MAX_HPA_EXTERNAL_METRICS} that are checked; split the HorizontalPodAutoscaler`,
        },
      ],
    };
  }
  const parsed = hpaSchema.safeParse(value);
  if (!parsed.success) return { issues: parsed.error.issues.map((i) => ({ path: i.path as PropertyKey[], message: i.message })) };
  const hpa = parsed.data;
  const ns = namespace ?? hpa.metadata.namespace ?? "default";
  const metrics: HpaObjectMetric[] = [];
  hpa.spec.metrics.forEach((m, index) => {
    if (m.type === "External" && m.external !== undefined) {
      const check = checkOne(view, {
        namespace: ns,
        type: "External",
        resource: EXTERNAL_RESOURCE,
        metric: m.external.metric.name,
        selectorInput: m.external.metric.selector,
        targetType: m.external.target?.type,
      });
      metrics.push({ index, check });
    } else if (m.type === "Pods" && m.pods !== undefined) {
      const check = checkOne(view, { namespace: ns, type: "Pods", resource: "pods", metric: m.pods.metric.name, selectorInput: m.pods.metric.selector, targetType: undefined });
      metrics.push({ index, check });
    } else if (m.type === "Object" && m.object !== undefined) {
      const d = m.object.describedObject;
      const describedObject = { apiVersion: d.apiVersion ?? "", kind: d.kind, name: d.name };
      // client.go GetObjectMetric: a core Namespace is read as namespace metrics of the HPA's own namespace
      const resource = d.kind === "Namespace" && apiGroupOf(describedObject.apiVersion) === "" ? "namespaces" : guessGroupResource(describedObject.apiVersion, d.kind);
      const check = checkOne(view, { namespace: ns, type: "Object", resource, describedObject, metric: m.object.metric.name, selectorInput: m.object.metric.selector, targetType: undefined });
      metrics.push({ index, check });
    }
  });
  return { hpa: `${ns}/${hpa.metadata.name}`, namespace: ns, metrics };
}

/**
 * Why `Utilization` is refused on an External metric: the HPA controller
 * computes External metrics only from `Value` or `AverageValue`
 * (kubernetes `pkg/apis/autoscaling/validation/validation.go`
 * `validateExternalSource`: "must set either a target value or a target
 * average value"; `pkg/controller/podautoscaler/horizontal.go` `computeStatusForExternalMetric`).
 */
export const UTILIZATION_ON_EXTERNAL =
  "target.type Utilization does not apply to an External metric (the HPA controller uses only Value or AverageValue): set target.type Value or AverageValue";

function checkOne(
  bridge: HpaCheckView,
  at: {
    namespace: string;
    type: HpaMetricCheck["type"];
    resource: string;
    describedObject?: HpaMetricCheck["describedObject"];
    metric: string;
    selectorInput: unknown;
    targetType: string | undefined;
  },
): Omit<HpaMetricCheck, "hpa" | "source" | "line" | "path"> {
  const { selectorInput, targetType, ...base } = at;
  if (at.type !== "External") return checkCustom(bridge, base, selectorInput);
  const rules = bridge.rules;
  const problems: string[] = [];
  if (targetType === "Utilization") problems.push(UTILIZATION_ON_EXTERNAL);
  const selector = metricSelectorOf(selectorInput, problems);
  const out: Omit<HpaMetricCheck, "hpa" | "source" | "line" | "path"> = { ...base, selector: selector !== undefined ? selectorToString(selector) : "", problems, ok: false };
  const key = metricKey(at.metric);
  const rule = rules?.get(key);
  if (rules === undefined) {
    // No bridge config: only the policy decision.
    if (selector !== undefined && bridge.policies !== undefined) policyProblem(out, bridge.policies, at.namespace, key, selector);
  } else if (rule === undefined) {
    problems.push(`404: external metric "${at.metric}" is not defined by this bridge`);
  } else {
    out.rule = { name: rule.name, provider: rule.provider };
    const provider = bridge.providers?.get(rule.provider);
    if (selector !== undefined && provider !== undefined) {
      // The app authorizes before it queries; plan() only maps the selector.
      if (bridge.policies !== undefined) policyProblem(out, bridge.policies, at.namespace, key, selector);
      try {
        out.query = provider.plan({ rule, selector, namespace: at.namespace });
      } catch (err) {
        if (!(err instanceof StatusError)) throw err;
        problems.push(`${err.code}: ${err.message}`);
      }
    }
  }
  out.ok = problems.length === 0;
  return out;
}

/** A Pods or Object metric: the metricLabelSelector, the `describes:` rule (with the config) and the policy decision for its resource. */
function checkCustom(
  bridge: HpaCheckView,
  base: Pick<HpaMetricCheck, "namespace" | "type" | "resource" | "describedObject" | "metric">,
  selectorInput: unknown,
): Omit<HpaMetricCheck, "hpa" | "source" | "line" | "path"> {
  const problems: string[] = [];
  const selector = metricSelectorOf(selectorInput, problems);
  const out: Omit<HpaMetricCheck, "hpa" | "source" | "line" | "path"> = { ...base, selector: selector !== undefined ? selectorToString(selector) : "", problems, ok: false };
  const key = metricKey(base.metric);
  if (base.resource === "") problems.push("describedObject.kind is empty");
  else if (bridge.rules !== undefined) {
    const rule = bridge.customRules?.get(customRuleKey(base.resource, key));
    if (rule === undefined) problems.push(`404: custom metric "${base.metric}" for ${base.resource} is not defined by this bridge`);
    else out.rule = { name: rule.name, provider: rule.provider };
  }
  if (selector !== undefined && bridge.policies !== undefined && base.resource !== "") {
    policyProblem(out, bridge.policies, base.namespace, key, selector, base.resource);
  }
  out.ok = problems.length === 0;
  return out;
}

/** How a problem made by the policy decision begins (the rest names the policy and rule; `decision` holds the details). */
export const POLICY_DENIED = "403 Forbidden: denied by ";

/** The policy decision for the HPA controller's read; a Deny becomes a problem naming the policy and rule. */
function policyProblem(
  out: { decision?: Decision; problems: string[] },
  policies: PolicySet,
  namespace: string,
  metric: string,
  selector: Selector,
  resource: string = EXTERNAL_RESOURCE,
): void {
  out.decision = policies.evaluate({ caller: HPA_CONTROLLER, namespace, metric, selector, resource });
  const d = out.decision;
  if (d.decision === "Deny") {
    const v = d.deniedBy;
    const by =
      v === undefined
        ? "the bridge's policy.defaultAction"
        : `${v.policy}${v.rule !== undefined ? ` rules[${v.rule}]` : v.reason === "no-rule-for-resource" ? ` (no rule for ${resource})` : " (defaultAction)"}`;
    out.problems.push(`${POLICY_DENIED}${by}`);
  }
}

/** An HPA metric's `metric.selector` parsed as the HPA controller sends it, or undefined with the reason added to `problems`. */
function metricSelectorOf(selectorInput: unknown, problems: string[]): Selector | undefined {
  try {
    return requestSelector(selectorInput as Parameters<typeof requestSelector>[0]);
  } catch (err) {
    if (!(err instanceof SelectorError)) throw err;
    problems.push(`invalid metric.selector: ${err.message}`);
    return undefined;
  }
}
