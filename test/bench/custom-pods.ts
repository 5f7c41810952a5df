/**
 * `npm run bench:custom` (issue 26, P7): a custom.metrics.k8s.io Pods
 * metric over 1,000 pods, the HPA controller's read of a `type: Pods`
 * metric, through the proxy and the bridge at a steady rate (open loop,
 * `test/bench/openloop.ts`: request i due at t0 + i / rate, latency from the
 * scheduled send time), against a trivial HTTPS server answering a body of
 * the same size in the same run. Goal: p99 ≤ 2× the trivial server's p99.
 *
 * Processes (test/bench/servers.ts `spawnChild`, roles in
 * test/bench/custom-roles.ts), all on 127.0.0.1:
 *
 * - the proxy (shared/proxy, `customMetrics: { enabled: true }`, its cache
 *   off: every read is resolved, forwarded and signed `EMB-HMAC-SHA256-3`),
 *   with the fake Kubernetes API in its process: in each of 20 namespaces
 *   (`BENCH_NAMESPACES`), 1,000 pods of Deployment `web` (`app=web`) and 20
 *   of another app, served as
 *   metadata (`PartialObjectMetadataList` and watch) to the proxy's pod
 *   informer, and the HPA controller's SubjectAccessReview allowed;
 * - the bridge (functions/node.ts, verifying signatures) with one Pods rule
 *   (`describes: pods`, a query template: ONE backend query per read), its
 *   cache off, and a policy allowing the read through `resources: [pods]`;
 * - the Prometheus API fake answering that one
 *   `sum by (namespace, pod) (…)` query with a sample per pod it names;
 * - baseline: bare Node + Hono over HTTPS with the proxy's TLS setup
 *   answering the very text the proxy answered (1,000 items).
 *
 * The client presents the front-proxy certificate and `X-Remote-*` headers
 * of the HPA controller (as kube-apiserver does) and asks the HPA's exact
 * path, `…/v1beta2/namespaces/team-bench-<n>/pods/%2A/http_requests?labelSelector=app%3Dweb`,
 * read i in namespace i mod 20: as 20 HPAs would, so reads in flight at
 * the same time are distinct (identical ones would share one load at the
 * proxy and at the bridge, which measures coalescing, not a read).
 * Every answer is checked: 2xx with exactly 1,000 items (a count of
 * `"describedObject"` in the body); anything else exits 1, as does a
 * backend query count above one per read or any other request at the fake.
 *
 * Backend queries per read: with the bridge's cache off each read is one
 * query; identical reads in flight at the same moment (the same namespace,
 * 20 reads apart) share one load, so the figure can be a little under 1,
 * never over; every query must answer all the pods (one query is the whole
 * read).
 *
 * Pre-warm: `BENCH_PREWARM` reads (default 3,000; quick 300) go through each
 * scenario closed loop, 8 at a time, unmeasured, past V8's tier-up of the
 * request path (see test/bench/latency.ts; a 1,000-item read does ~1,000×
 * the per-item work of an External read, so fewer reads get there).
 *
 * Environment: `BENCH_RATE` reads per second (default 100),
 * `BENCH_DURATION` measured seconds per scenario (default 10),
 * `BENCH_WARMUP` seconds at the same rate before (default 2),
 * `BENCH_PREWARM`, `BENCH_PODS` pods of the Deployment (default and most
 * 1,000), `BENCH_NAMESPACES` (default 20, most 40),
 * `BENCH_CONNECTIONS` most keep-alive connections
 * (default 64), `BENCH_QUICK=1` short runs (2 s) for a smoke test,
 * `BENCH_PROXY_NODE_FLAGS` Node flags for the proxy process. Writes the
 * report row `P7` (test/bench/report.ts) when `BENCH_REPORT_DIR` is set.
 */
import os from "node:os";
import { MAX_PODS_PER_READ } from "../../shared/values/custom-read.ts";
import { benchNamespace, CUSTOM_METRIC, deploymentPods, OTHER_PODS, podsPath } from "./custom-roles.ts";
import { closedLoop, openLoop, type OpenLoopResult, type OpenLoopTarget } from "./openloop.ts";
import { writeReport, type BenchRow } from "./report.ts";
import { envNumber, frontProxyClient, node, reportTiming, runBenchmark, servingPems, spawnChild, type FrontProxyClient, type Measured } from "./servers.ts";

