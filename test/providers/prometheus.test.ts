/**
 * The `prometheus` provider (generic flavour) through the real bridge app
 * against a fake Prometheus HTTP API on 127.0.0.1 (`../fakes/prometheus-api.ts`)
 * that records the queries it receives and evaluates the provider's series
 * queries: the value with its sample's own time, batching into one value
 * query and one age query, exact matchers (`in (a.b)` never matches `aXb`),
 * every failed read as a Status and never a value, exact `e` notation, auth
 * and tenant headers, and the config errors.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue } from "../../shared/config/yaml.ts";
import { fromConfig } from "../../shared/bridge.ts";
import { buildBridge, type Bridge, OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import { startFakePrometheus, vector, type FakePrometheus, type FakeSeries } from "../fakes/prometheus-api.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const NOW = 1_800_000_000_000;
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");
const METRIC = "rabbitmq_queue_messages_ready";

function queue(name: string, value: string, agoSeconds = 10, extra: Record<string, string> = {}): FakeSeries {
  return { labels: { __name__: METRIC, job: "rabbitmq", queue: name, ...extra }, value, timeMs: NOW - agoSeconds * 1000 };
}

function config(url: string, provider = "", rules = "") {
  return `
${OPEN_CONFIG_HEAD}providers:
  prom:
    type: prometheus
    url: ${url}
    timeoutSeconds: 0.5
${provider}
metrics:
  - name: queue_ready
    provider: prom
    query:
      series: ${METRIC}
      labels: { job: rabbitmq }
      selectorLabels: { queue: queue }
${rules}
`;
}

describe("prometheus provider against a fake HTTP API", () => {
  let fake: FakePrometheus;
  const clock = { now: NOW };
  beforeAll(async () => {
    fake = await startFakePrometheus(() => clock.now);
  });
  afterAll(async () => fake?.close());
  afterEach(() => {
    clock.now = NOW;
    fake.series = [];
    fake.requests.length = 0;
    fake.respond = undefined;
  });

  function bridgeFor(text: string, env: Record<string, string> = {}): Bridge {
    return buildBridge(text, "test.yaml", { env, now: () => clock.now }, { log: () => {} });
  }

  async function read(bridge: Bridge, metric: string, selector: string) {
    const res = await bridge.app.request(`${NS}/${metric}${selector ? `?labelSelector=${encodeURIComponent(selector)}` : ""}`);
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  }

  it("serves the sum with the time of the oldest sample summed, from one value and one timestamp() query", async () => {
    fake.series = [queue("orders", "3", 20, { pod: "a" }), queue("orders", "4", 10, { pod: "b" }), queue("billing", "100", 5)];
    const bridge = bridgeFor(config(fake.url));
    const a = await read(bridge, "queue_ready", "queue=orders");
    expect(a.status).toBe(200);
    expect(a.body.items).toEqual([{ metricName: "queue_ready", metricLabels: { queue: "orders" }, timestamp: iso(NOW - 20_000), value: "7" }]);
    expect(fake.requests.map((r) => r.query).sort()).toEqual([
      `min by (queue) (timestamp(${METRIC}{job="rabbitmq",queue="orders"}))`,
      `sum by (queue) (${METRIC}{job="rabbitmq",queue="orders"})`,
    ]);
    for (const r of fake.requests) {
      expect(r).toMatchObject({ method: "POST", path: "/api/v1/query", timeout: "0.5", lookbackDelta: "300", time: undefined });
      expect(r.headers["content-type"]).toBe("application/x-www-form-urlencoded");
      expect(r.headers["authorization"]).toBeUndefined();
    }
  });

  it("sends two HPAs' reads arriving together as one value query and one age query, split back per label set", async () => {
    fake.series = [queue("orders", "5", 30), queue("billing", "8", 40), queue("other", "1")];
    const bridge = bridgeFor(config(fake.url));
    const [a, b] = await Promise.all([read(bridge, "queue_ready", "queue=orders"), read(bridge, "queue_ready", "queue=billing")]);
    expect(a.body.items).toEqual([{ metricName: "queue_ready", metricLabels: { queue: "orders" }, timestamp: iso(NOW - 30_000), value: "5" }]);
    expect(b.body.items).toEqual([{ metricName: "queue_ready", metricLabels: { queue: "billing" }, timestamp: iso(NOW - 40_000), value: "8" }]);
    expect(fake.requests.map((r) => r.query).sort()).toEqual([
      `min by (queue) (timestamp(${METRIC}{job="rabbitmq",queue=~"billing|orders"}))`,
      `sum by (queue) (${METRIC}{job="rabbitmq",queue=~"billing|orders"})`,
    ]);
  });

  it("quotes values so that in (a.b) never matches aXb", async () => {
    fake.series = [queue("aXb", "5"), queue("c", "2")];
    const rules = `
  - name: queue_ready_or_zero
    provider: prom
    query: { series: ${METRIC}, selectorLabels: { queue: queue }, onEmpty: { value: "0" } }
`;
    const bridge = bridgeFor(config(fake.url, "", rules));
    const one = await read(bridge, "queue_ready", "queue in (a.b)");
    expect(one.status).toBe(503);
    expect(one.body.message).toMatch(/no series in the answer/);
    const two = await read(bridge, "queue_ready_or_zero", "queue in (a.b, c)");
    expect(two.body.items.map((i: any) => [i.metricLabels.queue, i.value])).toEqual([["a.b", "0"], ["c", "2"]]);
    expect(fake.requests.map((r) => r.query)).toContain(`sum by (queue) (${METRIC}{queue=~"a\\\\.b|c"})`);
    expect(fake.requests.map((r) => r.query)).toContain(`sum by (queue) (${METRIC}{job="rabbitmq",queue="a.b"})`);
  });

  it("ignores series of label sets nobody asked for, and reads a rule without selector labels as one sum", async () => {
    fake.series = [queue("a", "1", 10, { region: "x" }), queue("a", "2", 10, { region: "y" }), queue("b", "4", 10, { region: "y" })];
    const rules = `
  - name: by_region
    provider: prom
    query: { series: ${METRIC}, selectorLabels: { queue: queue, region: region } }
  - name: total
    provider: prom
    query: { series: ${METRIC} }
`;
    const bridge = bridgeFor(config(fake.url, "", rules));
    const [ax, by] = await Promise.all([read(bridge, "by_region", "queue=a,region=x"), read(bridge, "by_region", "queue=b,region=y")]);
    expect([ax.body.items[0].value, by.body.items[0].value]).toEqual(["1", "4"]);
    expect(fake.requests.filter((r) => r.query.startsWith("sum"))).toHaveLength(1); // (a, y) was selected and ignored
    const total = await read(bridge, "total", "");
    expect(total.body.items[0].value).toBe("7");
    expect(fake.requests.map((r) => r.query)).toContain(`sum (${METRIC}{})`);
  });

  it.each([
    ["NaN", /the value is NaN/],
    ["+Inf", /the value is \+Inf/],
    ["-Inf", /the value is -Inf/],
  ])("a %s value is a 503, never a value", async (value, message) => {
    fake.respond = (q) =>
      q.query.startsWith("sum")
        ? { body: vector([{ metric: { queue: "orders" }, value: [NOW / 1000, value] }]) }
        : { body: vector([{ metric: { queue: "orders" }, value: [NOW / 1000, String((NOW - 1000) / 1000)] }]) };
    const a = await read(bridgeFor(config(fake.url)), "queue_ready", "queue=orders");
    expect(a.status).toBe(503);
    expect(a.body.message).toMatch(message);
    expect(a.body.message).toMatch(/queue="orders"/);
    expect(a.headers.get("retry-after")).toBe("1");
  });

  it("an empty answer is the rule's onEmpty: 503 by default, 404 with notFound", async () => {
    const rules = `
  - name: queue_ready_404
    provider: prom
    query: { series: ${METRIC}, selectorLabels: { queue: queue }, onEmpty: notFound }
`;
    const bridge = bridgeFor(config(fake.url, "", rules));
    const a = await read(bridge, "queue_ready", "queue=orders");
    expect(a.status).toBe(503);
    expect(a.body.items).toBeUndefined();
    expect((await read(bridge, "queue_ready_404", "queue=orders")).status).toBe(404);
  });

  it("an info that is only advice about the query (not a counter name) leaves the answer whole: the value is served", async () => {
    fake.series = [queue("orders", "5")];
    // the value query answers with the info; the age query is evaluated by the fake
    fake.respond = (q) => (q.query.includes("timestamp(") ? undefined : { body: vector([{ metric: { queue: "orders" }, value: [NOW / 1000, "5"] }], { infos: ["PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"queue_ready\""] }) });
    const a = await read(bridgeFor(config(fake.url)), "queue_ready", "queue=orders");
    expect(a.status).toBe(200);
    expect(a.body.items[0].value).toBe("5");
  });

  it("two samples for one label set are a 503, never a guess", async () => {
    const sample = { metric: { queue: "orders" }, value: [NOW / 1000, "1"] as [number, string] };
    fake.respond = () => ({ body: vector([sample, sample]) });
    const a = await read(bridgeFor(config(fake.url)), "queue_ready", "queue=orders");
    expect(a.status).toBe(503);
    expect(a.body.message).toMatch(/2 samples for one label set/);
  });

  it.each([
    ["warnings", { warnings: ["PromQL warning: encountered a mix of histograms and floats"] }, /partial answer: PromQL warning/],
    ["an info that says series were ignored", { infos: ["PromQL info: ignored histograms in a sum aggregation"] }, /partial answer: PromQL info: ignored/],
    ["a partial response (Thanos)", { warnings: ["partial response: store 10.0.0.7:10901 did not answer"] }, /partial answer: partial response/],
    ["isPartial (VictoriaMetrics cluster, a storage node down)", { isPartial: true }, /partial answer: the server marked the answer isPartial/],
  ])("an answer with %s is a failed read (503)", async (_name, extra, message) => {
    fake.series = [queue("orders", "5")];
    fake.respond = () => ({ body: vector([{ metric: { queue: "orders" }, value: [NOW / 1000, "5"] }], extra) });
    const a = await read(bridgeFor(config(fake.url)), "queue_ready", "queue=orders");
    expect(a.status).toBe(503);
    expect(a.body.message).toMatch(message);
    expect(a.body.items).toBeUndefined();
  });

  it.each([
    ["bad_data (400)", 400, { status: "error", errorType: "bad_data", error: "1:1: parse error" }, {}, 500, /metric queue_ready .*Prometheus refused the query; the rule's series or template is wrong \(bad_data, HTTP 400\)/, null],
    ["execution (422)", 422, { status: "error", errorType: "execution", error: "query processing would load too many samples" }, { "retry-after": "7" }, 503, /\(execution, HTTP 422\): query processing would load too many samples/, "7"],
    ["timeout (503)", 503, { status: "error", errorType: "timeout", error: "query timed out in expression evaluation" }, {}, 503, /\(timeout, HTTP 503\)/, "1"],
    ["HTTP 500 text", 500, "upstream connect error", {}, 503, /HTTP 500: upstream connect error/, "1"],
    ["401", 401, "Unauthorized", {}, 500, /refused the bridge's credentials; check the provider's auth/, null],
    ["429", 429, "slow down", {}, 503, /throttled/, "5"],
    ["an answer that is not the envelope", 200, { data: [] }, {}, 503, /not the Prometheus API's success envelope/, "1"],
    ["a matrix", 200, { status: "success", data: { resultType: "matrix", result: [] } }, {}, 503, /is a matrix, not an instant vector/, "1"],
  ])("%s → the right Status, never a value", async (_name, status, body, headers, code, message, retryAfter) => {
    fake.respond = () => ({ status, body, headers });
    const a = await read(bridgeFor(config(fake.url)), "queue_ready", "queue=orders");
    expect(a.status).toBe(code);
    expect(a.body.message).toMatch(message);
    expect(a.body.items).toBeUndefined();
    expect(a.headers.get("retry-after")).toBe(retryAfter);
  });

  it("a connection refused is a 503 naming the backend as unreachable", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const a = await read(bridgeFor(config(`http://127.0.0.1:${port}`)), "queue_ready", "queue=orders");
    expect(a.status).toBe(503);
    expect(a.body.message).toMatch(/backend unreachable.*ECONNREFUSED/);
  });

  it("a slow server is cut at timeoutSeconds: 503 (timed out), well before the server answers", async () => {
    fake.series = [queue("orders", "5")];
    fake.respond = (q) => (q.query.startsWith("min") ? { delayMs: 2_000, body: vector([]) } : undefined);
    const started = Date.now();
    const a = await read(bridgeFor(config(fake.url)), "queue_ready", "queue=orders");
    expect(a.status).toBe(503);
    expect(a.body.message).toMatch(/timed out/);
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it("a sample older than maxAgeSeconds is a 503 (lookback wider than maxAge), and lookbackSeconds is sent as lookback_delta and max_lookback", async () => {
    fake.series = [queue("orders", "5", 400)];
    const rules = `
  - name: queue_ready_wide
    provider: prom
    query: { series: ${METRIC}, selectorLabels: { queue: queue }, lookbackSeconds: 600 }
`;
    const bridge = bridgeFor(config(fake.url, "", rules));
    const a = await read(bridge, "queue_ready_wide", "queue=orders");
    expect(a.status).toBe(503);
    expect(a.body.message).toMatch(/older than maxAgeSeconds \(300\)/);
    expect(fake.requests.every((r) => r.lookbackDelta === "600")).toBe(true);
    // and as max_lookback, the name VictoriaMetrics reads (it ignores lookback_delta)
    expect(fake.requests.every((r) => r.maxLookback === "600")).toBe(true);
    // the default lookback (maxAgeSeconds) does not select it at all
    const b = await read(bridge, "queue_ready", "queue=orders");
    expect(b.status).toBe(503);
    expect(b.body.message).toMatch(/no series in the answer \(lookback_delta 300s\)/);
  });

  it.each([
    ["1.5e+15", "1500T"],
    ["1e-07", "100n"],
    ["0.1", "100m"],
    ["-2.5e3", "-2500"],
  ])("reads %s exactly as %s", async (text, quantity) => {
    fake.respond = (q) =>
      q.query.startsWith("sum")
        ? { body: vector([{ metric: { queue: "orders" }, value: [NOW / 1000, text] }]) }
        : { body: vector([{ metric: { queue: "orders" }, value: [NOW / 1000, String((NOW - 2000) / 1000)] }]) };
    const a = await read(bridgeFor(config(fake.url)), "queue_ready", "queue=orders");
    expect(a.body.items).toEqual([{ metricName: "queue_ready", metricLabels: { queue: "orders" }, timestamp: iso(NOW - 2000), value: quantity }]);
  });

  it("1e+21 is read exactly, then refused as a value the HPA cannot read back (500), never rounded", async () => {
    fake.respond = (q) =>
      q.query.startsWith("sum")
        ? { body: vector([{ metric: { queue: "orders" }, value: [NOW / 1000, "1e+21"] }]) }
        : { body: vector([{ metric: { queue: "orders" }, value: [NOW / 1000, String((NOW - 2000) / 1000)] }]) };
    const a = await read(bridgeFor(config(fake.url)), "queue_ready", "queue=orders");
    expect(a.status).toBe(500);
    expect(a.body.message).toMatch(/value 1000000000000000000000 of series .* cannot be read back exactly by the HPA \(its Quantity 1000E has more than 18 digits/);
  });

  it("sends the bearer token, basic auth and the tenant header; a missing secret is a 500 and nothing is sent", async () => {
    fake.series = [queue("orders", "5")];
    const bearer = bridgeFor(config(fake.url, "    auth: { bearerTokenEnv: PROM_TOKEN }\n    tenant: team-a"), { PROM_TOKEN: "s3cret" });
    expect((await read(bearer, "queue_ready", "queue=orders")).status).toBe(200);
    for (const r of fake.requests) {
      expect(r.headers["authorization"]).toBe("Bearer s3cret");
      expect(r.headers["x-scope-orgid"]).toBe("team-a");
    }
    fake.requests.length = 0;
    const basic = bridgeFor(config(fake.url, "    auth: { basicAuth: { usernameEnv: PROM_USER, passwordEnv: PROM_PASSWORD } }"), { PROM_USER: "émile", PROM_PASSWORD: "p:w" });
    expect((await read(basic, "queue_ready", "queue=orders")).status).toBe(200);
    expect(fake.requests[0]!.headers["authorization"]).toBe(`Basic ${Buffer.from("émile:p:w", "utf8").toString("base64")}`);
    expect(fake.requests[0]!.headers["x-scope-orgid"]).toBeUndefined();
    fake.requests.length = 0;
    const missing = await read(bridgeFor(config(fake.url, "    auth: { bearerTokenEnv: PROM_TOKEN }")), "queue_ready", "queue=orders");
    expect(missing.status).toBe(500);
    expect(missing.body.message).toMatch(/PROM_TOKEN named by auth is not set/);
    expect(fake.requests).toHaveLength(0);
  });

  it("a template rule sends one query, stamped with its evaluation time", async () => {
    const rules = `
  - name: consumer_lag
    provider: prom
    query:
      template: 'sum by (topic) (kafka_consumergroup_lag{<<.LabelMatchers>>}) - on(topic) group_left() sum by (topic) (kafka_committed{<<.LabelMatchers>>})'
      labels: { group: billing }
      selectorLabels: { topic: topic }
`;
    fake.respond = () => ({ body: vector([{ metric: { topic: "payments" }, value: [(NOW - 2000) / 1000, "42"] }]) });
    const a = await read(bridgeFor(config(fake.url, "", rules)), "consumer_lag", "topic=payments");
    expect(a.body.items).toEqual([{ metricName: "consumer_lag", metricLabels: { topic: "payments" }, timestamp: iso(NOW - 2000), value: "42" }]);
    expect(fake.requests.map((r) => r.query)).toEqual([
      `sum by (topic) (sum by (topic) (kafka_consumergroup_lag{group="billing",topic="payments"}) - on(topic) group_left() sum by (topic) (kafka_committed{group="billing",topic="payments"}))`,
    ]);
  });
});

describe("prometheus config", () => {
  const HEAD = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { prom: { type: prometheus, url: "http://prometheus:9090" } }
metrics:
`;

  function problems(rules: string, head = HEAD): string {
    try {
      loadConfig(head + rules, "bridge.yaml");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).issues.map(formatIssue).join("\n");
    }
    throw new Error("config was accepted");
  }

  it("fills defaults", () => {
    const { config } = loadConfig(`${HEAD}  - { name: m, provider: prom, query: { series: up } }\n`, "x.yaml");
    expect(config.metrics[0]!.query).toEqual({ series: "up", labels: {}, selectorLabels: {}, onEmpty: "unavailable" });
    expect(config.providers["prom"]!.config).toEqual({ flavour: "generic", url: "http://prometheus:9090", timeoutSeconds: 2, batchWindowSeconds: 0.01, maxBatchSize: 100 });
  });

  it("refuses bad names, both or neither of series and template, and inline secrets, with line and path", () => {
    const text = problems(`  - name: a
    provider: prom
    query: { series: "not a metric", labels: { "bad-label": x, __name__: y } }
  - name: b
    provider: prom
    query: { selectorLabels: { queue: "queue name" } }
  - name: c
    provider: prom
    query: { series: up, template: "up{<<.LabelMatchers>>}" }
  - name: d
    provider: prom
    query: { series: up, labels: { queue: x }, selectorLabels: { q: queue } }
`);
    expect(text).toMatch(/bridge\.yaml:7:\d+: metrics\[0\]\.query\.series: must be a Prometheus metric name/);
    expect(text).toMatch(/metrics\[0\]\.query\.labels\.bad-label: .*must be a Prometheus label name/);
    expect(text).toMatch(/metrics\[0\]\.query\.labels\.__name__: .*reserved by Prometheus/);
    expect(text).toMatch(/metrics\[1\]\.query\.selectorLabels\.queue: .*must be a Prometheus label name/);
    expect(text).toMatch(/metrics\[1\]\.query: needs exactly one of series/);
    expect(text).toMatch(/metrics\[2\]\.query: needs exactly one of series/);
    expect(text).toMatch(/metrics\[3\]\.query\.labels\.queue: queue is also mapped from the selector label q/);
    const provider = problems(`  - { name: m, provider: prom, query: { series: up } }\n`, HEAD.replace(`url: "http://prometheus:9090"`, `url: "ftp://x", auth: { bearerToken: abc }`));
    expect(provider).toMatch(/providers\.prom\.url/);
    expect(provider).toMatch(/providers\.prom\.auth/);
  });

  it("refuses a template without the placeholder, at the template key", () => {
    const text = problems(`  - name: t
    provider: prom
    query:
      template: sum(rate(http_requests_total[5m]))
`);
    expect(text).toMatch(/bridge\.yaml:8:\d+: metrics\[0\]\.query\.template: must contain the matcher placeholder <<\.LabelMatchers>>/);
  });

  it("refuses a template with a vector selector lacking the placeholder, naming its line and column in the template", () => {
    const text = problems(`  - name: t
    provider: prom
    query:
      template: |
        sum(rate(http_requests_total{<<.LabelMatchers>>}[5m]))
          / sum(http_requests_capacity)
`);
    expect(text).toMatch(/bridge\.yaml:8:\d+: metrics\[0\]\.query\.template: template line 2, column 9: vector selector http_requests_capacity has no <<\.LabelMatchers>>/);
  });

  it("parses templates again at start-up, before serving, for a config validated before the parser was loaded (Node, Lambda)", () => {
    const { config } = loadConfig(`${HEAD}  - { name: t, provider: prom, query: { template: "sum(x{<<.LabelMatchers>>})" } }\n`, "x.yaml");
    // what the placeholder-only check of a config loaded before the implementation lets through
    (config.metrics[0]!.query as { template: string }).template = "sum(x{<<.LabelMatchers>>})\n  / sum(y)";
    expect(() => fromConfig(config, { env: {}, now: () => NOW }, { log: () => {} })).toThrow(
      /invalid metric rules:\nmetric t: the template is not valid PromQL \(line 2, column 9\): .*vector selector y has no <<\.LabelMatchers>>/,
    );
  });
});
