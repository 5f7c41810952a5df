/**
 * What the bridge counts, in one place, for every runtime: plain numbers
 * updated on the request path (a few Map updates per read, no library on the
 * hot path) and read by each runtime's exporter —
 * `./prometheus.ts` (Node server `/metrics`, prom-client text format),
 * `./emf.ts` (Lambda: CloudWatch Embedded Metric Format in the per-read log
 * line) and the per-read audit log line itself (Workers Logs; Workers
 * Analytics Engine when bound, `functions/worker.ts`).
 *
 * Names (prefix `emb_bridge_`, Prometheus conventions, compared with KEDA's
 * `keda_scaler_metrics_value`, `keda_scaler_errors_total`,
 * `keda_scaler_metrics_latency_seconds`):
 *
 * | name | type | labels |
 * |---|---|---|
 * | `emb_bridge_requests_total` | counter | `kind` (values: External reads, custom: custom.metrics.k8s.io reads, discovery, probe, other), `code` |
 * | `emb_bridge_request_duration_seconds` | histogram | `kind` |
 * | `emb_bridge_backend_request_duration_seconds` | histogram | `provider` (one per backend call, a batch counts once) |
 * | `emb_bridge_backend_errors_total` | counter | `provider`, `code` (HTTP code of the Status), `kind` ({@link errorKind}) |
 * | `emb_bridge_backend_throttles_total` | counter | `provider` |
 * | `emb_bridge_cache_requests_total` | counter | `provider`, `result` (hit, miss, coalesced, failure_hit; read from each provider cache's own `CacheStats` at export, nothing counted on the read) |
 * | `emb_bridge_tier_reads_total` | counter | `provider`, `source` (where a local cache miss's reading came from through the shared read tier: tier-hit, tier-load, tier-wait, direct — `direct`: the tier failed and the instance read the cloud itself; shared/cache/shared-tier.ts) |
 * | `emb_bridge_metric_value` | gauge | `metric` (the last value served: the sum of its items, what the HPA compares) |
 * | `emb_bridge_metric_value_age_seconds` | gauge | `metric` (now − timestamp of the oldest item last served) |
 * | `emb_bridge_policy_decisions_total` | counter | `layer` (bridge), `decision` (allow, deny) |
 *
 * Cardinality: `metric` is a configured rule's name (bounded by the config),
 * never the selector; `provider` a configured instance; `code` and `kind`
 * small fixed sets. A read's selector, namespace and caller are in its
 * audit log record only.
 */
import type { StatusError } from "../k8s/status.ts";

/** Histogram buckets, seconds (the proxy's, `shared/proxy/metrics.ts`, up to the 3 s deadline and past it). */
export const LATENCY_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5] as const;

/** A histogram's state: cumulative counts are made at export. */
export class Histogram {
  /** per bucket (non-cumulative), plus one for +Inf */
  readonly counts = new Float64Array(LATENCY_BUCKETS.length + 1);
  sum = 0;
  count = 0;
  /** Record one observation, seconds. */
  observe(seconds: number): void {
    let i = 0;
    while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]!) i++;
    this.counts[i]!++;
    this.sum += seconds;
    this.count++;
  }
}

