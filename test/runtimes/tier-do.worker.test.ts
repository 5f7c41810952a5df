/**
 * The shared read tier on Durable Objects (issue 28) in workerd: several
 * Worker scripts (separate isolates) built by wrangler with the repository's
 * wrangler.toml (`test/runtimes/tier-do-harness.ts` as the entry: the real
 * `SeriesTier` class and the real isolate tier, called as a provider's
 * local cache miss calls it), all bound to ONE Durable Object namespace
 * defined in script `a`, reading a fake Prometheus API on 127.0.0.1 whose
 * calls are counted (one series load = 2 queries: value and timestamp).
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { planWorkerBuild, TIER_SPECIFIER } from "../../infra/worker/build.ts";
import { NOT_BUILT } from "../../infra/worker/no-durable-object-tier.ts";
import { shardOf } from "../../shared/cache/durable-object-tier.ts";
import { buildWorker, ROOT, startWorker, startWorkers, type RunningWorkers, type WorkerBuild } from "../helpers/worker.ts";

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

function setQueue(queue: string, value: string): void {
  fake.series = fake.series.filter((s) => s.labels["queue"] !== queue);
  fake.series.push({ labels: { __name__: "queue_ready", queue }, value, timeMs: Date.now() - 1000 });
}

async function read(script: string, metric: string, queue: string): Promise<any> {
  const res = await workers.fetch(script, "/tier-read", { method: "POST", body: JSON.stringify({ metric, labels: { queue }, namespace: "default" }) });
  return res.json();
}

beforeAll(async () => {
  fake = await startFakePrometheus(() => Date.now());
  const built = await buildWorker({ args: ["test/runtimes/tier-do-harness.ts"] });
  build = { ...built, script: join(built.outdir, "tier-do-harness.js") }; // wrangler names the output after the entry
  const text = config(fake.url);
  workers = await startWorkers(build, [
    { name: "a", bindings: { BRIDGE_CONFIG: text }, durableObjects: { SERIES_TIER: "SeriesTier" } },
    { name: "b", bindings: { BRIDGE_CONFIG: text }, durableObjects: { SERIES_TIER: NS_ONE } },
    { name: "c", bindings: { BRIDGE_CONFIG: text }, durableObjects: { SERIES_TIER: NS_ONE } },
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
      const before = fake.requests.length;
      const answers = await Promise.all(Array.from({ length: n }, (_, i) => read(SCRIPTS[i % SCRIPTS.length]!, "ready", queue)));
      for (const a of answers) expect(a).toMatchObject({ value: String(n) });
      expect(answers.every((a) => a.source === "tier-hit" || a.source === "tier-wait")).toBe(true);
      const loads = (fake.requests.length - before) / PER_LOAD;
      // a single instance (its coalescing cache) loads a series read together once: the fleet stays within 1.1× of that
      expect(loads).toBeLessThanOrEqual(1.1 * 1);
      expect(loads).toBe(1);
      // and later reads within the TTL, from any isolate, are hits
      const again = await Promise.all(SCRIPTS.map((s) => read(s, "ready", queue)));
      expect(again.map((a) => a.source)).toEqual(["tier-hit", "tier-hit", "tier-hit"]);
      expect(fake.requests.length - before).toBe(PER_LOAD);
    });
  }

  it("alarm-driven refresh-ahead keeps a series read since its load fresh without a read", async () => {
    const queue = "refresh";
    setQueue(queue, "1");
    const before = fake.requests.length;
    expect(await read("b", "fast", queue)).toMatchObject({ value: "1", source: "tier-wait" });
    setQueue(queue, "2");
    await new Promise((r) => setTimeout(r, 600));
    // read since its load (a hit, still the old value): the round before its 2 s TTL ends reloads it
    expect(await read("c", "fast", queue)).toMatchObject({ value: "1", source: "tier-hit" });
    await new Promise((r) => setTimeout(r, 1900)); // the round is due 1.8 s after the load
    expect(fake.requests.length - before).toBe(2 * PER_LOAD); // reloaded with no read in between
    const fresh = await read("a", "fast", queue);
    expect(fresh).toMatchObject({ value: "2", source: "tier-hit" });
    // not read since that refresh: the next round drops it, no call without readers
    const calls = fake.requests.length;
    await new Promise((r) => setTimeout(r, 2500));
    expect(fake.requests.length - calls).toBeLessThanOrEqual(PER_LOAD); // the round after the last read, then none
    const settled = fake.requests.length;
    await new Promise((r) => setTimeout(r, 2200));
    expect(fake.requests.length).toBe(settled);
  }, 20_000);

  it("a backend failure is returned as that Status, never a value, and not kept past its back-off", async () => {
    const queue = "failing";
    setQueue(queue, "5");
    fake.respond = (q) => (q.query.includes(`"${queue}"`) ? { status: 503, body: { status: "error", errorType: "unavailable", error: "overloaded" }, headers: { "retry-after": "1" } } : undefined);
    try {
      const answers = await Promise.all(SCRIPTS.map((s) => read(s, "ready", queue)));
      for (const a of answers) {
        expect(a.value).toBeUndefined();
        expect(a.code).toBe(503);
      }
    } finally {
      fake.respond = undefined;
    }
    await new Promise((r) => setTimeout(r, 1100));
    expect(await read("a", "ready", queue)).toMatchObject({ value: "5", source: "tier-wait" });
  });

  it("a restarted Durable Object never yields an invented value: the next read loads again, or fails as a Status", async () => {
    const queue = "reset";
    setQueue(queue, "7");
    expect(await read("a", "ready", queue)).toMatchObject({ value: "7" });
    expect(await read("b", "ready", queue)).toMatchObject({ value: "7", source: "tier-hit" });
    await workers.restart(); // workerd restarts: every isolate and object starts afresh, in-memory storage lost
    fake.respond = (q) => (q.query.includes(`"${queue}"`) ? { status: 500, body: { status: "error", errorType: "internal", error: "down" } } : undefined);
    try {
      const failed = await read("b", "ready", queue);
      expect(failed.value).toBeUndefined();
      expect(failed.code).toBeGreaterThanOrEqual(500);
      // the cached value did not survive the restart: the read went to the backend (and its failure is no value)
      expect(failed.counts["tier-hit"]).toBe(0);
    } finally {
      fake.respond = undefined;
    }
    await new Promise((r) => setTimeout(r, 1100)); // the 503's back-off (1 s) ends: the failure is not kept
    const before = fake.requests.length;
    expect(await read("c", "ready", queue)).toMatchObject({ value: "7", source: "tier-wait" });
    expect(fake.requests.length - before).toBe(PER_LOAD);
  });

  it("the Durable Object unreachable (binding missing) or refusing (another config): the isolate reads directly, right values, counted and logged", async () => {
    setQueue("direct", "9");
    const before = fake.requests.length;
    const unbound = await read("unbound", "ready", "direct");
    expect(unbound).toMatchObject({ value: "9", source: "direct" });
    expect(unbound.counts.direct).toBe(1);
    const refused = await read("other", "ready", "direct");
    expect(refused).toMatchObject({ value: "9", source: "direct" });
    expect(refused.counts.direct).toBe(1);
    expect(fake.requests.length - before).toBe(2 * PER_LOAD);
    const logs = workers.logs();
    expect(logs).toMatch(/shared tier unavailable: reading the backend directly.*the Worker binding SERIES_TIER is not a Durable Object namespace/);
    expect(logs).toMatch(/shared tier unavailable: reading the backend directly.*the object answered 409/);
  });

  it("an object slower than the tier's deadline (timeoutMs) is not waited for: direct, the right value, counted", async () => {
    setQueue("slow", "11");
    fake.respond = (q) => {
      if (!q.query.includes(`"slow"`)) return undefined;
      fake.respond = undefined; // only the object's first load is slow
      return { status: 503, body: { status: "error", errorType: "unavailable", error: "slow" }, delayMs: 400 };
    };
    const started = Date.now();
    const answer = await read("slow", "ready", "slow");
    expect(answer).toMatchObject({ value: "11", source: "direct" });
    expect(answer.counts.direct).toBe(1);
    expect(Date.now() - started).toBeLessThan(400); // the direct read did not wait for the object's slow load
    expect(workers.logs()).toMatch(/shared tier unavailable: reading the backend directly.*no answer within 100 ms/);
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

  it("serves a config with sharedCache type durableObject (the shipped Worker, its SeriesTier export and wrangler.toml binding)", async () => {
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
