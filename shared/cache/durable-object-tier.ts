/**
 * The shared read tier on Cloudflare Durable Objects (`sharedCache: { type:
 * durableObject }`, issue 28): one backend call per series for every
 * isolate of a Worker, wherever Cloudflare runs them.
 *
 * Two halves, both here:
 *
 * - {@link DurableObjectTier}, the isolate's {@link SharedTier}: a local
 *   cache miss (`../providers/series.ts`) asks the Durable Object that holds
 *   the series — `idFromName("<provider>/<shard>")`, shard = FNV-1a of the
 *   tier key mod `shards` ({@link shardOf}), so one provider instance's
 *   series spread over `shards` objects instead of one global object — with
 *   the tier's own deadline (`timeoutMs`). The object answers a reading or
 *   the Status its load failed with; the isolate then checks the reading's
 *   age as for a local read (shared/values/answer.ts: `maxAgeSeconds`).
 *   When the object is unreachable, slow, refuses, or runs another config,
 *   the isolate calls `load` itself: `direct`, with the reason (the
 *   provider counts and logs it: `../providers/series.ts`).
 * - {@link SeriesTierObject}, the Durable Object: it builds the same bridge
 *   config's providers as the Worker (`BRIDGE_CONFIG`, or the bundled
 *   text; `functions/worker.ts` `SeriesTier`) and answers each series from
 *   ITS {@link CoalescingCache}, whose loads go through the provider's own
 *   batcher, so concurrent isolates share one backend call and batch
 *   together. Refresh-ahead (`./refresh-ahead.ts`) runs from the object's
 *   alarm (`state.storage.setAlarm`): shortly before a value's TTL ends, the
 *   series read since it was loaded are reloaded together, so readers keep
 *   finding a fresh value; a series not read since is dropped. Everything is
 *   in memory, bounded by entries and bytes; nothing is written to the
 *   object's storage but the alarm. An object that restarts starts empty:
 *   the next read loads again (a value is never invented, nor carried over).
 *
 * The wire (isolate → object, `POST https://series-tier/read`, JSON body of
 * at most {@link MAX_TIER_BODY_BYTES}): `{ config, key, ttlMs, series }`,
 * `config` the SHA-256 (hex, 16 digits) of the config text the isolate
 * built from (a different one — a deploy rolling out — is a 409: the
 * isolate reads directly). Answer 200: `{ ok: true, source, reading: {
 * value: { m, e }, timestamp, windowSeconds? } }` (`m` the Decimal mantissa
 * as a string) or `{ ok: false, status: { code, message, details?, noData?
 * } }` (the backend's failure, returned as a failure); any other answer is
 * the tier failing.
 */
import { readBounded } from "../bounded-body.ts";
import { loadConfig, type BridgeConfig } from "../config/config.ts";
import { fromLabelSelector } from "../k8s/selector.ts";
import { StatusError, type StatusCode, type StatusDetails } from "../k8s/status.ts";
import { backendFailureTtlMs } from "../providers/backoff.ts";
import { REFRESH_AHEAD_MAX_BYTES, REFRESH_AHEAD_MAX_SERIES } from "../providers/refresh-ahead.ts";
import { buildProviders, loadProviderModules } from "../providers/registry.ts";
import { emptyOutcome, isNoData, readingBytes, type Reading } from "../providers/series.ts";
import type { MetricRule, Provider, RuntimeEnv } from "../providers/types.ts";
import { BACKEND_LOAD_TIMEOUT_MS } from "../deadline.ts";
import { CoalescingCache, ruleCacheTtlMs } from "./coalescing.ts";
import type { SharedCacheConfig, SharedTier, TierOutcome, TierRequest, TierSeries, TierSource } from "./shared-tier.ts";

/** Largest request or answer body between an isolate and the object, bytes (a tier key and labels are ≤ a few KiB). */
export const MAX_TIER_BODY_BYTES = 64 * 1024;

/** Most series one object caches (and remembers for refresh-ahead); the least recently used go first. */
export const TIER_MAX_SERIES = REFRESH_AHEAD_MAX_SERIES;

/** Most bytes of cached keys and readings in one object (a Durable Object has 128 MB of memory). */
export const TIER_MAX_BYTES = 16 * 1024 * 1024;

