/**
 * `metav1.Status` failures and the typed error that carries them.
 *
 * Every failure the bridge answers is one of these objects; nothing at a call
 * site builds a Status by hand. Modelled on custom-metrics-apiserver's
 * `pkg/provider/errors.go` and apimachinery's `pkg/api/errors/errors.go`
 * (`NewBadRequest`, `NewNotFound`, `NewForbidden`, `NewTooManyRequests`,
 * `NewServiceUnavailable`, `NewInternalError`).
 *
 * Wire shape (apimachinery `pkg/apis/meta/v1/types.go`, type `Status`):
 * `{kind:"Status", apiVersion:"v1", metadata:{}, status:"Failure", message,
 *   reason, details?, code}`. client-go only reads the body when `kind` is
 * `Status` and `status` is `Failure`, and retries 429/5xx only when a
 * `Retry-After` header is present (client-go `rest/request.go`); the
 * bridge's `Retry-After` is a back-off hint for the in-cluster proxy, which
 * never passes it on to the HPA (see {@link MAX_RETRY_AFTER_SECONDS}).
 */

/** `metav1.StatusReason` values the bridge uses, keyed by their HTTP code. */
export const StatusReasons = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  413: "RequestEntityTooLarge",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
} as const;

/** An HTTP status code the bridge may answer with a Status body. */
export type StatusCode = keyof typeof StatusReasons;

/** `metav1.StatusDetails` (subset): which object the failure is about. */
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  /** Seconds the caller should back off before asking again (429, 503), within [1, 30]. */
  retryAfterSeconds?: number;
  causes?: { reason?: string; message: string; field?: string }[];
}

/** The `metav1.Status` wire object, always `status: "Failure"` here. */
export interface Status {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure";
  message: string;
  reason: (typeof StatusReasons)[StatusCode];
  details?: StatusDetails;
  code: StatusCode;
}

/**
 * Bounds of the `Retry-After` a Status carries, seconds: every hint is
 * clamped to [{@link MIN_RETRY_AFTER_SECONDS}, {@link MAX_RETRY_AFTER_SECONDS}].
 *
 * What the header is for: a back-off hint from the bridge to the in-cluster
 * proxy, never an instruction to client-go. The bridge sends the cloud's own
 * throttling hint (AWS `Retry-After`/`x-amz-retry-after`, Google
 * `google.rpc.RetryInfo.retry_delay`) and, for any other backend failure,
 * 1 s; it also keeps the same failure cached for that long (`shared/cache/coalescing.ts`
 * `failureTtlMs`), so a throttled backend is not asked again by every read.
 * The proxy uses the hint as back-off for that series and strips it from the
 * answer it gives the HPA: client-go retries a 429 or 5xx that carries
 * `Retry-After` up to 10 times, sleeping that long each time, with no overall
 * deadline (client-go `rest/with_retry.go`, `maxRetries: 10`), which would
 * hold one of the HPA controller's 5 workers (issue 10, item 2).
 *
 * 30 s is the longest back-off that stays useful for an HPA that reads every
 * 15 s (kube-controller-manager `--horizontal-pod-autoscaler-sync-period`):
 * a larger cloud hint (Cloud Monitoring quota refills per minute) is cut so
 * the series is tried again within two HPA syncs.
 */
export const MAX_RETRY_AFTER_SECONDS = 30;

/** Shortest `Retry-After` sent, seconds (the header has whole-second resolution, RFC 9110 §10.2.3). */
export const MIN_RETRY_AFTER_SECONDS = 1;

/**
 * A back-off hint clamped to [{@link MIN_RETRY_AFTER_SECONDS},
 * {@link MAX_RETRY_AFTER_SECONDS}] and rounded up to whole seconds;
 * NaN or a negative hint gives the minimum.
 */
export function clampRetryAfter(seconds: number): number {
  if (!Number.isFinite(seconds)) return seconds > 0 ? MAX_RETRY_AFTER_SECONDS : MIN_RETRY_AFTER_SECONDS;
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(MIN_RETRY_AFTER_SECONDS, Math.ceil(seconds)));
}

/** The API group every Status detail names by default. */
export const EXTERNAL_METRICS_GROUP = "external.metrics.k8s.io";

/**
 * An error that is answered as a `metav1.Status`. Throw one anywhere in the
 * request path; the app turns it into the response (with `Retry-After` when
 * `details.retryAfterSeconds` is set).
 */
