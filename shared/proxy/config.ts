/**
 * The proxy's configuration: one `kind: ProxyConfig` YAML document naming
 * backends, the ordered routes from metric-name patterns to backends, an
 * optional pass-through backend for metrics no route claims, and cache
 * settings. Validated with zod; every error names file:line:column and the
 * field path (`shared/config/yaml.ts`). Signing keys are never here: they come
 * from `BRIDGE_SIGNING_KEYS` in the environment (`shared/signing.ts`).
 *
 * ```yaml
 * apiVersion: external-metrics-bridge.io/v1alpha1
 * kind: ProxyConfig
 * backends:
 *   aws:  { url: "https://emb.example.workers.dev" }                 # a bridge function: signed
 *   gcp:  { url: "https://abc.lambda-url.eu-west-1.on.aws", timeoutSeconds: 4 }   # default 4, at most 4.5
 *   keda: { url: "https://keda-operator-metrics-apiserver.keda.svc", type: passthrough,
 *           caFile: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt,
 *           bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token }
 *   local: { type: inProcess, bridgeConfig: /etc/external-metrics-bridge/bridge.yaml }   # the bridge in this process
 * routes:                       # first whole-name match (RE2, case-insensitive) wins
 *   - { metric: "queue_.*", backend: aws }
 *   - { metric: "pubsub_.*|gcp/.*", backend: gcp }
 * passthrough: keda             # metrics no route claims (optional)
 * cache: { ttlSeconds: 2, maxEntries: 10000, maxBytes: 16777216 }   # seconds, entries, bytes
 * admission: { mode: Warn }    # serve the admission webhook on its own port (Warn | Deny; default: not served)
 *   # clientCA: /etc/…/ca.crt   # only kube-apiserver's client certificate may call it (optional)
 * clusterPolicies: { enabled: true, whenNoneApply: Defer }   # watch ExternalMetricPolicy objects (default off)
 * customMetrics: { enabled: true }   # serve custom.metrics.k8s.io (default off; see below)
 *   # pods: { maxEntries: 50000, maxBytes: 33554432 }   # the pod metadata informer's bounds: pods, bytes
 *   # objects: { maxBytes: 65536, timeoutMs: 2000 }     # an Object read's GET: body bytes (≤ 64 KiB), deadline ms
 *   # limits: { maxNamespaceObjects: 1000, maxNamespaceSpecBytes: 1048576 }   # counts, bytes (optional)
 *   # resyncTimeoutSeconds: 300   # reads refused after the watch failed this long (optional)
 * ```
 */
import { readFileSync } from "node:fs";
import * as z from "../config/zod.ts";
import { ConfigError, issueAt, parseYamlDocuments, zodIssues, type ConfigIssue, type SourceDocument } from "../config/yaml.ts";
import { compileMetricPattern, PatternError, type MetricPattern } from "../policy/regex.ts";
import type { ClusterPolicyLimits } from "./policy/policies.ts";

/**
 * API group/version of ProxyConfig: the project's own, equal to
 * `CONFIG_API_VERSION` of `shared/config/config.ts` (not imported: that
 * module loads every provider and its cloud SDK, which the proxy never
 * needs; test/project/infra.test.ts checks they agree).
 */
export const PROXY_API_VERSION = "external-metrics-bridge.io/v1alpha1";

/**
 * Longest per-backend timeout, seconds: under the aggregator's 5 s
 * (kube-aggregator's APIService availability check probes the service with a
 * 5 s HTTP client timeout: `pkg/controllers/status/remote/remote_available_controller.go`,
 * `available_controller.go` in earlier releases).
 *
 * The agreed budget of one HPA read: backend cloud call < bridge
 * whole-request deadline (3 s, `REQUEST_DEADLINE_MS` in shared/app.ts) <
 * proxy → backend timeout (default 4 s, at most 4.5 s) < the aggregator's 5 s.
 * The proxy's timeout is longer than the bridge's deadline so the bridge's
 * own Status (naming the slow provider) reaches the HPA instead of a bare
 * proxy timeout.
 */
