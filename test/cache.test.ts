import { describe, expect, it } from "vitest";
import { CacheFullError, CoalescingCache } from "../shared/cache.ts";

/** A load that settles when the test says so, and records its signal. */
function deferred<V>() {
  let resolve!: (v: V) => void;
  let reject!: (e: unknown) => void;
  const signals: AbortSignal[] = [];
  const promise = new Promise<V>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const load = (signal: AbortSignal) => {
    signals.push(signal);
    return promise;
  };
  return { load, resolve, reject, signals };
}

describe("CoalescingCache", () => {
  it("re-uses a value within its TTL and reloads after it", async () => {
    let t = 1_000;
    const cache = new CoalescingCache<number>({ now: () => t });
    let calls = 0;
    const load = async () => ++calls;
    expect(await cache.get("k", 100, load)).toBe(1);
    expect(cache.lastOutcome).toBe("miss");
    t += 100;
    expect(await cache.get("k", 100, load)).toBe(1);
    expect(cache.lastOutcome).toBe("hit");
    t += 1;
    expect(await cache.get("k", 100, load)).toBe(2);
    expect(calls).toBe(2);
  });

  it("ttl 0 never re-uses a stored value but still coalesces in-flight loads", async () => {
    const cache = new CoalescingCache<number>();
    const d = deferred<number>();
    const a = cache.get("k", 0, d.load);
    const b = cache.get("k", 0, d.load);
    expect(cache.lastOutcome).toBe("coalesced");
    d.resolve(7);
    expect(await Promise.all([a, b])).toEqual([7, 7]);
    let calls = 0;
    await cache.get("k", 0, async () => ++calls);
    expect(calls).toBe(1);
    expect(cache.stats.loads).toBe(2);
  });

  it("evicts the least recently used entry past maxEntries", async () => {
    const cache = new CoalescingCache<string>({ maxEntries: 2 });
    await cache.get("a", 1e6, async () => "A");
    await cache.get("b", 1e6, async () => "B");
    await cache.get("a", 1e6, async () => "A2"); // touch a: b is now oldest
    await cache.get("c", 1e6, async () => "C");
    expect(cache.size).toBe(2);
    expect(await cache.get("a", 1e6, async () => "A3")).toBe("A");
    expect(await cache.get("b", 1e6, async () => "B2")).toBe("B2");
    expect(cache.stats.evictions).toBeGreaterThanOrEqual(1);
  });

  it("is bounded by bytes: large values push out old ones and an oversized value is not stored", async () => {
    const cache = new CoalescingCache<string>({ maxBytes: 80_000 });
    for (let i = 0; i < 50; i++) await cache.get(`k${i}`, 1e6, async () => "x".repeat(4_000));
    expect(cache.bytes).toBeLessThanOrEqual(80_000);
    expect(cache.size).toBeLessThan(50);
    const huge = "y".repeat(20_000); // 40 KB > maxBytes / 8
    expect(await cache.get("huge", 1e6, async () => huge)).toBe(huge);
    expect(await cache.get("huge", 1e6, async () => "reloaded")).toBe("reloaded");
  });

  it("does not cache failures by default; every waiter of a failing load gets the same error", async () => {
    const cache = new CoalescingCache<number>();
    const d = deferred<number>();
    const a = cache.get("k", 1e6, d.load);
    const b = cache.get("k", 1e6, d.load);
    const boom = new Error("boom");
    d.reject(boom);
    await expect(a).rejects.toBe(boom);
    await expect(b).rejects.toBe(boom);
    expect(await cache.get("k", 1e6, async () => 3)).toBe(3);
    expect(cache.stats.failures).toBe(1);
  });

  it("a loader that throws synchronously is a failure, not a crash", async () => {
    const cache = new CoalescingCache<number>();
    await expect(
      cache.get("k", 1e6, () => {
        throw new Error("sync");
      }),
    ).rejects.toThrow("sync");
    expect(cache.inflight).toBe(0);
  });

  it("caches a failure for failureTtlMs, then tries again", async () => {
    let t = 0;
    const cache = new CoalescingCache<number>({ now: () => t, failureTtlMs: (e) => ((e as Error).message === "throttled" ? 500 : 0) });
    let calls = 0;
    const failing = async () => {
      calls++;
      throw new Error("throttled");
    };
    await expect(cache.get("k", 1e6, failing)).rejects.toThrow("throttled");
    await expect(cache.get("k", 1e6, failing)).rejects.toThrow("throttled");
    expect(cache.lastOutcome).toBe("failure-hit");
    expect(calls).toBe(1);
    t = 501;
    await expect(cache.get("k", 1e6, failing)).rejects.toThrow("throttled");
    expect(calls).toBe(2);
    // an error whose TTL is 0 is not cached
    await expect(cache.get("other", 1e6, async () => Promise.reject(new Error("nope")))).rejects.toThrow("nope");
    expect(await cache.get("other", 1e6, async () => 1)).toBe(1);
  });

  it("a load past loadTimeoutMs rejects its waiters with TimeoutError and sees its signal aborted", async () => {
    const cache = new CoalescingCache<number>({ loadTimeoutMs: 30 });
    const d = deferred<number>(); // never settles
    await expect(cache.get("k", 1e6, d.load)).rejects.toMatchObject({ name: "TimeoutError" });
    expect(d.signals[0]!.aborted).toBe(true);
    expect(cache.stats.timeouts).toBe(1);
    expect(cache.inflight).toBe(0);
    expect(await cache.get("k", 1e6, async () => 5)).toBe(5);
  });

  it("a caller whose signal aborts leaves at once; the load is cancelled only when nobody waits", async () => {
    const cache = new CoalescingCache<number>();
    const d = deferred<number>();
    const c1 = new AbortController();
    const c2 = new AbortController();
    const a = cache.get("k", 1e6, d.load, { signal: c1.signal });
    const b = cache.get("k", 1e6, d.load, { signal: c2.signal });
    c1.abort(new Error("first gone"));
    await expect(a).rejects.toThrow("first gone");
    expect(d.signals[0]!.aborted).toBe(false);
    c2.abort(new Error("second gone"));
    await expect(b).rejects.toThrow("second gone");
    expect(d.signals[0]!.aborted).toBe(true);
    expect(cache.stats.abandoned).toBe(1);
    // the abandoned load's late answer is not stored
    d.resolve(9);
    expect(await cache.get("k", 1e6, async () => 10)).toBe(10);
  });

  it("an already aborted signal rejects without starting a useful wait", async () => {
    const cache = new CoalescingCache<number>();
    const c = new AbortController();
    c.abort(new Error("gone"));
    const d = deferred<number>();
    await expect(cache.get("k", 1e6, d.load, { signal: c.signal })).rejects.toThrow("gone");
    expect(d.signals[0]!.aborted).toBe(true);
  });

  it("delete during an in-flight load: waiters get the answer, it is not stored", async () => {
    const cache = new CoalescingCache<number>();
    const d = deferred<number>();
    const a = cache.get("k", 1e6, d.load);
    cache.delete("k");
    d.resolve(1);
    expect(await a).toBe(1);
    expect(cache.size).toBe(0);
  });

  it("refuses a new key when maxEntries loads are in flight", async () => {
    const cache = new CoalescingCache<number>({ maxEntries: 2 });
    const d = deferred<number>();
    const a = cache.get("a", 1e6, d.load);
    const b = cache.get("b", 1e6, d.load);
    await expect(cache.get("c", 1e6, d.load)).rejects.toBeInstanceOf(CacheFullError);
    expect(cache.stats.refused).toBe(1);
    d.resolve(1);
    await Promise.all([a, b]);
    expect(await cache.get("c", 1e6, async () => 2)).toBe(2);
  });
  it("keepMs shortens how long one value is re-used, and 0 keeps it from being stored", async () => {
    let t = 0;
    const cache = new CoalescingCache<{ v: number; keep: number }>({ now: () => t, keepMs: (x) => x.keep });
    let calls = 0;
    const load = (keep: number) => async () => ({ v: ++calls, keep });
    expect((await cache.get("short", 10_000, load(100))).v).toBe(1);
    t = 100;
    expect((await cache.get("short", 10_000, load(100))).v).toBe(1); // within min(ttl, keepMs)
    t = 101;
    expect((await cache.get("short", 10_000, load(100))).v).toBe(2); // past keepMs though within ttl
    expect((await cache.get("never", 10_000, load(0))).v).toBe(3);
    expect((await cache.get("never", 10_000, load(0))).v).toBe(4); // keepMs 0: not stored
    expect(cache.size).toBe(1);
  });
});
