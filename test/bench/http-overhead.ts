/**
 * `npm run bench:http-overhead`: what the bridge and the in-cluster proxy
 * cost per HTTP request on loopback, against trivial servers measured in the
 * same run on the same machine. Prints figures; asserts nothing, but exits 1
 * when any run saw an error, a timeout or a non-2xx answer (a benchmark of
 * failures is no benchmark).
 *
 *   npm run bench:http-overhead
 *   BENCH_DURATION=10 BENCH_CONNECTIONS=100 BENCH_GROUPS=http,https npm run bench:http-overhead
 *
 * Environment: `BENCH_DURATION` measured seconds per scenario (default 5),
 * `BENCH_WARMUP` seconds of unmeasured load before each (default 1),
 * `BENCH_SPIN_MICROS` the busy-loop µs per request of the calibration
 * scenarios, comma-separated (default `10,20`; empty: none),
 * `BENCH_ROUNDS` interleaved rounds of the plain-HTTP group (default 5: its
 * servers all run at once and each round measures each scenario for
 * `BENCH_DURATION / BENCH_ROUNDS` seconds, the order rotating, so a drift of
 * the machine's speed during the run hits every scenario alike),
 * `BENCH_CONNECTIONS` concurrent keep-alive connections (default 50, at most
 * 1000), `BENCH_SERIES` distinct series read (default 50), `BENCH_GROUPS`
 * the scenario groups to run, comma-separated (default `http,https,worker`:
 * plain HTTP with baseline A, HTTPS and the proxy with baseline B, workerd
 * with its trivial Worker), `BENCH_CPU_PROF=DIR` writes a V8 CPU profile
 * of every server process into DIR (open it in Chrome DevTools). Everything
 * listens on 127.0.0.1 only.
 *
 * Method. The load generator is autocannon (one connection = one request in
 * flight, no pipelining) in this process; every server runs in its own
 * forked Node process (the bridge's process model: one Node process per
 * server), workerd in its own process. Scenarios:
 *
 * - A: a trivial Hono route on @hono/node-server answering a fixed
 *   ExternalMetricValueList (the framework's ceiling);
 * - bridge, cached: `functions/node.ts` `startNodeServer` with the aws-sqs
 *   provider on a fauxqs emulator (own process), cacheTTLSeconds 600, a
 *   policy set of 42 ExternalMetricPolicies (a cluster guardrail, 40 team
 *   namespaces, the benchmark's namespace allowing the series by `In`);
 *   connection i always reads series i mod S, so every read is a cache hit
 *   and the measured path is the bridge's own: routing, selector parse, rule
 *   lookup, policy evaluation, cache hit, Quantity formatting, JSON, logging
 *   (JSON lines to stdout, here /dev/null);
 * - A + N µs busy loop (calibration): the trivial route spinning N µs of
 *   JavaScript before answering: what a server doing N µs more work per
 *   request than A reaches against A on this machine and load generator
 *   (the bridge's own code on a cache hit is about 13 µs, Hono included);
 * - bridge, misses coalesced: cacheTTLSeconds 0 and every connection reads
 *   the same series, so each read needs a backend value and concurrent reads
 *   share one GetQueueAttributes call; the SDK commands sent are counted
 *   (middleware on the provider's SQSClient);
 * - B: the trivial Hono route over HTTPS with the proxy's TLS setup
 *   (generated serving certificate, `requestCert`, TLS ≥ 1.2), the client
 *   presenting the front-proxy certificate on every connection;
 * - proxy → bridge: `shared/proxy` (via `test/proxy/proxy.harness.ts`, fake
 *   Kubernetes API `test/fakes/kube-apiserver.ts`) authenticating the
 *   front-proxy client certificate and `X-Remote-*` headers, authorizing with
 *   SubjectAccessReview (cached 10 s, as apiserver's webhook authorizer),
 *   its own cache off (ttlSeconds 0: nothing re-used, one read in flight per
 *   key, so every request is forwarded), signing each forwarded request; the
 *   bridge (cached, verifying the signature) behind it;
 * - proxy cache hit: the same with the proxy's cache on (ttlSeconds 30).
 * - workerd: a trivial Worker vs the bridge's Worker
 *   (`test/helpers/worker.ts`, built by wrangler as for a deploy), cached.
 *
 * Figures: req/s, p50/p99 latency (every response's time as autocannon
 * measured it), req/s relative to the scenario's baseline, the server
 * processes' CPU time per request (`process.cpuUsage`; workerd from
 * `/proc/<pid>/stat`) — on a shared 2-core machine CPU per request is the
 * steadier measure of a server's own overhead — and per-process memory
 * (RSS when ready, after the run, peak; live V8 heap after a full GC, the
 * children running with `--expose-gc` and the collection's CPU left out,
 * collected only before the warm-up and after the run: a forced collection
 * discards V8's optimized code, servers.ts `childMain`).
 * With `BENCH_REPORT_DIR` set it also writes the report of `npm run bench`
 * (test/bench/report.ts): row P1 (bridge, cached, vs baseline A: req/s and
 * p99 ratios), the same ratios without a goal for the other scenarios, and
 * figures p1-throughput and p1-cpu.
 * Linux is needed only for workerd's figures (`/proc`). Figures measured, and how to read them:
 * `docs/benchmarks.md`.
 */
