/**
 * The bridge's values read as one typed function:
 * `readValues({ api, namespace, metric, labelSelector, caller, signal, requestId })`
 * → {@link ValuesAnswer} | StatusError, answered synchronously on a cache hit.
 * The Hono routes of every runtime (shared/app.ts) and the proxy's
 * in-process backend (shared/proxy/forward/in-process.ts) call it directly: no
 * `Request`, no Hono `Context`, no JSON parsed back.
 *
 * The steps, in order (each failure is a Status, never a value):
 * 1. the metric name and the `labelSelector` checked and parsed, once per
 *    distinct read ({@link ValuesQuery}, interned: 400);
 * 2. the metric rule (404 when none defines the metric);
 * 3. the policy decision (`authorize`, 403), counted and audited;
 * 4. the provider's cache without I/O (`Provider.peek`), else the provider
 *    read under the request deadline (503 at the deadline or when the
 *    caller went away);
 * 5. the answer (shared/values/answer.ts: 503 for no series or a stale one,
 *    500 for a value the HPA cannot read back);
 * 6. one audit record and the request metrics.
 */
import type { BridgeConfig } from "../config/config.ts";
import { BoundedMap } from "../cache/bounded-map.ts";
import { abortedPromise, REQUEST_DEADLINE_MS } from "../deadline.ts";
import { MAX_SELECTOR_LENGTH, parseSelector, SelectorError, type Selector } from "../k8s/selector.ts";
import { badRequest, EXTERNAL_METRICS_GROUP, notFound, serviceUnavailable, StatusError, toStatusError } from "../k8s/status.ts";
import { externalMetricsPath } from "../k8s/request-path.ts";
import { metricName } from "../metric-name.ts";
import type { LogRecord } from "../observability/log.ts";
import { errorKind, type BridgeMetrics, type RequestCounter, type Served } from "../observability/metrics.ts";
import type { MetricRule, PlanRequest, Provider, Series } from "../providers/types.ts";
import { answerFor, MEMO_ANSWER_LENGTH, type ValuesAnswer } from "./answer.ts";
import type { AuthorizationRequest, ValuesRead } from "./request.ts";

/** What {@link createValuesReader} is built with (a built bridge's parts: shared/app.ts `createBridgeApp`). */
export interface ValuesReaderOptions {
  config: BridgeConfig;
  /** provider instances by name (every rule's provider must be there) */
  providers: ReadonlyMap<string, Provider>;
  /** clock, ms since the epoch (staleness, `max-age`) */
  now: () => number;
  /** the audit record's sink */
  log: (record: LogRecord) => void;
  metrics: BridgeMetrics;
  /** counts each read in `requests_total{kind="values"}` and its duration (shared with the app's other routes) */
  countRequest: RequestCounter;
  /** whole-read deadline, ms (the provider's `signal` aborts then; the answer is a 503) */
  deadlineMs?: number;
  /** the policy decision: throws StatusError 403 to deny (default: everything is allowed) */
  authorize?: (request: AuthorizationRequest) => void | Promise<void>;
}

/** A values read's outcome: the answer, or the Status to send. */
export type ValuesOutcome = ValuesAnswer | StatusError;

/**
 * The bridge's values read (see the module doc). Never throws: every failure,
 * including one this code did not foresee (logged as `unhandled error`), is
 * returned as a StatusError. Synchronous when the provider's cache answers
 * (`Provider.peek`) and the policy decides synchronously.
 */
export type ReadValues = (read: ValuesRead) => ValuesOutcome | Promise<ValuesOutcome>;

/**
 * Build the bridge's values read for one config and its providers.
 *
 * Every read writes one audit record to `log`:
 * `{ msg: "request", requestId, method: "GET", path, user, groups, namespace,
 * metric, selector, code, durationMs }` plus, when known, `provider`,
 * `decision` (allow | deny), `cache` (hit | load), `value` and `ageSeconds`
 * (when served), `errorKind` and `error` (when it failed), at info (2xx),
 * warn (4xx) or error (5xx).
 *
 * @throws Error when a metric rule names a provider that was not built
 */
