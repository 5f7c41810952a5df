/**
 * The proxy's Hono app, served over HTTPS by `server.ts`.
 *
 * | path | answer |
 * |---|---|
 * | `GET /healthz`, `/livez` | `ok` (no authentication: kubelet probes) |
 * | `GET /readyz` | `ok` when the authentication ConfigMap is loaded, a serving certificate is present and the proxy is not shutting down, else 503 (never depends on a backend) |
 * | `GET /apis`, `/apis/external.metrics.k8s.io` | APIGroupList / APIGroup (plain JSON, so aggregated discovery falls back) |
 * | `GET /apis/external.metrics.k8s.io/v1beta1` | the held, merged APIResourceList of all backends (never waits on one, never 503) |
 * | `GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}` | forwarded to the routed backend |
 * | `GET /apis/custom.metrics.k8s.io`, `…/{v1beta2,v1beta1}` | with ProxyConfig `customMetrics.enabled` only: APIGroup; the held, merged APIResourceList of each version (`/apis` then lists the group) |
 * | `GET /apis/custom.metrics.k8s.io/{version}/…/{metric}` | a custom read (the shapes of request-path.ts `customMetricsRead`): its objects resolved (custom/pods.ts, custom/objects.ts), then forwarded |
 * | `GET /metrics` | Prometheus text |
 * | anything else | 404 Status (405 for other methods) |
 *
 * Request intake, before any work (before authentication, a
 * SubjectAccessReview or a cache key): a path + query longer than
 * {@link MAX_REQUEST_TARGET_BYTES}, a `labelSelector` longer than
 * {@link MAX_SELECTOR_LENGTH} characters, or more than one `labelSelector`
 * is a 400 Status at once (headers are bounded by the server's
 * `maxHeaderSize`, 32 KiB, which Node answers with 431). Then the request
 * target as received is decoded once into its parts
 * (shared/k8s/request-path.ts `parseRequestTarget`: non-canonical
 * percent-encodings, `.`/`..`/empty segments, a namespace that is not a
 * DNS-1123 label are a 400 here); the SubjectAccessReview, the cluster
 * policy layer, the values cache key, the forwarded path (rebuilt from the
 * parts) and the request log (`path` decoded, `target` as received,
 * `namespace`, `metric`) all use those parts.
 *
 * Every path except the probes is authenticated (front proxy, client
 * certificate, bearer token, anonymous) and authorized (SubjectAccessReview)
 * first, as kube-apiserver's filter chain does. No answer on a values path
 * carries `Retry-After` (one attempt for the HPA's client-go; see
 * forward.ts). Every answer carries
 * `X-Request-Id`, which is also sent (signed) to the backend and logged on both sides.
 */
import type { HttpBindings } from "@hono/node-server";
import { Hono, type Context } from "hono";
import type { TLSSocket } from "node:tls";
import type { Caller } from "../identity.ts";
import { MAX_SELECTOR_LENGTH, type Selector } from "../k8s/selector.ts";
import { badRequest, notFound, StatusError, toStatusError } from "../k8s/status.ts";
import { apiGroupList, GROUP, GROUP_VERSION, VERSION } from "../k8s/types.ts";
import { canonicalQuery, customMetricsPath, customMetricsRead, externalMetricsRead, notFoundPath, parseRequestTarget, type CustomMetricsRead, type RequestTarget } from "../k8s/request-path.ts";
import { customApiGroup, CUSTOM_GROUP, isCustomVersion } from "../k8s/custom-types.ts";
import { EVERYTHING, parseSelector, SelectorError } from "../k8s/selector.ts";
import { MAX_SIGNED_BODY_BYTES } from "../signing.ts";
import type { ReadObjects } from "../values/custom-read.ts";
import type { ObjectReader } from "./custom/objects.ts";
import type { PodIndex } from "./custom/pods.ts";
import { metricName } from "../metric-name.ts";
import type { Authenticator } from "./authn/authenticate.ts";
import type { Authorizer } from "./authz/authorize.ts";
import { CUSTOM_GROUP_PATH, DISCOVERY_PATH, VALUES_PATH_PREFIX } from "./forward/backend-contract.ts";
import { BackendStatusError, type Answer, type Forwarder } from "./forward/forward.ts";
import type { Logger } from "./log.ts";
import type { ProxyMetrics } from "./metrics.ts";
import { ClusterPolicyDenied, type ClusterPolicies } from "./policy/policies.ts";
import { requestIdFrom } from "../request-id.ts";
import { EXTERNAL_METRICS_API, labelSelectorOf } from "../values/request.ts";