import type Autocannon from "autocannon";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import { writeReport, type BenchRow } from "./report.ts";
import {
  bridgeConfigText,
  envNumber,
  expectValue,
  frontProxyClient,
  get,
  reportTiming,
  runBenchmark,
  servingPems,
  node,
  NAMESPACE,
  procMemory,
  spawnChild,
  startProxyStack,
  V1,
  type Child,
  type Measured,
  type ProcessStats,
} from "./servers.ts";

const BASELINE_A = "A: trivial Hono (HTTP)";
/** The name of the calibration scenario with `spinMicros` µs of busy work per request. */
const spinName = (spinMicros: number) => `A + ${spinMicros} µs busy loop (calibration)`;
const BASELINE_B = "B: trivial Hono (HTTPS, client cert)";
/** `BENCH_QUICK=1` (`npm run bench -- --quick`): short runs for a smoke test, figures meaningless. */
const QUICK = process.env["BENCH_QUICK"] === "1";

/** CPU (µs) and memory of a non-Node process from /proc (workerd). */
function procStats(pid: number, ticksPerSecond: number): ProcessStats {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15 of proc(5))
  const memory = procMemory(pid);
  return { cpuMicros: (ticks / ticksPerSecond) * 1e6, rss: memory.rss, maxRss: memory.peak, counters: {} };
}

/** Pids of this process's children named `name` (Linux). */
function childPidsNamed(name: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (comm === name && ppid === process.pid) out.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

/** What one request of a scenario looks like. */
interface Target {
  url: string;
  /** path for connection i */
  path(connection: number): string;
  headers?: Record<string, string>;
  tls?: { cert: string; key: string };
}

/** One measured load run. */
interface Run {
  requests: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  /** the load generator's CPU use, fraction of one core */
  loadgenCpu: number;
  /** every response's latency, ms, sorted */
  latencies: Float64Array;
  /** the load generator's CPU time, s, and the run's wall time, s */
  loadgenCpuSeconds: number;
  wallSeconds: number;
}

/** Apply `connections` connections to `target` for `seconds`; latencies of every response, ms. */
async function load(target: Target, connections: number, seconds: number): Promise<Run> {
  // Imported here: the forked servers never load the load generator.
  const autocannon: typeof Autocannon = (await import("autocannon")).default;
  return new Promise((resolve, reject) => {
    let latencies = new Float64Array(1 << 16);
    let n = 0;
    let connection = 0;
    const cpu = process.cpuUsage();
    const wall = performance.now();
    const instance = autocannon(
      {
        url: target.url,
        connections,
        duration: seconds,
        pipelining: 1,
        timeout: 10,
        ...(target.tls ? { tlsOptions: target.tls } : {}),
        setupClient: (client) => {
          const path = target.path(connection++);
          client.setRequests([{ method: "GET", path, headers: { accept: "application/json", ...target.headers } }]);
        },
      },
      (err, result) => {
        if (err) return reject(err instanceof Error ? err : new Error(String(err)));
        const used = process.cpuUsage(cpu);
        const elapsed = (performance.now() - wall) / 1000;
        const sorted = latencies.subarray(0, n).sort();
        const at = (q: number) => (n === 0 ? NaN : sorted[Math.min(n - 1, Math.ceil(q * n) - 1)]!);
        const requests = result.requests.total;
        resolve({
          requests,
          seconds: result.duration,
          rps: requests / result.duration,
          p50: at(0.5),
          p99: at(0.99),
          errors: result.errors,
          timeouts: result.timeouts,
          non2xx: result.non2xx,
          loadgenCpu: (used.user + used.system) / 1e6 / elapsed,
          latencies: sorted,
          loadgenCpuSeconds: (used.user + used.system) / 1e6,
          wallSeconds: elapsed,
        });
      },
    );
    instance.on("response", (_client, _status, _bytes, responseTime) => {
      if (n === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2);
        bigger.set(latencies);
        latencies = bigger;
      }
      latencies[n++] = responseTime;
    });
  });
}

