/**
 * `npm run bench:backend-calls`: how many backend calls the bridge makes for
 * H autoscalers reading S distinct series, each polled every 15 s (the HPA
 * controller's sync period) over a simulated period — per provider, with and
 * without the TTL cache, against the naive one-call-per-read baseline, all
 * in one run. Prints figures; asserts nothing.
 *
 *   npm run bench:backend-calls [-- --hpas 300 --series 60 --minutes 10 --ttl 30]
 *
 * Method: the real bridge app and the real providers (aws-sqs with the real
 * SDK against the fauxqs emulator; aws-cloudwatch with the real SDK against
 * the CloudWatch fake; gcp-monitoring over REST against the Cloud Monitoring
 * and OAuth fakes) with an injected clock. Simulated time advances; the
 * backend calls counted are the requests the fakes recorded (SQS: the
 * commands the SDK sent). Autoscaler h reads series h mod S. Two arrival
 * patterns:
 * - burst: every autoscaler reads at the same instant each 15 s (the
 *   controller's resync enqueues all HPAs together);
 * - spread: autoscaler h reads at second (h mod 15) of each 15 s period.
 * Reads at one instant are sent concurrently; batching windows run in real
 * time (the production default, 10 ms).
 *
 * Model (DESIGN.md "Cost model"): naive = 4·H calls per minute; coalesced
 * and cached with TTL t = at most S·60/t per minute; CloudWatch batched =
 * ⌈S/500⌉·60/t GetMetricData calls per minute.
 */
import { parseArgs } from "node:util";
import { buildBridge, type Bridge } from "../../shared/bridge.ts";
import type { SqsProvider } from "../../shared/providers/aws-sqs/index.ts";
import { builtProviderTypes, loadProviderModules } from "../../shared/providers/registry.ts";
import { startCloudWatchFake } from "../fakes/cloudwatch.ts";
import { startGoogleFakes } from "../fakes/google.ts";
import { startEmulator } from "../helpers/emulator.ts";

await loadProviderModules(builtProviderTypes()); // buildBridge() builds from loaded provider modules

const { values: args } = parseArgs({
  options: {
    hpas: { type: "string", default: "300" },
    series: { type: "string", default: "60" },
    minutes: { type: "string", default: "10" },
    ttl: { type: "string", default: "30" },
  },
});
const H = Number(args.hpas);
const S = Number(args.series);
const MINUTES = Number(args.minutes);
const TTL = Number(args.ttl);
const POLL_SECONDS = 15;
const START = 1_800_000_000_000;
const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const SERIES = Array.from({ length: S }, (_, i) => `bench_${i}`);

type Arrivals = "burst" | "spread";

/** Drive H autoscalers against one bridge; returns reads made and failures seen. */
async function simulate(bridge: Bridge, metric: string, label: string, clock: { now: number }, arrivals: Arrivals) {
  let reads = 0;
  let failures = 0;
  const seconds = MINUTES * 60;
  for (let t = 0; t < seconds; t++) {
    const due: number[] = [];
    for (let h = 0; h < H; h++) {
      const phase = arrivals === "burst" ? 0 : h % POLL_SECONDS;
      if (t % POLL_SECONDS === phase) due.push(h);
    }
    if (due.length === 0) continue;
    clock.now = START + t * 1000;
    const answers = await Promise.all(
      due.map((h) => bridge.app.request(`${NS}/${metric}?labelSelector=${encodeURIComponent(`${label}=${SERIES[h % S]}`)}`)),
    );
    reads += answers.length;
    failures += answers.filter((a) => a.status !== 200).length;
  }
  return { reads, failures };
}

const head = (ttl: number) => `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: ${ttl} }
`;

interface Row {
  provider: string;
  arrivals: Arrivals;
  cache: string;
  calls: number;
  extra: string;
  reads: number;
  failures: number;
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const quiet = { log: () => {} };

  // --- aws-sqs (no batching: one GetQueueAttributes per queue read) ---
  const sqs = await startEmulator();
  for (const q of SERIES) await sqs.add(q, 1);
  for (const arrivals of ["burst", "spread"] as const) {
    for (const ttl of [0, TTL]) {
      const clock = { now: START };
      const bridge = buildBridge(
        `${head(ttl)}providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: ${sqs.endpoint}, credentials: { source: static, accessKeyId: a, secretAccessKey: b }, maxAttempts: 1 }
metrics: [{ name: depth, provider: sqs, query: { queueLabel: queue } }]
`,
        "bench.yaml",
        { env: {}, now: () => clock.now },
        quiet,
      );
      const counts = { attributes: 0, urls: 0 };
      (bridge.providers.get("sqs") as SqsProvider).client.middlewareStack.add(
        (next, context) => async (a) => {
          const name = (context as { commandName?: string }).commandName;
          if (name === "GetQueueAttributesCommand") counts.attributes++;
          if (name === "GetQueueUrlCommand") counts.urls++;
          return next(a);
        },
        { step: "initialize", name: "benchCount" },
      );
      const r = await simulate(bridge, "depth", "queue", clock, arrivals);
      rows.push({ provider: "aws-sqs", arrivals, cache: ttl ? `TTL ${ttl} s` : "none", calls: counts.attributes + counts.urls, extra: `${counts.urls} GetQueueUrl`, ...r });
    }
  }
  await sqs.stop();

