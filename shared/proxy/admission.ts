/**
 * The proxy's validating admission webhook: `admission.k8s.io/v1`
 * AdmissionReview in, AdmissionReview out (k8s.io/api `admission/v1/types.go`;
 * https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/
 * "Request" and "Response").
 *
 * | path | objects | checks |
 * |---|---|---|
 * | `POST /admission/hpa` | `autoscaling/v2` HorizontalPodAutoscaler, CREATE/UPDATE | each External metric as the HPA controller would read it: the cluster policies' decision for its identity, plus check-hpa's config-free checks |
 * | `POST /admission/policies` | ExternalMetricPolicy / ClusterExternalMetricPolicy, CREATE/UPDATE | compiles as the proxy's watch does (shared/policy/objects.ts `compilePolicyObject`: RE2 patterns, selectors, schema): invalid → refused (422, file-free `<field>: <problem>` naming the rule index); lint findings (shadowed rules, …) → warnings |
 *
 * Anything else (other kinds or versions, DELETE/CONNECT, subresources) is
 * allowed without a warning. The webhook configuration uses `matchPolicy:
 * Equivalent`, so an `autoscaling/v1` HPA arrives converted to v2.
 *
 * The caller, kube-apiserver, presents no client certificate unless its
 * admission configuration names one, so these two paths are served before
 * the proxy's authentication (app.ts); they only read the request body and
 * answer about it (no backend call, no Kubernetes API call), and every other
 * path stays authenticated.
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
 * HTTP 400 Status, a body over {@link MAX_ADMISSION_BODY_BYTES} a 413 Status;
 * kube-apiserver counts either as a failed call, which `failurePolicy:
 * Ignore` admits. The work is synchronous and in memory (one policy
 * evaluation per External metric), far inside the webhook's 3 s timeout.
 */
import { readBounded } from "../bounded-body.ts";
import type { ConfigIssue } from "../config/yaml.ts";
import { badRequest, forbidden, invalid, requestEntityTooLarge, tooManyRequests, type Status } from "../k8s/status.ts";
import { metricKey } from "../metric-name.ts";
import { checkHpaObject, POLICY_DENIED } from "../policy/check-hpa.ts";
import type { PolicySet } from "../policy/evaluate.ts";
import { lintPolicies } from "../policy/lint.ts";
import { compilePolicyObject, policyObjectRef } from "../policy/objects.ts";

/** The webhook's paths on the proxy's HTTPS server. */
export const ADMISSION_PATHS = { hpa: "/admission/hpa", policies: "/admission/policies" } as const;
export type AdmissionPath = keyof typeof ADMISSION_PATHS;

/**
 * Largest AdmissionReview body accepted, bytes: 3 MiB, kube-apiserver's own
 * limit on a request body (`MaxRequestBodyBytes`, apiserver
 * `pkg/server/config.go`); HPAs and policies are a few KiB.
 */
export const MAX_ADMISSION_BODY_BYTES = 3 * 1024 * 1024;
/** Longest warning, characters (kube-apiserver may truncate longer ones). */
export const MAX_WARNING_CHARS = 256;
/** Most characters of all warnings of one answer (kube-apiserver drops warnings past 4096). */
export const MAX_WARNINGS_TOTAL_CHARS = 4096;

/**
 * Most AdmissionReviews read or checked at once: the paths need no
 * credentials, so a caller that opens many slow uploads is refused (429)
 * instead of holding the proxy's memory (at most this many bodies of
 * {@link MAX_ADMISSION_BODY_BYTES}); kube-apiserver counts the refusal as a
 * failed call, which `failurePolicy: Ignore` admits.
 */
export const MAX_ADMISSION_IN_FLIGHT = 16;

/** `Warn`: a policy Deny is a warning, the object is admitted; `Deny`: it is refused. */
export type AdmissionMode = "Warn" | "Deny";

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
}