/** What the app needs. */
export interface ProxyAppDeps {
  authenticator: Authenticator;
  authorizer: Authorizer;
  forwarder: Forwarder;
  metrics: ProxyMetrics;
  log: Logger;
  /** why the proxy is not ready (empty when ready) */
  notReady: () => string[];
  /** the cluster policy layer (policies.ts), asked after authorization and before forwarding; undefined: off */
  clusterPolicies?: Pick<ClusterPolicies, "authorize">;
  /**
   * custom.metrics.k8s.io (ProxyConfig `customMetrics.enabled`): the pod
   * index of Pods reads, the object reader of Object reads, and the deadline
   * (ms) of resolving them; undefined: the custom group is not served (404)
   */
  custom?: { pods: Pick<PodIndex, "select">; objects: Pick<ObjectReader, "read">; timeoutMs: number };
}

type Env = {
  Bindings: HttpBindings;
  Variables: {
    requestId: string;
    caller?: Caller;
    authn?: string;
    kind: string;
    metric?: string;
    /** the namespace of a values read (the canonical part) */
    namespace?: string;
    backend?: string;
    cache?: string;
    error?: StatusError;
    /** the request target as received, parsed once (shared/k8s/request-path.ts): every layer uses its parts */
    target?: RequestTarget;
    /** the request target exactly as received (path and query, percent-encoded), for the log */
    rawTarget?: string;
    /** the parsed labelSelector remembered by the authorizer (only when the cluster policy layer is on) */
    selector?: Selector;
    /** a custom read's described resource (`pods`, `namespaces`, `ingresses.networking.k8s.io`), logged */
    resource?: string;
  };
};


/**
 * Longest request target (path + query as sent), bytes. Room for the
 * longest selector the bridge accepts ({@link MAX_SELECTOR_LENGTH}
 * characters, up to 3 bytes each once percent-encoded as client-go's
 * `url.Values.Encode` does) plus the path; far under Node's header limit.
 */
export const MAX_REQUEST_TARGET_BYTES = 16 * 1024;
/** Longest `labelSelector`, characters: the bridge's own limit (one home: shared/k8s/selector). */
export { MAX_SELECTOR_LENGTH };

/**
 * Refuse an oversized request before any work.
 *
 * @param target the request target as received (`/apis/…?labelSelector=…`)
 * @throws StatusError 400 when the target is longer than
 *   {@link MAX_REQUEST_TARGET_BYTES} bytes, a `labelSelector` is longer than
 *   {@link MAX_SELECTOR_LENGTH} characters, or there is more than one
 */
export function checkRequestSize(target: string): void {
  const bytes = Buffer.byteLength(target, "utf8");
  if (bytes > MAX_REQUEST_TARGET_BYTES) {
    throw badRequest(`the request path and query are ${bytes} bytes long; at most ${MAX_REQUEST_TARGET_BYTES} are accepted`);
  }
  const q = target.indexOf("?");
  if (q < 0) return;
  // The HPA's shape, `?labelSelector=<at most MAX_SELECTOR_LENGTH characters as sent>`:
  // one parameter, the key spelled out (not percent-encoded), and decoding only shortens.
  if (target.startsWith("labelSelector=", q + 1) && !target.includes("&", q) && target.length - q - 15 <= MAX_SELECTOR_LENGTH) return;
  const length = labelSelectorOf(new URLSearchParams(target.slice(q + 1))).length;
  if (length > MAX_SELECTOR_LENGTH) {
    throw badRequest(`labelSelector is ${length} characters long; at most ${MAX_SELECTOR_LENGTH} are accepted`);
  }
}

/** Longest request target written to a log line, characters (a longer one is cut, marked with `…`). */
const MAX_LOGGED_TARGET = 1024;
/** The origin of the canonical URL handed to the cluster policy layer (never resolved). */
const CANONICAL_ORIGIN = "https://proxy.invalid";

