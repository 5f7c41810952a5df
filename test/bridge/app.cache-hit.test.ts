/**
 * The bridge's cache-hit read (issue 11 P1), through the real SQS provider
 * on a fauxqs emulator: a hit is answered from the provider's cache
 * (`SeriesProvider.peek` → `CoalescingCache.peek`; its request record says
 * `cache: "hit"`), while a miss (or a read only partly cached) loads
 * (`cache: "load"`); the answer — value, freshness (`Cache-Control:
 * max-age`), request id, request log — is the same either way. What a hit
 * saves (no deadline timer, no body built again) is measured by the
 * benchmarks (test/bench/http-overhead.ts, row P1 "bridge, cached"), not
 * counted here. Then the Node server's request log sink
 * (`functions/node-log.ts`): the same JSON lines, written once per
 * event-loop turn.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { startNodeServer, type NodeServer } from "../../functions/node.ts";
import { batchedJsonLog } from "../../functions/node-log.ts";
import type { LogRecord } from "../../shared/app.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { loadConfig } from "../../shared/config/config.ts";
import type { SqsProvider } from "../../shared/providers/aws-sqs/index.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { fixtureKey } from "../helpers/keys.ts";

const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const path = (selector: string) => `${V1}/namespaces/default/depth?labelSelector=${encodeURIComponent(selector)}`;

let sqs: Emulator;
let text: string;

beforeAll(async () => {
  sqs = await startEmulator();
  for (const [name, count] of [["a", 3], ["b", 5], ["c", 1]] as const) {
    await sqs.createQueue(name);
    await sqs.add(name, count);
  }
  text = `${sqsConfigHead(sqs.endpoint, { timeoutSeconds: 2, defaults: "{ maxAgeSeconds: 120, cacheTTLSeconds: 60 }" })}
metrics:
  - { name: depth, provider: sqs, query: { queueLabel: queue } }
`;
}, 60_000);

afterAll(async () => {
  await sqs?.stop();
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a cache hit is answered from the provider's cache", () => {
  let bridge: Bridge;
  let logs: LogRecord[];
  const provider = () => bridge.providers.get("sqs") as SqsProvider;
  const get = async (selector: string, headers: Record<string, string> = {}) => bridge.app.request(path(selector), { headers });

  beforeAll(() => {
    logs = [];
    bridge = buildBridge(text, "bridge.yaml", { env: {}, now: Date.now }, { log: (r) => logs.push(r) });
  });

  it("a miss loads; the same read again is a hit, with the same answer", async () => {
    const miss = await get("queue=a", { "x-request-id": "first-read" });
    expect(miss.status).toBe(200);
    const missBody = await miss.json();
    expect(provider().cache.stats).toMatchObject({ loads: 1, hits: 0 });

    const hit = await get("queue=a", { "x-request-id": "second-read" });
    expect(hit.status).toBe(200);
    expect(provider().cache.stats).toMatchObject({ loads: 1, hits: 1 });
    expect(await hit.json()).toEqual(missBody);
    expect(missBody.items).toMatchObject([{ metricName: "depth", metricLabels: { queue: "a" }, value: "3" }]);
    for (const res of [miss, hit]) {
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(res.headers.get("cache-control")).toMatch(/^private, max-age=(119|120)$/);
    }
    expect(miss.headers.get("x-request-id")).toBe("first-read");
    expect(hit.headers.get("x-request-id")).toBe("second-read");
    const record = { level: "info", msg: "request", method: "GET", code: 200, metric: "depth", path: `${V1}/namespaces/default/depth`, value: 3 };
    expect(logs.slice(-2)).toEqual([
      expect.objectContaining({ ...record, requestId: "first-read", cache: "load" }),
      expect.objectContaining({ ...record, requestId: "second-read", cache: "hit" }),
    ]);
  });

  it("a read only partly cached loads and answers every series; read again, it is a hit", async () => {
    await get("queue=b");
    const partly = await get("queue in (b,c)");
    expect(partly.status).toBe(200);
    const body = await partly.json();
    expect(body.items.map((i: { metricLabels: { queue: string }; value: string }) => [i.metricLabels.queue, i.value])).toEqual([
      ["b", "5"],
      ["c", "1"],
    ]);
    const both = await get("queue in (b,c)");
    expect(both.status).toBe(200);
    expect(await both.json()).toEqual(body);
    expect(logs.slice(-3).map((r) => [r.selector, r.cache, r.value])).toEqual([
      ["queue=b", "load", 5],
      ["queue in (b,c)", "load", 6],
      ["queue in (b,c)", "hit", 6],
    ]);
  });

  it("a selector the provider cannot map is refused the same (400) with or without a cached series", async () => {
    const res = await get("queue!=a");
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ kind: "Status", code: 400 });
  });

  it("an entry past its cacheTTLSeconds is not a hit: the read loads again", async () => {
    let now = Date.now();
    const agedLogs: LogRecord[] = [];
    const aged = buildBridge(text, "bridge.yaml", { env: {}, now: () => now }, { log: (r) => agedLogs.push(r) });
    const cache = (aged.providers.get("sqs") as SqsProvider).cache;
    await aged.app.request(path("queue=c"));
    now += 61_000;
    const again = await aged.app.request(path("queue=c"));
    expect(again.status).toBe(200);
    expect(cache.stats).toMatchObject({ loads: 2, hits: 0 });
    expect(agedLogs.map((r) => [r.code, r.cache])).toEqual([
      [200, "load"],
      [200, "load"],
    ]);
  });
});

/**
 * The app keeps a URL's parse and its answer's body while the readings are
 * the same ones; what that saves is in the benchmarks (row P1). Here: what
 * the reader sees stays right — the same body while the readings are the
 * same, max-age and the audit record per read, a new body for a new reading,
 * each URL its own answer, failures not kept.
 */
