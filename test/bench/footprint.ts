/**
 * Footprint benchmark (issue 11, P3 and "bridge memory at rest"), each
 * figure against a baseline measured in the same run:
 *
 * - Worker bundle: wrangler's own gzip figure (`Total Upload: … / gzip:`)
 *   for every provider (`npm run build:worker`) and for aws-sqs only
 *   (`infra/worker/build.ts --providers aws-sqs`);
 * - Worker start-up: workerd (Miniflare) from `new Miniflare` to the first
 *   `/healthz` answer, the bridge's script minus an empty Worker's, median
 *   of `--runs`; plus the first `/apis` answer (config parse + provider build);
 * - Lambda cold import: a fresh `node` importing the built handler module
 *   (`infra/lambda/build.ts`), median of `--runs` processes, against a fresh
 *   `node` importing an empty module; plus import + first event with an
 *   SQS-only config (which loads the SQS chunk);
 * - bridge RSS at rest: the Node server's bundle (`infra/node/build.ts`,
 *   `node dist/node/node.mjs --config infra/examples/demo.yaml`) after one
 *   `/healthz` and a second of rest, against a bare Node +
 *   `@hono/node-server` + Hono process answering `/healthz`, median of 3
 *   each; the same server run from source (`node functions/node.ts`) too.
 *
 *   npm run bench:footprint [-- --runs 7]
 *
 * Prints the figures and writes the report (`test/bench/report.ts`) when
 * `BENCH_REPORT_DIR` is set. Nothing is asserted. Noisy on a shared machine:
 * the ratios are what to compare.
 */
import { spawn, execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { pathToFileURL } from "node:url";
import { parseArgs, promisify } from "node:util";
import { Miniflare } from "miniflare";
import { buildLambda } from "../../infra/lambda/build.ts";
import { buildNodeServer } from "../../infra/node/build.ts";
import { buildWorker } from "../../infra/worker/build.ts";
import { toEvent } from "../helpers/lambda.ts";
import { writeReport, type BenchRow } from "./report.ts";
import { ROOT } from "../setup/worker-bundle.ts";

const exec = promisify(execFile);
const { values: args } = parseArgs({ options: { runs: { type: "string", default: "7" } } });
const RUNS = Math.max(1, Number(args.runs));
const started = Date.now();
const WORK = join(ROOT, ".cache/bench-footprint");
rmSync(WORK, { recursive: true, force: true });
mkdirSync(WORK, { recursive: true });

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const ms = (n: number) => `${n.toFixed(1)} ms`;
const mb = (n: number) => `${(n / 1e6).toFixed(0)} MB`;

/** An SQS-only config (no backend is called at rest or by /healthz). */
const SQS_CONFIG = readFileSync(join(ROOT, "infra/examples/demo.yaml"), "utf8");

// ---- Worker bundle -------------------------------------------------------
const [workerAll, workerSqs] = [
  await buildWorker({ outdir: join(WORK, "worker-all") }),
  await buildWorker({ types: ["aws-sqs"], outdir: join(WORK, "worker-sqs") }),
];
const kib = (n: number) => n / 1024;
console.log(`Worker bundle (wrangler gzip): every provider ${kib(workerAll.gzipBytes).toFixed(1)} KiB, aws-sqs only ${kib(workerSqs.gzipBytes).toFixed(1)} KiB`);

// ---- Worker start-up -----------------------------------------------------
const EMPTY_WORKER = join(WORK, "empty-worker.mjs");
writeFileSync(EMPTY_WORKER, `export default { fetch() { return new Response("ok"); } };\n`);
const toml = readFileSync(join(ROOT, "wrangler.toml"), "utf8");
const compatibilityDate = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)![1]!;

/**
 * ms from `new Miniflare` to the answer of `/healthz` (and then of `then`,
 * when given). The modules are listed (the script and its Text modules), so
 * Miniflare does not parse the script to find them: what is timed is
 * workerd loading and starting it.
 */
async function workerStart(script: string, bindings: Record<string, string>, then?: string): Promise<{ ready: number; then?: number }> {
  const dir = dirname(script);
  const texts = readdirSync(dir).filter((f) => f.endsWith(".yaml"));
  const t0 = performance.now();
  const mf = new Miniflare({
    modulesRoot: dir,
    modules: [
      { type: "ESModule", path: script },
      ...texts.map((f) => ({ type: "Text" as const, path: join(dir, f) })),
    ],
    compatibilityDate,
    bindings,
    handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
      stdout.resume();
      stderr.resume();
    },
  });
  try {
    await (await mf.dispatchFetch("http://bench/healthz")).text();
    const ready = performance.now() - t0;
    if (then === undefined) return { ready };
    const t1 = performance.now();
    await (await mf.dispatchFetch(`http://bench${then}`)).text();
    return { ready, then: performance.now() - t1 };
  } finally {
    await mf.dispose();
  }
}

