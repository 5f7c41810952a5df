/**
 * The proxy's Prometheus metrics (`prom-client`), served at `/metrics`
 * (authorized like every non-resource path: a SubjectAccessReview for
 * `get /metrics`). One registry per proxy instance.
 *
 * The `metric` label is bounded: a metric name appears only when the last
 * merged discovery listed it, every other name counts as `other`, so random
 * request paths cannot grow the series count.
 */
import { X509Certificate } from "node:crypto";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { BRIDGE_VERSION } from "../observability/prometheus.ts";

const PREFIX = "emb_proxy_";
const LATENCY_BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 4, 5];

/** The instruments the proxy updates. */
export interface ProxyMetrics {
  registry: Registry;
  /** requests answered, by HTTP code, kind (values, discovery, custom, custom-discovery, other) and metric */
  requests: Counter<"code" | "kind" | "metric">;
  /** whole-request latency, seconds */
  requestDuration: Histogram<"kind">;
  /** backend calls by backend and HTTP code (or error kind) */
  backendRequests: Counter<"backend" | "code">;
  /** backend calls that gave no usable answer, by kind (timeout, connect, protocol, empty, …) */
  backendErrors: Counter<"backend" | "kind">;
  backendDuration: Histogram<"backend">;
  /** values reads by cache outcome: hit, coalesced, miss (discovery is always answered from held state) */
  cache: Counter<"result">;
  /** denials: `rbac` (SubjectAccessReview), `cluster-policy` (the proxy's cluster policy layer) or `policy` (a backend's ExternalMetricPolicy 403) */
  denials: Counter<"source">;
  /** authorization decisions by how they were made: review, cache, path, group */
  authorizations: Counter<"by" | "decision">;
  /** SubjectAccessReviews sent, by trigger: a read waiting for it, or a background renewal */
  subjectAccessReviews: Counter<"trigger">;
  /** authentications by method (front-proxy, x509, token, anonymous) or `failed` */
  authentications: Counter<"method">;
  /** 1 when ready (`/readyz` ok: authentication ConfigMap loaded, serving certificate present, not shutting down), else 0 */
  ready: Gauge;
  /** per backend: 1 when its last discovery call answered, 0 when it failed (absent until first asked) */
  backendUp: Gauge<"backend">;
  /** policy decisions of the proxy's own layers (`layer="cluster"`: policy/policies.ts) by decision: allow, deny, defer, unavailable */
  policyDecisions: Counter<"layer" | "decision">;
  /**
   * cluster policy objects by state: `accepted` (enforced at their current
   * generation), `stale` (the current generation is invalid: the last valid
   * one stays in force), `invalid` (no valid generation seen: the object
   * denies every read in its scope), `over-limit` (in a namespace refused
   * for its limits, or all of them when the cluster-wide limits are passed)
   */
  clusterPolicies: Gauge<"state">;
  /** generations of policy objects refused as invalid while an earlier valid generation stayed in force (policy/policies.ts) */
  clusterPolicyRefusedEdits: Counter;
  /** per kind: 1 while its list and watch have failed for longer than the resync bound (values reads refused, 503), else 0 */
  clusterPolicyWatchUnsynced: Gauge<"kind">;
  /** Kubernetes Events about invalid policy objects, by result: written, failed, dropped (over the rate bound) */
  clusterPolicyEvents: Counter<"result">;
  /** 1, labelled with the proxy's version and Node's (`emb_proxy_build_info`) */
  buildInfo: Gauge<"version" | "node">;
  /** 1 when the proxy's last APIService registration succeeded, else 0 (absent while registration is off) */
  apiServiceRegistered: Gauge;
  /** when the last APIService registration succeeded, seconds since the epoch */
  apiServiceLastSuccess: Gauge;
}