/** One line of the report. */
interface Row {
  name: string;
  baseline?: string;
  run: Run;
  /** CPU µs per request of each measured process */
  cpuPerRequest: { label: string; micros: number }[];
  memory: { label: string; ready: number; after: number; peak: number; heapReady: number; heapAfter: number }[];
  counters: Record<string, number>;
}

const rows: Row[] = [];
let failures = 0;

/** Warm up, then measure `target` served by `servers`; record a row. */
async function scenario(name: string, target: Target, servers: Measured[], settings: Settings, baseline?: string): Promise<Row> {
  process.stderr.write(`· ${name} …\n`);
  // Live heap only before the warm-up and after the run: the full collection discards optimized code.
  const ready = await Promise.all(servers.map((s) => s.stats({ collect: true })));
  await load(target, settings.connections, settings.warmup);
  const before = await Promise.all(servers.map((s) => s.stats()));
  const run = await load(target, settings.connections, settings.duration);
  const after = await Promise.all(servers.map((s) => s.stats({ collect: true })));
  const counters: Record<string, number> = {};
  servers.forEach((s, i) => {
    for (const [k, v] of Object.entries(after[i]!.counters)) counters[`${s.label}.${k}`] = v - (before[i]!.counters[k] ?? 0);
  });
  const row: Row = {
    name,
    ...(baseline ? { baseline } : {}),
    run,
    cpuPerRequest: servers.map((s, i) => ({ label: s.label, micros: (after[i]!.cpuMicros - before[i]!.cpuMicros) / Math.max(1, run.requests) })),
    memory: servers.map((s, i) => ({
      label: s.label,
      ready: ready[i]!.rss,
      after: after[i]!.rss,
      peak: after[i]!.maxRss,
      heapReady: ready[i]!.liveHeap ?? NaN,
      heapAfter: after[i]!.liveHeap ?? NaN,
    })),
    counters,
  };
  if (run.errors + run.timeouts + run.non2xx > 0 || run.requests === 0) {
    failures++;
    process.stderr.write(`  ✗ ${name}: ${run.requests} responses, ${run.errors} errors, ${run.timeouts} timeouts, ${run.non2xx} non-2xx\n`);
  }
  rows.push(row);
  return row;
}

/** A scenario whose servers are running: what {@link interleaved} measures. */
interface Planned {
  name: string;
  target: Target;
  servers: Measured[];
  baseline?: string;
}

/**
 * Measure several scenarios in interleaved rounds: all their servers run at
 * once (idle but for the one under load), each is warmed up, then every
 * round gives each scenario a slice of `duration / rounds` seconds, the
 * order rotating by one each round. Requests, latencies, CPU and counters
 * are summed over the slices. On this machine the speed of everything
 * drifts by up to 1.5× within a minute (other VMs, memory management), so
 * scenarios measured one after the other compare moments as much as
 * servers; interleaved, each scenario sees the same mix of moments.
 */
