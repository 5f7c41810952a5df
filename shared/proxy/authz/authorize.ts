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
 *   ({@link SAR_ALLOWED_TTL_MS} allowed, {@link SAR_DENIED_TTL_MS} denied:
 *   `AllowCacheTTL`, `DenyCacheTTL`, one `CoalescingCache` whose per-value
 *   `keepMs` gives a denial the shorter life; an allowed answer read past
 *   half its TTL is renewed in the background, {@link SAR_RENEW_AFTER_SHARE}), keyed by the sha256 of the
 *   JSON of the review's spec (cache-key.ts `digestKey`), and only when the attributes are small
 *   (`shouldCache`).
 *
 * This is what makes per-metric RBAC work: the resource is the metric name,
 * so a Role can grant `get,list` on `external.metrics.k8s.io` resources
 * `["queue_messages_ready"]` to one team's ServiceAccount.
 */
import { BoundedMap } from "../../cache/bounded-map.ts";
import { CoalescingCache, type CacheOutcome } from "../../cache/coalescing.ts";
import { untilAborted, withCallSignal } from "../../deadline.ts";
import { callerKey, type Caller } from "../../identity.ts";
import type { Selector } from "../../k8s/selector.ts";
import { forbidden, internalError, type StatusError } from "../../k8s/status.ts";
import { digestKey } from "../cache-key.ts";
import type { RequestTarget } from "../../k8s/request-path.ts";
import { requestInfo, selectorBytes, type RequestInfo } from "../request-info.ts";

/** Paths allowed without a review. */
export const ALWAYS_ALLOW_PATHS = new Set(["/healthz", "/readyz", "/livez"]);
/** Groups allowed without a review. */
export const ALWAYS_ALLOW_GROUPS = new Set(["system:masters"]);
/**
 * How long an "allowed" answer is re-used, ms (`--authorization-webhook-cache-authorized-ttl`).
 * 20 s, not apiserver's delegated 10 s: the HPA controller reads each metric
 * every 15 s (`--horizontal-pod-autoscaler-sync-period`), so a 10 s TTL had
 * expired before nearly every read and each read cost a SubjectAccessReview;
 * 20 s lets every other read (at least) hit. RBAC changes reach the proxy at
 * most this late, as with apiserver's own webhook cache.
 */
export const SAR_ALLOWED_TTL_MS = 20_000;
/**
 * Renewal of allowed answers (shared/cache/coalescing.ts, renewal on read): a read
 * that finds an allowed answer older than this share of its TTL (10 s of
 * the 20 s) is answered from it and sends the next SubjectAccessReview in
 * the background. An HPA read of a series every 15 s then never waits for a
 * review after the first: without it every other read found the answer
 * expired (30 s > 20 s) and waited for kube-apiserver, and in a steady load
 * every series' answer expired in the same instant (the P4 benchmark's
 * slow window). The reviews sent are one per series per HPA period, as
 * many as apiserver's own delegated 10 s cache sends for the same reads
 * (it misses every 15-s read); an answer used is still never older than
 * the TTL, so an RBAC change reaches the proxy as late as before. Denials
 * are not renewed.
 */
export const SAR_RENEW_AFTER_SHARE = 0.5;
/** How long a "denied" answer is re-used, ms (`--authorization-webhook-cache-unauthorized-ttl`, apiserver's delegated default 10 s). */
export const SAR_DENIED_TTL_MS = 10_000;
/** Deadline of one SubjectAccessReview (and of the coalesced cache load waiting for it), ms: the agreed budget of an HPA read. */
export const SAR_TIMEOUT_MS = 2_000;
/** Bounds of the decision cache of authenticated callers: entries, bytes (~400 B an entry: 20 000 series fit in 8 MiB). */
export const SAR_CACHE_BOUNDS = { maxEntries: 20_000, maxBytes: 8 * 1024 * 1024 } as const;
/** Bounds of the decision cache of anonymous callers: entries, bytes. */
export const SAR_ANONYMOUS_CACHE_BOUNDS = { maxEntries: 2_000, maxBytes: 1024 * 1024 } as const;
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

/**
 * Sends a SubjectAccessReview; throws when the API cannot be reached or
 * answers an error, and when `signal` aborts (the request is then cancelled).
 */
export type SubjectAccessReviewer = (spec: SubjectAccessReviewSpec, signal?: AbortSignal) => Promise<SubjectAccessReviewStatus>;

