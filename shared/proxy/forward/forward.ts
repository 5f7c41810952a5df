/**
 * Routing, forwarding and merging: what the proxy does after a request was
 * authenticated and authorized.
 *
 * - Values (`…/namespaces/{ns}/{metric}`): the first route whose pattern
 *   matches the metric name picks the backend, else the pass-through backend,
 *   else 404. Identical reads of the same caller share one backend call while
 *   in flight and re-use a successful answer for min(`cache.ttlSeconds`, the
 *   backend's `Cache-Control: max-age`) — `no-store`/`max-age=0` answers are
 *   never stored (the bridge's freshness contract: its max-age keeps every
 *   item within its rule's `maxAgeSeconds`). The cache key is the sha256 of
 *   the caller's whole identity, the backend and the path + query, so one
 *   caller never receives an answer made for another (a backend's policy may
 *   treat them differently) and a key costs 64 bytes however long the
 *   request; the cache is bounded by `cache.maxEntries` and `cache.maxBytes`.
 * - One attempt for the HPA: no values answer carries `Retry-After` — not the
 *   proxy's own 503s, not a backend's (stripped; its Status body is kept).
 *   client-go retries a 429/5xx carrying `Retry-After` up to 10 times
 *   (`rest/with_retry.go`), holding one of the HPA controller's 5 workers.
 *   Instead the proxy backs off itself: a failed values read is kept for the
 *   backend's own `Retry-After` (clamped to [1 s, 30 s]) or 1 s for timeouts,
 *   unreachable backends, 5xx and invalid answers, so repeated reads of a
 *   failing series do not each hit the backend. 4xx answers other than 429
 *   are not kept. A read nobody waits for any more is cancelled.
 * - Discovery (`/apis/external.metrics.k8s.io/v1beta1`) is answered from
 *   state the proxy holds and never waits on a backend, never answers 503:
 *   the aggregator probes this path (5 s, `Available=False
 *   FailedDiscoveryCheck` on failure) and a failure there stalls namespace
 *   deletion and `kubectl api-resources` for the whole cluster
 *   (kube-aggregator `pkg/controllers/status/remote/remote_available_controller.go`).
 *   The held list merges each backend's last successful APIResourceList,
 *   each resource kept only if the routes send its name to that backend,
 *   deduplicated, sorted, never empty (`externalmetrics` placeholder, as
 *   KEDA lists, before any backend has answered). A backend that fails keeps
 *   the resources it last listed. The list is refreshed in the background by
 *   the readiness loop and by a discovery read older than
 *   `discovery.ttlSeconds`, with the proxy's own identity (discovery carries
 *   no secret: every caller gets the same answer). Each backend's health
 *   (did its last discovery call answer?) is logged once per change and
 *   exported as `emb_proxy_backend_up{backend}`.
 * - A backend answer is checked before it is passed on: a 200 must be an
 *   `ExternalMetricValueList` with at least one item (an empty or malformed
 *   success is a 503 — a failed read is never reported as a value); an error
 *   must be a `metav1.Status` (anything else becomes a 503 naming the
 *   backend); a bridge backend's 401 means the proxy's signature was refused
 *   (a key mismatch) and becomes a 500, never the caller's 401.
 */
import { BoundedMap } from "../../cache/bounded-map.ts";
import { CoalescingCache, type CacheOutcome } from "../../cache/coalescing.ts";
import { callerKey, type Caller } from "../../identity.ts";
import { EXTERNAL_METRICS_GROUP, internalError, MIN_RETRY_AFTER_SECONDS, notFound, serviceUnavailable, StatusError, toStatusError } from "../../k8s/status.ts";
import { GROUP_VERSION, type APIResource, type APIResourceList } from "../../k8s/types.ts";
import { metricKey } from "../../metric-name.ts";
import { BackendError, CUSTOM_GROUP_PATH, DISCOVERY_PATH, type Backend, type BackendRequest, type BackendResponse, type CustomReadParts } from "./backend-contract.ts";
import { CUSTOM_GROUP, CUSTOM_VERSIONS, customApiResourceList, type CustomVersion } from "../../k8s/custom-types.ts";
import { digestKey } from "../cache-key.ts";
import { routeFor, type BackendConfig, type ProxyConfig } from "../config.ts";
import type { Logger } from "../log.ts";
import type { ProxyMetrics } from "../metrics.ts";
import { backoffMs, checkMetricValueList, checkValueList, freshnessMs, ValueListError } from "./values.ts";
import type { ExternalValuesParts } from "../../values/request.ts";

