/**
 * The Hono app that serves `external.metrics.k8s.io/v1beta1`: routing only.
 * Every entry point (Node server, Cloudflare Worker, AWS Lambda) builds this
 * same app from `shared/` with its own runtime bindings; a values read is
 * answered by the bridge's typed values read (shared/values/read.ts
 * `createValuesReader`), which the proxy's in-process backend calls directly.
 *
 * Routes (the paths kube-apiserver's aggregation layer proxies, see
 * kube-aggregator `pkg/apiserver/handler_proxy.go`, and the paths the HPA's
 * client calls, k8s.io/metrics `pkg/client/external_metrics/client.go`):
 *
 * | path | answer |
 * |---|---|
 * | `GET /apis/external.metrics.k8s.io/v1beta1` | `APIResourceList`, one resource per metric rule, never empty |
 * | `GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}?labelSelector=…` | `ExternalMetricValueList` |
 * | `GET /apis`, `GET /apis/external.metrics.k8s.io` | `APIGroupList` (the custom group listed only when custom rules exist), `APIGroup` (plain JSON, so aggregated discovery falls back) |
 * | `GET /apis/custom.metrics.k8s.io` | `APIGroup`: v1beta2 (preferred) and v1beta1 (only with custom rules) |
 * | `GET /apis/custom.metrics.k8s.io/{v1beta2,v1beta1}` | `APIResourceList`, one `{resource}/{metric}` per custom rule (only with custom rules) |
 * | `POST /apis/custom.metrics.k8s.io/{version}/…/{metric}?labelSelector=…&metricLabelSelector=…` | `MetricValueList` (`Cache-Control: no-store`): the custom read, the objects in the JSON body (shared/values/custom-request.ts) |
 * | `GET` of a custom values path | 405 Status: custom reads come from the in-cluster proxy, as a POST with the objects |
 * | `GET /healthz`, `/livez`, `/readyz` | `ok` |
 * | anything else | `metav1.Status` 404 (405 for other methods; 404 for every method under `/apis/custom.metrics.k8s.io` without custom rules) |
 *
 * A custom read's body is read (at most `MAX_SIGNED_BODY_BYTES`, 413 past
 * it) before the caller is authenticated, so the signature
 * (`EMB-HMAC-SHA256-3`, shared/signing.ts) covers it; then the path, the
 * query and the body become the typed parts of `createCustomValuesReader`
 * (shared/values/custom-read.ts), which `BridgeApp.readCustom` also calls.
 */
import type { Context } from "hono";
import { Hono } from "./hono.ts";
import type { BridgeConfig } from "./config/config.ts";
import { badRequest, forbidden, notFound, requestEntityTooLarge, StatusError, toStatusError } from "./k8s/status.ts";
import { apiGroupList, apiResourceList, GROUP, GROUP_VERSION, VERSION, type APIResourceList } from "./k8s/types.ts";
import { discoveryName } from "./metric-name.ts";
import { isApisPath } from "./k8s/request-path.ts";
import { ANONYMOUS, type Caller } from "./identity.ts";
import type { Provider, RuntimeEnv } from "./providers/types.ts";
import { REQUEST_DEADLINE_MS } from "./deadline.ts";
import { requestIdFrom } from "./request-id.ts";
import { createLogger, parseLevel, LOG_LEVEL_ENV, type LogRecord } from "./observability/log.ts";
import { BridgeMetrics, errorKind, requestCounter, type RequestKind } from "./observability/metrics.ts";
import { parseValuesTarget, type AuthorizationRequest } from "./values/request.ts";
import { createValuesReader, type ReadValues } from "./values/read.ts";
import { statusHttpAnswer, valuesHttpAnswer } from "./values/answer.ts";
import { CUSTOM_GROUP, CUSTOM_VERSIONS, customApiGroup, customApiResourceList, type CustomGroupVersion, type CustomVersion } from "./k8s/custom-types.ts";
import { createCustomValuesReader, type CustomAuthorizationRequest, type CustomValuesOutcome, type CustomValuesRead } from "./values/custom-read.ts";
import { customHttpAnswer, isCustomGroupPath, parseCustomTarget, readObjectsOf } from "./values/custom-request.ts";
import { readBounded } from "./bounded-body.ts";
import { MAX_SIGNED_BODY_BYTES } from "./signing.ts";

