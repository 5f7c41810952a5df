/**
 * Google API failures as `metav1.Status`, the same for the gRPC client and
 * the REST transport: both report a {@link GoogleApiError} carrying the
 * canonical code name (google.rpc.Code, `google/rpc/code.proto`), which REST
 * returns as `error.status` and gRPC as the numeric status code.
 */
import { internalError, notFound, serviceUnavailable, type StatusError } from "../../k8s/status.ts";
import { THROTTLED_RETRY_AFTER_SECONDS } from "../backoff.ts";

/** google.rpc.Code names by number (`google/rpc/code.proto`). */
export const RPC_CODES = [
  "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
  "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
] as const;

/** A failed Google API call, normalized over transports. */
export class GoogleApiError extends Error {
  override name = "GoogleApiError";
  /** canonical code name, e.g. `PERMISSION_DENIED` */
  readonly code: string;
  /** HTTP status when the call went over REST */
  readonly httpStatus: number | undefined;
  /**
   * How long Google asked us to wait, seconds: `google.rpc.RetryInfo.retry_delay`
   * from the error details (`google/rpc/error_details.proto`), else the REST
   * answer's `Retry-After`; undefined when it gave none.
   */
  readonly retryDelaySeconds: number | undefined;

  constructor(code: string, message: string, httpStatus?: number, options?: { cause?: unknown; retryDelaySeconds?: number | undefined }) {
    super(message, options);
    this.code = code;
    this.httpStatus = httpStatus;
    this.retryDelaySeconds = options?.retryDelaySeconds;
  }
}

/**
 * The `google.rpc.RetryInfo.retry_delay` among an error's details, seconds.
 * Accepts both wire forms: REST's proto3 JSON (`{"@type":
 * "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}`) and the
 * gRPC client's decoded messages (google-gax `GoogleError.statusDetails`,
 * `retryDelay: {seconds, nanos}` with seconds a Long, string or number).
 */
export function retryDelayOf(details: unknown): number | undefined {
  if (!Array.isArray(details)) return undefined;
  for (const d of details) {
    if (d === null || typeof d !== "object") continue;
    const type = (d as { "@type"?: unknown })["@type"];
    if (typeof type === "string" && !type.endsWith("google.rpc.RetryInfo")) continue;
    const delay = (d as { retryDelay?: unknown }).retryDelay;
    if (typeof delay === "string") {
      const m = /^(\d+(?:\.\d+)?)s$/.exec(delay);
      if (m) return Number(m[1]);
    } else if (delay !== null && typeof delay === "object") {
      const { seconds, nanos } = delay as { seconds?: unknown; nanos?: unknown };
      const s = Number(String(seconds ?? 0));
      const n = typeof nanos === "number" ? nanos : 0;
      if (Number.isFinite(s)) return s + n / 1e9;
    }
  }
  return undefined;
}

/**
 * A response body parsed as JSON, or `undefined` when it is not JSON (e.g.
 * an HTML error page from a proxy); callers then validate it with their schema.
 */
export function jsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The canonical code of an HTTP status without a JSON error body (google.rpc.Code mapping table). */
export function codeForHttpStatus(status: number): string {
  switch (status) {
    case 400:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 409:
      return "ABORTED";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 501:
      return "UNIMPLEMENTED";
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return status >= 500 ? "INTERNAL" : "UNKNOWN";
  }
}

/** google-auth-library's message when Application Default Credentials found no identity (`googleauth.ts` `getApplicationDefaultAsync`). */
const NO_CREDENTIALS = /Could not load the default credentials/;

/**
 * Classify a Google API failure:
 * - `UNAUTHENTICATED`, `PERMISSION_DENIED` → 500 naming the provider (no retry helps);
 *   when no credentials were found at all, the message says nothing was sent
 * - `INVALID_ARGUMENT`, `FAILED_PRECONDITION` → 500: the rule's query is wrong
 * - `NOT_FOUND` → 404 (project or metric type unknown to Cloud Monitoring)
 * - `RESOURCE_EXHAUSTED` (read quota, HTTP 429) → 503 with Google's own
 *   delay (`RetryInfo`/`Retry-After`, clamped to [1 s, 30 s]) as back-off,
 *   else {@link THROTTLED_RETRY_AFTER_SECONDS}
 * - timeouts, aborts, network errors, everything else → 503 with back-off
 *   Google's delay when given, else 1 s
 *
 * @param what a short description of the call, e.g. `ListTimeSeries for metric pubsub_backlog`
 */
export function googleErrorToStatus(providerName: string, what: string, err: unknown): StatusError {
  const where = `provider ${providerName}: ${what}`;
  if (err instanceof GoogleApiError) {
    // The canonical code only (not the HTTP status): the same failure reads the same over gRPC and REST.
    const detail = `(${err.code}): ${err.message}`;
    switch (err.code) {
      case "UNAUTHENTICATED":
      case "PERMISSION_DENIED":
        // google-auth-library found no identity at all (Application Default Credentials:
        // no GOOGLE_APPLICATION_CREDENTIALS, no metadata server): nothing reached Google.
        if (NO_CREDENTIALS.test(err.message)) {
          return internalError(`${where} failed: no Google credentials were found, so nothing was sent to Google ${detail}`, undefined, err);
        }
        return internalError(`${where} failed: Google refused the bridge's credentials ${detail}`, undefined, err);
      case "INVALID_ARGUMENT":
      case "FAILED_PRECONDITION":
        return internalError(`${where} failed: Cloud Monitoring says the query is invalid ${detail}`, undefined, err);
      case "NOT_FOUND":
        return notFound(`${where} failed: not found ${detail}`, { kind: "timeseries" });
      case "RESOURCE_EXHAUSTED":
        return serviceUnavailable(`${where} was throttled by Google ${detail}`, err.retryDelaySeconds ?? THROTTLED_RETRY_AFTER_SECONDS, undefined, err);
      case "DEADLINE_EXCEEDED":
      case "CANCELLED":
        return serviceUnavailable(`${where} timed out ${detail}`, err.retryDelaySeconds, undefined, err);
      default:
        return serviceUnavailable(`${where} failed ${detail}`, err.retryDelaySeconds, undefined, err);
    }
  }
  const e = (err ?? {}) as { name?: string; message?: string };
  if (e.name === "TimeoutError" || e.name === "AbortError") return serviceUnavailable(`${where} timed out`, undefined, undefined, err);
  return serviceUnavailable(`${where} failed: backend unreachable (${e.name ?? "Error"}): ${e.message ?? String(err)}`, undefined, undefined, err);
}
