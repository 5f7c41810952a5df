/**
 * The shared read tier on DynamoDB (issue 28) through the real thing:
 * dynalite on 127.0.0.1 with the table made in the test, the real AWS SDK
 * (DynamoDB and SQS clients), and bridges built from config text
 * (`fromConfig`) whose SQS provider reads fauxqs through a front that
 * counts every bridge's `GetQueueAttributes` calls (`./sqs-front.ts`).
 * Bridges here are separate instances in one process, each with its own
 * cache, batcher and DynamoDB client — as separate Lambda environments or
 * pods would be (the cross-process claims: `./dynamodb-tier.runtimes.test.ts`).
 */
import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nodeSharedTier } from "../../shared/cache/runtime-tier.ts";
import type { LogRecord } from "../../shared/observability/log.ts";
import { BridgeMetrics } from "../../shared/observability/metrics.ts";
import type { RuntimeEnv } from "../../shared/providers/types.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { startHangingServer } from "../helpers/hanging-server.ts";
import { sharedCacheYaml, startDynalite, tierConfig, type Dynalite } from "./dynalite.ts";
import { startSqsFront, type SqsFront } from "./sqs-front.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

/** One bridge instance with its own metrics and log. */
interface Instance {
  bridge: Bridge;
  metrics: BridgeMetrics;
  logs: LogRecord[];
}

/** `n` bridge instances of `text`, each built as the Node server builds one (its own tier from `nodeSharedTier`). */
function fleet(n: number, text: string): Instance[] {
  return Array.from({ length: n }, () => {
    const metrics = new BridgeMetrics();
    const logs: LogRecord[] = [];
    const runtime: RuntimeEnv = { env: {}, now: Date.now, metrics, longLived: false };
    runtime.sharedTier = nodeSharedTier(runtime);
    return { bridge: buildBridge(text, "test.yaml", runtime, { log: (r) => logs.push(r) }), metrics, logs };
  });
}

function close(instances: Instance[]): void {
  for (const { bridge } of instances) for (const p of bridge.providers.values()) p.close?.();
}

async function read(bridge: Bridge, queue = "jobs") {
  const res = await bridge.app.request(`${NS}/depth?labelSelector=${encodeURIComponent(`queue=${queue}`)}`);
  return { status: res.status, body: (await res.json()) as any };
}