/**
 * Seconds a client should wait after a backend failure: the shared cap
 * (`MIN_RETRY_AFTER_SECONDS`, 1 s), so client-go's up to 10 retries do not
 * stall the HPA controller (see shared/k8s/status.ts).
 */
export const BACKEND_RETRY_AFTER_SECONDS = MIN_RETRY_AFTER_SECONDS;
/** Back-off kept after a failure that carries no hint of its own (a transport error, an invalid answer), ms: 1 s. */
const DEFAULT_BACKOFF_MS = MIN_RETRY_AFTER_SECONDS * 1000;
/**
 * Most resources the held discovery list keeps (backends listing more are
 * cut, with a warning): bounds its memory and the `metric` label of the
 * proxy's metrics, which names only listed metrics.
 */
export const MAX_DISCOVERY_RESOURCES = 10_000;
/** The identity the proxy signs its own discovery requests with (readiness loop and background refresh). */
export const PROBE_CALLER: Caller = Object.freeze({
  user: "system:external-metrics-bridge-proxy:readiness",
  groups: ["system:authenticated"],
  extra: {},
}) as Caller;

/** Bounds of the Forwarder's route memo: entries, bytes (metric keys as UTF-16 plus 64 bytes each). */
export const ROUTE_MEMO_BOUNDS = { maxEntries: 10_000, maxBytes: 2 * 1024 * 1024 } as const;
/** The route memo's value for a metric no route claims (backend names are DNS labels, never this). */
const NO_ROUTE = "\u0000none";

/** An answer ready to send. */
export interface Answer {
  status: number;
  body: string;
  /** extra response headers (never `Retry-After` on a values answer) */
  headers: Record<string, string>;
  /** which backend answered (values) */
  backend?: string;
  /** cache outcome */
  cache?: CacheOutcome;
  /** values: how long this answer may be stored, ms (0 = not stored) */
  storeMs?: number;
}

/** A values read. */
export interface ValuesRequest {
  caller: Caller;
  requestId: string;
  /**
   * the canonical path and query, rebuilt from the request's parsed parts
   * (shared/k8s/request-path.ts `externalMetricsPath` + `canonicalQuery`;
   * app.ts): what is forwarded and what keys the cache, never the URL as
   * received
   */
  pathAndQuery: string;
  /** the same read as typed parts (what the in-process bridge reads; shared/values/request.ts) */
  parts: ExternalValuesParts;
  /** aborts when the caller has gone (the backend call is cancelled when no caller waits) */
  signal?: AbortSignal;
}

/**
 * A custom.metrics.k8s.io values read, its objects resolved (app.ts):
 * forwarded as a signed POST with `body` to a bridge backend, as a GET of
 * `pathAndQuery` to a passthrough adapter (which resolves the objects
 * itself), as typed parts (`read`) to the bridge in this process.
 */
export interface CustomValuesRequest {
  caller: Caller;
  requestId: string;
  /** `customMetricsPath(read)` + the canonical query (`labelSelector`, `metricLabelSelector`) */
  pathAndQuery: string;
  /** the typed parts, objects included */
  read: CustomReadParts;
  /** the JSON body of contract C2 (`{"pods": […]}`, `{"object": {…}}`, `{}`), at most `MAX_SIGNED_BODY_BYTES` */
  body: Uint8Array;
  signal?: AbortSignal;
}

/** Options of {@link Forwarder}. */
export interface ForwarderOptions {
  config: ProxyConfig;
  clients: ReadonlyMap<string, Backend>;
  metrics: ProxyMetrics;
  log: Logger;
  now?: () => number;
}

