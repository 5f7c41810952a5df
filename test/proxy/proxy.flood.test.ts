/**
 * Floods the real proxy PROCESS (the bundle the container image runs,
 * `npm run build:proxy` of `functions/proxy/main.ts`, started as
 * test/proxy/proxy.cli.test.ts starts the sources: a kubeconfig file pointing at the fake
 * Kubernetes API, a generated serving certificate, self-registration) over
 * real TLS, unauthenticated, with bounded concurrency, and samples the
 * process's resident memory from /proc/<pid>/status:
 *
 * 1. 2,000 requests with distinct ~60 KB label selectors (issue 10 item 3:
 *    they took RSS from 181 to 688 MiB) — refused before any work;
 * 2. 2,000 requests with distinct legal-size (~3 KB) selectors from
 *    anonymous — authenticated as anonymous and denied by the
 *    SubjectAccessReview (whose cache must be bounded by bytes).
 *
 * After each flood the proxy still answers /healthz and a legitimate read,
 * and its peak RSS (VmHWM) stays under the chart's 256 MiB memory limit. The
 * measured peaks are printed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProxy, imageEnv, imageNodeFlags } from "../../infra/proxy/build.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { authenticationData, call, createPki, eventually, KEYS, proxyConfigText, startEchoBackend, V1, writeFakeKubeconfig, type EchoBackend, type Pki } from "./proxy.harness.ts";
import { freePort } from "../helpers/ports.ts";

/** The chart's memory limit for the proxy (infra/helm/external-metrics-bridge/values.yaml). */
const CHART_MEMORY_LIMIT_BYTES = 256 * 1024 * 1024;
const REQUESTS = 2_000;
const CONCURRENCY = 20;
const NS = `${V1}/namespaces/default`;

let dir: string;
let fake: FakeKubeApiServer;
let pki: Pki;
let backend: EchoBackend;
let child: ChildProcess | undefined;
let port: number;
let ca: string;
const lines: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "emb-proxy-flood-"));
  [fake, pki, backend] = await Promise.all([startFakeKubeApiServer(), createPki(), startEchoBackend(["queue_messages_ready"])]);
  fake.setConfigMap("kube-system", "extension-apiserver-authentication", authenticationData(pki));
  const kubeconfig = writeFakeKubeconfig(join(dir, "kubeconfig.yaml"), fake);
  const config = join(dir, "proxy.yaml");
  writeFileSync(config, proxyConfigText({ echo: backend.url }, [[".*", "echo"]]));
  port = await freePort();
  // The artifact the container image runs (infra/Dockerfile): the esbuild bundle, not the TypeScript sources.
  const { file: main } = await buildProxy(join(dir, "dist"));
  child = spawn(
    process.execPath,
    // …with the image's Node flags (V8 old space capped) and environment, as its ENTRYPOINT runs it.
    [...imageNodeFlags(), main, "--config", config, "--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--secure-port", String(port), "--shutdown-delay-seconds", "0"],
    { env: { ...process.env, ...imageEnv(), BRIDGE_SIGNING_KEYS: KEYS, POD_NAMESPACE: "emb" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  for (const stream of [child.stdout!, child.stderr!]) stream.on("data", (chunk: Buffer) => lines.push(...chunk.toString("utf8").split("\n").filter(Boolean)));
  await eventually(() => fake.apiServices.has("v1beta1.external.metrics.k8s.io"), 30_000, "APIService registered");
  const api = fake.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string } };
  ca = Buffer.from(api.spec.caBundle, "base64").toString("utf8");
}, 90_000);

afterAll(async () => {
  child?.kill("SIGKILL");
  await backend?.close();
  await fake?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Resident memory of the proxy process, bytes: current (VmRSS) and peak (VmHWM). */
function memory(): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${child!.pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

/** V8 heap in use of the proxy (its own /metrics, read as the aggregator): tells retained memory from garbage not yet collected. */
async function heapUsed(): Promise<string> {
  const res = await call(`https://127.0.0.1:${port}/metrics`, ca, {
    cert: pki.frontProxy,
    headers: { "X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters" },
  });
  const m = /^\w*nodejs_heap_size_used_bytes(?:\{[^}]*\})? ([0-9.e+]+)/m.exec(res.text);
  return m ? mib(Number(m[1])) : `unknown (/metrics answered ${res.status})`;
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** One unauthenticated GET on a fresh TLS connection: its status, or the client-side error code (a refused oversized request may be cut). */
function anonymous(path: string): Promise<string> {
  return new Promise((resolve) => {
    const req = https.request(`https://127.0.0.1:${port}${path}`, { ca, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(String(res.statusCode)));
      res.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
    });
    req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
    req.end();
  });
}

/** Send `n` requests, `concurrency` at a time; count outcomes and sample RSS as it goes. */
async function flood(n: number, pathOf: (i: number) => string): Promise<{ outcomes: Record<string, number>; peakSampled: number }> {
  const outcomes: Record<string, number> = {};
  let next = 0;
  let peakSampled = 0;
  const sampler = setInterval(() => {
    peakSampled = Math.max(peakSampled, memory().rss);
  }, 50);
  try {
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < n) {
          const outcome = await anonymous(pathOf(next++));
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        }
      }),
    );
  } finally {
    clearInterval(sampler);
  }
  return { outcomes, peakSampled: Math.max(peakSampled, memory().rss) };
}

