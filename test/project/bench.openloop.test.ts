/**
 * The open-loop generator of `npm run bench:latency` (test/bench/openloop.ts):
 * its schedule and percentile arithmetic, and that it measures from the
 * SCHEDULED send time (no coordinated omission). Asserts counts and lower
 * bounds caused by the test server's own deliberate delay, never a machine
 * figure.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { closedLoop, dueCount, openLoop, percentile, scheduledOffsetMs, summarize } from "../bench/openloop.ts";
import { closeServer } from "../helpers/http.ts";

describe("schedule", () => {
  it("request i is due at i / rate; request 0 at t0", () => {
    expect(scheduledOffsetMs(0, 1000)).toBe(0);
    expect(scheduledOffsetMs(5, 1000)).toBe(5);
    expect(scheduledOffsetMs(3, 200)).toBe(15);
    expect(dueCount(-0.1, 1000)).toBe(0);
    expect(dueCount(0, 1000)).toBe(1);
    expect(dueCount(2.5, 1000)).toBe(3);
    expect(dueCount(15, 200)).toBe(4); // 0, 5, 10, 15 ms
    expect(dueCount(1000, 1000)).toBe(1001);
    // agrees with the offsets: request dueCount(t)-1 is due at or before t, the next one after
    for (const rate of [1, 7, 200, 1000, 3333]) {
      for (const t of [0, 0.3, 1, 14.99, 15, 999.9, 1000]) {
        const n = dueCount(t, rate);
        expect(scheduledOffsetMs(n - 1, rate)).toBeLessThanOrEqual(t + 1e-6);
        expect(scheduledOffsetMs(n, rate)).toBeGreaterThan(t - 1e-6);
      }
    }
  });
});

describe("percentiles (nearest rank)", () => {
  const hundred = Float64Array.from({ length: 100 }, (_, i) => i + 1);
  it("p50/p90/p99/p99.9/max of 1…100", () => {
    expect(summarize(hundred)).toEqual({ count: 100, p50: 50, p90: 90, p99: 99, p999: 100, max: 100 });
  });
  it("p99.9 of 1…1000 is 999, of 1…10000 is 9990", () => {
    expect(percentile(Float64Array.from({ length: 1000 }, (_, i) => i + 1), 0.999)).toBe(999);
    expect(percentile(Float64Array.from({ length: 10_000 }, (_, i) => i + 1), 0.999)).toBe(9990);
  });
  it("one sample is every percentile; none is NaN", () => {
    expect(summarize([7])).toEqual({ count: 1, p50: 7, p90: 7, p99: 7, p999: 7, max: 7 });
    const empty = summarize([]);
    expect(empty.count).toBe(0);
    expect(empty.p99).toBeNaN();
    expect(empty.max).toBeNaN();
  });
});

describe("openLoop against a local server", () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    if (server) await closeServer(server);
    server = undefined;
  });

  /** A server answering 200 at once, except request number `stallAt` (0-based, in arrival order), held `stallMs`. */
  async function start(stallAt: number, stallMs: number): Promise<{ url: string; paths: string[] }> {
    const paths: string[] = [];
    server = http.createServer((req, res) => {
      const n = paths.push(req.url ?? "") - 1;
      const answer = () => res.writeHead(req.url?.startsWith("/fail") ? 503 : 200, { "content-type": "application/json" }).end("{}");
      if (n === stallAt) setTimeout(answer, stallMs);
      else answer();
    });
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, paths };
  }

  it("sends exactly rate × (warm-up + seconds) requests, counts only the measured part", async () => {
    const { url, paths } = await start(-1, 0);
    const r = await openLoop({ url, path: (i) => `/r/${i}` }, { rate: 200, seconds: 0.5, warmupSeconds: 0.1, connections: 4 });
    expect(paths).toHaveLength(120);
    expect(new Set(paths).size).toBe(120);
    expect(r.scheduled).toBe(100);
    expect(r.ok).toBe(100);
    expect(r.latencies).toHaveLength(100);
    expect(r.errors + r.timeouts + r.non2xx).toBe(0);
    expect([...r.latencies]).toEqual([...r.latencies].sort((a, b) => a - b));
  });

  it("a stall is charged to every request scheduled during it (closed-loop timing would show one slow request)", async () => {
    // One connection; the 21st request is held 300 ms. At 200 req/s, about 60 requests are due while it is held;
    // they wait in the Agent's queue, and their latency counts from their scheduled time.
    const { url } = await start(20, 300);
    const r = await openLoop({ url, path: (i) => `/r/${i}` }, { rate: 200, seconds: 1, connections: 1 });
    expect(r.ok).toBe(200);
    expect(r.max).toBeGreaterThanOrEqual(300);
    const slow = [...r.latencies].filter((ms) => ms >= 100).length;
    // requests due in the first 200 ms of the stall wait ≥ 100 ms: at least 40 of them
    expect(slow).toBeGreaterThanOrEqual(40);
    expect(r.p90).toBeGreaterThanOrEqual(100);
  });

  it("non-2xx answers and refused connections are counted, not measured", async () => {
    const { url } = await start(-1, 0);
    const r = await openLoop({ url, path: (i) => (i % 2 ? "/fail" : "/ok") }, { rate: 100, seconds: 0.2 });
    expect(r.ok).toBe(10);
    expect(r.non2xx).toBe(10);
    expect(r.latencies).toHaveLength(10);
    await closeServer(server!);
    server = undefined;
    const refused = await openLoop({ url, path: () => "/" }, { rate: 100, seconds: 0.1 });
    expect(refused.ok).toBe(0);
    expect(refused.errors).toBe(10);
    expect(refused.p99).toBeNaN();
  });

  it("a 2xx answer the target's check refuses is counted as invalid, not measured (open and closed loop)", async () => {
    server = http.createServer((req, res) => res.writeHead(200, { "content-type": "application/json" }).end(req.url === "/good" ? '{"items":[1,2]}' : '{"items":[1]}'));
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const check = (body: Buffer) => (JSON.parse(body.toString("utf8")) as { items: unknown[] }).items.length === 2;
    const r = await openLoop({ url, path: (i) => (i % 2 ? "/bad" : "/good"), check }, { rate: 100, seconds: 0.2 });
    expect(r.ok).toBe(10);
    expect(r.invalid).toBe(10);
    expect(r.non2xx + r.errors + r.timeouts).toBe(0);
    expect(r.latencies).toHaveLength(10);
    expect(r.achievedRate).toBeGreaterThan(0);
    const c = await closedLoop({ url, path: (i) => (i % 3 ? "/good" : "/bad"), check }, { requests: 9, concurrency: 2 });
    expect([c.ok, c.invalid]).toEqual([6, 3]);
    const unchecked = await openLoop({ url, path: () => "/bad" }, { rate: 100, seconds: 0.1 });
    expect([unchecked.ok, unchecked.invalid]).toEqual([10, 0]);
  });

  it("closedLoop sends every request with at most `concurrency` in flight", async () => {
    let inFlight = 0;
    let most = 0;
    const seen: string[] = [];
    server = http.createServer((req, res) => {
      seen.push(req.url ?? "");
      most = Math.max(most, ++inFlight);
      setTimeout(() => {
        inFlight--;
        res.writeHead(200).end("{}");
      }, 2);
    });
    await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
    const r = await closedLoop({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, path: (i) => `/c/${i}` }, { requests: 60, concurrency: 4 });
    expect(r.ok).toBe(60);
    expect(r.count).toBe(60);
    expect(new Set(seen).size).toBe(60);
    expect(most).toBeLessThanOrEqual(4);
    expect(most).toBeGreaterThan(1);
  });
});