/** The URL an isolate posts a read to (the host is not resolved: a stub's fetch goes to its object). */
export const TIER_READ_URL = "https://series-tier/read";

/** The `durableObject` variant of `sharedCache:`. */
export type DurableObjectCacheConfig = Extract<SharedCacheConfig, { type: "durableObject" }>;

/** What the tier uses of a Durable Object namespace binding (`env[binding]`). */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(input: string, init?: RequestInit): Promise<Response> };
}

/** What the object uses of its `DurableObjectState`: the alarm of its storage. */
export interface DurableObjectStateLike {
  storage: {
    setAlarm(scheduledTime: number): Promise<void>;
    deleteAlarm(): Promise<void>;
  };
}

/** Reads through a tier, by where they came from (the isolate's own counters, beside the provider's `emb_bridge_tier_reads_total`). */
export type TierCounts = Record<TierSource, number>;

/**
 * The shard of `key` among `shards`: FNV-1a (32-bit) over its UTF-16 code
 * units, mod `shards`. Stable across isolates, deploys and platforms.
 */
export function shardOf(key: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shards;
}

/** SHA-256 of a config text, hex, 16 digits: whether the isolate and the object run the same config. */
export async function configTextDigest(text: string): Promise<string> {
  const bytes = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(bytes.subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Options of {@link DurableObjectTier}. */
export interface DurableObjectTierOptions {
  /** the provider instance's name */
  provider: string;
  config: DurableObjectCacheConfig;
  /** {@link configTextDigest} of the config text the isolate built from */
  configDigest: string;
  /** the Worker's current bindings (looked up on every read: a binding may change between requests) */
  bindings: () => Readonly<Record<string, unknown>>;
  /** the isolate's counters, shared by every tier of the isolate (default: this tier's own) */
  counts?: TierCounts;
}

/** Fresh zeroed {@link TierCounts}. */
export function newTierCounts(): TierCounts {
  return { "tier-hit": 0, "tier-load": 0, "tier-wait": 0, direct: 0 };
}

/** The tier failed (unreachable, slow, refusing, another config): the isolate reads directly. */
class TierUnavailable extends Error {
  override name = "TierUnavailable";
}

/**
 * The isolate's {@link SharedTier} on a Durable Object namespace (see the
 * module doc). `read` never turns a failure into a value: the object's
 * failure is thrown as the StatusError it was; the tier's own failure is a
 * `direct` read through `load`.
 */
export class DurableObjectTier implements SharedTier {
  readonly type = "durableObject";
  readonly counts: TierCounts;
  readonly #options: DurableObjectTierOptions;

  constructor(options: DurableObjectTierOptions) {
    this.#options = options;
    this.counts = options.counts ?? newTierCounts();
  }

  async read(request: TierRequest): Promise<TierOutcome> {
    let answer: TierAnswer;
    try {
      answer = await this.#ask(request);
    } catch (err) {
      // the reader gave up: no direct read for nobody
      if (request.signal.aborted) throw request.signal.reason;
      this.counts.direct++;
      // (the provider counts it and logs the reason, rate-limited: `SeriesProvider`, ../providers/series.ts)
      const reason = `Durable Object binding ${this.#options.config.binding}: ${(err as Error)?.message ?? String(err)}`;
      return { reading: await request.load(request.signal), source: "direct", reason };
    }
    if (!answer.ok) throw statusOf(answer.status);
    this.counts[answer.source]++;
    return { reading: readingOf(answer.reading), source: answer.source };
  }

  /** One call to the series' object, within `timeoutMs` (answer body included). @throws TierUnavailable, or the reader's abort */
  async #ask(request: TierRequest): Promise<TierAnswer> {
    const { provider, config, configDigest, bindings } = this.#options;
    const namespace = bindings()[config.binding] as Partial<DurableObjectNamespaceLike> | undefined;
    if (typeof namespace?.idFromName !== "function" || typeof namespace.get !== "function") {
      throw new TierUnavailable(`the Worker binding ${config.binding} is not a Durable Object namespace (wrangler.toml [[durable_objects.bindings]])`);
    }
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: () => void = () => {};
    // the reader gives up: stop waiting at once (the object's load goes on for the next reader)
    const abandoned = new Promise<never>((_, reject) => {
      onAbort = () => {
        controller.abort(request.signal.reason);
        reject(request.signal.reason);
      };
    });
    if (request.signal.aborted) onAbort();
    else request.signal.addEventListener("abort", onAbort, { once: true });
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const e = new TierUnavailable(`no answer within ${config.timeoutMs} ms`);
        controller.abort(e);
        reject(e);
      }, config.timeoutMs);
    });
    try {
      const call = (async () => {
        const id = namespace.idFromName!(`${provider}/${shardOf(request.key, config.shards)}`);
        const stub = namespace.get!(id);
        const body: TierWireRequest = { config: configDigest, key: request.key, ttlMs: request.ttlMs, series: request.series };
        const res = await stub.fetch(TIER_READ_URL, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: controller.signal });
        const bytes = await readBounded(res.body, MAX_TIER_BODY_BYTES, () => new TierUnavailable(`answer larger than ${MAX_TIER_BODY_BYTES} bytes`));
        const text = new TextDecoder().decode(bytes);
        if (res.status !== 200) throw new TierUnavailable(`the object answered ${res.status}: ${text.slice(0, 300)}`);
        return parseAnswer(text);
      })();
      call.catch(() => {}); // settled after the deadline: nobody reads it
      return await Promise.race([call, deadline, abandoned]);
    } catch (err) {
      if (request.signal.aborted) throw request.signal.reason;
      throw err instanceof TierUnavailable ? err : new TierUnavailable((err as Error)?.message ?? String(err));
    } finally {
      clearTimeout(timer);
      request.signal.removeEventListener("abort", onAbort);
    }
  }
}

