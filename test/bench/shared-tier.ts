/**
 * `npm run bench:shared-tier` (P6, issue 28): what the shared read tier on
 * DynamoDB (shared/cache/dynamodb-tier.ts) buys and costs, against dynalite
 * in a process of its own on 127.0.0.1 through the real AWS SDK, with the
 * aws-sqs provider reading
 * fauxqs through a front that counts every instance's `GetQueueAttributes`
 * (test/tier/sqs-front.ts). Prints figures; asserts nothing.
 *
 *   npm run bench:shared-tier [-- --seconds 6.2 --series 1000]
 *
 * 1. Backend calls (`P6-calls`): 10 bridge instances (separate `fromConfig`
 *    bridges, each with its own cache, batcher and DynamoDB client, as 10
 *    Lambda environments or pods) read one series every 50 ms for
 *    `--seconds` (TTL 1 s), against one instance doing the same in the same
 *    run; without the tier, 10 instances as the baseline. Goal ≤ 1.1×.
 * 2. Latency (`P6-latency`): one instance reads `--series` distinct series
 *    once each, one after another, each a local cache miss answered by the
 *    tier (stored by another instance before: a tier hit), then each again
 *    (a local cache hit). The p99 a tier hit adds over a local hit, ms
 *    (goal ≤ 5 ms on loopback). The client's connection is warmed first.
 *
 * With `BENCH_REPORT_DIR` set, writes the two rows (`./report.ts`).
 */
import { parseArgs } from "node:util";
import { nodeSharedTier } from "../../shared/cache/runtime-tier.ts";
import { BridgeMetrics } from "../../shared/observability/metrics.ts";
import { builtProviderTypes, loadProviderModules } from "../../shared/providers/registry.ts";
import type { RuntimeEnv } from "../../shared/providers/types.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { sqsConfigHead, startEmulator } from "../helpers/emulator.ts";
import { sharedCacheYaml, startDynalite, tierConfig } from "../tier/dynalite.ts";
import { startSqsFront } from "../tier/sqs-front.ts";
import { writeReport, type BenchRow } from "./report.ts";

await loadProviderModules(builtProviderTypes());

const quick = process.env["BENCH_QUICK"] === "1";
const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: quick ? "2.2" : "6.2" },
    series: { type: "string", default: quick ? "100" : "1000" },
  },
});
const seconds = Number(args.seconds);
const seriesCount = Number(args.series);
const startedAt = new Date();
const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

const [sqs, ddb] = await Promise.all([startEmulator(), startDynalite({ process: true })]);
const front = await startSqsFront(sqs.endpoint);

function instances(n: number, text: string): Bridge[] {
  return Array.from({ length: n }, () => {
    const runtime: RuntimeEnv = { env: {}, now: Date.now, metrics: new BridgeMetrics(), longLived: false };
    runtime.sharedTier = nodeSharedTier(runtime);
    return buildBridge(text, "bench.yaml", runtime, { log: () => {} });
  });
}

function closeAll(bridges: Bridge[]): void {
  for (const b of bridges) for (const p of b.providers.values()) p.close?.();
}

