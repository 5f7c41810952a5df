/**
 * The bridge's custom.metrics.k8s.io values read (Pods, Object and
 * namespace metrics), the sibling of `readValues` (./read.ts): a custom read
 * becomes the rule's own provider read, so it gets the same label mapping,
 * batching, coalescing, caching and value checks as an External read
 * (docs/architecture.md "A custom read").
 *
 * - A Pods read (`…/namespaces/{ns}/pods/%2A/{metric}`): the pods come from
 *   the read (the proxy resolved them from `labelSelector` and signed them);
 *   the provider reads `objectLabel in (<pods>)`, `namespaceLabel=<ns>` and
 *   the `metricLabelSelector`, with `noData: omit`, so a pod without data
 *   has no item (the HPA counts it as missing, never 0) and any other
 *   failure fails the whole read;
 * - an Object read (`…/{resource}/{name}/{metric}`): the object comes from
 *   the read (the proxy GETs it); its identifier is read from its name, a
 *   label, an annotation or a `status` field (`describes.identifier`),
 *   checked against `describes.allow`, and the provider reads
 *   `objectLabel=<identifier>`: exactly one item, or a Status;
 * - a namespace read (`…/namespaces/{ns}/metrics/{metric}`): the identifier
 *   is the namespace.
 *
 * Every failure is a Status and never a value; a 503 carries no
 * `Retry-After`, because client-go retries a 5xx that has one up to ten
 * times and the HPA controller would stall its whole sync on one metric
 * (../shared/CUSTOM_METRICS.md "What the HPA controller does").
 *
 * Served by every runtime's `POST` of the custom paths (shared/app.ts) and
 * `BridgeApp.readCustom` (the proxy's in-process backend). Every read writes
 * one audit record and is counted as `kind="custom"` when built with
 * `log` and `countRequest` (the app always builds it so).
 */
import type { BridgeConfig } from "../config/config.ts";
import { REQUEST_DEADLINE_MS } from "../deadline.ts";
import type { Caller } from "../identity.ts";
import { customMetricsPath, type CustomMetricsRead } from "../k8s/request-path.ts";
import { addDecimals, type Decimal } from "../k8s/quantity.ts";
import { goSortByKey, isDNS1123Subdomain, makeRequirement, SelectorError, type Requirement, type Selector } from "../k8s/selector.ts";
import { badRequest, forbidden, notFound, serviceUnavailable, StatusError, toStatusError } from "../k8s/status.ts";
import { metricName } from "../metric-name.ts";
import { UnmappedRequirement } from "../providers/label-mapping.ts";
import type { MetricDescribes, MetricRule, Provider, Series } from "../providers/types.ts";
import { customAnswer, labelSelectorObject, type CustomAnswer, type CustomMetricItem } from "./custom-answer.ts";
import { staleSeries } from "./answer.ts";
import { queryWithDeadline, selectorOf } from "./read.ts";
import type { LogRecord } from "../observability/log.ts";
import { errorKind, type BridgeMetrics, type RequestCounter } from "../observability/metrics.ts";

/** Most pods one Pods read may name (the proxy refuses more before it signs). */
export const MAX_PODS_PER_READ = 1000;

/**
 * The object an Object read describes, as the proxy read it (its own RBAC,
 * bounded): what the rule's `describes.identifier` may read from.
 */
export interface DescribedObject {
  /** the object's kind and apiVersion (`TargetGroupBinding`, `elbv2.k8s.aws/v1beta1`) */
  kind: string;
  apiVersion: string;
  name: string;
  /** "" or absent for a cluster-scoped object */
  namespace?: string;
  labels?: Readonly<Record<string, string>>;
  annotations?: Readonly<Record<string, string>>;
  /** the object's `status`, JSON */
  status?: unknown;
}

/** The objects a custom read carries: the pods of a Pods read, the object of an Object read (none for a namespace read). */
export type ReadObjects = { pods: readonly string[] } | { object: DescribedObject };