export function createValuesReader(options: ValuesReaderOptions): ReadValues {
  const { config, providers, now, log, metrics, countRequest, authorize } = options;
  const deadlineMs = options.deadlineMs ?? REQUEST_DEADLINE_MS;
  const allowed = metrics.policy.get("bridge", "allow");
  const denied = metrics.policy.get("bridge", "deny");
  /** each rule's served-value cell */
  const servedCells = new Map<MetricRule, Served>();
  const rules = new Map<string, MetricRule>();
  for (const rule of config.metrics) {
    if (!providers.has(rule.provider)) throw new Error(`metric ${rule.name}: provider ${rule.provider} was not built`);
    rules.set(rule.key, rule);
  }
  /** Distinct reads parsed before, by namespace, metric and selector text ({@link ValuesQuery}). */
  const queries = new BoundedMap<string, ValuesQuery>({
    maxEntries: MEMO_QUERIES,
    maxBytes: MEMO_QUERIES_BYTES,
    // the key and selector texts (two bytes per character at most), the answer's text at its largest, the objects
    sizeOf: (key, query) => 2 * (key.length + query.selectorText.length) + 2 * MEMO_ANSWER_LENGTH + 512,
  });

  /** The interned query of a read's parts (remembered when its selector text is short). @throws StatusError 400 */
  const queryOf = (read: ValuesRead): ValuesQuery => {
    const id = `${read.namespace}\u0000${read.metric}\u0000${read.labelSelector}`;
    const known = queries.get(id);
    if (known !== undefined) return known;
    const { requested, key } = metricName(read.metric);
    const query: ValuesQuery = { namespace: read.namespace, requested, key, selectorText: read.labelSelector, selector: selectorOf(read.labelSelector), answer: undefined };
    if (id.length <= MEMO_QUERY_LENGTH) queries.set(id, query);
    return query;
  };

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

  /** The answer for the series read, remembered on the query, with the served-value gauge and the audit figures. */
  const answer = (query: ValuesQuery, rule: MetricRule, audit: ReadAudit, series: Series[]): ValuesAnswer => {
    const at = now();
    const built = answerFor(rule, query.requested, series, at, query.answer);
    if (built !== query.answer && built.text.length <= MEMO_ANSWER_LENGTH) query.answer = built;
    let served = servedCells.get(rule);
    if (served === undefined) servedCells.set(rule, (served = metrics.served.get(rule.name)));
    served.value = built.sum;
    served.oldestMs = built.oldest;
    audit.value = built.sum;
    audit.ageSeconds = (at - built.oldest) / 1000;
    return built;
  };

  /** Steps 4–5: the provider's cache, else a read under the deadline. */
  const readSeries = (query: ValuesQuery, rule: MetricRule, provider: Provider, audit: ReadAudit, parts: ValuesRead): ValuesAnswer | Promise<ValuesAnswer> => {
    const request: PlanRequest = { rule, selector: query.selector, namespace: query.namespace };
    // A cache hit is answered synchronously: no deadline to arm, nothing to cancel, no promise.
    const cached = provider.peek?.(request);
    if (cached !== undefined) {
      audit.cache = "hit";
      return answer(query, rule, audit, cached);
    }
    audit.cache = "load";
    return queryWithDeadline(provider, request, parts.signal, deadlineMs).then((series) => answer(query, rule, audit, series));
  };

  /** Steps 1–5 (may throw a StatusError). */
  const read = (parts: ValuesRead, audit: ReadAudit): ValuesAnswer | Promise<ValuesAnswer> => {
    const query = queryOf(parts);
    audit.metric = query.requested;
    const rule = rules.get(query.key);
    if (rule === undefined) {
      throw notFound(`external metric "${query.requested}" is not defined by this bridge`, {
        name: query.requested,
        group: EXTERNAL_METRICS_GROUP,
        kind: "externalmetrics",
      });
    }
    const provider = providers.get(rule.provider)!;
    audit.provider = rule.provider;
    if (authorize !== undefined) {
      let decided: void | Promise<void>;
      try {
        decided = authorize({ caller: parts.caller, namespace: query.namespace, metric: query.key, rule, selector: query.selector });
      } catch (err) {
        decide(audit, err);
        throw err;
      }
      if (decided !== undefined) {
        return decided.then(
          () => {
            decide(audit, undefined);
            return readSeries(query, rule, provider, audit, parts);
          },
          (err: unknown) => {
            decide(audit, err);
            throw err;
          },
        );
      }
      decide(audit, undefined);
    }
    return readSeries(query, rule, provider, audit, parts);
  };

  /** Step 6: the audit record and the request metrics, then the outcome. */
  const finish = (parts: ValuesRead, audit: ReadAudit, started: number, outcome: ValuesAnswer | unknown, failed: boolean): ValuesOutcome => {
    let failure: StatusError | undefined;
    if (failed) {
      failure = toStatusError(outcome);
      if (!(outcome instanceof StatusError)) log({ level: "error", msg: "unhandled error", error: String(outcome) });
    }
    const code = failure?.code ?? 200;
    const seconds = (performance.now() - started) / 1000;
    countRequest("values", code, seconds);
    const record: LogRecord = {
      level: code >= 500 ? "error" : code >= 400 ? "warn" : "info",
      msg: "request",
      requestId: parts.requestId,
      method: "GET",
      path: parts.path ?? externalMetricsPath(parts),
      user: parts.caller.user,
      groups: parts.caller.groups,
      namespace: parts.namespace,
      metric: audit.metric ?? parts.metric,
      selector: parts.labelSelector,
      code,
      durationMs: Math.round(seconds * 1e6) / 1e3,
    };
    if (audit.provider !== undefined) record["provider"] = audit.provider;
    if (audit.decision !== undefined) record["decision"] = audit.decision;
    if (audit.cache !== undefined) record["cache"] = audit.cache;
    if (failure === undefined) {
      record["value"] = audit.value;
      record["ageSeconds"] = audit.ageSeconds;
    } else {
      record["errorKind"] = errorKind(failure);
      record["error"] = failure.message;
    }
    log(record);
    return failure ?? (outcome as ValuesAnswer);
  };

  return (parts) => {
    const started = performance.now();
    const audit: ReadAudit = {};
    let result: ValuesAnswer | Promise<ValuesAnswer>;
    try {
      result = read(parts, audit);
    } catch (err) {
      return finish(parts, audit, started, err, true);
    }
    if (result instanceof Promise) {
      return result.then(
        (value) => finish(parts, audit, started, value, false),
        (err: unknown) => finish(parts, audit, started, err, true),
      );
    }
    return finish(parts, audit, started, result, false);
  };
}