/** Tier outcomes of `instances` summed by source. */
function sources(instances: Instance[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const { metrics } of instances) for (const { labels, value } of metrics.tierReads.entries.values()) out[labels["source"]!] = (out[labels["source"]!] ?? 0) + value.n;
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every instance reads `queue=jobs` every `stepMs` for `durationMs`, all at once; every answer must be 200 with `value`. */
async function readFor(instances: Instance[], durationMs: number, stepMs: number, value: string): Promise<number> {
  const end = Date.now() + durationMs;
  let reads = 0;
  await Promise.all(
    instances.map(async ({ bridge }) => {
      while (Date.now() < end) {
        const a = await read(bridge);
        expect(a.status, JSON.stringify(a.body)).toBe(200);
        expect(a.body.items[0].value).toBe(value);
        reads++;
        await sleep(stepMs);
      }
    }),
  );
  return reads;
}

describe("shared read tier on DynamoDB (dynalite, real SDK, fauxqs)", () => {
  let sqs: Emulator;
  let other: Emulator;
  let front: SqsFront;
  let otherFront: SqsFront;
  let ddb: Dynalite;

  beforeAll(async () => {
    [sqs, other, ddb] = await Promise.all([startEmulator(), startEmulator(), startDynalite()]);
    await Promise.all([sqs.add("jobs", 4), other.add("jobs", 9)]);
    [front, otherFront] = await Promise.all([startSqsFront(sqs.endpoint), startSqsFront(other.endpoint)]);
  }, 30_000);
  afterAll(async () => {
    await Promise.all([front?.stop(), otherFront?.stop()]);
    await Promise.all([sqs?.stop(), other?.stop(), ddb?.stop()]);
  });

  it("N = 1, 10 and 50 instances reading one series for ten TTLs make the backend calls of one instance (≤ 1.1×)", async () => {
    const calls: Record<number, number> = {};
    for (const n of [1, 10, 50]) {
      const table = `fleet-${n}`;
      await ddb.createTable(table);
      // the tier's longest deadline: this test measures sharing across the fleet, not the fallback (tested below), and
      // 50 instances and dynalite share this process's event loop with whatever else the machine runs
      const instances = fleet(n, tierConfig(front.endpoint, sharedCacheYaml(ddb.endpoint, table, ", timeoutMs: 1000")));
      const before = front.reads;
      await readFor(instances, 10_200, 50, "4");
      calls[n] = front.reads - before;
      const bySource = sources(instances);
      // every local miss went through the tier, none directly; the loads are the backend calls
      expect(bySource["direct"] ?? 0).toBe(0);
      expect(bySource["tier-load"]).toBe(calls[n]);
      if (n > 1) expect((bySource["tier-hit"] ?? 0) + (bySource["tier-wait"] ?? 0)).toBeGreaterThan(0);
      close(instances);
    }
    expect(calls[1]).toBeGreaterThanOrEqual(10);
    expect(calls[10]).toBeLessThanOrEqual(calls[1]! * 1.1);
    expect(calls[50]).toBeLessThanOrEqual(calls[1]! * 1.1);
  }, 120_000);

  it("without a tier the same 10 instances call the backend once each per TTL (the control)", async () => {
    const text = `${sqsConfigHead(front.endpoint, { timeoutSeconds: 2 })}metrics:
  - { name: depth, provider: sqs, maxAgeSeconds: 30, cacheTTLSeconds: 1, query: { queueLabel: queue } }
`;
    const instances = fleet(10, text);
    const before = front.reads;
    await readFor(instances, 1500, 50, "4");
    expect(front.reads - before).toBeGreaterThanOrEqual(20);
    close(instances);
  }, 30_000);

  it("two configs sharing the table never share keys: each reads its own backend", async () => {
    await ddb.createTable("two-configs");
    const [a] = fleet(1, tierConfig(front.endpoint, sharedCacheYaml(ddb.endpoint, "two-configs")));
    const [b] = fleet(1, tierConfig(otherFront.endpoint, sharedCacheYaml(ddb.endpoint, "two-configs")));
    const aBefore = front.reads;
    const bBefore = otherFront.reads;
    expect((await read(a!.bridge)).body.items[0].value).toBe("4");
    expect((await read(b!.bridge)).body.items[0].value).toBe("9");
    expect(front.reads - aBefore).toBe(1);
    expect(otherFront.reads - bBefore).toBe(1);
    expect(sources([a!, b!])).toEqual({ "tier-load": 2 });
    const items = await ddb.scan("two-configs");
    expect(items).toHaveLength(2);
    expect(new Set(items.map((i) => i["k"]!.S)).size).toBe(2);
    close([a!, b!]);
  });

  it("a failed backend read is neither stored nor served: every instance reads again, and the lease is released", async () => {
    await ddb.createTable("failures");
    const text = tierConfig(front.endpoint, sharedCacheYaml(ddb.endpoint, "failures"));
    const [a, b, c] = fleet(3, text);
    front.mode = "fail";
    try {
      const before = front.reads;
      const first = await read(a!.bridge);
      expect(first.status).toBe(503);
      const items = await ddb.scan("failures");
      expect(items.every((i) => i["r"] === undefined && i["leaseUntil"] === undefined)).toBe(true);
      // another instance is not served that failure: it takes the (released) lease and reads the backend itself
      expect((await read(b!.bridge)).status).toBe(503);
      expect(front.reads - before).toBe(2);
    } finally {
      front.mode = "forward";
    }
    const ok = await read(c!.bridge);
    expect(ok.status).toBe(200);
    expect(ok.body.items[0].value).toBe("4");
    expect(sources([c!])).toEqual({ "tier-load": 1 });
    close([a!, b!, c!]);
  });

  it("a stored reading older than maxAgeSeconds is answered 503 as a local one would be", async () => {
    await ddb.createTable("stale");
    const text = tierConfig(front.endpoint, sharedCacheYaml(ddb.endpoint, "stale"));
    const [a, b] = fleet(2, text);
    expect((await read(a!.bridge)).status).toBe(200);
    const [item] = await ddb.scan("stale");
    const reading = JSON.parse(item!["r"]!.S!) as { v: string; t: number };
    // the same item, its reading observed 60 s ago (maxAgeSeconds 30), stored just now
    await ddb.client.send(new PutItemCommand({ TableName: "stale", Item: { ...item!, r: { S: JSON.stringify({ ...reading, t: Date.now() - 60_000 }) }, storedAt: { N: String(Date.now()) } } }));
    const before = front.reads;
    const stale = await read(b!.bridge);
    expect(stale.status).toBe(503);
    expect(stale.body.message).toMatch(/older than maxAgeSeconds \(30\)/);
    expect(front.reads - before).toBe(0);
    expect(sources([b!])).toEqual({ "tier-hit": 1 });
    close([a!, b!]);
  });

  it("DynamoDB stopped: reads go direct with the right values, counted, and logged once a minute per instance", async () => {
    const own = await startDynalite();
    await own.createTable("down");
    const instances = fleet(2, tierConfig(front.endpoint, sharedCacheYaml(own.endpoint, "down")));
    for (const { bridge } of instances) expect((await read(bridge)).body.items[0].value).toBe("4");
    await own.stop();
    await sqs.add("jobs", 1); // the value moves: a direct read must see it
    try {
      for (let round = 0; round < 2; round++) {
        await sleep(1100); // past the 1 s TTL of the local caches
        for (const { bridge } of instances) {
          const a = await read(bridge);
          expect(a.status).toBe(200);
          expect(a.body.items[0].value).toBe("5");
        }
      }
      for (const instance of instances) {
        expect(sources([instance])["direct"]).toBe(2);
        const warnings = instance.logs.filter((r) => r.level === "warn" && /shared read tier failed/.test(r.msg));
        expect(warnings).toHaveLength(1);
        expect(warnings[0]).toMatchObject({ provider: "sqs", tier: "dynamodb", directReads: 1 });
        expect(String(warnings[0]!["error"])).toMatch(/DynamoDB GetItem on table down failed/);
      }
    } finally {
      await sqs.drain("jobs", 1);
      close(instances);
    }
  }, 20_000);

  it("a DynamoDB that never answers: reads go direct after the tier's timeoutMs, well inside the read deadline", async () => {
    const hanging = await startHangingServer();
    const [a] = fleet(1, tierConfig(front.endpoint, `{ type: dynamodb, table: slow, region: us-east-1, endpoint: ${hanging.url}, credentials: { source: static, accessKeyId: test, secretAccessKey: test }, timeoutMs: 100 }`));
    try {
      const started = performance.now();
      const answer = await read(a!.bridge);
      expect(answer.status).toBe(200);
      expect(answer.body.items[0].value).toBe("4");
      expect(performance.now() - started).toBeLessThan(1000);
      expect(sources([a!])).toEqual({ direct: 1 });
      expect(a!.logs.find((r) => r.level === "warn")?.["error"]).toMatch(/did not answer within 100 ms/);
    } finally {
      close([a!]);
      await hanging.close();
    }
  });

  it("the Node server and Lambda refuse a durableObject tier, and a dynamodb tier without a region, at load", () => {
    expect(() => fleet(1, tierConfig(front.endpoint, "{ type: durableObject }"))).toThrow(/sharedCache type durableObject is served by the Cloudflare Worker only/);
    expect(() => fleet(1, tierConfig(front.endpoint, "{ type: dynamodb, table: t1x }"))).toThrow(/needs a region: set sharedCache.region, or AWS_REGION/);
  });
});
