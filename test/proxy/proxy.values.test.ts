/**
 * The proxy's values path through real TLS against scripted backends:
 * - one attempt for the HPA: no values answer carries `Retry-After` (the
 *   proxy's own 503s, a backend's 503/429 with `Retry-After: 3600`, a backend
 *   that hangs), the backend's Status body kept;
 * - back-off instead of hammering: a failing series is asked once per
 *   back-off (the backend's Retry-After clamped to [1 s, 30 s], else 1 s),
 *   4xx other than 429 are not kept; counted in backend calls;
 * - freshness: the bridge's `Cache-Control` (`max-age=0`/`no-store` → asked on
 *   every read; `max-age=1` → not re-served after 1 s even with ttlSeconds 30);
 * - answers checked before they are passed on (Quantity text, MilliValue
 *   within int64, RFC 3339 timestamps, labels): anything else is a 503
 *   naming the backend and the field, never a value;
 * - request intake: oversized targets, selectors and repeated selectors are
 *   refused before authentication (no TokenReview, no SubjectAccessReview);
 *   an oversized header is refused by Node (431) without hurting the server;
 * - the values cache: hashed keys, bounded by bytes;
 * - a caller that goes away cancels the backend call.
 */
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import type { Backend } from "../../shared/proxy/forward/backend-contract.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { answerBytes, Forwarder } from "../../shared/proxy/forward/forward.ts";
import { createMetrics } from "../../shared/proxy/metrics.ts";
import { createPki, eventually, startHarness, V1, type Harness, type Pki } from "./proxy.harness.ts";
import { EXTERNAL_METRICS_API } from "../../shared/values/request.ts";

const NS = `${V1}/namespaces/default`;
const hpa = { headers: { Authorization: "Bearer hpa" } };

/** What the scripted backend answers: a response, or `hang` (never answer). */
type Script = { status: number; headers?: Record<string, string>; body: string; delayMs?: number } | "hang";

interface ScriptedBackend {
  url: string;
  /** request targets received, in order */
  calls: string[];
  /** targets whose connection closed before an answer was sent */
  cancelled: string[];
  script: (target: string) => Script;
  close(): Promise<void>;
}

