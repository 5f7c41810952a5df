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
 * `Retry-After` header is present (client-go `rest/request.go`).
 */

/** `metav1.StatusReason` values the bridge uses, keyed by their HTTP code. */
export const StatusReasons = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
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
  /** Seconds the client should wait before retrying (429, 503). */
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
 * Longest `Retry-After` the bridge sends, seconds. client-go retries a 429
 * or 5xx that carries `Retry-After` up to 10 times, sleeping that long each
 * time, with no overall deadline (client-go `rest/with_retry.go`,
 * `maxRetries: 10`). A larger value would stall the HPA controller's sync —
 * and one of its 5 workers — for 10 × Retry-After before it sees that the
 * metric is invalid. With 1 s a transient blip is still retried and a dead
 * backend reaches the HPA as `FailedGetExternalMetric` within about 10 s
 * (measured in `test/k8s.e2e.test.ts`).
 */
export const MAX_RETRY_AFTER_SECONDS = 1;

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
      details?.retryAfterSeconds !== undefined && details.retryAfterSeconds > MAX_RETRY_AFTER_SECONDS
        ? { ...details, retryAfterSeconds: MAX_RETRY_AFTER_SECONDS }
        : details;
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

  /** Response headers: `Retry-After` (whole seconds) when a retry helps. */
  headers(): Record<string, string> {
    const retry = this.details?.retryAfterSeconds;
    return retry !== undefined ? { "Retry-After": String(Math.max(1, Math.ceil(retry))) } : {};
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

/** 429 TooManyRequests with `Retry-After` (capped at {@link MAX_RETRY_AFTER_SECONDS}). */
export function tooManyRequests(message: string, retryAfterSeconds: number, details?: StatusDetails): StatusError {
  return new StatusError(429, message, { ...details, retryAfterSeconds });
}

/**
 * 503 ServiceUnavailable with `Retry-After`: a backend failed, timed out or
 * throttled. A backend failure is never reported as a value.
 * `retryAfterSeconds` is the caller's hint, capped at
 * {@link MAX_RETRY_AFTER_SECONDS}.
 */
export function serviceUnavailable(
  message: string,
  retryAfterSeconds = 5,
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
