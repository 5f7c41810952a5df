/**
 * The proxy's validating admission webhook: `admission.k8s.io/v1`
 * AdmissionReview in, AdmissionReview out (k8s.io/api `admission/v1/types.go`;
 * https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/
 * "Request" and "Response").
 *
 * | path | objects | checks |
 * |---|---|---|
 * | `POST /admission/hpa` | `autoscaling/v2` HorizontalPodAutoscaler, CREATE/UPDATE | each External, Pods and Object metric as the HPA controller would read it: the cluster policies' decision for its identity (Pods and Object metrics with their resource, `pods` or the described object's group resource, and the metric's selector as the metricLabelSelector), plus check-hpa's config-free checks |
 * | `POST /admission/policies` | ExternalMetricPolicy / ClusterExternalMetricPolicy, CREATE/UPDATE | compiles as the proxy's watch does (shared/policy/objects.ts `compilePolicyObject`: RE2 patterns, selectors, schema): invalid → refused (422, file-free `<field>: <problem>` naming the rule index); lint findings (shadowed rules, …) → warnings |
 *
 * Anything else (other kinds or versions, DELETE/CONNECT, subresources) is
 * allowed without a warning. The webhook configuration uses `matchPolicy:
 * Equivalent`, so an `autoscaling/v1` HPA arrives converted to v2.
 *
 * The caller, kube-apiserver, presents no client certificate unless its
 * admission configuration names one, so these two paths are served on a
 * listener of their own (admission-server.ts: its own connection, header
 * and body deadlines, optional client-certificate authentication with
 * ProxyConfig `admission.clientCA`), never on the API listener; they only
 * read the request body and answer about it (no backend call, no Kubernetes
 * API call). The listener says whether the caller was authenticated
 * ({@link AdmissionCaller}); an unauthenticated one learns at most a
 * policy's name and rule index.
 *
 * Answer shape: `response.uid` echoes `request.uid`; `allowed`; `warnings`
 * (each at most {@link MAX_WARNING_CHARS} characters, all together at most
 * {@link MAX_WARNINGS_TOTAL_CHARS}: "Individual warning messages over 256
 * characters may be truncated by the API server before being returned to
 * clients. If more than 4096 characters of warning messages are added (from
 * all sources), additional warning messages are ignored." — so they are
 * shortened here, most important first, and control characters replaced);
 * on a denial `status` is a metav1.Status whose `message` kube-apiserver
 * shows as `admission webhook "…" denied the request: <message>`
 * (apiserver `pkg/admission/plugin/webhook/errors/statuserror.go`).
 *
 * A malformed request (not JSON, not an AdmissionReview v1, no uid) is an
 * HTTP 400 Status; kube-apiserver counts it as a failed call, which
 * `failurePolicy: Ignore` admits. A body over {@link MAX_ADMISSION_BODY_BYTES}
 * ({@link MAX_HPA_REVIEW_BODY_BYTES} on `/admission/hpa`) is refused
 * (`allowed: false`, 422) when its uid can be read from its first KiB, and a
 * 413 Status otherwise; reading stops at the limit.
 *
 * CPU budget (issue 23): the body is only read here; parsing, compiling and
 * evaluating run in the policy worker thread (policy/policy-worker.ts) within
 * {@link REVIEW_BUDGET_MS}. A review over it — or whose cluster policies
 * could not be loaded into the worker within their budget — is REFUSED
 * (`allowed: false`, a 422 Status saying so) rather than failed: a failed
 * call is what `failurePolicy: Ignore` admits, so an answer is the only way
 * an object too costly to check is kept out. (Without the review's uid — the
 * worker could not even read it — the answer is a 503 Status, a failed call.)
 * An HPA with more than {@link MAX_HPA_EXTERNAL_METRICS} External, Pods and Object metrics (or
 * {@link MAX_HPA_METRICS} metrics) is refused in both modes (422) before its
 * metrics are parsed; a denial's message is cut to
 * {@link MAX_STATUS_MESSAGE_CHARS} characters, its causes to
 * {@link MAX_STATUS_CAUSES}, the whole answer to
 * {@link MAX_ADMISSION_ANSWER_BYTES}.
 *
 * Disclosure: {@link AdmissionWebhook.serve} is told whether kube-apiserver's
 * client certificate authenticated the caller. Unauthenticated, a policy
 * denial names only the policy and the rule index (`policy team-a/queues
 * rules[0]`), never what it allows; authenticated, the full explanation
 * (the allowed selector and the requirement the HPA's selector misses).
 */
