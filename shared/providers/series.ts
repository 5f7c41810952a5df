/**
 * The batched-series provider skeleton: what every provider here does
 * between a request and its backend, written once. A backend fills in a
 * {@link SeriesBackend} (how to key one series, how to read a batch of them
 * with a signal, how to turn a failure into a Status); {@link SeriesProvider}
 * does the rest:
 *
 * 1. label resolution — the selector is mapped exactly onto label sets, one
 *    per series (`resolveLabelSets`, `./label-mapping.ts`), or refused (400/404);
 * 2. one read per label set, keyed by everything that determines its answer
 *    (`SeriesBackend.item`);
 * 3. cache and coalescing — identical reads share one in-flight load and are
 *    re-used for the rule's `cacheTTLSeconds`, never past `maxAgeSeconds`
 *    (`ruleCacheTtlMs`, `../cache/coalescing.ts`); a load runs at most
 *    `BACKEND_LOAD_TIMEOUT_MS` and is cancelled when no request waits for
 *    it; a 429/503 is re-used for the backend's back-off hint
 *    (`backendFailureTtlMs`, `./backoff.ts`);
 * 4. batching — loads arriving together become one backend call of at most
 *    `maxBatchSize` units per group (`../batch.ts`), split in halves when
 *    the backend refuses the whole call for what may be one item's fault;
 * 5. shared read tier (issue 28, opt-in: a provider's `sharedCache:`) — when
 *    the runtime gave the instance a tier ({@link SeriesProvider.useTier}),
 *    a local cache miss (a read's load and a refresh-ahead load alike) asks
 *    the tier (`../cache/shared-tier.ts`) instead of the batcher: a reading
 *    the fleet stored within the rule's `cacheTTLSeconds`, or one instance's
 *    load for the fleet; when the tier fails the instance reads the cloud
 *    directly (`source: direct`), counted
 *    (`emb_bridge_tier_reads_total{provider,source}`) and logged (a `warn`
 *    record at most once a minute per instance, {@link TIER_WARN_INTERVAL_MS});
 * 6. outcome — every series must be read (the HPA sums them): one failure
 *    fails the request; a whole-call failure becomes a Status through
 *    `SeriesBackend.error`; an empty answer is the rule's `onEmpty`
 *    ({@link emptyOutcome}), never a 0 invented here.
 *
 * `aws-sqs` is the one-label case with batches of one; `aws-cloudwatch`
 * (`GetMetricData`, up to 500 queries a call) and `gcp-monitoring`
 * (`ListTimeSeries`, one filter ORing the series of one shape) batch for real.
 */
import { Batcher, type Outcome } from "../batch.ts";
import { CoalescingCache, ruleCacheTtlMs } from "../cache/coalescing.ts";
import { tierKey, type SharedTier } from "../cache/shared-tier.ts";
import { createLogger, LOG_LEVEL_ENV, parseLevel, type LogRecord } from "../observability/log.ts";
import type { RefreshAheadOptions } from "../cache/refresh-ahead.ts";
import { BACKEND_LOAD_TIMEOUT_MS } from "../deadline.ts";
import { parseDecimal } from "../k8s/quantity.ts";
import type { Selector } from "../k8s/selector.ts";
import { notFound, serviceUnavailable, StatusError } from "../k8s/status.ts";
import { backendFailureTtlMs } from "./backoff.ts";
import { MAX_SERIES_PER_REQUEST, resolveLabelSets, type MappedLabel, type SeriesNoun } from "./label-mapping.ts";
import type { MetricRule, PlanRequest, Provider, QueryRequest, RuntimeEnv, Series, TierOptions } from "./types.ts";

/** Least time between two "the shared tier failed, read directly" warnings of one provider instance, ms. */
export const TIER_WARN_INTERVAL_MS = 60_000;

export type { Outcome } from "../batch.ts";

/** One series' value as a backend read it: a {@link Series} without its labels. */
export type Reading = Omit<Series, "labels">;