async function startScriptedBackend(): Promise<ScriptedBackend> {
  const backend: ScriptedBackend = { url: "", calls: [], cancelled: [], script: () => ({ status: 200, body: valueList("m", "1") }), close: async () => {} };
  const server = http.createServer((req, res) => {
    const target = req.url ?? "";
    if (new URL(target, "http://x").pathname === V1) {
      res.writeHead(200, { "Content-Type": "application/json" });
      return res.end(JSON.stringify({ kind: "APIResourceList", apiVersion: "v1", groupVersion: "external.metrics.k8s.io/v1beta1", resources: [] }));
    }
    backend.calls.push(target);
    const s = backend.script(target);
    if (s === "hang") {
      res.on("close", () => {
        if (!res.writableEnded) backend.cancelled.push(target);
      });
      return;
    }
    setTimeout(() => {
      res.writeHead(s.status, { "Content-Type": "application/json", ...s.headers });
      res.end(s.body);
    }, s.delayMs ?? 0);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  backend.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  backend.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return backend;
}

function valueList(metric: string, value: unknown, item: Record<string, unknown> = {}): string {
  return JSON.stringify({
    kind: "ExternalMetricValueList",
    apiVersion: "external.metrics.k8s.io/v1beta1",
    metadata: {},
    items: [{ metricName: metric, metricLabels: { queue: "jobs" }, timestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"), value, ...item }],
  });
}

function status(code: number, message: string, reason: string): string {
  return JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code });
}

let pki: Pki;
let fake: FakeKubeApiServer;
let backend: ScriptedBackend;
let h: Harness;
let clock = Date.now();
let series = 0;
/** A values path of its own (failures are kept per series). */
const fresh = (metric = "m") => `${NS}/${metric}?labelSelector=${encodeURIComponent(`series=s${series++}`)}`;

beforeAll(async () => {
  [pki, fake, backend] = await Promise.all([createPki(), startFakeKubeApiServer(), startScriptedBackend()]);
  fake.authorize = () => ({ allowed: true });
  fake.tokens.set("hpa", { username: "system:serviceaccount:kube-system:horizontal-pod-autoscaler" });
  h = await startHarness({
    pki,
    fake,
    proxyConfig: `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  bridge: { url: "${backend.url}", timeoutSeconds: 0.5 }
  adapter: { url: "${backend.url}", type: passthrough, timeoutSeconds: 0.5 }
  slow: { url: "${backend.url}", timeoutSeconds: 4 }
  gone: { url: "http://127.0.0.1:1", timeoutSeconds: 0.5 }
routes:
  - { metric: "adapter_.*", backend: adapter }
  - { metric: "slow_.*", backend: slow }
  - { metric: "gone_.*", backend: gone }
  - { metric: ".*", backend: bridge }
cache: { ttlSeconds: 30, maxEntries: 1000, maxBytes: 65536 }
`,
    extra: { now: () => clock },
  });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await backend?.close();
  await fake?.close();
});

describe("one attempt for the HPA: no Retry-After on a values answer", () => {
  it.each([
    ["503", 503, "ServiceUnavailable"],
    ["429", 429, "TooManyRequests"],
  ])("strips a passthrough adapter's %s Retry-After: 3600 and keeps its Status body", async (_what, code, reason) => {
    const body = status(code, "adapter is overloaded", reason);
    backend.script = () => ({ status: code, headers: { "Retry-After": "3600" }, body });
    const res = await h.get(fresh("adapter_queue"), hpa);
    expect(res.status).toBe(code);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.text).toBe(body);
  });

  it.each([
    ["503", 503, "ServiceUnavailable"],
    ["429", 429, "TooManyRequests"],
  ])("strips the bridge's %s Retry-After (its cloud's throttling hint: the proxy's back-off, not the HPA's)", async (_what, code, reason) => {
    const body = status(code, "CloudWatch is throttling", reason);
    backend.script = () => ({ status: code, headers: { "Retry-After": "7" }, body });
    const res = await h.get(fresh(), hpa);
    expect(res.status).toBe(code);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.json()).toMatchObject({ kind: "Status", code });
  });

  it("answers a backend that hangs with one 503 without Retry-After", async () => {
    backend.script = () => "hang";
    const res = await h.get(fresh(), hpa);
    expect(res.status).toBe(503);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.json()).toMatchObject({ kind: "Status", reason: "ServiceUnavailable" });
    expect(res.json().message).toMatch(/backend bridge did not answer within 500 ms/);
    expect(res.json().details?.retryAfterSeconds).toBeUndefined();
  });

  it("answers an unreachable backend with a 503 without Retry-After", async () => {
    const res = await h.get(fresh("gone_queue"), hpa);
    expect(res.status).toBe(503);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.json().message).toMatch(/backend gone is unreachable/);
  });
});