/** The decision and how it was reached. */
export interface AuthorizationDecision {
  allowed: boolean;
  /** `path`, `group`, `review` (a SAR was sent) or `cache` */
  by: "path" | "group" | "review" | "cache";
  reason?: string;
  /**
   * {@link Authorizer.authorizeRequest} with `withSelector`: the request's
   * parsed `labelSelector` (request-info.ts `RequestInfo.labelSelector`,
   * remembered with the request), for the cluster policy layer
   * (policy/policies.ts) to use instead of parsing the URL again; absent when the
   * request has none usable (several, unparseable, not a selector verb).
   */
  selector?: Selector;
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
  /** how long an allowed answer is re-used, ms (default {@link SAR_ALLOWED_TTL_MS}) */
  allowedTtlMs?: number;
  /** how long a denied answer is re-used, ms (default {@link SAR_DENIED_TTL_MS}) */
  deniedTtlMs?: number;
  /** deadline of a review, ms (default {@link SAR_TIMEOUT_MS}) */
  timeoutMs?: number;
  /**
   * Called once for every SubjectAccessReview sent: `read` when a read waits
   * for it, `renewal` when a read past half an allowed answer's TTL sent it
   * in the background ({@link SAR_RENEW_AFTER_SHARE}). The proxy counts them
   * in `emb_proxy_subjectaccessreviews_total{trigger}`.
   */
  onReview?: (trigger: "read" | "renewal") => void;
}

/**
 * Bounds of the memo of prepared requests ({@link Authorizer.authorizeRequest}):
 * entries, bytes (each entry counted by {@link requestMemoEntryBytes}).
 * 1,000 HPA series fit: an HPA read's key (caller number, method, path
 * with a short selector) is ~110 characters, ~370 bytes an entry as counted
 * (~0.37 MB for 1,000). Sized for the series of a usual cluster, not for
 * the largest (issue 11 P5): the memo saves ~6 µs of CPU a read (1.4
 * against 7.5 µs for a cached decision, 200,000 reads of 50 series), ~6 ms
 * a second at 1,000 reads a second, while 10,000 entries held 2.9 MB of
 * live heap (`bench:memory` with `BENCH_HEAP_SNAPSHOT=1`: 30.5 MB against
 * 27.6 with 1,000) and ~3 MB of the proxy's peak RSS (124 MB on average
 * over six runs, 121 over five). With more distinct series than the bound,
 * read round-robin every 15 s, entries are dropped before their next read
 * and each read costs what it costs without the memo.
 */
export const REQUEST_MEMO_BOUNDS = { maxEntries: 1_000, maxBytes: 512 * 1024 } as const;
/**
 * Bounds of the numbering of callers the memo keys use (caller JSON → a
 * number, see {@link Authorizer.authorizeRequest}): entries, bytes (each
 * counted as its JSON text in UTF-16 plus 64). The HPA controller is one
 * caller; anything else reading metrics is a few more.
 */
export const CALLER_NUMBER_BOUNDS = { maxEntries: 1024, maxBytes: 256 * 1024 } as const;
/**
 * Fixed estimate of one memo entry besides its key, bytes: the map slot and
 * recency node (~80), the {@link PreparedRequest} (~48) and its
 * decision-cache key (~48, shared with the decision cache's entry:
 * cache-key.ts `digestKey`). A
 * remembered parsed selector is counted on top ({@link requestMemoEntryBytes}).
 */
export const REQUEST_MEMO_ENTRY_BYTES = 256;

/**
 * Estimated bytes of one memo entry: its key, one byte a character (the key
 * is ASCII: a number, an HTTP method — a token — and a serialized URL path
 * and query, which percent-encode everything else; V8 keeps such a string in
 * one byte a character), {@link REQUEST_MEMO_ENTRY_BYTES}, and the
 * parsed selector when one is remembered (request-info.ts `selectorBytes`).
 */
export function requestMemoEntryBytes(key: string, prepared: { selector?: Selector | null | undefined }): number {
  return key.length + REQUEST_MEMO_ENTRY_BYTES + (prepared.selector ? selectorBytes(prepared.selector) : 0);
}