/** A labelled family: one value per label tuple, keyed by the tuple joined. */
export class Family<V> {
  readonly #make: () => V;
  readonly entries = new Map<string, { labels: Record<string, string>; value: V }>();
  /** Most label tuples held (past it, new tuples share the `other` entry). */
  readonly maxSeries: number;
  readonly labelNames: readonly string[];
  constructor(labelNames: readonly string[], make: () => V, maxSeries = 1000) {
    this.labelNames = labelNames;
    this.#make = make;
    this.maxSeries = maxSeries;
  }
  /** The value of one label tuple (in `labelNames` order), made on first use. */
  get(...values: string[]): V {
    const key = values.length === 1 ? values[0]! : values.join("\u0001");
    let entry = this.entries.get(key);
    if (entry === undefined) {
      if (this.entries.size >= this.maxSeries) return this.get(...values.map(() => "other"));
      const labels: Record<string, string> = {};
      this.labelNames.forEach((name, i) => (labels[name] = values[i] ?? ""));
      entry = { labels, value: this.#make() };
      this.entries.set(key, entry);
    }
    return entry.value;
  }
}

/** A counter cell. */
export interface Count {
  n: number;
}

/** The last value served for one metric rule. */
export interface Served {
  /** the sum of the items' values, as a float (the exported gauge) */
  value: number;
  /** ms since epoch of the oldest item */
  oldestMs: number;
}

/** Kind of a request by path: `values` an External Metrics read, `custom` a custom.metrics.k8s.io read (its POST, or `BridgeApp.readCustom`). */
export type RequestKind = "values" | "custom" | "discovery" | "probe" | "other";

/** Count one answered request: `requests_total{kind, code}` and the kind's duration histogram (seconds). */
export type RequestCounter = (kind: RequestKind, code: number, seconds: number) => void;

/**
 * A {@link RequestCounter} on `metrics` whose cells are looked up once per
 * kind and code (no label joining per request). One per built bridge: the
 * app's routes and its values read (shared/values/read.ts) share it.
 */
export function requestCounter(metrics: BridgeMetrics): RequestCounter {
  const byKind = new Map<RequestKind, { codes: Map<number, Count>; duration: Histogram }>();
  return (kind, code, seconds) => {
    let cells = byKind.get(kind);
    if (cells === undefined) byKind.set(kind, (cells = { codes: new Map(), duration: metrics.requestDuration.get(kind) }));
    let cell = cells.codes.get(code);
    if (cell === undefined) cells.codes.set(code, (cell = metrics.requests.get(kind, String(code))));
    cell.n++;
    cells.duration.observe(seconds);
  };
}

/** The bridge's counters, one instance per built bridge. */
export class BridgeMetrics {
  readonly requests = new Family<Count>(["kind", "code"], () => ({ n: 0 }));
  readonly requestDuration = new Family<Histogram>(["kind"], () => new Histogram());
  readonly backendDuration = new Family<Histogram>(["provider"], () => new Histogram());
  readonly backendErrors = new Family<Count>(["provider", "code", "kind"], () => ({ n: 0 }));
  readonly backendThrottles = new Family<Count>(["provider"], () => ({ n: 0 }));
  readonly served = new Family<Served>(["metric"], () => ({ value: Number.NaN, oldestMs: Number.NaN }));
  readonly policy = new Family<Count>(["layer", "decision"], () => ({ n: 0 }));
  /** shared read tier outcomes (`TierSource` of shared/cache/shared-tier.ts) by provider */
  readonly tierReads = new Family<Count>(["provider", "source"], () => ({ n: 0 }));

  /** Count a backend call's duration (seconds), whatever its outcome. */
  backendCall(provider: string, seconds: number): void {
    this.backendDuration.get(provider).observe(seconds);
  }

  /** Count one read through the shared read tier by where its reading came from (`tier-hit`, `tier-load`, `tier-wait`, `direct`). */
  tierRead(provider: string, source: string): void {
    this.tierReads.get(provider, source).n++;
  }

  /** Count a failed series read of `provider` (after it became a Status). */
  backendError(provider: string, error: StatusError): ErrorKind {
    const kind = errorKind(error);
    this.backendErrors.get(provider, String(error.code), kind).n++;
    if (kind === "throttled") this.backendThrottles.get(provider).n++;
    return kind;
  }
}

/** What went wrong, as a label value and the audit record's `errorKind`. */
export type ErrorKind =
  | "timeout"
  | "throttled"
  | "credentials"
  | "permission"
  | "unreachable"
  | "invalid_query"
  | "not_found"
  | "empty"
  | "stale"
  | "bad_request"
  | "unauthenticated"
  | "forbidden"
  | "unavailable"
  | "internal";

/**
 * The kind of a failure, from its Status code and the wording every
 * provider uses (`shared/providers/aws/common.ts` `awsErrorToStatus`,
 * `shared/providers/gcp/errors.ts` `googleErrorToStatus`, `shared/app.ts`):
 * "timed out" / "did not answer within" → timeout; "throttled" →
 * throttled; "credentials" → credentials; "AccessDenied"/"not authorized" →
 * permission; "unreachable" → unreachable; "query is invalid" →
 * invalid_query; "no series"/"no point" → empty; "older than maxAgeSeconds"
 * → stale; else by code (400 bad_request, 401 unauthenticated, 403
 * forbidden, 404 not_found, 429 throttled, 503 unavailable, other internal).
 */
export function errorKind(error: { code: number; message: string }): ErrorKind {
  const m = error.message;
  if (error.code === 401) return "unauthenticated";
  if (error.code === 403) return "forbidden";
  if (error.code === 429 || /throttl/i.test(m)) return "throttled";
  if (/timed out|did not answer within|went away/.test(m)) return "timeout";
  if (/credential/i.test(m)) return "credentials";
  if (/AccessDenied|not authori[sz]ed|PERMISSION_DENIED|permission/i.test(m)) return "permission";
  if (/unreachable/.test(m)) return "unreachable";
  if (/query is invalid/.test(m)) return "invalid_query";
  if (/older than maxAgeSeconds/.test(m)) return "stale";
  if (/no series|no point|no value in|empty/i.test(m)) return "empty";
  if (error.code === 404) return "not_found";
  if (error.code === 400) return "bad_request";
  if (error.code === 503) return "unavailable";
  return "internal";
}
