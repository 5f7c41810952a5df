/**
 * The Hono app that serves `external.metrics.k8s.io/v1beta1`. Every entry
 * point (Node server, Cloudflare Worker, AWS Lambda) builds this same app
 * from `shared/` with its own runtime bindings.
 *
 * Routes (the paths kube-apiserver's aggregation layer proxies, see
 * kube-aggregator `pkg/apiserver/handler_proxy.go`, and the paths the HPA's
 * client calls, k8s.io/metrics `pkg/client/external_metrics/client.go`):
 *
 * | path | answer |
 * |---|---|
 * | `GET /apis/external.metrics.k8s.io/v1beta1` | `APIResourceList`, one resource per metric rule, never empty |
 * | `GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}?labelSelector=…` | `ExternalMetricValueList` |
 * | `GET /apis`, `GET /apis/external.metrics.k8s.io` | `APIGroupList`, `APIGroup` (plain JSON, so aggregated discovery falls back) |
 * | `GET /healthz`, `/livez`, `/readyz` | `ok` |
 * | anything else | `metav1.Status` 404 (405 for other methods) |
 */
import type { Context } from "hono";
import { Hono } from "./hono.ts";
import type { BridgeConfig } from "./config/config.ts";
import { fitsMilliValue, formatDecimal, formatQuantity, type Decimal } from "./k8s/quantity.ts";
import { MAX_SELECTOR_LENGTH, parseSelector, SelectorError, type Selector } from "./k8s/selector.ts";
import {
  badRequest,
  internalError,
  notFound,
  serviceUnavailable,
  StatusError,
  toStatusError,
  EXTERNAL_METRICS_GROUP,
} from "./k8s/status.ts";
import {
  apiGroupList,
  apiResourceList,
  externalMetricValueList,
  formatTimestamp,
  GROUP,
  GROUP_VERSION,
  VERSION,
  type ExternalMetricValue,
} from "./k8s/types.ts";
import { discoveryName, metricName } from "./metric-name.ts";
import { externalMetricsRead, isApisPath, notFoundPath, parseRequestTarget } from "./k8s/request-path.ts";
import { ANONYMOUS, type Caller } from "./identity.ts";
import type { MetricRule, PlanRequest, Provider, RuntimeEnv, Series } from "./providers/types.ts";
import { abortedPromise, REQUEST_DEADLINE_MS } from "./deadline.ts";
import { requestIdFrom } from "./request-id.ts";
import { BoundedMap } from "./cache/bounded-map.ts";
import { createLogger, parseLevel, LOG_LEVEL_ENV, type LogRecord } from "./observability/log.ts";
import { BridgeMetrics, errorKind, type Count, type Histogram, type RequestKind, type Served } from "./observability/metrics.ts";

export { REQUEST_DEADLINE_MS } from "./deadline.ts";

/** Longest `labelSelector` accepted, characters (one home: shared/k8s/selector). */
export { MAX_SELECTOR_LENGTH } from "./k8s/selector.ts";


/** One structured log record (JSON lines): the type of `shared/observability/log.ts`. */
export type { LogRecord } from "./observability/log.ts";

/** What an entry point hands to {@link createApp}. */
export interface BridgeOptions {
  config: BridgeConfig;
  /** provider instances by name (see `providers/registry.ts` `buildProviders`) */
  providers: ReadonlyMap<string, Provider>;
  runtime: RuntimeEnv;
  /**
   * structured log sink; default: `createLogger` (`shared/observability/log.ts`)
   * at `LOG_LEVEL` of `runtime.env` (default info), JSON lines on the console.
   * Receives one record per request (the audit record for a values read,
   * see {@link createApp}); probe answers at `debug`.
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
   * Default: every caller is {@link ANONYMOUS}.
   */
  authenticate?: (request: Request) => Caller | Promise<Caller>;
  /**
   * Decide whether the caller may read the series a request identifies,
   * before any backend call. Throws StatusError 403 to deny.
   * Default: everything is allowed.
   */
  authorize?: (request: AuthorizationRequest) => void | Promise<void>;
}