export { REQUEST_DEADLINE_MS } from "./deadline.ts";

/** Longest `labelSelector` accepted, characters (one home: shared/k8s/selector). */
export { MAX_SELECTOR_LENGTH } from "./k8s/selector.ts";

/** One structured log record (JSON lines): the type of `shared/observability/log.ts`. */
export type { LogRecord } from "./observability/log.ts";

/** What the policy decision is asked (one home: shared/values/request.ts). */
export type { AuthorizationRequest } from "./values/request.ts";

/** What an entry point hands to {@link createBridgeApp}. */
export interface BridgeOptions {
  config: BridgeConfig;
  /** provider instances by name (see `providers/registry.ts` `buildProviders`) */
  providers: ReadonlyMap<string, Provider>;
  runtime: RuntimeEnv;
  /**
   * structured log sink; default: `createLogger` (`shared/observability/log.ts`)
   * at `LOG_LEVEL` of `runtime.env` (default info), JSON lines on the console.
   * Receives one record per request (the audit record for a values read,
   * shared/values/read.ts); probe answers at `debug`.
   */
  log?: (record: LogRecord) => void;
  /**
   * the counters the request path updates (`shared/observability/metrics.ts`);
   * default `runtime.metrics`, else a private instance
   */
  metrics?: BridgeMetrics;
  /**
   * whole-request deadline, ms (default {@link REQUEST_DEADLINE_MS}, 3 s): the
   * provider's `QueryRequest.signal` aborts then, and the answer is a 503 Status
   */
  deadlineMs?: number;
  /**
   * Establish the caller of an `/apis/…` request (e.g. by verifying the
   * in-cluster proxy's signature). Throws StatusError 401 to refuse it.
   * `body` is the request body's bytes for a custom read (`POST`, read
   * bounded before this call, so a signature can cover it), undefined for
   * a request without one. Default: every caller is {@link ANONYMOUS}.
   */
  authenticate?: (request: Request, body?: Uint8Array) => Caller | Promise<Caller>;
  /**
   * Decide whether the caller may read the series a request identifies,
   * before any backend call. Throws StatusError 403 to deny.
   * Default: everything is allowed.
   */
  authorize?: (request: AuthorizationRequest) => void | Promise<void>;
  /**
   * Decide whether the caller may read a custom metric (shared/values/custom-read.ts
   * `CustomAuthorizationRequest`: caller, namespace, metric, rule, the
   * `metricLabelSelector`, the described resource), before any backend call.
   * Throws StatusError 403 to deny. Default: every custom read is denied
   * (fail closed; the bridge wires the policy's decision, shared/bridge.ts).
   */
  authorizeCustom?: (request: CustomAuthorizationRequest) => void | Promise<void>;
}

const PREFIX = `/apis/${GROUP_VERSION}`;
/** Context variable holding the request id (set by {@link createBridgeApp}'s `serve`). */
const REQUEST_ID = "requestId" as never;