/** `admission.k8s.io/v1` AdmissionResponse (the fields this webhook sets). */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: Status;
  warnings?: string[];
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

  constructor(options: AdmissionOptions) {
    this.#options = options;
  }

  /**
   * Answer one HTTP request of the webhook.
   *
   * @param path which check
   * @param request the POST (its body is read up to {@link MAX_ADMISSION_BODY_BYTES})
   * @returns 200 with an AdmissionReview
   * @throws StatusError 413 when the body is too large, 400 when it is not
   *   an AdmissionReview v1, 429 when {@link MAX_ADMISSION_IN_FLIGHT} reviews are in progress
   */
  async serve(path: AdmissionPath, request: Request): Promise<AdmissionAnswer> {
    if (this.#inFlight >= MAX_ADMISSION_IN_FLIGHT) {
      throw tooManyRequests(`${MAX_ADMISSION_IN_FLIGHT} admission reviews are in progress; try again`, 1);
    }
    this.#inFlight++;
    let text: string;
    try {
      text = await readBody(request, MAX_ADMISSION_BODY_BYTES);
    } finally {
      this.#inFlight--;
    }
    const review = parseReview(text);
    const response = path === "hpa" ? this.reviewHpa(review.request) : this.reviewPolicy(review.request);
    return {
      status: 200,
      body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: finish(response) }),
    };
  }

  /** The answer for an HPA (see the module comment). */
  reviewHpa(req: AdmissionRequest): AdmissionResponse {
    const allowed: AdmissionResponse = { uid: req.uid, allowed: true };
    const kind = req.kind;
    if (kind?.group !== "autoscaling" || kind.version !== "v2" || kind.kind !== "HorizontalPodAutoscaler") return allowed;
    if ((req.operation !== "CREATE" && req.operation !== "UPDATE") || (req.subResource ?? "") !== "") return allowed;
    const namespace = req.namespace ?? (req.object as { metadata?: { namespace?: string } } | undefined)?.metadata?.namespace ?? "default";
    const policies = this.#options.policies();
    const checked = checkHpaObject(req.object, policies !== undefined ? { policies } : {}, namespace);
    if ("issues" in checked) return allowed; // not the v2 shape: the API server's own validation answers
    const warnings: string[] = [];
    const denials: string[] = [];
    for (const m of checked.metrics) {
      const at = `spec.metrics[${m.index}] (External "${m.check.metric}")`;
      for (const problem of m.check.problems) {
        if (problem.startsWith(POLICY_DENIED)) continue; // the decision below says more
        warnings.push(`${at}: ${problem}`);
      }
      const serves = this.#options.serves;
      if (serves !== undefined && !serves(metricKey(m.check.metric))) {
        warnings.push(`${at}: no backend of the external metrics proxy serves this metric, so the HPA's read would fail with 404`);
      }
      const d = m.check.decision;
      if (d === undefined || d.decision !== "Deny") continue;
      if (d.byDefault && (this.#options.whenNoneApply ?? "Defer") === "Defer") continue;
      const message = `${at}: the HPA controller's read would be denied by cluster policy: ${d.message}`;
      if ((this.#options.mode ?? "Warn") === "Deny") denials.push(message);
      else warnings.push(message);
    }
    if (denials.length > 0) {
      return { uid: req.uid, allowed: false, status: forbidden(denials.join("; ")).toStatus(), ...(warnings.length > 0 ? { warnings } : {}) };
    }
    return warnings.length > 0 ? { ...allowed, warnings } : allowed;
  }

  /** The answer for an ExternalMetricPolicy or ClusterExternalMetricPolicy (see the module comment). */
  reviewPolicy(req: AdmissionRequest): AdmissionResponse {
    const allowed: AdmissionResponse = { uid: req.uid, allowed: true };
    const kind = req.kind;
    if (kind?.group !== POLICY_GROUP || !POLICY_KINDS.has(kind.kind ?? "")) return allowed;
    if ((req.operation !== "CREATE" && req.operation !== "UPDATE") || (req.subResource ?? "") !== "") return allowed;
    const object = withNamespace(req.object, kind.kind!, req.namespace);
    const { policy, issues } = compilePolicyObject(object);
    if (policy === undefined) {
      const list = issues.length > 0 ? issues : [{ path: "", message: "the object could not be compiled" } as ConfigIssue];
      const id = policyObjectRef(object);
      return {
        uid: req.uid,
        allowed: false,
        status: invalid(`${id} is invalid: ${list.map(issueText).join("; ")}`, {
          kind: kind.kind!,
          group: POLICY_GROUP,
          ...(req.name !== undefined ? { name: req.name } : {}),
          causes: list.map((i) => ({ reason: "FieldValueInvalid", message: i.message, field: i.path })),
        }).toStatus(),
      };
    }
    const warnings = lintPolicies([policy], undefined, undefined).map(issueText);
    return warnings.length > 0 ? { ...allowed, warnings } : allowed;
  }
}

/** The API group of the policy kinds. */
const POLICY_GROUP = "external-metrics-bridge.io";
const POLICY_KINDS = new Set(["ExternalMetricPolicy", "ClusterExternalMetricPolicy"]);

/** `admission.k8s.io/v1` AdmissionRequest (the fields read here). */
export interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; version?: string; kind?: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation?: string;
  object?: unknown;
}

/** The object with the request's namespace (a namespaced CREATE may omit metadata.namespace). */
function withNamespace(object: unknown, kind: string, namespace: string | undefined): unknown {
  if (kind === "ClusterExternalMetricPolicy" || namespace === undefined || object === null || typeof object !== "object") return object;
  const o = object as { metadata?: Record<string, unknown> };
  return { ...o, metadata: { ...(o.metadata ?? {}), namespace } };
}

/** A loader or lint issue without its file position: `spec.rules[1].metric: message`. */
function issueText(issue: Pick<ConfigIssue, "path" | "message">): string {
  return issue.path === "" ? issue.message : `${issue.path}: ${issue.message}`;
}

/** Bound the warnings as kube-apiserver would (see the module comment) and drop an empty list. */
function finish(response: AdmissionResponse): AdmissionResponse {
  if (response.warnings === undefined) return response;
  const out: string[] = [];
  let total = 0;
  for (const w of response.warnings) {
    let text = w.replace(/[\u0000-\u001f\u007f]/g, " ");
    const chars = [...text];
    if (chars.length > MAX_WARNING_CHARS) text = `${chars.slice(0, MAX_WARNING_CHARS - 1).join("")}…`;
    const length = [...text].length;
    if (total + length > MAX_WARNINGS_TOTAL_CHARS) break;
    total += length;
    out.push(text);
  }
  const { warnings: _w, ...rest } = response;
  return out.length > 0 ? { ...rest, warnings: out } : rest;
}

/**
 * Read a request body of at most `limit` bytes.
 *
 * @throws StatusError 413 when `Content-Length` or the bytes read pass `limit` (reading stops there)
 */
async function readBody(request: Request, limit: number): Promise<string> {
  const declared = Number(request.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > limit) {
    throw requestEntityTooLarge(`the AdmissionReview is ${declared} bytes long; at most ${limit} are accepted`);
  }
  const bytes = await readBounded(request.body, limit, () =>
    requestEntityTooLarge(`the AdmissionReview is longer than ${limit} bytes, the most accepted`),
  );
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
}

/**
 * Parse an `admission.k8s.io/v1` AdmissionReview request.
 *
 * @throws StatusError 400 when the text is not JSON or not an AdmissionReview v1 with `request.uid`
 */
function parseReview(text: string): { request: AdmissionRequest } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw badRequest(`the body is not JSON: ${(err as Error).message}`);
  }
  const v = value as { apiVersion?: unknown; kind?: unknown; request?: { uid?: unknown } } | null;
  if (v === null || typeof v !== "object" || v.apiVersion !== "admission.k8s.io/v1" || v.kind !== "AdmissionReview") {
    throw badRequest("expected an AdmissionReview of apiVersion admission.k8s.io/v1 (the webhook's admissionReviewVersions is [v1])");
  }
  if (v.request === null || typeof v.request !== "object" || typeof v.request.uid !== "string" || v.request.uid === "") {
    throw badRequest("the AdmissionReview has no request.uid");
  }
  return { request: v.request as AdmissionRequest };
}