export class StatusError extends Error {
  readonly code: StatusCode;
  readonly details: StatusDetails | undefined;

  constructor(code: StatusCode, message: string, details?: StatusDetails, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StatusError";
    this.code = code;
    this.details =
      details?.retryAfterSeconds !== undefined ? { ...details, retryAfterSeconds: clampRetryAfter(details.retryAfterSeconds) } : details;
  }

  /** The `metav1.Status` body for this error. */
  toStatus(): Status {
    const status: Status = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: StatusReasons[this.code],
      code: this.code,
    };
    if (this.details && Object.keys(this.details).length > 0) status.details = this.details;
    return status;
  }

  /**
   * The whole answer as a standard `Response`: the Status JSON with the
   * headers every bridge answer carries (`Content-Type`, `Cache-Control:
   * no-store`) and `Retry-After` when set. For answers given outside the
   * Hono app (an entry point whose config failed to load).
   */
  toResponse(): Response {
    return new Response(JSON.stringify(this.toStatus()), {
      status: this.code,
      headers: { "Content-Type": "application/json", "Cache-Control": "no-store", ...this.headers() },
    });
  }

  /** Response headers: `Retry-After` (whole seconds, the back-off hint, clamped by the constructor) when set. */
  headers(): Record<string, string> {
    const retry = this.details?.retryAfterSeconds;
    return retry !== undefined ? { "Retry-After": String(retry) } : {};
  }

  /** The back-off hint in seconds (429/503 with `retryAfterSeconds`), else undefined. */
  get retryAfterSeconds(): number | undefined {
    return this.details?.retryAfterSeconds;
  }
}

/** 400 BadRequest: malformed selector, unmappable requirement, bad name. */
export function badRequest(message: string, details?: StatusDetails): StatusError {
  return new StatusError(400, message, details);
}

/** 401 Unauthorized: missing, tampered or stale request signature. */
export function unauthorized(message: string): StatusError {
  return new StatusError(401, message);
}

/** 403 Forbidden: a policy or RBAC decision denied the read. */
export function forbidden(message: string, details?: StatusDetails): StatusError {
  return new StatusError(403, message, details);
}

/**
 * 404 NotFound for a named object, e.g. an unknown external metric
 * (custom-metrics-apiserver `NewMetricNotFoundError`) or a missing queue.
 */
export function notFound(message: string, details?: StatusDetails): StatusError {
  return new StatusError(404, message, details);
}

/** 413 RequestEntityTooLarge: a request body over the accepted size (apimachinery `NewRequestEntityTooLargeError`). */
export function requestEntityTooLarge(message: string): StatusError {
  return new StatusError(413, message);
}

/** 422 Invalid: an object that fails validation (apimachinery `NewInvalid`); `details.causes` name the fields. */
export function invalid(message: string, details?: StatusDetails): StatusError {
  return new StatusError(422, message, details);
}

/** 429 TooManyRequests with `Retry-After` (clamped by {@link clampRetryAfter}). */
export function tooManyRequests(message: string, retryAfterSeconds: number, details?: StatusDetails): StatusError {
  return new StatusError(429, message, { ...details, retryAfterSeconds });
}

/**
 * 503 ServiceUnavailable with `Retry-After`: a backend failed, timed out or
 * throttled. A backend failure is never reported as a value.
 * `retryAfterSeconds` is the back-off hint (default 1 s; a throttled backend
 * passes the cloud's own hint), clamped by {@link clampRetryAfter}.
 */
export function serviceUnavailable(
  message: string,
  retryAfterSeconds = MIN_RETRY_AFTER_SECONDS,
  details?: StatusDetails,
  cause?: unknown,
): StatusError {
  return new StatusError(503, message, { ...details, retryAfterSeconds }, { cause });
}

/** 500 InternalError: a fault no retry will fix (bad credentials, IAM denial, a bug). */
export function internalError(message: string, details?: StatusDetails, cause?: unknown): StatusError {
  return new StatusError(500, message, details, { cause });
}

/**
 * Turn anything thrown in the request path into a StatusError. Unknown
 * errors become 500 InternalError with their message (never a stack).
 */
export function toStatusError(err: unknown): StatusError {
  if (err instanceof StatusError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return internalError(`internal error: ${message}`, undefined, err);
}