async function interleaved(planned: Planned[], settings: Settings): Promise<Row[]> {
  const rounds = Math.max(1, settings.rounds);
  const slice = settings.duration / rounds;
  process.stderr.write(`· ${planned.map((p) => p.name).join(", ")}: ${rounds} interleaved rounds of ${slice.toFixed(2)} s each …\n`);
  // Live heap only before the warm-ups and after the last round: the full collection discards optimized code.
  const ready = await Promise.all(planned.map((p) => Promise.all(p.servers.map((s) => s.stats({ collect: true })))));
  for (const p of planned) await load(p.target, settings.connections, settings.warmup);
  const runs: Run[][] = planned.map(() => []);
  const cpu = planned.map((p) => p.servers.map(() => 0));
  const counters = planned.map(() => ({}) as Record<string, number>);
  const last = planned.map((p) => p.servers.map(() => undefined as ProcessStats | undefined));
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < planned.length; k++) {
      const i = (k + round) % planned.length;
      const p = planned[i]!;
      const before = await Promise.all(p.servers.map((s) => s.stats()));
      runs[i]!.push(await load(p.target, settings.connections, slice));
      const after = await Promise.all(p.servers.map((s) => s.stats()));
      p.servers.forEach((s, j) => {
        cpu[i]![j]! += after[j]!.cpuMicros - before[j]!.cpuMicros;
        for (const [key, v] of Object.entries(after[j]!.counters)) {
          const name = `${s.label}.${key}`;
          counters[i]![name] = (counters[i]![name] ?? 0) + v - (before[j]!.counters[key] ?? 0);
        }
        last[i]![j] = after[j];
      });
    }
  }
  const collected = await Promise.all(planned.map((p) => Promise.all(p.servers.map((s) => s.stats({ collect: true })))));
  return planned.map((p, i) => {
    const parts = runs[i]!;
    const all = new Float64Array(parts.reduce((n, r) => n + r.latencies.length, 0));
    let at = 0;
    for (const r of parts) {
      all.set(r.latencies, at);
      at += r.latencies.length;
    }
    all.sort();
    const q = (x: number) => (all.length === 0 ? NaN : all[Math.min(all.length - 1, Math.ceil(x * all.length) - 1)]!);
    const sum = (f: (r: Run) => number) => parts.reduce((n, r) => n + f(r), 0);
    const requests = sum((r) => r.requests);
    const seconds = sum((r) => r.seconds);
    const run: Run = {
      requests,
      seconds,
      rps: requests / seconds,
      p50: q(0.5),
      p99: q(0.99),
      errors: sum((r) => r.errors),
      timeouts: sum((r) => r.timeouts),
      non2xx: sum((r) => r.non2xx),
      loadgenCpu: sum((r) => r.loadgenCpuSeconds) / sum((r) => r.wallSeconds),
      latencies: all,
      loadgenCpuSeconds: sum((r) => r.loadgenCpuSeconds),
      wallSeconds: sum((r) => r.wallSeconds),
    };
    const row: Row = {
      name: p.name,
      ...(p.baseline ? { baseline: p.baseline } : {}),
      run,
      cpuPerRequest: p.servers.map((s, j) => ({ label: s.label, micros: cpu[i]![j]! / Math.max(1, requests) })),
      memory: p.servers.map((s, j) => ({
        label: s.label,
        ready: ready[i]![j]!.rss,
        after: last[i]![j]!.rss,
        peak: last[i]![j]!.maxRss,
        heapReady: ready[i]![j]!.liveHeap ?? NaN,
        heapAfter: collected[i]![j]!.liveHeap ?? NaN,
      })),
      counters: counters[i]!,
    };
    if (run.errors + run.timeouts + run.non2xx > 0 || run.requests === 0) {
      failures++;
      process.stderr.write(`  ✗ ${p.name}: ${run.requests} responses, ${run.errors} errors, ${run.timeouts} timeouts, ${run.non2xx} non-2xx\n`);
    }
    rows.push(row);
    return row;
  });
}

interface Settings {
  duration: number;
  warmup: number;
  connections: number;
  series: number;
  groups: Set<string>;
  /** µs of busy work per request of the calibration scenarios (`BENCH_SPIN_MICROS`) */
  spins: number[];
  /** interleaved rounds of the http group (`BENCH_ROUNDS`) */
  rounds: number;
}

const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US");
const fmtMs = (n: number) => (Number.isNaN(n) ? "n/a" : n < 10 ? n.toFixed(2) : n.toFixed(1));
const fmtMB = (n: number) => (Number.isNaN(n) ? "n/a" : (n / 1048576).toFixed(0));
function table(header: string[], body: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n");
}