const QUICK = process.env["BENCH_QUICK"] === "1";
/** The goal of issue 26's row: p99 through proxy + bridge at most this many times the trivial server's. */
const P7_GOAL_RATIO = 2;
/** Pods of the Deployment (`BENCH_PODS`, default and most: the most one Pods read may name, 1,000). */
const PODS = Math.round(envNumber("BENCH_PODS", MAX_PODS_PER_READ, MAX_PODS_PER_READ));
/** Namespaces, each with the Deployment (`BENCH_NAMESPACES`, default 20): read i reads namespace i mod N, so concurrent reads are distinct. */
const NAMESPACES = Math.round(envNumber("BENCH_NAMESPACES", 20, 40));
/** The path of read i. */
const readPath = (i: number) => podsPath(benchNamespace(i % NAMESPACES));

const ITEM_MARK = Buffer.from('"describedObject"');

/** Items of a MetricValueList text: occurrences of `"describedObject"` (cheap enough for every answer of the load). */
function itemCount(body: Buffer): number {
  let n = 0;
  for (let at = body.indexOf(ITEM_MARK); at >= 0; at = body.indexOf(ITEM_MARK, at + ITEM_MARK.length)) n++;
  return n;
}

interface Scenario {
  name: string;
  result?: OpenLoopResult;
  /** CPU µs per answered request of each measured process */
  cpu: { label: string; micros: number }[];
  failure?: string;
}

const fmt = (n: number) => (Number.isNaN(n) ? "n/a" : n < 10 ? n.toFixed(2) : n.toFixed(1));

