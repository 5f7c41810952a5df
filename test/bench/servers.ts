/**
 * The server side of the HTTP benchmarks (`test/bench/http-overhead.ts`,
 * `test/bench/latency.ts`, `test/bench/memory.ts`): every server runs in its
 * own forked Node process (`test/bench/serve-role.ts`, the bridge's process
 * model: one Node process per server) started by {@link spawnChild} and
 * talking to the benchmark over IPC (start, stats, stop).
 *
 * Roles ({@link startRole}): `fauxqs` (the SQS emulator with `series`
 * queues `bench-q<i>` holding i + 1 messages), `hono-http` / `hono-https`
 * (test/bench/trivial.ts; the HTTPS one with PEMs from {@link servingPems}), `bridge` (`functions/node.ts` on fauxqs with a
 * realistic policy set) and `proxy` (`shared/proxy` through
 * `test/proxy/proxy.harness.ts`, with the fake Kubernetes API); the
 * `custom-*` roles of `bench:custom` are in `test/bench/custom-roles.ts`. Everything listens
 * on 127.0.0.1 only.
 */
import { fork, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { serve, type ServerType } from "@hono/node-server";
import { closeServer } from "../helpers/http.ts";
import { startTrivialHttps, trivialApp, V1 } from "./trivial.ts";

const ROLE_MAIN = fileURLToPath(new URL("./serve-role.ts", import.meta.url));
export { V1 };
export const NAMESPACE = "team-bench";
export const HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";

/** A positive number from the environment, else `fallback`. @throws Error when set but not a positive number ≤ max */
export function envNumber(name: string, fallback: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || n > max) throw new Error(`${name}=${raw}: expected a number in (0, ${max}]`);
  return n;
}

// ---------------------------------------------------------------------------
// Server side: each role runs in a forked process and talks to the parent over IPC.

/** What a running role reports when ready. */
export interface Started {
  url: string;
  /** role-specific facts for the parent (PEMs, …) */
  info?: Record<string, string>;
  stats?: () => Record<string, number>;
  close(): Promise<void>;
}