async function main(): Promise<void> {
  const settings: Settings = {
    duration: envNumber("BENCH_DURATION", QUICK ? 1 : 5, 600),
    warmup: envNumber("BENCH_WARMUP", QUICK ? 0.5 : 1, 60),
    connections: Math.round(envNumber("BENCH_CONNECTIONS", 50, 1000)),
    series: Math.round(envNumber("BENCH_SERIES", 50, 1000)),
    rounds: Math.round(envNumber("BENCH_ROUNDS", QUICK ? 1 : 5, 100)),
    groups: new Set((process.env["BENCH_GROUPS"] ?? "http,https,worker").split(",").map((g) => g.trim())),
    spins: (process.env["BENCH_SPIN_MICROS"] ?? "10,20").split(",").filter((x) => x.trim() !== "").map((x) => {
      const n = Number(x);
      if (!Number.isFinite(n) || n < 0 || n > 10_000) throw new Error(`BENCH_SPIN_MICROS: ${x} is not a number of µs between 0 and 10000`);
      return n;
    }),
  };
  for (const g of settings.groups) if (!["http", "https", "worker"].includes(g)) throw new Error(`BENCH_GROUPS: unknown group ${g} (http, https, worker)`);
  const load0 = os.loadavg();
  const startedAt = new Date();
  const ns = `${V1}/namespaces/${NAMESPACE}`;
  const seriesPath = (i: number) => `${ns}/queue_messages_ready?labelSelector=${encodeURIComponent(`queue=bench-q${i % settings.series}`)}`;
  const trivialPath = () => `${ns}/queue_messages_ready?labelSelector=${encodeURIComponent("queue=bench-q0")}`;

  const fauxqs = await spawnChild("fauxqs", { series: settings.series });
  if (settings.groups.has("http")) await httpScenarios(settings, fauxqs, seriesPath, trivialPath);
  if (settings.groups.has("https")) await httpsScenarios(settings, fauxqs, seriesPath, trivialPath);
  if (settings.groups.has("worker")) await workerScenarios(settings, fauxqs, seriesPath, trivialPath);
  await fauxqs.stop();
  report(settings, startedAt, load0);
}

/**
 * Baseline A, its calibration variants, the bridge cached, the bridge with
 * misses coalesced: all servers started, checked, then measured in
 * interleaved rounds ({@link interleaved}).
 */
async function httpScenarios(settings: Settings, fauxqs: Child, seriesPath: (i: number) => string, trivialPath: () => string): Promise<void> {
  const children: Child[] = [];
  const start = async (role: string, options: Record<string, unknown>) => {
    const child = await spawnChild(role, options);
    children.push(child);
    return child;
  };
  try {
    const planned: Planned[] = [];
    const a = await start("hono-http", {});
    await expectValue("baseline A", await get(`${a.url}${trivialPath()}`), "1");
    planned.push({ name: BASELINE_A, target: { url: a.url, path: trivialPath }, servers: [node(a, "hono")] });
    // Calibration (P1): the trivial route plus a fixed busy loop per request. What these reach against A shows what any
    // server doing that many µs of work more than the trivial route per request can reach on this machine and load generator.
    for (const spinMicros of settings.spins) {
      const spin = await start("hono-http", { spinMicros });
      await expectValue(`baseline A + ${spinMicros} µs`, await get(`${spin.url}${trivialPath()}`), "1");
      planned.push({ name: spinName(spinMicros), target: { url: spin.url, path: trivialPath }, servers: [node(spin, "hono")], baseline: BASELINE_A });
    }
    const cached = await start("bridge", { endpoint: fauxqs.url, cacheTTLSeconds: 600, series: settings.series });
    for (let i = 0; i < Math.min(settings.series, settings.connections); i++) {
      await expectValue(`bridge bench-q${i}`, await get(`${cached.url}${seriesPath(i)}`), String(i + 1));
    }
    planned.push({ name: "bridge, cached", target: { url: cached.url, path: seriesPath }, servers: [node(cached)], baseline: BASELINE_A });
    const misses = await start("bridge", { endpoint: fauxqs.url, cacheTTLSeconds: 0, series: settings.series });
    await expectValue("bridge bench-q0", await get(`${misses.url}${seriesPath(0)}`), "1");
    planned.push({ name: "bridge, misses coalesced", target: { url: misses.url, path: () => seriesPath(0) }, servers: [node(misses), node(fauxqs)], baseline: BASELINE_A });
    await interleaved(planned, settings);
  } finally {
    for (const child of children) await child.stop();
  }
}

