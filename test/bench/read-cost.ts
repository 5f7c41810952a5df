/**
 * What one HPA read costs on each serverless runtime: CPU time per read
 * measured here, turned into dollars per million reads with the providers'
 * list prices (docs/deploy.md shows the same arithmetic).
 *
 *   npm run bench:read-cost [-- --reads 2000]
 *
 * Measured, for a cache miss (one GetQueueAttributes per read, the usual
 * case: the HPA polls every 15 s and the default cache TTL is 5 s) and a
 * cache hit:
 * - Lambda handler (functions/lambda.ts) in this Node process: process CPU
 *   time per read, handler + SDK only (the SQS emulator runs in a child
 *   process so its CPU is not counted).
 * - Worker in workerd (built by wrangler, run by Miniflare): CPU time of the
 *   workerd process per read, read from /proc — an upper bound, since it
 *   also counts Miniflare's entry router and HTTP parsing.
 * Baseline in the same run: the Node `/healthz` route (no backend), so the
 * bridge's own share is visible as a ratio.
 */
import { CreateQueueCommand } from "@aws-sdk/client-sqs";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { addMessages, emulatorClient } from "../../functions/demo-queue.ts";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";
import { startWorker } from "../helpers/worker.ts";

/** List prices used (USD), with where they come from; see docs/deploy.md for the date read. */
export const PRICES = {
  /** developers.cloudflare.com/workers/platform/pricing (Standard usage model) */
  workersPerMillionRequests: 0.3,
  workersPerMillionCpuMs: 0.02,
  /** aws.amazon.com/lambda/pricing, us-east-1, Arm, first 7.5 billion GB-s per month */
  lambdaPerMillionRequests: 0.2,
  lambdaPerGbSecondArm: 0.0000133334,
  /** aws.amazon.com/sqs/pricing, standard queue, first 100 billion requests per month */
  sqsPerMillionRequests: 0.4,
} as const;

/** Lambda memory (serverless.yml) and the memory at which Lambda grants one full vCPU, MB. */
const LAMBDA_MEMORY_MB = 256;
const FULL_VCPU_MB = 1769;
/** Assumed in-region SQS round trip for GetQueueAttributes, ms (not measurable here). */
const ASSUMED_SQS_RTT_MS = 15;

const { values } = parseArgs({ options: { reads: { type: "string", default: "2000" } } });
const READS = Number(values.reads);
const PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dworker_tasks";

/** fauxqs in a child process, so its CPU stays out of this process's figures. */
async function startChildEmulator(): Promise<{ endpoint: string; stop: () => void }> {
  const child = spawn(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      'import { startFauxqs } from "fauxqs"; const s = await startFauxqs({ port: 0, host: "localhost", logger: false }); console.log(s.port);',
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once("data", (d: Buffer) => resolve(Number(String(d).trim())));
    child.once("exit", (code) => reject(new Error(`emulator exited (${code})`)));
  });
  return { endpoint: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

function config(endpoint: string, cacheTTLSeconds: number): string {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 3600, cacheTTLSeconds: ${cacheTTLSeconds} }
providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: ${endpoint}, credentials: { source: static, accessKeyId: a, secretAccessKey: b } }
metrics:
  - name: queue_messages_ready
    provider: sqs
`;
}

/** CPU ms of this process per call of `fn`, after a warm-up. */
async function cpuPerCall(fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 200; i++) await fn();
  const start = process.cpuUsage();
  for (let i = 0; i < READS; i++) await fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000 / READS;
}

/** The workerd processes started by this process (Miniflare's children). */
function workerdPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("workerd")) pids.push(Number(entry));
    } catch {
      // process ended while reading
    }
  }
  return pids;
}

/** utime + stime of `pid`, ms. */
function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

async function workerCpuPerRead(text: string): Promise<number> {
  const worker = await startWorker(text);
  try {
    const pids = workerdPids();
    if (pids.length === 0) throw new Error("no workerd child process found");
    for (let i = 0; i < 200; i++) await (await worker.request(PATH)).arrayBuffer();
    const start = pids.reduce((n, p) => n + processCpuMs(p), 0);
    for (let i = 0; i < READS; i++) {
      const res = await worker.request(PATH);
      if (res.status !== 200) throw new Error(`worker answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    }
    return (pids.reduce((n, p) => n + processCpuMs(p), 0) - start) / READS;
  } finally {
    await worker.close();
  }
}