/** One custom values read: the path's parts, the two selectors, the objects, who asks and until when. */
export interface CustomValuesRead {
  /** the parsed path (shared/k8s/request-path.ts `customMetricsRead`) */
  target: CustomMetricsRead;
  /** the `metricLabelSelector` text as sent (the HPA's `metric.selector`); empty when none */
  metricLabelSelector: string;
  /** the objects (see {@link ReadObjects}); undefined for a namespace read */
  objects?: ReadObjects;
  caller: Caller;
  readonly signal?: AbortSignal;
  requestId: string;
  /** the path for the audit record, as received (default: the canonical path of `target`, `customMetricsPath`) */
  path?: string;
  /** the `labelSelector` text as sent (the pods' selector, resolved by the proxy), for the audit record only; empty or absent when none */
  labelSelector?: string;
}

/** What the policy decision of a custom read sees: the External request's fields plus the described resource and object. */
export interface CustomAuthorizationRequest {
  caller: Caller;
  namespace: string;
  /** the metric's lookup key */
  metric: string;
  rule: MetricRule;
  /** the parsed `metricLabelSelector` */
  selector: Selector;
  /** the group resource the rule describes (`pods`, `namespaces`, `ingresses.networking.k8s.io`) */
  resource: string;
}

/** What {@link createCustomValuesReader} is built with. */
export interface CustomValuesReaderOptions {
  config: BridgeConfig;
  providers: ReadonlyMap<string, Provider>;
  /** clock, ms since the epoch (staleness) */
  now: () => number;
  /** whole-read deadline, ms (default the External read's) */
  deadlineMs?: number;
  /** the policy decision: throws StatusError 403 to deny. Required: a custom read is never allowed by default. */
  authorize: (request: CustomAuthorizationRequest) => void | Promise<void>;
  /** the audit record's sink (one record per read); absent: no record */
  log?: (record: LogRecord) => void;
  /** counts the policy decisions (`policy_decisions_total{layer="bridge"}`) */
  metrics?: BridgeMetrics;
  /** counts each read as `requests_total{kind="custom"}` and its duration */
  countRequest?: RequestCounter;
}

/** A custom read's outcome: the answer, or the Status to send. */
export type CustomValuesOutcome = CustomAnswer | StatusError;

/**
 * Build the custom values read for one config's `describes:` rules.
 *
 * Every read writes one audit record to `options.log`, at info (2xx), warn
 * (4xx) or error (5xx): `{ msg: "request", requestId, method: "POST", path,
 * user, groups, namespace, resource, name, metric, selector (the
 * `metricLabelSelector`), code, durationMs }` plus, when known, `provider`,
 * `decision` (allow | deny), `items` (the answer's item count), `errorKind`
 * and `error` (when it failed) and `labelSelector` (when sent); the same
 * fields as the External read's record (./read.ts), the custom read's own
 * added.
 *
 * @returns a function that never throws: every failure is a StatusError —
 *   400 (bad metric name or selector, a selection of another resource than
 *   pods, missing or mismatched objects, more than {@link MAX_PODS_PER_READ}
 *   pods, a `metricLabelSelector` on the labels the bridge sets), 403 (the
 *   policy, or an identifier outside `describes.allow`), 404 (no rule for
 *   the resource and metric; the identifier absent from the object), 500/503
 *   from the provider and the answer (503 without `Retry-After`)
 * @throws Error when a rule names a provider that was not built
 */