/** What the skeleton needs of one series' read; a backend adds what its call needs. */
export interface SeriesItem {
  /** cache key: everything that determines the answer (identical keys share one load) */
  key: string;
  /** reads of different groups never share a backend call (default: one group) */
  group?: string;
  /** units this read takes in a call, ≥ 1 (default 1; a CloudWatch metric-math read counts its queries) */
  size?: number;
  /**
   * the identity the read runs under (`SeriesBackend.identity` of the request
   * namespace), set by {@link SeriesProvider}, which also puts it in `key` and
   * `group`: reads under two identities never share a load, a cached answer
   * or a backend call. Absent: the provider's one identity.
   */
  identity?: string;
}

/**
 * What a selector resolves to for one rule, made once per selector and rule
 * (`SeriesProvider`): its label sets (frozen), each set's backend item and
 * the cache loader of that item (same index).
 */
interface Resolved<I> {
  sets: readonly Readonly<Record<string, string>>[];
  items: readonly I[];
  loads: readonly ((signal: AbortSignal) => Promise<Reading>)[];
}

/** How reads are batched (`../batch.ts` `BatcherOptions`). */
export interface SeriesBatching {
  /** most units per backend call, ≥ 1 (1: no batching) */
  maxBatchSize: number;
  /** how long the first read of a batch waits for others, ms (default 0) */
  windowMs?: number;
  /** whether a whole-call failure may be one item's fault: the batch is split in halves and retried */
  splitOnError?: (error: unknown) => boolean;
}

/**
 * One backend's part of a provider. `Q`: the rule's validated `query:`
 * section; `I`: one series' read.
 */
export interface SeriesBackend<Q, I extends SeriesItem> {
  /**
   * The identity reads for `namespace` run under, as a key (e.g. AWS role
   * ARN and ExternalId: `./aws/identity.ts`); no I/O. Absent: one identity
   * for every namespace. @throws StatusError when the namespace has none
   */
  identity?(namespace: string): string;
  /** the selector labels a rule maps, in the rule's order (`mappedLabels` of its config) */
  labels(rule: MetricRule<Q>): readonly MappedLabel[];
  /** how label-resolution messages name a series (default "series"; SQS: "queue") */
  readonly noun?: SeriesNoun;
  /**
   * The read of the series `labels` (one value for every mapped label).
   * No I/O. @throws StatusError 400 when the label values cannot be put into a backend query
   */
  item(rule: MetricRule<Q>, labels: Readonly<Record<string, string>>): I;
  /** Human description of the backend query for `items` (CLI `check-hpa`); no I/O. */
  describe(rule: MetricRule<Q>, items: readonly I[]): string;
  readonly batching: SeriesBatching;
  /** the cache's refresh-ahead (`../cache/refresh-ahead.ts`; `./refresh-ahead.ts`); absent: off */
  readonly refreshAhead?: RefreshAheadOptions | undefined;
  /**
   * One backend call for `items` (one group, at most `maxBatchSize` units):
   * exactly one outcome per item, in order — a value, or the StatusError its
   * reads fail with. Rejects when the whole call failed. `signal` aborts when
   * no read waits any more (request deadline, client gone) or the load ran
   * past `BACKEND_LOAD_TIMEOUT_MS`: pass it to every backend call, combined
   * with the provider's `timeoutSeconds` (`callSignal`, `../deadline.ts`).
   */
  read(items: readonly I[], signal: AbortSignal): Promise<readonly Outcome<Reading>[]>;
  /**
   * The Status for a whole-call failure (anything `read` rejected with that
   * is not already a StatusError), seen by each read of the call: 503 with
   * the cloud's back-off hint for throttling and failures, 500 for
   * credential and permission faults, 504-style timeouts as 503.
   */
  error(error: unknown, item: I): StatusError;
}

/**
 * A provider built from a {@link SeriesBackend}. `cache` and `batcher` are
 * per instance (one client, one region and credentials).
 */
export class SeriesProvider<Q, I extends SeriesItem> implements Provider<Q> {
  readonly type: string;
  readonly name: string;
  readonly cache: CoalescingCache<Reading>;
  readonly batcher: Batcher<I, Reading>;
  readonly #backend: SeriesBackend<Q, I>;
  readonly #metrics: RuntimeEnv["metrics"];
  readonly #runtime: RuntimeEnv;
  /** the shared read tier, when the runtime gave one ({@link useTier}) */
  #tier: { tier: SharedTier; configDigest: string; log: ((record: LogRecord) => void) | undefined } | undefined;
  /** when the last "read directly" warning was written (runtime clock, ms), and the direct reads since */
  #lastTierWarn = Number.NEGATIVE_INFINITY;
  #directSinceWarn = 0;

