/**
 * `npm run bench:memory` (issue 11, P5): resident memory of the proxy holding
 * 10,000 cached series, run AS THE IMAGE RUNS IT — the esbuild bundle of
 * `npm run build:proxy` (`infra/proxy/build.ts`, built here into a temporary
 * directory) started with the Node flags of the image's ENTRYPOINT and the
 * environment of its final stage (`imageNodeFlags()`, `imageEnv()`, read
 * from infra/Dockerfile) — against the fake
 * Kubernetes API (test/fakes/kube-apiserver.ts, in this process) and a cached
 * bridge (`functions/node.ts` on fauxqs, signed; test/bench/servers.ts).
 * Baseline in the same run: bare Node + a trivial Hono route over HTTPS with
 * the proxy's TLS setup (test/bench/trivial-https-main.ts, bundled by
 * esbuild too and run with the same Node flags and environment) serving the
 * same reads; as the floor for holding the answers, the same server
 * keeping one answer per distinct read in a Map (trivial.ts `hold`); and
 * that floor with the libraries the proxy is built on loaded and used once
 * (test/bench/trivial-libraries.ts: yaml, zod, re2js, prom-client with its
 * default metrics, commander — none of the proxy's own code or state): what
 * the project's rule that these come from well-kept libraries costs before
 * the proxy's first line runs.
 *
 * Method: 10,000 reads, each a distinct label selector (`queue in (a, b, c)`
 * over 3-subsets of 50 queues, so each is its own cache entry and each
 * bridge answer carries 3 items), 32 at a time (`closedLoop` of
 * test/bench/openloop.ts: every read completes however loaded the machine
 * is) by the HPA controller's identity through the front-proxy certificate; proxy cache `ttlSeconds: 30, maxEntries: 10000`.
 * Then a settling pause (5 s, the entries still cached). RSS is sampled from
 * `/proc/<pid>/status` (VmRSS) every 250 ms; peak = max(samples, VmHWM).
 * After the pause the proxy's `/metrics` must show the 10,000 values entries
 * held (`emb_proxy_cache_entries{cache="values"}`; the note also gives the
 * authorization caches' entries and counted bytes), and 500 of the series
 * are read again: all must be proxy cache hits when the run took less than
 * the 30 s TTL (on a loaded machine it can take longer, and the earliest
 * entries are then held but expired). MB here = 2^20 bytes.
 *
 * Prints figures and writes report row `P5` and figure `p5-rss` when
 * `BENCH_REPORT_DIR` is set; asserts nothing, but exits 1 when a read failed.
 * `BENCH_QUICK=1`: 2,000 series, 1 s pause (smoke test).
 * `BENCH_HEAP_SNAPSHOT=1`: also print the proxy's V8 heap figures from its
 * `/metrics` and write a V8 heap snapshot of it after the pause
 * (`--heapsnapshot-signal`, into the working directory) for Chrome DevTools.
 * Linux only (`/proc`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { BANNER } from "../../infra/build-common.ts";
import { buildProxy, imageEnv, imageNodeFlags } from "../../infra/proxy/build.ts";
import { closedLoop, type ClosedLoopResult } from "./openloop.ts";
import { writeReport } from "./report.ts";
import { expectValue, frontProxyClient, HPA_USER, reportTiming, runBenchmark, NAMESPACE, procMemory, servingPems, spawnChild, V1, type FrontProxyClient } from "./servers.ts";

const QUICK = process.env["BENCH_QUICK"] === "1";
const SERIES = QUICK ? 2_000 : 10_000;
const QUEUES = 50;
/** Reads in flight at once (closed loop: every read completes however loaded the machine is). */
const CONCURRENCY = 32;
const SETTLE_SECONDS = QUICK ? 1 : 5;
const SAMPLE_MS = 250;
const VERIFY = 500;
const GOAL_MB = 100;
/** The proxy's cache TTL here (ProxyConfig `cache.ttlSeconds`, its maximum). */
const PROXY_TTL_SECONDS = 30;
const MB = 1024 * 1024;