async function main(): Promise<void> {
  const rate = envNumber("BENCH_RATE", 100, 10_000);
  const seconds = envNumber("BENCH_DURATION", QUICK ? 2 : 10, 600);
  const warmupSeconds = envNumber("BENCH_WARMUP", QUICK ? 0.5 : 2, 60);
  const prewarm = Math.round(envNumber("BENCH_PREWARM", QUICK ? 300 : 3_000, 1_000_000));
  const connections = Math.round(envNumber("BENCH_CONNECTIONS", 64, 1000));
  const startedAt = new Date();
  const load0 = os.loadavg();
  const client = await frontProxyClient();
  const check = (body: Buffer) => itemCount(body) === PODS;

  // The stack: the fake Prometheus, the bridge behind it, the proxy in front.
  const prom = await spawnChild("custom-prometheus", { pods: PODS });
  const bridge = await spawnChild("custom-bridge", { prometheusUrl: prom.url, signingKeys: client.keys, namespaces: NAMESPACES });
  const flags = (process.env["BENCH_PROXY_NODE_FLAGS"] ?? "").split(/\s+/).filter(Boolean);
  const proxy = await spawnChild("custom-proxy", { bridgeUrl: bridge.url, authData: client.authData, pods: PODS, namespaces: NAMESPACES }, flags);
  const proxyCa = proxy.info["caPem"]!;

  const setup =
    `${rate} reads/s open loop for ${seconds} s after ${prewarm.toLocaleString("en-US")} unmeasured closed-loop reads and ${warmupSeconds} s warm-up, ≤ ${connections} keep-alive connections; ` +
    `Pods metric ${CUSTOM_METRIC} over the ${PODS} pods of app=web (${OTHER_PODS} other pods in the namespace), read i in namespace i mod ${NAMESPACES} (each with that Deployment), every answer checked for ${PODS} items; ` +
    `${os.cpus().length} CPUs, Node ${process.version}, load average at start ${load0.map((l) => l.toFixed(2)).join(" ")}.`;
  let first: { status: number; text: string };
  try {
    first = await firstRead(client, proxy.url, proxyCa, bridge.url);
    for (let n = 1; n < NAMESPACES; n++) await expectPods(await client.get(`${proxy.url}${readPath(n)}`, proxyCa), benchNamespace(n));
  } catch (err) {
    // Nothing can be measured; the row says why (a refused read is a failed goal, not a missing one).
    const failure = (err as Error).message;
    console.error(`✗ ${failure}`);
    writeReport({ ...reportTiming("custom-pods", startedAt), rows: [p7Failed(rate, failure)], figures: [], notes: [setup, `FAILED before measuring: ${failure}`] });
    process.exitCode = 1;
    return;
  }
  const bodyBytes = Buffer.byteLength(first.text);

  const scenarios: Scenario[] = [];
  let queries = { reads: 0, valueQueries: 0, otherRequests: 0, samples: 0, perRead: NaN };
  /** Measure one scenario; a failure is recorded (and fails the run), never skipped. */
  const measure = async (name: string, target: OpenLoopTarget, measured: Measured[]) => {
    process.stderr.write(`· ${name} …\n`);
    const s: Scenario = { name, cpu: [] };
    scenarios.push(s);
    try {
      const warmed = await closedLoop(target, { requests: prewarm, concurrency: 8 });
      if (warmed.ok !== prewarm) throw new Error(`pre-warm: ${warmed.ok} of ${prewarm} reads ok (${warmed.errors} errors, ${warmed.timeouts} timeouts, ${warmed.non2xx} non-2xx, ${warmed.invalid} without ${PODS} items)`);
      const before = await Promise.all(measured.map((m) => m.stats()));
      s.result = await openLoop(target, { rate, seconds, warmupSeconds, connections });
      const after = await Promise.all(measured.map((m) => m.stats()));
      const sent = Math.round(rate * (seconds + warmupSeconds));
      s.cpu = measured.map((m, i) => ({ label: m.label, micros: (after[i]!.cpuMicros - before[i]!.cpuMicros) / sent }));
      const r = s.result;
      if (r.errors + r.timeouts + r.non2xx + r.invalid > 0 || r.ok === 0) {
        s.failure = `${r.ok} ok, ${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx, ${r.invalid} answers without ${PODS} items`;
      }
      const p = measured.findIndex((m) => m.label === "prometheus");
      if (p >= 0) {
        const delta = (key: string) => (after[p]!.counters[key] ?? 0) - (before[p]!.counters[key] ?? 0);
        queries = { reads: sent, valueQueries: delta("valueQueries"), otherRequests: delta("otherRequests"), samples: delta("samplesAnswered"), perRead: delta("valueQueries") / sent };
        // One query per read at most, and each query the whole read: all the pods' samples.
        if (queries.otherRequests > 0 || queries.valueQueries > sent || queries.valueQueries === 0 || queries.samples !== queries.valueQueries * PODS) {
          s.failure = `${s.failure ? `${s.failure}; ` : ""}backend: ${queries.valueQueries} queries answering ${queries.samples} samples for ${sent} reads of ${PODS} pods, ${queries.otherRequests} unexpected requests`;
        }
      }
    } catch (err) {
      s.failure = (err as Error).message.split("\n").slice(0, 6).join(" ");
    }
    if (s.failure) process.stderr.write(`  ✗ ${name}: ${s.failure}\n`);
  };

  const baseline = await spawnChild("custom-baseline", { ...(await servingPems()), body: first.text });
  try {
    await measure(`B: trivial Hono (HTTPS, client cert), same ${PODS}-item body`, { url: baseline.url, path: readPath, headers: client.headers, tls: client.tls, ca: baseline.info["caPem"]!, check }, [node(baseline, "hono")]);
  } finally {
    await baseline.stop();
  }
  await measure("proxy → bridge → Prometheus (Pods read, caches off)", { url: proxy.url, path: readPath, headers: client.headers, tls: client.tls, ca: proxyCa, check }, [node(proxy), node(bridge), node(prom, "prometheus")]);
  const proxyCounters = (await proxy.stats()).counters;
  await proxy.stop();
  await bridge.stop();
  await prom.stop();

  const [base, forward] = scenarios as [Scenario, Scenario];
  const ratio = base.result && forward.result ? forward.result.p99 / base.result.p99 : NaN;
  const describe = (s: Scenario) =>
    s.result
      ? `${s.name}: p50 ${fmt(s.result.p50)} ms, p90 ${fmt(s.result.p90)}, p99 ${fmt(s.result.p99)}, max ${fmt(s.result.max)}; ` +
        `${s.result.ok} ok of ${s.result.scheduled}, ${s.result.errors} errors, ${s.result.timeouts} timeouts, ${s.result.non2xx} non-2xx, ${s.result.invalid} without ${PODS} items; ` +
        `generator send lag p99 ${fmt(s.result.sendLagP99)} ms (CPU ${Math.round(s.result.loadgenCpu * 100)}% of a core); server CPU ${s.cpu.map((c) => `${c.label} ${c.micros.toFixed(0)}`).join(" + ")} µs/read` +
        (s.failure ? ` — FAILED: ${s.failure}` : "")
      : `${s.name}: FAILED: ${s.failure}`;
  const backendNote =
    `Backend queries per read (bridge cache off: one query per load, each answering all ${PODS} pods; identical reads in flight at the same time share one load): ` +
    `${queries.valueQueries} queries (${queries.samples.toLocaleString("en-US")} samples, ${fmt(queries.samples / queries.valueQueries)} a query) for ${queries.reads} reads (warm-up + measured) = ${fmt(queries.perRead)} per read; ` +
    `${queries.otherRequests} other requests at the fake. Proxy: ${proxyCounters["subjectAccessReviews"]} SubjectAccessReviews (${proxyCounters["sarCacheHits"]} decision-cache hits), ${proxyCounters["podLists"]} pod lists, ${proxyCounters["podWatches"]} pod watches over the whole run.`;
  const lines = [
    `Custom metrics, Pods read over ${PODS} pods — ${startedAt.toISOString()}`,
    setup,
    `answers of ${bodyBytes.toLocaleString("en-US")} bytes`,
    "",
    ["scenario", "p50", "p90", "p99", "max", "answered/s", "send lag p99", "server CPU µs/read", "failure"].join(" | "),
    ...scenarios.map((s) =>
      [
        s.name,
        fmt(s.result?.p50 ?? NaN),
        fmt(s.result?.p90 ?? NaN),
        fmt(s.result?.p99 ?? NaN),
        fmt(s.result?.max ?? NaN),
        s.result ? s.result.achievedRate.toFixed(0) : "",
        fmt(s.result?.sendLagP99 ?? NaN),
        s.cpu.map((c) => `${c.label} ${c.micros.toFixed(0)}`).join(" + "),
        s.failure ?? "",
      ].join(" | "),
    ),
    "",
    `p99 ratio (proxy → bridge / baseline): ${fmt(ratio)}× (goal ≤ ${P7_GOAL_RATIO}×)`,
    `items per answer: ${PODS} (every answer checked)`,
    backendNote,
  ];
  console.log(lines.join("\n"));

  writeReport({
    ...reportTiming("custom-pods", startedAt),
    rows: [p7Row(forward, base, rate, queries.perRead)],
    figures: [
      {
        id: "p7-custom-pods-latency",
        title: `Pods read over ${PODS} pods at ${rate} reads/s, open loop (from the scheduled send time)`,
        kind: "bar",
        xLabel: "scenario",
        yLabel: "ms",
        series: (["p50", "p90", "p99", "max"] as const).map((q) => ({
          name: q,
          points: scenarios.filter((s) => s.result).map((s) => [s.name.split(":")[0]!.split(" (")[0]!, Number(s.result![q].toFixed(3))] as [string, number]),
        })),
      },
    ],
    notes: [`${setup} Answers of ${bodyBytes.toLocaleString("en-US")} bytes.`, ...scenarios.map(describe), backendNote],
  });
  const failed = scenarios.filter((s) => s.failure);
  if (failed.length > 0) {
    console.error(`\n${failed.length} scenario(s) failed: ${failed.map((s) => s.name).join(", ")}; the figures above are not valid.`);
    process.exitCode = 1;
  }
}