  // --- aws-cloudwatch (batched GetMetricData) ---
  const cw = await startCloudWatchFake();
  for (const q of SERIES) {
    const samples = [];
    for (let m = -10; m <= MINUTES; m++) samples.push({ at: START + m * 60_000 + 1_000, value: 5 });
    cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: q } }, samples);
  }
  for (const arrivals of ["burst", "spread"] as const) {
    for (const ttl of [0, TTL]) {
      const clock = { now: START };
      const bridge = buildBridge(
        `${head(ttl)}providers:
  cw: { type: aws-cloudwatch, region: us-east-1, endpoint: ${cw.endpoint}, credentials: { source: static, accessKeyId: a, secretAccessKey: b }, maxAttempts: 1 }
metrics:
  - { name: visible, provider: cw, query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName } } }
`,
        "bench.yaml",
        { env: {}, now: () => clock.now },
        quiet,
      );
      const before = cw.calls.length;
      const r = await simulate(bridge, "visible", "queue", clock, arrivals);
      const calls = cw.calls.slice(before);
      const queries = calls.reduce((n, c) => n + (c.body.MetricDataQueries?.length ?? 0), 0);
      rows.push({ provider: "aws-cloudwatch", arrivals, cache: ttl ? `TTL ${ttl} s` : "none", calls: calls.length, extra: `${queries} metrics requested (billed)`, ...r });
    }
  }
  await cw.close();

  // --- gcp-monitoring (batched ListTimeSeries, REST transport) ---
  const clockG = { now: START };
  const google = await startGoogleFakes(() => clockG.now);
  google.store.series = SERIES.map((id) => ({
    metricType: "pubsub.googleapis.com/subscription/num_undelivered_messages",
    resourceType: "pubsub_subscription",
    resourceLabels: { subscription_id: id },
    points: Array.from({ length: MINUTES + 10 }, (_, m) => ({ end: START + (m - 9) * 60_000, value: { int64Value: "5" } })),
  }));
  for (const arrivals of ["burst", "spread"] as const) {
    for (const ttl of [0, TTL]) {
      const bridge = buildBridge(
        `${head(ttl)}providers:
  gcp: { type: gcp-monitoring, project: test-project, endpoint: ${google.rest.endpoint}, credentials: { source: environment } }
metrics:
  - { name: backlog, provider: gcp, query: { metricType: pubsub.googleapis.com/subscription/num_undelivered_messages, selectorLabels: { subscription: resource.labels.subscription_id } } }
`,
        "bench.yaml",
        { env: { GOOGLE_SERVICE_ACCOUNT_JSON: google.account.text }, now: () => clockG.now },
        quiet,
      );
      const before = google.store.requests.length;
      const tokens = google.oauth.requests.length;
      const r = await simulate(bridge, "backlog", "subscription", clockG, arrivals);
      rows.push({
        provider: "gcp-monitoring",
        arrivals,
        cache: ttl ? `TTL ${ttl} s` : "none",
        calls: google.store.requests.length - before,
        extra: `+${google.oauth.requests.length - tokens} token exchange`,
        ...r,
      });
    }
  }
  await google.close();

  // --- report ---
  const perMinute = (n: number) => (n / MINUTES).toFixed(1);
  console.log(
    `backend calls: ${H} autoscalers × ${S} distinct series, each polled every ${POLL_SECONDS} s for ${MINUTES} simulated minutes ` +
      `(real providers against fakes, injected clock)`,
  );
  console.log(
    `model: naive ${4 * H}/min; coalesced+cached ≤ ${((S * 60) / TTL).toFixed(0)}/min (S·60/t, t = ${TTL} s); ` +
      `CloudWatch batched ${Math.ceil(S / 500) * (60 / TTL)}/min (⌈S/500⌉·60/t)\n`,
  );
  const header = ["provider", "arrivals", "cache", "reads", "naive calls", "bridge calls", "calls/min", "naive ÷ bridge", "failed reads", "notes"];
  const table = rows.map((r) => [
    r.provider,
    r.arrivals,
    r.cache,
    String(r.reads),
    String(r.reads),
    String(r.calls),
    perMinute(r.calls),
    `${(r.reads / Math.max(1, r.calls)).toFixed(1)}×`,
    String(r.failures),
    r.extra,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 3 || i === cells.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  console.log(line(header));
  for (const row of table) console.log(line(row));
}

await main();