/** The proxy is up: /healthz answers and a legitimate read (the aggregator, front-proxy) returns a value. */
async function stillServes(): Promise<void> {
  expect(child!.exitCode).toBeNull();
  expect((await call(`https://127.0.0.1:${port}/healthz`, ca)).status).toBe(200);
  const res = await call(`https://127.0.0.1:${port}${NS}/queue_messages_ready?labelSelector=queue%3Djobs`, ca, {
    cert: pki.frontProxy,
    headers: { "X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters" },
  });
  expect(res.status, res.text).toBe(200);
  expect(res.json().items[0].value).toBe("42");
}

/** A distinct selector of about `bytes` characters (a set-based requirement: only `a-z0-9,()` and spaces). */
function selector(i: number, bytes: number): string {
  const head = `k${i} in (`;
  const values: string[] = [];
  let length = head.length + 1;
  for (let j = 0; length < bytes; j++) {
    const v = `v${i}x${j}`;
    values.push(v);
    length += v.length + 1;
  }
  return `${head}${values.join(",")})`;
}

describe("an unauthenticated flood of the real proxy process over TLS", () => {
  it("2,000 distinct ~60 KB selectors: refused before any work, the proxy stays up under the chart's memory limit", async () => {
    await stillServes();
    const start = memory();
    const sample = selector(0, 60_000);
    expect(sample.length).toBeGreaterThanOrEqual(60_000);
    const { outcomes, peakSampled } = await flood(REQUESTS, (i) => `${NS}/m?labelSelector=${encodeURIComponent(selector(i, 60_000))}`);
    const end = memory();
    console.log(
      `flood of ${REQUESTS} × ~60 KB selectors: outcomes ${JSON.stringify(outcomes)}; RSS ${mib(start.rss)} → ${mib(end.rss)}, ` +
        `peak sampled ${mib(peakSampled)}, VmHWM ${mib(end.peak)} (limit ${mib(CHART_MEMORY_LIMIT_BYTES)}); V8 heap used ${await heapUsed()}`,
    );
    // Refused by Node (431: the request line is over maxHeaderSize) or by the app (400) — never authorized, never forwarded.
    expect(Object.keys(outcomes).every((o) => o === "431" || o === "400" || o === "ECONNRESET" || o === "EPIPE")).toBe(true);
    expect(fake.reviews.subjectAccessReviews.filter((r) => r.user === "system:anonymous")).toHaveLength(0);
    expect(end.peak).toBeLessThan(CHART_MEMORY_LIMIT_BYTES);
    await stillServes();
  }, 300_000);

  it("2,000 distinct legal-size (~3 KB) selectors from anonymous: denied, RSS stays bounded", async () => {
    const start = memory();
    const reviewsBefore = fake.reviews.subjectAccessReviews.length;
    const { outcomes, peakSampled } = await flood(REQUESTS, (i) => `${NS}/m?labelSelector=${encodeURIComponent(selector(100_000 + i, 3_000))}`);
    const end = memory();
    console.log(
      `flood of ${REQUESTS} × ~3 KB selectors from anonymous: outcomes ${JSON.stringify(outcomes)}; ` +
        `SubjectAccessReviews ${fake.reviews.subjectAccessReviews.length - reviewsBefore}; RSS ${mib(start.rss)} → ${mib(end.rss)}, ` +
        `peak sampled ${mib(peakSampled)}, VmHWM ${mib(end.peak)} (limit ${mib(CHART_MEMORY_LIMIT_BYTES)}); V8 heap used ${await heapUsed()}`,
    );
    expect(outcomes["403"]).toBe(REQUESTS); // the fake denies everything by default
    expect(end.peak).toBeLessThan(CHART_MEMORY_LIMIT_BYTES);
    await stillServes();
    expect(lines.some((l) => l.includes('"msg":"unhandled error"'))).toBe(false);
  }, 300_000);
});