/** What {@link BridgeOptions.authorize} decides on. */
export interface AuthorizationRequest {
  caller: Caller;
  namespace: string;
  /** the metric name's lookup key (lowercased, `/` for `|`) */
  metric: string;
  rule: MetricRule;
  selector: Selector;
}

/**
 * A provider that can answer a read from its cache without I/O
 * (`SeriesProvider.peek`, `./providers/series.ts`). On a cache hit the app
 * serves the answer at once: no deadline timer, no AbortController, no
 * race (issue 11 P1). Answers exactly what `query` would resolve to now.
 */
export interface CachedReads {
  /**
   * The series `query` would resolve to right now, when every one of them is
   * a fresh cache hit; undefined when any needs a load (then the app calls
   * `query` with its deadline). Synchronous, never starts a backend call.
   * The series' `labels` may be frozen objects shared by every hit (read
   * them, never change them); the app keeps a built answer while the same
   * label objects and `Decimal` values come back.
   *
   * @throws StatusError 400/404 exactly as `query` would (label resolution)
   */
  peek(request: PlanRequest): Series[] | undefined;
}

const PREFIX = `/apis/${GROUP_VERSION}`;
/** Context variable holding the request id (set by the first middleware). */
const REQUEST_ID = "requestId" as never;

/**
 * Build the bridge's Hono app.
 *
 * Every answer is logged once (`options.log`): a values read as the audit
 * record `{ msg: "request", requestId, method, path, user, groups, namespace, metric,
 * selector, provider, decision (allow | deny), code, durationMs, cache (hit |
 * load), value and ageSeconds (when served) }` plus, when it failed, `errorKind` (`shared/observability/metrics.ts`
 * {@link errorKind}) and `error` — the Status message, e.g. a
 * missing-credentials 500's text — at info (2xx), warn (4xx) or error (5xx);
 * probes (`/healthz`, `/livez`, `/readyz`) at debug; every other answer
 * as `{ msg: "request", requestId, method, path, code, durationMs }` (plus
 * `errorKind`, `error` and `target` — the path and query as received, cut at
 * 1 KiB, so a refused spelling shows as sent — when it failed). It also counts requests, their duration and policy
 * decisions in `options.metrics`.
 *
 * @throws Error when a metric rule names a provider that was not built, or
 *   `LOG_LEVEL` is not a level (without `options.log`)
 */
export function createApp(options: BridgeOptions): Hono {
  return createBridgeApp(options).app;
}

/**
 * A values read handed to the bridge inside the same process (the proxy's
 * `inProcess` backend, `shared/proxy/in-process.ts`): the caller is already
 * authenticated, there is no socket, no `Request` and no Hono routing.
 */
export interface DirectRead {
  /** `/apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/<metric>?labelSelector=…`, as received (percent-encoded) */
  pathAndQuery: string;
  /** the caller the proxy authenticated; the bridge's policies decide for it (its `authenticate` hook is not called) */
  caller: Caller;
  /** the request id of the read (the answer's `X-Request-Id` and the audit record's `requestId`) */
  requestId: string;
  /** aborted at the caller's deadline or when nobody waits any more; cancels the provider call */
  signal: AbortSignal;
}

/** The bridge's app and its direct entry for values reads. */
export interface BridgeApp {
  app: Hono;
  /**
   * Answer a values read without HTTP: the same handler, checks, policies,
   * cache, audit record, metrics and answer (status, headers, JSON body) as
   * `GET pathAndQuery` through {@link BridgeApp.app} from the same caller.
   * Only values reads
   * (`/apis/external.metrics.k8s.io/v1beta1/namespaces/<ns>/<metric>`) are
   * served here: any other path is answered 404, as the app's values route
   * answers a path it does not know (discovery goes through `app.fetch`).
   */
  readValues(read: DirectRead): Response | Promise<Response>;
}

/** The `c` of a {@link DirectRead}: the members of a Hono Context the values handler and `serve` read, and nothing else. */
interface DirectContext {
  /** the caller, already authenticated (serve skips `authenticate`) */
  caller: Caller;
  /** the request target as handed over (`DirectRead.pathAndQuery`), read by {@link rawTarget} */
  target: string;
  req: { method: string; path: string; url: string; raw: { signal: AbortSignal }; header(name: string): string | undefined };
  env: undefined;
  get(key: string): unknown;
  set(key: string, value: unknown): void;
}

