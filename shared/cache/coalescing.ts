/**
 * A bounded TTL cache that coalesces identical in-flight loads
 * ({@link CoalescingCache}). Its refresh-ahead is `./refresh-ahead.ts`; the
 * bounded memo without expiry is `./bounded-map.ts`.
 *
 * Why: the HPA controller polls every external metric of every HPA about
 * every 15 s (kube-controller-manager `--horizontal-pod-autoscaler-sync-period`),
 * so many identical reads arrive together. Identical reads share one backend
 * call while it is in flight, and a value is re-used for at most `ttlMs`.
 *
 * Bounds (every cache here is bounded by entries **and** bytes):
 * - `maxEntries` stored values and `maxBytes` of stored keys + values
 *   (least recently used dropped first); a single entry larger than
 *   `maxBytes / 8` is not stored at all (it is still returned to its caller);
 * - at most `maxEntries` loads in flight: past it a new key is refused
 *   with {@link CacheFullError} instead of growing without bound.
 *
 * Deadlines and cancellation: every load receives an `AbortSignal`. It is
 * aborted when the load exceeds `loadTimeoutMs` (the waiters then reject with
 * a `TimeoutError` DOMException even if the loader ignores the signal), and
 * when every caller waiting for it has gone (each caller may pass its own
 * `signal`; when it aborts, that caller rejects at once with the signal's
 * reason). Nobody waits → the backend call is cancelled.
 *
 * Failures are cached only when `failureTtlMs(error)` says so (default never):
 * a brief negative cache keeps repeated reads of a failing series from each
 * hitting the backend. Callers waiting on the same in-flight load all receive
 * the same failure.
 *
 * The cache lives per process or per Worker isolate; it is an optimisation,
 * never a source of truth: an entry older than the caller's `ttlMs` is never
 * returned, so staleness is bounded by the rule's `maxAgeSeconds`.
 *
 * Refresh-ahead (option `refreshAhead`, off by default; why and how:
 * `./refresh-ahead.ts`): the cache remembers the keys read recently and,
 * shortly before their values expire, reloads those read since their value
 * was stored, all together, in one round per TTL. A
 * refresh is a normal load (same `loadTimeoutMs` deadline, readers of an
 * expired entry join it) except that its failure is never stored: the old
 * value stays only until its own `ttlMs` — a refresh never extends an
 * entry's life — and then reads load (and fail) as without refresh-ahead.
 * {@link CoalescingCache.close} stops the rounds and cancels refreshes in
 * flight.
 *
 * Renewal on read (option `renewAfterMs`, off by default): a simpler
 * relative of refresh-ahead that remembers nothing. A read answered from a
 * stored value older than `renewAfterMs(value, ttlMs)` — but still within
 * `ttlMs`, so still a hit — also starts one reload of that key in the
 * background with the read's own loader (unless a load of the key is
 * already in flight); the reader gets the stored value at once. The reload
 * is a refresh as above: its failure is never stored, and the value it
 * replaces stays only until its own TTL. A value a reader gets is never
 * older than its `ttlMs`; renewal only moves the wait for a reload off the
 * read that finds the value expired, onto an earlier read that does not
 * wait for it. The proxy's SubjectAccessReview cache uses it
 * (shared/proxy/authz/authorize.ts `SAR_RENEW_AFTER_SHARE`).
 */
import { RefreshAhead, type RefreshAheadOptions } from "./refresh-ahead.ts";

/**
 * How long a backend read of a metric rule may be re-used, ms: the rule's
 * `cacheTTLSeconds`, never past its `maxAgeSeconds` — the staleness bound.
 * (Config validation already refuses a TTL above maxAge; this keeps the
 * bound where the cache is used.)
 */
export function ruleCacheTtlMs(rule: { cacheTTLSeconds: number; maxAgeSeconds: number }): number {
  return Math.min(rule.cacheTTLSeconds, rule.maxAgeSeconds) * 1000;
}

/** A cached outcome and the time it was stored (ms since epoch). */
type Entry<V> = { ok: true; value: V; storedAt: number; keepMs: number; bytes: number } | { ok: false; error: unknown; storedAt: number; expiresAt: number; bytes: number };

interface Inflight<V> {
  promise: Promise<V>;
  controller: AbortController;
  waiters: number;
}