import { invalid, requestEntityTooLarge, serviceUnavailable, StatusError, tooManyRequests } from "../../k8s/status.ts";
import { readBounded } from "../../bounded-body.ts";
import { MAX_HPA_EXTERNAL_METRICS, MAX_HPA_METRICS } from "../../policy/check-hpa.ts";
import type { PolicySet } from "../../policy/evaluate.ts";
import {
  ADMISSION_PATHS,
  completeReview,
  MAX_ADMISSION_ANSWER_BYTES,
  MAX_STATUS_CAUSES,
  MAX_STATUS_MESSAGE_CHARS,
  MAX_WARNING_CHARS,
  MAX_WARNINGS_TOTAL_CHARS,
  reviewText,
  uidFromPrefix,
  type AdmissionMode,
  type AdmissionPath,
  type ReviewDraft,
} from "../policy/admission-review.ts";
import { BudgetExceededError, PolicyWorker, REVIEW_BUDGET_MS, WorkerStatusError } from "../policy/policy-worker.ts";

export {
  ADMISSION_PATHS,
  MAX_ADMISSION_ANSWER_BYTES,
  MAX_HPA_EXTERNAL_METRICS,
  MAX_HPA_METRICS,
  MAX_STATUS_CAUSES,
  MAX_STATUS_MESSAGE_CHARS,
  MAX_WARNING_CHARS,
  MAX_WARNINGS_TOTAL_CHARS,
  REVIEW_BUDGET_MS,
};
export type { AdmissionMode, AdmissionPath };
export type { AdmissionRequest, AdmissionResponse } from "../policy/admission-review.ts";

/**
 * Largest AdmissionReview body accepted, bytes: 3 MiB, kube-apiserver's own
 * limit on a request body (`MaxRequestBodyBytes`, apiserver
 * `pkg/server/config.go`); HPAs and policies are a few KiB.
 */
export const MAX_ADMISSION_BODY_BYTES = 3 * 1024 * 1024;
/**
 * Largest body accepted on `/admission/hpa`, bytes: an HPA (object and, on
 * UPDATE, oldObject) is a few KiB, one at {@link MAX_HPA_EXTERNAL_METRICS}
 * External, Pods and Object metrics with long names and selectors far under this; a larger
 * review is refused (`allowed: false`, 422) after its first bytes, without
 * the rest being read.
 */
export const MAX_HPA_REVIEW_BODY_BYTES = 256 * 1024;

/**
 * Most AdmissionReviews being checked or waiting for the policy worker at
 * once; past it a review is refused (429), which kube-apiserver counts as a
 * failed call (`failurePolicy: Ignore` admits it). The bodies are read
 * before a review counts here, by the webhook's listener
 * (admission-server.ts: 2 s body deadline, 16 MiB buffered across all
 * connections), so slow uploads hold no slot; this bounds the worker's
 * queue. A burst of ordinary reviews (a few KiB each, well under a
 * millisecond in the worker) fits.
 */
export const MAX_ADMISSION_IN_FLIGHT = 64;

/** What the webhook needs. */
export interface AdmissionOptions {
  /** the cluster policies now (ClusterPolicies.current); undefined: not loaded, no policy check */
  policies: () => PolicySet | undefined;
  /** default `Warn` */
  mode?: AdmissionMode;
  /**
   * the cluster layer's `whenNoneApply`: with `Defer` (default) a metric no
   * cluster policy applies to is left to the backend's own policies, so it
   * is not reported; with `Deny` it is
   */
  whenNoneApply?: "Defer" | "Deny";
  /** whether this proxy routes the metric (lookup key) to a backend; a metric it does not is reported (its read would be 404) */
  serves?: (metricKey: string) => boolean;
  /**
   * where reviews are decided: a {@link PolicyWorker} (default: one the
   * webhook starts on its first review and stops in {@link AdmissionWebhook.close}),
   * or `false` to decide them on the calling thread (no CPU budget: for
   * runtimes without worker threads and for unit tests only)
   */
  worker?: PolicyWorker | false;
}

/** What the listener knows about the caller of one webhook request. */
export interface AdmissionCaller {
  /**
   * whether the caller presented a client certificate that authenticates
   * kube-apiserver (the webhook listener's `admission.clientCA`); false: a
   * denial names at most the policy and the rule index
   */
  authenticated: boolean;
}

/** An HTTP answer of the webhook. */
export interface AdmissionAnswer {
  status: number;
  body: string;
}

/** The webhook: turns an AdmissionReview request into its answer. */
export class AdmissionWebhook {
  readonly #options: AdmissionOptions;
  #inFlight = 0;
  #worker: PolicyWorker | undefined;

  constructor(options: AdmissionOptions) {
    this.#options = options;
    if (options.worker !== false && options.worker !== undefined) this.#worker = options.worker;
  }

