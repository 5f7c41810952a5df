/**
 * Refresh-ahead of a `CoalescingCache` (`./coalescing.ts`, option
 * `refreshAhead`, off by default): what it remembers and when its rounds
 * run. The cache starts the loads ({@link RefreshTarget}).
 *
 * Why: the HPA controller reads with 5 sync workers (kube-controller-manager
 * `--concurrent-horizontal-pod-autoscaler-syncs`), each read blocking its
 * worker, so reads trickle in one at a time and every expired entry would
 * be its own backend call. With refresh-ahead the cache remembers the keys
 * read recently (key → last loader, TTL, last read time; bounded by entries
 * and bytes, a loader counted as a fixed `loaderBytes` estimate), and
 * shortly before their values expire reloads ALL of them
 * that were read since their value was stored, in one "round" per TTL: the
 * loads start together, so a batcher behind them (`../batch.ts`) sends them
 * as few backend calls. A key not read since its last refresh is dropped
 * (nothing is polled forever; no round runs when nothing was read). A round
 * that meets the in-flight bound (`maxEntries`) leaves the rest for the next
 * round, which starts where it stopped, so every key gets its turn. A
 * refresh is a load of the cache whose failure is never stored (the cache's
 * module doc). Rounds run from a timer (unref'd on Node) and from reads that
 * find a round due, so an injected clock drives them too;
 * {@link RefreshAhead.close} stops the timer and forgets every key.
 */

/**
 * Refresh-ahead of a `CoalescingCache` (see the module doc). Every field is
 * optional.
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

/**
 * What refresh-ahead asks of the cache it serves: the cache's stored values,
 * loads in flight, clock and counters stay the cache's own.
 */
export interface RefreshTarget<V> {
  /** when the value stored for `key` was stored, ms since epoch; undefined when none is (nothing, or a stored failure) */
  storedAt(key: string): number | undefined;
  /** whether a load of `key` is in flight */
  loading(key: string): boolean;
  /** whether the cache's in-flight bound (`maxEntries` loads) is reached: no load may start */
  full(): boolean;
  /** start a refresh load of `key` with `load` (counted in the cache's `refreshes` and `loads`) */
  refresh(key: string, load: (signal: AbortSignal) => Promise<V>): void;
  /** count a round run (the cache's `refreshRounds`) */
  roundRun(): void;
  /** the cache's clock, ms since epoch */
  now(): number;
}

interface Remembered<V> {
  load: (signal: AbortSignal) => Promise<V>;
  ttlMs: number;
  /** ms since epoch */
  lastReadAt: number;
  bytes: number;
}

/** Default {@link RefreshAheadOptions.loaderBytes}, bytes. */
const DEFAULT_LOADER_BYTES = 512;

/**
 * The keys a cache read recently and the rounds that reload them (see the
 * module doc). The cache calls {@link remember} on every read that may be
 * refreshed (a read with `ttlMs` > 0 before {@link close}).
 */
export class RefreshAhead<V> {
  readonly #limits: Required<RefreshAheadOptions>;
  readonly #target: RefreshTarget<V>;
  /** keys read recently, oldest remembered first */
  readonly #remembered = new Map<string, Remembered<V>>();
  #rememberedBytes = 0;
  /** TTL (ms) → when its next round is due (ms since epoch) */
  readonly #rounds = new Map<number, number>();
  /** TTL (ms) → the key its next round starts with (where the last one hit the in-flight bound) */
  readonly #roundStart = new Map<number, string>();
  #cancelTimer: (() => void) | undefined;
  /** when the armed timer fires (ms since epoch by `now`) */
  #timerAt = Number.POSITIVE_INFINITY;
  #closed = false;

  /**
   * @param cache the cache's own bounds, the defaults of `maxKeys`
   *   (`maxEntries`) and `maxBytes` (a quarter of the cache's)
   */
  constructor(options: RefreshAheadOptions, cache: { maxEntries: number; maxBytes: number }, target: RefreshTarget<V>) {
    this.#limits = {
      leadMs: options.leadMs ?? ((ttlMs) => Math.min(ttlMs / 10, 3000)),
      maxKeys: options.maxKeys ?? cache.maxEntries,
      maxBytes: options.maxBytes ?? cache.maxBytes / 4,
      loaderBytes: options.loaderBytes ?? DEFAULT_LOADER_BYTES,
      setTimer: options.setTimer ?? defaultSetTimer,
    };
    this.#target = target;
  }

  /** Keys remembered for the next rounds, and their accounted bytes. */
  get remembered(): { keys: number; bytes: number } {
    return { keys: this.#remembered.size, bytes: this.#rememberedBytes };
  }

  /** Whether a round timer is armed. */
  get timerArmed(): boolean {
    return this.#cancelTimer !== undefined;
  }

  /**
   * Stop for good: cancel the round timer and forget the remembered keys.
   * (The cache aborts the refreshes in flight.) Idempotent.
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
  }

  /**
   * Note a read of `key` at `now` (ms since epoch) with its loader and TTL,
   * start its TTL's rounds, run a round that is due. A round never changes
   * the cache's stored values synchronously.
   */
  remember(key: string, ttlMs: number, load: (signal: AbortSignal) => Promise<V>, now: number): void {
    const known = this.#remembered.get(key);
    if (known !== undefined) {
      known.lastReadAt = now;
      known.load = load;
      known.ttlMs = ttlMs;
    } else {
      const limits = this.#limits;
      const bytes = key.length * 2 + limits.loaderBytes;
      if (bytes > limits.maxBytes) return;
      while (this.#remembered.size > 0 && (this.#remembered.size >= limits.maxKeys || this.#rememberedBytes + bytes > limits.maxBytes)) {
        this.#forget(this.#remembered.keys().next().value as string);
      }
      this.#remembered.set(key, { load, ttlMs, lastReadAt: now, bytes });
      this.#rememberedBytes += bytes;
    }
    if (!this.#rounds.has(ttlMs)) {
      const storedAt = this.#target.storedAt(key);
      const base = storedAt !== undefined && storedAt <= now ? storedAt : now;
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
    const lead = this.#limits.leadMs(ttlMs);
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
    this.#cancelTimer = this.#limits.setTimer(
      () => {
        this.#cancelTimer = undefined;
        this.#timerAt = Number.POSITIVE_INFINITY;
        if (this.#closed) return;
        const t = this.#target.now();
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
    const target = this.#target;
    target.roundRun();
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
      const storedAt = target.storedAt(key);
      if (storedAt === undefined || known.lastReadAt <= storedAt) {
        this.#forget(key); // not read since its value was stored (or no value): not refreshed
        continue;
      }
      refreshed++;
      if (full || target.loading(key)) continue;
      if (target.full()) {
        full = true;
        this.#roundStart.set(ttlMs, key); // the next round starts here
        continue;
      }
      target.refresh(key, known.load);
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