/** The body an isolate posts. */
interface TierWireRequest {
  config: string;
  key: string;
  ttlMs: number;
  series: TierSeries;
}

/** A reading on the wire: the Decimal's mantissa as a string. */
interface WireReading {
  value: { m: string; e: number };
  timestamp: number;
  windowSeconds?: number;
}

/** A failure on the wire: what the isolate needs to throw the same StatusError. */
interface WireStatus {
  code: number;
  message: string;
  details?: StatusDetails;
  /** the backend's complete answer had no data (`emptyOutcome`): a custom Pods read may omit the series */
  noData?: boolean;
}

type TierAnswer = { ok: true; source: "tier-hit" | "tier-wait"; reading: WireReading } | { ok: false; status: WireStatus };

function wireReading(r: Reading): WireReading {
  return { value: { m: r.value.mantissa.toString(), e: r.value.exponent }, timestamp: r.timestamp, ...(r.windowSeconds !== undefined ? { windowSeconds: r.windowSeconds } : {}) };
}

function readingOf(w: WireReading): Reading {
  return { value: { mantissa: BigInt(w.value.m), exponent: w.value.e }, timestamp: w.timestamp, ...(w.windowSeconds !== undefined ? { windowSeconds: w.windowSeconds } : {}) };
}

/** The StatusError of a failure the object returned (a no-data failure marked as `emptyOutcome` marks it). */
function statusOf(s: WireStatus): StatusError {
  if (s.noData && (s.code === 404 || s.code === 503)) {
    const outcome = emptyOutcome(s.code === 404 ? "notFound" : "unavailable", s.message, String(s.details?.kind ?? "series"), 0);
    if (!outcome.ok && outcome.error instanceof StatusError) return outcome.error;
  }
  return new StatusError(s.code as StatusCode, s.message, s.details);
}

/** The object's answer, checked. @throws TierUnavailable when it is not one */
function parseAnswer(text: string): TierAnswer {
  let v: any;
  try {
    v = JSON.parse(text);
  } catch {
    throw new TierUnavailable("the object's answer is not JSON");
  }
  if (v?.ok === true && (v.source === "tier-hit" || v.source === "tier-wait") && typeof v.reading?.value?.m === "string" && /^-?\d{1,64}$/.test(v.reading.value.m) &&
      Number.isSafeInteger(v.reading.value.e) && Number.isFinite(v.reading.timestamp)) {
    return v as TierAnswer;
  }
  if (v?.ok === false && Number.isInteger(v.status?.code) && v.status.code >= 400 && v.status.code <= 599 && typeof v.status.message === "string") return v as TierAnswer;
  throw new TierUnavailable("the object's answer has no reading and no status");
}

