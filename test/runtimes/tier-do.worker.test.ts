/**
 * The shared read tier on Durable Objects (issue 28) in workerd: several
 * scripts of the real Worker (separate isolates), built by wrangler from the
 * repository's wrangler.toml, all bound to ONE Durable Object namespace
 * (`SeriesTier`, exported by functions/worker.ts) defined in script `a`,
 * serving real External Metrics reads (each isolate's provider sends its
 * local cache misses through the tier: shared/providers/series.ts) from a
 * fake Prometheus API on 127.0.0.1 whose calls are counted (one series load
 * = 2 queries: value and timestamp).
 */
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planWorkerBuild, TIER_SPECIFIER } from "../../infra/worker/build.ts";
import { NOT_BUILT } from "../../infra/worker/no-durable-object-tier.ts";
import { shardOf, type DurableObjectNamespaceLike } from "../../shared/cache/durable-object-tier.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import { buildWorker, ROOT, startWorker, startWorkers, type RunningWorkers, type WorkerBuild } from "../helpers/worker.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const NS_ONE = { className: "SeriesTier", scriptName: "a" };
/** queries per series load (the prometheus provider asks for the value and its timestamp) */
const PER_LOAD = 2;

function config(url: string, tier = "{ type: durableObject, shards: 4, timeoutMs: 1000 }"): string {
  return `${OPEN_CONFIG_HEAD}providers:
  prom: { type: prometheus, url: ${url}, timeoutSeconds: 2, sharedCache: ${tier} }
metrics:
  - { name: ready, provider: prom, query: { series: queue_ready, selectorLabels: { queue: queue } } }
  - { name: fast, provider: prom, cacheTTLSeconds: 2, query: { series: queue_ready, selectorLabels: { queue: queue } } }
`;
}

let fake: FakePrometheus;
let build: WorkerBuild;
let workers: RunningWorkers;
const SCRIPTS = ["a", "b", "c"];

/** Whether a query reads `queue`'s series (alone, `queue="x"`, or batched, `queue=~"x|y"`). */
function names(query: string, queue: string): boolean {
  return new RegExp(`[="|]${queue}[|"]`).test(query);
}

/** The fake's queries that read `queue`'s series so far (the object also refreshes the other tests' series in the background). */
function calls(queue: string): number {
  return fake.requests.filter((q) => names(q.query, queue)).length;
}

function setQueue(queue: string, value: string): void {
  fake.series = fake.series.filter((s) => s.labels["queue"] !== queue);
  fake.series.push({ labels: { __name__: "queue_ready", queue }, value, timeMs: Date.now() - 1000 });
}

/** One External Metrics read through script `script`: `{ code, value? , message? }`. */
async function read(script: string, metric: string, queue: string): Promise<{ code: number; value?: string; message?: string }> {
  const res = await workers.fetch(script, `${NS}/${metric}?labelSelector=${encodeURIComponent(`queue=${queue}`)}`);
  const body = (await res.json()) as { items?: { value: string }[]; message?: string };
  return { code: res.status, ...(body.items !== undefined ? { value: body.items[0]!.value } : { message: body.message }) };
}

/** The isolates' "read directly" warnings so far (shared/providers/series.ts), as parsed log records. */
function directWarnings(): { provider: string; directReads: number; error?: string }[] {
  return workers
    .logs()
    .split("\n")
    .filter((l) => l.includes("shared read tier failed"))
    .map((l) => JSON.parse(l.slice(l.indexOf("{"))));
}

beforeAll(async () => {
  fake = await startFakePrometheus(() => Date.now());
  build = await buildWorker();
  const text = config(fake.url);
  workers = await startWorkers(build, [
    { name: "a", bindings: { BRIDGE_CONFIG: text }, durableObjects: { SERIES_TIER: "SeriesTier" } },
    { name: "b", bindings: { BRIDGE_CONFIG: text }, durableObjects: { SERIES_TIER: NS_ONE } },
    { name: "c", bindings: { BRIDGE_CONFIG: text }, durableObjects: { SERIES_TIER: NS_ONE } },
    // a late reader: an isolate that reads each series after the others, finding it in the object
    { name: "late", bindings: { BRIDGE_CONFIG: text }, durableObjects: { SERIES_TIER: NS_ONE } },
    // no Durable Object binding at all: a misconfigured deploy
    { name: "unbound", bindings: { BRIDGE_CONFIG: text } },
    // bound, but the object runs another config (a deploy rolling out): it refuses (409)
    { name: "other", bindings: { BRIDGE_CONFIG: config(fake.url, "{ type: durableObject, shards: 4, timeoutMs: 999 }") }, durableObjects: { SERIES_TIER: NS_ONE } },
    // its own namespace and a 100 ms tier deadline: an object slower than that is not waited for
    { name: "slow", bindings: { BRIDGE_CONFIG: config(fake.url, "{ type: durableObject, shards: 1, timeoutMs: 100 }") }, durableObjects: { SERIES_TIER: "SeriesTier" } },
  ]);
}, 180_000);