/**
 * Export the serving certificate's expiry at every scrape:
 * `emb_proxy_serving_certificate_expiry_timestamp_seconds` — its `notAfter`,
 * seconds since the epoch (alert on `… - time() < 7 * 86400`); absent
 * while there is no certificate or it does not parse. The PEM is parsed
 * once per distinct text (`node:crypto` X509Certificate).
 *
 * @param read the current serving certificate PEM (leaf first), or undefined
 */
export function registerServingCertificate(metrics: ProxyMetrics, read: () => string | undefined): void {
  let parsed: { pem: string; expiry: number | undefined } | undefined;
  new Gauge({
    name: `${PREFIX}serving_certificate_expiry_timestamp_seconds`,
    help: "notAfter of the proxy's serving certificate, seconds since the epoch.",
    registers: [metrics.registry],
    collect() {
      this.reset();
      const pem = read();
      if (pem === undefined || pem === "") return;
      if (parsed?.pem !== pem) {
        let expiry: number | undefined;
        try {
          expiry = Date.parse(new X509Certificate(pem).validTo) / 1000;
        } catch {
          expiry = undefined;
        }
        parsed = { pem, expiry };
      }
      if (parsed.expiry !== undefined && Number.isFinite(parsed.expiry)) this.set(parsed.expiry);
    },
  });
}

/**
 * Record an APIService registration attempt: `emb_proxy_apiservice_registered`
 * 1 or 0, and on success `emb_proxy_apiservice_last_registration_success_timestamp_seconds`.
 *
 * @param nowMs ms since the epoch
 */
export function recordRegistration(metrics: ProxyMetrics, ok: boolean, nowMs: number): void {
  metrics.apiServiceRegistered.set(ok ? 1 : 0);
  if (ok) metrics.apiServiceLastSuccess.set(nowMs / 1000);
}

/** Entries held and bytes accounted (the cache's own estimate) by one bounded cache or memo. */
export interface CacheSize {
  entries: number;
  bytes: number;
}

/**
 * Export the size of the proxy's bounded caches at every scrape:
 * `emb_proxy_cache_entries{cache}` and `emb_proxy_cache_bytes{cache}` (the
 * estimated bytes each cache counts against its `maxBytes`), one series per
 * name `read()` returns (e.g. `values`, `authorization`,
 * `authorization-anonymous`, `request-memo`, `route-memo`) — what the
 * proxy's memory holds beyond its code (docs/proxy.md "Memory").
 */
export function registerCacheSizes(metrics: ProxyMetrics, read: () => Record<string, CacheSize>): void {
  // Both are set by the first one's collect (prom-client collects each metric as it writes it, in registration order).
  const bytes = new Gauge({ name: `${PREFIX}cache_bytes`, help: "Estimated bytes held by each bounded cache (counted against its byte bound).", labelNames: ["cache"], registers: [] });
  new Gauge({
    name: `${PREFIX}cache_entries`,
    help: "Entries held by each bounded cache.",
    labelNames: ["cache"],
    registers: [metrics.registry],
    collect() {
      for (const [cache, size] of Object.entries(read())) {
        this.set({ cache }, size.entries);
        bytes.set({ cache }, size.bytes);
      }
    },
  });
  metrics.registry.registerMetric(bytes);
}