/** Baseline B, the proxy in front of the bridge, the proxy's cache hit. */
async function httpsScenarios(settings: Settings, fauxqs: Child, seriesPath: (i: number) => string, trivialPath: () => string): Promise<void> {
  const client = await frontProxyClient();
  const target = (url: string, path: (i: number) => string) => ({ url, path, headers: client.headers, tls: client.tls });
  {
    const b = await spawnChild("hono-https", await servingPems());
    await expectValue("baseline B", await client.get(`${b.url}${trivialPath()}`, b.info["caPem"]!), "1");
    await scenario(BASELINE_B, target(b.url, trivialPath), [node(b, "hono")], settings);
    await b.stop();
  }
  for (const [name, ttl] of [
    ["proxy → bridge (cached)", 0],
    ["proxy cache hit", 30],
  ] as const) {
    const stack = await startProxyStack("process", fauxqs, client, {
      proxyCacheTTLSeconds: ttl,
      series: settings.series,
      warm: Math.min(settings.series, settings.connections),
      seriesPath,
    });
    await scenario(name, target(stack.proxy.url, seriesPath), stack.measured, settings, BASELINE_B);
    await stack.stop();
  }
}

/** The trivial Worker and the bridge's Worker in workerd. */
async function workerScenarios(settings: Settings, fauxqs: Child, seriesPath: (i: number) => string, trivialPath: () => string): Promise<void> {
  {
    const { buildWorker, startWorker } = await import("../helpers/worker.ts");
    const { Miniflare } = await import("miniflare");
    let ticks = 100;
    try {
      ticks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      // the usual Linux value
    }
    const workerd = (label: string): Measured => {
      const pids = childPidsNamed("workerd");
      if (pids.length !== 1) throw new Error(`expected one workerd child process, found ${pids.length}`);
      return { label, stats: async () => procStats(pids[0]!, ticks) };
    };
    process.stderr.write("· building the Worker with wrangler …\n");
    const build = await buildWorker();
    {
      const body = JSON.stringify({
        kind: "ExternalMetricValueList",
        apiVersion: "external.metrics.k8s.io/v1beta1",
        metadata: {},
        items: [{ metricName: "queue_messages_ready", metricLabels: { queue: "bench-q0" }, timestamp: "2026-01-01T00:00:00Z", value: "1" }],
      });
      const mf = new Miniflare({
        host: "127.0.0.1",
        port: 0,
        cf: false,
        modules: true,
        script: `const body = ${JSON.stringify(body)};\nexport default { fetch() { return new Response(body, { headers: { "content-type": "application/json" } }); } };`,
        compatibilityDate: build.compatibilityDate,
        handleRuntimeStdio: () => {},
      });
      const url = (await mf.ready).origin;
      await expectValue("trivial Worker", await get(`${url}${trivialPath()}`), "1");
      await scenario("W: trivial Worker (workerd)", { url, path: trivialPath }, [workerd("workerd")], settings);
      await mf.dispose();
    }
    {
      const worker = await startWorker(bridgeConfigText(fauxqs.url, 600, settings.series), {}, { build });
      for (let i = 0; i < Math.min(settings.series, settings.connections); i++) {
        await expectValue(`Worker bench-q${i}`, await get(`${worker.url}${seriesPath(i)}`), String(i + 1));
      }
      await scenario("bridge Worker, cached", { url: worker.url, path: seriesPath }, [workerd("workerd")], settings, "W: trivial Worker (workerd)");
      await worker.close();
    }
  }
}

