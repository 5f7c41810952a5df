/**
 * The isolate half of the Durable Object tier (shared/cache/durable-object-tier.ts
 * `DurableObjectTier`) against a namespace stand-in whose object answers
 * what a test says: what the wire carries, which answers are a reading, a
 * Status or the tier failing (then `direct`), and that no failure becomes
 * a value. The object itself runs in workerd: tier-do.worker.test.ts.
 */
import { describe, expect, it } from "vitest";
import { DurableObjectTier, MAX_TIER_BODY_BYTES, shardOf, TIER_READ_URL, type DurableObjectNamespaceLike } from "../../shared/cache/durable-object-tier.ts";
import type { TierRequest } from "../../shared/cache/shared-tier.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { isNoData, type Reading } from "../../shared/providers/series.ts";

const DIRECT: Reading = { value: { mantissa: 42n, exponent: 0 }, timestamp: 1_800_000_000_000 };

/** A namespace whose every object answers `answer(body)`; records the names and bodies it got. */
function namespace(answer: (body: any) => Response | Promise<Response>) {
  const names: string[] = [];
  const bodies: any[] = [];
  const ns: DurableObjectNamespaceLike = {
    idFromName: (name) => (names.push(name), name),
    get: () => ({
      fetch: async (url, init) => {
        expect(url).toBe(TIER_READ_URL);
        const body = JSON.parse(String(init!.body));
        bodies.push(body);
        return answer(body);
      },
    }),
  };
  return { ns, names, bodies };
}

function tier(ns: unknown, timeoutMs = 200) {
  return new DurableObjectTier({ provider: "prom", config: { type: "durableObject", binding: "SERIES_TIER", shards: 8, timeoutMs }, configDigest: "cafe", bindings: () => ({ SERIES_TIER: ns }) });
}

function request(loads: { n: number }, signal = new AbortController().signal): TierRequest {
  return {
    key: "prom\u0000d1\u0000series-a",
    ttlMs: 10_000,
    series: { provider: "prom", ruleIndex: 0, labels: { queue: "a" }, namespace: "default" },
    load: async () => (loads.n++, DIRECT),
    signal,
  };
}

const json = (v: unknown, status = 200) => new Response(JSON.stringify(v), { status, headers: { "content-type": "application/json" } });

describe("DurableObjectTier (the isolate's side)", () => {
  it("asks the series' shard object with key, TTL, series and the config digest, and returns its reading", async () => {
    const { ns, names, bodies } = namespace(() => json({ ok: true, source: "tier-hit", reading: { value: { m: "-125", e: -2 }, timestamp: 5, windowSeconds: 60 } }));
    const loads = { n: 0 };
    const out = await tier(ns).read(request(loads));
    expect(out).toEqual({ source: "tier-hit", reading: { value: { mantissa: -125n, exponent: -2 }, timestamp: 5, windowSeconds: 60 } });
    expect(names).toEqual([`prom/${shardOf("prom\u0000d1\u0000series-a", 8)}`]);
    expect(bodies).toEqual([{ config: "cafe", key: "prom\u0000d1\u0000series-a", ttlMs: 10_000, series: { provider: "prom", ruleIndex: 0, labels: { queue: "a" }, namespace: "default" } }]);
    expect(loads.n).toBe(0);
  });

  it("a backend failure the object returns is thrown as that StatusError (never a value, never a direct read); no-data stays no-data", async () => {
    const loads = { n: 0 };
    const throttled = namespace(() => json({ ok: false, status: { code: 503, message: "throttled", details: { retryAfterSeconds: 7 } } }));
    const err = await tier(throttled.ns).read(request(loads)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StatusError);
    expect(err).toMatchObject({ code: 503, message: "throttled", retryAfterSeconds: 7 });
    expect(isNoData(err)).toBe(false);
    const empty = namespace(() => json({ ok: false, status: { code: 404, message: "no point in the last 300 s", details: { kind: "prometheus-series" }, noData: true } }));
    const none = await tier(empty.ns).read(request(loads)).catch((e: unknown) => e);
    expect(none).toMatchObject({ code: 404, message: "no point in the last 300 s" });
    expect(isNoData(none)).toBe(true);
    expect(loads.n).toBe(0);
  });

  it("the tier failing is a direct read through load, with the reason: no binding, a throwing stub, a non-200, a malformed or oversized answer, past the deadline", async () => {
    const cases: [unknown, RegExp][] = [
      [undefined, /SERIES_TIER is not a Durable Object namespace/],
      [{ idFromName: () => "x", get: () => ({ fetch: () => Promise.reject(new Error("network lost")) }) }, /network lost/],
      [namespace(() => json({ error: "another config" }, 409)).ns, /answered 409/],
      [namespace(() => json({ ok: true, source: "tier-hit", reading: { value: { m: "1.5", e: 0 }, timestamp: 1 } })).ns, /no reading and no status/],
      [namespace(() => json({ ok: false, status: { code: 200, message: "fine" } })).ns, /no reading and no status/],
      [namespace(() => new Response("x".repeat(MAX_TIER_BODY_BYTES + 1))).ns, /larger than/],
      [namespace(() => new Promise<Response>(() => {})).ns, /no answer within 50 ms/],
    ];
    for (const [ns, reason] of cases) {
      const loads = { n: 0 };
      const t = tier(ns, 50);
      const out = await t.read(request(loads));
      expect(out.source).toBe("direct");
      expect(out.reading).toBe(DIRECT);
      expect(out.reason).toMatch(reason);
      expect(loads.n).toBe(1);
      expect(t.counts.direct).toBe(1);
    }
  });

  it("a reader that gives up gets its own abort, and no direct read is made for it", async () => {
    const controller = new AbortController();
    const { ns } = namespace(() => new Promise<Response>(() => {}));
    const loads = { n: 0 };
    const pending = tier(ns, 1000).read(request(loads, controller.signal));
    const started = Date.now();
    controller.abort(new DOMException("client gone", "AbortError"));
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    expect(Date.now() - started).toBeLessThan(500); // at once, not at the tier's deadline
    expect(loads.n).toBe(0);
  });
});
