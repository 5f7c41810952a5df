/**
 * Delegated authorization of an aggregated API server (apiserver
 * `pkg/server/options/authorization.go` `DelegatingAuthorizationOptions`):
 *
 * - paths `/healthz`, `/readyz`, `/livez` are always allowed (`AlwaysAllowPaths`);
 * - group `system:masters` is always allowed (`AlwaysAllowGroups`);
 * - everything else is a SubjectAccessReview built like the webhook
 *   authorizer builds it (`plugin/pkg/authorizer/webhook/webhook.go`:
 *   `resourceAttributesFrom`, label selector requirements mapped to
 *   `In`/`NotIn`/`Exists`/`DoesNotExist`, `Gt`/`Lt` dropped), answers cached
 *   10 s whether allowed or denied (`AllowCacheTTL`, `DenyCacheTTL`), keyed by
 *   the JSON of the review's spec, and only when the attributes are small
 *   (`shouldCache`).
 *
 * This is what makes per-metric RBAC work: the resource is the metric name,
 * so a Role can grant `get,list` on `external.metrics.k8s.io` resources
 * `["queue_messages_ready"]` to one team's ServiceAccount.
 */
import { CoalescingCache } from "../cache.ts";
import type { Caller } from "../identity.ts";
import { forbidden, internalError, type StatusError } from "../k8s/status.ts";
import type { RequestInfo } from "./request-info.ts";

/** Paths allowed without a review. */
export const ALWAYS_ALLOW_PATHS = new Set(["/healthz", "/readyz", "/livez"]);
/** Groups allowed without a review. */
export const ALWAYS_ALLOW_GROUPS = new Set(["system:masters"]);
/** How long allow and deny answers are re-used, ms. */
export const SAR_CACHE_TTL_MS = 10_000;
/** `maxControlledAttrCacheSize` of the webhook authorizer. */
const MAX_CACHED_ATTRIBUTE_SIZE = 10_000;

/** `authorization.k8s.io/v1` `SubjectAccessReviewSpec` as sent. */
export interface SubjectAccessReviewSpec {
  user?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
  resourceAttributes?: {
    namespace?: string;
    verb?: string;
    group?: string;
    version?: string;
    resource?: string;
    subresource?: string;
    name?: string;
    fieldSelector?: { requirements: { key: string; operator: "In" | "NotIn"; values: string[] }[] };
    labelSelector?: { requirements: { key: string; operator: "In" | "NotIn" | "Exists" | "DoesNotExist"; values?: string[] }[] };
  };
  nonResourceAttributes?: { path: string; verb: string };
}

/** `SubjectAccessReviewStatus`. */
export interface SubjectAccessReviewStatus {
  allowed: boolean;
  denied?: boolean;
  reason?: string;
  evaluationError?: string;
}

/** Sends a SubjectAccessReview; throws when the API cannot be reached. */
export type SubjectAccessReviewer = (spec: SubjectAccessReviewSpec) => Promise<SubjectAccessReviewStatus>;

/** The decision and how it was reached. */
export interface AuthorizationDecision {
  allowed: boolean;
  /** `path`, `group`, `review` (a SAR was sent) or `cache` */
  by: "path" | "group" | "review" | "cache";
  reason?: string;
}

/** Label selector operators as the webhook authorizer maps them; `gt`/`lt` have no SAR operator. */
const SAR_LABEL_OPERATORS = { "=": "In", "==": "In", in: "In", "!=": "NotIn", notin: "NotIn", exists: "Exists", "!": "DoesNotExist" } as const;

/** The SubjectAccessReview spec for a caller and request (`webhook.go` `Authorize`). */
export function reviewSpec(caller: Caller, info: RequestInfo): SubjectAccessReviewSpec {
  const spec: SubjectAccessReviewSpec = { user: caller.user };
  if (caller.uid !== undefined && caller.uid !== "") spec.uid = caller.uid;
  if (caller.groups.length > 0) spec.groups = [...caller.groups];
  if (Object.keys(caller.extra).length > 0) spec.extra = caller.extra;
  if (!info.isResourceRequest) {
    spec.nonResourceAttributes = { path: info.path, verb: info.verb };
    return spec;
  }
  const ra: NonNullable<SubjectAccessReviewSpec["resourceAttributes"]> = {};
  const set = <K extends "namespace" | "verb" | "group" | "version" | "resource" | "subresource" | "name">(k: K, v: string) => {
    if (v !== "") ra[k] = v; // Go's omitempty
  };
  set("namespace", info.namespace);
  set("verb", info.verb);
  set("group", info.apiGroup);
  set("version", info.apiVersion);
  set("resource", info.resource);
  set("subresource", info.subresource);
  set("name", info.name);
  const fields = info.fieldRequirements.map((r) => ({ key: r.field, operator: r.operator === "=" ? ("In" as const) : ("NotIn" as const), values: [r.value] }));
  if (fields.length > 0) ra.fieldSelector = { requirements: fields };
  const labels: NonNullable<NonNullable<SubjectAccessReviewSpec["resourceAttributes"]>["labelSelector"]>["requirements"] = [];
  for (const r of info.labelRequirements) {
    const operator = SAR_LABEL_OPERATORS[r.operator as keyof typeof SAR_LABEL_OPERATORS];
    if (operator === undefined) continue; // Gt/Lt: dropped, the check is only broader
    labels.push({ key: r.key, operator, ...(r.values.length > 0 ? { values: [...r.values] } : {}) });
  }
  if (labels.length > 0) ra.labelSelector = { requirements: labels };
  spec.resourceAttributes = ra;
  return spec;
}