/** Print the tables; exit code 1 when a run failed. */
function report(settings: Settings, startedAt: Date, load0: number[]): void {
  const byName = new Map(rows.map((r) => [r.name, r]));
  const out: string[] = [];
  out.push(
    `HTTP overhead on loopback — ${startedAt.toISOString()}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim() ?? "?"}), Node ${process.version}, ` +
      `load average at start ${load0.map((l) => l.toFixed(2)).join(" ")}`,
  );
  out.push(`autocannon: ${settings.connections} connections, no pipelining, ${settings.duration} s measured after ${settings.warmup} s warm-up; ${settings.series} series`);
  out.push("");
  out.push(
    table(
      ["scenario", "req/s", "p50 ms", "p99 ms", "req/s vs base", "p99 vs base", "server CPU µs/req", "Δ CPU µs/req", "loadgen CPU"],
      rows.map((r) => {
        const base = r.baseline ? byName.get(r.baseline) : undefined;
        const cpu = cpuOf(r);
        return [
          r.name,
          fmtInt(r.run.rps),
          fmtMs(r.run.p50),
          fmtMs(r.run.p99),
          base ? `${(r.run.rps / base.run.rps).toFixed(2)}×` : "baseline",
          base ? `${(r.run.p99 / base.run.p99).toFixed(2)}×` : "",
          r.cpuPerRequest.length > 1 ? `${cpu.toFixed(0)} (${r.cpuPerRequest.map((c) => `${c.label} ${c.micros.toFixed(0)}`).join(" + ")})` : cpu.toFixed(0),
          base ? `+${(cpu - cpuOf(base)).toFixed(0)}` : "",
          `${Math.round(r.run.loadgenCpu * 100)}%`,
        ];
      }),
    ),
  );
  out.push("");
  out.push("Δ CPU µs/req: server CPU per request minus the baseline's (the bridge's or proxy's own cost); fauxqs CPU is not counted.");
  out.push("loadgen CPU: autocannon's share of one core; near 100% the generator, not the server, limits req/s.");
  out.push("");
  const counter = (r: Row | undefined, key: string) => r?.counters[key] ?? 0;
  const miss = byName.get("bridge, misses coalesced");
  if (miss) {
    const calls = counter(miss, "bridge.GetQueueAttributesCommand");
    const urls = counter(miss, "bridge.GetQueueUrlCommand");
    out.push(
      `Coalescing (cacheTTLSeconds 0, ${settings.connections} connections reading one series): ${fmtInt(miss.run.requests)} requests → ` +
        `${fmtInt(calls)} GetQueueAttributes + ${fmtInt(urls)} GetQueueUrl calls: ${(miss.run.requests / Math.max(1, calls + urls)).toFixed(1)} requests per backend call.`,
    );
  }
  for (const name of ["proxy → bridge (cached)", "proxy cache hit"]) {
    const r = byName.get(name);
    if (!r) continue;
    out.push(
      `${name}: ${fmtInt(r.run.requests)} requests; forwarded to the bridge ${fmtInt(counter(r, "proxy.proxyLoads"))}, ` +
        `proxy cache hits ${fmtInt(counter(r, "proxy.proxyCacheHits"))}, coalesced ${fmtInt(counter(r, "proxy.proxyCoalesced"))}; ` +
        `SubjectAccessReviews sent ${fmtInt(counter(r, "proxy.subjectAccessReviews"))} (SAR cache hits ${fmtInt(counter(r, "proxy.sarCacheHits"))}); ` +
        `client certificates verified ${fmtInt(counter(r, "proxy.certificateVerifications"))}; connections the bridge accepted ${fmtInt(counter(r, "bridge.connections"))}; bridge SDK calls ${fmtInt(counter(r, "bridge.GetQueueAttributesCommand"))}.`,
    );
  }
  out.push("");
  out.push(
    table(
      ["memory (MB)", "process", "RSS ready", "RSS after", "peak RSS", "live heap ready", "live heap after"],
      rows.flatMap((r) => r.memory.map((m) => [r.name, m.label, fmtMB(m.ready), fmtMB(m.after), fmtMB(m.peak), fmtMB(m.heapReady), fmtMB(m.heapAfter)])),
    ),
  );
  const own = process.memoryUsage().rss;
  out.push("");
  out.push(
    `RSS "after" is read right after the run, before a full GC; live heap = V8 heap after a full GC (a leak shows as growth there). ` +
      `fauxqs runs for the whole benchmark. Load generator (this process, Miniflare included) RSS at the end: ${fmtMB(own)} MB.`,
  );
  console.log(out.join("\n"));
  writeBenchReport(settings, startedAt, load0);
  if (failures > 0) {
    console.error(`\n${failures} scenario(s) saw errors, timeouts or non-2xx answers: the figures above are not valid.`);
    process.exitCode = 1;
  }
}

await runBenchmark(main);

