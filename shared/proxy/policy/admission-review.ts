/**
 * The admission webhook's decisions (admission/admission.ts serves them over
 * HTTP): from the text of an `admission.k8s.io/v1` AdmissionReview to the
 * AdmissionResponse, with every bound of its answer. Pure and synchronous,
 * so it runs unchanged in the policy worker thread (policy-worker.ts) — where
 * the proxy runs it, off the request loop — or inline; it sits here, beside
 * the worker that runs it, so the webhook (admission/) imports the policy
 * room and never the other way round.
 *
 * Wire facts: k8s.io/api `admission/v1/types.go` (AdmissionReview,
 * AdmissionRequest, AdmissionResponse);
 * https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/
 * ("Response": `uid` must echo `request.uid`; warnings "over 256 characters
 * may be truncated … If more than 4096 characters of warning messages are
 * added (from all sources), additional warning messages are ignored"); a
 * denial's `status.message` is shown as `admission webhook "…" denied the
 * request: <message>` (apiserver `pkg/admission/plugin/webhook/errors/statuserror.go`).
 */
import type { ConfigIssue } from "../../config/yaml.ts";
import { badRequest, forbidden, invalid, type Status } from "../../k8s/status.ts";
import { metricKey } from "../../metric-name.ts";
import { checkHpaObject, hpaMetricCount, MAX_HPA_EXTERNAL_METRICS, MAX_HPA_METRICS, POLICY_DENIED } from "../../policy/check-hpa.ts";
import type { PolicySet } from "../../policy/evaluate.ts";
import { lintPolicies } from "../../policy/lint.ts";
import { compilePolicyObject, policyObjectRef } from "../../policy/objects.ts";

/** The webhook's paths on the proxy's HTTPS server. */
export const ADMISSION_PATHS = { hpa: "/admission/hpa", policies: "/admission/policies" } as const;
export type AdmissionPath = keyof typeof ADMISSION_PATHS;

/** Longest warning, characters (kube-apiserver may truncate longer ones). */
export const MAX_WARNING_CHARS = 256;
/** Most characters of all warnings of one answer (kube-apiserver drops warnings past 4096). */
export const MAX_WARNINGS_TOTAL_CHARS = 4096;
/** Longest `status.message` of a denial, characters (longer ones end in `…`): kubectl prints it whole. */
export const MAX_STATUS_MESSAGE_CHARS = 4096;
/** Most `status.details.causes` of a denial (the first ones; the message says how many there were). */
export const MAX_STATUS_CAUSES = 32;
/**
 * Largest answer body, bytes (UTF-8 JSON). The bounds above keep every
 * answer far below it (about 4 KiB of warnings, 4 KiB of message and 32
 * causes of at most 256 + 256 characters); an answer over it anyway loses its
 * warnings and causes.
 */
export const MAX_ADMISSION_ANSWER_BYTES = 64 * 1024;

/** `Warn`: a policy Deny is a warning, the object is admitted; `Deny`: it is refused. */
export type AdmissionMode = "Warn" | "Deny";

/** `admission.k8s.io/v1` AdmissionResponse (the fields this webhook sets). */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: Status;
  warnings?: string[];
}

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

/** What a review is decided with (plain data but `policies`). */
export interface ReviewContext {
  /** the cluster policies; undefined: not loaded, no policy check */
  policies: PolicySet | undefined;
  /** default `Warn` */
  mode?: AdmissionMode;
  /** the cluster layer's `whenNoneApply` (default `Defer`: a metric no cluster policy applies to is not reported) */
  whenNoneApply?: "Defer" | "Deny";
  /**
   * whether kube-apiserver's client certificate authenticated the caller:
   * false → a policy denial names at most the policy and the rule index
   * (never the allowed selector or pattern); true → the full explanation
   */
  authenticated: boolean;
}

/**
 * A warning that stands only when no route of the proxy serves `metricKey`
 * (decided where the routes are: the main thread, admission/admission.ts).
 */
export interface UnlessServed {
  unlessServed: string;
  text: string;
}

/** A decided review before the routes check and the bounds: plain data (crosses threads). */
export interface ReviewDraft {
  response: Omit<AdmissionResponse, "warnings">;
  warnings: (string | UnlessServed)[];
}

/**
 * `request.uid` read from the first KiB of an AdmissionReview's text, without
 * parsing it: kube-apiserver writes `{"kind":…,"apiVersion":…,"request":{"uid":"…"`
 * (the Go struct's field order, k8s.io/api `admission/v1/types.go`). Used to
 * answer a review that cannot be parsed within its budget or is too large.
 *
 * @returns the uid, or undefined when the text does not begin that way
 */