/** The bridge's app, its typed values read and its discovery document. */
export interface BridgeApp {
  /** the routes of every runtime */
  app: Hono;
  /**
   * A values read without HTTP (shared/values/read.ts): the same read,
   * policies, cache, audit record and answer as `GET` of its path through
   * {@link BridgeApp.app} from the same caller. The caller is the one given
   * (the `authenticate` hook is not called). Never throws.
   */
  readValues: ReadValues;
  /** the `APIResourceList` served at `/apis/external.metrics.k8s.io/v1beta1`: one resource per metric rule */
  discovery: APIResourceList;
  /**
   * A custom read without HTTP (shared/values/custom-read.ts): the same
   * rules, policy (`authorizeCustom`), audit record, counters and answer as
   * `POST` of its path through {@link BridgeApp.app} from the same caller
   * with the same objects. The caller is the one given. Never throws: a
   * failure is the StatusError to answer.
   */
  readCustom: (read: CustomValuesRead) => Promise<CustomValuesOutcome>;
  /**
   * The `APIResourceList` served at `/apis/custom.metrics.k8s.io/<version>`,
   * per version (one `{resource}/{metric}` per custom rule); undefined when
   * the config has no custom rule (the group is then not served at all).
   */
  customDiscovery: Readonly<Record<CustomVersion, APIResourceList<CustomGroupVersion>>> | undefined;
}

/**
 * Build the bridge's Hono app and its typed values read.
 *
 * Every answer is logged once (`options.log`): a values read as its audit
 * record (shared/values/read.ts `createValuesReader`); probes (`/healthz`,
 * `/livez`, `/readyz`) at debug; every other answer as `{ msg: "request",
 * requestId, method, path, code, durationMs }` (plus `errorKind`, `error`
 * and `target` — the path and query as received, cut at 1 KiB, so a
 * refused spelling shows as sent — when it failed). It also counts requests,
 * their duration and policy decisions in `options.metrics`.
 *
 * @throws Error when a metric rule names a provider that was not built, or
 *   `LOG_LEVEL` is not a level (without `options.log`)
 */
