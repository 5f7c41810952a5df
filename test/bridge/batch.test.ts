/**
 * The core batcher (`shared/batch.ts`): concurrent reads share one backend
 * call, calls never exceed their size, one failed item fails only its own
 * reads, and whole-call failures caused by one item are isolated by splitting.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fcRuns } from "../helpers/fc.ts";
import { Batcher, type Outcome } from "../../shared/batch.ts";

/** A batcher over numbers whose backend call doubles each item and records the batches it saw. */
function doubling(options: Partial<ConstructorParameters<typeof Batcher<number, number>>[0]> = {}) {
  const calls: number[][] = [];
  const batcher = new Batcher<number, number>({
    maxBatchSize: 500,
    execute: async (items) => {
      calls.push([...items]);
      return items.map((n): Outcome<number> => (n < 0 ? { ok: false, error: new Error(`negative ${n}`) } : { ok: true, value: n * 2 }));
    },
    ...options,
  });
  return { batcher, calls };
}

const settle = <T>(p: Promise<T>) => p.then((value) => ({ value }), (error: Error) => ({ error: error.message }));

describe("Batcher", () => {
  it("sends reads that arrive together as one call", async () => {
    const { batcher, calls } = doubling();
    const values = await Promise.all(Array.from({ length: 50 }, (_, i) => batcher.load(i)));
    expect(values).toEqual(Array.from({ length: 50 }, (_, i) => i * 2));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toHaveLength(50);
    expect(batcher.stats).toMatchObject({ calls: 1, items: 50, largestCall: 50 });
  });

  it("never exceeds maxBatchSize, counting each item's size", async () => {
    const { batcher, calls } = doubling({ maxBatchSize: 10, size: (n) => (n % 2 === 0 ? 1 : 4) });
    const values = await Promise.all(Array.from({ length: 30 }, (_, i) => batcher.load(i)));
    expect(values).toEqual(Array.from({ length: 30 }, (_, i) => i * 2));
    for (const call of calls) expect(call.reduce((s, n) => s + (n % 2 === 0 ? 1 : 4), 0)).toBeLessThanOrEqual(10);
    expect(calls.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i));
  });

  it("holds for any arrival pattern: every item answered once, no call over the limit (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 120 }),
        fc.integer({ min: 1, max: 17 }),
        async (items, max) => {
          const { batcher, calls } = doubling({ maxBatchSize: max });
          const values = await Promise.all(items.map((n) => batcher.load(n)));
          expect(values).toEqual(items.map((n) => n * 2));
          expect(calls.every((c) => c.length <= max)).toBe(true);
          expect(calls.flat()).toHaveLength(items.length);
          expect(calls).toHaveLength(Math.ceil(items.length / max));
        },
      ),
      fcRuns(60),
    );
  });

  it("keeps groups apart", async () => {
    const { batcher, calls } = doubling({ group: (n) => (n < 100 ? "small" : "large") });
    await Promise.all([1, 200, 2, 300, 3].map((n) => batcher.load(n)));
    expect(calls.map((c) => [...c].sort((a, b) => a - b))).toEqual([
      [1, 2, 3],
      [200, 300],
    ]);
  });

  it("a failed item fails only the reads that asked for it", async () => {
    const { batcher, calls } = doubling();
    const results = await Promise.all([1, -5, 3].map((n) => settle(batcher.load(n))));
    expect(results).toEqual([{ value: 2 }, { error: "negative -5" }, { value: 6 }]);
    expect(calls).toHaveLength(1);
  });

  it("a whole-call failure fails every read of the call when splitting is not allowed", async () => {
    let calls = 0;
    const batcher = new Batcher<number, number>({
      maxBatchSize: 10,
      execute: async () => {
        calls++;
        throw new Error("backend down");
      },
    });
    const results = await Promise.all([1, 2, 3].map((n) => settle(batcher.load(n))));
    expect(results).toEqual([{ error: "backend down" }, { error: "backend down" }, { error: "backend down" }]);
    expect(calls).toBe(1);
  });

  it("splits a batch rejected because of one item, so only that item's reads fail", async () => {
    const calls: number[][] = [];
    const batcher = new Batcher<number, number>({
      maxBatchSize: 500,
      execute: async (items) => {
        calls.push([...items]);
        if (items.includes(13)) throw Object.assign(new Error("ValidationError: query 13 is invalid"), { name: "ValidationError" });
        return items.map((n) => ({ ok: true as const, value: n * 2 }));
      },
      splitOnError: (err) => (err as Error).name === "ValidationError",
    });
    const items = Array.from({ length: 16 }, (_, i) => i);
    const results = await Promise.all(items.map((n) => settle(batcher.load(n))));
    expect(results.filter((r) => "error" in r)).toEqual([{ error: "ValidationError: query 13 is invalid" }]);
    expect(results.filter((r) => "value" in r)).toHaveLength(15);
    // 16 → 8+8 → 4+4 (one side) → 2+2 → 1+1: log2(16) levels of splitting, 9 calls in all
    expect(calls).toHaveLength(9);
    expect(batcher.stats.splits).toBe(4);
    expect(calls).toContainEqual([13]);
  });

  it("does not split errors that say nothing about a single item (throttling, outage)", async () => {
    let calls = 0;
    const batcher = new Batcher<number, number>({
      maxBatchSize: 500,
      execute: async () => {
        calls++;
        throw Object.assign(new Error("Rate exceeded"), { name: "Throttling" });
      },
      splitOnError: (err) => (err as Error).name === "ValidationError",
    });
    await Promise.all([1, 2, 3, 4].map((n) => settle(batcher.load(n))));
    expect(calls).toBe(1);
  });

  it("rejects every read when execute answers the wrong number of outcomes", async () => {
    const batcher = new Batcher<number, number>({ maxBatchSize: 5, execute: async () => [{ ok: true, value: 1 }] });
    const results = await Promise.all([1, 2].map((n) => settle(batcher.load(n))));
    expect(results).toEqual([
      { error: "batch execute returned 1 outcomes for 2 items" },
      { error: "batch execute returned 1 outcomes for 2 items" },
    ]);
  });

  it("waits windowMs for more reads; later reads start a new call", async () => {
    const { batcher, calls } = doubling({ windowMs: 30 });
    const first = batcher.load(1);
    await new Promise((r) => setTimeout(r, 5));
    const second = batcher.load(2); // inside the window: same call
    expect(batcher.queued).toBe(2);
    expect(await Promise.all([first, second])).toEqual([2, 4]);
    expect(calls).toEqual([[1, 2]]);
    expect(await batcher.load(3)).toBe(6);
    expect(calls).toEqual([[1, 2], [3]]);
  });

  it("uses the injected timer for the window", async () => {
    const timers: { run: () => void; ms: number }[] = [];
    const { batcher, calls } = doubling({ windowMs: 1000, schedule: (run, ms) => void timers.push({ run, ms }) });
    const reads = [batcher.load(1), batcher.load(2)];
    await Promise.resolve();
    expect(calls).toHaveLength(0);
    expect(timers.map((t) => t.ms)).toEqual([1000]);
    timers[0]!.run();
    expect(await Promise.all(reads)).toEqual([2, 4]);
    expect(calls).toHaveLength(1);
  });

  it("a throwing splitOnError rejects every read of the batch with the call's error (none left unsettled)", async () => {
    let calls = 0;
    const batcher = new Batcher<number, number>({
      maxBatchSize: 500,
      execute: async () => {
        calls++;
        throw new Error("backend refused the call");
      },
      splitOnError: () => {
        throw new TypeError("splitOnError is broken");
      },
    });
    // Before the fix these promises never settled: the test timed out.
    const results = await Promise.race([
      Promise.all([1, 2, 3].map((n) => settle(batcher.load(n)))),
      new Promise<"unsettled">((resolve) => setTimeout(() => resolve("unsettled"), 2000)),
    ]);
    expect(results).toEqual([{ error: "backend refused the call" }, { error: "backend refused the call" }, { error: "backend refused the call" }]);
    expect(calls).toBe(1);
  });

  it("a read whose signal aborts rejects at once with the reason; the call goes on for the others", async () => {
    const signals: AbortSignal[] = [];
    let release: () => void = () => {};
    const batcher = new Batcher<number, number>({
      maxBatchSize: 500,
      execute: async (items, _group, signal) => {
        signals.push(signal);
        await new Promise<void>((resolve) => (release = resolve));
        return items.map((n) => ({ ok: true as const, value: n * 2 }));
      },
    });
    const leaving = new AbortController();
    const a = settle(batcher.load(1, leaving.signal));
    const b = batcher.load(2);
    await new Promise((r) => setTimeout(r, 5));
    leaving.abort(new Error("caller left"));
    expect(await a).toEqual({ error: "caller left" });
    expect(signals[0]!.aborted).toBe(false); // read 2 still waits
    release();
    expect(await b).toBe(4);
  });

  it("aborts the backend call's signal when every read of the call has gone", async () => {
    const signals: AbortSignal[] = [];
    const batcher = new Batcher<number, number>({
      maxBatchSize: 500,
      execute: (items, _group, signal) => {
        signals.push(signal);
        return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
      },
    });
    const callers = [new AbortController(), new AbortController()];
    const reads = callers.map((c, i) => settle(batcher.load(i, c.signal)));
    await new Promise((r) => setTimeout(r, 5));
    expect(signals).toHaveLength(1);
    callers[0]!.abort(new Error("first left"));
    expect(signals[0]!.aborted).toBe(false);
    callers[1]!.abort(new Error("second left"));
    expect(signals[0]!.aborted).toBe(true);
    expect(await Promise.all(reads)).toEqual([{ error: "first left" }, { error: "second left" }]);
  });

  it("does not send a batch whose reads all left before it was flushed", async () => {
    const { batcher, calls } = doubling({ windowMs: 20 });
    const caller = new AbortController();
    const read = settle(batcher.load(1, caller.signal));
    caller.abort(new Error("gone"));
    expect(await read).toEqual({ error: "gone" });
    await new Promise((r) => setTimeout(r, 40));
    expect(calls).toHaveLength(0);
    expect(batcher.stats.calls).toBe(0);
    // an already-aborted signal is refused without queueing
    const aborted = AbortSignal.abort(new Error("already gone"));
    expect(await settle(batcher.load(2, aborted))).toEqual({ error: "already gone" });
    expect(batcher.queued).toBe(0);
  });

  it("refuses a maxBatchSize below 1", () => {
    expect(() => new Batcher({ maxBatchSize: 0, execute: async () => [] })).toThrow(RangeError);
  });
});
