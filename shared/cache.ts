/**
 * A bounded TTL cache that coalesces identical in-flight loads.
 *
 * Why: the HPA controller polls every external metric of every HPA about
 * every 15 s (kube-controller-manager `--horizontal-pod-autoscaler-sync-period`),
 * so many identical reads arrive together. Identical reads share one backend
 * call while it is in flight, and a value is re-used for at most `ttlMs`.
 * Failures are never cached: the next read tries the backend again (callers
 * waiting on the same in-flight load all receive the same failure).
 *
 * The cache lives per process or per Worker isolate; it is an optimisation,
 * never a source of truth: an entry older than the caller's `ttlMs` is never
 * returned, so staleness is bounded by the rule's `maxAgeSeconds`.
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

/** A cached value and the time it was stored (ms since epoch). */
interface Entry<V> {
  value: V;
  storedAt: number;
}

/** Counters for observability and tests. */
export interface CacheStats {
  /** reads answered from a fresh stored value */
  hits: number;
  /** reads that joined a load already in flight */
  coalesced: number;
  /** loads started (backend calls) */
  loads: number;
  /** loads that failed */
  failures: number;
}

/** Options of a {@link CoalescingCache}. */
export interface CoalescingCacheOptions {
  /** most entries kept; the least recently used is dropped first (default 10 000) */
  maxEntries?: number;
  /** clock in ms since epoch (tests inject one) */
  now?: () => number;
}

/**
 * TTL + LRU cache with in-flight coalescing, keyed by string.
 *
 * @example
 * const v = await cache.get("sqs|us-east-1|worker_tasks", 5_000, () => readQueue());
 */
export class CoalescingCache<V> {
  readonly stats: CacheStats = { hits: 0, coalesced: 0, loads: 0, failures: 0 };
  private readonly entries = new Map<string, Entry<V>>();
  private readonly inflight = new Map<string, Promise<V>>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: CoalescingCacheOptions = {}) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * Return the value for `key`: a stored one no older than `ttlMs`, else the
   * result of the load already in flight for `key`, else a new `load()`.
   *
   * @param ttlMs longest age (ms) of a stored value that may be returned; 0
   *   disables re-use of stored values (in-flight loads are still shared)
   * @throws whatever `load` rejects with (not cached)
   */
  async get(key: string, ttlMs: number, load: () => Promise<V>): Promise<V> {
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      if (ttlMs > 0 && this.now() - entry.storedAt <= ttlMs) {
        // refresh LRU position
        this.entries.delete(key);
        this.entries.set(key, entry);
        this.stats.hits++;
        return entry.value;
      }
    }
    const pending = this.inflight.get(key);
    if (pending !== undefined) {
      this.stats.coalesced++;
      return pending;
    }
    this.stats.loads++;
    const promise = (async () => {
      try {
        const value = await load();
        this.set(key, value);
        return value;
      } catch (err) {
        this.stats.failures++;
        throw err;
      } finally {
        this.inflight.delete(key);
      }
    })();
    this.inflight.set(key, promise);
    return promise;
  }

  /** Store `value` for `key` now, evicting the least recently used entry past the bound. */
  set(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, { value, storedAt: this.now() });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  /** Forget `key` (e.g. a queue URL that stopped existing). */
  delete(key: string): void {
    this.entries.delete(key);
  }

  /** Number of stored entries. */
  get size(): number {
    return this.entries.size;
  }
}