  /**
   * @param type the module type, e.g. `aws-cloudwatch`
   * @param name the instance name from the config
   * @param runtime its clock stamps cached entries
   */
  constructor(type: string, name: string, runtime: RuntimeEnv, backend: SeriesBackend<Q, I>) {
    this.type = type;
    this.name = name;
    this.#backend = backend;
    this.#metrics = runtime.metrics;
    this.#runtime = runtime;
    this.cache = new CoalescingCache<Reading>({
      sizeOf: readingBytes,
      now: runtime.now,
      loadTimeoutMs: BACKEND_LOAD_TIMEOUT_MS,
      failureTtlMs: backendFailureTtlMs,
      ...(backend.refreshAhead !== undefined ? { refreshAhead: backend.refreshAhead } : {}),
    });
    const { maxBatchSize, windowMs, splitOnError } = backend.batching;
    this.batcher = new Batcher<I, Reading>({
      maxBatchSize,
      ...(windowMs !== undefined ? { windowMs } : {}),
      size: (item) => item.size ?? 1,
      group: (item) => item.group ?? "",
      execute: (items, _group, signal) => {
        const metrics = runtime.metrics;
        if (metrics === undefined) return backend.read(items, signal);
        // one backend call (a batch counts once), whatever its outcome (`emb_bridge_backend_request_duration_seconds`)
        const started = performance.now();
        return backend.read(items, signal).finally(() => metrics.backendCall(name, (performance.now() - started) / 1000));
      },
      ...(splitOnError !== undefined ? { splitOnError: (error: unknown) => splitOnError(error) } : {}),
    });
  }

  /** Stop background work: the cache's refresh-ahead timer and refreshes in flight (`CoalescingCache.close`), and the shared tier's client. Idempotent. */
  close(): void {
    this.cache.close();
    this.#tier?.tier.close?.();
  }

  /**
   * Read every local cache miss through `tier` from now on (`Provider.useTier`,
   * `./types.ts`; called by `buildProviders` before any read). Loaders made
   * before keep working: each looks the tier up when it runs.
   */
  useTier(tier: SharedTier, options: TierOptions): void {
    this.#tier = { tier, configDigest: options.configDigest, log: options.log };
  }