/** Counters for observability and tests. */
export interface CacheStats {
  /** reads answered from a fresh stored value */
  hits: number;
  /** reads answered from a stored failure (negative cache) */
  failureHits: number;
  /** reads that joined a load already in flight */
  coalesced: number;
  /** loads started (backend calls) */
  loads: number;
  /** loads that failed */
  failures: number;
  /** loads aborted because they ran past `loadTimeoutMs` */
  timeouts: number;
  /** loads aborted because every caller had gone */
  abandoned: number;
  /** entries dropped to stay within `maxEntries`/`maxBytes` */
  evictions: number;
  /** reads refused because `maxEntries` loads were already in flight */
  refused: number;
  /** refresh-ahead and renewal loads started (each also counts in `loads`) */
  refreshes: number;
  /** refresh-ahead and renewal loads that failed (never stored; each also counts in `failures`) */
  refreshFailures: number;
  /** refresh-ahead rounds run */
  refreshRounds: number;
}

/** How a read was answered. */
export type CacheOutcome = "hit" | "failure-hit" | "coalesced" | "miss";

/**
 * What {@link CoalescingCache.get} answers: how the read was answered
 * (`outcome`, e.g. for a hit counter) and its value. On a `"hit"` the value
 * is the stored value itself, at once: no promise is made, a hit allocates
 * this record only (issue 11 P1). Otherwise a promise of the value, which
 * rejects as `get` documents. `await read.value` takes either.
 *
 * @example
 * const { value, outcome } = cache.get(key, ttlMs, load, { signal });
 * if (outcome === "hit") hits++;
 * const answer = await value;
 */
export type CacheRead<V> = { readonly outcome: "hit"; readonly value: V } | { readonly outcome: Exclude<CacheOutcome, "hit">; readonly value: Promise<V> };

/** Options of a {@link CoalescingCache}. */
export interface CoalescingCacheOptions<V> {
  /** most entries stored, and most loads in flight; the least recently used is dropped first (default 10 000) */
  maxEntries?: number;
  /** most bytes of stored keys and values (default 16 MiB) */
  maxBytes?: number;
  /**
   * Size of a value in bytes, for `maxBytes`. Default: the length of its
   * JSON text × 2 (UTF-16), or 64 when it does not serialize. The key is
   * always counted as `key.length × 2`.
   */
  sizeOf?: (value: V) => number;
  /**
   * How long a loaded value may be re-used, ms, on top of each read's `ttlMs`
   * (the shorter wins); 0 = not stored, only shared while in flight (e.g. an
   * answer marked `no-store`). Default: no limit but `ttlMs`.
   */
  keepMs?: (value: V) => number;
  /** longest a load may run, ms; then its signal aborts and its waiters reject (default: no limit) */
  loadTimeoutMs?: number;
  /** how long a failure is re-used for the same key, ms; 0 = not cached (default: 0 for every error) */
  failureTtlMs?: (error: unknown) => number;
  /** clock in ms since epoch (tests inject one) */
  now?: () => number;
  /** reload recently read keys before they expire (see the module doc); default off */
  refreshAhead?: RefreshAheadOptions;
  /**
   * Renewal on read (see the module doc): the age, ms, past which a hit on
   * `value` read with `ttlMs` also starts a background reload of its key
   * (Infinity or absent = never). Default off.
   */
  renewAfterMs?: (value: V, ttlMs: number) => number;
}

/** Per-read options of {@link CoalescingCache.get}. */
export interface CacheReadOptions {
  /** this caller stops waiting when it aborts (the load is cancelled when no caller is left) */
  signal?: AbortSignal;
}

/** Thrown when `maxEntries` loads are already in flight and a new key arrives. */
export class CacheFullError extends Error {
  constructor(maxEntries: number) {
    super(`too many different reads in flight (${maxEntries}); try again shortly`);
    this.name = "CacheFullError";
  }
}

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;

/**
 * TTL + LRU cache with in-flight coalescing, keyed by string.
 *
 * @example
 * const v = await cache.get("sqs|us-east-1|worker_tasks", 5_000, (signal) => readQueue(signal)).value;
 */