/** Most distinct reads remembered parsed ({@link ValuesQuery}), and their bytes at most (about 5 KiB each at worst). */
const MEMO_QUERIES = 1024;
const MEMO_QUERIES_BYTES = 4 << 20;
/** Longest read (namespace, metric and selector text) remembered parsed, characters. */
const MEMO_QUERY_LENGTH = 1024;

/**
 * One distinct read — namespace, metric name and selector text — checked and
 * parsed: everything in it is a function of those three, so one object
 * serves every read of them, and the selector object is the same for every
 * such read (the policy memo, shared/bridge.ts `rememberAllowed`, keys on it).
 */
interface ValuesQuery {
  readonly namespace: string;
  /** the metric name as requested */
  readonly requested: string;
  /** its rule lookup key (lowercased, `/` for `|`: shared/metric-name.ts) */
  readonly key: string;
  /** the `labelSelector` text as sent (empty when none) */
  readonly selectorText: string;
  /** the parsed selector (frozen, shared) */
  readonly selector: Selector;
  /** the last answer built for this read: it stands while the readings are the same ones */
  answer: ValuesAnswer | undefined;
}

/** What the audit record says beyond the read's parts (filled in as the read goes). */
interface ReadAudit {
  /** the metric name as requested, once checked */
  metric?: string;
  provider?: string;
  decision?: "allow" | "deny";
  /** `hit`: answered from the provider cache without a load; `load`: waited for one (a miss or joined a load in flight) */
  cache?: "hit" | "load";
  /** the value served: the sum of the items, as a float */
  value?: number;
  /** age of the oldest item served, seconds */
  ageSeconds?: number;
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
 * A `labelSelector` text parsed (apimachinery `labels.Parse`, shared/k8s/selector.ts).
 *
 * @throws StatusError 400 for a control character (apimachinery's lexer ends
 *   the string at a NUL byte and would silently drop what follows; no HPA
 *   sends one), a text longer than `MAX_SELECTOR_LENGTH` or one that does not parse
 */
export function selectorOf(text: string): Selector {
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
 * DOMException) or when `clientSignal` (the read's own signal: the incoming
 * request's, which @hono/node-server aborts when the connection closes early
 * and workerd when the client disconnects; the proxy's call signal in
 * process) aborts. The answer does not wait for a provider that ignores the
 * signal.
 *
 * @throws StatusError 503 (`Retry-After: 1`) at the deadline or when the
 *   client went away; whatever the provider throws otherwise
 */
export async function queryWithDeadline(
  provider: Provider,
  request: PlanRequest,
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

