/**
 * The instant-query client of the Prometheus HTTP API
 * (https://prometheus.io/docs/prometheus/latest/querying/api/, "Instant
 * queries"; server side `web/api/v1/api.go` `query`), over `fetch`: runs on
 * Node, Lambda and the Worker alike.
 *
 * `POST {url}/api/v1/query` with a form body (`query`, `timeout`,
 * `lookback_delta`, both in seconds, and `max_lookback` for VictoriaMetrics; no `time`: the server's now). The answer is the API's
 * envelope — `{"status":"success","data":{"resultType":"vector","result":
 * [{"metric":{…},"value":[<unix seconds>,"<value>"]}]},"warnings":[…],
 * "infos":[…]}` (VictoriaMetrics cluster adds `"isPartial":true` when a
 * storage node did not answer: a partial answer) or `{"status":"error","errorType":"bad_data","error":"…"}`
 * (`api.go` `response`, `errorType`) — read bounded ({@link MAX_ANSWER_BYTES})
 * and checked whole: anything else is an error, never a value.
 *
 * Errors are {@link PrometheusApiError}s, turned into Statuses by
 * {@link prometheusErrorToStatus}.
 */
import * as z from "../../config/zod.ts";
import { readBounded } from "../../bounded-body.ts";
import { internalError, serviceUnavailable, type StatusError } from "../../k8s/status.ts";
import { parseRetryAfter, THROTTLED_RETRY_AFTER_SECONDS } from "../backoff.ts";

/** Largest answer read, bytes (a vector of a few hundred series is a few tens of KiB). */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/** One sample of an instant vector as the API returned it. */
export interface VectorSample {
  /** the series' labels (`__name__` included when the expression kept it) */
  metric: Record<string, string>;
  /** the sample's time, ms since epoch (for an instant query: the evaluation time) */
  time: number;
  /** the value text as the server wrote it (`"12"`, `"1e+21"`, `"NaN"`, `"+Inf"`); undefined for a native histogram sample */
  value: string | undefined;
}

/** One instant query. */
export interface InstantQuery {
  /** the HTTP API base URL, e.g. `http://prometheus:9090` or `https://mimir/prometheus` */
  url: string;
  /** the PromQL expression */
  query: string;
  /** sent as `timeout` (the server's own evaluation limit), seconds */
  timeoutSeconds: number;
  /** sent as `lookback_delta`, seconds; undefined: the server's default (5 m) */
  lookbackSeconds?: number | undefined;
  /** also send `lookbackSeconds` as `max_lookback` (VictoriaMetrics reads only that name) */
  maxLookback?: boolean | undefined;
  /** extra request headers (authorization, `X-Scope-OrgID`) */
  headers: Readonly<Record<string, string>>;
  /** the call's signal (the read's, combined with the provider's `timeoutSeconds`) */
  signal: AbortSignal;
  /** the `fetch` to call (default the global one); a flavour's adds its authorization (`./gmp.ts`) */
  fetch?: typeof fetch | undefined;
  /**
   * headers computed over the exact request sent (a flavour's request
   * signature, e.g. `./amp.ts`), merged over `headers`; may throw (no
   * credentials), and then nothing is sent
   */
  sign?: ((request: { url: string; headers: Readonly<Record<string, string>>; body: string }, signal: AbortSignal) => Promise<Record<string, string>>) | undefined;
}

/**
 * A failed instant query: the HTTP status (0 when no HTTP answer was read
 * whole), the API's `errorType` (`bad_data`, `execution`, `timeout`,
 * `canceled`, `internal`, `unavailable`, `not_found`; `api.go`) or one of
 * ours — `http` (a non-2xx answer without the envelope; an AWS front door's
 * `x-amzn-ErrorType` instead when it names one), `invalid_answer` (not the API's envelope), `too_large`, `partial`
 * (a warning, or an info that says data was left out: {@link partialNotes})
 * — and the server's `Retry-After`, seconds.
 */
export class PrometheusApiError extends Error {
  readonly httpStatus: number;
  readonly errorType: string;
  readonly retryAfterSeconds: number | undefined;