afterAll(async () => {
  await workers?.close();
  await fake?.close();
});

describe("shared tier on Durable Objects (workerd, several isolates, one namespace)", () => {
  for (const n of [1, 10, 50]) {
    it(`N = ${n} readers of one series over ${SCRIPTS.length} isolates: one backend load, as a single instance`, async () => {
      const queue = `q${n}`;
      setQueue(queue, String(n));
      const before = calls(queue);
      const answers = await Promise.all(Array.from({ length: n }, (_, i) => read(SCRIPTS[i % SCRIPTS.length]!, "ready", queue)));
      for (const a of answers) expect(a).toEqual({ code: 200, value: String(n) });
      const loads = (calls(queue) - before) / PER_LOAD;
      // a single instance (its coalescing cache) loads a series read together once: the fleet stays within 1.1× of that
      expect(loads).toBeLessThanOrEqual(1.1 * 1);
      expect(loads).toBe(1);
      // later reads within the TTL, from any isolate, load nothing more
      const again = await Promise.all(SCRIPTS.map((s) => read(s, "ready", queue)));
      expect(again.map((a) => a.value)).toEqual([String(n), String(n), String(n)]);
      // an isolate that never read it gets the object's stored reading: no load either
      expect(await read("late", "ready", queue)).toEqual({ code: 200, value: String(n) });
      expect(calls(queue) - before).toBe(PER_LOAD);
    });
  }

  it("N = 50 reads of 10 series over 3 isolates: one load per series, not per isolate", async () => {
    const queues = Array.from({ length: 10 }, (_, i) => `m${i}`);
    for (const [i, q] of queues.entries()) setQueue(q, String(100 + i));
    const total = () => fake.requests.filter((q) => queues.some((name) => names(q.query, name))).length;
    const before = total();
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => read(SCRIPTS[i % SCRIPTS.length]!, "ready", queues[i % queues.length]!)));
    answers.forEach((a, i) => expect(a).toEqual({ code: 200, value: String(100 + (i % queues.length)) }));
    expect(total() - before).toBeLessThanOrEqual(queues.length * PER_LOAD); // a single instance: ≤ 10 loads
  });

  it("alarm-driven refresh-ahead keeps a series read since its load fresh without a read", async () => {
    const queue = "refresh";
    setQueue(queue, "1");
    const before = calls(queue);
    expect(await read("b", "fast", queue)).toEqual({ code: 200, value: "1" });
    setQueue(queue, "2");
    await new Promise((r) => setTimeout(r, 600));
    // another isolate reads it (the object's stored value, still the old one): read since its load, so the round before its 2 s TTL ends reloads it
    expect(await read("c", "fast", queue)).toEqual({ code: 200, value: "1" });
    expect(calls(queue) - before).toBe(PER_LOAD);
    await new Promise((r) => setTimeout(r, 1900)); // the round is due 1.8 s after the load
    expect(calls(queue) - before).toBe(2 * PER_LOAD); // reloaded with no read in between
    // an isolate that had not read it gets the refreshed value from the object, without a load
    expect(await read("a", "fast", queue)).toEqual({ code: 200, value: "2" });
    expect(calls(queue) - before).toBe(2 * PER_LOAD);
    // not read after the next refresh (≈ 1.8 s later): the round after that drops the series, no call without readers
    await new Promise((r) => setTimeout(r, 4500));
    expect(calls(queue) - before).toBe(3 * PER_LOAD);
    const settled = calls(queue);
    await new Promise((r) => setTimeout(r, 2500));
    expect(calls(queue)).toBe(settled);
  }, 30_000);

  it("a backend failure is returned as that Status, never a value, and not kept past its back-off", async () => {
    const queue = "failing";
    setQueue(queue, "5");
    const before = calls(queue);
    fake.respond = (q) => (names(q.query, queue) ? { status: 503, body: { status: "error", errorType: "unavailable", error: "overloaded" }, headers: { "retry-after": "1" } } : undefined);
    try {
      const answers = await Promise.all(SCRIPTS.map((s) => read(s, "ready", queue)));
      for (const a of answers) {
        expect(a.value).toBeUndefined();
        expect(a.code).toBe(503);
        expect(a.message).toMatch(/overloaded/);
      }
    } finally {
      fake.respond = undefined;
    }
    expect(calls(queue) - before).toBeLessThanOrEqual(PER_LOAD); // one load for the fleet, failed
    await new Promise((r) => setTimeout(r, 1100));
    expect(await read("a", "ready", queue)).toEqual({ code: 200, value: "5" });
  });

  it("a restarted Durable Object never yields an invented value: the next read loads again, or fails as a Status", async () => {
    const queue = "reset";
    setQueue(queue, "7");
    const before = calls(queue);
    expect(await read("a", "ready", queue)).toEqual({ code: 200, value: "7" });
    expect(await read("b", "ready", queue)).toEqual({ code: 200, value: "7" });
    expect(calls(queue) - before).toBe(PER_LOAD); // b was answered by the object
    await workers.restart(); // workerd restarts: every isolate and object starts afresh, in-memory storage lost
    fake.respond = (q) => (names(q.query, queue) ? { status: 500, body: { status: "error", errorType: "internal", error: "down" } } : undefined);
    try {
      const failed = await read("b", "ready", queue);
      expect(failed.value).toBeUndefined();
      expect(failed.code).toBeGreaterThanOrEqual(500);
      expect(failed.message).toMatch(/down/); // the backend was asked: the old value did not survive the restart
    } finally {
      fake.respond = undefined;
    }
    await new Promise((r) => setTimeout(r, 1100)); // the 503's back-off (1 s) ends: the failure is not kept
    const reloaded = calls(queue);
    expect(await read("c", "ready", queue)).toEqual({ code: 200, value: "7" });
    expect(calls(queue) - reloaded).toBe(PER_LOAD);
  });

  it("the Durable Object unreachable (binding missing) or refusing (another config): the isolate reads directly, right values, counted and logged", async () => {
    const queue = "direct";
    setQueue(queue, "9");
    const before = calls(queue);
    expect(await read("unbound", "ready", "direct")).toEqual({ code: 200, value: "9" });
    expect(await read("other", "ready", "direct")).toEqual({ code: 200, value: "9" });
    expect(calls(queue) - before).toBe(2 * PER_LOAD);
    const warnings = directWarnings();
    expect(warnings).toContainEqual(expect.objectContaining({ provider: "prom", directReads: 1, error: expect.stringMatching(/SERIES_TIER.*is not a Durable Object namespace/) }));
    expect(warnings).toContainEqual(expect.objectContaining({ provider: "prom", directReads: 1, error: expect.stringMatching(/the object answered 409/) }));
  });

  it("the object checks every request before work: size (413), shape (400), method and path (404), no config build for them", async () => {
    const ns = (await workers.miniflare.getDurableObjectNamespace("SERIES_TIER", "a")) as unknown as DurableObjectNamespaceLike;
    const stub = ns.get(ns.idFromName("prom/0"));
    const big = await stub.fetch("https://series-tier/read", { method: "POST", body: "x".repeat(64 * 1024 + 1) });
    expect(big.status).toBe(413);
    await big.arrayBuffer();
    const bad = await stub.fetch("https://series-tier/read", { method: "POST", body: JSON.stringify({ config: "x", key: "k", ttlMs: 1, series: { provider: "prom" } }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/series needs provider, ruleIndex, labels and namespace/);
    const other = await stub.fetch("https://series-tier/other");
    expect(other.status).toBe(404);
    await other.arrayBuffer();
  });

  it("an object slower than the tier's deadline (timeoutMs) is not waited for: direct, the right value, counted", async () => {
    setQueue("slow", "11");
    fake.respond = (q) => {
      if (!names(q.query, "slow")) return undefined;
      fake.respond = undefined; // only the object's first query is slow
      return { status: 503, body: { status: "error", errorType: "unavailable", error: "slow" }, delayMs: 400 };
    };
    const started = Date.now();
    expect(await read("slow", "ready", "slow")).toEqual({ code: 200, value: "11" });
    expect(Date.now() - started).toBeLessThan(400); // the direct read did not wait for the object's slow load
    expect(directWarnings()).toContainEqual(expect.objectContaining({ provider: "prom", directReads: 1, error: expect.stringMatching(/no answer within 100 ms/) }));
  });
});