/** Create the registry and instruments; `defaults` adds Node process metrics. */
export function createMetrics(defaults = true): ProxyMetrics {
  const registry = new Registry();
  if (defaults) collectDefaultMetrics({ register: registry, prefix: PREFIX });
  const registers = [registry];
  const buildInfo = new Gauge({ name: `${PREFIX}build_info`, help: "The proxy's version and Node's, as labels; the value is 1.", labelNames: ["version", "node"], registers });
  buildInfo.set({ version: BRIDGE_VERSION, node: process.version }, 1);
  return {
    registry,
    requests: new Counter({ name: `${PREFIX}requests_total`, help: "Requests answered by the proxy.", labelNames: ["code", "kind", "metric"], registers }),
    requestDuration: new Histogram({
      name: `${PREFIX}request_duration_seconds`,
      help: "Time to answer a request, seconds.",
      labelNames: ["kind"],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    backendRequests: new Counter({ name: `${PREFIX}backend_requests_total`, help: "Calls to backends by HTTP code or error kind.", labelNames: ["backend", "code"], registers }),
    backendErrors: new Counter({ name: `${PREFIX}backend_errors_total`, help: "Backend calls without a usable answer.", labelNames: ["backend", "kind"], registers }),
    backendDuration: new Histogram({
      name: `${PREFIX}backend_request_duration_seconds`,
      help: "Backend call latency, seconds.",
      labelNames: ["backend"],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    cache: new Counter({ name: `${PREFIX}cache_requests_total`, help: "Reads by cache outcome (hit, coalesced, miss).", labelNames: ["result"], registers }),
    denials: new Counter({ name: `${PREFIX}denials_total`, help: "Requests denied, by RBAC (SubjectAccessReview) or a backend's policy.", labelNames: ["source"], registers }),
    authorizations: new Counter({
      name: `${PREFIX}authorization_decisions_total`,
      help: "Authorization decisions by how they were reached (review, cache, path, group).",
      labelNames: ["by", "decision"],
      registers,
    }),
    subjectAccessReviews: new Counter({
      name: `${PREFIX}subjectaccessreviews_total`,
      help: "SubjectAccessReviews sent to kube-apiserver, by trigger: a read that waits for it (read), or a read past half an allowed answer's TTL that sends it in the background (renewal).",
      labelNames: ["trigger"],
      registers,
    }),
    authentications: new Counter({ name: `${PREFIX}authentications_total`, help: "Authentications by method.", labelNames: ["method"], registers }),
    ready: new Gauge({ name: `${PREFIX}ready`, help: "1 when the proxy is ready to serve (its own state; never a backend's).", registers }),
    backendUp: new Gauge({
      name: `${PREFIX}backend_up`,
      help: "1 when the backend's last discovery call answered, 0 when it failed.",
      labelNames: ["backend"],
      registers,
    }),
    policyDecisions: new Counter({
      name: `${PREFIX}policy_decisions_total`,
      help: "Values reads decided by the proxy's policy layers (cluster: ExternalMetricPolicy objects), by decision.",
      labelNames: ["layer", "decision"],
      registers,
    }),
    clusterPolicies: new Gauge({
      name: `${PREFIX}cluster_policies`,
      help: "ExternalMetricPolicy and ClusterExternalMetricPolicy objects by state (accepted; stale: an invalid edit refused, the previous generation in force; invalid: never valid, denies its scope; over-limit).",
      labelNames: ["state"],
      registers,
    }),
    clusterPolicyRefusedEdits: new Counter({
      name: `${PREFIX}cluster_policy_refused_edits_total`,
      help: "Generations of policy objects refused as invalid while the previous valid generation stayed in force.",
      registers,
    }),
    clusterPolicyWatchUnsynced: new Gauge({
      name: `${PREFIX}cluster_policy_watch_unsynced`,
      help: "1 while the list and watch of a policy kind have failed for longer than the resync bound (values reads are refused), else 0.",
      labelNames: ["kind"],
      registers,
    }),
    clusterPolicyEvents: new Counter({
      name: `${PREFIX}cluster_policy_events_total`,
      help: "Kubernetes Events written about invalid policy objects, by result (written, failed, dropped over the rate bound).",
      labelNames: ["result"],
      registers,
    }),
    buildInfo,
    apiServiceRegistered: new Gauge({
      name: `${PREFIX}apiservice_registered`,
      help: "1 when the proxy's last APIService registration (or re-assertion) succeeded, else 0; absent when the proxy does not register.",
      registers,
    }),
    apiServiceLastSuccess: new Gauge({
      name: `${PREFIX}apiservice_last_registration_success_timestamp_seconds`,
      help: "When the proxy last registered (or re-asserted) the APIService, seconds since the epoch.",
      registers,
    }),
  };
}