/** A path below a custom.metrics.k8s.io version (a custom values read, or one that is not found). */
const CUSTOM_VALUES_PATH = /^\/apis\/custom\.metrics\.k8s\.io\/[^/]+\/./;

/** Whether `path` is a values read (External `…/v1beta1/namespaces/…`, or below a custom version): its answers never carry Retry-After. */
function isValuesPath(path: string): boolean {
  return path.startsWith(VALUES_PATH_PREFIX) || CUSTOM_VALUES_PATH.test(path);
}

/**
 * The one value of query parameter `name` of a custom read ("" when absent).
 * @throws StatusError 400 when given more than once or longer than {@link MAX_SELECTOR_LENGTH} characters
 */
function oneSelector(query: URLSearchParams, name: string): string {
  const values = query.getAll(name);
  if (values.length > 1) throw badRequest(`${name} is given ${values.length} times; at most once is accepted`);
  const value = values[0] ?? "";
  if (value.length > MAX_SELECTOR_LENGTH) throw badRequest(`${name} is ${value.length} characters long; at most ${MAX_SELECTOR_LENGTH} are accepted`);
  return value;
}

/** Build the proxy app. */
export function createProxyApp(deps: ProxyAppDeps): Hono<Env> {
  const { authenticator, authorizer, forwarder, metrics, log } = deps;
  const app = new Hono<Env>();
  // prom-client children per label values, made once: `inc({…})` hashes its label object on every call.
  const requestCells = new Map<string, { inc(): void }>();
  const durationCells = new Map<string, { observe(seconds: number): void }>();
  const countRequest = (code: number, kind: string, metric: string, seconds: number): void => {
    const key = `${code} ${kind} ${metric}`;
    let cell = requestCells.get(key);
    if (cell === undefined) {
      // Bounded by codes × kinds × metric labels (the discovered names or "other"); cleared if that ever grows past 4096.
      if (requestCells.size >= 4096) requestCells.clear();
      requestCells.set(key, (cell = metrics.requests.labels({ code: String(code), kind, metric })));
    }
    cell.inc();
    let duration = durationCells.get(kind);
    if (duration === undefined) durationCells.set(kind, (duration = metrics.requestDuration.labels({ kind })));
    duration.observe(seconds);
  };

  app.use("*", async (c, next) => {
    const started = performance.now();
    // Node's parsed headers when served by Node (a Headers object is built only for other callers).
    const incoming = c.env?.incoming;
    const offered = incoming ? headerText(incoming.headers["x-request-id"] ?? incoming.headers["audit-id"]) : (c.req.header("x-request-id") ?? c.req.header("audit-id"));
    const requestId = requestIdFrom(offered);
    c.set("requestId", requestId);
    c.set("kind", "other");
    // X-Request-Id is set by every answer's builder (send, text, /metrics): one plain header object, no Headers instance.
    await next();
    const code = c.res.status;
    const kind = c.get("kind");
    const seconds = (performance.now() - started) / 1000;
    const metric = c.get("metric");
    countRequest(code, kind, metric !== undefined ? forwarder.metricLabel(metric) : "", seconds);
    if (kind === "probe") return;
    const error = c.get("error");
    const raw = c.get("rawTarget");
    const namespace = c.get("namespace");
    log({
      level: code >= 500 ? "error" : code >= 400 ? "warn" : "info",
      msg: "request",
      requestId,
      method: c.req.method,
      // the decoded path every layer used; the target as received shows how it was spelled
      path: c.get("target")?.path.path ?? c.req.path,
      ...(raw !== undefined ? { target: raw.length > MAX_LOGGED_TARGET ? `${raw.slice(0, MAX_LOGGED_TARGET)}…` : raw } : {}),
      ...(namespace !== undefined ? { namespace } : {}),
      code,
      durationMs: Math.round(seconds * 1000 * 10) / 10,
      ...(c.get("caller") ? { user: c.get("caller")!.user, authn: c.get("authn") } : {}),
      ...(metric !== undefined ? { metric } : {}),
      ...(c.get("resource") !== undefined ? { resource: c.get("resource") } : {}),
      ...(c.get("backend") ? { backend: c.get("backend") } : {}),
      ...(c.get("cache") ? { cache: c.get("cache") } : {}),
      ...(error ? { error: error.message, ...(error.cause ? { cause: String((error.cause as Error)?.message ?? error.cause) } : {}) } : {}),
    });
  });

  // Size checks before any work, then the request's identity: the target as
  // received (Node's raw request target: the URL Hono holds has dot segments
  // resolved) decoded once into its parts, or a 400 (request-path.ts).
  app.use("*", async (c, next) => {
    const raw = c.env?.incoming?.url ?? requestTarget(c.req.url);
    c.set("rawTarget", raw);
    checkRequestSize(raw);
    c.set("target", parseRequestTarget(raw));
    await next();
  });

  app.onError((err, c) => {
    const status = toStatusError(err);
    c.set("error", status);
    if (!(err instanceof StatusError)) log({ level: "error", msg: "unhandled error", requestId: c.get("requestId"), error: String(err) });
    if (status.code === 403) metrics.denials.inc({ source: err instanceof BackendStatusError ? "policy" : err instanceof ClusterPolicyDenied ? "cluster-policy" : "rbac" });
    if (err instanceof BackendStatusError) {
      c.set("backend", err.backend);
      return send(c, { status: err.code, body: err.body, headers: err.passHeaders });
    }
    const headers = isValuesPath(c.req.path) ? {} : status.headers();
    return send(c, { status: status.code, body: JSON.stringify(status.toStatus()), headers });
  });

  for (const path of ["/healthz", "/livez"]) {
    app.get(path, (c) => {
      c.set("kind", "probe");
      return text(c, "ok");
    });
  }
  app.get("/readyz", (c) => {
    c.set("kind", "probe");
    const reasons = deps.notReady();
    return reasons.length === 0 ? text(c, "ok") : text(c, `not ready: ${reasons.join("; ")}`, 503);
  });

  // Authentication and authorization of everything else.
  app.use("*", async (c, next) => {
    const incoming = c.env?.incoming;
    const socket = incoming?.socket as TLSSocket | undefined;
    let who;
    try {
      who = await authenticator.authenticate(
        {
          ...(socket && "getPeerCertificate" in socket ? { socket } : {}),
          rawHeaders: incoming?.rawHeaders ?? flatHeaders(c.req.raw.headers),
        },
        c.req.raw.signal, // a client that leaves stops waiting for its TokenReview
      );
    } catch (err) {
      if (err instanceof StatusError && err.code === 401) metrics.authentications.inc({ method: "failed" });
      throw err;
    }
    metrics.authentications.inc({ method: who.method });
    c.set("caller", who.caller);
    c.set("authn", who.method);
    try {
      // The review's attributes are the parsed target's parts: the same every later layer uses.
      const decision = await authorizer.authorizeRequest(who.caller, c.req.method, c.get("target")!, c.req.raw.signal, deps.clusterPolicies !== undefined);
      if (decision.selector !== undefined) c.set("selector", decision.selector);
      metrics.authorizations.inc({ by: decision.by, decision: "allow" });
    } catch (err) {
      if (err instanceof StatusError && err.code === 403) metrics.authorizations.inc({ by: "review", decision: "deny" });
      throw err;
    }
    await next();
  });

  app.get("/metrics", async (c) => {
    c.set("kind", "metrics");
    return new Response(await metrics.registry.metrics(), { status: 200, headers: { "Content-Type": metrics.registry.contentType, "X-Request-Id": c.get("requestId") } });
  });
  app.get("/apis", (c) => {
    const list = apiGroupList();
    // The custom group only when served: a proxy without it must not claim the API.
    if (deps.custom !== undefined) list.groups.push(customApiGroup(true));
    return send(c, json(list));
  });
  if (deps.custom !== undefined) {
    const custom = deps.custom;
    app.get(CUSTOM_GROUP_PATH, (c) => send(c, json(customApiGroup())));
    const customDiscovery = (c: Context<Env>) => {
      const version = c.req.param("version") ?? "";
      if (!isCustomVersion(version)) throw notFoundPath(c.req.method, c.get("target")!.path);
      c.set("kind", "custom-discovery");
      const answer = forwarder.customDiscovery(version, c.get("requestId"));
      c.set("cache", answer.cache);
      return send(c, answer);
    };
    app.get(`${CUSTOM_GROUP_PATH}/:version`, customDiscovery);
    app.get(`${CUSTOM_GROUP_PATH}/:version/`, customDiscovery);
    app.get(`${CUSTOM_GROUP_PATH}/:version/*`, async (c) => {
      const target = c.get("target")!;
      // Exactly the shapes the Go client sends, read from the parsed parts (400 for a bad metric or resource).
      const read = customMetricsRead(target.path);
      if (read === undefined) throw notFoundPath(c.req.method, target.path);
      c.set("kind", "custom");
      const metric = metricName(read.metric);
      c.set("metric", metric.key);
      c.set("namespace", read.namespace);
      c.set("resource", read.resource);
      const labelSelector = oneSelector(target.query, "labelSelector");
      const metricLabelSelector = oneSelector(target.query, "metricLabelSelector");
      // What is forwarded (and keys the cache) is rebuilt from the parts: the path and the two selectors only.
      const query = new URLSearchParams();
      if (labelSelector !== "") query.set("labelSelector", labelSelector);
      if (metricLabelSelector !== "") query.set("metricLabelSelector", metricLabelSelector);
      const pathAndQuery = customMetricsPath(read) + canonicalQuery(query);
      // The cluster policy layer: the read's resource, and its metric selector (contract C1).
      if (deps.clusterPolicies !== undefined) {
        let selector: Selector = EVERYTHING;
        try {
          if (metricLabelSelector !== "") selector = Object.freeze(parseSelector(metricLabelSelector, { maxLength: MAX_SELECTOR_LENGTH }));
        } catch (err) {
          if (err instanceof SelectorError) throw badRequest(`invalid metricLabelSelector: ${err.message}`);
          throw err;
        }
        const url = new URL(pathAndQuery, CANONICAL_ORIGIN);
        deps.clusterPolicies.authorize({ caller: c.get("caller")!, namespace: read.namespace, metric: metric.key, url, selector, resource: read.resource });
      }
      // The objects, unless no backend serves the metric (404 below) or a passthrough adapter resolves them itself.
      const type = forwarder.backendType(metric.key);
      const objects = type === undefined || type === "passthrough" ? undefined : await resolveObjects(custom, read, labelSelector, c.req.raw.signal);
      const body = Buffer.from(JSON.stringify(objects === undefined ? {} : objects), "utf8");
      if (body.length > MAX_SIGNED_BODY_BYTES) {
        throw badRequest(`the objects of this read take ${body.length} bytes; a custom read carries at most ${MAX_SIGNED_BODY_BYTES}`);
      }
      const answer = await forwarder.customValues(
        {
          caller: c.get("caller")!,
          requestId: c.get("requestId"),
          pathAndQuery,
          read: { target: read, metricLabelSelector, ...(objects !== undefined ? { objects } : {}) },
          body,
          signal: c.req.raw.signal,
        },
        metric,
      );
      c.set("backend", answer.backend);
      c.set("cache", answer.cache);
      return send(c, answer);
    });
  }
  app.get(`/apis/${GROUP}`, (c) => {
    const gv = { groupVersion: GROUP_VERSION, version: VERSION };
    return send(c, json({ kind: "APIGroup", apiVersion: "v1", name: GROUP, versions: [gv], preferredVersion: gv }));
  });
  const discovery = async (c: Context<Env>) => {
    c.set("kind", "discovery");
    const answer = await forwarder.discovery(c.get("caller")!, c.get("requestId"));
    c.set("cache", answer.cache);
    return send(c, answer);
  };
  app.get(DISCOVERY_PATH, discovery);
  app.get(`${DISCOVERY_PATH}/`, discovery);

  app.get(`${DISCOVERY_PATH}/*`, async (c) => {
    const target = c.get("target")!;
    // Exactly `namespaces/{ns}/{metric}`, read from the parsed parts (not from the URL Hono routed).
    const read = externalMetricsRead(target.path);
    if (read === undefined) throw notFoundPath(c.req.method, target.path);
    c.set("kind", "values");
    const metric = metricName(read.metric);
    c.set("metric", metric.key);
    c.set("namespace", read.namespace);
    // What is forwarded (and keys the cache) is rebuilt from the parts, never copied from the URL.
    // (`target.path.canonical` is `externalMetricsPath(read)`: exactly those six segments.)
    const pathAndQuery = target.path.canonical + target.canonicalQuery;
    // The cluster policy layer: every applicable ExternalMetricPolicy must allow (throws 403/503/400).
    if (deps.clusterPolicies !== undefined) {
      const url = new URL(pathAndQuery, CANONICAL_ORIGIN);
      deps.clusterPolicies.authorize({ caller: c.get("caller")!, namespace: read.namespace, metric: metric.key, url, selector: c.get("selector") });
    }
    // The same read as typed parts, for a backend in this process (`checkRequestSize` refused a repeated labelSelector).
    const parts = { api: EXTERNAL_METRICS_API, namespace: read.namespace, metric: read.metric, labelSelector: target.query.get("labelSelector") ?? "" };
    const answer = await forwarder.values({ caller: c.get("caller")!, requestId: c.get("requestId"), pathAndQuery, parts, signal: c.req.raw.signal }, metric);
    c.set("backend", answer.backend);
    c.set("cache", answer.cache);
    return send(c, answer);
  });

  app.all("*", (c) => {
    throw c.req.method === "GET" || c.req.method === "HEAD"
      ? notFound(`the server could not find the requested resource (${c.req.method} ${c.req.path})`)
      : new StatusError(405, `method ${c.req.method} is not allowed; this API is read-only (GET)`);
  });
  return app;
}