describe("back-off instead of hammering a failing series", () => {
  /** Read `path` `n` times one after another; returns the backend calls they made. */
  async function reads(path: string, n: number): Promise<number> {
    const before = backend.calls.length;
    for (let i = 0; i < n; i++) {
      const res = await h.get(path, hpa);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.headers["retry-after"]).toBeUndefined();
    }
    return backend.calls.length - before;
  }

  it("asks a failing backend once per second, not once per read", async () => {
    backend.script = () => ({ status: 503, body: status(503, "SQS is down", "ServiceUnavailable") });
    const path = fresh();
    expect(await reads(path, 10)).toBe(1); // 10 reads within 1 s of the (frozen) clock
    clock += 1_100;
    expect(await reads(path, 5)).toBe(1);
  });

  it("keeps a hanging backend's timeout as back-off", async () => {
    backend.script = () => "hang";
    const path = fresh();
    expect(await reads(path, 4)).toBe(1);
  });

  it("honours the backend's Retry-After as back-off, clamped to 30 s", async () => {
    const path = fresh("adapter_queue");
    backend.script = () => ({ status: 503, headers: { "Retry-After": "5" }, body: status(503, "throttled", "ServiceUnavailable") });
    expect(await reads(path, 3)).toBe(1);
    clock += 4_000;
    expect(await reads(path, 1)).toBe(0);
    clock += 2_000;
    backend.script = () => ({ status: 429, headers: { "Retry-After": "3600" }, body: status(429, "throttled", "TooManyRequests") });
    expect(await reads(path, 3)).toBe(1);
    clock += 29_000;
    expect(await reads(path, 1)).toBe(0); // still within the clamped 30 s
    clock += 2_000;
    expect(await reads(path, 1)).toBe(1);
  });

  it("does not keep a 4xx other than 429 (the caller's own mistake is answered each time)", async () => {
    backend.script = () => ({ status: 404, body: status(404, "no such queue", "NotFound") });
    expect(await reads(fresh(), 3)).toBe(3);
  });
});

describe("freshness: the bridge's Cache-Control", () => {
  const ok = (cacheControl?: string): Script => ({ status: 200, headers: cacheControl ? { "Cache-Control": cacheControl } : {}, body: valueList("m", "5") });

  it.each(["private, max-age=0", "no-store"])("asks again on every read after %s (in-flight reads still share one call)", async (cc) => {
    backend.script = () => ok(cc);
    const path = fresh();
    const before = backend.calls.length;
    for (let i = 0; i < 3; i++) expect((await h.get(path, hpa)).status).toBe(200);
    expect(backend.calls.length - before).toBe(3);
  });

  it("shares one call among concurrent reads of a no-store series", async () => {
    backend.script = () => ({ ...(ok("no-store") as Exclude<Script, "hang">), delayMs: 300 });
    const path = fresh("slow_queue");
    const before = backend.calls.length;
    const answers = await Promise.all(Array.from({ length: 4 }, () => h.get(path, hpa)));
    for (const res of answers) expect(res.status).toBe(200);
    expect(backend.calls.length - before).toBe(1);
  });

  it("does not re-serve a max-age=1 answer after 1 s although ttlSeconds is 30", async () => {
    backend.script = () => ok("private, max-age=1");
    const path = fresh();
    const before = backend.calls.length;
    expect((await h.get(path, hpa)).status).toBe(200);
    clock += 500;
    expect((await h.get(path, hpa)).status).toBe(200);
    expect(backend.calls.length - before).toBe(1); // fresh: served from the cache
    clock += 700;
    expect((await h.get(path, hpa)).status).toBe(200);
    expect(backend.calls.length - before).toBe(2);
  });

  it("keeps an answer without Cache-Control for the proxy's own TTL", async () => {
    backend.script = () => ok();
    const path = fresh();
    const before = backend.calls.length;
    expect((await h.get(path, hpa)).status).toBe(200);
    clock += 20_000;
    expect((await h.get(path, hpa)).status).toBe(200);
    expect(backend.calls.length - before).toBe(1);
    clock += 11_000;
    expect((await h.get(path, hpa)).status).toBe(200);
    expect(backend.calls.length - before).toBe(2);
  });
});

