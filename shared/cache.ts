/**
 * A bounded TTL cache that coalesces identical in-flight loads
 * ({@link CoalescingCache}), and the one small bounded memo of the code base
 * ({@link BoundedMap}: entries and bytes, least recently used first, no
 * expiry).
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
 * Refresh-ahead (option `refreshAhead`, off by default): the HPA controller
 * reads with 5 sync workers (kube-controller-manager
 * `--concurrent-horizontal-pod-autoscaler-syncs`), each read blocking its
 * worker, so reads trickle in one at a time and every expired entry would
 * be its own backend call. With refresh-ahead the cache remembers the keys
 * read recently (key → last loader, TTL, last read time; bounded by entries
 * and bytes, a loader counted as a fixed `loaderBytes` estimate), and
 * shortly before their values expire reloads ALL of them
 * that were read since their value was stored, in one "round" per TTL: the
 * loads start together, so a batcher behind them (`./batch.ts`) sends them
 * as few backend calls. A key not read since its last refresh is dropped
 * (nothing is polled forever; no round runs when nothing was read). A round
 * that meets the in-flight bound (`maxEntries`) leaves the rest for the next
 * round, which starts where it stopped, so every key gets its turn. A
 * refresh is a normal load (same `loadTimeoutMs` deadline, readers of an
 * expired entry join it) except that its failure is never stored: the old
 * value stays only until its own `ttlMs` — a refresh never extends an
 * entry's life — and then reads load (and fail) as without refresh-ahead.
 * Rounds run from a timer (unref'd on Node) and from reads that find a round
 * due, so an injected clock drives them too; {@link CoalescingCache.close}
 * stops the timer and cancels refreshes in flight.
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

/**
 * Refresh-ahead of a {@link CoalescingCache} (see the module doc). Every
 * field is optional.
 */
export interface RefreshAheadOptions {
  /**
   * How long before a value expires its round starts, ms, from the read's
   * `ttlMs`. Default `min(ttlMs / 10, 3000)`: a round every 0.9 × TTL, early
   * enough for a load of up to 10 % of the TTL (3 s: the bridge's deadline)
   * to land before the old value expires. Clamped to [0, ttlMs / 2].
   */
  leadMs?: (ttlMs: number) => number;
  /** most keys remembered (default: the cache's `maxEntries`); the oldest remembered is dropped first */
  maxKeys?: number;
  /**
   * Most bytes of remembered keys and loaders (default: the cache's
   * `maxBytes` / 4); a remembered key counts `key.length × 2 + loaderBytes`.
   */
  maxBytes?: number;
  /**
   * Estimated bytes of one remembered loader and its record, a fixed
   * estimate per key (the cache cannot measure a closure): the closure (~64), what it captures (the query item of one
   * series, e.g. a CloudWatch `MetricDataQuery`, and the provider's `this`,
   * shared) and the remembered record (~80). Default 512. A caller whose
   * loaders capture more passes its own figure: the estimate is what bounds
   * the memory of remembered loaders.
   */
  loaderBytes?: number;
  /**
   * Timer for rounds (tests inject one): run `run` after `ms`, return a
   * cancel function. Default `setTimeout`, unref'd where the runtime allows.
   */
  setTimer?: (run: () => void, ms: number) => () => void;
}

interface Remembered<V> {
  load: (signal: AbortSignal) => Promise<V>;
  ttlMs: number;
  /** ms since epoch */
  lastReadAt: number;
  bytes: number;
}

/** How a read was answered. */
export type CacheOutcome = "hit" | "failure-hit" | "coalesced" | "miss";

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
/** Default {@link RefreshAheadOptions.loaderBytes}, bytes. */
const DEFAULT_LOADER_BYTES = 512;