export const MAX_BACKEND_TIMEOUT_SECONDS = 4.5;
/** Default per-backend timeout, seconds (see {@link MAX_BACKEND_TIMEOUT_SECONDS} for the budget). */
export const DEFAULT_BACKEND_TIMEOUT_SECONDS = 4;
/**
 * Default bound of the values answer cache, bytes of keys + answers (16 MiB:
 * 10,000 series of ~1 KB answers fit; the proxy's V8 old space is capped at
 * 96 MiB by the image's entrypoint, infra/Dockerfile, and every cache of the
 * proxy together stays well under it).
 */
export const DEFAULT_CACHE_MAX_BYTES = 16 * 1024 * 1024;

const backendSchema = z.strictObject({
  /** base URL; the request path is appended (`https://host[:port][/prefix]`); required except for `inProcess` */
  url: z.optional(
    z
      .string()
      .check(
        z.url(),
        z.refine((u) => /^https?:\/\//.test(u), "must be an http:// or https:// URL"),
        z.refine((u) => !/[?#]/.test(u), "must not contain a query or fragment"),
      ),
  ),
  /**
   * `bridge`: an external-metrics-bridge function; requests are signed with
   * BRIDGE_SIGNING_KEYS and carry the caller's identity.
   * `passthrough`: an existing adapter (e.g. KEDA's metrics server) reached
   * with the proxy's own credentials (bearer token and/or client certificate).
   * `inProcess`: the bridge itself, built from `bridgeConfig` and called in
   * the proxy's process with the authenticated caller (no URL, no signing).
   */
  type: z._default(z.enum(["bridge", "passthrough", "inProcess"]), "bridge"),
  /** inProcess: path of the bridge's config file (`kind: BridgeConfig` YAML, as `functions/node.ts --config`) */
  bridgeConfig: z.optional(z.string().check(z.minLength(1))),
  timeoutSeconds: z._default(z.number().check(z.positive(), z.maximum(MAX_BACKEND_TIMEOUT_SECONDS)), DEFAULT_BACKEND_TIMEOUT_SECONDS),
  /** PEM CA bundle trusted for this backend's HTTPS certificate (default: the system roots) */
  caFile: z.optional(z.string().check(z.minLength(1))),
  /** skip HTTPS certificate verification (only for a backend reached over a trusted network) */
  insecureSkipTLSVerify: z._default(z.boolean(), false),
  /** TLS server name to verify instead of the URL's host */
  serverName: z.optional(z.string().check(z.minLength(1))),
  /** passthrough: file holding a bearer token (re-read on change, e.g. a projected ServiceAccount token) */
  bearerTokenFile: z.optional(z.string().check(z.minLength(1))),
  /** client certificate and key (PEM files) presented to the backend */
  clientCertFile: z.optional(z.string().check(z.minLength(1))),
  clientKeyFile: z.optional(z.string().check(z.minLength(1))),
});

const routeSchema = z.strictObject({
  /** RE2 pattern matched against the whole metric name (lowercased, `|` as `/`), case-insensitive */
  metric: z.string().check(z.minLength(1)),
  backend: z.string().check(z.minLength(1)),
});

/**
 * Longest `clusterPolicies.resyncTimeoutSeconds`, seconds (one day): a watch
 * failing for longer than that while reads are still answered from the last
 * listed policies is not a setting but an outage.
 */
export const MAX_RESYNC_TIMEOUT_SECONDS = 24 * 60 * 60;

/** A positive integer (counts and bytes of the policy layer's limits); at most 2^31 − 1. */
const positiveInt = z.number().check(z.int(), z.positive(), z.maximum(2 ** 31 - 1));

/** Largest body of an Object read's GET of the described object, bytes (64 KiB: the contract's bound; a larger object is a 503). */
export const MAX_OBJECT_BYTES = 64 * 1024;
/** Longest deadline of an Object read's GET (and of its group's discovery), ms: inside the HPA read's budget (config.ts {@link MAX_BACKEND_TIMEOUT_SECONDS}). */
export const MAX_OBJECT_TIMEOUT_MS = 3000;
/** Defaults of ProxyConfig `customMetrics` (off: no custom group, no APIService, no pod informer). */
export const CUSTOM_METRICS_DEFAULTS = {
  enabled: false,
  /** the pod metadata informer: most pods kept, and most bytes (estimated: names and labels as UTF-16 plus 128 a pod) */
  pods: { maxEntries: 50_000, maxBytes: 32 * 1024 * 1024 },
  /** the described object's GET: body bytes, deadline ms */
  objects: { maxBytes: MAX_OBJECT_BYTES, timeoutMs: 2000 },
} as const;

/** Schema of the ProxyConfig document. */
export const proxyConfigSchema = z.strictObject({
  apiVersion: z.literal(PROXY_API_VERSION),
  kind: z.literal("ProxyConfig"),
  metadata: z.optional(z.looseObject({ name: z.optional(z.string()) })),
  backends: z
    .record(z.string().check(z.regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "backend names are DNS labels")), backendSchema)
    .check(z.refine((b) => Object.keys(b).length > 0, "at least one backend is required")),
  routes: z._default(z.array(routeSchema), []),
  passthrough: z.optional(z.string().check(z.minLength(1))),
  cache: z._default(
    z.strictObject({
      /**
       * longest a successful values answer is re-used for the same caller,
       * seconds (0 = only coalesce in-flight reads); a backend's
       * `Cache-Control: max-age=N` shortens it, `no-store`/`max-age=0` turns it off
       */
      ttlSeconds: z._default(z.number().check(z.minimum(0), z.maximum(30)), 2),
      /** most cached answers (and most distinct reads in flight) */
      maxEntries: z._default(z.number().check(z.int(), z.positive(), z.maximum(1_000_000)), 10_000),
      /** most bytes of cached keys + answers (UTF-16 estimate); a single answer over maxBytes/8 is not cached */
      maxBytes: z._default(z.number().check(z.int(), z.minimum(64 * 1024), z.maximum(1024 * 1024 * 1024)), DEFAULT_CACHE_MAX_BYTES),
    }),
    { ttlSeconds: 2, maxEntries: 10_000, maxBytes: DEFAULT_CACHE_MAX_BYTES },
  ),
  discovery: z._default(
    z.strictObject({
      /** how long merged discovery is re-used, seconds */
      ttlSeconds: z._default(z.number().check(z.minimum(0), z.maximum(300)), 10),
    }),
    { ttlSeconds: 10 },
  ),
  /** the cluster policy layer (shared/proxy/policy/policies.ts): ExternalMetricPolicy / ClusterExternalMetricPolicy objects read live */
  clusterPolicies: z._default(
    z.strictObject({
      /** watch and enforce the policy objects (default false; the chart sets true) */
      enabled: z._default(z.boolean(), false),
      /** a read no policy applies to: Defer (to the backend's own policy) or Deny */
      whenNoneApply: z._default(z.enum(["Defer", "Deny"]), "Defer"),
      /**
       * bounds of the policy objects kept (shared/proxy/policy/policies.ts
       * `ClusterPolicyLimits`; each absent field keeps its default there)
       */
      limits: z.optional(
        z.strictObject({
          /** objects of all kinds together, and cluster-scoped ones alone (default 10 000) */
          maxObjects: z.optional(positiveInt),
          /** bytes of specs (JSON) of all objects together, and of cluster-scoped ones alone (default 8 MiB) */
          maxSpecBytes: z.optional(positiveInt),
          /** rules of all objects together, and of cluster-scoped ones alone (default 100 000) */
          maxRules: z.optional(positiveInt),
          /** ExternalMetricPolicy objects in one namespace (default 1 000) */
          maxNamespaceObjects: z.optional(positiveInt),
          /** bytes of specs (JSON) in one namespace (default 1 MiB) */
          maxNamespaceSpecBytes: z.optional(positiveInt),
          /** rules in one namespace (default 10 000) */
          maxNamespaceRules: z.optional(positiveInt),
        }),
      ),
      /** longest time a kind's list and watch may fail before values reads are refused, seconds (default 300) */
      resyncTimeoutSeconds: z.optional(z.number().check(z.positive(), z.maximum(MAX_RESYNC_TIMEOUT_SECONDS))),
    }),
    { enabled: false, whenNoneApply: "Defer" },
  ),
  /**
   * custom.metrics.k8s.io (shared/proxy/custom/*): served, registered as
   * APIServices v1beta2 and v1beta1, and its pod informer started (on the
   * first Pods read) only when `enabled`
   */
  customMetrics: z._default(
    z.strictObject({
      /** serve custom.metrics.k8s.io (default false; the chart sets it from its values) */
      enabled: z._default(z.boolean(), CUSTOM_METRICS_DEFAULTS.enabled),
      /** bounds of the pod metadata informer (Pods reads): pods kept, bytes; past either, Pods reads are 503 until it shrinks */
      pods: z._default(
        z.strictObject({
          maxEntries: z._default(positiveInt, CUSTOM_METRICS_DEFAULTS.pods.maxEntries),
          maxBytes: z._default(z.number().check(z.int(), z.minimum(64 * 1024), z.maximum(1024 * 1024 * 1024)), CUSTOM_METRICS_DEFAULTS.pods.maxBytes),
        }),
        { ...CUSTOM_METRICS_DEFAULTS.pods },
      ),
      /** the described object's GET (Object reads): largest body, bytes (at most 64 KiB), and deadline, ms */
      objects: z._default(
        z.strictObject({
          maxBytes: z._default(z.number().check(z.int(), z.minimum(1024), z.maximum(MAX_OBJECT_BYTES)), CUSTOM_METRICS_DEFAULTS.objects.maxBytes),
          timeoutMs: z._default(z.number().check(z.int(), z.minimum(100), z.maximum(MAX_OBJECT_TIMEOUT_MS)), CUSTOM_METRICS_DEFAULTS.objects.timeoutMs),
        }),
        { ...CUSTOM_METRICS_DEFAULTS.objects },
      ),
    }),
    { enabled: false, pods: { ...CUSTOM_METRICS_DEFAULTS.pods }, objects: { ...CUSTOM_METRICS_DEFAULTS.objects } },
  ),
  /** the validating admission webhook (shared/proxy/admission/admission.ts): served only when this section is present */
  admission: z.optional(
    z.strictObject({
      /** `Warn`: a metric a cluster policy would deny is an admission warning; `Deny`: the HPA is refused */
      mode: z._default(z.enum(["Warn", "Deny"]), "Warn"),
      /**
       * PEM CA bundle file: only a client certificate verifying against it may
       * call the webhook (kube-apiserver's, docs/proxy.md "Admission webhook");
       * absent: anyone reaching the webhook's port may, and answers name at most
       * a policy and rule index
       */
      clientCA: z.optional(z.string().check(z.minLength(1))),
    }),
  ),
});

/** Fields that only a network backend (`bridge`, `passthrough`) takes; an `inProcess` backend refuses them. */
const NETWORK_ONLY_FIELDS = ["url", "caFile", "insecureSkipTLSVerify", "serverName", "bearerTokenFile", "clientCertFile", "clientKeyFile"] as const;

/** One backend as configured. */
export type BackendConfig = z.infer<typeof backendSchema> & { name: string };

/** One route: a compiled pattern and the backend it sends matching metrics to. */
export interface Route {
  pattern: MetricPattern;
  backend: string;
}

/** The validated proxy configuration. */
export interface ProxyConfig {
  source: string;
  /** backends in file order */
  backends: BackendConfig[];
  routes: Route[];
  passthrough?: string;
  /**
   * Values answer cache. `ttlSeconds`: longest re-use of a success, seconds
   * (0–30, default 2), shortened by the backend's `Cache-Control: max-age`;
   * `maxEntries` (default 10 000) and `maxBytes` (bytes, default 16 MiB)
   * bound it. Failures are kept only briefly as back-off (1–30 s, see
   * shared/proxy/forward/forward.ts).
   */
  cache: { ttlSeconds: number; maxEntries: number; maxBytes: number };
  discovery: { ttlSeconds: number };
  /**
   * The admission webhook's settings; undefined: not served. It has a
   * listener of its own (shared/proxy/admission/admission-server.ts, `--admission-port`).
   * `clientCA`: path of a PEM CA bundle; when set, only a caller presenting a
   * client certificate that verifies against it (kube-apiserver's) is served.
   */
  admission?: { mode: "Warn" | "Deny"; clientCA?: string };
  /**
   * The cluster policy layer (shared/proxy/policy/policies.ts): `enabled` (default
   * false) watches and enforces ExternalMetricPolicy and
   * ClusterExternalMetricPolicy objects; `whenNoneApply` (default Defer)
   * decides a read no policy applies to: Defer leaves it to the backend's
   * own policy, Deny refuses it. Absent (a config built by hand): off.
   */
  clusterPolicies?: {
    enabled: boolean;
    whenNoneApply: "Defer" | "Deny";
    /**
     * Bounds of the objects kept, counts and bytes (policy/policies.ts
     * `ClusterPolicyLimits`: `maxObjects`, `maxSpecBytes`, `maxRules` for all
     * objects and for the cluster-scoped ones alone; `maxNamespaceObjects`,
     * `maxNamespaceSpecBytes`, `maxNamespaceRules` for one namespace). Absent
     * fields keep the defaults there.
     */
    limits?: ClusterPolicyLimits;
    /** longest time a kind's list and watch may fail before values reads are refused (503), seconds (default: policy/policies.ts `RESYNC_TIMEOUT_MS`, 300 s) */
    resyncTimeoutSeconds?: number;
  };
  /**
   * custom.metrics.k8s.io. `enabled` (default false): the custom group is
   * listed, served and registered; off, its paths are 404 and no pod is
   * listed. `pods`: the pod metadata informer's bounds (entries; bytes,
   * estimated). `objects`: an Object read's GET (body bytes ≤ 64 KiB;
   * deadline ms). Absent (a config built by hand): off.
   */
  customMetrics?: CustomMetricsSettings;
}

/** ProxyConfig `customMetrics` (see {@link ProxyConfig.customMetrics}). */
export interface CustomMetricsSettings {
  enabled: boolean;
  pods: { maxEntries: number; maxBytes: number };
  objects: { maxBytes: number; timeoutMs: number };
}

/**
 * Parse and validate a ProxyConfig source (other documents are ignored).
 *
 * @throws ConfigError listing every problem with line, column and field path:
 *   schema errors, routes naming unknown backends, patterns that do not
 *   compile (RE2 syntax), an unknown passthrough backend, a passthrough
 *   backend of type `bridge` (it would receive every unclaimed metric signed),
 *   a `bridge`/`passthrough` backend without `url` or with `bridgeConfig`, an
 *   `inProcess` backend without `bridgeConfig` or with a network-only field
 *   (`url`, `caFile`, `insecureSkipTLSVerify`, `serverName`, `bearerTokenFile`,
 *   `clientCertFile`, `clientKeyFile`)
 */
export function loadProxyConfig(text: string, source: string): ProxyConfig {
  const docs = parseYamlDocuments(text, source);
  const mine = docs.filter((d) => (d.value as { kind?: unknown } | null)?.kind === "ProxyConfig");
  if (mine.length !== 1) {
    throw new ConfigError([
      { source, line: 1, column: 1, path: "", message: `expected exactly one document with kind: ProxyConfig, found ${mine.length}` },
    ]);
  }
  return validate(mine[0]!);
}

/** Read and validate a ProxyConfig file. @throws ConfigError, or Error when unreadable */
export function readProxyConfig(path: string): ProxyConfig {
  return loadProxyConfig(readFileSync(path, "utf8"), path);
}

function validate(sd: SourceDocument): ProxyConfig {
  const parsed = proxyConfigSchema.safeParse(sd.value);
  if (!parsed.success) throw new ConfigError(zodIssues(sd, parsed.error));
  const raw = parsed.data;
  const issues: ConfigIssue[] = [];
  const backends: BackendConfig[] = Object.entries(raw.backends).map(([name, b]) => ({ name, ...b }));
  for (const b of backends) {
    if (b.type === "inProcess") {
      if (b.bridgeConfig === undefined) issues.push(issueAt(sd, ["backends", b.name], "an inProcess backend needs bridgeConfig (the bridge's config file)"));
      // the document as written (defaults not applied): a field given at all is refused
      const given = ((sd.value as { backends: Record<string, Record<string, unknown>> }).backends[b.name] ?? {}) as Record<string, unknown>;
      for (const field of NETWORK_ONLY_FIELDS) {
        if (given[field] !== undefined) issues.push(issueAt(sd, ["backends", b.name, field], `an inProcess backend is called in the proxy's process: ${field} does not apply`));
      }
      continue;
    }
    if (b.url === undefined) issues.push(issueAt(sd, ["backends", b.name], `a ${b.type} backend needs url`));
    if (b.bridgeConfig !== undefined) {
      issues.push(issueAt(sd, ["backends", b.name, "bridgeConfig"], `bridgeConfig is only for type inProcess; a ${b.type} backend is reached at its url`));
    }
    if ((b.clientCertFile === undefined) !== (b.clientKeyFile === undefined)) {
      issues.push(issueAt(sd, ["backends", b.name], "clientCertFile and clientKeyFile must be given together"));
    }
    if (b.type === "bridge" && b.bearerTokenFile !== undefined) {
      issues.push(issueAt(sd, ["backends", b.name, "bearerTokenFile"], "bridge backends are authenticated by the request signature, not a bearer token"));
    }
  }
  const routes: Route[] = [];
  raw.routes.forEach((r, i) => {
    if (raw.backends[r.backend] === undefined) {
      issues.push(issueAt(sd, ["routes", i, "backend"], `no backend named "${r.backend}" in backends`));
    }
    try {
      routes.push({ pattern: compileMetricPattern(r.metric), backend: r.backend });
    } catch (err) {
      if (!(err instanceof PatternError)) throw err;
      issues.push(issueAt(sd, ["routes", i, "metric"], err.message));
    }
  });
  if (raw.passthrough !== undefined) {
    const b = raw.backends[raw.passthrough];
    if (b === undefined) issues.push(issueAt(sd, ["passthrough"], `no backend named "${raw.passthrough}" in backends`));
    else if (b.type !== "passthrough") {
      issues.push(issueAt(sd, ["passthrough"], `backend "${raw.passthrough}" has type ${b.type}; the pass-through backend must have type passthrough`));
    }
  }
  if (routes.length === 0 && raw.passthrough === undefined && raw.routes.length === 0) {
    issues.push(issueAt(sd, ["routes"], "no route and no passthrough: no metric could be served"));
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return {
    source: sd.source,
    backends,
    routes,
    ...(raw.passthrough !== undefined ? { passthrough: raw.passthrough } : {}),
    cache: raw.cache,
    discovery: raw.discovery,
    ...(raw.admission !== undefined ? { admission: raw.admission } : {}),
    clusterPolicies: raw.clusterPolicies,
    customMetrics: raw.customMetrics,
  };
}

/** The backend that serves `metricKey`: the first matching route's, else the pass-through, else undefined. */
export function routeFor(config: Pick<ProxyConfig, "routes" | "passthrough">, metricKey: string): string | undefined {
  for (const route of config.routes) if (route.pattern.matches(metricKey)) return route.backend;
  return config.passthrough;
}