/**
 * The first Pods read through the proxy (namespace 0), before anything is
 * measured (the pod informer syncs on the first Pods read: 503 until then,
 * retried for up to 10 s), checked by {@link expectPods}; and the bridge
 * refuses an unsigned custom read.
 *
 * @throws Error saying which check failed (with the answer's status and Status message)
 */
async function firstRead(client: FrontProxyClient, proxyUrl: string, proxyCa: string, bridgeUrl: string): Promise<{ status: number; text: string }> {
  let first = await client.get(`${proxyUrl}${readPath(0)}`, proxyCa);
  for (let i = 0; i < 100 && first.status === 503; i++) {
    await new Promise((r) => setTimeout(r, 100));
    first = await client.get(`${proxyUrl}${readPath(0)}`, proxyCa);
  }
  await expectPods(first, benchNamespace(0));
  // The bridge behind the proxy takes signed reads only.
  const unsigned = await fetch(`${bridgeUrl}${readPath(0)}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ pods: ["web-1"] }) });
  await unsigned.body?.cancel();
  if (unsigned.status !== 401) throw new Error(`the bridge behind the proxy must refuse an unsigned custom read, got ${unsigned.status}`);
  return first;
}

/**
 * Check a Pods read's answer: 200, a MetricValueList of exactly the
 * Deployment's {@link PODS} pods in `namespace`.
 *
 * @throws Error saying what was answered (a Status's reason and message)
 */
async function expectPods(reply: { status: number; text: string }, namespace: string): Promise<void> {
  if (reply.status !== 200) {
    let status: { reason?: string; message?: string } = {};
    try {
      status = JSON.parse(reply.text) as typeof status;
    } catch {
      // not a Status: quoted as text below
    }
    const said = typeof status.message === "string" ? `${status.reason ?? ""} "${status.message}"` : reply.text.slice(0, 400);
    throw new Error(`a Pods read through the proxy (namespace ${namespace}) answered ${reply.status} ${said}`);
  }
  const answer = JSON.parse(reply.text) as { kind?: string; items?: { describedObject?: { name?: string; namespace?: string } }[] };
  const names = new Set((answer.items ?? []).map((i) => `${i.describedObject?.namespace}/${i.describedObject?.name}`));
  const expected = deploymentPods(PODS).map((p) => `${namespace}/${p.name}`);
  if (answer.kind !== "MetricValueList" || names.size !== PODS || !expected.every((n) => names.has(n)) || itemCount(Buffer.from(reply.text)) !== PODS) {
    throw new Error(`Pods read (namespace ${namespace}): expected a MetricValueList of the ${PODS} pods of app=web, got ${answer.kind} with ${answer.items?.length} items (${names.size} distinct pods)`);
  }
}

/** The P7 row when nothing could be measured. */
function p7Failed(rate: number, failure: string): BenchRow {
  return { id: "P7", title: p7Title(), goal: p7Goal(rate), measured: `FAILED: ${failure}`, met: false };
}

function p7Title(): string {
  return `custom.metrics Pods read over ${PODS} pods (one backend query), proxy + bridge, open loop`;
}

function p7Goal(rate: number): string {
  return `p99 ≤ ${P7_GOAL_RATIO}× the trivial server's at ${rate} reads/s`;
}

/** The P7 row: p99 through proxy + bridge over the baseline's p99 against the 2× goal; ratios p99_vs_baseline and backend_queries_per_read (lower is better). */
function p7Row(s: Scenario, base: Scenario, rate: number, queriesPerRead: number): BenchRow {
  const id = "P7";
  const title = p7Title();
  const goal = p7Goal(rate);
  if (!s.result || !base.result || s.failure || base.failure) {
    return { id, title, goal, measured: `FAILED: ${s.failure ?? base.failure ?? "not measured"}`, met: false };
  }
  const ratio = s.result.p99 / base.result.p99;
  return {
    id,
    title,
    goal,
    measured: `p99 ${fmt(s.result.p99)} ms = ${fmt(ratio)}× (p50 ${fmt(s.result.p50)}, p90 ${fmt(s.result.p90)}, max ${fmt(s.result.max)}); ${fmt(queriesPerRead)} backend queries/read; ${PODS} items/answer; CPU ${s.cpu.map((c) => `${c.label} ${c.micros.toFixed(0)}`).join(" + ")} µs/read`,
    baseline: `trivial Hono over HTTPS, same body: p99 ${fmt(base.result.p99)} ms (p50 ${fmt(base.result.p50)}, max ${fmt(base.result.max)})`,
    met: ratio <= P7_GOAL_RATIO,
    ratios: { p99_vs_baseline: ratio, backend_queries_per_read: queriesPerRead },
    better: { p99_vs_baseline: "lower", backend_queries_per_read: "lower" },
  };
}

await runBenchmark(main);
