/**
 * Back-off for failing backends, shared by every provider: a failed read is
 * remembered per series for as long as the backend asked us to wait, so a
 * throttled or failing backend is not asked again by every HPA read (issue
 * 10, item 2), and the same hint reaches the in-cluster proxy as
 * `Retry-After`.
 *
 * - Throttling with a hint: the cloud's own delay — AWS `Retry-After`
 *   (seconds or HTTP-date, RFC 9110 §10.2.3) or `x-amz-retry-after` (ms), as
 *   the AWS SDK's retry strategy reads them (`@smithy/core`
 *   `parseRetryAfterHeader`); Google `google.rpc.RetryInfo.retry_delay`
 *   (`google/rpc/error_details.proto`) or the HTTP `Retry-After` of the REST
 *   API — clamped to [1 s, 30 s] (`shared/k8s/status.ts` `clampRetryAfter`).
 * - Throttling without a hint: {@link THROTTLED_RETRY_AFTER_SECONDS}.
 * - Any other backend failure (503): 1 s.
 * - Answers no wait fixes (400, 404, 500): not cached.
 *
 * Failures of a load that was aborted (deadline, client gone) are never
 * cached (`shared/cache/coalescing.ts`).
 */
import { MIN_RETRY_AFTER_SECONDS, StatusError } from "../k8s/status.ts";

/**
 * Back-off, seconds, when a backend throttles without saying how long to
 * wait: the AWS SDK's standard retry strategy waits up to 20 s between
 * throttled attempts (`@smithy/util-retry` `MAXIMUM_RETRY_DELAY`); 5 s keeps
 * the series off the backend for one third of an HPA sync period.
 */
export const THROTTLED_RETRY_AFTER_SECONDS = 5;

/**
 * `CoalescingCache` `failureTtlMs` for provider caches: how long a failed
 * read is re-used for the same series, ms — the StatusError's back-off hint
 * for 429 and 503, else 0 (not cached).
 */
export function backendFailureTtlMs(error: unknown): number {
  if (!(error instanceof StatusError) || (error.code !== 503 && error.code !== 429)) return 0;
  return (error.retryAfterSeconds ?? MIN_RETRY_AFTER_SECONDS) * 1000;
}

/**
 * Seconds a `Retry-After` header value asks to wait: delta-seconds or an
 * HTTP-date (RFC 9110 §10.2.3), measured from `now` (ms since epoch).
 * Undefined when absent or unreadable; never negative.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, (date - now) / 1000);
}

/**
 * The back-off hint of an AWS SDK v3 error, seconds: from the HTTP response
 * the SDK attaches as the hidden `$response` (`@smithy/core`
 * `deserializerMiddleware`), headers `retry-after` (seconds or HTTP-date) or
 * `x-amz-retry-after` (ms). Undefined when the answer gave none.
 */
export function awsRetryAfterSeconds(err: unknown, now: number): number | undefined {
  const headers = (err as { $response?: { headers?: Record<string, string | undefined> } } | null)?.$response?.headers;
  if (headers === undefined || headers === null) return undefined;
  let retryAfter: string | undefined;
  let amz: string | undefined;
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (lower === "retry-after") retryAfter = value;
    else if (lower === "x-amz-retry-after") amz = value;
  }
  const seconds = parseRetryAfter(retryAfter, now);
  if (seconds !== undefined) return seconds;
  if (amz !== undefined && /^\d+$/.test(amz.trim())) return Number(amz) / 1000;
  return undefined;
}