/** The config text the object builds from (the Worker's `BRIDGE_CONFIG` binding, else its bundled text), or undefined when it has none. */
export type ConfigSource = (env: Readonly<Record<string, unknown>>) => { text: string; source: string } | undefined;

/** What the object built from a config text. */
interface Built {
  text: string;
  digest: string;
  config: BridgeConfig;
  providers: Map<string, Provider>;
  /** rules by their index in the config file (External and custom) */
  rules: Map<number, MetricRule>;
  /** each rule with `cacheTTLSeconds: 0`: the provider coalesces and batches, this object's cache keeps values */
  uncached: WeakMap<MetricRule, MetricRule>;
}

/**
 * The Durable Object of the tier (see the module doc): `fetch` answers a
 * read (`POST /read`), `alarm` runs refresh-ahead rounds. The Worker entry
 * exports a subclass that passes its config source (`functions/worker.ts`
 * `SeriesTier`; wrangler.toml `[[durable_objects.bindings]]`).
 */
export class SeriesTierObject {
  readonly #state: DurableObjectStateLike;
  readonly #env: Readonly<Record<string, unknown>>;
  readonly #source: ConfigSource;
  #built: { text: string; result: Promise<Built> } | undefined;
  /** the refresh round the alarm runs (set by the cache's refresh-ahead through `setTimer`) */
  #pendingRound: (() => void) | undefined;
  /** loads started and not settled: the alarm waits for the round's */
  readonly #loads = new Set<Promise<unknown>>();
  readonly cache: CoalescingCache<Reading>;