export function createCustomValuesReader(options: CustomValuesReaderOptions): (read: CustomValuesRead) => Promise<CustomValuesOutcome> {
  const { config, providers, now, authorize } = options;
  const deadlineMs = options.deadlineMs ?? REQUEST_DEADLINE_MS;
  const rules = new Map<string, MetricRule>();
  for (const rule of config.customMetrics) {
    const provider = providers.get(rule.provider);
    if (provider === undefined) throw new Error(`metric ${rule.name}: provider ${rule.provider} was not built`);
    checkMapping(rule, provider);
    rules.set(`${rule.describes!.resource}\u0000${rule.key}`, rule);
  }

  const allowed = options.metrics?.policy.get("bridge", "allow");
  const denied = options.metrics?.policy.get("bridge", "deny");

  const read = async (parts: CustomValuesRead, audit: CustomAudit): Promise<CustomAnswer> => {
    const { target } = parts;
    const { requested, key } = metricName(target.metric);
    audit.metric = requested;
    const rule = rules.get(`${target.resource}\u0000${key}`);
    if (rule === undefined) {
      throw notFound(`custom metric "${requested}" for ${target.resource} is not defined by this bridge`, { name: requested, group: "custom.metrics.k8s.io", kind: target.resource });
    }
    const describes = rule.describes!;
    const metricSelector = selectorOf(parts.metricLabelSelector);
    for (const r of metricSelector.requirements) {
      if (r.key === describes.objectLabel || r.key === describes.namespaceLabel) {
        throw badRequest(`metricLabelSelector may not constrain "${r.key}": metric ${rule.name} sets it from the described object`);
      }
    }
    let wireSelector;
    try {
      wireSelector = parts.metricLabelSelector === "" ? null : labelSelectorObject(metricSelector);
    } catch (err) {
      if (err instanceof SelectorError) throw badRequest(`invalid metricLabelSelector: ${err.message}`);
      throw err;
    }
    audit.provider = rule.provider;
    // the policy first: a caller it denies learns nothing of the object (its identifier, a missing label or status field)
    try {
      await authorize({ caller: parts.caller, namespace: target.namespace, metric: key, rule, selector: metricSelector, resource: describes.resource });
    } catch (err) {
      if (err instanceof StatusError && err.code === 403) {
        audit.decision = "deny";
        if (denied !== undefined) denied.n++;
      }
      throw err;
    }
    audit.decision = "allow";
    if (allowed !== undefined) allowed.n++;
    const identifiers = identifiersOf(rule, describes, parts);

    const selected = target.shape === "selected";
    // a labelSelector that selects no pod (e.g. a Deployment whose pods are gone): nothing to read, and `pod in ()` is no selector
    if (selected && identifiers.length === 0) {
      audit.items = 0;
      return customAnswer(target.version, requested, wireSelector, []);
    }
    const selector = describedSelector(describes, identifiers.map((i) => i.identifier), target.namespace, metricSelector.requirements);
    const provider = providers.get(rule.provider)!;
    const series = await queryWithDeadline(provider, { rule, selector, namespace: target.namespace, ...(selected ? { noData: "omit" as const, maxSeries: MAX_PODS_PER_READ } : {}) }, parts.signal, deadlineMs);
    const items = itemsOf(rule, describes, identifiers, series, now());
    if (!selected && items.length !== 1) {
      throw serviceUnavailable(`metric ${rule.name}: provider ${rule.provider} returned no series for ${target.resource}/${target.name}; no value is reported`);
    }
    audit.items = items.length;
    return customAnswer(target.version, requested, wireSelector, items);
  };

  /** The audit record and the request metrics of one read, then its outcome. */
  const finish = (parts: CustomValuesRead, audit: CustomAudit, started: number, outcome: CustomValuesOutcome): CustomValuesOutcome => {
    const code = outcome instanceof StatusError ? outcome.code : 200;
    const seconds = (performance.now() - started) / 1000;
    options.countRequest?.("custom", code, seconds);
    if (options.log === undefined) return outcome;
    const { target } = parts;
    const record: LogRecord = {
      level: code >= 500 ? "error" : code >= 400 ? "warn" : "info",
      msg: "request",
      requestId: parts.requestId,
      method: "POST",
      path: parts.path ?? customMetricsPath(target),
      user: parts.caller.user,
      groups: parts.caller.groups,
      namespace: target.namespace,
      resource: target.resource,
      name: target.name,
      metric: audit.metric ?? target.metric,
      selector: parts.metricLabelSelector,
      code,
      durationMs: Math.round(seconds * 1e6) / 1e3,
    };
    if (parts.labelSelector !== undefined && parts.labelSelector !== "") record["labelSelector"] = parts.labelSelector;
    if (audit.provider !== undefined) record["provider"] = audit.provider;
    if (audit.decision !== undefined) record["decision"] = audit.decision;
    if (outcome instanceof StatusError) {
      record["errorKind"] = errorKind(outcome);
      record["error"] = outcome.message;
    } else record["items"] = audit.items ?? outcome.list.items.length;
    options.log(record);
    return outcome;
  };

  return async (parts) => {
    const started = performance.now();
    const audit: CustomAudit = {};
    let outcome: CustomValuesOutcome;
    try {
      outcome = await read(parts, audit);
    } catch (err) {
      if (!(err instanceof StatusError)) options.log?.({ level: "error", msg: "unhandled error", error: String(err) });
      outcome = withoutRetryAfter(toStatusError(err));
    }
    return finish(parts, audit, started, outcome);
  };
}