export function createBridgeApp(options: BridgeOptions): BridgeApp {
  const { config, providers, runtime } = options;
  const log = options.log ?? createLogger({ level: parseLevel(runtime.env[LOG_LEVEL_ENV]), now: runtime.now });
  const metrics = options.metrics ?? runtime.metrics ?? new BridgeMetrics();
  const countRequest = requestCounter(metrics);
  // what the External and the custom read share: rules, providers, clock, log, counters, deadline
  const shared = { config, providers, now: runtime.now, log, metrics, countRequest, ...(options.deadlineMs !== undefined ? { deadlineMs: options.deadlineMs } : {}) };
  const readValues = createValuesReader({ ...shared, ...(options.authorize !== undefined ? { authorize: options.authorize } : {}) });
  const discovery = apiResourceList(config.metrics.map((r) => discoveryName(r.name)));
  const readCustom = createCustomValuesReader({ ...shared, authorize: options.authorizeCustom ?? denyCustomReads });
  const customDiscovery = customDiscoveryOf(config);

  const app = new Hono();
  const authenticate = options.authenticate ?? (() => ANONYMOUS);

  /** The Status answer for anything a handler threw (logging what is not a StatusError). */
  const errorResponse = (err: unknown, c: Context): Response => {
    const status = toStatusError(err);
    if (!(err instanceof StatusError)) log({ level: "error", msg: "unhandled error", error: String(err) });
    return statusResponse(c, status);
  };

  /**
   * Every answer goes through here, as one handler per route rather than
   * middleware (Hono then dispatches a request with a single matching
   * handler without composing a chain, issue 11 P1): the request id, the
   * caller of an `/apis` path (`/apis` itself and below, as `/apis/*`
   * middleware matched; `authenticate` may refuse with 401), errors as
   * Status answers, `X-Request-Id` on every answer, and one request log
   * line — except for a values read, whose audit record the values read
   * writes itself (the handler returns `audited: true`).
   */
  const serve =
    (
      handler: (c: Context, caller: Caller, requestId: string, body: Uint8Array | undefined) => Response | Audited | Promise<Response | Audited>,
      kind: RequestKind = "other",
      withBody = false,
    ) =>
    async (c: Context): Promise<Response> => {
      const started = performance.now();
      const requestId = requestIdFrom(offeredRequestId(c));
      c.set(REQUEST_ID, requestId as never);
      const path = c.req.path;
      let res: Response;
      let failure: StatusError | undefined;
      try {
        // A body is read (bounded: 413 past the limit) before authentication, so the signature covers it.
        const body = withBody ? await boundedBody(c.req.raw) : undefined;
        let caller = ANONYMOUS;
        if (isApisPath(path)) {
          const authenticated = authenticate(c.req.raw, body);
          caller = authenticated instanceof Promise ? await authenticated : authenticated;
        }
        const answered = handler(c, caller, requestId, body);
        const done = answered instanceof Promise ? await answered : answered;
        if (!(done instanceof Response)) return done.response; // audited and counted by the values read
        res = done;
      } catch (err) {
        failure = toStatusError(err);
        res = errorResponse(err, c);
      }
      // Answers made by `respond` carry the id in their plain header object
      // (no `Headers` instance per request); any other answer gets it here.
      if ((res as { [STAMPED]?: true })[STAMPED] !== true) {
        res = new Response(res.body, res);
        res.headers.set("X-Request-Id", requestId);
      }
      const status = res.status;
      const seconds = (performance.now() - started) / 1000;
      countRequest(kind, status, seconds);
      const level = kind === "probe" && status < 400 ? "debug" : status >= 500 ? "error" : status >= 400 ? "warn" : "info";
      const record: LogRecord = { level, msg: "request", requestId, method: c.req.method, path, code: status, durationMs: Math.round(seconds * 1e6) / 1e3 };
      if (failure !== undefined) {
        record["errorKind"] = errorKind(failure);
        record["error"] = failure.message;
        // `path` is the runtime's decoded path: a refused spelling (`team%2Db`) shows as sent here
        record["target"] = rawTarget(c).slice(0, 1024);
      }
      log(record);
      return res;
    };

  app.onError(errorResponse); // (a safety net: `serve` answers every error itself)

  for (const path of ["/healthz", "/livez", "/readyz"]) {
    app.get(path, serve((c) => respond(c, "ok", 200, { "Content-Type": "text/plain; charset=UTF-8" }), "probe"));
  }

  const groups = apiGroupList();
  if (customDiscovery !== undefined) groups.groups.push(customApiGroup(true));
  app.get("/apis", serve((c) => json(c, groups), "discovery"));
  app.get(
    `/apis/${GROUP}`,
    serve((c) => {
      const gv = { groupVersion: GROUP_VERSION, version: VERSION };
      return json(c, { kind: "APIGroup", apiVersion: "v1", name: GROUP, versions: [gv], preferredVersion: gv });
    }, "discovery"),
  );
  app.get(PREFIX, serve((c) => json(c, discovery), "discovery"));
  app.get(`${PREFIX}/`, serve((c) => json(c, discovery), "discovery"));

  // A values read: the target parsed into typed parts (404/400 here are plain request records), then the values read.
  app.get(
    `${PREFIX}/*`,
    serve((c, caller, requestId) => {
      const parts = parseValuesTarget(rawTarget(c), c.req.method);
      const outcome = readValues({ ...parts, caller, requestId, signal: c.req.raw.signal, path: c.req.path });
      return outcome instanceof Promise ? outcome.then((done) => valuesResponse(c, done)) : valuesResponse(c, outcome);
    }, "values"),
  );

  if (customDiscovery !== undefined) {
    const CUSTOM = `/apis/${CUSTOM_GROUP}`;
    const group = customApiGroup();
    app.get(CUSTOM, serve((c) => json(c, group), "discovery"));
    for (const version of CUSTOM_VERSIONS) {
      const list = customDiscovery[version];
      app.get(`${CUSTOM}/${version}`, serve((c) => json(c, list), "discovery"));
      app.get(`${CUSTOM}/${version}/`, serve((c) => json(c, list), "discovery"));
    }
    // A custom read: the body read bounded and the caller authenticated (serve), then the path, query and body as typed parts.
    app.post(
      `${CUSTOM}/*`,
      serve(
        async (c, caller, requestId, body) => {
          const target = parseCustomTarget(rawTarget(c), c.req.method);
          const type = c.req.header("content-type") ?? "";
          if (!/^application\/json\s*(;|$)/i.test(type)) {
            throw badRequest(`a custom read's body must be sent as Content-Type: application/json, not ${JSON.stringify(type.slice(0, 100))}`);
          }
          const objects = readObjectsOf(target.read.shape, body!);
          const outcome = await readCustom({
            target: target.read,
            metricLabelSelector: target.metricLabelSelector,
            labelSelector: target.labelSelector,
            ...(objects !== undefined ? { objects } : {}),
            caller,
            requestId,
            signal: c.req.raw.signal,
            // the audit record's path: the canonical one (customMetricsPath), as for the typed read
          });
          const answer = customHttpAnswer(outcome);
          return { response: respond(c, answer.body, answer.status, answer.headers) };
        },
        "custom",
        true,
      ),
    );
    // A GET of a custom values path: 405 naming how custom reads come (any other path below the group: 404).
    app.get(
      `${CUSTOM}/*`,
      serve((c) => {
        const target = parseCustomTarget(rawTarget(c), c.req.method);
        throw new StatusError(
          405,
          `method ${c.req.method} is not allowed for ${target.read.resource}/${target.read.name}/${target.read.metric}: custom metrics reads come through the in-cluster proxy, ` +
            `which resolves the objects and sends them as a signed POST of this path`,
        );
      }, "custom"),
    );
  }

  /** A values read's outcome as the route's answer (audited and counted already). */
  const valuesResponse = (c: Context, outcome: Awaited<ReturnType<ReadValues>>): Audited => {
    const answer = valuesHttpAnswer(outcome, runtime.now());
    return { response: respond(c, answer.body, answer.status, answer.headers) };
  };

  // No route matched (or another method than GET/HEAD): 404 or 405, authenticated like any `/apis` path.
  // Without custom rules the custom group is not served: 404 for every method.
  app.notFound(
    serve((c) => {
      const method = c.req.method;
      const custom = isCustomGroupPath(c.req.path);
      if (method === "GET" || method === "HEAD" || (custom && customDiscovery === undefined)) {
        return statusResponse(c, notFound(`the server could not find the requested resource (${method} ${c.req.path})`));
      }
      return statusResponse(
        c,
        new StatusError(405, custom ? `method ${method} is not allowed; custom metrics reads are POST (from the in-cluster proxy)` : `method ${method} is not allowed; this API is read-only (GET)`),
      );
    }),
  );

  return { app, readValues, discovery, readCustom, customDiscovery };
}