describe("answers are checked before they are passed on", () => {
  it.each([
    ["NaN", { value: "NaN" }, /items\[0\]\.value/],
    ["Infinity", { value: "Infinity" }, /items\[0\]\.value/],
    ["a float in exponent form", { value: "1e3" }, /items\[0\]\.value/],
    ["a JSON number", { value: 42 }, /items\[0\]\.value/],
    ["a value whose MilliValue overflows int64", { value: "9223372036854775807" }, /items\[0\]\.value.*MilliValue/],
    ["an unknown suffix", { value: "5x" }, /items\[0\]\.value/],
    ["a timestamp that is not RFC 3339", { timestamp: "yesterday" }, /items\[0\]\.timestamp/],
    ["a timestamp on 30 February (Date.parse reads 2 March)", { timestamp: "2026-02-30T00:00:00Z" }, /items\[0\]\.timestamp not an RFC 3339 time: "2026-02-30T00:00:00Z"/],
    ["a timestamp on 29 February of 2100", { timestamp: "2100-02-29T00:00:00Z" }, /items\[0\]\.timestamp/],
    ["labels that are not an object", { metricLabels: "queue=jobs" }, /items\[0\]\.metricLabels/],
    ["a label that is not a string", { metricLabels: { n: 1 } }, /items\[0\]\.metricLabels/],
    ["a metricName that is not a string", { metricName: 7 }, /items\[0\]\.metricName/],
  ])("answers 503 naming the backend and the field for %s", async (_what, item, field) => {
    backend.script = () => ({ status: 200, body: valueList("m", "1", item) });
    const res = await h.get(fresh(), hpa);
    expect(res.status, res.text).toBe(503);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.json()).toMatchObject({ kind: "Status", reason: "ServiceUnavailable" });
    expect(res.json().message).toMatch(/^backend bridge answered 200 /);
    expect(res.json().message).toMatch(field);
    expect(res.json().items).toBeUndefined();
  });

  it("passes on valid Quantities unchanged, also KEDA's null labels and Binary SI", async () => {
    for (const [value, labels] of [
      ["1500m", { queue: "jobs" }],
      ["-2", { queue: "jobs" }],
      ["2Ki", null],
      ["9223372036854775", {}],
    ] as const) {
      const body = valueList("m", value, { metricLabels: labels });
      backend.script = () => ({ status: 200, body });
      const res = await h.get(fresh(), hpa);
      expect(res.status, res.text).toBe(200);
      expect(res.text).toBe(body);
    }
  });
});

