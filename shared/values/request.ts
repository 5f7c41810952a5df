/**
 * A values read as typed parts: what every caller of the bridge's values
 * read hands over (the Hono routes of the Node server, the Worker and the
 * Lambda, and the proxy's in-process backend), and the one parser that turns
 * a request target into those parts for the HTTP routes.
 *
 * The parts are the ones the canonical request path parser gives
 * (shared/k8s/request-path.ts, the proxy's too): a path is decoded once, and
 * every layer (policy, cache, audit record) uses the same namespace, metric
 * name and `labelSelector` text. The proxy's in-process backend hands over
 * the parts it already parsed; nothing is parsed twice.
 *
 * The read of the External Metrics API is one member of {@link ValuesRead};
 * the Custom Metrics API's Pods and Object reads are siblings with their own
 * `api` (see docs/architecture.md).
 */
import type { Caller } from "../identity.ts";
import type { Selector } from "../k8s/selector.ts";
import type { MetricRule } from "../providers/types.ts";
import { BoundedMap } from "../cache/bounded-map.ts";
import { externalMetricsRead, notFoundPath, parseRequestTarget } from "../k8s/request-path.ts";
import { badRequest } from "../k8s/status.ts";
import { GROUP, VERSION } from "../k8s/types.ts";

/** The `api` of an External Metrics values read: `external.metrics.k8s.io/v1beta1`. */
export const EXTERNAL_METRICS_API = `${GROUP}/${VERSION}` as const;

/**
 * What names one External Metrics values read, decoded once
 * (`GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}?labelSelector=…`,
 * k8s.io/metrics `pkg/client/external_metrics/client.go`).
 */
export interface ExternalValuesParts {
  api: typeof EXTERNAL_METRICS_API;
  /** the namespace, decoded, a DNS-1123 label (checked by the path parser) */
  namespace: string;
  /** the metric name as requested, decoded; not yet lowercased (shared/metric-name.ts `metricName` checks it: 400) */
  metric: string;
  /** the `labelSelector` text as sent (query-decoded, Go's `url.ParseQuery`: `+` is a space); empty when none */
  labelSelector: string;
}

/**
 * One values read: the parts plus who asks and until when. The bridge's
 * `readValues` (shared/values/read.ts) answers it.
 */
export interface ValuesRead extends ExternalValuesParts {
  /** the authenticated caller: the bridge's policies decide for it */
  caller: Caller;
  /** aborted when nobody waits any more (the client left, the proxy's deadline): cancels the provider call; read only when a backend call is made */
  readonly signal?: AbortSignal;
  /** the request id (the answer's `X-Request-Id`, the audit record's `requestId`) */
  requestId: string;
  /** the path for the audit record, as received (default: the canonical path of the parts) */
  path?: string;
}

/**
 * The `labelSelector` of a query: its only value, or "" when absent.
 *
 * @throws StatusError 400 when given more than once (apiserver would read
 *   the first one only; the bridge and the proxy refuse the ambiguity)
 */
export function labelSelectorOf(query: URLSearchParams): string {
  const values = query.getAll("labelSelector");
  if (values.length > 1) throw badRequest("labelSelector may be given only once");
  return values[0] ?? "";
}

/** Most values-read targets remembered parsed, and their bytes at most (keys and parts, two bytes per character). */
const MEMO_TARGETS = 1024;
const MEMO_TARGETS_BYTES = 4 << 20;
/** Longest target remembered parsed, characters (the HPA's URLs are a few hundred). */
const MEMO_TARGET_LENGTH = 1024;

/**
 * Values-read targets parsed before, by their whole text: the HPA controller
 * sends the same URLs every 15 s and parsing is a few µs of a cached read
 * (issue 11 P1). Failures are not remembered. Process-wide: the parts are a
 * function of the text alone.
 */
const parsedTargets = new BoundedMap<string, ExternalValuesParts>({
  maxEntries: MEMO_TARGETS,
  maxBytes: MEMO_TARGETS_BYTES,
  sizeOf: (target, parts) => 2 * (target.length + parts.namespace.length + parts.metric.length + parts.labelSelector.length) + 256,
});

/**
 * The parts of a values read's request target as received (path and query,
 * still percent-encoded), by the one request path parser
 * (shared/k8s/request-path.ts): non-canonical percent-encodings, `.`/`..`,
 * `//` and a namespace that is not a DNS-1123 label are refused. Remembered
 * by target when it is at most {@link MEMO_TARGET_LENGTH} characters.
 *
 * @param target e.g. `/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/m?labelSelector=q%3Da`
 * @param method the request method, for the 404 message
 * @throws StatusError 404 (not `…/namespaces/<ns>/<metric>`), 400 (path or
 *   namespace refused, `labelSelector` given more than once)
 */
export function parseValuesTarget(target: string, method: string): ExternalValuesParts {
  const known = parsedTargets.get(target);
  if (known !== undefined) return known;
  const parsed = parseRequestTarget(target);
  const values = externalMetricsRead(parsed.path);
  if (values === undefined) throw notFoundPath(method, parsed.path);
  const parts: ExternalValuesParts = Object.freeze({
    api: EXTERNAL_METRICS_API,
    namespace: values.namespace,
    metric: values.metric,
    labelSelector: labelSelectorOf(parsed.query),
  });
  if (target.length <= MEMO_TARGET_LENGTH) parsedTargets.set(target, parts);
  return parts;
}

/**
 * What the bridge's policy decision (`authorize`, shared/policy/authorize.ts
 * `policyHooks`) decides on: the read's parts once checked, and its rule.
 */
export interface AuthorizationRequest {
  caller: Caller;
  namespace: string;
  /** the metric name's lookup key (lowercased, `/` for `|`) */
  metric: string;
  rule: MetricRule;
  /**
   * the parsed `labelSelector`: the same frozen object for every read of
   * the same namespace, metric and selector text while the bridge remembers
   * it (shared/values/read.ts), so a memo may key on it (shared/bridge.ts
   * `rememberAllowed`); a new object only costs that memo a miss
   */
  selector: Selector;
}
