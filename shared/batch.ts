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
 * in front (`shared/cache/coalescing.ts`), which shares one in-flight load per key.
 *
 * Cancellation: each read may pass an `AbortSignal`. When it aborts, that
 * read rejects at once with the signal's reason and leaves its batch; a
 * batch whose every read has left is not sent, and a call already running
 * for it has its own signal (the third argument of `execute`) aborted, so a
 * backend call nobody waits for is cancelled.
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
   * outcome per item, in order. Rejects when the whole call failed. `signal`
   * aborts when every read waiting for this call has gone; pass it to the
   * backend call.
   */
  execute: (items: readonly I[], group: string, signal: AbortSignal) => Promise<readonly Outcome<R>[]>;
  /**
   * Whether a whole-call failure may be caused by one item, so that the
   * batch should be split and retried in halves (only for batches of ≥ 2).
   * Default: never split. If it throws, every read of the batch rejects with
   * the call's error.
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
  /** settle once; later calls are ignored */
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
  /** true once settled (answered, failed, or its caller's signal aborted) */
  settled: boolean;
  /** called when the caller's signal aborts (set by the run that carries this read) */
  onGone?: (reason: unknown) => void;
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
  #running = 0;

  constructor(options: BatcherOptions<I, R>) {
    if (!Number.isInteger(options.maxBatchSize) || options.maxBatchSize < 1) {
      throw new RangeError(`maxBatchSize must be a positive integer, got ${options.maxBatchSize}`);
    }
    this.options = options;
  }

  /**
   * Queue `item` for the next call of its group and resolve with its value.
   *
   * @param signal this read stops waiting when it aborts (see the module doc)
   * @throws (rejects with) the item's own error from `execute`, the
   *   whole-call error when the call failed and could not be split further,
   *   or `signal.reason` when the caller's signal aborted first
   */
  load(item: I, signal?: AbortSignal): Promise<R> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const group = this.options.group?.(item) ?? "";
    const units = Math.max(1, this.options.size?.(item) ?? 1);
    return new Promise<R>((resolveOuter, rejectOuter) => {
      const onAbort = () => {
        const reason = signal!.reason;
        waiter.reject(reason);
        waiter.onGone?.(reason);
      };
      const waiter: Waiter<I, R> = {
        item,
        settled: false,
        resolve: (value) => {
          if (waiter.settled) return;
          waiter.settled = true;
          signal?.removeEventListener("abort", onAbort);
          resolveOuter(value);
        },
        reject: (error) => {
          if (waiter.settled) return;
          waiter.settled = true;
          signal?.removeEventListener("abort", onAbort);
          rejectOuter(error);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
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
      batch.waiters.push(waiter);
      batch.units += units;
      if (batch.units >= this.options.maxBatchSize) this.flush(group);
    });
  }

  /** `execute` calls in progress (backend calls made and not yet answered, halves of a split counted each). */
  get running(): number {
    return this.#running;
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

  private async run(all: Waiter<I, R>[], group: string): Promise<void> {
    // Reads whose caller already left are not sent.
    const waiters = all.filter((w) => !w.settled);
    if (waiters.length === 0) return;
    const items = waiters.map((w) => w.item);
    this.stats.calls++;
    this.stats.items += items.length;
    this.stats.largestCall = Math.max(this.stats.largestCall, items.length);
    const controller = new AbortController();
    const onGone = (reason: unknown) => {
      if (!controller.signal.aborted && waiters.every((w) => w.settled)) controller.abort(reason);
    };
    for (const w of waiters) w.onGone = onGone;
    let outcomes: readonly Outcome<R>[];
    this.#running++;
    try {
      outcomes = await this.options.execute(items, group, controller.signal);
    } catch (error) {
      this.#running--;
      let split = false;
      try {
        split = waiters.length > 1 && !controller.signal.aborted && this.options.splitOnError?.(error, items) === true;
      } catch {
        split = false; // a throwing splitOnError must not leave reads unsettled
      }
      if (split) {
        this.stats.splits++;
        const half = Math.ceil(waiters.length / 2);
        await Promise.all([this.run(waiters.slice(0, half), group), this.run(waiters.slice(half), group)]);
        return;
      }
      for (const w of waiters) w.reject(error);
      return;
    }
    this.#running--;
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