const workerBindings = { BRIDGE_CONFIG: SQS_CONFIG, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" };
const emptyStarts: number[] = [];
const bridgeStarts: number[] = [];
const firstApis: number[] = [];
for (let i = 0; i < RUNS; i++) {
  emptyStarts.push((await workerStart(EMPTY_WORKER, {})).ready);
  const r = await workerStart(join(workerAll.outdir, "worker.js"), workerBindings, "/apis/external.metrics.k8s.io/v1beta1");
  bridgeStarts.push(r.ready);
  firstApis.push(r.then!);
}
const workerStartup = median(bridgeStarts) - median(emptyStarts);
console.log(
  `Worker start-up (workerd, to the first /healthz): bridge ${ms(median(bridgeStarts))}, empty Worker ${ms(median(emptyStarts))}, difference ${ms(workerStartup)}; ` +
    `first /apis answer after that (config + providers) ${ms(median(firstApis))}`,
);

// ---- Lambda cold import --------------------------------------------------
const lambda = await buildLambda({ outdir: join(WORK, "lambda") });
const EMPTY_MODULE = join(WORK, "empty.mjs");
writeFileSync(EMPTY_MODULE, "export const handler = async () => ({ statusCode: 200 });\n");

/** ms a fresh `node` takes to import `file` (and, with `event`, to answer it). */
async function coldImport(file: string, env: Record<string, string> = {}, event?: unknown): Promise<{ importMs: number; firstMs?: number }> {
  const script = `
    const t0 = performance.now();
    const mod = await import(${JSON.stringify(pathToFileURL(file).href)});
    const importMs = performance.now() - t0;
    let firstMs;
    if (process.env.EVENT) { await mod.handler(JSON.parse(process.env.EVENT), {}); firstMs = performance.now() - t0; }
    console.log(JSON.stringify({ importMs, firstMs }));
  `;
  const r = await exec(process.execPath, ["--input-type=module", "-e", script], {
    cwd: WORK,
    env: { PATH: process.env["PATH"] ?? "", AWS_REGION: "us-east-1", ...env, ...(event ? { EVENT: JSON.stringify(event) } : {}) },
  });
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

const healthEvent = await toEvent("Function URL", "/healthz");
const emptyImports: number[] = [];
const lambdaImports: number[] = [];
const lambdaFirst: number[] = [];
for (let i = 0; i < RUNS; i++) {
  emptyImports.push((await coldImport(EMPTY_MODULE)).importMs);
  lambdaImports.push((await coldImport(lambda.entry)).importMs);
  lambdaFirst.push((await coldImport(lambda.entry, { BRIDGE_CONFIG: SQS_CONFIG, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }, healthEvent)).firstMs!);
}
const lambdaImport = median(lambdaImports);
console.log(
  `Lambda cold import (index.mjs ${kib(lambda.gzipBytes).toFixed(0)} KiB gzip): ${ms(lambdaImport)}, empty module ${ms(median(emptyImports))}; ` +
    `import + first event with an SQS-only config ${ms(median(lambdaFirst))}`,
);

// ---- bridge RSS at rest --------------------------------------------------
const BARE = join(WORK, "bare-hono.mjs");
writeFileSync(
  BARE,
  `import { serve } from ${JSON.stringify(pathToFileURL(join(ROOT, "node_modules/@hono/node-server/dist/index.mjs")).href)};
import { Hono } from ${JSON.stringify(pathToFileURL(join(ROOT, "node_modules/hono/dist/index.js")).href)};
const app = new Hono().get("/healthz", (c) => c.text("ok"));
const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: Number(process.env.PORT) }, () => console.error("listening"));
`,
);

/** RSS (bytes, /proc VmRSS) of `argv` after one /healthz answer and a second at rest. */
async function rssAtRest(argv: string[], port: number, env: Record<string, string> = {}): Promise<number> {
  const child = spawn(process.execPath, argv, { cwd: ROOT, env: { PATH: process.env["PATH"] ?? "", PORT: String(port), ...env }, stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  try {
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`);
        await res.text();
        if (res.ok) break;
      } catch {
        /* not listening yet */
      }
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${argv.join(" ")} did not answer /healthz: ${err}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 1000));
    const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}

const nodeBuild = await buildNodeServer({ outdir: join(WORK, "node") });
const bareRss: number[] = [];
const bridgeRss: number[] = [];
const sourceRss: number[] = [];
const serverArgs = (port: number) => ["--config", join(ROOT, "infra/examples/demo.yaml"), "--port", String(port)];
const insecure = { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" };
for (let i = 0; i < 3; i++) {
  bareRss.push(await rssAtRest([BARE], 18_790 + i));
  bridgeRss.push(await rssAtRest([nodeBuild.entry, ...serverArgs(18_795 + i)], 18_795 + i, insecure));
  sourceRss.push(await rssAtRest([join(ROOT, "functions/node.ts"), ...serverArgs(18_800 + i)], 18_800 + i, insecure));
}
const rssRatio = median(bridgeRss) / median(bareRss);
const sourceRatio = median(sourceRss) / median(bareRss);
console.log(
  `Bridge RSS at rest (demo SQS config): bundle (infra/node/build.ts) ${mb(median(bridgeRss))} ${rssRatio.toFixed(2)}×, ` +
    `from source (node functions/node.ts) ${mb(median(sourceRss))} ${sourceRatio.toFixed(2)}×; bare Node + Hono ${mb(median(bareRss))}`,
);

// ---- report ----------------------------------------------------------------
const GOAL_KIB = 150;
const rows: BenchRow[] = [
  {
    id: "P3-worker-bundle",
    title: "Worker bundle, wrangler's gzip figure",
    goal: `≤ ${GOAL_KIB} KiB gzip`,
    measured: `aws-sqs only ${kib(workerSqs.gzipBytes).toFixed(1)} KiB; every provider ${kib(workerAll.gzipBytes).toFixed(1)} KiB`,
    baseline: "every provider (npm run build:worker)",
    met: kib(workerSqs.gzipBytes) <= GOAL_KIB,
    ratios: { sqs_only_vs_goal: kib(workerSqs.gzipBytes) / GOAL_KIB, all_vs_goal: kib(workerAll.gzipBytes) / GOAL_KIB, sqs_only_vs_all: workerSqs.gzipBytes / workerAll.gzipBytes },
    better: { sqs_only_vs_goal: "lower", all_vs_goal: "lower", sqs_only_vs_all: "lower" },
  },
  {
    id: "P3-worker-startup",
    title: "Worker start-up in workerd (to first /healthz), minus an empty Worker's",
    goal: "≤ 40 ms",
    measured: `${ms(workerStartup)}; first /apis answer ${ms(median(firstApis))}`,
    baseline: `empty Worker ${ms(median(emptyStarts))} (bridge ${ms(median(bridgeStarts))})`,
    met: workerStartup <= 40,
    ratios: { startup_vs_empty: median(bridgeStarts) / median(emptyStarts) },
    better: { startup_vs_empty: "lower" },
  },
  {
    id: "P3-lambda-cold",
    title: "Lambda cold import of the artifact's handler module (fresh node)",
    goal: "≤ 100 ms",
    measured: `${ms(lambdaImport)}; import + first event (SQS-only config) ${ms(median(lambdaFirst))}`,
    baseline: `empty module ${ms(median(emptyImports))}`,
    met: lambdaImport <= 100,
    ratios: { import_vs_empty: lambdaImport / median(emptyImports), first_event_vs_empty: median(lambdaFirst) / median(emptyImports) },
    better: { import_vs_empty: "lower", first_event_vs_empty: "lower" },
  },
  {
    id: "bridge-rss-rest",
    title: "Bridge RSS at rest (Node server bundle, demo SQS config) vs bare Node + @hono/node-server",
    goal: "≤ 1.3×",
    measured: `${mb(median(bridgeRss))} (${rssRatio.toFixed(2)}×); from source ${mb(median(sourceRss))} (${sourceRatio.toFixed(2)}×)`,
    baseline: `bare Node + Hono ${mb(median(bareRss))}`,
    met: rssRatio <= 1.3,
    ratios: { rss_vs_bare: rssRatio, source_rss_vs_bare: sourceRatio },
    better: { rss_vs_bare: "lower", source_rss_vs_bare: "lower" },
  },
];
writeReport({
  bench: "footprint",
  startedAt: new Date(started).toISOString(),
  durationSeconds: (Date.now() - started) / 1000,
  rows,
  figures: [
    {
      id: "p3-footprint",
      title: "Worker bundle (gzip KiB) by provider set",
      kind: "bar",
      xLabel: "build",
      yLabel: "KiB gzip",
      series: [{ name: "wrangler gzip", points: [["every provider", kib(workerAll.gzipBytes)], ["aws-sqs only", kib(workerSqs.gzipBytes)]] }],
    },
  ],
  notes: [`medians of ${RUNS} runs (RSS: 3); Node ${process.version}; same-run baselines; a shared 2-core machine is noisy`],
});
for (const r of rows) console.log(`${r.met ? "met " : "NOT "} ${r.id}: ${r.measured} (goal ${r.goal}; baseline ${r.baseline})`);
rmSync(WORK, { recursive: true, force: true });