function listenUrl(server: { address(): AddressInfo | string | null }, scheme: string): string {
  return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The bridge's config: `series` SQS queues readable in the benchmark namespace, a realistic policy set. */
export function bridgeConfigText(endpoint: string, cacheTTLSeconds: number, series: number): string {
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

/**
 * Start one role in this process. Options: `fauxqs` {series}; `bridge`
 * {endpoint, cacheTTLSeconds, series, signingKeys?}; `proxy` {bridgeUrl |
 * backend (a ProxyConfig backend as YAML flow text), cacheTTLSeconds,
 * authData}.
 *
 * @throws Error on an unknown role or when the server cannot start
 */
export async function startRole(role: string, options: Record<string, unknown>): Promise<Started> {
  switch (role) {
    case "fauxqs": {
      const { startEmulator } = await import("../helpers/emulator.ts");
      const emulator = await startEmulator();
      const series = options["series"] as number;
      for (let i = 0; i < series; i++) await emulator.add(`bench-q${i}`, i + 1);
      return { url: emulator.endpoint, close: () => emulator.stop() };
    }
    case "hono-http": {
      const app = trivialApp((options["spinMicros"] as number | undefined) ?? 0);
      const server = await new Promise<ServerType>((resolve) => {
        const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
      });
      return { url: listenUrl(server, "http"), close: () => new Promise((r) => server.close(() => r())) };
    }
    case "hono-https": {
      // PEMs from the parent (servingPems), so this process loads nothing of the proxy: bare Node + Hono.
      const { server, url } = await startTrivialHttps(options["certPem"] as string, options["keyPem"] as string);
      return { url, info: { caPem: options["caPem"] as string }, close: () => closeServer(server) };
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
      const { startHarness, KEYS } = await import("../proxy/proxy.harness.ts");
      const { jsonLogger } = await import("../../shared/proxy/log.ts");
      const proxyConfig = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  sqs: ${(options["backend"] as string | undefined) ?? `{ url: "${options["bridgeUrl"] as string}", timeoutSeconds: 3 }`}
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
      // The roles of `bench:custom` (custom.metrics.k8s.io Pods reads).
      if (role.startsWith("custom-")) return (await import("./custom-roles.ts")).startCustomRole(role, options);
      throw new Error(`unknown role ${role}`);
  }
}

/** Child process main: start the role on request, answer stats, stop. */
export async function childMain(role: string): Promise<void> {
  let started: Started | undefined;
  let cpu = process.cpuUsage();
  let statsCpu = 0;
  process.on("message", (message: { id: number; op: string; options?: Record<string, unknown>; collect?: boolean }) => {
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
      // Live heap, when asked for: what is left after a full collection (the
      // child runs with --expose-gc); the collection's own CPU time is left
      // out of the figures. Only when asked: V8's forced collection throws
      // away the optimized code of the request path, which is then compiled
      // again ~10,000 requests later, a 50–100 ms stall of the machine
      // (`--trace-opt`: parserOnIncoming back to Maglev after the collection,
      // TurboFan 11 s later at 1,000 req/s), so never just before a measurement.
      let liveHeap: number | undefined;
      if (message.collect === true) {
        const beforeGc = process.cpuUsage();
        (globalThis as { gc?: () => void }).gc?.();
        const gcCpu = process.cpuUsage(beforeGc);
        statsCpu += gcCpu.user + gcCpu.system;
        liveHeap = process.memoryUsage().heapUsed;
      }
      const used = process.cpuUsage(cpu);
      const usage = process.resourceUsage();
      reply({
        cpuMicros: used.user + used.system - statsCpu,
        rss,
        maxRss: usage.maxRSS * 1024,
        ...(liveHeap === undefined ? {} : { liveHeap }),
        majorFaults: usage.majorPageFault,
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
export interface ProcessStats {
  cpuMicros: number;
  rss: number;
  maxRss: number;
  /** V8 heap in use after a full GC, bytes (Node processes asked with `{ collect: true }` only) */
  liveHeap?: number;
  /** major page faults since the process started: pages it waited to have read from disk (Node processes only) */
  majorFaults?: number;
  counters: Record<string, number>;
}

/**
 * Major page faults of the whole machine since boot (`pgmajfault` of
 * `/proc/vmstat`, proc(5)): pages some process waited to have read from
 * disk. NaN where there is no `/proc/vmstat`.
 */
export function machineMajorFaults(): number {
  try {
    return Number(/^pgmajfault (\d+)$/m.exec(readFileSync("/proc/vmstat", "utf8"))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

/** A forked server process. */
export interface Child {
  role: string;
  pid: number;
  url: string;
  info: Record<string, string>;
  /**
   * The process's figures; `collect: true` runs a full collection first to
   * report `liveHeap`, which discards V8's optimized code: not before a
   * measurement (see `childMain`).
   */
  stats(options?: StatsOptions): Promise<ProcessStats>;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();

/** SIGKILL every server process still running (also done when this process exits). */
export function killChildren(): void {
  for (const c of children) c.kill("SIGKILL");
}
process.once("exit", killChildren);

/**
 * Fork `test/bench/serve-role.ts` as `role` (with `--expose-gc` and
 * `nodeFlags`), start it with `options`; resolves when it listens.
 *
 * @throws Error when the process exits or the role fails to start
 */
export async function spawnChild(role: string, options: Record<string, unknown>, nodeFlags: readonly string[] = []): Promise<Child> {
  const profileDir = process.env["BENCH_CPU_PROF"];
  const execArgv = ["--expose-gc", ...nodeFlags, ...(profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [])];
  const proc = fork(ROLE_MAIN, [role], { stdio: ["ignore", "ignore", "pipe", "ipc"], execArgv });
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
    stats: (o) => ask<ProcessStats>("stats", { collect: o?.collect === true }),
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
export interface Measured {
  label: string;
  stats(options?: StatsOptions): Promise<ProcessStats>;
}

/** What {@link Child.stats} is asked for. */
export interface StatsOptions {
  /** run a full collection first and report `liveHeap` (discards optimized code) */
  collect?: boolean;
}

/** A forked server as a measured process. */
export function node(child: Child, label = child.role): Measured {
  return { label, stats: (o) => child.stats(o) };
}


/** Check one answer before measuring: 200 and the expected value. @throws Error otherwise */
export async function expectValue(what: string, response: { status: number; text: string }, value: string): Promise<void> {
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

export async function get(url: string, init?: RequestInit): Promise<{ status: number; text: string }> {
  const r = await fetch(url, init);
  return { status: r.status, text: await r.text() };
}

/** The front-proxy client of the HTTPS scenarios: what kube-apiserver presents to an aggregated API server. */
export interface FrontProxyClient {
  /** the front-proxy client certificate and key (PEM) */
  tls: { cert: string; key: string };
  /** `X-Remote-*` headers naming the HPA controller */
  headers: Record<string, string>;
  /** the ConfigMap data kube-apiserver publishes for this PKI (the proxy role's `authData`) */
  authData: Record<string, string>;
  /** signing keys shared by the proxy and a bridge behind it */
  keys: string;
  /** one GET on a fresh connection trusting `caPem`, as the front proxy */
  get(url: string, caPem: string): Promise<{ status: number; text: string }>;
}

/** Generate the PKI and the front-proxy client (test/proxy/proxy.harness.ts). */
export async function frontProxyClient(): Promise<FrontProxyClient> {
  const harness = await import("../proxy/proxy.harness.ts");
  const pki = await harness.createPki();
  const headers = { "X-Remote-User": HPA_USER, "X-Remote-Group": "system:serviceaccounts" };
  return {
    tls: { cert: pki.frontProxy.certPem, key: pki.frontProxy.keyPem },
    headers,
    authData: harness.authenticationData(pki),
    keys: harness.KEYS,
    get: async (url, caPem) => {
      const r = await harness.call(url, caPem, { cert: pki.frontProxy, headers });
      return { status: r.status, text: r.text };
    },
  };
}

/** How the proxy reaches the bridge: a separate signed bridge process, or the bridge inside the proxy process. */
export type ProxyBackendMode = "process" | "inProcess";

/** A running proxy (and its bridge process, when separate). */
export interface ProxyStack {
  proxy: Child;
  /** absent in `inProcess` mode */
  bridge?: Child;
  /** the measured processes: proxy, then bridge */
  measured: Measured[];
  stop(): Promise<void>;
}

/**
 * Start the proxy in front of a cached bridge reading `fauxqs`, and check
 * that series 0…warm-1 answer their queue's depth through it (and, with a
 * separate bridge, that the bridge refuses unsigned reads).
 *
 * `inProcess` uses the ProxyConfig backend `{ type: inProcess, bridgeConfig:
 * <file> }` (the bridge served inside the proxy process: no second hop, no
 * signing).
 *
 * @throws Error when a process does not start or an answer is not the expected value
 */
export async function startProxyStack(
  mode: ProxyBackendMode,
  fauxqs: Child,
  client: FrontProxyClient,
  options: { proxyCacheTTLSeconds: number; series: number; warm: number; seriesPath(i: number): string },
): Promise<ProxyStack> {
  const { mkdtempSync, writeFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  let bridge: Child | undefined;
  let backend: string;
  if (mode === "process") {
    bridge = await spawnChild("bridge", { endpoint: fauxqs.url, cacheTTLSeconds: 600, series: options.series, signingKeys: client.keys });
    backend = `{ url: "${bridge.url}", timeoutSeconds: 3 }`;
  } else {
    const file = join(mkdtempSync(join(tmpdir(), "emb-bench-")), "bridge.yaml");
    writeFileSync(file, bridgeConfigText(fauxqs.url, 600, options.series));
    backend = `{ type: inProcess, bridgeConfig: "${file}" }`;
  }
  const flags = (process.env["BENCH_PROXY_NODE_FLAGS"] ?? "").split(/\s+/).filter(Boolean);
  const proxy = await spawnChild("proxy", { backend, cacheTTLSeconds: options.proxyCacheTTLSeconds, authData: client.authData }, flags).catch(async (err: Error) => {
    await bridge?.stop();
    throw err;
  });
  const stop = async () => {
    await proxy.stop();
    await bridge?.stop();
  };
  try {
    for (let i = 0; i < options.warm; i++) {
      await expectValue(`proxy (${mode}) bench-q${i}`, await client.get(`${proxy.url}${options.seriesPath(i)}`, proxy.info["caPem"]!), String(i + 1));
    }
    if (bridge) {
      const unsigned = await get(`${bridge.url}${options.seriesPath(0)}`);
      if (unsigned.status !== 401) throw new Error(`the bridge behind the proxy must refuse unsigned reads, got ${unsigned.status}`);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { proxy, ...(bridge ? { bridge } : {}), measured: [node(proxy), ...(bridge ? [node(bridge)] : [])], stop };
}

/**
 * A serving certificate as the proxy generates one (shared/proxy/tls/tls.ts
 * `loadServingMaterial` with `kind: generate`), made in THIS process: the
 * `hono-https` role's options.
 */
export async function servingPems(): Promise<{ certPem: string; keyPem: string; caPem: string }> {
  const { loadServingMaterial } = await import("../../shared/proxy/tls/tls.ts");
  const serving = await loadServingMaterial({ kind: "generate" }, { namespace: "external-metrics-bridge", name: "bench-baseline" }, { log: () => {} });
  return { certPem: serving.certPem, keyPem: serving.keyPem, caPem: serving.caPem ?? "" };
}

/**
 * Resident memory of process `pid` from `/proc/<pid>/status` (Linux, proc(5)):
 * current (`VmRSS`) and peak (`VmHWM`), and the current RSS split into
 * anonymous pages (`RssAnon`: the V8 heap, malloc, buffers) and file-backed
 * pages (`RssFile`: the node binary's and shared libraries' mapped code and
 * data, the same for any Node program), bytes.
 *
 * @throws Error when the process does not exist (ENOENT)
 */
export function procMemory(pid: number): { rss: number; peak: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM"), anon: kb("RssAnon"), file: kb("RssFile") };
}

/**
 * Run a benchmark's `main` as the script's top level: an exception is
 * printed and sets exit code 1; every server process is killed at the end.
 */
export async function runBenchmark(main: () => Promise<void>): Promise<void> {
  try {
    await main();
  } catch (err) {
    console.error((err as Error).stack ?? err);
    process.exitCode = 1;
  } finally {
    killChildren();
  }
}

/** The first fields of a BenchReport (test/bench/report.ts): name, start time, seconds since `startedAt`. */
export function reportTiming(bench: string, startedAt: Date): { bench: string; startedAt: string; durationSeconds: number } {
  return { bench, startedAt: startedAt.toISOString(), durationSeconds: (Date.now() - startedAt.getTime()) / 1000 };
}