  constructor(httpStatus: number, errorType: string, message: string, retryAfterSeconds?: number) {
    super(message);
    this.name = "PrometheusApiError";
    this.httpStatus = httpStatus;
    this.errorType = errorType;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

const annotations = z.optional(z.array(z.string()));
const sampleSchema = z.looseObject({
  metric: z.record(z.string(), z.string()),
  value: z.optional(z.tuple([z.number(), z.string()])),
  histogram: z.optional(z.tuple([z.number(), z.unknown()])),
});
const successSchema = z.looseObject({
  status: z.literal("success"),
  data: z.looseObject({ resultType: z.string(), result: z.unknown() }),
  warnings: annotations,
  infos: annotations,
  /** VictoriaMetrics cluster: true when a storage node did not answer (docs/victoriametrics/Cluster-VictoriaMetrics.md) */
  isPartial: z.optional(z.boolean()),
});
const errorSchema = z.looseObject({
  status: z.literal("error"),
  errorType: z.string(),
  error: z.string(),
});

/** An info annotation that says the answer leaves data out (Prometheus `util/annotations`: "ignored histograms …"; Thanos/Mimir: partial responses). */
const PARTIAL_INFO = /partial|incomplete|ignored|truncat|dropped/i;

/**
 * The annotations of a success answer that make it unusable: every warning
 * (Prometheus `util/annotations` PromQL warnings say the result may be wrong,
 * e.g. a mix of histograms and floats; Thanos and Mimir report a partial
 * response as a warning) and the infos that say data was left out
 * ({@link PARTIAL_INFO}). Other infos are advice about the query (e.g.
 * "metric might not be a counter" for `rate()` over a name without
 * `_total`) and leave the answer whole, so they do not fail the read.
 */
export function partialNotes(warnings: readonly string[] | undefined, infos: readonly string[] | undefined): string[] {
  return [...(warnings ?? []), ...(infos ?? []).filter((info) => PARTIAL_INFO.test(info))];
}

/** Text of a body for a message: its first 200 characters. */
function excerpt(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/**
 * Run one instant query and return its instant vector.
 *
 * @throws PrometheusApiError for an HTTP or API error, an answer that is not
 *   a vector in the API's envelope, an answer over {@link MAX_ANSWER_BYTES},
 *   or an answer that says it may be partial or wrong ({@link partialNotes}:
 *   `partial`, so no value of it is used)
 * @throws the fetch's own error (network failure; a `TimeoutError` or the
 *   signal's reason when `signal` aborts)
 */
export async function instantQuery(q: InstantQuery): Promise<VectorSample[]> {
  const form = new URLSearchParams();
  form.set("query", q.query);
  // Durations as plain seconds: Prometheus reads a float first (`web/api/v1/api.go` `parseDuration`);
  // its duration syntax has no fractions ("0.5s" is refused), and a timeoutSeconds may be 0.5.
  form.set("timeout", String(q.timeoutSeconds));
  if (q.lookbackSeconds !== undefined) {
    form.set("lookback_delta", String(q.lookbackSeconds));
    // VictoriaMetrics ignores lookback_delta and reads max_lookback (a duration or seconds); Prometheus, Thanos and Mimir ignore max_lookback
    if (q.maxLookback) form.set("max_lookback", String(q.lookbackSeconds));
  }
  const url = `${q.url.replace(/\/+$/, "")}/api/v1/query`;
  const sent = form.toString();
  const headers = { ...q.headers, "content-type": "application/x-www-form-urlencoded", accept: "application/json" };
  const response = await (q.fetch ?? fetch)(url, {
    method: "POST",
    headers: q.sign !== undefined ? { ...headers, ...(await q.sign({ url, headers, body: sent }, q.signal)) } : headers,
    body: sent,
    signal: q.signal,
  });
  const retryAfter = parseRetryAfter(response.headers.get("retry-after"), Date.now());
  const bytes = await readBounded(response.body, MAX_ANSWER_BYTES, () => new PrometheusApiError(response.status, "too_large", `the answer is larger than ${MAX_ANSWER_BYTES} bytes`, retryAfter));
  const text = new TextDecoder().decode(bytes);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const failed = errorSchema.safeParse(body);
  if (failed.success) throw new PrometheusApiError(response.status, failed.data.errorType, failed.data.error, retryAfter);
  // an AWS front door names its error in x-amzn-ErrorType ("AccessDeniedException", "InvalidSignatureException:…")
  const kind = response.headers.get("x-amzn-errortype")?.split(":")[0] || "http";
  if (!response.ok) throw new PrometheusApiError(response.status, kind, `HTTP ${response.status}: ${excerpt(text)}`, retryAfter);
  const ok = successSchema.safeParse(body);
  if (!ok.success) throw new PrometheusApiError(response.status, "invalid_answer", `the answer is not the Prometheus API's success envelope: ${excerpt(text)}`);
  const notes = partialNotes(ok.data.warnings, ok.data.infos);
  if (ok.data.isPartial === true) notes.unshift("the server marked the answer isPartial (a VictoriaMetrics storage node did not answer)");
  if (notes.length > 0) throw new PrometheusApiError(response.status, "partial", `partial answer: ${notes.map(excerpt).join("; ")}`, retryAfter);
  if (ok.data.data.resultType !== "vector") {
    throw new PrometheusApiError(response.status, "invalid_answer", `the answer is a ${ok.data.data.resultType}, not an instant vector`);
  }
  const result = z.array(sampleSchema).safeParse(ok.data.data.result);
  if (!result.success) throw new PrometheusApiError(response.status, "invalid_answer", `the vector's samples are not [time, "value"] pairs with labels: ${excerpt(text)}`);
  return result.data.map((s) => {
    if (s.value === undefined && s.histogram === undefined) {
      throw new PrometheusApiError(response.status, "invalid_answer", `a sample has neither value nor histogram: ${excerpt(JSON.stringify(s))}`);
    }
    const [time, value] = s.value ?? [s.histogram![0], undefined];
    return { metric: s.metric, time: Math.round(time * 1000), value };
  });
}

/**
 * The Status of a failed instant query (`what` names the provider, rule and
 * query):
 * - `bad_data` (HTTP 400): 500 — the admin's query is wrong, no retry fixes it;
 * - HTTP 401/403: 500 with a hint to check `auth` and `tenant`;
 * - HTTP 404: 500 — `url` is not a Prometheus HTTP API base URL;
 * - HTTP 429: 503 with the server's `Retry-After`, else
 *   {@link THROTTLED_RETRY_AFTER_SECONDS};
 * - `execution` (422), `timeout`/`canceled` (503), other HTTP and server
 *   errors, a partial, unreadable or too large answer: 503 with the
 *   server's `Retry-After`, else 1 s;
 * - a deadline or abort (`TimeoutError`, `AbortError`): 503 "timed out";
 * - anything else (network): 503 "backend unreachable".
 */
export function prometheusErrorToStatus(what: string, err: unknown): StatusError {
  if (err instanceof PrometheusApiError) {
    const detail = `(${err.errorType}${err.httpStatus ? `, HTTP ${err.httpStatus}` : ""}): ${err.message}`;
    if (err.errorType === "bad_data" || err.httpStatus === 400) {
      return internalError(`${what} failed: Prometheus refused the query; the rule's series or template is wrong ${detail}`, undefined, err);
    }
    if (err.httpStatus === 401 || err.httpStatus === 403) {
      return internalError(`${what} failed: Prometheus refused the bridge's credentials; check the provider's auth (the environment variables it names) and tenant ${detail}`, undefined, err);
    }
    if (err.httpStatus === 404) {
      return internalError(`${what} failed: no Prometheus HTTP API at the provider's url (it must be the base URL, without /api/v1) ${detail}`, undefined, err);
    }
    if (err.httpStatus === 429) return serviceUnavailable(`${what} was throttled ${detail}`, err.retryAfterSeconds ?? THROTTLED_RETRY_AFTER_SECONDS, undefined, err);
    if (err.errorType === "partial") return serviceUnavailable(`${what} failed: ${err.message}; no value is reported from it`, err.retryAfterSeconds, undefined, err);
    return serviceUnavailable(`${what} failed ${detail}`, err.retryAfterSeconds, undefined, err);
  }
  const e = (err ?? {}) as { name?: string; message?: string; cause?: { message?: string } };
  if (e.name === "TimeoutError" || e.name === "AbortError") return serviceUnavailable(`${what} timed out`, undefined, undefined, err);
  const cause = e.cause?.message !== undefined ? ` (${e.cause.message})` : "";
  return serviceUnavailable(`${what} failed: backend unreachable (${e.name ?? "Error"}): ${e.message ?? String(err)}${cause}`, undefined, undefined, err);
}