/** The default custom-read decision: deny every read (fail closed; a 403 naming the resource and metric). */
function denyCustomReads(request: CustomAuthorizationRequest): never {
  throw forbidden(`${request.resource}.${CUSTOM_GROUP} ${JSON.stringify(request.metric)} is forbidden: no policy decides custom reads on this bridge`, {
    name: request.metric,
    group: CUSTOM_GROUP,
    kind: request.resource,
  });
}

/** Core resources that are cluster-scoped (apimachinery's discovery of `/api/v1`), for the custom discovery's `namespaced`. */
const CLUSTER_SCOPED = new Set(["namespaces", "nodes", "persistentvolumes"]);

/**
 * The custom discovery of a config, per version: one `{resource}/{metric}`
 * per custom rule (`customApiResourceList`, the metric as discovery names
 * it, shared/metric-name.ts `discoveryName`); undefined without custom rules.
 * `namespaced` is false for the cluster-scoped core resources only (the
 * rule does not say the scope of another group's resource; the HPA's client
 * does not read it).
 */
function customDiscoveryOf(config: BridgeConfig): Record<CustomVersion, APIResourceList<CustomGroupVersion>> | undefined {
  if (config.customMetrics.length === 0) return undefined;
  const pairs = config.customMetrics.map((rule) => {
    const resource = rule.describes!.resource;
    return { resource, metric: discoveryName(rule.name), namespaced: !CLUSTER_SCOPED.has(resource) };
  });
  return { v1beta2: customApiResourceList("v1beta2", pairs), v1beta1: customApiResourceList("v1beta1", pairs) };
}

