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
 * - bridge, misses coalesced: cacheTTLSeconds 0 and every connection reads
 *   the same series, so each read needs a backend value and concurrent reads
 *   share one GetQueueAttributes call; the SDK commands sent are counted
 *   (middleware on the provider's SQSClient);
 * - B: the trivial Hono route over HTTPS with the proxy's TLS setup
 *   (generated serving certificate, `requestCert`, TLS ≥ 1.2), the client
 *   presenting the front-proxy certificate on every connection;
 * - proxy → bridge: `shared/proxy` (via `test/proxy.harness.ts`, fake
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
 * children running with `--expose-gc` and the collection's CPU left out).
 * Linux is needed only for workerd's figures (`/proc`). Figures measured, and how to read them:
 * `docs/benchmarks.md`.
 */
import type Autocannon from "autocannon";
import { fork, execFileSync, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { serve, getRequestListener, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { closeServer } from "../helpers/http.ts";

const SELF = fileURLToPath(import.meta.url);
const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const NAMESPACE = "team-bench";
const HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";

/** A positive number from the environment, else `fallback`. @throws Error when set but not a positive number ≤ max */
function envNumber(name: string, fallback: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || n > max) throw new Error(`${name}=${raw}: expected a number in (0, ${max}]`);
  return n;
}

// ---------------------------------------------------------------------------
// Server side: each role runs in a forked process and talks to the parent over IPC.

/** What a running role reports when ready. */
interface Started {
  url: string;
  /** role-specific facts for the parent (PEMs, …) */
  info?: Record<string, string>;
  stats?: () => Record<string, number>;
  close(): Promise<void>;
}

/** The ExternalMetricValueList the trivial baselines answer: the bridge's answer's shape and size. */
function trivialApp(): Hono {
  const app = new Hono();
  const body = {
    kind: "ExternalMetricValueList",
    apiVersion: "external.metrics.k8s.io/v1beta1",
    metadata: {},
    items: [{ metricName: "queue_messages_ready", metricLabels: { queue: "bench-q0" }, timestamp: "2026-01-01T00:00:00Z", value: "1" }],
  };
  app.get(`${V1}/namespaces/:namespace/:metric`, (c) => c.json(body));
  return app;
}

function listenUrl(server: { address(): AddressInfo | string | null }, scheme: string): string {
  return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The bridge's config: `series` SQS queues readable in the benchmark namespace, a realistic policy set. */
function bridgeConfigText(endpoint: string, cacheTTLSeconds: number, series: number): string {
  const queues = Array.from({ length: series }, (_, i) => `bench-q${i}`);
  const docs = [
    `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: ${cacheTTLSeconds} }
providers:
  sqs:
    type: aws-sqs
    region: us-east-1
    endpoint: ${endpoint}
    credentials: { source: static, accessKeyId: bench, secretAccessKey: bench }
    timeoutSeconds: 3
    maxAttempts: 1
metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
  - { name: queue_messages_delayed, provider: sqs, query: { queueLabel: queue, attribute: ApproximateNumberOfMessagesDelayed } }
  - { name: queue_messages_inflight, provider: sqs, query: { queueLabel: queue, attribute: ApproximateNumberOfMessagesNotVisible } }
  - { name: queue_messages_backlog, provider: sqs, query: { queueLabel: queue, attribute: [ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible] } }
policy:
  defaultAction: Deny
  localIdentity: { user: "${HPA_USER}", groups: [system:serviceaccounts, system:serviceaccounts:kube-system, system:authenticated] }`,
    `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: no-anonymous-reads }
spec:
  subjects: { groups: [system:unauthenticated] }
  rules: []
  defaultAction: Deny`,
  ];
  for (let t = 0; t < 40; t++) {
    docs.push(`apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: queues, namespace: team-${t} }
spec:
  rules:
    - metric: "queue_messages_(ready|delayed|inflight)"
      selector: { matchExpressions: [{ key: queue, operator: In, values: [team-${t}-jobs, team-${t}-mail, team-${t}-orders] }] }
    - { metric: ".*", deny: true }
  defaultAction: Deny`);
  }
  docs.push(`apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: queues, namespace: ${NAMESPACE} }
spec:
  rules:
    - metric: "queue_messages_(ready|delayed)"
      selector: { matchExpressions: [{ key: queue, operator: In, values: [${queues.join(", ")}] }] }
    - { metric: ".*", deny: true }
  defaultAction: Deny`);
  return docs.join("\n---\n");
}

/** Start one role. */
async function startRole(role: string, options: Record<string, unknown>): Promise<Started> {
  switch (role) {
    case "fauxqs": {
      const { startEmulator } = await import("../helpers/emulator.ts");
      const emulator = await startEmulator();
      const series = options["series"] as number;
      for (let i = 0; i < series; i++) await emulator.add(`bench-q${i}`, i + 1);
      return { url: emulator.endpoint, close: () => emulator.stop() };
    }
    case "hono-http": {
      const app = trivialApp();
      const server = await new Promise<ServerType>((resolve) => {
        const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
      });
      return { url: listenUrl(server, "http"), close: () => new Promise((r) => server.close(() => r())) };
    }
    case "hono-https": {
      // The proxy's TLS setup (shared/proxy/server.ts): generated serving certificate, requestCert.
      const { loadServingMaterial } = await import("../../shared/proxy/tls.ts");
      const serving = await loadServingMaterial({ kind: "generate" }, { namespace: "external-metrics-bridge", name: "bench-baseline" }, { log: () => {} });
      const listener = getRequestListener(trivialApp().fetch);
      const server = https.createServer(
        { cert: serving.certPem, key: serving.keyPem, requestCert: true, rejectUnauthorized: false, minVersion: "TLSv1.2", maxHeaderSize: 64 * 1024 },
        (req, res) => void listener(req, res),
      );
      server.keepAliveTimeout = 65_000;
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      return {
        url: listenUrl(server, "https"),
        info: { caPem: serving.caPem ?? "" },
        close: () => closeServer(server),
      };
    }
    case "bridge": {
      const { startNodeServer } = await import("../../functions/node.ts");
      const { loadConfig } = await import("../../shared/config/config.ts");
      const text = bridgeConfigText(options["endpoint"] as string, options["cacheTTLSeconds"] as number, options["series"] as number);
      const env: Record<string, string | undefined> = { ...process.env };
      if (typeof options["signingKeys"] === "string") env["BRIDGE_SIGNING_KEYS"] = options["signingKeys"];
      else env["BRIDGE_INSECURE_ALLOW_UNSIGNED"] = "true"; // the unsigned baseline, on purpose
      // No `log`: the entry point's default, JSON lines on stdout (the parent points stdout at /dev/null).
      const server = await startNodeServer({ config: loadConfig(text, "bench.yaml").config, port: 0, env });
      const commands: Record<string, number> = { connections: 0 };
      server.server.on("connection", () => void commands["connections"]!++);
      for (const provider of server.bridge.providers.values()) {
        const client = (provider as unknown as { client: import("@aws-sdk/client-sqs").SQSClient }).client;
        client.middlewareStack.add(
          (next, context) => async (args) => {
            const name = String((context as { commandName?: string }).commandName);
            commands[name] = (commands[name] ?? 0) + 1;
            return next(args);
          },
          { step: "initialize", name: "benchCountCommands" },
        );
      }
      return { url: server.url, stats: () => ({ ...commands }), close: () => server.close() };
    }
    case "proxy": {
      const { startHarness, KEYS } = await import("../proxy.harness.ts");
      const { jsonLogger } = await import("../../shared/proxy/log.ts");
      const proxyConfig = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  sqs: { url: "${options["bridgeUrl"] as string}", timeoutSeconds: 3 }
routes:
  - { metric: "queue_.*", backend: sqs }
cache: { ttlSeconds: ${options["cacheTTLSeconds"] as number} }
discovery: { ttlSeconds: 10 }
`;
      const h = await startHarness({ proxyConfig, authData: options["authData"] as Record<string, string>, keys: KEYS, extra: { log: jsonLogger() } });
      // RBAC as a cluster would have it: the HPA controller may list queue_messages_ready (a read without a name is a list).
      h.fake.authorize = (spec) => ({
        allowed: spec.user === HPA_USER && spec.resourceAttributes?.resource === "queue_messages_ready" && spec.resourceAttributes.verb === "list",
      });
      return {
        url: h.proxy.url,
        info: { caPem: h.serving.caPem ?? "" },
        stats: () => ({
          subjectAccessReviews: h.fake.reviews.subjectAccessReviews.length,
          sarCacheHits: h.proxy.authorizer.stats.cacheHits,
          certificateVerifications: h.proxy.authenticator.stats.certificateVerifications,
          proxyCacheHits: h.proxy.forwarder.cacheStats.hits,
          proxyCoalesced: h.proxy.forwarder.cacheStats.coalesced,
          proxyLoads: h.proxy.forwarder.cacheStats.loads,
        }),
        close: () => h.close(),
      };
    }
    default:
      throw new Error(`unknown role ${role}`);
  }
}

/** Child process main: start the role on request, answer stats, stop. */
async function childMain(role: string): Promise<void> {
  let started: Started | undefined;
  let cpu = process.cpuUsage();
  let statsCpu = 0;
  process.on("message", (message: { id: number; op: string; options?: Record<string, unknown> }) => {
    const reply = (value: unknown) => process.send!({ id: message.id, ok: true, value });
    const fail = (err: unknown) => process.send!({ id: message.id, ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    if (message.op === "start") {
      startRole(role, message.options ?? {}).then((s) => {
        started = s;
        cpu = process.cpuUsage();
        reply({ url: s.url, info: s.info ?? {}, pid: process.pid });
      }, fail);
    } else if (message.op === "stats") {
      const rss = process.memoryUsage().rss;
      // Live heap: what is left after a full collection (the child runs with --expose-gc);
      // the collection's own CPU time is left out of the figures.
      const beforeGc = process.cpuUsage();
      (globalThis as { gc?: () => void }).gc?.();
      const gcCpu = process.cpuUsage(beforeGc);
      statsCpu += gcCpu.user + gcCpu.system;
      const used = process.cpuUsage(cpu);
      reply({
        cpuMicros: used.user + used.system - statsCpu,
        rss,
        maxRss: process.resourceUsage().maxRSS * 1024,
        liveHeap: process.memoryUsage().heapUsed,
        counters: started?.stats?.() ?? {},
      });
    } else if (message.op === "stop") {
      (started ? started.close() : Promise.resolve()).then(
        () => process.send!({ id: message.id, ok: true, value: null }, () => process.exit(0)),
        fail,
      );
    }
  });
  process.send!({ id: -1, ok: true, value: "alive" });
}

// ---------------------------------------------------------------------------
// Parent side: the load generator and the report.

/** Per-process figures a child reports. */
interface ProcessStats {
  cpuMicros: number;
  rss: number;
  maxRss: number;
  /** V8 heap in use after a full GC, bytes (Node processes only) */
  liveHeap?: number;
  counters: Record<string, number>;
}

/** A forked server process. */
interface Child {
  role: string;
  pid: number;
  url: string;
  info: Record<string, string>;
  stats(): Promise<ProcessStats>;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();

/** Fork this script as `role`, start it with `options`; resolves when it listens. */
async function spawnChild(role: string, options: Record<string, unknown>): Promise<Child> {
  const profileDir = process.env["BENCH_CPU_PROF"];
  const execArgv = ["--expose-gc", ...(profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [])];
  const proc = fork(SELF, ["--serve", role], { stdio: ["ignore", "ignore", "pipe", "ipc"], execArgv });
  children.add(proc);
  let stderr = "";
  proc.stderr!.setEncoding("utf8");
  proc.stderr!.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  let nextId = 1;
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let alive!: () => void;
  const isAlive = new Promise<void>((r) => (alive = r));
  proc.on("message", (m: { id: number; ok: boolean; value?: unknown; error?: string }) => {
    if (m.id === -1) return alive();
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.ok) p?.resolve(m.value);
    else p?.reject(new Error(`${role}: ${m.error}`));
  });
  proc.on("exit", (code) => {
    children.delete(proc);
    for (const p of pending.values()) p.reject(new Error(`${role} exited with ${code}${stderr ? `:\n${stderr}` : ""}`));
    pending.clear();
  });
  const ask = <T>(op: string, extra: Record<string, unknown> = {}) =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      proc.send({ id, op, ...extra });
    });
  await isAlive;
  const ready = await ask<{ url: string; info: Record<string, string>; pid: number }>("start", { options });
  return {
    role,
    pid: ready.pid,
    url: ready.url,
    info: ready.info,
    stats: () => ask<ProcessStats>("stats"),
    stop: async () => {
      if (proc.exitCode !== null || !proc.connected) return;
      const exited = new Promise<void>((r) => proc.once("exit", () => r()));
      await ask("stop");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
      if (proc.exitCode === null) proc.kill("SIGKILL");
    },
  };
}

/** A server being measured, Node child or workerd. */
interface Measured {
  label: string;
  stats(): Promise<ProcessStats>;
}

/** A forked server as a measured process. */
function node(child: Child, label = child.role): Measured {
  return { label, stats: () => child.stats() };
}

/** CPU (µs) and memory of a non-Node process from /proc (workerd). */
function procStats(pid: number, ticksPerSecond: number): ProcessStats {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15 of proc(5))
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
  return { cpuMicros: (ticks / ticksPerSecond) * 1e6, rss: kb("VmRSS"), maxRss: kb("VmHWM"), counters: {} };
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
  const ready = await Promise.all(servers.map((s) => s.stats()));
  await load(target, settings.connections, settings.warmup);
  const before = await Promise.all(servers.map((s) => s.stats()));
  const run = await load(target, settings.connections, settings.duration);
  const after = await Promise.all(servers.map((s) => s.stats()));
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

/** Check one answer before measuring: 200 and the expected value. @throws Error otherwise */
async function expectValue(what: string, response: { status: number; text: string }, value: string): Promise<void> {
  let got: unknown;
  try {
    got = (JSON.parse(response.text) as { items?: { value?: string }[] }).items?.[0]?.value;
  } catch {
    got = undefined;
  }
  if (response.status !== 200 || got !== value) {
    throw new Error(`${what}: expected 200 with value ${value}, got ${response.status} ${response.text.slice(0, 300)}`);
  }
}

async function get(url: string, init?: RequestInit): Promise<{ status: number; text: string }> {
  const r = await fetch(url, init);
  return { status: r.status, text: await r.text() };
}

interface Settings {
  duration: number;
  warmup: number;
  connections: number;
  series: number;
  groups: Set<string>;
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
    duration: envNumber("BENCH_DURATION", 5, 600),
    warmup: envNumber("BENCH_WARMUP", 1, 60),
    connections: Math.round(envNumber("BENCH_CONNECTIONS", 50, 1000)),
    series: Math.round(envNumber("BENCH_SERIES", 50, 1000)),
    groups: new Set((process.env["BENCH_GROUPS"] ?? "http,https,worker").split(",").map((g) => g.trim())),
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

/** Baseline A, the bridge cached, the bridge with misses coalesced. */
async function httpScenarios(settings: Settings, fauxqs: Child, seriesPath: (i: number) => string, trivialPath: () => string): Promise<void> {
  {
    const a = await spawnChild("hono-http", {});
    await expectValue("baseline A", await get(`${a.url}${trivialPath()}`), "1");
    await scenario("A: trivial Hono (HTTP)", { url: a.url, path: trivialPath }, [node(a, "hono")], settings);
    await a.stop();
  }
  {
    const bridge = await spawnChild("bridge", { endpoint: fauxqs.url, cacheTTLSeconds: 600, series: settings.series });
    for (let i = 0; i < Math.min(settings.series, settings.connections); i++) {
      await expectValue(`bridge bench-q${i}`, await get(`${bridge.url}${seriesPath(i)}`), String(i + 1));
    }
    await scenario("bridge, cached", { url: bridge.url, path: seriesPath }, [node(bridge)], settings, "A: trivial Hono (HTTP)");
    await bridge.stop();
  }
  {
    const bridge = await spawnChild("bridge", { endpoint: fauxqs.url, cacheTTLSeconds: 0, series: settings.series });
    await expectValue("bridge bench-q0", await get(`${bridge.url}${seriesPath(0)}`), "1");
    await scenario("bridge, misses coalesced", { url: bridge.url, path: () => seriesPath(0) }, [node(bridge), node(fauxqs)], settings, "A: trivial Hono (HTTP)");
    await bridge.stop();
  }
}

/** Baseline B, the proxy in front of the bridge, the proxy's cache hit. */
async function httpsScenarios(settings: Settings, fauxqs: Child, seriesPath: (i: number) => string, trivialPath: () => string): Promise<void> {
  const harness = await import("../proxy.harness.ts");
  const pki = await harness.createPki();
  const clientTls = { cert: pki.frontProxy.certPem, key: pki.frontProxy.keyPem };
  const frontProxyHeaders = { "X-Remote-User": HPA_USER, "X-Remote-Group": "system:serviceaccounts" };
  const viaCall = async (url: string, caPem: string) => {
    const r = await harness.call(url, caPem, { cert: pki.frontProxy, headers: frontProxyHeaders });
    return { status: r.status, text: r.text };
  };
  {
    const b = await spawnChild("hono-https", {});
    await expectValue("baseline B", await viaCall(`${b.url}${trivialPath()}`, b.info["caPem"]!), "1");
    await scenario("B: trivial Hono (HTTPS, client cert)", { url: b.url, path: trivialPath, headers: frontProxyHeaders, tls: clientTls }, [node(b, "hono")], settings);
    await b.stop();
  }
  for (const [name, ttl] of [
    ["proxy → bridge (cached)", 0],
    ["proxy cache hit", 30],
  ] as const) {
    const bridge = await spawnChild("bridge", { endpoint: fauxqs.url, cacheTTLSeconds: 600, series: settings.series, signingKeys: harness.KEYS });
    const proxy = await spawnChild("proxy", { bridgeUrl: bridge.url, cacheTTLSeconds: ttl, authData: harness.authenticationData(pki) });
    for (let i = 0; i < Math.min(settings.series, settings.connections); i++) {
      await expectValue(`proxy bench-q${i}`, await viaCall(`${proxy.url}${seriesPath(i)}`, proxy.info["caPem"]!), String(i + 1));
    }
    const unsigned = await get(`${bridge.url}${seriesPath(0)}`);
    if (unsigned.status !== 401) throw new Error(`the bridge behind the proxy must refuse unsigned reads, got ${unsigned.status}`);
    await scenario(
      name,
      { url: proxy.url, path: seriesPath, headers: frontProxyHeaders, tls: clientTls },
      [node(proxy), node(bridge)],
      settings,
      "B: trivial Hono (HTTPS, client cert)",
    );
    await proxy.stop();
    await bridge.stop();
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
  const cpuTotal = (r: Row) => r.cpuPerRequest.filter((c) => c.label !== "fauxqs").reduce((s, c) => s + c.micros, 0);
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
        const cpu = cpuTotal(r);
        return [
          r.name,
          fmtInt(r.run.rps),
          fmtMs(r.run.p50),
          fmtMs(r.run.p99),
          base ? `${(r.run.rps / base.run.rps).toFixed(2)}×` : "baseline",
          base ? `${(r.run.p99 / base.run.p99).toFixed(2)}×` : "",
          r.cpuPerRequest.length > 1 ? `${cpu.toFixed(0)} (${r.cpuPerRequest.map((c) => `${c.label} ${c.micros.toFixed(0)}`).join(" + ")})` : cpu.toFixed(0),
          base ? `+${(cpu - cpuTotal(base)).toFixed(0)}` : "",
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
  if (failures > 0) {
    console.error(`\n${failures} scenario(s) saw errors, timeouts or non-2xx answers: the figures above are not valid.`);
    process.exitCode = 1;
  }
}

if (process.argv[2] === "--serve") {
  await childMain(process.argv[3] ?? "");
} else {
  const killChildren = () => {
    for (const c of children) c.kill("SIGKILL");
  };
  process.once("exit", killChildren);
  try {
    await main();
  } catch (err) {
    console.error((err as Error).stack ?? err);
    process.exitCode = 1;
  } finally {
    killChildren();
  }
}