/**
 * The objects of a custom read (contract C3): a Pods read's pod names from
 * the pod index, an Object read's object from the API, none for a namespace
 * read. Both within `custom.timeoutMs` (and the caller's presence).
 *
 * @throws StatusError 400 for a selection of another resource than pods;
 *   as custom/pods.ts `select` and custom/objects.ts `read`
 */
async function resolveObjects(custom: NonNullable<ProxyAppDeps["custom"]>, read: CustomMetricsRead, labelSelector: string, callerSignal: AbortSignal): Promise<ReadObjects | undefined> {
  if (read.shape === "namespace") return undefined;
  const signal = AbortSignal.any([callerSignal, AbortSignal.timeout(custom.timeoutMs)]);
  if (read.shape === "selected") {
    if (read.resource !== "pods") throw badRequest(`a selection of ${read.resource} (name "*") is not served: only pods/* (HPA type Pods)`, { name: "*", group: CUSTOM_GROUP, kind: read.resource });
    return { pods: await custom.pods.select(read.namespace, labelSelector, signal) };
  }
  return { object: await custom.objects.read(read, signal) };
}

function json(body: unknown): Answer {
  return { status: 200, body: JSON.stringify(body), headers: {} };
}

/** Headers every JSON answer sets itself; an answer's own headers of these names are dropped. */
const OWN_HEADERS = new Set(["content-type", "cache-control", "x-request-id"]);

