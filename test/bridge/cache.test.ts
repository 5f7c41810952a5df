import { describe, expect, it } from "vitest";
import { CacheFullError, CoalescingCache } from "../../shared/cache/coalescing.ts";

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
    const miss = cache.get("k", 100, load);
    expect(miss.outcome).toBe("miss");
    expect(await miss.value).toBe(1);
    t += 100;
    const hit = cache.get("k", 100, load);
    expect(hit.outcome).toBe("hit");
    expect(await hit.value).toBe(1);
    t += 1;
    expect(await cache.get("k", 100, load).value).toBe(2);
    expect(calls).toBe(2);
  });

  it("ttl 0 never re-uses a stored value but still coalesces in-flight loads", async () => {
    const cache = new CoalescingCache<number>();
    const d = deferred<number>();
    const a = cache.get("k", 0, d.load);
    const b = cache.get("k", 0, d.load);
    expect(b.outcome).toBe("coalesced");
    d.resolve(7);
    expect(await Promise.all([a.value, b.value])).toEqual([7, 7]);
    let calls = 0;
    await cache.get("k", 0, async () => ++calls).value;
    expect(calls).toBe(1);
    expect(cache.stats.loads).toBe(2);
  });

  it("evicts the least recently used entry past maxEntries", async () => {
    const cache = new CoalescingCache<string>({ maxEntries: 2 });
    await cache.get("a", 1e6, async () => "A").value;
    await cache.get("b", 1e6, async () => "B").value;
    await cache.get("a", 1e6, async () => "A2").value; // touch a: b is now oldest
    await cache.get("c", 1e6, async () => "C").value;
    expect(cache.size).toBe(2);
    expect(await cache.get("a", 1e6, async () => "A3").value).toBe("A");
    expect(await cache.get("b", 1e6, async () => "B2").value).toBe("B2");
    expect(cache.stats.evictions).toBeGreaterThanOrEqual(1);
  });

  it("is bounded by bytes: large values push out old ones and an oversized value is not stored", async () => {
    const cache = new CoalescingCache<string>({ maxBytes: 80_000 });
    for (let i = 0; i < 50; i++) await cache.get(`k${i}`, 1e6, async () => "x".repeat(4_000)).value;
    expect(cache.bytes).toBeLessThanOrEqual(80_000);
    expect(cache.size).toBeLessThan(50);
    const huge = "y".repeat(20_000); // 40 KB > maxBytes / 8
    expect(await cache.get("huge", 1e6, async () => huge).value).toBe(huge);
    expect(await cache.get("huge", 1e6, async () => "reloaded").value).toBe("reloaded");
  });

  it("does not cache failures by default; every waiter of a failing load gets the same error", async () => {
    const cache = new CoalescingCache<number>();
    const d = deferred<number>();
    const a = cache.get("k", 1e6, d.load).value;
    const b = cache.get("k", 1e6, d.load).value;
    const boom = new Error("boom");
    d.reject(boom);
    await expect(a).rejects.toBe(boom);
    await expect(b).rejects.toBe(boom);
    expect(await cache.get("k", 1e6, async () => 3).value).toBe(3);
    expect(cache.stats.failures).toBe(1);
  });

  it("a loader that throws synchronously is a failure, not a crash", async () => {
    const cache = new CoalescingCache<number>();
    await expect(
      cache.get("k", 1e6, () => {
        throw new Error("sync");
      }).value,
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
    await expect(cache.get("k", 1e6, failing).value).rejects.toThrow("throttled");
    const stored = cache.get("k", 1e6, failing);
    expect(stored.outcome).toBe("failure-hit");
    await expect(stored.value).rejects.toThrow("throttled");
    expect(calls).toBe(1);
    t = 501;
    await expect(cache.get("k", 1e6, failing).value).rejects.toThrow("throttled");
    expect(calls).toBe(2);
    // an error whose TTL is 0 is not cached
    await expect(cache.get("other", 1e6, async () => Promise.reject(new Error("nope"))).value).rejects.toThrow("nope");
    expect(await cache.get("other", 1e6, async () => 1).value).toBe(1);
  });

  it("a load past loadTimeoutMs rejects its waiters with TimeoutError and sees its signal aborted", async () => {
    const cache = new CoalescingCache<number>({ loadTimeoutMs: 30 });
    const d = deferred<number>(); // never settles
    await expect(cache.get("k", 1e6, d.load).value).rejects.toMatchObject({ name: "TimeoutError" });
    expect(d.signals[0]!.aborted).toBe(true);
    expect(cache.stats.timeouts).toBe(1);
    expect(cache.inflight).toBe(0);
    expect(await cache.get("k", 1e6, async () => 5).value).toBe(5);
  });

  it("a caller whose signal aborts leaves at once; the load is cancelled only when nobody waits", async () => {
    const cache = new CoalescingCache<number>();
    const d = deferred<number>();
    const c1 = new AbortController();
    const c2 = new AbortController();
    const a = cache.get("k", 1e6, d.load, { signal: c1.signal }).value;
    const b = cache.get("k", 1e6, d.load, { signal: c2.signal }).value;
    c1.abort(new Error("first gone"));
    await expect(a).rejects.toThrow("first gone");
    expect(d.signals[0]!.aborted).toBe(false);
    c2.abort(new Error("second gone"));
    await expect(b).rejects.toThrow("second gone");
    expect(d.signals[0]!.aborted).toBe(true);
    expect(cache.stats.abandoned).toBe(1);
    // the abandoned load's late answer is not stored
    d.resolve(9);
    expect(await cache.get("k", 1e6, async () => 10).value).toBe(10);
  });

  it("an already aborted signal rejects without starting a useful wait", async () => {
    const cache = new CoalescingCache<number>();
    const c = new AbortController();
    c.abort(new Error("gone"));
    const d = deferred<number>();
    await expect(cache.get("k", 1e6, d.load, { signal: c.signal }).value).rejects.toThrow("gone");
    expect(d.signals[0]!.aborted).toBe(true);
  });

  it("delete during an in-flight load: waiters get the answer, it is not stored", async () => {
    const cache = new CoalescingCache<number>();
    const d = deferred<number>();
    const a = cache.get("k", 1e6, d.load).value;
    cache.delete("k");
    d.resolve(1);
    expect(await a).toBe(1);
    expect(cache.size).toBe(0);
  });

  it("refuses a new key when maxEntries loads are in flight", async () => {
    const cache = new CoalescingCache<number>({ maxEntries: 2 });
    const d = deferred<number>();
    const a = cache.get("a", 1e6, d.load).value;
    const b = cache.get("b", 1e6, d.load).value;
    await expect(cache.get("c", 1e6, d.load).value).rejects.toBeInstanceOf(CacheFullError);
    expect(cache.stats.refused).toBe(1);
    d.resolve(1);
    await Promise.all([a, b]);
    expect(await cache.get("c", 1e6, async () => 2).value).toBe(2);
  });
  it("keepMs shortens how long one value is re-used, and 0 keeps it from being stored", async () => {
    let t = 0;
    const cache = new CoalescingCache<{ v: number; keep: number }>({ now: () => t, keepMs: (x) => x.keep });
    let calls = 0;
    const load = (keep: number) => async () => ({ v: ++calls, keep });
    expect((await cache.get("short", 10_000, load(100)).value).v).toBe(1);
    t = 100;
    expect((await cache.get("short", 10_000, load(100)).value).v).toBe(1); // within min(ttl, keepMs)
    t = 101;
    expect((await cache.get("short", 10_000, load(100)).value).v).toBe(2); // past keepMs though within ttl
    expect((await cache.get("never", 10_000, load(0)).value).v).toBe(3);
    expect((await cache.get("never", 10_000, load(0)).value).v).toBe(4); // keepMs 0: not stored
    expect(cache.size).toBe(1);
  });

  describe("refresh-ahead", () => {
    /** A manual timer: the test fires it. */
    function manualTimer() {
      const armed: { run: () => void; ms: number; cancelled: boolean }[] = [];
      const setTimer = (run: () => void, ms: number) => {
        const t = { run, ms, cancelled: false };
        armed.push(t);
        return () => void (t.cancelled = true);
      };
      const pending = () => armed.filter((t) => !t.cancelled);
      const fire = () => {
        const t = pending().at(-1)!;
        t.cancelled = true;
        t.run();
      };
      return { setTimer, pending, fire };
    }

    it("is off by default: no timer, nothing remembered, a value expires as before", async () => {
      let t = 0;
      const cache = new CoalescingCache<number>({ now: () => t });
      let calls = 0;
      await cache.get("k", 1_000, async () => ++calls).value;
      t = 500;
      await cache.get("k", 1_000, async () => ++calls).value;
      expect(cache.refreshTimerArmed).toBe(false);
      expect(cache.remembered.keys).toBe(0);
      t = 1_001;
      expect(await cache.get("k", 1_000, async () => ++calls).value).toBe(2);
    });

    it("the timer's round reloads, all at once, every key read since its value was stored; keys not read are forgotten; no timer once nothing is read", async () => {
      let t = 0;
      const timer = manualTimer();
      const cache = new CoalescingCache<string>({ now: () => t, refreshAhead: { setTimer: timer.setTimer } });
      const started: string[] = [];
      const load = (key: string) => async () => {
        started.push(`${key}@${t}`);
        return `${key}@${t}`;
      };
      for (const k of ["a", "b", "c"]) await cache.get(k, 10_000, load(k)).value;
      expect(timer.pending().map((x) => x.ms)).toEqual([9_000]); // 10 % before the first value expires
      t = 4_000;
      await cache.get("a", 10_000, load("a")).value;
      await cache.get("b", 10_000, load("b")).value;
      t = 9_000;
      timer.fire();
      await new Promise((r) => setImmediate(r));
      expect(started.slice(3)).toEqual(["a@9000", "b@9000"]); // c not read since stored: forgotten
      expect(cache.remembered.keys).toBe(2);
      expect(timer.pending().map((x) => x.ms)).toEqual([9_000]);
      t = 9_500;
      expect(await cache.get("a", 10_000, load("a")).value).toBe("a@9000"); // the refreshed value
      t = 18_000;
      timer.fire(); // a was read, b was not
      await new Promise((r) => setImmediate(r));
      expect(started.slice(5)).toEqual(["a@18000"]);
      t = 27_000;
      timer.fire(); // nothing read since: no load, no more timer
      await new Promise((r) => setImmediate(r));
      expect(started).toHaveLength(6);
      expect(timer.pending()).toEqual([]);
      expect(cache.stats).toMatchObject({ refreshes: 3, refreshRounds: 3 });
    });

    it("a failed refresh is not stored: the old value is served until its own TTL, then a read loads (and fails) as without refresh-ahead", async () => {
      let t = 0;
      const timer = manualTimer();
      const cache = new CoalescingCache<number>({ now: () => t, refreshAhead: { setTimer: timer.setTimer }, failureTtlMs: () => 5_000 });
      await cache.get("k", 10_000, async () => 1).value;
      t = 1_000;
      await cache.get("k", 10_000, async () => 1).value;
      t = 9_000;
      const boom = new Error("backend down");
      await cache.get("k", 10_000, async () => Promise.reject(boom)).value; // hit; the round's refresh fails
      await new Promise((r) => setImmediate(r));
      expect(cache.stats.refreshFailures).toBe(1);
      t = 10_000;
      expect(await cache.get("k", 10_000, async () => 2).value).toBe(1); // still within its TTL
      t = 10_001;
      await expect(cache.get("k", 10_000, async () => Promise.reject(boom)).value).rejects.toBe(boom);
    });

    it("readers of an expired value join the refresh in flight; one leaving does not cancel it", async () => {
      let t = 0;
      const timer = manualTimer();
      const cache = new CoalescingCache<number>({ now: () => t, refreshAhead: { setTimer: timer.setTimer } });
      await cache.get("k", 1_000, async () => 1).value;
      t = 500;
      await cache.get("k", 1_000, async () => 1).value;
      const d = deferred<number>();
      t = 900;
      await cache.get("k", 1_000, d.load).value; // round starts the refresh with this loader
      t = 1_100;
      const gone = new AbortController();
      const leaving = cache.get("k", 1_000, async () => 99, { signal: gone.signal }).value;
      const staying = cache.get("k", 1_000, async () => 99);
      expect(staying.outcome).toBe("coalesced");
      gone.abort(new Error("client left"));
      await expect(leaving).rejects.toThrow("client left");
      expect(d.signals[0]!.aborted).toBe(false);
      d.resolve(2);
      expect(await staying.value).toBe(2);
      expect(cache.stats.loads).toBe(2);
    });

    it("remembers at most maxKeys keys and maxBytes bytes", async () => {
      const cache = new CoalescingCache<number>({ refreshAhead: { maxKeys: 3, maxBytes: 1_000_000, setTimer: () => () => {} } });
      for (let i = 0; i < 10; i++) await cache.get(`k${i}`, 60_000, async () => i).value;
      expect(cache.remembered.keys).toBe(3);
      const small = new CoalescingCache<number>({ refreshAhead: { maxBytes: 1_000, setTimer: () => () => {} } });
      for (let i = 0; i < 10; i++) await small.get(`key-${"x".repeat(50)}-${i}`, 60_000, async () => i).value;
      expect(small.remembered.bytes).toBeLessThanOrEqual(1_000);
      expect(small.remembered.keys).toBeGreaterThan(0);
    });

    it("close() cancels the timer and aborts refreshes in flight; later reads arm nothing", async () => {
      let t = 0;
      const timer = manualTimer();
      const cache = new CoalescingCache<number>({ now: () => t, refreshAhead: { setTimer: timer.setTimer } });
      await cache.get("k", 1_000, async () => 1).value;
      t = 500;
      await cache.get("k", 1_000, async () => 1).value;
      const d = deferred<number>();
      t = 900;
      await cache.get("k", 1_000, d.load).value;
      expect(d.signals).toHaveLength(1);
      cache.close();
      expect(d.signals[0]!.aborted).toBe(true);
      expect(timer.pending()).toEqual([]);
      expect(cache.refreshTimerArmed).toBe(false);
      t = 2_000;
      expect(await cache.get("k", 1_000, async () => 3).value).toBe(3);
      t = 2_500;
      await cache.get("k", 1_000, async () => 4).value;
      expect(timer.pending()).toEqual([]);
      expect(cache.remembered.keys).toBe(0);
    });
  });
});