/** Options of {@link Authorizer}. */
export interface AuthorizerOptions {
  review: SubjectAccessReviewer;
  now?: () => number;
  /** cache TTL, ms (default {@link SAR_CACHE_TTL_MS}) */
  ttlMs?: number;
}

/** The delegated authorizer with its decision cache. One instance per proxy. */
export class Authorizer {
  readonly #review: SubjectAccessReviewer;
  readonly #cache: CoalescingCache<SubjectAccessReviewStatus>;
  readonly #ttlMs: number;
  /** counters for /metrics and tests */
  readonly stats = { reviews: 0, cacheHits: 0, allowed: 0, denied: 0 };

  constructor(options: AuthorizerOptions) {
    this.#review = options.review;
    this.#ttlMs = options.ttlMs ?? SAR_CACHE_TTL_MS;
    this.#cache = new CoalescingCache({ maxEntries: 10_000, ...(options.now ? { now: options.now } : {}) });
  }

  /**
   * Decide whether `caller` may make the request `info` describes.
   *
   * @throws StatusError 500 when the SubjectAccessReview cannot be made
   *   (apiserver answers an authorizer error with InternalError)
   */
  async decide(caller: Caller, info: RequestInfo): Promise<AuthorizationDecision> {
    if (ALWAYS_ALLOW_PATHS.has(info.path)) return { allowed: true, by: "path" };
    if (caller.groups.some((g) => ALWAYS_ALLOW_GROUPS.has(g))) return { allowed: true, by: "group" };
    const spec = reviewSpec(caller, info);
    const key = JSON.stringify(spec);
    let fromCache = true;
    const load = async () => {
      fromCache = false;
      this.stats.reviews++;
      return this.#review(spec);
    };
    let status: SubjectAccessReviewStatus;
    try {
      status = shouldCache(info) ? await this.#cache.get(key, this.#ttlMs, load) : await load();
    } catch (err) {
      throw internalError(`Internal error occurred: SubjectAccessReview failed: ${(err as Error).message}`, undefined, err);
    }
    if (fromCache) this.stats.cacheHits++;
    const allowed = status.allowed && status.denied !== true;
    if (allowed) this.stats.allowed++;
    else this.stats.denied++;
    return { allowed, by: fromCache ? "cache" : "review", ...(status.reason ? { reason: status.reason } : {}) };
  }

  /**
   * Decide and throw when denied.
   *
   * @throws StatusError 403 with apiserver's message
   *   (`endpoints/handlers/responsewriters/errors.go` `forbiddenMessage`), or 500
   */
  async authorize(caller: Caller, info: RequestInfo): Promise<AuthorizationDecision> {
    const decision = await this.decide(caller, info);
    if (!decision.allowed) throw forbiddenError(caller, info, decision.reason);
    return decision;
  }
}

/** `shouldCache`: the attributes are small enough to key a cache entry. */
function shouldCache(info: RequestInfo): boolean {
  const size =
    info.namespace.length + info.verb.length + info.apiGroup.length + info.apiVersion.length + info.resource.length + info.subresource.length + info.name.length + info.path.length;
  return size < MAX_CACHED_ATTRIBUTE_SIZE;
}

/** apiserver's Forbidden Status for a denied request (`responsewriters.Forbidden` + `errors.NewForbidden`). */
export function forbiddenError(caller: Caller, info: RequestInfo, reason?: string): StatusError {
  let message: string;
  if (!info.isResourceRequest) {
    message = `forbidden: User ${JSON.stringify(caller.user)} cannot ${info.verb} path ${JSON.stringify(info.path)}`;
  } else {
    const resource = info.subresource !== "" ? `${info.resource}/${info.subresource}` : info.resource;
    const scope = info.namespace !== "" ? `in the namespace ${JSON.stringify(info.namespace)}` : "at the cluster scope";
    const what = `User ${JSON.stringify(caller.user)} cannot ${info.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(info.apiGroup)} ${scope}`;
    const qualified = info.apiGroup !== "" ? `${info.resource}.${info.apiGroup}` : info.resource;
    message = info.name !== "" ? `${qualified} ${JSON.stringify(info.name)} is forbidden: ${what}` : `${qualified} is forbidden: ${what}`;
  }
  if (reason) message += `: ${reason}`;
  return forbidden(message, info.isResourceRequest ? { ...(info.name ? { name: info.name } : {}), group: info.apiGroup, kind: info.resource } : undefined);
}