/** A goal row comparing scenario `name` with its baseline (req/s higher, p99 lower); undefined when either was not run. */
function ratioRow(id: string, title: string, name: string, goal: { rps?: number; p99?: number }): BenchRow | undefined {
  const r = rows.find((x) => x.name === name);
  const base = r?.baseline ? rows.find((x) => x.name === r.baseline) : undefined;
  if (!r || !base) return undefined;
  const rps = r.run.rps / base.run.rps;
  const p99 = r.run.p99 / base.run.p99;
  const hasGoal = goal.rps !== undefined || goal.p99 !== undefined;
  return {
    id,
    title,
    goal: hasGoal ? [goal.rps !== undefined ? `≥ ${goal.rps}× req/s` : "", goal.p99 !== undefined ? `p99 ≤ ${goal.p99}×` : ""].filter(Boolean).join(", ") : "—",
    measured: `${rps.toFixed(2)}× req/s (${fmtInt(r.run.rps)}); p99 ${p99.toFixed(2)}× (${fmtMs(r.run.p99)} ms); server CPU ${cpuOf(r).toFixed(0)} µs/req`,
    baseline: `${base.name}: ${fmtInt(base.run.rps)} req/s, p99 ${fmtMs(base.run.p99)} ms, ${cpuOf(base).toFixed(0)} µs/req`,
    met: hasGoal ? (goal.rps === undefined || rps >= goal.rps) && (goal.p99 === undefined || p99 <= goal.p99) : null,
    ratios: { rps_vs_baseline: rps, p99_vs_baseline: p99 },
    better: { rps_vs_baseline: "higher", p99_vs_baseline: "lower" },
  };
}

/** Server CPU µs per request of a row, fauxqs left out. */
function cpuOf(r: Row): number {
  return r.cpuPerRequest.filter((c) => c.label !== "fauxqs").reduce((s, c) => s + c.micros, 0);
}

/** The report for `npm run bench` (test/bench/report.ts): row P1, informational proxy rows, figure p1-throughput. */
function writeBenchReport(settings: Settings, startedAt: Date, load0: number[]): void {
  const goalRows = [
    ratioRow("P1", "cache-hit read, Node bridge vs trivial Hono route of the same JSON (HTTP, closed loop)", "bridge, cached", { rps: 0.5, p99: 2 }),
    ...settings.spins.map((us) => ratioRow(`P1-calibration-${us}us`, `calibration: trivial Hono plus ${us} µs of busy JavaScript per request vs trivial Hono (HTTP)`, spinName(us), {})),
    ratioRow("http-bridge-miss", "bridge, misses coalesced vs trivial Hono (HTTP)", "bridge, misses coalesced", {}),
    ratioRow("http-proxy-forward", "proxy → bridge (cached) vs trivial Hono over HTTPS", "proxy → bridge (cached)", {}),
    ratioRow("http-proxy-hit", "proxy cache hit vs trivial Hono over HTTPS", "proxy cache hit", {}),
    ratioRow("http-worker", "bridge Worker (workerd), cached vs trivial Worker", "bridge Worker, cached", {}),
  ].filter((r): r is BenchRow => r !== undefined);
  writeReport({
    ...reportTiming("http-overhead", startedAt),
    rows: goalRows,
    figures: [
      {
        id: "p1-throughput",
        title: `Throughput, closed loop (${settings.connections} connections)`,
        kind: "bar",
        xLabel: "scenario",
        yLabel: "req/s",
        series: [{ name: "req/s", points: rows.map((r) => [r.name, Math.round(r.run.rps)] as [string, number]) }],
      },
      {
        id: "p1-cpu",
        title: "Server CPU per request",
        kind: "bar",
        xLabel: "scenario",
        yLabel: "µs of CPU per request",
        series: [{ name: "server CPU", points: rows.map((r) => [r.name, Math.round(cpuOf(r))] as [string, number]) }],
      },
    ],
    notes: [
      `autocannon, ${settings.connections} connections, no pipelining, ${settings.duration} s measured after ${settings.warmup} s warm-up; ${settings.series} series; ` +
        `${os.cpus().length} CPUs, Node ${process.version}, load average at start ${load0.map((l) => l.toFixed(2)).join(" ")}.`,
      ...rows.map(
        (r) =>
          `${r.name}: ${fmtInt(r.run.rps)} req/s, p50 ${fmtMs(r.run.p50)} ms, p99 ${fmtMs(r.run.p99)} ms, server CPU ${cpuOf(r).toFixed(0)} µs/req, ` +
          `peak RSS ${r.memory.map((m) => `${m.label} ${fmtMB(m.peak)} MB`).join(", ")}`,
      ),
    ],
  });
}