describe("a URL read again: its parse and its answer's body are kept while the readings are the same", () => {
  it("a second read of the same URL serves the same body; max-age and the audit record are per read", async () => {
    let now = Date.now();
    const logs: LogRecord[] = [];
    const bridge = buildBridge(text, "bridge.yaml", { env: {}, now: () => now }, { log: (r) => logs.push(r) });
    const first = await bridge.app.request(path("queue in (a,b)"));
    const firstBody = await first.text();
    now += 10_000;
    const second = await bridge.app.request(path("queue in (a,b)"));
    expect(second.status).toBe(200);
    expect(await second.text()).toBe(firstBody);
    expect(first.headers.get("cache-control")).toBe("private, max-age=120");
    expect(second.headers.get("cache-control")).toBe("private, max-age=110"); // 10 s older
    expect(logs.map((r) => [r.code, r.value, r.ageSeconds, r.cache, r.selector])).toEqual([
      [200, 8, 0, "load", "queue in (a,b)"],
      [200, 8, 10, "hit", "queue in (a,b)"],
    ]);
  });

  it("a new reading (the cache entry reloaded) builds a new body with the new value", async () => {
    await sqs.createQueue("m");
    await sqs.add("m", 1);
    let now = Date.now();
    const bridge = buildBridge(text, "bridge.yaml", { env: {}, now: () => now }, { log: () => {} });
    const before = await (await bridge.app.request(path("queue=m"))).json();
    expect(before.items).toMatchObject([{ metricLabels: { queue: "m" }, value: "1" }]);
    await sqs.add("m", 2);
    now += 61_000; // past cacheTTLSeconds: the next read loads again
    const after = await bridge.app.request(path("queue=m"));
    expect(after.status).toBe(200);
    const body = await after.json();
    expect(body.items).toMatchObject([{ metricLabels: { queue: "m" }, value: "3" }]);
    expect(body.items[0].timestamp).not.toBe(before.items[0].timestamp);
    const again = await bridge.app.request(path("queue=m"));
    expect(await again.json()).toEqual(body);
  });

  it("each URL keeps its own answer: the metric name as requested, the labels its selector names", async () => {
    const bridge = buildBridge(text, "bridge.yaml", { env: {}, now: Date.now }, { log: () => {} });
    const read = async (p: string) => (await bridge.app.request(p)).json();
    const plain = await read(path("queue=a"));
    const other = await read(path("queue in (a)"));
    const upper = await read(`${V1}/namespaces/default/DEPTH?labelSelector=queue%3Da`);
    const b = await read(path("queue=b"));
    for (let round = 0; round < 2; round++) {
      expect(await read(path("queue=a"))).toEqual(plain);
      expect(await read(`${V1}/namespaces/default/DEPTH?labelSelector=queue%3Da`)).toEqual(upper);
    }
    expect(plain.items).toMatchObject([{ metricName: "depth", metricLabels: { queue: "a" }, value: "3" }]);
    expect(other.items).toMatchObject([{ metricName: "depth", metricLabels: { queue: "a" }, value: "3" }]);
    expect(upper.items).toMatchObject([{ metricName: "DEPTH", metricLabels: { queue: "a" }, value: "3" }]);
    expect(b.items).toMatchObject([{ metricName: "depth", metricLabels: { queue: "b" }, value: "5" }]);
  });

  it("a URL that failed is parsed again and fails again the same way (failures are not kept)", async () => {
    const bridge = buildBridge(text, "bridge.yaml", { env: {}, now: Date.now }, { log: () => {} });
    for (let i = 0; i < 2; i++) {
      const res = await bridge.app.request(`${V1}/namespaces/Not_A_Namespace/depth?labelSelector=queue%3Da`);
      expect(res.status).toBe(400);
      expect((await res.json()).message).toMatch(/not a valid namespace name/);
      const bad = await bridge.app.request(path("queue in (a"));
      expect(bad.status).toBe(400);
    }
  });
});