describe("CoalescingCache renewal on read", () => {
  const renewing = (t: { now: number }) => new CoalescingCache<string>({ now: () => t.now, renewAfterMs: (value, ttlMs) => (value.startsWith("keep") ? Infinity : ttlMs / 2) });

  it("answers a hit past renewAfterMs at once and reloads the key in the background, one reload at a time", async () => {
    const t = { now: 0 };
    const cache = renewing(t);
    expect(await cache.get("k", 1_000, async () => "v1").value).toBe("v1");
    t.now = 499;
    const d = deferred<string>();
    expect(await cache.get("k", 1_000, d.load).value).toBe("v1");
    expect(d.signals).toHaveLength(0); // younger than half the TTL: a plain hit
    t.now = 500;
    const renewed = cache.get("k", 1_000, d.load);
    expect(renewed.outcome).toBe("hit");
    expect(await renewed.value).toBe("v1"); // not waiting for the reload
    expect(d.signals).toHaveLength(1);
    expect(cache.peek("k", 1_000, d.load)).toBe("v1");
    expect(await cache.get("k", 1_000, d.load).value).toBe("v1");
    expect(d.signals).toHaveLength(1); // in flight: no second reload
    expect(cache.stats).toMatchObject({ loads: 2, refreshes: 1, hits: 4 });
    t.now = 600;
    d.resolve("v2");
    await new Promise((r) => setImmediate(r));
    t.now = 1_050; // v1 would be past its TTL; v2, stored by the renewal at 600, is 450 ms old: a plain hit
    expect(await cache.get("k", 1_000, async () => "v3").value).toBe("v2");
    expect(cache.stats.loads).toBe(2);
  });

  it("never stores a failed renewal and never answers past the TTL: the read then loads (or joins the renewal)", async () => {
    const t = { now: 0 };
    const cache = renewing(t);
    await cache.get("k", 1_000, async () => "v1").value;
    t.now = 900;
    const failing = deferred<string>();
    expect(await cache.get("k", 1_000, failing.load).value).toBe("v1");
    failing.reject(new Error("backend down"));
    await new Promise((r) => setImmediate(r));
    expect(cache.stats).toMatchObject({ refreshes: 1, refreshFailures: 1, failureHits: 0 });
    t.now = 950;
    const slow = deferred<string>();
    expect(await cache.get("k", 1_000, slow.load).value).toBe("v1"); // a second renewal starts
    t.now = 1_001; // v1 is past its TTL: this read waits for the renewal in flight
    let answered = false;
    const joining = cache.get("k", 1_000, async () => "unused");
    expect(joining.outcome).toBe("coalesced");
    const read = Promise.resolve(joining.value).then((v) => ((answered = true), v));
    await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    slow.resolve("v2");
    expect(await read).toBe("v2");
  });

  it("does not renew values renewAfterMs exempts, nor after close(), which also cancels a renewal in flight", async () => {
    const t = { now: 0 };
    const cache = renewing(t);
    await cache.get("keep", 1_000, async () => "keep-1").value;
    await cache.get("k", 1_000, async () => "v1").value;
    t.now = 900;
    const d = deferred<string>();
    expect(await cache.get("keep", 1_000, d.load).value).toBe("keep-1");
    expect(d.signals).toHaveLength(0);
    expect(await cache.get("k", 1_000, d.load).value).toBe("v1");
    expect(d.signals).toHaveLength(1);
    cache.close();
    expect(d.signals[0]!.aborted).toBe(true);
    const after = deferred<string>();
    t.now = 950;
    expect(await cache.get("k", 1_000, after.load).value).toBe("v1");
    expect(after.signals).toHaveLength(0);
  });
});