/** The i-th 3-subset of the queues 0…QUEUES-1 in lexicographic order (i < C(QUEUES, 3) = 19,600). */
function subset(i: number): [number, number, number] {
  let n = 0;
  for (let a = 0; a < QUEUES; a++)
    for (let b = a + 1; b < QUEUES; b++)
      for (let c = b + 1; c < QUEUES; c++) if (n++ === i) return [a, b, c];
  throw new Error(`subset ${i} out of range`);
}

/** Path of read i: a distinct selector naming three queues. */
const SUBSETS = Array.from({ length: SERIES }, (_, i) => subset(i));
const seriesPath = (i: number) =>
  `${V1}/namespaces/${NAMESPACE}/queue_messages_ready?labelSelector=${encodeURIComponent(`queue in (${SUBSETS[i % SERIES]!.map((q) => `bench-q${q}`).join(", ")})`)}`;

/** What one measured server did. */
interface Measurement {
  label: string;
  /** [seconds since the reads began, RSS bytes] */
  samples: [number, number][];
  atRest: number;
  peak: number;
  settled: number;
  /** of `settled`: anonymous pages (V8 heap, malloc) and file-backed pages (the node binary and libraries), bytes */
  settledAnon: number;
  settledFile: number;
  reads: ClosedLoopResult;
  note?: string;
}

/** Sample `pid`'s RSS while the reads run and during the pause. */
async function measure(label: string, pid: number, url: string, caPem: string, client: FrontProxyClient): Promise<Measurement> {
  const atRest = procMemory(pid).rss;
  const samples: [number, number][] = [];
  const t0 = performance.now();
  const sample = () => samples.push([Number(((performance.now() - t0) / 1000).toFixed(2)), procMemory(pid).rss]);
  sample();
  const timer = setInterval(sample, SAMPLE_MS);
  try {
    const reads = await closedLoop({ url, path: seriesPath, headers: client.headers, tls: client.tls, ca: caPem }, { requests: SERIES, concurrency: CONCURRENCY });
    await new Promise((r) => setTimeout(r, SETTLE_SECONDS * 1000));
    sample();
    const m = procMemory(pid);
    return { label, samples, atRest, peak: Math.max(m.peak, ...samples.map((s) => s[1])), settled: m.rss, settledAnon: m.anon, settledFile: m.file, reads };
  } finally {
    clearInterval(timer);
  }
}

/**
 * Bundle test/bench/trivial-https-main.ts with esbuild (as the proxy's image
 * bundle is made), run it with `flags` and a generated serving certificate,
 * call `use` with its pid, URL and CA, then kill it.
 *
 * @throws Error when it does not print its URL within 30 s
 */
async function withTrivialBundle<T>(dir: string, flags: string[], use: (pid: number, url: string, caPem: string) => Promise<T>, hold = false, libraries = false): Promise<T> {
  const { build } = await import("esbuild");
  const outdir = join(dir, "trivial");
  const file = join(outdir, "trivial-https.mjs");
  // splitting: the libraries (trivial-libraries.ts, a dynamic import) are a chunk of their own, read only with TRIVIAL_LIBRARIES=1.
  await build({
    entryPoints: { "trivial-https": fileURLToPath(new URL("./trivial-https-main.ts", import.meta.url)) },
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node24",
    outdir,
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
    // as the proxy's build: CommonJS dependencies (prom-client) call require() for Node built-ins
    banner: { js: BANNER },
  });
  const pems = await servingPems();
  const child = spawn(process.execPath, [...flags, file], {
    env: { ...process.env, ...imageEnv(), TRIVIAL_CERT_PEM: pems.certPem, TRIVIAL_KEY_PEM: pems.keyPem, TRIVIAL_HOLD: hold ? "1" : "0", TRIVIAL_LIBRARIES: libraries ? "1" : "0" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the trivial HTTPS bundle did not start within 30 s")), 30_000);
      child.stdout!.setEncoding("utf8").once("data", (line: string) => {
        clearTimeout(timer);
        resolve(line.trim());
      });
      child.once("exit", (code) => reject(new Error(`the trivial HTTPS bundle exited with ${code}`)));
    });
    return await use(child.pid!, url, pems.caPem);
  } finally {
    child.kill("SIGKILL");
  }
}