/**
 * TTL + LRU cache with in-flight coalescing, keyed by string.
 *
 * @example
 * const v = await cache.get("sqs|us-east-1|worker_tasks", 5_000, (signal) => readQueue(signal));
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
  #lastOutcome: CacheOutcome = "miss";
  readonly #refresh: Required<RefreshAheadOptions> | undefined;
  /** refresh-ahead: keys read recently, oldest remembered first */
  readonly #remembered = new Map<string, Remembered<V>>();
  #rememberedBytes = 0;
  /** refresh-ahead: TTL (ms) → when its next round is due (ms since epoch) */
  readonly #rounds = new Map<number, number>();
  /** refresh-ahead: TTL (ms) → the key its next round starts with (where the last one hit the in-flight bound) */
  readonly #roundStart = new Map<number, string>();
  #cancelTimer: (() => void) | undefined;
  /** when the armed timer fires (ms since epoch by `now`) */
  #timerAt = Number.POSITIVE_INFINITY;
  /** refresh loads in flight → their key, to cancel on close */
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
    const r = options.refreshAhead;
    this.#refresh =
      r === undefined
        ? undefined
        : {
            leadMs: r.leadMs ?? ((ttlMs) => Math.min(ttlMs / 10, 3000)),
            maxKeys: r.maxKeys ?? this.#maxEntries,
            maxBytes: r.maxBytes ?? this.#maxBytes / 4,
            loaderBytes: r.loaderBytes ?? DEFAULT_LOADER_BYTES,
            setTimer: r.setTimer ?? defaultSetTimer,
          };
  }

  /**
   * Return the value for `key`: a stored one no older than `ttlMs` nor than
   * its own `keepMs` (or a
   * stored failure still within its failure TTL), else the result of the
   * load already in flight for `key`, else a new `load(signal)`.
   *
   * {@link lastOutcome} says, synchronously after the call, how it was answered.
   *
   * @param ttlMs longest age (ms) of a stored value that may be returned; 0
   *   disables re-use of stored values (in-flight loads are still shared)
   * @throws whatever `load` rejects with; a `TimeoutError` DOMException past
   *   `loadTimeoutMs`; the caller's `signal.reason` when it aborts;
   *   {@link CacheFullError} when `maxEntries` loads are in flight
   */
  get(key: string, ttlMs: number, load: (signal: AbortSignal) => Promise<V>, options: CacheReadOptions = {}): Promise<V> {
    const remember = this.#refresh !== undefined && ttlMs > 0 && !this.#closed;
    const entry = this.#entries.get(key);
    // The clock is read once per read, and only when something needs it.
    const now = remember || entry !== undefined ? this.#now() : 0;
    // (#remember may run a round; a round never changes the stored entries synchronously: `entry` stays right)
    if (remember) this.#remember(key, ttlMs, load, now);
    if (entry !== undefined) {
      if (this.#freshHit(key, entry, ttlMs, now)) {
        if (this.#renewAfterMs !== undefined) this.#renew(key, entry, ttlMs, load, now);
        return Promise.resolve(entry.value);
      }
      if (!entry.ok && now < entry.expiresAt && now >= entry.storedAt) {
        // (a clock stepped back past storedAt does not stretch a failure's life)
        this.stats.failureHits++;
        this.#lastOutcome = "failure-hit";
        return Promise.reject(entry.error);
      }
    }
    let inflight = this.#inflight.get(key);
    if (inflight !== undefined) {
      this.stats.coalesced++;
      this.#lastOutcome = "coalesced";
    } else {
      if (this.#inflight.size >= this.#maxEntries) {
        this.stats.refused++;
        this.#lastOutcome = "miss";
        return Promise.reject(new CacheFullError(this.#maxEntries));
      }
      inflight = this.#start(key, load);
      this.#lastOutcome = "miss";
    }
    return this.#wait(key, inflight, options.signal);
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
    if (this.#refresh !== undefined && !this.#closed) this.#remember(key, ttlMs, load, now);
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
    this.#lastOutcome = "hit";
    return true;
  }

  /** How the last {@link get} call was answered (set synchronously inside it). */
  get lastOutcome(): CacheOutcome {
    return this.#lastOutcome;
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
    return { keys: this.#remembered.size, bytes: this.#rememberedBytes };
  }

  /** Refresh-ahead: whether a round timer is armed. */
  get refreshTimerArmed(): boolean {
    return this.#cancelTimer !== undefined;
  }

  /**
   * Stop refresh-ahead and renewal for good: cancel the round timer, abort
   * refresh and renewal loads in flight (their readers reject with an
   * `AbortError` DOMException) and forget the remembered keys. Reads keep
   * working as without either. Idempotent.
   */
  close(): void {
    this.#closed = true;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    this.#rounds.clear();
    this.#roundStart.clear();
    this.#remembered.clear();
    this.#rememberedBytes = 0;
    for (const [record, key] of this.#refreshing) {
      if (this.#inflight.get(key) === record) this.#inflight.delete(key); // later reads start their own load
      record.controller.abort(new DOMException("the cache was closed", "AbortError"));
    }
    this.#refreshing.clear();
  }

  /** Refresh-ahead: note a read of `key` at `now` (its loader and TTL), start its TTL's rounds, run a round that is due. */
  #remember(key: string, ttlMs: number, load: (signal: AbortSignal) => Promise<V>, now: number): void {
    const known = this.#remembered.get(key);
    if (known !== undefined) {
      known.lastReadAt = now;
      known.load = load;
      known.ttlMs = ttlMs;
    } else {
      const limits = this.#refresh!;
      const bytes = key.length * 2 + limits.loaderBytes;
      if (bytes > limits.maxBytes) return;
      while (this.#remembered.size > 0 && (this.#remembered.size >= limits.maxKeys || this.#rememberedBytes + bytes > limits.maxBytes)) {
        this.#forget(this.#remembered.keys().next().value as string);
      }
      this.#remembered.set(key, { load, ttlMs, lastReadAt: now, bytes });
      this.#rememberedBytes += bytes;
    }
    if (!this.#rounds.has(ttlMs)) {
      const entry = this.#entries.get(key);
      const base = entry?.ok === true && entry.storedAt <= now ? entry.storedAt : now;
      this.#rounds.set(ttlMs, base + ttlMs - this.#lead(ttlMs));
    }
    if (now >= this.#nextRoundAt()) this.#runDueRounds(now);
    else this.#arm(now);
  }

  /** When the earliest round is due, ms since epoch (Infinity when none): the least value of `#rounds` (one per distinct TTL: a few). */
  #nextRoundAt(): number {
    let next = Number.POSITIVE_INFINITY;
    for (const at of this.#rounds.values()) if (at < next) next = at;
    return next;
  }

  #forget(key: string): void {
    const known = this.#remembered.get(key);
    if (known === undefined) return;
    this.#remembered.delete(key);
    this.#rememberedBytes -= known.bytes;
  }

  #lead(ttlMs: number): number {
    const lead = this.#refresh!.leadMs(ttlMs);
    return Number.isFinite(lead) ? Math.min(Math.max(0, lead), ttlMs / 2) : 0;
  }

  /** Arm the timer for the next round (when it is not armed for that time already). */
  #arm(now: number): void {
    const nextRoundAt = this.#nextRoundAt();
    if (this.#closed || nextRoundAt === this.#timerAt) return;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#timerAt = nextRoundAt;
    if (!Number.isFinite(nextRoundAt)) return;
    this.#cancelTimer = this.#refresh!.setTimer(
      () => {
        this.#cancelTimer = undefined;
        this.#timerAt = Number.POSITIVE_INFINITY;
        if (this.#closed) return;
        const t = this.#now();
        if (t >= this.#nextRoundAt()) this.#runDueRounds(t);
        else this.#arm(t); // an injected clock that has not reached the round yet
      },
      Math.max(0, nextRoundAt - now),
    );
  }

  /** Run every round due at `now`, then arm the timer for the next one. */
  #runDueRounds(now: number): void {
    for (const [ttlMs, at] of [...this.#rounds]) {
      if (at > now) continue;
      const refreshed = this.#round(ttlMs);
      if (refreshed > 0) this.#rounds.set(ttlMs, now + ttlMs - this.#lead(ttlMs));
      else {
        this.#rounds.delete(ttlMs); // nothing read recently: no more rounds until a read
        this.#roundStart.delete(ttlMs);
      }
    }
    this.#arm(now);
  }

  /**
   * One round for the keys remembered with `ttlMs`: reload each one read
   * since its value was stored (all started now, so a batcher behind the
   * loaders groups them); forget the others. Returns how many were reloaded,
   * already loading, or left for the next round.
   *
   * When `maxEntries` loads are in flight the round stops starting loads,
   * and the next round of this TTL starts with the first key left out (then
   * wraps around), so every remembered key is refreshed in turn rather than
   * the same first keys every round.
   */
  #round(ttlMs: number): number {
    this.stats.refreshRounds++;
    const keys = [...this.#remembered.keys()];
    const startKey = this.#roundStart.get(ttlMs);
    this.#roundStart.delete(ttlMs);
    const first = startKey === undefined ? 0 : Math.max(0, keys.indexOf(startKey));
    let refreshed = 0;
    let full = false;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[(first + i) % keys.length]!;
      const known = this.#remembered.get(key)!;
      if (known.ttlMs !== ttlMs) continue;
      const entry = this.#entries.get(key);
      if (entry === undefined || !entry.ok || known.lastReadAt <= entry.storedAt) {
        this.#forget(key); // not read since its value was stored (or no value): not refreshed
        continue;
      }
      refreshed++;
      if (full || this.#inflight.has(key)) continue;
      if (this.#inflight.size >= this.#maxEntries) {
        full = true;
        this.#roundStart.set(ttlMs, key); // the next round starts here
        continue;
      }
      this.stats.refreshes++;
      this.#start(key, known.load, true);
    }
    return refreshed;
  }
}

/** `setTimeout` that does not keep a Node process alive (`unref`, where the runtime has it); returns its cancel function. */
function defaultSetTimer(run: () => void, ms: number): () => void {
  const timer = setTimeout(run, ms) as unknown as { unref?: () => void };
  timer.unref?.();
  return () => clearTimeout(timer as unknown as ReturnType<typeof setTimeout>);
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

/** One entry of a {@link BoundedMap}: a node of its recency list. */
interface BoundedNode<K, V> {
  key: K;
  value: V;
  /** accounted size, bytes */
  bytes: number;
  /** towards the least recently used end */
  older: BoundedNode<K, V> | undefined;
  /** towards the most recently used end */
  newer: BoundedNode<K, V> | undefined;
}

/** Options of a {@link BoundedMap}. */
export interface BoundedMapOptions<K, V> {
  /** most entries kept (≥ 1) */
  maxEntries: number;
  /** most bytes kept, as counted by `sizeOf` (> 0) */
  maxBytes: number;
  /**
   * Estimated bytes one entry holds, key and value and bookkeeping included
   * (e.g. `key.length × 2 + 64` for a string key whose value is shared).
   * Called once per {@link BoundedMap.set}; must not throw.
   */
  sizeOf: (key: K, value: V) => number;
}

/**
 * A copy of `text` that refers to no other string. V8 keeps a substring (a
 * "sliced string") and a concatenation (a "cons string") as references to
 * the strings they were made from, so a memo key cut from a request's URL
 * (`url.pathname + url.search`) would keep the whole URL alive as long as
 * the entry (measured in `npm run bench:memory`'s heap snapshot: 10,000
 * request-memo keys held 10,000 full `https://…` URLs, ≈ 1.7 MB). A JSON
 * round trip makes a fresh flat string on every engine (Node, workerd);
 * about 0.5 µs for a 150-character key, paid once per stored entry.
 */
export function ownString(text: string): string {
  return JSON.parse(JSON.stringify(text)) as string;
}

/**
 * A map bounded by entries AND bytes, least recently used dropped first:
 * the one small bounded memo of this code base (the proxy's authorization
 * memo, route memo and parsed-selector memo use it). A memo, not a cache:
 * it has no expiry — what it holds must stay true while the process runs
 * (e.g. a value derived from its key only).
 *
 * - `get` and `set` are O(1): a `Map` from key to a node of a doubly linked
 *   recency list (a hit moves one node; no re-hashing, no allocation).
 * - Each entry counts `sizeOf(key, value)` bytes; past `maxEntries` or
 *   `maxBytes` the least recently used entries are dropped.
 * - A string key is stored as its own flat copy ({@link ownString}), so an
 *   entry never keeps alive the larger string its key was cut from.
 * - An entry larger than `maxBytes` on its own is refused (`set` returns
 *   false and nothing is dropped for it); an older entry of the same key is
 *   then removed, so a stale value is never answered.
 *
 * @example
 * const routes = new BoundedMap<string, string>({ maxEntries: 10_000, maxBytes: 2 << 20, sizeOf: (k) => k.length * 2 + 64 });
 */
export class BoundedMap<K, V> {
  readonly maxEntries: number;
  readonly maxBytes: number;
  readonly #sizeOf: (key: K, value: V) => number;
  readonly #nodes = new Map<K, BoundedNode<K, V>>();
  /** least recently used */
  #oldest: BoundedNode<K, V> | undefined;
  /** most recently used */
  #newest: BoundedNode<K, V> | undefined;
  #bytes = 0;
  /** entries dropped to stay within the bounds */
  evictions = 0;

  constructor(options: BoundedMapOptions<K, V>) {
    if (!(options.maxEntries >= 1) || !(options.maxBytes > 0)) throw new RangeError("BoundedMap needs maxEntries ≥ 1 and maxBytes > 0");
    this.maxEntries = options.maxEntries;
    this.maxBytes = options.maxBytes;
    this.#sizeOf = options.sizeOf;
  }

  /** The value of `key` (it becomes the most recently used), or undefined. */
  get(key: K): V | undefined {
    const node = this.#nodes.get(key);
    if (node === undefined) return undefined;
    if (node !== this.#newest) {
      this.#unlink(node);
      this.#append(node);
    }
    return node.value;
  }

  /** Whether `key` is held (its recency is not changed). */
  has(key: K): boolean {
    return this.#nodes.has(key);
  }

  /**
   * Keep `value` for `key` as the most recently used entry, dropping least
   * recently used entries past the bounds.
   *
   * @returns false when the entry alone is larger than `maxBytes` (not kept)
   */
  set(key: K, value: V): boolean {
    this.delete(key);
    if (typeof key === "string") key = ownString(key) as K;
    const bytes = this.#sizeOf(key, value);
    if (!(bytes <= this.maxBytes)) return false;
    const node: BoundedNode<K, V> = { key, value, bytes, older: undefined, newer: undefined };
    this.#nodes.set(key, node);
    this.#append(node);
    this.#bytes += bytes;
    while (this.#oldest !== undefined && (this.#nodes.size > this.maxEntries || this.#bytes > this.maxBytes)) {
      this.delete(this.#oldest.key);
      this.evictions++;
    }
    return true;
  }

  /** Forget `key`; returns whether it was held. */
  delete(key: K): boolean {
    const node = this.#nodes.get(key);
    if (node === undefined) return false;
    this.#nodes.delete(key);
    this.#unlink(node);
    this.#bytes -= node.bytes;
    return true;
  }

  /** Forget everything. */
  clear(): void {
    this.#nodes.clear();
    this.#oldest = this.#newest = undefined;
    this.#bytes = 0;
  }

  /** Entries held. */
  get size(): number {
    return this.#nodes.size;
  }

  /** Bytes accounted to the entries held (their `sizeOf` sum). */
  get bytes(): number {
    return this.#bytes;
  }

  /** Keys from the least to the most recently used (for tests and diagnostics). */
  *keys(): IterableIterator<K> {
    for (let n = this.#oldest; n !== undefined; n = n.newer) yield n.key;
  }

  #unlink(node: BoundedNode<K, V>): void {
    if (node.older !== undefined) node.older.newer = node.newer;
    else this.#oldest = node.newer;
    if (node.newer !== undefined) node.newer.older = node.older;
    else this.#newest = node.older;
    node.older = node.newer = undefined;
  }

  #append(node: BoundedNode<K, V>): void {
    node.older = this.#newest;
    if (this.#newest !== undefined) this.#newest.newer = node;
    else this.#oldest = node;
    this.#newest = node;
  }
}