/**
 * What is remembered of one (caller, method, URL): whether its path is
 * always allowed, whether its attributes are small enough to cache, and
 * (once computed) the decision cache key. The attributes and the review spec
 * themselves are not kept (memory): they are computed again on the rare
 * paths that need them (a review to send, a denial to word).
 */
interface PreparedRequest {
  alwaysAllowed: boolean;
  cacheable: boolean;
  key: string | undefined;
  /**
   * The parsed `labelSelector` (`RequestInfo.labelSelector`), kept only for
   * callers that ask for it (the cluster policy layer is on): undefined =
   * not kept, null = none usable.
   */
  selector: Selector | null | undefined;
}

/** The memo entry of a request's attributes. */
function prepare(info: RequestInfo, withSelector: boolean): PreparedRequest {
  return { alwaysAllowed: ALWAYS_ALLOW_PATHS.has(info.path), cacheable: shouldCache(info), key: undefined, selector: withSelector ? (info.labelSelector ?? null) : undefined };
}


/** Sizes of the decision caches (for /metrics and tests). */
export interface AuthorizerCacheStats {
  entries: number;
  bytes: number;
  maxEntries: number;
  maxBytes: number;
}

/** The delegated authorizer with its decision caches. One instance per proxy. */
export class Authorizer {
  readonly #review: SubjectAccessReviewer;
  readonly #now: () => number;
  readonly #cache: CoalescingCache<SubjectAccessReviewStatus>;
  readonly #anonymousCache: CoalescingCache<SubjectAccessReviewStatus>;
  readonly #allowedTtlMs: number;
  readonly #timeoutMs: number;
  /** counters for /metrics and tests */
  readonly stats = { reviews: 0, renewals: 0, cacheHits: 0, allowed: 0, denied: 0 };
  readonly #onReview: ((trigger: "read" | "renewal") => void) | undefined;
  /** (caller number, method, path + query) → what is remembered of the request (see {@link authorizeRequest}) */
  readonly #memo = new BoundedMap<string, PreparedRequest>({ ...REQUEST_MEMO_BOUNDS, sizeOf: requestMemoEntryBytes });
  /** caller JSON (identity.ts {@link callerKey}) → its number in memo keys; numbers are never re-used */
  readonly #callerNumbers = new BoundedMap<string, number>({ ...CALLER_NUMBER_BOUNDS, sizeOf: (json) => json.length * 2 + 64 });
  #nextCallerNumber = 0;