/**
 * The proxy's values-cache counters from its /metrics
 * (`…cache_requests_total{result=…}`), and the entries and estimated bytes
 * each bounded cache holds (`…cache_entries{cache=…}` and `…cache_bytes{cache=…}`
 * as `entries:<cache>` and `bytes:<cache>`).
 */
async function cacheCounters(client: FrontProxyClient, url: string, caPem: string): Promise<Record<string, number>> {
  const res = await client.get(`${url}/metrics`, caPem);
  if (process.env["BENCH_HEAP_SNAPSHOT"]) process.stderr.write(res.text.split("\n").filter((l) => /heap|resident|external|nodejs_gc/.test(l) && !l.startsWith("#")).join("\n") + "\n");
  const out: Record<string, number> = {};
  for (const m of res.text.matchAll(/^\w*cache_requests_total\{result="(\w+)"\} ([0-9.e+]+)$/gm)) out[m[1]!] = Number(m[2]);
  for (const m of res.text.matchAll(/^\w*cache_(entries|bytes)\{cache="([\w-]+)"\} ([0-9.e+]+)$/gm)) out[`${m[1]}:${m[2]}`] = Number(m[3]);
  return out;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const flags = imageNodeFlags();
  const client = await frontProxyClient();
  const dir = mkdtempSync(join(tmpdir(), "emb-bench-memory-"));
  const failures: string[] = [];
  let proxyProc: ChildProcess | undefined;
  const { startFakeKubeApiServer } = await import("../fakes/kube-apiserver.ts");
  const { writeFakeKubeconfig, eventually } = await import("../proxy/proxy.harness.ts");
  const fake = await startFakeKubeApiServer();
  try {
    // Baseline: bare Node + Hono over HTTPS, bundled and run with the same Node flags, the same reads.
    process.stderr.write(`· baseline: bare Node + Hono (HTTPS), ${SERIES} reads …\n`);
    const base = await withTrivialBundle(dir, flags, (pid, url, caPem) => measure("bare Node + Hono (HTTPS)", pid, url, caPem, client));
    process.stderr.write(`· floor: bare Node + Hono (HTTPS) holding one answer per read, ${SERIES} reads …\n`);
    const floor = await withTrivialBundle(dir, flags, (pid, url, caPem) => measure("bare Node + Hono (HTTPS) holding the answers", pid, url, caPem, client), true);
    process.stderr.write(`· floor with the proxy's libraries: the same, yaml, zod, re2js, prom-client and commander loaded and used, ${SERIES} reads …\n`);
    const libraries = await withTrivialBundle(dir, flags, (pid, url, caPem) => measure("the same with the proxy's libraries loaded", pid, url, caPem, client), true, true);

    process.stderr.write("· building the proxy bundle …\n");
    const bundle = await buildProxy(join(dir, "dist"));
    const fauxqs = await spawnChild("fauxqs", { series: QUEUES });
    const bridge = await spawnChild("bridge", { endpoint: fauxqs.url, cacheTTLSeconds: 600, series: QUEUES, signingKeys: client.keys });
    fake.setConfigMap("kube-system", "extension-apiserver-authentication", client.authData);
    // RBAC: the HPA controller may list queue_messages_ready; GET /metrics is allowed here so the run can read the proxy's cache counters.
    fake.authorize = (spec) => ({
      allowed:
        spec.user === HPA_USER &&
        ((spec.resourceAttributes?.resource === "queue_messages_ready" && spec.resourceAttributes.verb === "list") ||
          (spec.nonResourceAttributes?.path === "/metrics" && spec.nonResourceAttributes.verb === "get")),
    });
    const config = join(dir, "proxy.yaml");
    writeFileSync(
      config,
      `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  sqs: { url: "${bridge.url}", timeoutSeconds: 3 }
routes:
  - { metric: "queue_.*", backend: sqs }
cache: { ttlSeconds: ${PROXY_TTL_SECONDS}, maxEntries: ${SERIES} }
`,
    );
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    process.stderr.write(`· proxy (bundle, node ${flags.join(" ")}), ${SERIES} reads …\n`);
    let stderr = "";
    proxyProc = spawn(
      process.execPath,
      [...flags, ...(process.env["BENCH_HEAP_SNAPSHOT"] ? ["--heapsnapshot-signal=SIGUSR2"] : []), bundle.file, "--config", config, "--kubeconfig", writeFakeKubeconfig(join(dir, "kubeconfig.yaml"), fake), "--bind-address", "127.0.0.1", "--secure-port", String(port), "--shutdown-delay-seconds", "0"],
      { env: { ...process.env, ...imageEnv(), BRIDGE_SIGNING_KEYS: client.keys, POD_NAMESPACE: "emb" }, stdio: ["ignore", "ignore", "pipe"] },
    );
    proxyProc.stderr!.on("data", (chunk: Buffer) => void (stderr = (stderr + chunk.toString("utf8")).slice(-4000)));
    await eventually(() => fake.apiServices.has("v1beta1.external.metrics.k8s.io") || proxyProc!.exitCode !== null, 60_000, "the proxy registering its APIService");
    if (proxyProc.exitCode !== null) throw new Error(`the proxy exited with ${proxyProc.exitCode}: ${stderr}`);
    const api = fake.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string } };
    const caPem = Buffer.from(api.spec.caBundle, "base64").toString("utf8");
    const url = `https://127.0.0.1:${port}`;
    await expectValue("proxy, first series", await client.get(`${url}${seriesPath(0)}`, caPem), "1");
    const readsStarted = performance.now();
    const proxy = await measure("proxy (image bundle)", proxyProc.pid!, url, caPem, client);
    const before = await cacheCounters(client, url, caPem);
    const held = before["entries:values"] ?? 0;
    const step = Math.floor(SERIES / VERIFY);
    const verify = await closedLoop({ url, path: (i) => seriesPath(i * step), headers: client.headers, tls: client.tls, ca: caPem }, { requests: VERIFY, concurrency: CONCURRENCY });
    const after = await cacheCounters(client, url, caPem);
    const hits = (after["hit"] ?? 0) - (before["hit"] ?? 0);
    // An entry read more than the TTL (30 s) ago is still held but no longer answered: on a loaded machine the reads can take that long.
    const withinTtl = (performance.now() - readsStarted) / 1000 < PROXY_TTL_SECONDS;
    const sizes = ["values", "authorization", "request-memo"].map((c) => `${c} ${before[`entries:${c}`] ?? "?"} entries / ${mb(before[`bytes:${c}`] ?? 0)} MB counted`).join(", ");
    proxy.note = `cache: ${after["miss"] ?? 0} misses, ${after["coalesced"] ?? 0} coalesced over the run; held after the pause: ${sizes}; ${VERIFY} series re-read after the pause: ${hits} cache hits${withinTtl ? "" : ` (the run outlasted the ${PROXY_TTL_SECONDS} s TTL: the earliest entries had expired)`}`;
    if (held < SERIES) failures.push(`after the pause the proxy holds ${held} values entries, not ${SERIES}`);
    if (verify.ok !== VERIFY || (withinTtl && hits !== VERIFY)) failures.push(`re-reading ${VERIFY} series after the pause: ${hits} cache hits, ${verify.ok} ok (expected ${VERIFY})`);
    if (process.env["BENCH_HEAP_SNAPSHOT"]) {
      // A V8 heap snapshot of the proxy holding the series (Node's --heapsnapshot-signal), written into its working directory.
      proxyProc.kill("SIGUSR2");
      await new Promise((r) => setTimeout(r, 15_000));
    }
    proxyProc.kill("SIGTERM");
    await bridge.stop();
    await fauxqs.stop();

    for (const m of [base, floor, libraries, proxy]) {
      const r = m.reads;
      if (r.ok !== r.requests) failures.push(`${m.label}: ${r.ok} ok of ${r.requests}, ${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx`);
    }
    report(startedAt, flags, base, floor, libraries, proxy, failures);
  } finally {
    proxyProc?.kill("SIGKILL");
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const mb = (bytes: number) => (bytes / MB).toFixed(0);

function report(startedAt: Date, flags: string[], base: Measurement, floor: Measurement, libraries: Measurement, proxy: Measurement, failures: string[]): void {
  const lines = [
    `Proxy memory with ${SERIES.toLocaleString("en-US")} cached series — ${startedAt.toISOString()}, Node ${process.version} ${flags.join(" ")} (MB = 2^20 bytes)`,
    "",
    "process | RSS at rest | peak RSS | settled RSS | of which anonymous | of which file-backed (node binary, libraries) | reads ok | p99 ms",
    ...[base, floor, libraries, proxy].map((m) => `${m.label} | ${mb(m.atRest)} | ${mb(m.peak)} | ${mb(m.settled)} | ${mb(m.settledAnon)} | ${mb(m.settledFile)} | ${m.reads.ok}/${m.reads.requests} | ${m.reads.p99.toFixed(1)}`),
    ...(proxy.note ? ["", proxy.note] : []),
  ];
  console.log(lines.join("\n"));
  writeReport({
    ...reportTiming("memory", startedAt),
    rows: [
      {
        id: "P5",
        title: `proxy memory with ${SERIES.toLocaleString("en-US")} cached series (image bundle and flags)`,
        goal: `≤ ${GOAL_MB} MB RSS`,
        measured: `peak ${mb(proxy.peak)} MB, settled ${mb(proxy.settled)} MB, at rest ${mb(proxy.atRest)} MB`,
        baseline: `bare Node + Hono HTTPS, same reads: peak ${mb(base.peak)} MB, settled ${mb(base.settled)} MB, at rest ${mb(base.atRest)} MB; the same holding one answer per read (the floor for holding ${SERIES.toLocaleString("en-US")} answers): peak ${mb(floor.peak)} MB; that with the proxy's libraries (yaml, zod, re2js, prom-client, commander) loaded and used: peak ${mb(libraries.peak)} MB, at rest ${mb(libraries.atRest)} MB; the node binary and libraries alone: ${mb(base.settledFile)} MB`,
        met: failures.length === 0 && proxy.peak <= GOAL_MB * MB,
        ratios: { peak_vs_baseline: proxy.peak / base.peak, settled_vs_baseline: proxy.settled / base.settled, peak_vs_libraries_floor: proxy.peak / libraries.peak },
        better: { peak_vs_baseline: "lower", settled_vs_baseline: "lower", peak_vs_libraries_floor: "lower" },
      },
    ],
    figures: [
      {
        id: "p5-rss",
        title: `RSS over a run: ${SERIES.toLocaleString("en-US")} distinct reads (${CONCURRENCY} at a time), then ${SETTLE_SECONDS} s idle`,
        kind: "line",
        xLabel: "seconds since the first read",
        yLabel: "RSS (MB)",
        series: [base, floor, libraries, proxy].map((m) => ({ name: m.label, points: m.samples.map(([t, rss]) => [t, Number((rss / MB).toFixed(1))] as [number, number]) })),
      },
    ],
    notes: [
      `${SERIES} reads, each a distinct selector (3 of ${QUEUES} queues), ${CONCURRENCY} at a time over keep-alive connections (closed loop); RSS sampled every ${SAMPLE_MS} ms; settled = ${SETTLE_SECONDS} s after the last read. Node flags of the image: ${flags.join(" ") || "(none)"}.`,
      ...[base, floor, libraries, proxy].map((m) => `${m.label}: at rest ${mb(m.atRest)} MB, peak ${mb(m.peak)} MB, settled ${mb(m.settled)} MB (${mb(m.settledAnon)} anonymous, ${mb(m.settledFile)} file-backed: the node binary and libraries); reads took ${m.reads.seconds.toFixed(1)} s (p50 ${m.reads.p50.toFixed(1)} ms, p99 ${m.reads.p99.toFixed(1)} ms).`),
      ...(proxy.note ? [proxy.note] : []),
      ...failures.map((f) => `FAILED: ${f}`),
    ],
  });
  if (failures.length > 0) {
    console.error(`\n${failures.join("\n")}\nThe figures above are not valid.`);
    process.exitCode = 1;
  }
}

await runBenchmark(main);