/**
 * Build the bridge's Hono app and its direct values entry (see
 * {@link createApp} for what every answer carries and logs).
 *
 * @throws Error as {@link createApp}
 */
export function createBridgeApp(options: BridgeOptions): BridgeApp {
  const { config, providers, runtime } = options;
  const log = options.log ?? createLogger({ level: parseLevel(runtime.env[LOG_LEVEL_ENV]), now: runtime.now });
  const metrics = options.metrics ?? runtime.metrics ?? new BridgeMetrics();
  const allowed = metrics.policy.get("bridge", "allow");
  const denied = metrics.policy.get("bridge", "deny");
  /** requests_total cells by kind, then code, and each kind's histogram (no label joining per request) */
  const requestCounts = new Map<RequestKind, { codes: Map<number, Count>; duration: Histogram }>();
  const countRequest = (kind: RequestKind, code: number, seconds: number): void => {
    let byKind = requestCounts.get(kind);
    if (byKind === undefined) requestCounts.set(kind, (byKind = { codes: new Map(), duration: metrics.requestDuration.get(kind) }));
    let cell = byKind.codes.get(code);
    if (cell === undefined) byKind.codes.set(code, (cell = metrics.requests.get(kind, String(code))));
    cell.n++;
    byKind.duration.observe(seconds);
  };
  /** each rule's served-value cell */
  const servedCells = new Map<MetricRule, Served>();
  const deadlineMs = options.deadlineMs ?? REQUEST_DEADLINE_MS;
  const rules = new Map<string, MetricRule>();
  for (const rule of config.metrics) {
    if (!providers.has(rule.provider)) throw new Error(`metric ${rule.name}: provider ${rule.provider} was not built`);
    rules.set(rule.key, rule);
  }
  const discovery = apiResourceList(config.metrics.map((r) => discoveryName(r.name)));

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
   * Status answers, `X-Request-Id` on every answer, and one request log line.
   */
  const serve =
    (handler: (c: Context, caller: Caller, read: ReadAudit) => Response | Promise<Response>, kind: RequestKind = "other") =>
    async (c: Context): Promise<Response> => {
      const started = performance.now();
      const requestId = requestIdFrom(offeredRequestId(c));
      c.set(REQUEST_ID, requestId as never);
      const path = c.req.path;
      const read: ReadAudit = { caller: ANONYMOUS };
      let res: Response;
      let failure: StatusError | undefined;
      try {
        const given = (c as unknown as Partial<DirectContext>).caller;
        if (given !== undefined) read.caller = given;
        else if (isApisPath(path)) {
          const authenticated = authenticate(c.req.raw);
          read.caller = authenticated instanceof Promise ? await authenticated : authenticated;
        }
        const answered = handler(c, read.caller, read);
        res = answered instanceof Promise ? await answered : answered;
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
      const readKind = read.metric !== undefined ? "values" : kind;
      countRequest(readKind, status, seconds);
      const level = readKind === "probe" && status < 400 ? "debug" : status >= 500 ? "error" : status >= 400 ? "warn" : "info";
      const durationMs = Math.round(seconds * 1e6) / 1e3;
      if (read.metric !== undefined) {
        const record: LogRecord = {
          level,
          msg: "request",
          requestId,
          method: c.req.method,
          path,
          user: read.caller.user,
          groups: read.caller.groups,
          namespace: read.namespace,
          metric: read.metric,
          selector: read.selector,
          code: status,
          durationMs,
        };
        if (read.provider !== undefined) record["provider"] = read.provider;
        if (read.decision !== undefined) record["decision"] = read.decision;
        if (read.cache !== undefined) record["cache"] = read.cache;
        if (read.value !== undefined && status === 200) {
          record["value"] = read.value;
          record["ageSeconds"] = read.ageSeconds;
        }
        if (failure !== undefined) {
          record["errorKind"] = errorKind(failure);
          record["error"] = failure.message;
        }
        log(record);
      } else {
        const record: LogRecord = { level, msg: "request", requestId, method: c.req.method, path, code: status, durationMs };
        if (failure !== undefined) {
          record["errorKind"] = errorKind(failure);
          record["error"] = failure.message;
          // `path` is the runtime's decoded path: a refused spelling (`team%2Db`) shows as sent here
          record["target"] = rawTarget(c).slice(0, 1024);
        }
        log(record);
      }
      return res;
    };

  app.onError(errorResponse); // (a safety net: `serve` answers every error itself)

  for (const path of ["/healthz", "/livez", "/readyz"]) {
    app.get(path, serve((c) => respond(c, "ok", 200, { "Content-Type": "text/plain; charset=UTF-8" }), "probe"));
  }

  app.get("/apis", serve((c) => json(c, apiGroupList()), "discovery"));
  app.get(
    `/apis/${GROUP}`,
    serve((c) => {
      const gv = { groupVersion: GROUP_VERSION, version: VERSION };
      return json(c, { kind: "APIGroup", apiVersion: "v1", name: GROUP, versions: [gv], preferredVersion: gv });
    }, "discovery"),
  );
  app.get(PREFIX, serve((c) => json(c, discovery), "discovery"));
  app.get(`${PREFIX}/`, serve((c) => json(c, discovery), "discovery"));

  /** Values reads parsed before, by their whole URL (see {@link ParsedRead}). */
  const parsedReads = new BoundedMap<string, ParsedRead>({
    maxEntries: MEMO_READS,
    maxBytes: MEMO_READS_BYTES,
    // the key and selector texts (two bytes per character at most), the answer's text at its largest, the objects
    sizeOf: (url, read) => 2 * (url.length + read.selectorText.length) + 2 * MEMO_ANSWER_LENGTH + 512,
  });

  /**
   * A values read's target parsed and checked by the one request path
   * parser (shared/k8s/request-path.ts, the proxy's too: non-canonical
   * percent-encodings, `.`/`..`, `//` and a namespace that is not a DNS-1123
   * label are 400s), then the metric name and `labelSelector` (text and
   * parsed), each written into `audit` as soon as it is known (so a 400 for
   * the selector is still the audit record of a read). Remembered by target
   * when it is at most {@link MEMO_READ_URL_LENGTH} characters: the HPA
   * controller sends the same URLs every 15 s, and parsing is a few µs of a
   * cached read (issue 11 P1). Failures are not remembered.
   *
   * @param target the request target as received (see {@link rawTarget})
   * @param method the request method, for the 404 message
   * @throws StatusError 404 (not `namespaces/<ns>/<metric>`), 400 (path, namespace, metric name or selector invalid)
   */
  const parseRead = (target: string, method: string, audit: ReadAudit): ParsedRead => {
    const known = parsedReads.get(target);
    if (known !== undefined) {
      audit.namespace = known.namespace;
      audit.metric = known.requested;
      audit.selector = known.selectorText;
      return known;
    }
    const parsed = parseRequestTarget(target); // the path decoded once, and the query
    const values = externalMetricsRead(parsed.path);
    if (values === undefined) throw notFoundPath(method, parsed.path);
    const { namespace } = values;
    const { requested, key } = metricName(values.metric);
    const selectorText = parsed.query.get("labelSelector") ?? "";
    audit.namespace = namespace;
    audit.metric = requested;
    audit.selector = selectorText;
    const read: ParsedRead = { namespace, requested, key, selectorText, selector: readSelector(parsed.query) };
    if (target.length <= MEMO_READ_URL_LENGTH) parsedReads.set(target, read);
    return read;
  };

  const valuesRead = serve((c, caller, audit) => {
    const parsed = parseRead(rawTarget(c), c.req.method, audit);
    const { namespace, requested, key, selector } = parsed;
    const rule = rules.get(key);
    if (rule === undefined) {
      throw notFound(`external metric "${requested}" is not defined by this bridge`, {
        name: requested,
        group: EXTERNAL_METRICS_GROUP,
        kind: "externalmetrics",
      });
    }
    const provider = providers.get(rule.provider)!;
    audit.provider = rule.provider;
    const read = { rule, selector, namespace };
    // A cache hit is answered synchronously: no deadline to arm, nothing to cancel, no promise.
    const readSeries = (): Response | Promise<Response> => {
      const cached = (provider as Partial<CachedReads>).peek?.(read);
      if (cached !== undefined) {
        audit.cache = "hit";
        return answer(cached);
      }
      audit.cache = "load";
      return queryWithDeadline(provider, read, c.req.raw.signal, deadlineMs).then(answer);
    };
    const answer = (series: Series[]): Response => {
      if (series.length === 0) {
        throw serviceUnavailable(`metric ${rule.name}: provider ${rule.provider} returned no series; no value is reported`);
      }
      const now = runtime.now();
      // The same readings as the last answer to this request text: its body stands (issue 11 P1).
      const memo = parsed.answer;
      const body = memo !== undefined && memo.rule === rule && sameReadings(memo.series, series) && now - memo.oldest <= rule.maxAgeSeconds * 1000 ? memo : build(series, now);
      let served = servedCells.get(rule);
      if (served === undefined) servedCells.set(rule, (served = metrics.served.get(rule.name)));
      served.value = body.sum;
      served.oldestMs = body.oldest;
      audit.value = body.sum;
      audit.ageSeconds = (now - body.oldest) / 1000;
      return respond(c, body.text, 200, { "Content-Type": "application/json", "Cache-Control": `private, max-age=${freshFor(body.oldest, rule, now)}` });
    };
    /** The answer's body for `series`, checked (staleness, Quantity range) and remembered on the parsed request. */
    const build = (series: Series[], now: number): AnswerMemo => {
      let sum = 0;
      let oldest = now;
      const items: ExternalMetricValue[] = series.map((s) => {
        const ageMs = now - s.timestamp;
        if (ageMs > rule.maxAgeSeconds * 1000) {
          throw serviceUnavailable(
            `metric ${rule.name}: newest value of series ${JSON.stringify(s.labels)} is ${Math.round(ageMs / 1000)} s old, ` +
              `older than maxAgeSeconds (${rule.maxAgeSeconds}); no stale value is reported`,
          );
        }
        const quantity = quantityOf(s.value);
        if (quantity === null) {
          throw internalError(
            `metric ${rule.name}: value ${formatDecimal(s.value)} of series ${JSON.stringify(s.labels)} cannot be read back ` +
              `exactly by the HPA (its Quantity ${formatQuantity(s.value)} has more than 18 digits, or its MilliValue overflows ` +
              `int64 past about 9.22e15); scale or round it in the metric rule`,
          );
        }
        sum += numberOf(s.value);
        if (s.timestamp < oldest) oldest = s.timestamp;
        const item: ExternalMetricValue = {
          metricName: requested,
          metricLabels: { ...s.labels },
          timestamp: timestampText(s.timestamp),
          value: quantity,
        };
        if (s.windowSeconds !== undefined) item.window = s.windowSeconds;
        return item;
      });
      const memo: AnswerMemo = { rule, series, text: JSON.stringify(externalMetricValueList(items)), sum, oldest };
      if (memo.text.length <= MEMO_ANSWER_LENGTH) parsed.answer = memo;
      return memo;
    };
    if (options.authorize !== undefined) {
      let decided: void | Promise<void>;
      try {
        decided = options.authorize({ caller, namespace, metric: key, rule, selector });
      } catch (err) {
        decide(audit, err);
        throw err;
      }
      if (decided !== undefined) {
        return decided.then(
          () => {
            decide(audit, undefined);
            return readSeries();
          },
          (err: unknown) => {
            decide(audit, err);
            throw err;
          },
        );
      }
      decide(audit, undefined);
    }
    return readSeries();
  }, "values");
  app.get(`${PREFIX}/*`, valuesRead);

  /** Record the policy layer's decision: an authorizer that threw a 403 denied; one that returned allowed. */
  const decide = (audit: ReadAudit, err: unknown): void => {
    if (err === undefined) {
      audit.decision = "allow";
      allowed.n++;
    } else if (err instanceof StatusError && err.code === 403) {
      audit.decision = "deny";
      denied.n++;
    }
  };

  // No route matched (or another method than GET/HEAD): 404 or 405, authenticated like any `/apis` path.
  app.notFound(
    serve((c) =>
      statusResponse(
        c,
        c.req.method === "GET" || c.req.method === "HEAD"
          ? notFound(`the server could not find the requested resource (${c.req.method} ${c.req.path})`)
          : new StatusError(405, `method ${c.req.method} is not allowed; this API is read-only (GET)`),
      ),
    ),
  );

  const readValues = (direct: DirectRead): Response | Promise<Response> => {
    const q = direct.pathAndQuery.indexOf("?");
    const path = q < 0 ? direct.pathAndQuery : direct.pathAndQuery.slice(0, q);
    const vars = new Map<string, unknown>();
    const c: DirectContext = {
      caller: direct.caller,
      target: direct.pathAndQuery,
      req: {
        method: "GET",
        path,
        url: DIRECT_ORIGIN + direct.pathAndQuery,
        raw: { signal: direct.signal },
        header: (name) => (name.toLowerCase() === "x-request-id" ? direct.requestId : undefined),
      },
      env: undefined,
      get: (key) => vars.get(key),
      set: (key, value) => void vars.set(key, value),
    };
    // The values route's handler itself, as Hono would call it for `${PREFIX}/*`: any other path is its 404.
    return valuesRead(c as unknown as Context);
  };
  return { app, readValues };
}

/** The origin of the URLs a {@link DirectRead} is parsed against (never resolved). */
const DIRECT_ORIGIN = "http://in-process.invalid";

/** What the audit record of one request says beyond the request line (filled in as the read goes). */
interface ReadAudit {
  caller: Caller;
  namespace?: string;
  /** the metric name as requested (set once the path names one: the request is a values read) */
  metric?: string;
  /** the `labelSelector` text as sent (empty when none) */
  selector?: string;
  provider?: string;
  decision?: "allow" | "deny";
  /** `hit`: answered from the provider cache without a load; `load`: waited for one (a miss or joined a load in flight) */
  cache?: "hit" | "load";
  /** the value served: the sum of the items (what the HPA compares with its target), as a float */
  value?: number;
  /** age of the oldest item served, seconds */
  ageSeconds?: number;
}

/** Most values-read URLs remembered parsed ({@link ParsedRead}), and their bytes at most (about 5 KiB each at worst). */
const MEMO_READS = 1024;
const MEMO_READS_BYTES = 4 << 20;
/** Longest URL remembered parsed, characters (the HPA's URLs are a few hundred). */
const MEMO_READ_URL_LENGTH = 1024;
/** Longest answer body remembered with its parsed URL, characters. */
const MEMO_ANSWER_LENGTH = 2048;

/**
 * A values read's URL, parsed and checked (`parseRead` in
 * {@link createBridgeApp}): everything in it is a function of the URL
 * alone, so one object serves every read of the same URL.
 */
interface ParsedRead {
  namespace: string;
  /** the metric name as requested */
  requested: string;
  /** its rule lookup key (`decodeMetricName`) */
  key: string;
  /** the `labelSelector` text as sent (empty when none) */
  selectorText: string;
  /** the parsed selector (frozen, shared) */
  selector: Selector;
  /** the last answer built for this URL: its body stands while the readings are the same ones */
  answer?: AnswerMemo;
}

/** A values answer's body and what the per-read figures need, for the readings it was built from. */
interface AnswerMemo {
  rule: MetricRule;
  /** the series the body was built from (labels, value and timestamp compared by {@link sameReadings}) */
  series: readonly Series[];
  /** the `ExternalMetricValueList` JSON */
  text: string;
  /** sum of the values, as a float */
  sum: number;
  /** ms since the epoch: the oldest series timestamp, or the build time when that was earlier */
  oldest: number;
}

/**
 * Whether `now` holds the same readings as `before`, in the same order: the
 * same label object and `Decimal` (both immutable and shared by every hit of
 * one cached reading, `SeriesProvider.peek`), timestamp and window. Fresh
 * objects (a load, a provider without `peek`) never match, so the body is
 * then built again.
 */
function sameReadings(before: readonly Series[], now: readonly Series[]): boolean {
  if (before.length !== now.length) return false;
  for (let i = 0; i < now.length; i++) {
    const a = before[i]!;
    const b = now[i]!;
    if (a.labels !== b.labels || a.value !== b.value || a.timestamp !== b.timestamp || a.windowSeconds !== b.windowSeconds) return false;
  }
  return true;
}

/** Each value as a float for the served-value gauge, made once per reading (values are shared, immutable). */
const numbers = new WeakMap<Decimal, number>();

function numberOf(value: Decimal): number {
  let n = numbers.get(value);
  if (n === undefined) {
    n = Number(formatDecimal(value));
    numbers.set(value, n);
  }
  return n;
}

/**
 * The Quantity text of each value already checked, or null when the HPA could
 * not read it back exactly ({@link fitsMilliValue}). Values are immutable
 * `Decimal` objects that every hit of one cached reading shares, so the
 * bigint work is done once per reading; entries live as long as their value.
 */
const quantities = new WeakMap<Decimal, string | null>();

/** {@link formatTimestamp} of the last few series timestamps (a cached reading's is the same on every hit); at most 1,024. */
const timestamps = new Map<number, string>();

function timestampText(ms: number): string {
  let text = timestamps.get(ms);
  if (text === undefined) {
    text = formatTimestamp(ms);
    if (timestamps.size >= 1024) timestamps.clear();
    timestamps.set(ms, text);
  }
  return text;
}

function quantityOf(value: Decimal): string | null {
  let quantity = quantities.get(value);
  if (quantity === undefined) {
    quantity = fitsMilliValue(value) ? formatQuantity(value) : null;
    quantities.set(value, quantity);
  }
  return quantity;
}

/** Marks a response made by {@link respond}: it already carries `X-Request-Id` (a property, cheaper than a WeakSet entry per answer). */
const STAMPED = Symbol("X-Request-Id set");

/**
 * A JSON response with the headers every answer carries: `Content-Type`,
 * `Cache-Control` — `no-store` (errors, discovery) unless a values answer
 * says how long it stays fresh (see {@link freshFor}) — and
 * `X-Request-Id`, plus `extra` (e.g. `Retry-After`). The headers are a plain
 * object, which @hono/node-server writes without building a `Headers`.
 */
function json(c: Context, body: unknown, code = 200, cacheControl = "no-store", extra?: Record<string, string>): Response {
  const headers: Record<string, string> = { "Content-Type": "application/json", "Cache-Control": cacheControl };
  if (extra !== undefined) Object.assign(headers, extra);
  return respond(c, JSON.stringify(body), code, headers);
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

/**
 * `max-age` of a values answer, whole seconds, from the oldest item's
 * timestamp (ms since the epoch): how long every item stays within its
 * rule's `maxAgeSeconds` — max(0, floor(maxAgeSeconds − age of the oldest
 * item)). The contract with the in-cluster proxy (docs/proxy.md): it stores
 * the answer for at most min(its own TTL, this); `max-age=0` is not stored.
 * `private`: the answer was made for one caller's authorization.
 */
function freshFor(oldest: number, rule: MetricRule, now: number): number {
  return Math.max(0, Math.floor(rule.maxAgeSeconds - (now - oldest) / 1000));
}

/** The Status response for an error, with `Retry-After` where set. */
function statusResponse(c: Context, err: StatusError): Response {
  return json(c, err.toStatus(), err.code, "no-store", err.headers());
}

/**
 * The request target as received, path and query still percent-encoded:
 * Node's raw request target (`c.env.incoming.url`) when served by
 * @hono/node-server — the URL Hono holds has had `.`/`..` segments (also
 * `%2E%2E`) resolved by the WHATWG URL parser, which would hide them from
 * the path parser —, a {@link DirectRead}'s `pathAndQuery`, else the path and
 * query of the request's URL (workerd and the Lambda adapter hand over a URL
 * already parsed; its dot segments are resolved before the bridge sees it).
 */
function rawTarget(c: Context): string {
  const direct = (c as unknown as Partial<DirectContext>).target;
  if (direct !== undefined) return direct;
  const incoming = (c.env as { incoming?: { url?: unknown } } | undefined)?.incoming;
  if (incoming !== undefined && typeof incoming.url === "string") return incoming.url;
  const url = new URL(c.req.url);
  return url.pathname + url.search;
}

/** Most parsed selectors remembered, and the longest text remembered (so at most ~1 MiB of texts). */
const MEMO_SELECTORS = 1024;
const MEMO_SELECTOR_LENGTH = 512;
/**
 * Parsed selectors by text, oldest first: the HPA controller sends the same
 * few selectors every 15 s, and a parse is ~7 µs of a cached read's CPU.
 * Selectors are immutable (frozen), so one may serve many requests.
 */
const parsedSelectors = new Map<string, Selector>();

/**
 * The request's `labelSelector` parsed (empty when absent). Query decoding
 * follows Go's `url.ParseQuery` (`+` is a space), which is how client-go
 * encodes it.
 */
function readSelector(query: URLSearchParams): Selector {
  const values = query.getAll("labelSelector");
  if (values.length > 1) throw badRequest("labelSelector may be given only once");
  const text = values[0] ?? "";
  // apimachinery's lexer ends the string at a NUL byte and would silently
  // drop what follows; no HPA sends control characters, so refuse them.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) {
    throw badRequest("invalid labelSelector: it contains a control character");
  }
  const known = parsedSelectors.get(text);
  if (known !== undefined) return known;
  try {
    const selector = parseSelector(text, { maxLength: MAX_SELECTOR_LENGTH });
    if (text.length <= MEMO_SELECTOR_LENGTH) {
      if (parsedSelectors.size >= MEMO_SELECTORS) parsedSelectors.delete(parsedSelectors.keys().next().value as string);
      parsedSelectors.set(text, Object.freeze(selector));
    }
    return selector;
  } catch (err) {
    if (err instanceof SelectorError) throw badRequest(`invalid labelSelector ${JSON.stringify(truncate(text, 200))}: ${err.message}`);
    throw err;
  }
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** The abort reason of a read that finished (one shared instance: a DOMException captures a stack, ~10 µs, on every read otherwise). */
const REQUEST_FINISHED = new DOMException("the request finished", "AbortError");

/**
 * Run `provider.query` with the request's cancellation: its
 * `QueryRequest.signal` aborts after `deadlineMs` (reason: a `TimeoutError`
 * DOMException) or when `clientSignal` (the incoming request's own signal:
 * @hono/node-server aborts it when the connection closes early; workerd when
 * the client disconnects) aborts. The answer does not wait for a provider
 * that ignores the signal.
 *
 * @throws StatusError 503 (`Retry-After: 1`) at the deadline or when the
 *   client went away; whatever the provider throws otherwise
 */
async function queryWithDeadline(
  provider: Provider,
  request: Omit<Parameters<Provider["query"]>[0], "signal">,
  clientSignal: AbortSignal | undefined,
  deadlineMs: number,
): Promise<Series[]> {
  const { rule } = request;
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException(`the bridge's request deadline of ${deadlineMs} ms passed`, "TimeoutError")),
    deadlineMs,
  );
  const onClientGone = () => controller.abort(clientSignal?.reason ?? new DOMException("the client went away", "AbortError"));
  if (clientSignal?.aborted) onClientGone();
  else clientSignal?.addEventListener("abort", onClientGone, { once: true });
  const aborted = abortedPromise(controller.signal);
  try {
    return await Promise.race([provider.query({ ...request, signal: controller.signal }), aborted.promise]);
  } catch (err) {
    if (controller.signal.aborted && !(err instanceof StatusError && err.code !== 503)) {
      const reason = controller.signal.reason as { name?: string } | undefined;
      if (reason?.name === "TimeoutError" && !clientSignal?.aborted) {
        throw serviceUnavailable(`metric ${rule.name}: provider ${rule.provider} did not answer within ${deadlineMs} ms`, undefined, undefined, err);
      }
      throw serviceUnavailable(`metric ${rule.name}: the client went away before provider ${rule.provider} answered`, undefined, undefined, err);
    }
    throw err;
  } finally {
    clearTimeout(timer);
    aborted.dispose();
    clientSignal?.removeEventListener("abort", onClientGone);
    // Nothing waits for this read any more: cancel what is still running.
    if (!controller.signal.aborted) controller.abort(REQUEST_FINISHED);
  }
}