  /**
   * Answer one HTTP request of the webhook.
   *
   * @param path which check
   * @param request the POST (its body is read up to {@link MAX_ADMISSION_BODY_BYTES}, {@link MAX_HPA_REVIEW_BODY_BYTES} on `hpa`)
   * @param caller whether kube-apiserver's client certificate authenticated
   *   the caller (default: not authenticated, the least disclosed)
   * @returns 200 with an AdmissionReview (`allowed: false` with a 422 Status
   *   when the review passed its CPU budget)
   * @throws StatusError 413 when the body is too large and has no readable uid, 400 when it is not
   *   an AdmissionReview v1, 429 when {@link MAX_ADMISSION_IN_FLIGHT} reviews
   *   are in progress, 503 when the review passed its budget before its uid
   *   was read or the worker could not run
   */
  async serve(path: AdmissionPath, request: Request, caller: AdmissionCaller = { authenticated: false }): Promise<AdmissionAnswer> {
    if (this.#inFlight >= MAX_ADMISSION_IN_FLIGHT) {
      throw tooManyRequests(`${MAX_ADMISSION_IN_FLIGHT} admission reviews are in progress; try again`, 1);
    }
    this.#inFlight++;
    try {
      const read = await readReview(request, path === "hpa" ? MAX_HPA_REVIEW_BODY_BYTES : MAX_ADMISSION_BODY_BYTES);
      const draft = "bytes" in read ? await this.#decide(path, read.bytes, caller.authenticated) : tooLargeDraft(read.uid, read.limit);
      return { status: 200, body: completeReview(draft, this.#options.serves) };
    } finally {
      this.#inFlight--;
    }
  }

  /** Stop the webhook's own worker (a worker passed in options is left alone). Never throws. */
  async close(): Promise<void> {
    if (this.#options.worker === undefined) await this.#worker?.close();
    this.#worker = undefined;
  }

  async #decide(path: AdmissionPath, body: Uint8Array, authenticated: boolean): Promise<ReviewDraft> {
    const o = this.#options;
    const context = { policies: o.policies(), mode: o.mode ?? "Warn", whenNoneApply: o.whenNoneApply ?? "Defer", authenticated } as const;
    if (o.worker === false) return reviewText(path, Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8"), context);
    this.#worker ??= new PolicyWorker();
    try {
      return await this.#worker.review({ path, body, ...context });
    } catch (err) {
      if (err instanceof WorkerStatusError) throw new StatusError(err.code === 400 ? 400 : 500, err.message);
      if (err instanceof BudgetExceededError) {
        if (err.uid === undefined) throw serviceUnavailable(`the admission review could not be checked: ${err.message}`, 1);
        const what = path === "hpa" ? "HorizontalPodAutoscaler" : "policy object";
        const message = `the external metrics proxy's webhook could not check this ${what} within its CPU budget, so it is refused: ${err.message}`;
        return { response: { uid: err.uid, allowed: false, status: invalid(message).toStatus() }, warnings: [] };
      }
      throw serviceUnavailable(`the admission review could not be checked: ${(err as Error).message}`, 1);
    }
  }
}

/**
 * Read a review's body of at most `limit` bytes.
 *
 * @returns the bytes, or — when the body (or its `Content-Length`) passes
 *   `limit` and `request.uid` can be read from its first KiB
 *   (policy/admission-review.ts `uidFromPrefix`) — that uid: reading stops there and
 *   the review is refused with an answer rather than failed
 * @throws StatusError 413 when the body passes `limit` and no uid could be read
 */
async function readReview(request: Request, limit: number): Promise<{ bytes: Uint8Array } | { uid: string; limit: number }> {
  const declared = Number(request.headers.get("content-length") ?? "NaN");
  const over = Number.isFinite(declared) && declared > limit;
  let uid: string | undefined;
  try {
    // Declared over the limit: only the first chunk is read, for its uid.
    const bytes = await readBounded(request.body, over ? 0 : limit, (read) => {
      uid = uidFromPrefix(Buffer.concat(read).subarray(0, 1024).toString("utf8"));
      return requestEntityTooLarge(
        over ? `the AdmissionReview is ${declared} bytes long; at most ${limit} are accepted` : `the AdmissionReview is longer than ${limit} bytes, the most accepted`,
      );
    });
    return { bytes };
  } catch (err) {
    if (uid !== undefined) return { uid, limit };
    throw err;
  }
}

/** The refusal of a review whose body is over `limit` bytes (see {@link readReview}). */
function tooLargeDraft(uid: string, limit: number): ReviewDraft {
  const message = `the AdmissionReview is longer than ${limit} bytes, the most the external metrics proxy's webhook reviews on this path, so the object is refused`;
  return { response: { uid, allowed: false, status: invalid(message).toStatus() }, warnings: [] };
}