export class CoalescingCache<V> {
  readonly stats: CacheStats = {
    hits: 0,
    failureHits: 0,
    coalesced: 0,
    loads: 0,
    failures: 0,
    timeouts: 0,
    abandoned: 0,
    evictions: 0,
    refused: 0,
    refreshes: 0,
    refreshFailures: 0,
    refreshRounds: 0,
  };
  readonly #entries = new Map<string, Entry<V>>();
  readonly #inflight = new Map<string, Inflight<V>>();
  readonly #maxEntries: number;
  readonly #maxBytes: number;
  readonly #sizeOf: (value: V) => number;
  readonly #keepMs: ((value: V) => number) | undefined;
  readonly #loadTimeoutMs: number | undefined;
  readonly #failureTtlMs: (error: unknown) => number;
  readonly #now: () => number;
  readonly #renewAfterMs: ((value: V, ttlMs: number) => number) | undefined;
  #bytes = 0;
  readonly #refresh: RefreshAhead<V> | undefined;
  /** refresh-ahead and renewal loads in flight → their key, to cancel on close */
  readonly #refreshing = new Map<Inflight<V>, string>();
  #closed = false;

  constructor(options: CoalescingCacheOptions<V> = {}) {
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.#sizeOf = options.sizeOf ?? jsonSize;
    this.#keepMs = options.keepMs;
    this.#loadTimeoutMs = options.loadTimeoutMs;
    this.#failureTtlMs = options.failureTtlMs ?? (() => 0);
    this.#now = options.now ?? Date.now;
    this.#renewAfterMs = options.renewAfterMs;
    this.#refresh =
      options.refreshAhead === undefined
        ? undefined
        : new RefreshAhead<V>(
            options.refreshAhead,
            { maxEntries: this.#maxEntries, maxBytes: this.#maxBytes },
            {
              storedAt: (key) => {
                const entry = this.#entries.get(key);
                return entry?.ok === true ? entry.storedAt : undefined;
              },
              loading: (key) => this.#inflight.has(key),
              full: () => this.#inflight.size >= this.#maxEntries,
              refresh: (key, load) => this.#startRefresh(key, load),
              roundRun: () => void this.stats.refreshRounds++,
              now: () => this.#now(),
            },
          );
  }

  /**
   * Return the value for `key`: a stored one no older than `ttlMs` nor than
   * its own `keepMs` (or a
   * stored failure still within its failure TTL), else the result of the
   * load already in flight for `key`, else a new `load(signal)` — with how
   * it was answered ({@link CacheRead}: a hit's value at once, any other a
   * promise; a read refused at the in-flight bound is a `"miss"`).
   *
   * @param ttlMs longest age (ms) of a stored value that may be returned; 0
   *   disables re-use of stored values (in-flight loads are still shared)
   * @throws never itself; `value` rejects with whatever `load` rejects with
   *   (or a stored failure); a `TimeoutError` DOMException past
   *   `loadTimeoutMs`; the caller's `signal.reason` when it aborts;
   *   {@link CacheFullError} when `maxEntries` loads are in flight
   */
  get(key: string, ttlMs: number, load: (signal: AbortSignal) => Promise<V>, options: CacheReadOptions = {}): CacheRead<V> {
    const remember = this.#refresh !== undefined && ttlMs > 0 && !this.#closed;
    const entry = this.#entries.get(key);
    // The clock is read once per read, and only when something needs it.
    const now = remember || entry !== undefined ? this.#now() : 0;
    // (remember may run a round; a round never changes the stored entries synchronously: `entry` stays right)
    if (remember) this.#refresh!.remember(key, ttlMs, load, now);
    if (entry !== undefined) {
      if (this.#freshHit(key, entry, ttlMs, now)) {
        if (this.#renewAfterMs !== undefined) this.#renew(key, entry, ttlMs, load, now);
        return { outcome: "hit", value: entry.value };
      }
      if (!entry.ok && now < entry.expiresAt && now >= entry.storedAt) {
        // (a clock stepped back past storedAt does not stretch a failure's life)
        this.stats.failureHits++;
        return { outcome: "failure-hit", value: Promise.reject(entry.error) };
      }
    }
    let inflight = this.#inflight.get(key);
    let outcome: "coalesced" | "miss";
    if (inflight !== undefined) {
      this.stats.coalesced++;
      outcome = "coalesced";
    } else {
      if (this.#inflight.size >= this.#maxEntries) {
        this.stats.refused++;
        return { outcome: "miss", value: Promise.reject(new CacheFullError(this.#maxEntries)) };
      }
      inflight = this.#start(key, load);
      outcome = "miss";
    }
    return { outcome, value: this.#wait(key, inflight, options.signal) };
  }

  /**
   * {@link get}'s cache hit, synchronously: the stored value for `key` when
   * `get(key, ttlMs, load)` would answer it from the cache now (counted,
   * refreshed in the LRU order and remembered for refresh-ahead exactly as
   * that hit), else undefined with nothing started — the caller then calls
   * {@link get}. Lets a caller skip arming a deadline for a read that needs
   * no I/O (issue 11 P1). A stored failure is not answered here.
   */
  peek(key: string, ttlMs: number, load: (signal: AbortSignal) => Promise<V>): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined || !entry.ok) return undefined;
    const now = this.#now();
    if (!this.#freshHit(key, entry, ttlMs, now)) return undefined;
    if (this.#refresh !== undefined && !this.#closed) this.#refresh.remember(key, ttlMs, load, now);
    if (this.#renewAfterMs !== undefined) this.#renew(key, entry, ttlMs, load, now);
    return entry.value;
  }

  /**
   * Renewal on read (see the module doc): after a hit on `entry` at `now`,
   * start a background reload of `key` with `load` when the value is older
   * than `renewAfterMs(value, ttlMs)` and no load of the key is in flight
   * (nor the in-flight bound reached, nor the cache closed).
   */
  #renew(key: string, entry: Extract<Entry<V>, { ok: true }>, ttlMs: number, load: (signal: AbortSignal) => Promise<V>, now: number): void {
    if (this.#closed || now - entry.storedAt < this.#renewAfterMs!(entry.value, ttlMs)) return;
    if (this.#inflight.has(key) || this.#inflight.size >= this.#maxEntries) return;
    this.#startRefresh(key, load);
  }

  /** Start a refresh-ahead or renewal load of `key` (counted in `refreshes`; see the module doc). */
  #startRefresh(key: string, load: (signal: AbortSignal) => Promise<V>): void {
    this.stats.refreshes++;
    this.#start(key, load, true);
  }

  /**
   * The hit branch of {@link get} and {@link peek}: whether `entry` is a
   * stored value no older than `ttlMs` nor than its own `keepMs` at `now`;
   * when it is, the hit is counted and `key` becomes the most recently used.
   */
  #freshHit(key: string, entry: Entry<V>, ttlMs: number, now: number): entry is Extract<Entry<V>, { ok: true }> {
    if (!entry.ok || ttlMs <= 0 || now - entry.storedAt > Math.min(ttlMs, entry.keepMs)) return false;
    this.#touch(key, entry);
    this.stats.hits++;
    return true;
  }

  #start(key: string, load: (signal: AbortSignal) => Promise<V>, refresh = false): Inflight<V> {
    this.stats.loads++;
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline =
      this.#loadTimeoutMs === undefined
        ? undefined
        : new Promise<never>((_, reject) => {
            timer = setTimeout(() => {
              const reason = new DOMException(`the load did not finish within ${this.#loadTimeoutMs} ms`, "TimeoutError");
              this.stats.timeouts++;
              controller.abort(reason);
              reject(reason);
            }, this.#loadTimeoutMs);
          });
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener("abort", () => reject(controller.signal.reason), { once: true });
    });
    // A refresh counts as one waiter of its own, so readers that join and leave never cancel it.
    const record: Inflight<V> = { promise: undefined as unknown as Promise<V>, controller, waiters: refresh ? 1 : 0 };
    this.#inflight.set(key, record); // before the load starts: a loader may throw synchronously
    if (refresh) this.#refreshing.set(record, key);
    record.promise = (async () => {
      try {
        const value = await Promise.race([load(controller.signal), aborted, ...(deadline ? [deadline] : [])]);
        const keepMs = this.#keepMs?.(value) ?? Number.POSITIVE_INFINITY;
        if (this.#inflight.get(key) === record) {
          if (keepMs > 0) this.#store(key, { ok: true, value, storedAt: this.#now(), keepMs, bytes: 0 });
          else this.#drop(key); // not kept: an older stored value must not be served either
        }
        return value;
      } catch (err) {
        this.stats.failures++;
        if (refresh) this.stats.refreshFailures++;
        // A failed refresh is never stored: the old value stays until its own TTL, then reads load as usual.
        const ttl = controller.signal.aborted || refresh ? 0 : this.#failureTtlMs(err);
        if (ttl > 0 && this.#inflight.get(key) === record) {
          const now = this.#now();
          this.#store(key, { ok: false, error: err, storedAt: now, expiresAt: now + ttl, bytes: 0 });
        }
        throw err;
      } finally {
        clearTimeout(timer);
        if (this.#inflight.get(key) === record) this.#inflight.delete(key);
        if (refresh) this.#refreshing.delete(record);
      }
    })();
    // Waiters observe the promise; this keeps an unobserved rejection from being reported.
    record.promise.catch(() => {});
    return record;
  }

  #wait(key: string, inflight: Inflight<V>, signal: AbortSignal | undefined): Promise<V> {
    inflight.waiters++;
    if (signal === undefined) {
      return inflight.promise.finally(() => inflight.waiters--);
    }
    if (signal.aborted) {
      this.#leave(key, inflight);
      return Promise.reject(signal.reason);
    }
    return new Promise<V>((resolve, reject) => {
      let done = false;
      const onAbort = () => {
        if (done) return;
        done = true;
        this.#leave(key, inflight);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const settle = () => {
        if (done) return false;
        done = true;
        inflight.waiters--;
        signal.removeEventListener("abort", onAbort);
        return true;
      };
      inflight.promise.then(
        (v) => settle() && resolve(v),
        (e) => settle() && reject(e),
      );
    });
  }

  /** A waiter left: when none is left, the load is cancelled. */
  #leave(key: string, inflight: Inflight<V>): void {
    inflight.waiters--;
    if (inflight.waiters <= 0 && !inflight.controller.signal.aborted) {
      this.stats.abandoned++;
      if (this.#inflight.get(key) === inflight) this.#inflight.delete(key);
      inflight.controller.abort(new DOMException("every caller waiting for this load has gone", "AbortError"));
    }
  }

  /** Store `value` for `key` now, evicting least recently used entries past the bounds. */
  set(key: string, value: V): void {
    this.#store(key, { ok: true, value, storedAt: this.#now(), keepMs: Number.POSITIVE_INFINITY, bytes: 0 });
  }

  #store(key: string, entry: Entry<V>): void {
    this.#drop(key);
    let valueBytes: number;
    try {
      valueBytes = entry.ok ? this.#sizeOf(entry.value) : 256;
    } catch {
      valueBytes = 64;
    }
    entry.bytes = key.length * 2 + valueBytes + 64;
    if (entry.bytes > this.#maxBytes / 8) return; // too large to keep: returned, not stored
    this.#entries.set(key, entry);
    this.#bytes += entry.bytes;
    while (this.#entries.size > 0 && (this.#entries.size > this.#maxEntries || this.#bytes > this.#maxBytes)) {
      const oldest = this.#entries.keys().next().value as string;
      this.#drop(oldest);
      this.stats.evictions++;
    }
  }

  #touch(key: string, entry: Entry<V>): void {
    this.#entries.delete(key);
    this.#entries.set(key, entry);
  }

  /** Forget `key` (e.g. a queue URL that stopped existing); an in-flight load still answers its waiters but is not stored. */
  delete(key: string): void {
    this.#drop(key);
    this.#inflight.delete(key);
  }

  #drop(key: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }

  /** Forget every stored entry (in-flight loads continue). */
  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  /** Number of stored entries. */
  get size(): number {
    return this.#entries.size;
  }

  /** Bytes accounted to stored keys and values. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Loads in flight. */
  get inflight(): number {
    return this.#inflight.size;
  }

  /** Refresh-ahead: keys remembered for the next rounds, and their accounted bytes. */
  get remembered(): { keys: number; bytes: number } {
    return this.#refresh?.remembered ?? { keys: 0, bytes: 0 };
  }

  /** Refresh-ahead: whether a round timer is armed. */
  get refreshTimerArmed(): boolean {
    return this.#refresh?.timerArmed ?? false;
  }

  /**
   * Stop refresh-ahead and renewal for good: cancel the round timer, abort
   * refresh and renewal loads in flight (their readers reject with an
   * `AbortError` DOMException) and forget the remembered keys. Reads keep
   * working as without either. Idempotent.
   */
  close(): void {
    this.#closed = true;
    this.#refresh?.close();
    for (const [record, key] of this.#refreshing) {
      if (this.#inflight.get(key) === record) this.#inflight.delete(key); // later reads start their own load
      record.controller.abort(new DOMException("the cache was closed", "AbortError"));
    }
    this.#refreshing.clear();
  }
}

function jsonSize(value: unknown): number {
  if (typeof value === "string") return value.length * 2;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? 64 : text.length * 2;
  } catch {
    return 64;
  }
}