  constructor(options: AuthorizerOptions) {
    this.#review = options.review;
    this.#now = options.now ?? Date.now;
    this.#allowedTtlMs = options.allowedTtlMs ?? SAR_ALLOWED_TTL_MS;
    const deniedTtlMs = options.deniedTtlMs ?? SAR_DENIED_TTL_MS;
    this.#timeoutMs = options.timeoutMs ?? SAR_TIMEOUT_MS;
    this.#onReview = options.onReview;
    // Every read asks for the allowed TTL; a denial is kept only for its own, shorter one.
    const keepMs = (status: SubjectAccessReviewStatus) => (isAllowed(status) ? Number.POSITIVE_INFINITY : deniedTtlMs);
    const renewAfterMs = (status: SubjectAccessReviewStatus, ttlMs: number) => (isAllowed(status) ? ttlMs * SAR_RENEW_AFTER_SHARE : Number.POSITIVE_INFINITY);
    const common = { loadTimeoutMs: this.#timeoutMs, now: this.#now, keepMs, renewAfterMs };
    this.#cache = new CoalescingCache({ ...SAR_CACHE_BOUNDS, ...common });
    this.#anonymousCache = new CoalescingCache({ ...SAR_ANONYMOUS_CACHE_BOUNDS, ...common });
  }

  /** Entries and bytes held by the caches of authenticated and anonymous callers. */
  cacheStats(): { authenticated: AuthorizerCacheStats; anonymous: AuthorizerCacheStats } {
    return {
      authenticated: { entries: this.#cache.size, bytes: this.#cache.bytes, ...SAR_CACHE_BOUNDS },
      anonymous: { entries: this.#anonymousCache.size, bytes: this.#anonymousCache.bytes, ...SAR_ANONYMOUS_CACHE_BOUNDS },
    };
  }

  /**
   * Decide whether `caller` may make the request `info` describes.
   *
   * @param signal the request's signal: when the client goes away the wait
   *   ends (and the review is cancelled if nobody else waits for it)
   * @throws StatusError 500 when the SubjectAccessReview cannot be made,
   *   fails, or does not answer within the deadline (apiserver answers an
   *   authorizer error with InternalError)
   */
  async decide(caller: Caller, info: RequestInfo, signal?: AbortSignal): Promise<AuthorizationDecision> {
    return this.#decide(caller, prepare(info, false), () => info, signal);
  }

  async #decide(caller: Caller, prepared: PreparedRequest, infoOf: () => RequestInfo, signal?: AbortSignal): Promise<AuthorizationDecision> {
    if (prepared.alwaysAllowed) return carrySelector({ allowed: true, by: "path" }, prepared);
    if (caller.groups.some((g) => ALWAYS_ALLOW_GROUPS.has(g))) return carrySelector({ allowed: true, by: "group" }, prepared);
    let specValue: SubjectAccessReviewSpec | undefined;
    const spec = () => (specValue ??= reviewSpec(caller, infoOf()));
    let sent = false;
    const load = async (loadSignal: AbortSignal): Promise<SubjectAccessReviewStatus> => {
      sent = true;
      this.stats.reviews++;
      return compactStatus(await this.#review(spec(), loadSignal));
    };
    let status: SubjectAccessReviewStatus;
    let outcome: CacheOutcome | undefined;
    try {
      let pending: SubjectAccessReviewStatus | Promise<SubjectAccessReviewStatus>;
      if (prepared.cacheable) {
        const cache = caller.groups.includes("system:unauthenticated") ? this.#anonymousCache : this.#cache;
        const key = (prepared.key ??= digestKey(JSON.stringify(spec())));
        // Allowed answers live allowedTtlMs, denials their shorter keepMs (constructor).
        ({ value: pending, outcome } = cache.get(key, this.#allowedTtlMs, load, signal ? { signal } : {}));
      } else {
        pending = withCallSignal(signal, this.#timeoutMs, (bounded) => untilAborted(load, bounded));
      }
      // Either call runs `load` synchronously when it sends a review (not when the caller has
      // already gone); from a cache hit that review is a background renewal.
      if (sent) this.#reviewed(outcome === "hit" ? "renewal" : "read");
      status = await pending;
    } catch (err) {
      const why = (err as Error)?.name === "TimeoutError" ? `did not answer within ${this.#timeoutMs} ms` : (err as Error)?.message;
      throw internalError(`Internal error occurred: SubjectAccessReview failed: ${why}`, undefined, err);
    }
    const fromCache = outcome === "hit" || outcome === "coalesced";
    if (fromCache) this.stats.cacheHits++;
    const allowed = isAllowed(status);
    if (allowed) this.stats.allowed++;
    else this.stats.denied++;
    return carrySelector({ allowed, by: fromCache ? "cache" : "review", ...(status.reason ? { reason: status.reason } : {}) }, prepared);
  }

  #reviewed(trigger: "read" | "renewal"): void {
    if (trigger === "renewal") this.stats.renewals++;
    this.#onReview?.(trigger);
  }

  /**
   * {@link authorize} for a request given by method and URL: the request's
   * attributes (request-info.ts `requestInfo`, which parses the label
   * selector), the review spec and its cache key are computed once per
   * distinct (caller, method, path + query) — the decision-cache key and two
   * flags are remembered in a {@link BoundedMap} ({@link REQUEST_MEMO_BOUNDS},
   * least recently used dropped first); a remembered request costs building
   * its key and two map lookups, no digest. The memo key is the text
   * `caller-number NUL method NUL path+query`, exact: the caller's whole
   * identity (user, uid, groups, extra: its JSON) is numbered once in a
   * second bounded map ({@link CALLER_NUMBER_BOUNDS}) and a number is never
   * given to another identity (a caller dropped from that map gets a new
   * one, its old entries are never matched again and age out); the number is
   * digits and the method an HTTP token, and the path + query holds no
   * control character (the URL serializer and request-path.ts `joinPath`
   * percent-encode them; Node's HTTP parser refuses them in a request
   * target), so NUL only separates. A parsed target is keyed by its
   * canonical path and its query as received. The memo
   * keeps that text (~110 characters for an HPA read, counted in its bytes),
   * not the caller's JSON per entry. It holds only what is derived from the
   * request, never a decision: every call still goes through the decision
   * cache and its TTLs.
   *
   * @param url the request: its target as the proxy parsed it
   *   (shared/k8s/request-path.ts `parseRequestTarget`, the path decoded
   *   once: the review names the parts every later layer uses), or a URL
   *   (read as apiserver would: request-info.ts `requestInfo`)
   * @param withSelector also return the request's parsed `labelSelector`
   *   ({@link AuthorizationDecision.selector}), remembered with the request:
   *   set when the cluster policy layer is on, so the selector is parsed once
   *   per distinct request; off, nothing more is kept
   * @throws StatusError 400 when the path is not valid percent-encoding; 403; 500 (as {@link authorize})
   */
  async authorizeRequest(caller: Caller, method: string, url: URL | RequestTarget, signal?: AbortSignal, withSelector = false): Promise<AuthorizationDecision> {
    const number = this.#callerNumber(caller);
    const target = url instanceof URL ? `${url.pathname}${url.search}` : `${url.path.canonical}${url.rawQuery === "" ? "" : "?"}${url.rawQuery}`;
    const memoKey = number === undefined ? undefined : `${number}\u0000${method}\u0000${target}`;
    let prepared = memoKey === undefined ? undefined : this.#memo.get(memoKey);
    let info: RequestInfo | undefined;
    if (prepared === undefined || (withSelector && prepared.selector === undefined)) {
      info = requestInfo(method, url);
      prepared = prepare(info, withSelector);
      if (memoKey !== undefined) this.#memo.set(memoKey, prepared);
    }
    const infoOf = () => (info ??= requestInfo(method, url));
    const decision = await this.#decide(caller, prepared, infoOf, signal);
    if (!decision.allowed) throw forbiddenError(caller, infoOf(), decision.reason);
    return decision;
  }

  /**
   * The number of `caller`'s identity in memo keys (a new one for an
   * identity not held); undefined for an identity too large to hold (its
   * requests then bypass the memo rather than fill it with entries never
   * matched again).
   */
  #callerNumber(caller: Caller): number | undefined {
    const json = callerKey(caller);
    let n = this.#callerNumbers.get(json);
    if (n === undefined) {
      n = this.#nextCallerNumber++;
      if (!this.#callerNumbers.set(json, n)) return undefined;
    }
    return n;
  }

  /** Entries and estimated bytes of the memo of prepared requests, and its bounds (the caller numbering, ≤ {@link CALLER_NUMBER_BOUNDS}, is not included). */
  requestMemoStats(): { entries: number; bytes: number; maxEntries: number; maxBytes: number } {
    return { entries: this.#memo.size, bytes: this.#memo.bytes, ...REQUEST_MEMO_BOUNDS };
  }

  /**
   * Decide and throw when denied.
   *
   * @throws StatusError 403 with apiserver's message
   *   (`endpoints/handlers/responsewriters/errors.go` `forbiddenMessage`), or 500
   */
  async authorize(caller: Caller, info: RequestInfo, signal?: AbortSignal): Promise<AuthorizationDecision> {
    const decision = await this.decide(caller, info, signal);
    if (!decision.allowed) throw forbiddenError(caller, info, decision.reason);
    return decision;
  }
}

/** `decision` with the remembered parsed selector, when one was asked for and is usable. */
function carrySelector(decision: AuthorizationDecision, prepared: PreparedRequest): AuthorizationDecision {
  if (prepared.selector) decision.selector = prepared.selector;
  return decision;
}

function isAllowed(status: SubjectAccessReviewStatus): boolean {
  return status.allowed && status.denied !== true;
}

/** The statuses without a reason every review of an HPA read answers: one shared object each, not one a cached decision. */
const ALLOWED: SubjectAccessReviewStatus = Object.freeze({ allowed: true });
const NOT_ALLOWED: SubjectAccessReviewStatus = Object.freeze({ allowed: false });

/** The parts of a status a decision needs, with the reason cut to 1 KiB (it is shown in the 403 message). */
function compactStatus(status: SubjectAccessReviewStatus): SubjectAccessReviewStatus {
  if (status.denied === undefined && !status.reason) return status.allowed === true ? ALLOWED : NOT_ALLOWED;
  return {
    allowed: status.allowed === true,
    ...(status.denied !== undefined ? { denied: status.denied } : {}),
    ...(status.reason ? { reason: status.reason.slice(0, 1024) } : {}),
  };
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