  constructor(state: DurableObjectStateLike, env: Readonly<Record<string, unknown>>, source: ConfigSource) {
    this.#state = state;
    this.#env = env;
    this.#source = source;
    this.cache = new CoalescingCache<Reading>({
      maxEntries: TIER_MAX_SERIES,
      maxBytes: TIER_MAX_BYTES,
      sizeOf: readingBytes,
      loadTimeoutMs: BACKEND_LOAD_TIMEOUT_MS,
      failureTtlMs: backendFailureTtlMs,
      refreshAhead: { maxKeys: TIER_MAX_SERIES, maxBytes: REFRESH_AHEAD_MAX_BYTES, setTimer: (run, ms) => this.#setAlarm(run, ms) },
    });
  }

  /** Refresh-ahead's timer as the object's alarm (one per object: the cache arms one timer at a time). */
  #setAlarm(run: () => void, ms: number): () => void {
    this.#pendingRound = run;
    void this.#state.storage.setAlarm(Date.now() + Math.max(0, ms)).catch(() => {});
    return () => {
      if (this.#pendingRound !== run) return;
      this.#pendingRound = undefined;
      void this.#state.storage.deleteAlarm().catch(() => {});
    };
  }

  /** The alarm: run the due refresh round and wait for its loads (each within the load deadline). An object restarted since has no round: nothing happens. */
  async alarm(): Promise<void> {
    const run = this.#pendingRound;
    this.#pendingRound = undefined;
    run?.();
    await Promise.allSettled([...this.#loads]);
  }

  /** The providers built from the current config text (once per text; a failure is remembered for it). */
  #bridge(): Promise<Built> {
    const found = this.#source(this.#env);
    if (found === undefined) return Promise.reject(new Error("the object has no config (BRIDGE_CONFIG binding or bundled config)"));
    if (this.#built?.text === found.text) return this.#built.result;
    const build = async (): Promise<Built> => {
      const { config } = loadConfig(found.text, found.source);
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(this.#env)) if (typeof v === "string") env[k] = v;
      // no shared tier here: this object's providers read the backend themselves
      const runtime: RuntimeEnv = { env, now: () => Date.now(), longLived: false };
      await loadProviderModules(config.providers);
      const providers = buildProviders(config.providers, runtime);
      const rules = new Map<number, MetricRule>();
      for (const rule of [...config.metrics, ...config.customMetrics]) if (rule.index !== undefined) rules.set(rule.index, rule);
      return { text: found.text, digest: await configTextDigest(found.text), config, providers, rules, uncached: new WeakMap() };
    };
    this.#built = { text: found.text, result: build() };
    return this.#built.result;
  }

  async fetch(request: Request): Promise<Response> {
    if (request.method !== "POST" || new URL(request.url).pathname !== "/read") return reply(404, { error: "not found" });
    const length = Number(request.headers.get("content-length") ?? "0");
    if (length > MAX_TIER_BODY_BYTES) return reply(413, { error: `body larger than ${MAX_TIER_BODY_BYTES} bytes` });
    let wire: TierWireRequest;
    try {
      const bytes = await readBounded(request.body, MAX_TIER_BODY_BYTES, () => new RangeError(`body larger than ${MAX_TIER_BODY_BYTES} bytes`));
      wire = checkRequest(JSON.parse(new TextDecoder().decode(bytes)));
    } catch (err) {
      return reply(err instanceof RangeError ? 413 : 400, { error: (err as Error).message });
    }
    let built: Built;
    try {
      built = await this.#bridge();
    } catch (err) {
      return reply(500, { error: `the object's config failed: ${(err as Error)?.message ?? String(err)}` });
    }
    if (built.digest !== wire.config) return reply(409, { error: `the object runs config ${built.digest}, the isolate ${wire.config}` });
    const { series } = wire;
    const rule = built.rules.get(series.ruleIndex);
    const provider = built.providers.get(series.provider);
    if (rule === undefined || provider === undefined || rule.provider !== series.provider) {
      return reply(400, { error: `no rule ${series.ruleIndex} of provider ${series.provider} in the object's config` });
    }
    let uncached = built.uncached.get(rule);
    if (uncached === undefined) built.uncached.set(rule, (uncached = { ...rule, cacheTTLSeconds: 0 }));
    const ttlMs = Math.min(wire.ttlMs, ruleCacheTtlMs(rule));
    const target = uncached;
    const load = (signal: AbortSignal): Promise<Reading> => {
      const p = (async () => {
        const selector = fromLabelSelector({ matchLabels: { ...series.labels } });
        const found = await provider.query({ rule: target, selector, namespace: series.namespace, signal });
        if (found.length !== 1) throw new Error(`the series' labels named ${found.length} series`);
        const { labels: _labels, ...reading } = found[0]!;
        return reading;
      })();
      this.#loads.add(p);
      void p.catch(() => {}).finally(() => this.#loads.delete(p));
      return p;
    };
    try {
      const read = this.cache.get(wire.key, ttlMs, load);
      const reading = read.outcome === "hit" ? read.value : await read.value;
      return reply(200, { ok: true, source: read.outcome === "hit" ? "tier-hit" : "tier-wait", reading: wireReading(reading) } satisfies TierAnswer);
    } catch (err) {
      if (!(err instanceof StatusError)) return reply(503, { error: `the object's load failed: ${(err as Error)?.message ?? String(err)}` });
      const status: WireStatus = { code: err.code, message: err.message, ...(err.details !== undefined ? { details: err.details } : {}), ...(isNoData(err) ? { noData: true } : {}) };
      return reply(200, { ok: false, status } satisfies TierAnswer);
    }
  }
}

function reply(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/** The isolate's request, checked (sizes are bounded by the body limit). @throws Error naming what is wrong */
function checkRequest(v: any): TierWireRequest {
  const s = v?.series;
  if (typeof v?.config !== "string" || typeof v.key !== "string" || v.key.length === 0 || !Number.isFinite(v.ttlMs) || v.ttlMs < 0) throw new Error("config, key and ttlMs are required");
  if (typeof s?.provider !== "string" || !Number.isInteger(s.ruleIndex) || typeof s.namespace !== "string" || typeof s.labels !== "object" || s.labels === null) {
    throw new Error("series needs provider, ruleIndex, labels and namespace");
  }
  for (const value of Object.values(s.labels)) if (typeof value !== "string") throw new Error("series labels must be strings");
  return { config: v.config, key: v.key, ttlMs: v.ttlMs, series: { provider: s.provider, ruleIndex: s.ruleIndex, labels: s.labels, namespace: s.namespace } };
}