/**
 * The Response for an answer: JSON, `Cache-Control: no-store`, the request
 * id, and the answer's extra headers (never `Retry-After` on a values path).
 * Built with a plain header object, which @hono/node-server writes without
 * creating a `Headers` instance.
 */
function send(c: Context<Env>, answer: Answer): Response {
  const headers: Record<string, string> = { "Content-Type": "application/json", "Cache-Control": "no-store", "X-Request-Id": c.get("requestId") };
  for (const k in answer.headers) {
    const name = k.toLowerCase();
    if (OWN_HEADERS.has(name) || (name === "retry-after" && isValuesPath(c.req.path))) continue;
    headers[k] = answer.headers[k]!;
  }
  return new Response(answer.body, { status: answer.status, headers });
}

/** A plain-text answer (probes) with the request id. */
function text(c: Context<Env>, body: string, status = 200): Response {
  return new Response(body, { status, headers: { "Content-Type": "text/plain; charset=UTF-8", "X-Request-Id": c.get("requestId") } });
}

/** Path + query of a URL (for callers without Node's raw request target). */
function requestTarget(url: string): string {
  const u = new URL(url);
  return u.pathname + u.search;
}

/** A Node header value as `Headers.get` gives it (repeated values joined with ", "). */
function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}

/** Fallback for non-Node callers (tests using `app.request`): headers as raw pairs. */
function flatHeaders(headers: Headers): string[] {
  const out: string[] = [];
  headers.forEach((value, name) => out.push(name, value));
  return out;
}