  /** The label sets `selector` names for `rule`, at most `maxSeries` (400/404 as `resolveLabelSets`). */
  labelSets(rule: MetricRule<Q>, selector: Selector, maxSeries = MAX_SERIES_PER_REQUEST): Record<string, string>[] {
    return resolveLabelSets(rule.name, selector, this.#backend.labels(rule), maxSeries, this.#backend.noun);
  }

  /**
   * Label sets resolved before, by selector object (the app re-uses one
   * frozen object per selector text) then rule, with each set's backend
   * item and cache loader (pure functions of rule and labels, so a cache hit
   * builds neither again: issue 11 P1); frozen. Bounded: an entry lives as
   * long as its selector, and holds one list per rule.
   */
  readonly #resolved = new WeakMap<Selector, Map<MetricRule<Q>, Map<string | undefined, Resolved<I>>>>();

  /** {@link labelSets} with their items and loaders, remembered in {@link #resolved} by the identity of `namespace` (failures are not remembered). */
  #sets(rule: MetricRule<Q>, selector: Selector, namespace: string, maxSeries?: number): Resolved<I> {
    const identity = this.#backend.identity?.(namespace);
    let byRule = this.#resolved.get(selector);
    if (byRule === undefined) this.#resolved.set(selector, (byRule = new Map()));
    let byIdentity = byRule.get(rule);
    if (byIdentity === undefined) byRule.set(rule, (byIdentity = new Map()));
    const known = byIdentity.get(identity);
    if (known !== undefined) return known;
    const sets = Object.freeze(this.labelSets(rule, selector, maxSeries).map((set) => Object.freeze(set)));
    const items = sets.map((labels) => this.#item(rule, labels, identity));
    const resolved: Resolved<I> = {
      sets,
      items,
      loads: items.map((item, i) => (signal: AbortSignal) => this.#load(item, signal, rule, sets[i]!, namespace)),
    };
    byIdentity.set(identity, resolved);
    return resolved;
  }

  /** The backend's item for `labels`, read under `identity` (then in its key and group). */
  #item(rule: MetricRule<Q>, labels: Readonly<Record<string, string>>, identity: string | undefined): I {
    const item = this.#backend.item(rule, labels);
    if (identity === undefined) return item;
    return { ...item, identity, key: `${identity}\u0000${item.key}`, group: `${identity}\u0000${item.group ?? ""}` };
  }

  plan(request: PlanRequest<Q>): string {
    const identity = this.#backend.identity?.(request.namespace);
    const items = this.labelSets(request.rule, request.selector, request.maxSeries).map((labels) => this.#item(request.rule, labels, identity));
    return this.#backend.describe(request.rule, items);
  }

  /**
   * The series {@link query} would resolve to now when every read is a fresh
   * cache hit (`CoalescingCache.peek`), else undefined — nothing is loaded;
   * the app then calls `query` under its deadline (`Provider.peek`,
   * `./types.ts`). Synchronous: a cache hit arms no timer and allocates no
   * AbortController. When only some reads hit, those count as hits here and
   * again in the `query` that follows.
   *
   * @throws StatusError 400/404 from label resolution, as `query`
   */
  peek(request: PlanRequest<Q>): Series[] | undefined {
    const rule = request.rule;
    const { sets, items, loads } = this.#sets(rule, request.selector, request.namespace, request.maxSeries);
    const ttlMs = ruleCacheTtlMs(rule);
    const series: Series[] = [];
    for (let i = 0; i < sets.length; i++) {
      const reading = this.cache.peek(items[i]!.key, ttlMs, loads[i]!);
      if (reading === undefined) return undefined;
      // The frozen label set itself, shared by every hit: the app keeps a built answer while labels and readings are the same objects.
      series.push({ labels: sets[i]! as Record<string, string>, ...reading });
    }
    return series;
  }

  async query(request: QueryRequest<Q>): Promise<Series[]> {
    const rule = request.rule;
    const { sets, items, loads } = this.#sets(rule, request.selector, request.namespace, request.maxSeries);
    const ttlMs = ruleCacheTtlMs(rule);
    const omit = request.noData === "omit";
    // Every series must be read; the HPA sums them, so one failure fails the request
    // (with `noData: omit`, a series without data is left out; any other failure still fails it).
    const readings = await Promise.all(
      items.map((item, i) => {
        const value = this.cache.get(item.key, ttlMs, loads[i]!, { signal: request.signal }).value;
        return omit ? Promise.resolve(value).catch((err: unknown) => (isNoData(err) ? undefined : Promise.reject(err))) : value;
      }),
    );
    // The frozen label sets, as `peek` answers them: a hit after this load then keeps the app's built answer.
    const series: Series[] = [];
    for (let i = 0; i < readings.length; i++) {
      const reading = readings[i];
      if (reading !== undefined) series.push({ labels: sets[i]! as Record<string, string>, ...reading });
    }
    return series;
  }

  /**
   * One series' load for the cache: through the shared tier when there is
   * one, else the batcher. `namespace` is the first one read under the
   * item's identity (the loader is remembered per identity): the tier only
   * needs it as the identity of per-namespace credentials.
   */
  async #load(item: I, signal: AbortSignal, rule: MetricRule<Q>, labels: Readonly<Record<string, string>>, namespace: string): Promise<Reading> {
    try {
      const tier = this.#tier;
      const ttlMs = ruleCacheTtlMs(rule);
      // a rule that re-uses nothing (cacheTTLSeconds: 0) has nothing to share: its reads never touch the tier
      if (tier === undefined || ttlMs <= 0) return await this.batcher.load(item, signal);
      const outcome = await tier.tier.read({
        key: tierKey(this.name, tier.configDigest, item.key),
        ttlMs,
        series: { provider: this.name, ruleIndex: rule.index ?? -1, labels, namespace },
        load: (loadSignal) => this.batcher.load(item, loadSignal),
        signal,
      });
      this.#metrics?.tierRead(this.name, outcome.source);
      if (outcome.source === "direct") this.#directRead(tier.tier.type, tier.log, outcome.reason);
      return outcome.reading;
    } catch (err) {
      const status = err instanceof StatusError ? err : this.#backend.error(err, item);
      // every failed series load, by HTTP code and kind (`emb_bridge_backend_errors_total`, `shared/observability/metrics.ts`)
      this.#metrics?.backendError(this.name, status);
      throw status;
    }
  }

  /** Note a read that went `direct` because the tier failed: a `warn` record at most every {@link TIER_WARN_INTERVAL_MS}, with the count since the last. */
  #directRead(type: string, log: ((record: LogRecord) => void) | undefined, reason: string | undefined): void {
    this.#directSinceWarn++;
    const now = this.#runtime.now();
    if (now - this.#lastTierWarn < TIER_WARN_INTERVAL_MS) return;
    this.#lastTierWarn = now;
    const record: LogRecord = {
      level: "warn",
      msg: "shared read tier failed: series read from the cloud directly (each instance now calls the backend itself)",
      provider: this.name,
      tier: type,
      directReads: this.#directSinceWarn,
      ...(reason !== undefined ? { error: reason } : {}),
    };
    this.#directSinceWarn = 0;
    (log ?? defaultLog(this.#runtime))(record);
  }
}

/** The console logger at the runtime's `LOG_LEVEL` (info when it is not a level: a provider's warning never throws). */
function defaultLog(runtime: RuntimeEnv): (record: LogRecord) => void {
  let level: ReturnType<typeof parseLevel>;
  try {
    level = parseLevel(runtime.env[LOG_LEVEL_ENV]);
  } catch {
    level = "info";
  }
  return createLogger({ level, now: runtime.now });
}

/**
 * What a rule says to report when the backend has no value in its window:
 * `notFound` (404), `unavailable` (503, 1 s back-off: the value may arrive
 * any moment) or a `{ value }` the rule's author wrote (a decimal string).
 */
export type OnEmpty = "notFound" | "unavailable" | { value: string };

/**
 * The outcome of a series the backend answered without a value: the rule's
 * `onEmpty`. Only for a complete answer — a truncated one is a 503, never
 * `onEmpty`.
 *
 * @param message says which series and window, e.g. `…: no point in the last 300 s; no value is reported`
 * @param kind the Status details `kind` of a 404, e.g. `cloudwatch-metric`
 * @param now ms since epoch: the timestamp of a written value
 */
export function emptyOutcome(onEmpty: OnEmpty, message: string, kind: string, now: number): Outcome<Reading> {
  if (onEmpty === "notFound") return { ok: false, error: noData(notFound(message, { kind })) };
  if (onEmpty === "unavailable") return { ok: false, error: noData(serviceUnavailable(message)) };
  return { ok: true, value: { value: parseDecimal(onEmpty.value), timestamp: now } };
}

/** The failures {@link emptyOutcome} made: a complete answer without data for the series. */
const NO_DATA = new WeakSet<object>();

function noData(error: StatusError): StatusError {
  NO_DATA.add(error);
  return error;
}

/**
 * Whether `error` says only that the backend's complete answer had no data
 * for a series (made by {@link emptyOutcome}; a cached failure is the same
 * object), as opposed to a failed, partial or throttled read.
 */
export function isNoData(error: unknown): boolean {
  return typeof error === "object" && error !== null && NO_DATA.has(error);
}

/** A Reading's mantissa up to this many (in magnitude) is counted as a small fixed-size object. */
const SMALL_MANTISSA = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * The bytes a cached Reading holds, for the cache's `maxBytes`: a small
 * fixed-shape object (value, timestamp, window) of 128 bytes, plus the
 * digits of a mantissa past 2^53 (at most `MAX_TEXT_DIGITS`, 1,000, by
 * `parseDecimal`). Not `JSON.stringify`, the cache's default, which throws
 * on the BigInt mantissa of every reading (a caught exception per stored
 * series: 9 % of a 1,000-pod custom read's CPU).
 */
export function readingBytes(reading: Reading): number {
  const m = reading.value.mantissa;
  return 128 + (m > SMALL_MANTISSA || m < -SMALL_MANTISSA ? m.toString().length : 0);
}