describe("one wrapper per route (request id, /apis authentication, errors, log line)", () => {
  it("authenticates every /apis path before routing (401 before 404 or 405), never /healthz; HEAD keeps the headers", async () => {
    const logs: LogRecord[] = [];
    const keys = `k:${fixtureKey(9).toString("base64url")}`;
    const { app } = buildBridge(text, "bridge.yaml", { env: { BRIDGE_SIGNING_KEYS: keys }, now: Date.now }, { log: (r) => logs.push(r) });
    const cases: [string, RequestInit, number][] = [
      ["/apis", {}, 401],
      [`${V1}/namespaces/default/nope/extra`, {}, 401],
      [path("queue=a"), { method: "POST", body: "{}" }, 401],
      ["/apisx", {}, 404],
      ["/healthz", {}, 200],
      ["/healthz", { method: "HEAD" }, 200],
      ["/healthz", { method: "POST" }, 405],
    ];
    for (const [p, init, code] of cases) {
      const res = await app.request(p, { ...init, headers: { "x-request-id": `id-${code}` } });
      expect(res.status, `${init.method ?? "GET"} ${p}`).toBe(code);
      expect(res.headers.get("x-request-id")).toBe(`id-${code}`);
      if (code !== 200) expect(res.headers.get("cache-control")).toBe("no-store");
    }
    expect(logs.filter((r) => r.msg === "request").map((r) => [r.method, r.path, r.code])).toEqual(
      cases.map(([p, init, code]) => [init.method ?? "GET", p.split("?")[0], code]),
    );
  });
});

describe("the Node server", () => {
  let server: NodeServer;
  let logs: LogRecord[];

  beforeAll(async () => {
    logs = [];
    server = await startNodeServer({ config: loadConfig(text, "bridge.yaml").config, port: 0, insecureAllowUnsigned: true, log: (r) => logs.push(r) });
  });

  afterAll(async () => {
    await server?.close();
  });

  it("echoes a valid X-Request-Id (read from Node's parsed headers) on values, Status and health answers; replaces an invalid one", async () => {
    for (const p of [path("queue=a"), path("queue=a"), `${V1}/namespaces/default/nope`, "/healthz", V1]) {
      const res = await fetch(`${server.url}${p}`, { headers: { "X-Request-Id": "abc-123" } });
      expect(res.headers.get("x-request-id"), p).toBe("abc-123");
      await res.arrayBuffer();
    }
    const bad = await fetch(`${server.url}${path("queue=a")}`, { headers: { "X-Request-Id": "no spaces allowed" } });
    expect(bad.status).toBe(200);
    expect(bad.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(logs.filter((r) => r.msg === "request").map((r) => [r.requestId, r.code])).toEqual([
      ["abc-123", 200],
      ["abc-123", 200],
      ["abc-123", 404],
      ["abc-123", 200],
      ["abc-123", 200],
      [bad.headers.get("x-request-id"), 200],
    ]);
  });

  it("writes the request log as JSON lines on stdout, several lines in one write per event-loop turn", async () => {
    const writes: string[] = [];
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
    const log = batchedJsonLog(() => Date.parse("2026-11-23T10:00:00Z"));
    log({ level: "info", msg: "request", requestId: "r1", code: 200 });
    log({ level: "warn", msg: "request", requestId: "r2", code: 404 });
    expect(writes).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(writes).toHaveLength(1);
    const lines = writes[0]!.split("\n");
    expect(lines.pop()).toBe("");
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      { time: "2026-11-23T10:00:00.000Z", level: "info", msg: "request", requestId: "r1", code: 200 },
      { time: "2026-11-23T10:00:00.000Z", level: "warn", msg: "request", requestId: "r2", code: 404 },
    ]);
    expect(Object.keys(JSON.parse(lines[0]!))[0]).toBe("time");
  });

  it("writes exactly JSON.stringify({ time, ...record }) for any record", async () => {
    const writes: string[] = [];
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
    let ms = Date.parse("2026-11-23T10:00:00.123Z");
    const log = batchedJsonLog(() => ms++);
    const records: LogRecord[] = [
      { level: "info", msg: "request", requestId: "r1", method: "GET", path: "/apis/x", code: 200, durationMs: 0, metric: "m\u2028\"q\"" },
      { level: "error", msg: "unhandled error", error: "Error: boom\nat x" },
      { level: "warn", msg: "with a time of its own", time: "kept in place" } as LogRecord,
      { level: "info", msg: "nested", extra: { a: [1, null, "é"] } },
    ];
    for (const r of records) log(r);
    await new Promise((r) => setImmediate(r));
    const start = Date.parse("2026-11-23T10:00:00.123Z");
    expect(writes.join("")).toBe(records.map((r, i) => `${JSON.stringify({ time: new Date(start + i).toISOString(), ...r })}\n`).join(""));
  });
});
