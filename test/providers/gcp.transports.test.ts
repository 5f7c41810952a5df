/**
 * Two transports, one behaviour: the same bridge config and the same
 * fixtures are served through the official `@google-cloud/monitoring`
 * client (gRPC, TLS, self-signed service-account JWT) against the gRPC fake
 * and through REST over fetch (JWT bearer grant at the OAuth fake) against
 * the REST fake. Every scenario must give the same answer — values,
 * timestamps, windows, labels, Status codes and messages — and send the
 * same ListTimeSeries request; the REST answers are also checked against
 * the values the fixtures imply, so both cannot be wrong together.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { createGrpcTransportFactory } from "../../shared/providers/gcp-monitoring/grpc.ts";
import type { MonitoringProvider } from "../../shared/providers/gcp-monitoring/index.ts";
import { makeServiceAccount } from "../fakes/google-key.ts";
import { startGoogleFakes, type GoogleFakes } from "../fakes/google.ts";
import type { MonitoringBehaviour, StoredSeries } from "../fakes/monitoring-store.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const NOW = 1_800_000_000_000;
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");
const BACKLOG = "pubsub.googleapis.com/subscription/num_undelivered_messages";

/** The fixtures every scenario reads. */
export function fixtures(now: number): StoredSeries[] {
  const sub = (id: string, points: [number, string][], project = "test-project"): StoredSeries => ({
    metricType: BACKLOG,
    resourceType: "pubsub_subscription",
    resourceLabels: { project_id: project, subscription_id: id },
    points: points.map(([ago, v]) => ({ end: now - ago * 1000, value: { int64Value: v } })),
  });
  return [
    sub("orders", [[170, "40"], [110, "42"], [50, "45"], [400, "1"]]),
    sub("emails", [[50, "7"]]),
    sub("stale", [[900, "3"]]),
    sub("big", [[30, "9007199254740993"]], "other-project"),
    {
      metricType: "custom.googleapis.com/queue/latency",
      metricLabels: { queue: "a" },
      resourceType: "global",
      valueType: "DOUBLE",
      points: [{ end: now - 40_000, value: { doubleValue: 0.125 } }],
    },
    ...["x", "y"].map((shard): StoredSeries => ({
      metricType: "custom.googleapis.com/queue/depth",
      metricLabels: { queue: "a", shard },
      resourceType: "global",
      points: [{ end: now - 40_000, value: { int64Value: shard === "x" ? "5" : "6" } }],
    })),
    {
      metricType: "pubsub.googleapis.com/subscription/ack_message_count",
      metricKind: "DELTA",
      resourceType: "pubsub_subscription",
      resourceLabels: { project_id: "test-project", subscription_id: "orders" },
      points: [{ start: now - 120_000, end: now - 60_000, value: { int64Value: "300" } }],
    },
    {
      metricType: "custom.googleapis.com/latency_distribution",
      resourceType: "global",
      valueType: "DISTRIBUTION",
      points: [{ end: now - 30_000, value: { distributionValue: { count: "3", mean: 1.5 } } }],
    },
  ];
}

function config(endpoint: string, pageSize = "") {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: 0 }
providers:
  gcp:
    type: gcp-monitoring
    project: test-project
    endpoint: ${endpoint}
    credentials: { source: environment }
    timeoutSeconds: 1
    ${pageSize}
metrics:
  - name: pubsub_backlog
    provider: gcp
    query:
      metricType: ${BACKLOG}
      resourceType: pubsub_subscription
      selectorLabels: { subscription: resource.labels.subscription_id }
  - name: pubsub_backlog_max
    provider: gcp
    query:
      metricType: ${BACKLOG}
      resourceType: pubsub_subscription
      selectorLabels: { subscription: resource.labels.subscription_id }
      aligner: ALIGN_MAX
      alignmentPeriod: 120
  - name: pubsub_backlog_total
    provider: gcp
    query:
      metricType: ${BACKLOG}
      resourceType: pubsub_subscription
      resourceLabels: { project_id: test-project }
      aligner: ALIGN_MAX
      alignmentPeriod: 60
      reducer: REDUCE_SUM
  - name: latency
    provider: gcp
    query: { metricType: custom.googleapis.com/queue/latency, selectorLabels: { queue: metric.labels.queue } }
  - name: depth
    provider: gcp
    query: { metricType: custom.googleapis.com/queue/depth, selectorLabels: { queue: metric.labels.queue } }
  - name: depth_summed
    provider: gcp
    query: { metricType: custom.googleapis.com/queue/depth, selectorLabels: { queue: metric.labels.queue }, aligner: ALIGN_MEAN, reducer: REDUCE_SUM }
  - name: acks
    provider: gcp
    query:
      metricType: pubsub.googleapis.com/subscription/ack_message_count
      selectorLabels: { subscription: resource.labels.subscription_id }
  - name: latency_distribution
    provider: gcp
    query: { metricType: custom.googleapis.com/latency_distribution }
  - name: nowhere
    provider: gcp
    query: { metricType: custom.googleapis.com/never_written }