export function uidFromPrefix(text: string): string | undefined {
  return /^\s*\{[^{]{0,200}"request"\s*:\s*\{\s*"uid"\s*:\s*"([^"\\]{1,256})"/.exec(text.slice(0, 1024))?.[1];
}

/**
 * Parse an `admission.k8s.io/v1` AdmissionReview request.
 *
 * @throws StatusError 400 when the text is not JSON or not an AdmissionReview v1 with `request.uid`
 */
export function parseReview(text: string): { request: AdmissionRequest } {
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

/**
 * Decide one AdmissionReview given as text.
 *
 * @param onUid called with `request.uid` as soon as it is known (before the
 *   costly part), so an answer can still be made if the rest overruns its budget
 * @returns the draft answer ({@link completeReview} finishes it)
 * @throws StatusError 400 when the text is not an AdmissionReview v1 with a uid
 */
export function reviewText(path: AdmissionPath, text: string, context: ReviewContext, onUid?: (uid: string) => void): ReviewDraft {
  const { request } = parseReview(text);
  onUid?.(request.uid);
  return path === "hpa" ? reviewHpa(request, context) : reviewPolicy(request);
}

/** The draft answer for an HPA (see admission/admission.ts). */
export function reviewHpa(req: AdmissionRequest, context: ReviewContext): ReviewDraft {
  const allowed: ReviewDraft = { response: { uid: req.uid, allowed: true }, warnings: [] };
  const kind = req.kind;
  if (kind?.group !== "autoscaling" || kind.version !== "v2" || kind.kind !== "HorizontalPodAutoscaler") return allowed;
  if ((req.operation !== "CREATE" && req.operation !== "UPDATE") || (req.subResource ?? "") !== "") return allowed;
  // Counted before the schema is parsed: an HPA with thousands of metrics costs nothing more than this count.
  const count = hpaMetricCount(req.object);
  if (count.metrics > MAX_HPA_METRICS || count.external > MAX_HPA_EXTERNAL_METRICS) {
    const message =
      count.metrics > MAX_HPA_METRICS
        ? `spec.metrics: ${count.metrics} metrics, more than the ${MAX_HPA_METRICS} the external metrics proxy's webhook reviews; split the HorizontalPodAutoscaler`
        : `spec.metrics: ${count.external} External, Pods and Object metrics, more than the ${MAX_HPA_EXTERNAL_METRICS} the external metrics proxy's webhook reviews; split the HorizontalPodAutoscaler`;
    return {
      response: {
        uid: req.uid,
        allowed: false,
        status: invalid(message, {
          kind: "HorizontalPodAutoscaler",
          group: "autoscaling",
          ...(req.name !== undefined ? { name: req.name } : {}),
          causes: [{ reason: "FieldValueTooMany", message, field: "spec.metrics" }],
        }).toStatus(),
      },
      warnings: [],
    };
  }
  const namespace = req.namespace ?? (req.object as { metadata?: { namespace?: string } } | undefined)?.metadata?.namespace ?? "default";
  const policies = context.policies;
  const checked = checkHpaObject(req.object, policies !== undefined ? { policies } : {}, namespace);
  if ("issues" in checked) return allowed; // not the v2 shape: the API server's own validation answers
  const warnings: (string | UnlessServed)[] = [];
  const denials: string[] = [];
  for (const m of checked.metrics) {
    const at =
      m.check.type === "External" ? `spec.metrics[${m.index}] (External "${m.check.metric}")` : `spec.metrics[${m.index}] (${m.check.type} "${m.check.metric}" on ${m.check.resource})`;
    for (const problem of m.check.problems) {
      if (problem.startsWith(POLICY_DENIED)) continue; // the decision below says more
      warnings.push(`${at}: ${problem}`);
    }
    // the served External metrics are known here; the custom ones are the proxy's routes' business
    if (m.check.type === "External") {
      warnings.push({
        unlessServed: metricKey(m.check.metric),
        text: `${at}: no backend of the external metrics proxy serves this metric, so the HPA's read would fail with 404`,
      });
    }
    const d = m.check.decision;
    if (d === undefined || d.decision !== "Deny") continue;
    if (d.byDefault && (context.whenNoneApply ?? "Defer") === "Defer") continue;
    let why: string;
    if (context.authenticated || d.deniedBy === undefined) why = d.message;
    else {
      // Unauthenticated caller: the policy and rule only, never what the policy allows.
      const v = d.deniedBy;
      const by = v.rule !== undefined ? `rules[${v.rule}]` : v.reason === "no-rule-for-resource" ? `(no rule for ${m.check.resource})` : "(defaultAction)";
      why = `policy ${v.policy} ${by} (the policy's content is shown only to an authenticated caller)`;
    }
    const message = `${at}: the HPA controller's read would be denied by cluster policy: ${why}`;
    if ((context.mode ?? "Warn") === "Deny") denials.push(message);
    else warnings.push(message);
  }
  if (denials.length > 0) {
    return { response: { uid: req.uid, allowed: false, status: forbidden(denials.join("; ")).toStatus() }, warnings };
  }
  return { response: { uid: req.uid, allowed: true }, warnings };
}

/** The API group of the policy kinds. */
const POLICY_GROUP = "external-metrics-bridge.io";
const POLICY_KINDS = new Set(["ExternalMetricPolicy", "ClusterExternalMetricPolicy"]);

/**
 * The draft answer for an ExternalMetricPolicy or ClusterExternalMetricPolicy
 * (see admission/admission.ts). Its messages describe only the object under review.
 */
export function reviewPolicy(req: AdmissionRequest): ReviewDraft {
  const allowed: ReviewDraft = { response: { uid: req.uid, allowed: true }, warnings: [] };
  const kind = req.kind;
  if (kind?.group !== POLICY_GROUP || !POLICY_KINDS.has(kind.kind ?? "")) return allowed;
  if ((req.operation !== "CREATE" && req.operation !== "UPDATE") || (req.subResource ?? "") !== "") return allowed;
  const object = withNamespace(req.object, kind.kind!, req.namespace);
  const { policy, issues } = compilePolicyObject(object);
  if (policy === undefined) {
    const list = issues.length > 0 ? issues : [{ path: "", message: "the object could not be compiled" } as ConfigIssue];
    const id = policyObjectRef(object);
    return {
      response: {
        uid: req.uid,
        allowed: false,
        status: invalid(`${id} is invalid: ${list.map(issueText).join("; ")}`, {
          kind: kind.kind!,
          group: POLICY_GROUP,
          ...(req.name !== undefined ? { name: req.name } : {}),
          causes: list.map((i) => ({ reason: "FieldValueInvalid", message: i.message, field: i.path })),
        }).toStatus(),
      },
      warnings: [],
    };
  }
  return { response: allowed.response, warnings: lintPolicies([policy], undefined, undefined).map(issueText) };
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

/**
 * Finish a draft: keep the warnings that stand (`serves` decides the
 * {@link UnlessServed} ones: without it they are dropped), bound them as
 * kube-apiserver would (most important first; control characters replaced),
 * bound the denial's message and causes, and serialize.
 *
 * @param serves whether a route of the proxy serves a metric (lookup key)
 * @returns the AdmissionReview answer's JSON, at most {@link MAX_ADMISSION_ANSWER_BYTES} bytes
 */
export function completeReview(draft: ReviewDraft, serves?: (metricKey: string) => boolean): string {
  const texts: string[] = [];
  for (const w of draft.warnings) {
    if (typeof w === "string") texts.push(w);
    else if (serves !== undefined && !serves(w.unlessServed)) texts.push(w.text);
  }
  const response: AdmissionResponse = { ...draft.response };
  if (response.status !== undefined) response.status = boundStatus(response.status);
  const warnings = boundWarnings(texts);
  if (warnings.length > 0) response.warnings = warnings;
  const body = (r: AdmissionResponse) => JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: r });
  let text = body(response);
  if (Buffer.byteLength(text, "utf8") > MAX_ADMISSION_ANSWER_BYTES) {
    const { warnings: _w, ...rest } = response;
    if (rest.status?.details !== undefined) {
      const { causes: _c, ...details } = rest.status.details;
      rest.status = { ...rest.status, details };
    }
    text = body(rest);
  }
  return text;
}

/** Cut `text` to `max` characters (code points), ending in `…` when cut. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join("")}…`;
}

/** Warnings within {@link MAX_WARNING_CHARS} each and {@link MAX_WARNINGS_TOTAL_CHARS} in all. */
function boundWarnings(warnings: readonly string[]): string[] {
  const out: string[] = [];
  let total = 0;
  for (const w of warnings) {
    // eslint-disable-next-line no-control-regex
    const text = cut(w.replace(/[\u0000-\u001f\u007f]/g, " "), MAX_WARNING_CHARS);
    const length = [...text].length;
    if (total + length > MAX_WARNINGS_TOTAL_CHARS) break;
    total += length;
    out.push(text);
  }
  return out;
}

/** A denial's Status within {@link MAX_STATUS_MESSAGE_CHARS} and {@link MAX_STATUS_CAUSES} (each cause's message and field within {@link MAX_WARNING_CHARS}). */
function boundStatus(status: Status): Status {
  const out: Status = { ...status, message: cut(status.message, MAX_STATUS_MESSAGE_CHARS) };
  const causes = status.details?.causes;
  if (causes !== undefined) {
    const kept = causes.slice(0, MAX_STATUS_CAUSES).map((c) => ({
      ...c,
      ...(c.message !== undefined ? { message: cut(c.message, MAX_WARNING_CHARS) } : {}),
      ...(c.field !== undefined ? { field: cut(c.field, MAX_WARNING_CHARS) } : {}),
    }));
    out.details = { ...status.details, causes: kept };
  }
  return out;
}