describe("request intake: size checks before any work", () => {
  const reviews = () => fake.reviews.tokenReviews.length + fake.reviews.subjectAccessReviews.length;

  it.each([
    ["a path + query over 16 KiB", `${NS}/m?labelSelector=a%3Db&pad=${"x".repeat(17 * 1024)}`, /path and query are \d+ bytes long/],
    ["a labelSelector over 4096 characters", `${NS}/m?labelSelector=${encodeURIComponent(`a in (${"v,".repeat(2100)}v)`)}`, /labelSelector is \d+ characters long; at most 4096/],
    ["two labelSelectors", `${NS}/m?labelSelector=a%3Db&labelSelector=c%3Dd`, /labelSelector may be given only once/],
  ])("refuses %s with 400 before authentication and authorization", async (_what, path, message) => {
    const before = reviews();
    const calls = backend.calls.length;
    const res = await h.get(path, { headers: { Authorization: `Bearer unknown-${series++}` } });
    expect(res.status, res.text).toBe(400);
    expect(res.json()).toMatchObject({ kind: "Status", reason: "BadRequest" });
    expect(res.json().message).toMatch(message);
    expect(reviews()).toBe(before); // no TokenReview, no SubjectAccessReview
    expect(backend.calls.length).toBe(calls);
  });

  it("accepts a 4096-character selector (the bridge's own limit), percent-encoded as client-go sends it", async () => {
    backend.script = () => ({ status: 200, body: valueList("m", "1") });
    let selector = `k${series++} in (`;
    while (selector.length < 4095 - 2) selector += "v,";
    selector = `${selector}v)`.padEnd(4096, " ");
    expect(selector.length).toBe(4096);
    const res = await h.get(`${NS}/m?labelSelector=${encodeURIComponent(selector).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`, hpa);
    expect(res.status, res.text).toBe(200);
  });

  it("refuses a header over 32 KiB (431) and keeps serving", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = https.request(`${h.proxy.url}/healthz`, { ca: h.serving.caPem!, agent: false, headers: { "X-Padding": "x".repeat(40 * 1024) } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(431);
    expect((await h.get("/healthz")).status).toBe(200);
    backend.script = () => ({ status: 200, body: valueList("m", "1") });
    expect((await h.get(fresh(), hpa)).status).toBe(200);
  });
});

describe("the values cache", () => {
  it("keys by a hash (not the request) and stays within cache.maxBytes", async () => {
    backend.script = () => ({ status: 200, body: valueList("m", "1") });
    const long = "v".repeat(3000);
    for (let i = 0; i < 40; i++) {
      expect((await h.get(`${NS}/m?labelSelector=${encodeURIComponent(`k${series++}=${long}`)}`, hpa)).status).toBe(200);
    }
    const { size, bytes } = h.proxy.forwarder.valuesCache;
    expect(size).toBeGreaterThan(0);
    expect(bytes).toBeLessThanOrEqual(65536);
    // A 3 KB selector does not make a 6 KB key: each entry is the answer plus a 64-character hash.
    expect(bytes / size).toBeLessThan(2 * 1024);
  });

  it("counts an answer's bytes as V8 holds it: one a character for Latin-1 text, two otherwise", async () => {
    const config = loadProxyConfig(
      `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  a: { url: "http://127.0.0.1:1" }
routes:
  - { metric: ".*", backend: a }
cache: { ttlSeconds: 30, maxEntries: 100, maxBytes: 1048576 }
`,
      "proxy.yaml",
    );
    let body = "";
    const a: Backend = {
      name: "a",
      config: config.backends[0]!,
      timeoutMs: 1000,
      get: async () => ({ status: 200, headers: {}, body: Buffer.from(body, "utf8") }),
      close: () => {},
    };
    const f = new Forwarder({ config, clients: new Map([["a", a]]), metrics: createMetrics(false), log: () => {} });
    const caller = { user: "u", groups: [], extra: {} };
    let n = 0;
    const bytesOf = async (label: string) => {
      body = valueList("m", "1", { metricLabels: { queue: label } });
      const before = f.valuesCache.bytes;
      await f.values({ caller, requestId: "r", pathAndQuery: `/m?${n++}`, parts: { api: EXTERNAL_METRICS_API, namespace: "ns", metric: "m", labelSelector: "" } }, { key: "m", requested: "m" });
      expect(f.valuesCache.size).toBe(n);
      return { bytes: f.valuesCache.bytes - before, length: body.length };
    };
    const base = await bytesOf("");
    expect(base.bytes).toBe(32 * 2 + 64 + base.length + 128); // key (a 32-character digest, counted twice), entry, body, answer
    expect((await bytesOf("a".repeat(2000))).bytes - base.bytes).toBe(2000);
    expect((await bytesOf("\u00e9".repeat(2000))).bytes - base.bytes).toBe(2000);
    // One character outside Latin-1 makes the whole body two bytes a character.
    const wide = await bytesOf("\u20ac".repeat(2000));
    expect(wide.bytes).toBe(32 * 2 + 64 + wide.length * 2 + 128);
    expect(answerBytes("x".repeat(10))).toBe(10 + 128);
  });

  it("cancels the backend call when the caller goes away", async () => {
    backend.script = () => "hang";
    const path = fresh("slow_queue");
    const before = backend.cancelled.length;
    const req = https.request(`${h.proxy.url}${path}`, { ca: h.serving.caPem!, agent: false, headers: hpa.headers });
    req.on("error", () => {});
    req.end();
    await eventually(() => backend.calls.some((c) => c === path), 3000, "the read reached the backend");
    req.destroy();
    // The backend's timeout is 4 s; the call is cancelled long before it.
    await eventually(() => backend.cancelled.length > before, 2000, "the backend call was cancelled");
  });
});
