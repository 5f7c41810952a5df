/**
 * shared/cache/: the one bounded map (`BoundedMap`, bounded-map.ts: entries
 * AND bytes, least recently used first, oversize refused) and the
 * refresh-ahead clean-ups of `CoalescingCache` (coalescing.ts,
 * refresh-ahead.ts: the clock read once per read, rounds that rotate past
 * the in-flight bound, remembered loaders counted in bytes).
 */
import { describe, expect, it } from "vitest";
import { BoundedMap } from "../../shared/cache/bounded-map.ts";
import { CoalescingCache } from "../../shared/cache/coalescing.ts";

describe("BoundedMap", () => {
  const sized = (maxEntries: number, maxBytes: number) => new BoundedMap<string, string>({ maxEntries, maxBytes, sizeOf: (k, v) => k.length + v.length });

  it("keeps at most maxEntries entries, dropping the least recently used", () => {
    const m = sized(3, 1_000);
    for (const k of ["a", "b", "c"]) m.set(k, "v");
    expect(m.get("a")).toBe("v"); // a is now the most recently used
    m.set("d", "v");
    expect([...m.keys()]).toEqual(["c", "a", "d"]);
    expect(m.has("b")).toBe(false);
    expect(m.size).toBe(3);
    expect(m.evictions).toBe(1);
  });

  it("keeps at most maxBytes bytes as counted by sizeOf, dropping the least recently used", () => {
    const m = sized(100, 10);
    m.set("a", "1234"); // 5
    m.set("b", "1234"); // 10
    expect(m.bytes).toBe(10);
    m.get("a");
    m.set("c", "12"); // 3: b (least recently used) goes
    expect([...m.keys()]).toEqual(["a", "c"]);
    expect(m.bytes).toBe(8);
    m.set("a", "1"); // replacing an entry re-counts it
    expect(m.bytes).toBe(5);
    expect(m.get("a")).toBe("1");
  });

  it("refuses an entry larger than maxBytes alone, keeps the others, and forgets that key's older value", () => {
    const m = sized(100, 10);
    m.set("a", "1");
    m.set("b", "1");
    expect(m.set("b", "x".repeat(20))).toBe(false);
    expect(m.get("b")).toBeUndefined();
    expect(m.get("a")).toBe("1");
    expect(m.bytes).toBe(2);
    expect(m.evictions).toBe(0);
  });

  it("delete and clear keep the accounting right; the recency list survives every order of operations", () => {
    const m = sized(4, 1_000);
    for (const k of ["a", "b", "c", "d"]) m.set(k, "v");
    expect(m.delete("a")).toBe(true); // the oldest
    expect(m.delete("d")).toBe(true); // the newest
    expect(m.delete("zz")).toBe(false);
    m.get("b");
    expect([...m.keys()]).toEqual(["c", "b"]);
    expect(m.bytes).toBe(4);
    m.clear();
    expect(m.size).toBe(0);
    expect(m.bytes).toBe(0);
    m.set("e", "v");
    expect([...m.keys()]).toEqual(["e"]);
  });
});

describe("CoalescingCache refresh-ahead clean-ups", () => {
  /** A manual timer: the test fires it. */
  function manualTimer() {
    const armed: { run: () => void; cancelled: boolean }[] = [];
    return {
      setTimer: (run: () => void) => {
        const t = { run, cancelled: false };
        armed.push(t);
        return () => void (t.cancelled = true);
      },
      fire: () => {
        const t = armed.filter((x) => !x.cancelled).at(-1)!;
        t.cancelled = true;
        t.run();
      },
    };
  }
  const settle = () => new Promise((r) => setImmediate(r));

  it("a hit reads the clock once (with refresh-ahead on and off)", async () => {
    for (const refreshAhead of [undefined, { setTimer: () => () => {} }]) {
      let reads = 0;
      const cache = new CoalescingCache<number>({ now: () => (reads++, 1_000), ...(refreshAhead ? { refreshAhead } : {}) });
      await cache.get("k", 10_000, async () => 1).value;
      reads = 0;
      const hit = cache.get("k", 10_000, async () => 2);
      expect(hit.outcome).toBe("hit");
      expect(await hit.value).toBe(1);
      expect(reads).toBe(1);
    }
  });

  it("with more remembered keys than the in-flight bound allows, consecutive rounds refresh every key in turn", async () => {
    let t = 0;
    const timer = manualTimer();
    const cache = new CoalescingCache<string>({ maxEntries: 4, now: () => t, refreshAhead: { setTimer: timer.setTimer } });
    const started: string[] = [];
    const load = (key: string) => async () => (started.push(key), `${key}@${t}`);
    const keys = ["a", "b", "c", "d"];
    const readAll = async () => {
      for (const k of keys) await cache.get(k, 10_000, load(k)).value;
    };
    await readAll();
    // Two reads that never finish (TTL 0: not remembered) hold 2 of the 4 in-flight slots.
    void Promise.resolve(cache.get("x", 0, () => new Promise(() => {})).value).catch(() => {});
    void Promise.resolve(cache.get("y", 0, () => new Promise(() => {})).value).catch(() => {});
    started.length = 0;
    t = 4_000;
    await readAll();
    t = 9_000;
    timer.fire();
    await settle();
    expect(started).toEqual(["a", "b"]); // room for two
    t = 9_500;
    await readAll(); // all hits: c and d are still within their TTL
    expect(started).toEqual(["a", "b"]);
    t = 18_000;
    timer.fire();
    await settle();
    expect(started).toEqual(["a", "b", "c", "d"]); // the round starts where the last one stopped
    expect(cache.stats.refreshes).toBe(4);
  });

  it("counts each remembered loader as its key plus loaderBytes, and bounds them by it", async () => {
    const cache = new CoalescingCache<number>({ refreshAhead: { maxBytes: 10_000, loaderBytes: 4_000, setTimer: () => () => {} } });
    for (let i = 0; i < 5; i++) await cache.get(`key${i}`, 60_000, async () => i).value;
    expect(cache.remembered).toEqual({ keys: 2, bytes: 2 * (4 * 2 + 4_000) });
    const byDefault = new CoalescingCache<number>({ refreshAhead: { setTimer: () => () => {} } });
    await byDefault.get("key0", 60_000, async () => 0).value;
    expect(byDefault.remembered.bytes).toBe(4 * 2 + 512);
  });
});