describe("the Worker entry and sharedCache", () => {
  it("refuses sharedCache type dynamodb when the config loads, saying what to use", async () => {
    const text = `${OPEN_CONFIG_HEAD}providers:
  prom: { type: prometheus, url: http://127.0.0.1:9, sharedCache: { type: dynamodb, table: bridge-tier } }
metrics:
  - { name: ready, provider: prom, query: { series: queue_ready, selectorLabels: { queue: queue } } }
`;
    const worker = await startWorker(text);
    try {
      const res = await worker.request("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/ready?labelSelector=queue%3Da");
      expect(res.status).toBe(500);
      const body = (await res.json()) as { message: string };
      expect(body.message).toMatch(/providers\.prom\.sharedCache: type dynamodb is for Lambda and the Node server; on a Worker use \{ type: durableObject \}/);
    } finally {
      await worker.close();
    }
  });

  it("a Worker started without the namespace bound still serves a durableObject config: it reads directly", async () => {
    setQueue("entry", "4");
    const worker = await startWorker(config(fake.url));
    try {
      const res = await worker.request("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/ready?labelSelector=queue%3Dentry");
      expect(res.status).toBe(200);
      expect(((await res.json()) as { items: { value: string }[] }).items[0]!.value).toBe("4");
    } finally {
      await worker.close();
    }
  });

  it("shards a provider's series over its objects by a stable hash of the tier key", () => {
    const keys = Array.from({ length: 1000 }, (_, i) => `prom\u0000abc\u0000series-${i}`);
    const perShard = new Array<number>(16).fill(0);
    for (const k of keys) perShard[shardOf(k, 16)]!++;
    for (const n of perShard) expect(n).toBeGreaterThan(30); // every shard used, none holding them all (1000 / 16 ≈ 62)
    expect(keys.map((k) => shardOf(k, 16))).toEqual(keys.map((k) => shardOf(k, 16)));
    expect(shardOf("prom\u0000abc\u0000x", 1)).toBe(0);
    expect(shardOf("a", 4)).toBe(0xe40c292c % 4); // FNV-1a 32 of "a"
  });

  it("a Worker built for a config without the tier leaves it out (infra/worker/build.ts), still exports SeriesTier, and refuses a config naming it", async () => {
    const file = join(tmpdir(), `tier-do-${process.pid}.yaml`);
    writeFileSync(file, config(fake.url).replace(/, sharedCache: [^}]*\}/, ""));
    expect(planWorkerBuild({ config: file }).durableObjectTier).toBe(false);
    writeFileSync(file, config(fake.url));
    expect(planWorkerBuild({ config: file }).durableObjectTier).toBe(true);
    expect(planWorkerBuild({ all: true }).durableObjectTier).toBeUndefined(); // every provider: the tier too
    const [withTier, without] = await Promise.all([
      buildWorker(),
      buildWorker({ args: ["--alias", `${TIER_SPECIFIER}:${join(ROOT, "infra/worker/no-durable-object-tier.ts")}`] }),
    ]);
    const gzip = (b: WorkerBuild) => Number(/gzip: ([\d.]+) KiB/.exec(b.output)![1]);
    console.log(`Worker gzip (wrangler), every provider: with the Durable Object tier ${gzip(withTier)} KiB, without ${gzip(without)} KiB`);
    expect(gzip(without)).toBeLessThan(gzip(withTier));
    setQueue("plain", "6");
    const plain = config(fake.url).replace(/, sharedCache: [^}]*\}/, "");
    // the SeriesTier class wrangler.toml binds is exported (workerd refuses a binding to a missing class)
    const stubbed = await startWorkers(without, [
      { name: "plain", bindings: { BRIDGE_CONFIG: plain }, durableObjects: { SERIES_TIER: "SeriesTier" } },
      { name: "tiered", bindings: { BRIDGE_CONFIG: config(fake.url) }, durableObjects: { SERIES_TIER: { className: "SeriesTier", scriptName: "plain" } } },
    ]);
    try {
      const path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/ready?labelSelector=queue%3Dplain";
      const ok = await stubbed.fetch("plain", path);
      expect(ok.status).toBe(200);
      const refused = await stubbed.fetch("tiered", path);
      expect(refused.status).toBe(500);
      expect(((await refused.json()) as { message: string }).message).toContain(NOT_BUILT);
    } finally {
      await stubbed.close();
    }
  }, 120_000);
});