/** What a custom read's audit record says beyond the read's parts (filled in as the read goes). */
interface CustomAudit {
  /** the metric name as requested, once checked */
  metric?: string;
  provider?: string;
  decision?: "allow" | "deny";
  /** the answer's item count */
  items?: number;
}

/**
 * Refuse at build time a rule whose provider cannot read the labels the
 * bridge sets: plan (no I/O) a read of one object in one namespace.
 *
 * @throws Error naming the rule and the provider's own refusal (e.g. a label the rule's query does not map)
 */
function checkMapping(rule: MetricRule, provider: Provider): void {
  const describes = rule.describes!;
  try {
    provider.plan({ rule, selector: describedSelector(describes, ["example"], "example"), namespace: "example" });
  } catch (err) {
    // a value the provider refuses ("example" is no queue URL, not in a label's allow-list) concerns that value only
    if (err instanceof StatusError && !(err instanceof UnmappedRequirement)) return;
    throw new Error(`metric ${rule.name} (describes ${describes.resource}): its query cannot be read by ${describes.objectLabel}${describes.namespaceLabel !== undefined ? ` and ${describes.namespaceLabel}` : ""}: ${(err as Error).message}`);
  }
}

/** One described object and the identifier its series are labelled with. */
interface Identified {
  identifier: string;
  object: CustomMetricItem["describedObject"];
}

/**
 * The described objects of a read and their identifiers (see the module doc).
 *
 * @throws StatusError 400 (shape or objects wrong), 403 (outside `allow`), 404 (no identifier on the object)
 */
function identifiersOf(rule: MetricRule, describes: MetricDescribes, parts: CustomValuesRead): Identified[] {
  const { target, objects } = parts;
  const allowed = (identifier: string): string => {
    if (describes.allow !== undefined && !describes.allow.some((p) => p.matches(identifier))) {
      throw forbidden(`metric ${rule.name}: ${JSON.stringify(identifier)} is not an identifier this rule allows (describes.allow)`);
    }
    return identifier;
  };
  if (target.shape === "namespace") {
    return [{ identifier: allowed(target.namespace), object: { kind: "Namespace", name: target.namespace, apiVersion: "/v1" } }];
  }
  if (target.shape === "selected") {
    if (target.resource !== "pods") throw badRequest(`a selection of ${target.resource} is not served: only pods/%2A (HPA type Pods)`);
    if (objects === undefined || !("pods" in objects)) throw badRequest("a Pods read must carry the pods its labelSelector selects (the in-cluster proxy resolves and signs them)");
    if (objects.pods.length > MAX_PODS_PER_READ) throw badRequest(`a Pods read may name at most ${MAX_PODS_PER_READ} pods, not ${objects.pods.length}`);
    const names = [...new Set(objects.pods)];
    for (const name of names) if (!isDNS1123Subdomain(name)) throw badRequest(`${JSON.stringify(name.slice(0, 300))} is not a pod name`);
    return names.map((name) => ({ identifier: allowed(name), object: { kind: "Pod", namespace: target.namespace, name, apiVersion: "/v1" } }));
  }
  if (objects === undefined || !("object" in objects)) throw badRequest(`an Object read must carry the object it describes (the in-cluster proxy reads it)`);
  const object = objects.object;
  if (object.name !== target.name || (object.namespace ?? "") !== target.namespace) {
    throw badRequest(`the object carried (${object.namespace ? `${object.namespace}/` : ""}${object.name}) is not the one in the path (${target.namespace ? `${target.namespace}/` : ""}${target.name})`);
  }
  const identifier = identifierOf(describes, object);
  if (identifier === undefined) {
    throw notFound(`metric ${rule.name}: ${target.resource}/${target.name} has no ${describeSource(describes)} to read the series from`);
  }
  const ref = { kind: object.kind, name: object.name, apiVersion: object.apiVersion, ...(object.namespace ? { namespace: object.namespace } : {}) };
  return [{ identifier: allowed(identifier), object: ref }];
}