const fmt = (n: number, digits = 3) => n.toFixed(digits);

async function main(): Promise<void> {
  const emulator = await startChildEmulator();
  try {
    const client = emulatorClient(emulator.endpoint);
    const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: "worker_tasks" }));
    await addMessages(client, QueueUrl!, 7);
    client.destroy();
    const quiet = { log: () => {} };
    const miss = createLambdaHandler({ BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_CONFIG: config(emulator.endpoint, 0) }, quiet) as unknown as HttpHandler;
    const hit = createLambdaHandler({ BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_CONFIG: config(emulator.endpoint, 3600) }, quiet) as unknown as HttpHandler;
    const read = (h: HttpHandler) => async () => {
      const res = await invoke(h, "Function URL", PATH);
      if (res.status !== 200) throw new Error(`lambda answered ${res.status}: ${await res.text()}`);
    };
    const baseline = await cpuPerCall(() => invoke(hit, "Function URL", "/healthz"));
    const lambdaMiss = await cpuPerCall(read(miss));
    const lambdaHit = await cpuPerCall(read(hit));
    const workerMiss = await workerCpuPerRead(config(emulator.endpoint, 0));
    const workerHit = await workerCpuPerRead(config(emulator.endpoint, 3600));

    console.log(`read-cost: ${READS} reads each, ${process.version}, ${process.arch}`);
    console.log(`  CPU ms per read            miss      hit   (baseline /healthz ${fmt(baseline)} ms)`);
    console.log(`  Lambda handler (Node)   ${fmt(lambdaMiss).padStart(7)}  ${fmt(lambdaHit).padStart(7)}   ratio to baseline ${fmt(lambdaMiss / baseline, 1)}x / ${fmt(lambdaHit / baseline, 1)}x`);
    console.log(`  Worker (workerd, ≤)     ${fmt(workerMiss).padStart(7)}  ${fmt(workerHit).padStart(7)}`);

    const perMillion = 1e6;
    const workers = PRICES.workersPerMillionRequests + (workerMiss * perMillion * PRICES.workersPerMillionCpuMs) / perMillion;
    const cpuShare = LAMBDA_MEMORY_MB / FULL_VCPU_MB;
    const lambdaMs = lambdaMiss / cpuShare + ASSUMED_SQS_RTT_MS;
    const lambdaGbS = (LAMBDA_MEMORY_MB / 1024) * (lambdaMs / 1000) * perMillion;
    const lambda = PRICES.lambdaPerMillionRequests + lambdaGbS * PRICES.lambdaPerGbSecondArm;
    console.log(`  per million reads, cache misses (beyond included allotments; SQS $${PRICES.sqsPerMillionRequests} on top of each):`);
    console.log(
      `  Workers: $${PRICES.workersPerMillionRequests} requests + ${fmt(workerMiss)} ms × 1e6 × $${PRICES.workersPerMillionCpuMs}/1e6 ms = $${fmt(workers)}`,
    );
    console.log(
      `  Lambda ${LAMBDA_MEMORY_MB} MB arm64: $${PRICES.lambdaPerMillionRequests} requests + 0.25 GB × (${fmt(lambdaMiss)} ms ÷ ${fmt(cpuShare)} vCPU + ${ASSUMED_SQS_RTT_MS} ms SQS) × 1e6 = ${fmt(lambdaGbS, 0)} GB-s × $${PRICES.lambdaPerGbSecondArm} = $${fmt(lambda)}`,
    );
  } finally {
    emulator.stop();
  }
}

await main();