`;
}

/** Scenarios: [metric, selector, behaviour]. */
const SCENARIOS: [string, string, MonitoringBehaviour][] = [
  ["pubsub_backlog", "subscription=orders", "normal"],
  ["pubsub_backlog", "subscription in (orders,emails)", "normal"],
  ["pubsub_backlog", "subscription=big", "normal"],
  ["pubsub_backlog", "subscription=stale", "normal"],
  ["pubsub_backlog", "subscription=absent", "normal"],
  ["pubsub_backlog_max", "subscription in (emails,orders)", "normal"],
  ["pubsub_backlog_total", "", "normal"],
  ["latency", "queue=a", "normal"],
  ["depth", "queue=a", "normal"],
  ["depth_summed", "queue=a", "normal"],
  ["acks", "subscription=orders", "normal"],
  ["latency_distribution", "", "normal"],
  ["nowhere", "", "normal"],
  ["pubsub_backlog", "subscription=orders", "quota"],
  ["pubsub_backlog", "subscription=orders", "denied"],
  ["pubsub_backlog", "subscription=orders", "invalid"],
  ["pubsub_backlog", "subscription=orders", "unavailable"],
];

interface Answer {
  status: number;
  retryAfter: string | null;
  body: any;
}

async function run(bridge: Bridge, fakes: GoogleFakes): Promise<{ answers: Answer[]; requests: unknown[] }> {
  const answers: Answer[] = [];
  const from = fakes.store.requests.length;
  for (const [metric, selector, behaviour] of SCENARIOS) {
    fakes.store.behaviour = behaviour;
    // Scenarios are independent: forget the previous one's answer and its back-off (failure cache).
    for (const p of bridge.providers.values()) (p as MonitoringProvider).cache.clear();
    const res = await bridge.app.request(`${NS}/${metric}${selector ? `?labelSelector=${encodeURIComponent(selector)}` : ""}`);
    answers.push({ status: res.status, retryAfter: res.headers.get("retry-after"), body: await res.json() });
  }
  fakes.store.behaviour = "normal";
  const requests = fakes.store.requests.slice(from).map(({ transport: _t, caller, ...r }) => ({ ...r, caller }));
  return { answers, requests };
}

describe("gcp-monitoring: gRPC client and REST transport give identical results", () => {
  let fakes: GoogleFakes;
  const clock = { now: NOW };
  beforeAll(async () => {
    fakes = await startGoogleFakes(() => clock.now);
    fakes.store.series = fixtures(NOW);
  });
  afterAll(async () => fakes?.close());

  const bridges = (pageSize = "") => {
    const env = { GOOGLE_SERVICE_ACCOUNT_JSON: fakes.account.text };
    const rest = buildBridge(config(fakes.rest.endpoint, pageSize), "rest.yaml", { env, now: () => clock.now }, { log: () => {} });
    const grpc = buildBridge(
      config(fakes.grpc.endpoint, pageSize),
      "grpc.yaml",
      { env, now: () => clock.now, transports: { "gcp-monitoring": createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) } },
      { log: () => {} },
    );
    return { rest, grpc };
  };

  it("uses the transport the entry point chose", () => {
    const { rest, grpc } = bridges();
    expect((rest.providers.get("gcp") as MonitoringProvider).transport.kind).toBe("rest");
    expect((grpc.providers.get("gcp") as MonitoringProvider).transport.kind).toBe("grpc");
  });

  it("answers every scenario identically and sends identical requests", async () => {
    const { rest, grpc } = bridges();
    const overRest = await run(rest, fakes);
    const overGrpc = await run(grpc, fakes);
    expect(overGrpc.answers).toEqual(overRest.answers);
    expect(overGrpc.requests).toEqual(overRest.requests);
    expect(overRest.requests.length).toBeGreaterThanOrEqual(SCENARIOS.length);
    // the gRPC client authenticated with the service account's own signed JWT
    expect(fakes.grpc.callers.at(-1)).toMatchObject({ iss: fakes.account.json.client_email, sub: fakes.account.json.client_email });
  });

  it("follows nextPageToken identically", async () => {
    const { rest, grpc } = bridges("pageSize: 1");
    const overRest = await run(rest, fakes);
    const overGrpc = await run(grpc, fakes);
    expect(overGrpc.answers).toEqual(overRest.answers);
    expect(overGrpc.requests).toEqual(overRest.requests);
    expect(overRest.requests.filter((r: any) => r.pageToken !== undefined).length).toBeGreaterThan(0);
  });

  it("the shared answers are the values the fixtures imply", async () => {
    const { rest } = bridges();
    const { answers } = await run(rest, fakes);
    const byScenario = (i: number) => answers[i]!;
    expect(byScenario(0)).toMatchObject({ status: 200, body: { items: [{ metricLabels: { subscription: "orders" }, value: "45", timestamp: iso(NOW - 50_000) }] } });
    expect(byScenario(0).body.items[0].window).toBeUndefined(); // a raw GAUGE point aggregates nothing
    expect(byScenario(1).body.items.map((i: any) => [i.metricLabels.subscription, i.value])).toEqual([
      ["emails", "7"],
      ["orders", "45"],
    ]);
    expect(byScenario(2).body.items[0].value).toBe("9007199254740993"); // int64 beyond 2^53, exact
    expect(byScenario(3)).toMatchObject({ status: 503, body: { message: expect.stringMatching(/no point in the last 300 s; no value is reported/) } });
    expect(byScenario(4).status).toBe(503);
    expect(byScenario(5).body.items.map((i: any) => [i.metricLabels.subscription, i.value, i.window, i.timestamp])).toEqual([
      ["emails", "7", 120, iso(NOW)],
      ["orders", "45", 120, iso(NOW)],
    ]);
    expect(byScenario(6)).toMatchObject({ status: 200, body: { items: [{ metricLabels: {}, value: "52", window: 60, timestamp: iso(NOW) }] } });
    expect(byScenario(7).body.items[0]).toMatchObject({ value: "125m", timestamp: iso(NOW - 40_000) });
    expect(byScenario(8)).toMatchObject({ status: 503, body: { message: expect.stringMatching(/2 time series match one series of the selector/) } });
    expect(byScenario(9).body.items[0]).toMatchObject({ value: "11", window: 60 });
    expect(byScenario(10).body.items[0]).toMatchObject({ value: "300", window: 60, timestamp: iso(NOW - 60_000) });
    expect(byScenario(11)).toMatchObject({ status: 503, body: { message: expect.stringMatching(/distributionValue value, not a number/) } });
    expect(byScenario(12)).toMatchObject({ status: 404, body: { message: expect.stringMatching(/NOT_FOUND.*never_written/) } });
    expect(byScenario(13)).toMatchObject({ status: 503, retryAfter: "5" /* THROTTLED_RETRY_AFTER_SECONDS: no RetryInfo */, body: { message: expect.stringMatching(/provider gcp: .*throttled by Google \(RESOURCE_EXHAUSTED\)/) } });
    expect(byScenario(14)).toMatchObject({ status: 500, body: { message: expect.stringMatching(/provider gcp: .*refused the bridge's credentials \(PERMISSION_DENIED\)/) } });
    expect(byScenario(15)).toMatchObject({ status: 500, body: { message: expect.stringMatching(/query is invalid \(INVALID_ARGUMENT\)/) } });
    expect(byScenario(16)).toMatchObject({ status: 503, retryAfter: "1" }); // other backend failures: 1 s
  });

  it("a hanging Cloud Monitoring: both transports cancel the call at the bridge deadline, not at timeoutSeconds (the fake sees it)", async () => {
    const env = { GOOGLE_SERVICE_ACCOUNT_JSON: fakes.account.text };
    const text = (endpoint: string) => config(endpoint).replace("timeoutSeconds: 0.5", "timeoutSeconds: 4");
    const rest = buildBridge(text(fakes.rest.endpoint), "rest.yaml", { env, now: () => clock.now }, { log: () => {}, deadlineMs: 400 });
    const grpc = buildBridge(
      text(fakes.grpc.endpoint),
      "grpc.yaml",
      { env, now: () => clock.now, transports: { "gcp-monitoring": createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) } },
      { log: () => {}, deadlineMs: 400 },
    );
    for (const [bridge, transport] of [[rest, "rest"], [grpc, "grpc"]] as const) {
      // warm the token/channel so the hang is the ListTimeSeries call itself
      expect((await bridge.app.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`)).status).toBe(200);
      for (const p of bridge.providers.values()) (p as MonitoringProvider).cache.clear();
      fakes.store.hung.length = 0;
      fakes.store.behaviour = "hang";
      try {
        const res = await bridge.app.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`);
        expect(res.status).toBe(503);
        expect(((await res.json()) as any).message).toMatch(/did not answer within 400 ms/);
        for (let waited = 0; !fakes.store.hung.every((h) => h.closed) && waited < 1_000; waited += 10) await new Promise((r) => setTimeout(r, 10));
        expect(fakes.store.hung).toEqual([{ transport, closed: true }]);
      } finally {
        fakes.store.behaviour = "normal";
      }
    }
  });

  it("honours Google's RetryInfo over both transports: Retry-After is the hint (clamped to 30 s) and the series is not asked again meanwhile", async () => {
    for (const [delay, expected] of [[7, "7"], [90, "30"]] as const) {
      const { rest, grpc } = bridges();
      fakes.store.quotaRetryDelaySeconds = delay;
      fakes.store.behaviour = "quota";
      try {
        for (const bridge of [rest, grpc]) {
          const before = fakes.store.requests.length;
          const url = `${NS}/pubsub_backlog?labelSelector=${encodeURIComponent("subscription=orders")}`;
          const answers = [];
          for (let i = 0; i < 5; i++) {
            const res = await bridge.app.request(url);
            answers.push({ status: res.status, retryAfter: res.headers.get("retry-after"), cacheControl: res.headers.get("cache-control") });
          }
          expect(answers).toEqual(Array(5).fill({ status: 503, retryAfter: expected, cacheControl: "no-store" }));
          expect(fakes.store.requests.length - before).toBe(1); // one backend call, four reads answered from the back-off
          fakes.store.behaviour = "normal";
          clock.now += delay > 30 ? 30_000 : delay * 1000; // the back-off ends: the next read reaches the backend
          expect((await bridge.app.request(url)).status).not.toBe(503);
          expect(fakes.store.requests.length - before).toBe(2);
          clock.now = NOW;
          fakes.store.behaviour = "quota";
        }
      } finally {
        fakes.store.behaviour = "normal";
        fakes.store.quotaRetryDelaySeconds = undefined;
        clock.now = NOW;
      }
    }
  });
});

describe("gcp-monitoring credentials over the official client", () => {
  let fakes: GoogleFakes;
  beforeAll(async () => {
    fakes = await startGoogleFakes();
    fakes.store.series = fixtures(NOW);
    // No Application Default Credentials anywhere, and no metadata-server probe off this host.
    process.env["METADATA_SERVER_DETECTION"] = "none";
    process.env["HOME"] = "/nonexistent";
    process.env["CLOUDSDK_CONFIG"] = "/nonexistent";
    delete process.env["GOOGLE_APPLICATION_CREDENTIALS"];
  });
  afterAll(async () => fakes?.close());

  const bridge = (credentials: string, env: Record<string, string>) =>
    buildBridge(
      config(fakes.grpc.endpoint).replace("credentials: { source: environment }", `credentials: ${credentials}`),
      "grpc.yaml",
      { env, now: () => NOW, transports: { "gcp-monitoring": createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) } },
      { log: () => {} },
    );

  it("no Application Default Credentials is a 500 naming the provider", async () => {
    const res = await bridge("{ source: default }", {}).app.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`);
    expect(res.status).toBe(500);
    expect(((await res.json()) as any).message).toMatch(/provider gcp: .*no Google credentials were found, so nothing was sent to Google \(UNAUTHENTICATED\).*Could not load the default credentials/);
  });

  it("a key the service does not know is refused with 500; a missing key variable too, before any call", async () => {
    const before = fakes.store.requests.length;
    const stranger = makeServiceAccount("http://127.0.0.1:9/token", "stranger@test-project.iam.gserviceaccount.com");
    const refused = await bridge("{ source: environment }", { GOOGLE_SERVICE_ACCOUNT_JSON: stranger.text }).app.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`);
    expect(refused.status).toBe(500);
    expect(((await refused.json()) as any).message).toMatch(/provider gcp: .*UNAUTHENTICATED.*unknown service account stranger@/);
    const missing = await bridge("{ source: environment }", {}).app.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`);
    expect(missing.status).toBe(500);
    expect(((await missing.json()) as any).message).toMatch(/provider gcp: credentials.source is "environment" but GOOGLE_SERVICE_ACCOUNT_JSON is not set/);
    expect(fakes.store.requests.length).toBe(before);
  });
});