/** Routes, caches, forwards and merges. One instance per proxy. */
export class Forwarder {
  readonly #config: ProxyConfig;
  readonly #clients: ReadonlyMap<string, Backend>;
  readonly #metrics: ProxyMetrics;
  readonly #log: Logger;
  readonly #values: CoalescingCache<Answer>;
  readonly #now: () => number;
  /** each backend's routed resources from its last successful discovery answer */
  readonly #listed = new Map<string, APIResource[]>();
  /** each backend's health: did its last discovery call answer? (absent = not asked yet) */
  readonly #up = new Map<string, boolean>();
  /** the discovery answer served to every caller (placeholder until a backend answers) */
  #held: Answer = discoveryAnswer([placeholder()]);
  /** when the last discovery refresh started, ms since epoch */
  #refreshedAt = Number.NEGATIVE_INFINITY;
  #refreshing: Promise<boolean> | undefined;
  #closed = false;
  /** metric names of the held discovery list (bounds the `metric` label) */
  #known = new Set<string>();
  /** custom.metrics.k8s.io: per version, each backend's routed resources (`{resource}/{metric}`) from its last successful answer */
  readonly #customListed = new Map<CustomVersion, Map<string, APIResource[]>>(CUSTOM_VERSIONS.map((v) => [v, new Map()]));
  /** custom.metrics.k8s.io: the held APIResourceList answer of each version (placeholder until a backend lists one) */
  readonly #customHeld = new Map<CustomVersion, Answer>(CUSTOM_VERSIONS.map((v) => [v, customDiscoveryAnswer(v, [])]));
  /** metric keys listed by the held custom discovery (the `metric` label of custom reads) */
  #customKnown = new Set<string>();
  /** metric key → backend name (or {@link NO_ROUTE}), see {@link #route} */
  readonly #routes = new BoundedMap<string, string>({ ...ROUTE_MEMO_BOUNDS, sizeOf: (key) => key.length * 2 + 64 });