async function read(bridge: Bridge, queue: string): Promise<void> {
  const res = await bridge.app.request(`${NS}/depth?labelSelector=${encodeURIComponent(`queue=${queue}`)}`);
  if (res.status !== 200) throw new Error(`read of ${queue}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Backend calls of `bridges` reading queue `q0` every 50 ms for `seconds`, all at once. */
async function calls(bridges: Bridge[]): Promise<number> {
  const before = front.reads;
  const end = Date.now() + seconds * 1000;
  await Promise.all(
    bridges.map(async (b) => {
      while (Date.now() < end) {
        await read(b, "q0");
        await sleep(50);
      }
    }),
  );
  return front.reads - before;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

try {
  await Promise.all(Array.from({ length: seriesCount }, (_, i) => sqs.add(`q${i}`, (i % 7) + 1)));
  await sqs.add("warm", 1);

  // 1. backend calls
  const withTier = async (n: number, table: string) => {
    await ddb.createTable(table);
    const bridges = instances(n, tierConfig(front.endpoint, sharedCacheYaml(ddb.endpoint, table)));
    try {
      return await calls(bridges);
    } finally {
      closeAll(bridges);
    }
  };
  const one = await withTier(1, "p6-one");
  const ten = await withTier(10, "p6-ten");
  const plain = instances(10, `${sqsConfigHead(front.endpoint, { timeoutSeconds: 2 })}metrics:\n  - { name: depth, provider: sqs, maxAgeSeconds: 30, cacheTTLSeconds: 1, query: { queueLabel: queue } }\n`);
  const untiered = await calls(plain);
  closeAll(plain);
  const ratio = ten / one;
  console.log(`P6 calls over ${seconds} s (TTL 1 s, reads every 50 ms): 1 instance ${one}, 10 instances through the tier ${ten} (${ratio.toFixed(2)}×), 10 without it ${untiered}`);

  // 2. latency: a tier hit against a local hit
  await ddb.createTable("p6-latency");
  const text = tierConfig(front.endpoint, sharedCacheYaml(ddb.endpoint, "p6-latency"), { maxAgeSeconds: 600 }).replace("cacheTTLSeconds: 1", "cacheTTLSeconds: 300");
  const [loader, reader] = instances(2, text);
  for (let i = 0; i < seriesCount; i += 5) await Promise.all(Array.from({ length: Math.min(5, seriesCount - i) }, (_, j) => read(loader!, `q${i + j}`)));
  for (let i = 0; i < 20; i++) await read(reader!, "warm"); // the reader's SQS and DynamoDB connections open
  const tierStats = (reader!.runtime.metrics as BridgeMetrics).tierReads;
  const hits = () => tierStats.get("sqs", "tier-hit").n;
  /** each series read once, one after another; `tier`: only the reads a tier hit answered (a local miss the loader had stored) */
  const timed = async (tier: boolean): Promise<number[]> => {
    const out: number[] = [];
    for (let i = 0; i < seriesCount; i++) {
      const before = hits();
      const t = performance.now();
      await read(reader!, `q${i}`);
      const ms = performance.now() - t;
      if (!tier || hits() > before) out.push(ms);
    }
    return out.sort((a, b) => a - b);
  };
  const tierHits = await timed(true);
  const localHits = await timed(false);
  const hitCount = tierHits.length;
  const bySource = Object.fromEntries([...tierStats.entries.values()].map((e) => [e.labels["source"], e.value.n]));
  closeAll([loader!, reader!]);
  const p = { tier50: percentile(tierHits, 50), tier99: percentile(tierHits, 99), local50: percentile(localHits, 50), local99: percentile(localHits, 99) };
  const added = p.tier99 - p.local99;
  console.log(
    `P6 latency over ${seriesCount} series (${hitCount} tier hits; the reader's tier outcomes ${JSON.stringify(bySource)}): tier hit p50 ${p.tier50.toFixed(2)} ms p99 ${p.tier99.toFixed(2)} ms; local hit p50 ${p.local50.toFixed(3)} ms p99 ${p.local99.toFixed(3)} ms; added p99 ${added.toFixed(2)} ms`,
  );

  const rows: BenchRow[] = [
    {
      id: "P6-calls",
      title: "backend calls for one series read through 10 instances sharing a DynamoDB tier vs one instance",
      goal: "≤ 1.1×",
      measured: `${ratio.toFixed(2)}× (${ten} vs ${one} calls in ${seconds} s, TTL 1 s)`,
      baseline: `10 instances without the tier: ${untiered} calls`,
      met: ratio <= 1.1,
      ratios: { calls_vs_single: Number(ratio.toFixed(3)) },
      better: { calls_vs_single: "lower" },
    },
    {
      id: "P6-latency",
      title: "p99 added by a tier hit (DynamoDB GetItem, dynalite on loopback) over a local cache hit",
      goal: "≤ 5 ms",
      measured: `+${added.toFixed(2)} ms (tier hit p99 ${p.tier99.toFixed(2)} ms, p50 ${p.tier50.toFixed(2)} ms; ${hitCount} tier hits of ${seriesCount} series)`,
      baseline: `local cache hit p99 ${p.local99.toFixed(3)} ms`,
      met: added <= 5 && hitCount >= seriesCount * 0.9,
      ratios: { added_p99_ms_per_5ms: Number((added / 5).toFixed(3)) },
      better: { added_p99_ms_per_5ms: "lower" },
    },
  ];
  writeReport({
    bench: "shared-tier",
    startedAt: startedAt.toISOString(),
    durationSeconds: (Date.now() - startedAt.getTime()) / 1000,
    rows,
    figures: [],
    notes: [
      `aws-sqs against fauxqs through a counting front; the tier on dynalite (in memory, its own process) on 127.0.0.1; real AWS SDK v3 clients; Node ${process.version}.`,
      "Calls: GetQueueAttributes calls (the per-series read; each instance's one-off GetQueueUrl is not counted). Latency: sequential reads of distinct series by one instance whose connections are warm.",
      ...(quick ? ["--quick: short run, figures are a smoke test only."] : []),
    ],
  });
} finally {
  await front.stop();
  await Promise.all([sqs.stop(), ddb.stop()]);
}