/**
 * The bytes of a request's body, at most `MAX_SIGNED_BODY_BYTES`: a
 * `Content-Length` past it is refused before reading, a body that runs past
 * it while read is cut there (shared/bounded-body.ts).
 *
 * @throws StatusError 413
 */
async function boundedBody(request: Request): Promise<Uint8Array> {
  const tooLarge = () => requestEntityTooLarge(`a custom read's body is at most ${MAX_SIGNED_BODY_BYTES} bytes`);
  const length = request.headers.get("content-length");
  if (length !== null && /^\d+$/.test(length) && Number(length) > MAX_SIGNED_BODY_BYTES) throw tooLarge();
  return readBounded(request.body, MAX_SIGNED_BODY_BYTES, tooLarge);
}

/** A handler's answer whose request was audited and counted by the values read: `serve` passes it on as is. */
interface Audited {
  response: Response;
}

/** Marks a response made by {@link respond}: it already carries `X-Request-Id` (a property, cheaper than a WeakSet entry per answer). */
const STAMPED = Symbol("X-Request-Id set");

/**
 * A 200 JSON response (discovery) with `Cache-Control: no-store` and
 * `X-Request-Id`. The headers are a plain object, which @hono/node-server
 * writes without building a `Headers`.
 */
function json(c: Context, body: unknown): Response {
  return respond(c, JSON.stringify(body), 200, { "Content-Type": "application/json", "Cache-Control": "no-store" });
}

/**
 * A response with `headers` (a plain object) plus `X-Request-Id`, marked as
 * carrying it. @hono/node-server writes such a response without building a
 * `Headers` or a WHATWG `Response` (a header added after the fact would).
 */
function respond(c: Context, body: string, code: number, headers: Record<string, string>): Response {
  const requestId = c.get(REQUEST_ID) as string | undefined;
  if (requestId !== undefined) headers["X-Request-Id"] = requestId;
  const response = new Response(body, { status: code, headers });
  (response as { [STAMPED]?: true })[STAMPED] = true;
  return response;
}

/**
 * The `X-Request-Id` the client offered. On @hono/node-server it is read from
 * Node's already parsed headers (`c.env.incoming`), so a request that needs
 * no other header never builds a `Headers` object; elsewhere (workerd, the
 * Lambda adapter, `app.request` in tests) from the Fetch `Request`.
 */
function offeredRequestId(c: Context): string | undefined {
  const incoming = (c.env as { incoming?: { headers?: Record<string, string | string[] | undefined> } } | undefined)?.incoming;
  if (incoming !== undefined && typeof incoming.headers === "object" && incoming.headers !== null) {
    const value = incoming.headers["x-request-id"];
    return typeof value === "string" ? value : undefined;
  }
  return c.req.header("x-request-id");
}

/** The Status response for an error, with `Retry-After` where set. */
function statusResponse(c: Context, err: StatusError): Response {
  const answer = statusHttpAnswer(err);
  return respond(c, answer.body, answer.status, answer.headers);
}

/**
 * The request target as received, path and query still percent-encoded:
 * Node's raw request target (`c.env.incoming.url`) when served by
 * @hono/node-server — the URL Hono holds has had `.`/`..` segments (also
 * `%2E%2E`) resolved by the WHATWG URL parser, which would hide them from
 * the path parser —, else the path and query of the request's URL (workerd and the Lambda adapter hand over a URL
 * already parsed; its dot segments are resolved before the bridge sees it).
 */
function rawTarget(c: Context): string {
  const incoming = (c.env as { incoming?: { url?: unknown } } | undefined)?.incoming;
  if (incoming !== undefined && typeof incoming.url === "string") return incoming.url;
  const url = new URL(c.req.url);
  return url.pathname + url.search;
}