  constructor(options: ForwarderOptions) {
    this.#config = options.config;
    this.#clients = options.clients;
    this.#metrics = options.metrics;
    this.#log = options.log;
    const cacheOptions = { maxEntries: options.config.cache.maxEntries, ...(options.now ? { now: options.now } : {}) };
    this.#values = new CoalescingCache<Answer>({
      ...cacheOptions,
      maxBytes: options.config.cache.maxBytes,
      sizeOf: (answer) => answerBytes(answer.body),
      // The backend's max-age (no-store, max-age=0 → not kept, only shared while in flight).
      keepMs: (answer) => answer.storeMs ?? Number.POSITIVE_INFINITY,
      failureTtlMs: (err) => (typeof err === "object" && err !== null ? (BACKOFF.get(err) ?? 0) : 0),
    });
    this.#now = options.now ?? Date.now;
  }

  /**
   * The backend the routes pick for `key` (config.ts `routeFor`), remembered
   * per metric key: the RE2 patterns run once per distinct metric, not per
   * read. The memo is bounded ({@link ROUTE_MEMO_BOUNDS}: entries and bytes;
   * least recently used dropped first) and needs no expiry: routes never
   * change while the proxy runs.
   */
  #route(key: string): string | undefined {
    const known = this.#routes.get(key);
    if (known !== undefined) return known === NO_ROUTE ? undefined : known;
    const backend = routeFor(this.#config, key);
    this.#routes.set(key, backend ?? NO_ROUTE);
    return backend;
  }

  /**
   * The type of the backend the routes pick for a metric key (`bridge`,
   * `passthrough`, `inProcess`), undefined when none serves it: a
   * passthrough adapter resolves a custom read's objects itself, so the
   * proxy reads none for it (app.ts).
   */
  backendType(key: string): BackendConfig["type"] | undefined {
    const backend = this.#route(key);
    return backend === undefined ? undefined : this.#clients.get(backend)?.config.type;
  }

  /** Entries and estimated bytes of the route memo (see {@link ROUTE_MEMO_BOUNDS}). */
  get routeMemo(): { entries: number; bytes: number } {
    return { entries: this.#routes.size, bytes: this.#routes.bytes };
  }

  /** The `metric` label for a metric key: the key when discovery listed it (External or custom), else `other`. */
  metricLabel(key: string): string {
    return this.#known.has(key) || this.#customKnown.has(key) ? key : "other";
  }

  /** Cache counters (hits, coalesced, loads, failures) of values reads. */
  get cacheStats() {
    return this.#values.stats;
  }

  /**
   * Read values from the backend the routes pick.
   *
   * @throws StatusError 404 when no route claims the metric and there is no
   *   pass-through backend; 503 (never with Retry-After) for a backend
   *   failure, timeout or invalid answer, naming the backend; 500 when a
   *   bridge backend refused the signature; the backend's own Status
   *   otherwise ({@link BackendStatusError}, its Retry-After dropped); the
   *   caller's `signal.reason` when it aborts
   */
  async values(request: ValuesRequest, metric: { key: string; requested: string }): Promise<Answer> {
    const backend = this.#route(metric.key);
    if (backend === undefined) {
      throw notFound(`external metric "${metric.requested}" is not served here: no route claims it and no passthrough backend is configured`, {
        name: metric.requested,
        group: EXTERNAL_METRICS_GROUP,
        kind: "externalmetrics",
      });
    }
    const client = this.#clients.get(backend)!;
    const key = valuesKey(request.caller, backend, request.pathAndQuery);
    const ttlMs = this.#config.cache.ttlSeconds * 1000;
    const load = async (signal: AbortSignal): Promise<Answer> => {
      const response = await this.#valuesCall(client, { pathAndQuery: request.pathAndQuery, values: request.parts, caller: request.caller, requestId: request.requestId, signal });
      return checkValues(client, response, ttlMs, this.#now());
    };
    const { value: promise, outcome } = this.#values.get(key, ttlMs, load, request.signal ? { signal: request.signal } : {});
    this.#metrics.cache.inc({ result: outcome });
    const answer = await promise;
    return { ...answer, backend, cache: outcome };
  }

  /**
   * Read custom metric values from the backend the routes pick (the same
   * routes as External reads, by the metric's key): a bridge gets the signed
   * POST with the body, a passthrough adapter the GET, the bridge in this
   * process the typed parts. Cached, coalesced and backed off as External
   * reads, keyed by the caller, the backend, the path + query and the body
   * (the pods or object resolved). The answer is checked
   * ({@link checkMetricValueList}: one item for an Object or namespace read).
   *
   * @throws StatusError as {@link values}; 404 naming the custom metric when no backend serves it
   */
  async customValues(request: CustomValuesRequest, metric: { key: string; requested: string }): Promise<Answer> {
    const backend = this.#route(metric.key);
    const target = request.read.target;
    if (backend === undefined) {
      throw notFound(`custom metric "${metric.requested}" for ${target.resource} is not served here: no route claims it and no passthrough backend is configured`, {
        name: metric.requested,
        group: CUSTOM_GROUP,
        kind: target.resource,
      });
    }
    const client = this.#clients.get(backend)!;
    const body = client.config.type === "bridge" ? request.body : undefined;
    const key = digestKey(JSON.stringify([callerKey(request.caller), backend, request.pathAndQuery, body !== undefined || client.config.type === "inProcess" ? Buffer.from(request.body).toString("utf8") : ""]));
    const ttlMs = this.#config.cache.ttlSeconds * 1000;
    const load = async (signal: AbortSignal): Promise<Answer> => {
      const response = await this.#valuesCall(client, {
        pathAndQuery: request.pathAndQuery,
        custom: request.read,
        ...(body !== undefined ? { body } : {}),
        caller: request.caller,
        requestId: request.requestId,
        signal,
      });
      return checkCustom(client, response, target.version, target.shape !== "selected", ttlMs, this.#now());
    };
    const { value: promise, outcome } = this.#values.get(key, ttlMs, load, request.signal ? { signal: request.signal } : {});
    this.#metrics.cache.inc({ result: outcome });
    const answer = await promise;
    return { ...answer, backend, cache: outcome };
  }

  /**
   * The held custom.metrics.k8s.io APIResourceList of `version`: merged from
   * every backend's last answer (each `{resource}/{metric}` kept only when
   * the routes send the metric to that backend), never waiting on one,
   * never an error; the placeholder before any backend listed one. Starts a
   * background refresh as {@link discovery} does.
   */
  customDiscovery(version: CustomVersion, requestId: string): Answer {
    if (this.#now() - this.#refreshedAt >= this.#config.discovery.ttlSeconds * 1000) {
      void this.refreshDiscovery(requestId);
    }
    return { ...this.#customHeld.get(version)!, cache: "hit" };
  }

  /** Values reads answered from the cache: stored answers, stored failures (back-off), loads, in flight. */
  get valuesCache(): { size: number; bytes: number; inflight: number } {
    return { size: this.#values.size, bytes: this.#values.bytes, inflight: this.#values.inflight };
  }

  /**
   * One values call to a backend with metrics and logging. A BackendError
   * becomes a 503 without Retry-After, kept 1 s as back-off (not when the
   * call was cancelled); `unsigned` becomes a 500.
   */
  async #valuesCall(client: Backend, request: BackendRequest): Promise<BackendResponse> {
    try {
      return await this.#send(client, request);
    } catch (err) {
      if (!(err instanceof BackendError)) throw err;
      if (err.kind === "unsigned") throw internalError(err.message);
      throw withBackoff(backendUnavailable(err.message, err), err.kind === "aborted" ? 0 : DEFAULT_BACKOFF_MS);
    }
  }

  /**
   * The held APIResourceList (see the module doc): answered at once, the
   * same for every caller, never an error. Starts a background refresh when
   * the last one started `discovery.ttlSeconds` ago or more.
   *
   * @param _caller the authenticated caller (unused: discovery is the same for everyone)
   * @param requestId logged with the refresh this read may start
   */
  async discovery(_caller: Caller, requestId: string): Promise<Answer> {
    if (this.#now() - this.#refreshedAt >= this.#config.discovery.ttlSeconds * 1000) {
      void this.refreshDiscovery(requestId);
    }
    return { ...this.#held, cache: "hit" };
  }

  /**
   * Ask every backend for its APIResourceList now (with {@link PROBE_CALLER})
   * and update the held list as each answers; a backend that fails keeps the
   * resources it last listed. One refresh at a time: a call while one runs
   * shares it. Each backend call has the backend's timeout (≤ 4.5 s).
   *
   * @returns true when at least one backend answered this round; never rejects
   */
  refreshDiscovery(requestId: string): Promise<boolean> {
    this.#refreshing ??= (async () => {
      this.#refreshedAt = this.#now();
      const answered = await Promise.all(
        [...this.#clients.values()].map(async (client) => {
          try {
            const custom = this.#config.customMetrics?.enabled === true ? this.#refreshCustom(client, requestId) : undefined;
            const response = await this.#call(client, DISCOVERY_PATH, PROBE_CALLER, requestId);
            this.#listed.set(client.name, this.#routed(client, checkDiscovery(client, response)));
            this.#rebuild();
            this.#health(client.name, true, requestId);
            await custom;
            return true;
          } catch (err) {
            // Calls cut by close() at shutdown say nothing about the backend.
            if (!this.#closed) this.#health(client.name, false, requestId, toStatusError(err).message);
            return false;
          }
        }),
      );
      return answered.some(Boolean);
    })().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  /**
   * The readiness loop's discovery refresh ({@link refreshDiscovery}). Its
   * result is informational: readiness never depends on a remote backend.
   *
   * @returns true when at least one backend answered discovery
   */
  probe(requestId: string): Promise<boolean> {
    return this.refreshDiscovery(requestId);
  }

  /** Each backend's health as last seen by discovery: true up, false down, absent = not asked yet. */
  get backendHealth(): ReadonlyMap<string, boolean> {
    return this.#up;
  }

  /** Close backend connections (a discovery refresh still running then changes nothing). */
  close(): void {
    this.#closed = true;
    for (const client of this.#clients.values()) client.close();
  }

  /**
   * Ask `client` for its custom.metrics.k8s.io lists (each version) and keep
   * the routed resources of each answer. A backend that serves no custom
   * metrics (404, or anything else that is not an APIResourceList) lists
   * none; a failure keeps what it last listed. Never rejects, never changes
   * the backend's health (External discovery decides that).
   */
  async #refreshCustom(client: Backend, requestId: string): Promise<void> {
    await Promise.all(
      CUSTOM_VERSIONS.map(async (version) => {
        let response: BackendResponse;
        try {
          response = await this.#send(client, { pathAndQuery: `${CUSTOM_GROUP_PATH}/${version}`, caller: PROBE_CALLER, requestId }, true);
        } catch {
          return; // unreachable: keep what it listed
        }
        const listed = this.#customListed.get(version)!;
        if (response.status === 404) listed.set(client.name, []);
        else if (response.status === 200) {
          const body = parseJson(response.body.toString("utf8")) as APIResourceList | undefined;
          if (body?.kind !== "APIResourceList" || !Array.isArray(body.resources)) return;
          listed.set(client.name, this.#customRouted(client, body));
        } else return;
        this.#rebuildCustom(version);
      }),
    );
  }

  /** The `{resource}/{metric}` entries of a custom list that the routes send to `client`, normalised (the placeholder dropped). */
  #customRouted(client: Backend, list: APIResourceList): APIResource[] {
    const out: APIResource[] = [];
    const seen = new Set<string>();
    for (const resource of list.resources) {
      const name = resource?.name;
      if (typeof name !== "string" || seen.has(name)) continue;
      const slash = name.indexOf("/");
      if (slash <= 0 || slash !== name.lastIndexOf("/")) continue;
      let key: string;
      try {
        key = metricKey(name.slice(slash + 1));
      } catch {
        continue;
      }
      if (routeFor(this.#config, key) !== client.name) continue;
      seen.add(name);
      out.push({ name, singularName: "", namespaced: resource.namespaced ?? true, kind: "MetricValueList", verbs: ["get"] });
    }
    return out;
  }

  /** Merge every backend's custom resources of `version` (config order, first name wins) into its held answer. */
  #rebuildCustom(version: CustomVersion): void {
    const byName = new Map<string, APIResource>();
    for (const client of this.#clients.values()) {
      for (const resource of this.#customListed.get(version)!.get(client.name) ?? []) if (!byName.has(resource.name)) byName.set(resource.name, resource);
    }
    const names = [...byName.keys()].sort().slice(0, MAX_DISCOVERY_RESOURCES);
    const pairs = names.map((n) => {
      const r = byName.get(n)!;
      const slash = n.indexOf("/");
      return { resource: n.slice(0, slash), metric: n.slice(slash + 1), namespaced: r.namespaced };
    });
    let answer: Answer;
    try {
      answer = customDiscoveryAnswer(version, pairs);
    } catch (err) {
      this.#log({ level: "warn", msg: "custom metrics discovery from the backends cannot be merged; keeping the list held", error: (err as Error).message });
      return;
    }
    this.#customHeld.set(version, answer);
    const known = new Set<string>();
    for (const v of CUSTOM_VERSIONS) for (const list of this.#customListed.get(v)!.values()) for (const r of list) known.add(metricKey(r.name.slice(r.name.indexOf("/") + 1)));
    this.#customKnown = known;
  }

  /** The resources of `list` that the routes send to `client`, normalised. */
  #routed(client: Backend, list: APIResourceList): APIResource[] {
    const out: APIResource[] = [];
    const seen = new Set<string>();
    for (const resource of list.resources) {
      if (typeof resource?.name !== "string" || seen.has(resource.name)) continue;
      let key: string;
      try {
        key = metricKey(resource.name);
      } catch {
        continue;
      }
      if (routeFor(this.#config, key) !== client.name) continue;
      seen.add(resource.name);
      out.push({
        name: resource.name,
        singularName: resource.singularName ?? "",
        namespaced: resource.namespaced ?? true,
        kind: resource.kind ?? "ExternalMetricValueList",
        verbs: Array.isArray(resource.verbs) && resource.verbs.length > 0 ? resource.verbs : ["get"],
      });
    }
    return out;
  }

  /** Merge every backend's last listed resources (config order, first name wins) into the held answer. */
  #rebuild(): void {
    const byName = new Map<string, APIResource>();
    for (const client of this.#clients.values()) {
      for (const resource of this.#listed.get(client.name) ?? []) if (!byName.has(resource.name)) byName.set(resource.name, resource);
    }
    let names = [...byName.keys()].sort();
    if (names.length > MAX_DISCOVERY_RESOURCES) {
      this.#log({ level: "warn", msg: `backends list ${names.length} metrics; discovery keeps the first ${MAX_DISCOVERY_RESOURCES}` });
      names = names.slice(0, MAX_DISCOVERY_RESOURCES);
    }
    this.#known = new Set(names.map((n) => metricKey(n)));
    this.#held = discoveryAnswer(names.length > 0 ? names.map((n) => byName.get(n)!) : [placeholder()]);
  }

  /** Record a backend's health; log and export it only when it changes. */
  #health(backend: string, up: boolean, requestId: string, error?: string): void {
    this.#metrics.backendUp.set({ backend }, up ? 1 : 0);
    const before = this.#up.get(backend);
    if (before === up) return;
    this.#up.set(backend, up);
    if (up) {
      this.#log({ level: "info", msg: before === undefined ? "backend answers discovery" : "backend answers discovery again", backend, requestId });
    } else {
      const kept = this.#listed.get(backend)?.length ?? 0;
      this.#log({ level: "warn", msg: "backend does not answer discovery; discovery keeps what it last listed", backend, requestId, error, keptResources: kept });
    }
  }

  /** One discovery call with metrics; BackendErrors become Status errors (logged by the caller once per health change). */
  async #call(client: Backend, pathAndQuery: string, caller: Caller, requestId: string): Promise<BackendResponse> {
    try {
      return await this.#send(client, { pathAndQuery, caller, requestId }, true);
    } catch (err) {
      if (!(err instanceof BackendError)) throw err;
      if (err.kind === "unsigned") throw internalError(err.message);
      throw serviceUnavailable(err.message, BACKEND_RETRY_AFTER_SECONDS, undefined, err);
    }
  }

  /**
   * One backend call with its metrics (requests by code or failure kind,
   * errors, duration) and, unless `quiet`, a log line for a failure.
   *
   * @throws BackendError as {@link Backend.get} does, after counting it
   */
  async #send(client: Backend, request: BackendRequest, quiet = false): Promise<BackendResponse> {
    const started = performance.now();
    try {
      const response = await client.get(request);
      this.#metrics.backendRequests.inc({ backend: client.name, code: String(response.status) });
      return response;
    } catch (err) {
      if (err instanceof BackendError) {
        this.#metrics.backendRequests.inc({ backend: client.name, code: "none" }); // no HTTP answer: the kind is emb_proxy_backend_errors_total{kind}
        this.#metrics.backendErrors.inc({ backend: client.name, kind: err.kind });
        if (!quiet) this.#log({ level: "warn", msg: "backend call failed", requestId: request.requestId, backend: client.name, kind: err.kind, error: err.message });
      }
      throw err;
    } finally {
      this.#metrics.backendDuration.observe({ backend: client.name }, (performance.now() - started) / 1000);
    }
  }
}

/**
 * A `metav1.Status` failure from a backend, passed on with its code and its
 * body unchanged. A values answer never carries `Retry-After` (the backend's
 * hint is the proxy's back-off, not the HPA's: see the module doc): app.ts
 * `send()` drops it from every values answer, whatever its spelling.
 */
export class BackendStatusError extends StatusError {
  readonly backend: string;
  readonly passHeaders: Record<string, string>;
  readonly body: string;
  constructor(backend: string, status: StatusError, body: string, headers: Record<string, string> = {}) {
    super(status.code, status.message, status.details);
    this.backend = backend;
    this.body = body;
    this.passHeaders = headers;
  }
}

/** How long each failed values read is kept as back-off, ms (read by the cache's failureTtlMs). */
const BACKOFF = new WeakMap<object, number>();

/** Tag `err` with a back-off (ms; 0 = not kept) and return it. */
function withBackoff<E extends object>(err: E, ms: number): E {
  if (ms > 0) BACKOFF.set(err, ms);
  return err;
}

/**
 * 503 ServiceUnavailable for a backend that failed, timed out or answered
 * something that cannot be passed on — without `Retry-After`, so client-go
 * makes one attempt (see the module doc).
 */
function backendUnavailable(message: string, cause?: unknown): StatusError {
  return new StatusError(503, message, undefined, cause === undefined ? undefined : { cause });
}

/** Any character outside Latin-1: V8 then holds the whole string with two bytes a character. */
const TWO_BYTE = /[^\u0000-\u00ff]/;

/**
 * Estimated bytes of a stored values answer (the cache's `sizeOf`; the cache
 * adds its key, twice its length, and 64 bytes): the body as V8 holds it —
 * one byte a character when every character is Latin-1 (a bridge's JSON is
 * ASCII), else two — plus 128 bytes for the {@link Answer}, its headers
 * object and its numbers. Measured in a heap snapshot of 10,000 cached
 * 3-item answers (issue 11 P5): ~0.7 KB an entry, which the earlier
 * `length × 2 + 256` counted as ~1.3 KB.
 */
export function answerBytes(body: string): number {
  return (TWO_BYTE.test(body) ? body.length * 2 : body.length) + 128;
}

/**
 * The values cache key: the sha256 of the caller's whole identity, the
 * backend and the path + query (cache-key.ts `digestKey`).
 */
export function valuesKey(caller: Caller, backend: string, pathAndQuery: string): string {
  return digestKey(JSON.stringify([callerKey(caller), backend, pathAndQuery]));
}

/**
 * Validate a values answer (forward/values.ts `checkValueList`) and say
 * how long it may be stored (`freshnessMs`: min(`ttlMs`, the backend's
 * max-age); `no-store` → 0).
 *
 * @throws StatusError 503 naming the backend and the bad field, kept 1 s as
 *   back-off; otherwise as {@link backendFailure}
 */
function checkValues(client: Backend, response: BackendResponse, ttlMs: number, nowMs: number): Answer {
  const text = response.body.toString("utf8");
  if (response.status !== 200) throw backendFailure(client, response, text, nowMs);
  try {
    checkValueList(text);
  } catch (err) {
    if (!(err instanceof ValueListError)) throw err;
    const field = err.field ? ` (field ${err.field})` : "";
    throw withBackoff(backendUnavailable(`backend ${client.name} answered 200 ${err.message}${field}; no value is reported`), DEFAULT_BACKOFF_MS);
  }
  const storeMs = freshnessMs(response.headers["cache-control"], ttlMs);
  return { status: 200, body: text, headers: NO_HEADERS, storeMs };
}

/** The headers of a stored values answer: none of the backend's (the proxy sets its own); one frozen object for every entry. */
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** Validate a discovery answer. @throws StatusError */
function checkDiscovery(client: Backend, response: BackendResponse): APIResourceList {
  const text = response.body.toString("utf8");
  if (response.status !== 200) throw backendFailure(client, response, text);
  const body = parseJson(text) as APIResourceList | undefined;
  if (body?.kind !== "APIResourceList" || !Array.isArray(body.resources)) {
    throw serviceUnavailable(`backend ${client.name} answered discovery without an APIResourceList`, BACKEND_RETRY_AFTER_SECONDS);
  }
  return body;
}

/**
 * A backend's non-200 answer as the error to answer with: a bridge's 401 is
 * a 500 (the proxy's signature was refused: a key mismatch, not the
 * caller's fault); a `metav1.Status` with a code the API uses is passed on
 * ({@link BackendStatusError}, without `Retry-After`); anything else is a
 * 503 naming the backend. 429 and 5xx answers are kept as back-off for the
 * backend's `Retry-After` (else the Status's `details.retryAfterSeconds`,
 * else 1 s; clamped to [1 s, 30 s]); other 4xx are not kept.
 */
function backendFailure(client: Backend, response: BackendResponse, text: string, nowMs = Date.now()): StatusError {
  const body = parseJson(text) as { kind?: unknown; status?: unknown; message?: unknown; code?: unknown; details?: unknown } | undefined;
  const isStatus = body?.kind === "Status" && body.status === "Failure" && typeof body.message === "string";
  if (client.config.type === "bridge" && response.status === 401) {
    return internalError(
      `backend ${client.name} refused the proxy's request signature (${isStatus ? String(body!.message) : "401"}); check that BRIDGE_SIGNING_KEYS match on the proxy and the function`,
    );
  }
  const transient = response.status === 429 || response.status >= 500;
  const details = isStatus && typeof body!.details === "object" && body!.details !== null ? (body!.details as StatusError["details"]) : undefined;
  const backoff = transient ? backoffMs(response.headers["retry-after"], details?.retryAfterSeconds, nowMs) : 0;
  const code = response.status as StatusError["code"];
  if (!isStatus || !(code in { 400: 1, 403: 1, 404: 1, 405: 1, 406: 1, 429: 1, 500: 1, 503: 1, 504: 1 })) {
    return withBackoff(
      backendUnavailable(`backend ${client.name} answered HTTP ${response.status} without a metav1.Status${text ? `: ${text.slice(0, 200)}` : ""}`),
      backoff,
    );
  }
  const status = new StatusError(code, String(body!.message), details ?? undefined);
  return withBackoff(new BackendStatusError(client.name, status, text), backoff);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}


function discoveryAnswer(resources: APIResource[]): Answer {
  const list: APIResourceList = { kind: "APIResourceList", apiVersion: "v1", groupVersion: GROUP_VERSION, resources };
  return { status: 200, body: JSON.stringify(list), headers: {} };
}

/** The custom APIResourceList answer of `version` (shared/k8s/custom-types.ts `customApiResourceList`: placeholder when empty). @throws Error as that does */
function customDiscoveryAnswer(version: CustomVersion, pairs: { resource: string; metric: string; namespaced: boolean }[]): Answer {
  return { status: 200, body: JSON.stringify(customApiResourceList(version, pairs)), headers: {} };
}

/**
 * Validate a custom values answer ({@link checkMetricValueList}) and say how
 * long it may be stored, as {@link checkValues}.
 *
 * @throws StatusError 503 naming the backend and the bad field (no Retry-After, kept 1 s as back-off); otherwise as {@link backendFailure}
 */
function checkCustom(client: Backend, response: BackendResponse, version: CustomVersion, exactlyOne: boolean, ttlMs: number, nowMs: number): Answer {
  const text = response.body.toString("utf8");
  if (response.status !== 200) throw backendFailure(client, response, text, nowMs);
  try {
    checkMetricValueList(text, version, exactlyOne);
  } catch (err) {
    if (!(err instanceof ValueListError)) throw err;
    const field = err.field ? ` (field ${err.field})` : "";
    throw withBackoff(backendUnavailable(`backend ${client.name} answered 200 ${err.message}${field}; no value is reported`), DEFAULT_BACKOFF_MS);
  }
  return { status: 200, body: text, headers: NO_HEADERS, storeMs: freshnessMs(response.headers["cache-control"], ttlMs) };
}

function placeholder(): APIResource {
  return { name: "externalmetrics", singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] };
}