/** The identifier `describes.identifier` names on `object`, when it is a non-empty string there. */
function identifierOf(describes: MetricDescribes, object: DescribedObject): string | undefined {
  const source = describes.identifier;
  let value: unknown;
  if (source.from === "name") value = object.name;
  else if (source.from === "status") {
    value = object.status;
    for (const field of source.path) value = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>)[field] : undefined;
  } else value = (source.from === "label" ? object.labels : object.annotations)?.[source.key];
  return typeof value === "string" && value !== "" ? value : undefined;
}

function describeSource(describes: MetricDescribes): string {
  const source = describes.identifier;
  if (source.from === "name") return "name";
  if (source.from === "status") return `status.${source.path.join(".")}`;
  return `${source.from} ${JSON.stringify(source.key)}`;
}

/**
 * The selector of a custom read for the rule's own mapping:
 * `objectLabel in (<identifiers>)`, `namespaceLabel=<namespace>` when the
 * rule has one, and `base` (the read's `metricLabelSelector`), sorted by key
 * as `labels.Parse` leaves them. The identifiers are values the bridge chose
 * (pod names, cloud identifiers) and are not checked as label values (a
 * queue URL is not one): the provider's mapping quotes or checks each for
 * its backend.
 */
function describedSelector(describes: MetricDescribes, identifiers: readonly string[], namespace: string, base: readonly Requirement[] = []): Selector {
  const requirements = [...base, makeRequirement(describes.objectLabel, "in", identifiers)];
  if (describes.namespaceLabel !== undefined) requirements.push(makeRequirement(describes.namespaceLabel, "=", [namespace]));
  goSortByKey(requirements);
  return Object.freeze({ requirements: Object.freeze(requirements) });
}

/**
 * One item per described object that has series: the sum of its series
 * (the HPA sums an object's series itself for External reads; here the
 * items are per object), stamped with the oldest. A series older than the
 * rule's `maxAgeSeconds` fails the read (503), never a stale value.
 */
function itemsOf(rule: MetricRule, describes: MetricDescribes, identified: readonly Identified[], series: readonly Series[], at: number): CustomMetricItem[] {
  const byIdentifier = new Map<string, { value: Decimal; timestamp: number; windowSeconds?: number }>();
  for (const s of series) {
    const ageMs = at - s.timestamp;
    if (ageMs > rule.maxAgeSeconds * 1000) throw staleSeries(rule, s, ageMs);
    const id = s.labels[describes.objectLabel];
    if (id === undefined) continue;
    const known = byIdentifier.get(id);
    byIdentifier.set(
      id,
      known === undefined
        ? { value: s.value, timestamp: s.timestamp, ...(s.windowSeconds !== undefined ? { windowSeconds: s.windowSeconds } : {}) }
        : { ...known, value: addDecimals(known.value, s.value), timestamp: Math.min(known.timestamp, s.timestamp) },
    );
  }
  const items: CustomMetricItem[] = [];
  for (const { identifier, object } of identified) {
    const reading = byIdentifier.get(identifier);
    if (reading !== undefined) items.push({ describedObject: object, ...reading });
  }
  return items;
}

/** The same Status without its `Retry-After` (see the module doc). */
function withoutRetryAfter(err: StatusError): StatusError {
  if (err.details?.retryAfterSeconds === undefined) return err;
  const { retryAfterSeconds: _dropped, ...details } = err.details;
  return new StatusError(err.code, err.message, Object.keys(details).length > 0 ? details : undefined, { cause: err });
}
