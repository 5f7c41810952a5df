/**
 * A batcher: reads that arrive together in one process or Worker isolate
 * are sent to the backend as one call.
 *
 * Why: the HPA controller re-syncs every autoscaler about every 15 s
 * (kube-controller-manager `--horizontal-pod-autoscaler-sync-period`), so
 * reads of different series arrive in bursts. Backends that answer many
 * series per call — CloudWatch `GetMetricData` (up to 500 queries), Cloud
 * Monitoring `ListTimeSeries` (one filter over many series) — are then
 * called once per burst instead of once per series.
 *
 * How: `load(item)` queues the item in its group; the group is flushed as
 * one `execute` call when it reaches `maxBatchSize` or when `windowMs` has
 * passed since its first item arrived. `execute` answers one outcome per
 * item, so a failed item fails only the reads that asked for it. When the
 * whole call fails and `splitOnError` says one bad item may be the cause
 * (e.g. AWS `ValidationError`), the batch is split in halves and each half
 * is retried on its own, down to single items: a bad query never fails the
 * reads batched beside it.
 *
 * Identical reads are not merged here: callers put a {@link CoalescingCache}
 * in front (`shared/cache.ts`), which shares one in-flight load per key.
 */

/** What `execute` says about one item: its value, or the error its reads fail with. */
export type Outcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

/** Options of a {@link Batcher}. */
export interface BatcherOptions<I, R> {
  /**
   * Most units per backend call (see `size`), ≥ 1. A batch is flushed as
   * soon as the next item would not fit.
   */
  maxBatchSize: number;
  /** how long the first item of a batch waits for others, ms (default 0: until the next macrotask) */
  windowMs?: number;
  /** units an item takes in a call, ≥ 1 (default 1); e.g. the queries a metric-math item sends */
  size?: (item: I) => number;
  /** items of different groups never share a call (default: one group) */
  group?: (item: I) => string;
  /**
   * One backend call for `items` (all of one group). Resolves to exactly one
   * outcome per item, in order. Rejects when the whole call failed.
   */
  execute: (items: readonly I[], group: string) => Promise<readonly Outcome<R>[]>;
  /**
   * Whether a whole-call failure may be caused by one item, so that the
   * batch should be split and retried in halves (only for batches of ≥ 2).
   * Default: never split.
   */
  splitOnError?: (error: unknown, items: readonly I[]) => boolean;
  /** timer used for the window (tests inject one); default `setTimeout` */
  schedule?: (run: () => void, ms: number) => void;
}

/** Counters for tests, logs and the backend-call benchmark. */
export interface BatcherStats {
  /** `execute` calls made (backend calls) */
  calls: number;
  /** items handed to `execute`, counting retried halves again */
  items: number;
  /** whole-call failures answered by splitting the batch */
  splits: number;
  /** largest number of items in one call */
  largestCall: number;
}

interface Waiter<I, R> {
  item: I;
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
}

interface Pending<I, R> {
  waiters: Waiter<I, R>[];
  units: number;
}

/**
 * Collects concurrent reads into backend calls of at most `maxBatchSize`
 * units, with per-item failure isolation.
 *
 * @example
 * const batcher = new Batcher({ maxBatchSize: 500, execute: (queries) => getMetricData(queries) });
 * const [a, b] = await Promise.all([batcher.load(q1), batcher.load(q2)]); // one call
 */
export class Batcher<I, R> {
  readonly stats: BatcherStats = { calls: 0, items: 0, splits: 0, largestCall: 0 };
  private readonly pending = new Map<string, Pending<I, R>>();
  private readonly options: BatcherOptions<I, R>;

  constructor(options: BatcherOptions<I, R>) {
    if (!Number.isInteger(options.maxBatchSize) || options.maxBatchSize < 1) {
      throw new RangeError(`maxBatchSize must be a positive integer, got ${options.maxBatchSize}`);
    }
    this.options = options;
  }

  /**
   * Queue `item` for the next call of its group and resolve with its value.
   *
   * @throws (rejects with) the item's own error from `execute`, or the
   *   whole-call error when the call failed and could not be split further
   */
  load(item: I): Promise<R> {
    const group = this.options.group?.(item) ?? "";
    const units = Math.max(1, this.options.size?.(item) ?? 1);
    return new Promise<R>((resolve, reject) => {
      let batch = this.pending.get(group);
      if (batch !== undefined && batch.units + units > this.options.maxBatchSize) {
        this.flush(group);
        batch = undefined;
      }
      if (batch === undefined) {
        batch = { waiters: [], units: 0 };
        this.pending.set(group, batch);
        const opened = batch;
        const schedule = this.options.schedule ?? ((run, ms) => void setTimeout(run, ms));
        schedule(() => {
          if (this.pending.get(group) === opened) this.flush(group);
        }, this.options.windowMs ?? 0);
      }
      batch.waiters.push({ item, resolve, reject });
      batch.units += units;
      if (batch.units >= this.options.maxBatchSize) this.flush(group);
    });
  }

  /** Items waiting for their call, over all groups. */
  get queued(): number {
    let n = 0;
    for (const batch of this.pending.values()) n += batch.waiters.length;
    return n;
  }

  private flush(group: string): void {
    const batch = this.pending.get(group);
    if (batch === undefined) return;
    this.pending.delete(group);
    void this.run(batch.waiters, group);
  }

  private async run(waiters: Waiter<I, R>[], group: string): Promise<void> {
    const items = waiters.map((w) => w.item);
    this.stats.calls++;
    this.stats.items += items.length;
    this.stats.largestCall = Math.max(this.stats.largestCall, items.length);
    let outcomes: readonly Outcome<R>[];
    try {
      outcomes = await this.options.execute(items, group);
    } catch (error) {
      if (waiters.length > 1 && this.options.splitOnError?.(error, items) === true) {
        this.stats.splits++;
        const half = Math.ceil(waiters.length / 2);
        await Promise.all([this.run(waiters.slice(0, half), group), this.run(waiters.slice(half), group)]);
        return;
      }
      for (const w of waiters) w.reject(error);
      return;
    }
    if (outcomes.length !== waiters.length) {
      const error = new Error(`batch execute returned ${outcomes.length} outcomes for ${waiters.length} items`);
      for (const w of waiters) w.reject(error);
      return;
    }
    waiters.forEach((w, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) w.resolve(outcome.value);
      else w.reject(outcome.error);
    });
  }
}
