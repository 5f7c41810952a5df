/**
 * The aws-cloudwatch provider through the real AWS SDK against the
 * CloudWatch fake (`test/fakes/cloudwatch.ts`, AWS JSON 1.0), served by the
 * real bridge app: values and their timestamps, statistics, batching and
 * coalescing proven by the calls the fake recorded, per-query failure
 * isolation, `onEmpty`, metric math, pagination, errors and credentials.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { startNodeServer } from "../../functions/node.ts";
import type { CloudWatchProvider } from "../../shared/providers/aws-cloudwatch/index.ts";
import { startCloudWatchFake, type CloudWatchFake } from "../fakes/cloudwatch.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
/** A whole minute, so CloudWatch periods line up with the test's arithmetic. */
const NOW = 1_800_000_000_000;
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");

function config(endpoint: string, metrics: string, provider = "", credentials = "{ source: static, accessKeyId: AKIDTEST, secretAccessKey: test }") {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: 10 }
providers:
  cw:
    type: aws-cloudwatch
    region: us-east-1
    endpoint: ${endpoint}
    credentials: ${credentials}
    timeoutSeconds: 0.5
    maxAttempts: 1
${provider}
metrics:
${metrics}
`;
}

const SQS_RULE = `
  - name: sqs_visible
    provider: cw
    query:
      namespace: AWS/SQS
      metricName: ApproximateNumberOfMessagesVisible
      stat: Maximum
      period: 60
      dimensionLabels: { queue: QueueName }
`;

function bridgeWithClock(text: string, env: Record<string, string> = {}) {
  const clock = { now: NOW };
  const bridge = buildBridge(text, "test.yaml", { env, now: () => clock.now }, { log: () => {} });
  return { bridge, clock, provider: bridge.providers.get("cw") as CloudWatchProvider };
}

/** Poll `condition` every 10 ms until it holds or `ms` pass (then the caller's expect reports it). */
async function waitFor(condition: () => boolean, ms: number): Promise<void> {
  for (let waited = 0; !condition() && waited < ms; waited += 10) await new Promise((r) => setTimeout(r, 10));
}

async function read(bridge: Bridge, metric: string, selector: string) {
  const res = await bridge.app.request(`${NS}/${metric}?labelSelector=${encodeURIComponent(selector)}`);
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

describe("aws-cloudwatch provider against the CloudWatch fake", () => {
  let cw: CloudWatchFake;
  beforeAll(async () => {
    cw = await startCloudWatchFake();
  });
  afterAll(async () => cw?.close());
  afterEach(() => {
    cw.clear();
    cw.calls.length = 0;
    cw.behaviour = "normal";
    cw.pageSize = Number.POSITIVE_INFINITY;
  });

  const sqs = (queue: string) => ({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: queue } });

  it("reports the newest datapoint in the look-back window with the end of its period as timestamp and window = period", async () => {
    cw.put(sqs("jobs"), [
      { at: NOW - 250_000, value: 3 },
      { at: NOW - 170_000, value: 11 },
      { at: NOW - 130_000, value: 7 }, // same period as 11 → Maximum 11
    ]);
    const { bridge } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
    const a = await read(bridge, "sqs_visible", "queue=jobs");
    expect(a.status).toBe(200);
    expect(a.body.items).toEqual([
      {
        metricName: "sqs_visible",
        metricLabels: { queue: "jobs" },
        // the period starting at NOW-180 s ends at NOW-120 s
        timestamp: iso(NOW - 120_000),
        window: 60,
        value: "11",
      },
    ]);
    const call = cw.getMetricDataCalls[0]!;
    expect(call.target).toBe("GraniteServiceVersion20100801.GetMetricData");
    expect(call.body.MetricDataQueries).toEqual([
      {
        Id: "q0",
        MetricStat: {
          Metric: { Namespace: "AWS/SQS", MetricName: "ApproximateNumberOfMessagesVisible", Dimensions: [{ Name: "QueueName", Value: "jobs" }] },
          Period: 60,
          Stat: "Maximum",
        },
        ReturnData: true,
      },
    ]);
    expect(call.body.EndTime).toBe(NOW / 1000);
    expect(call.body.StartTime).toBe(NOW / 1000 - 300); // default look-back max(300, 5 × 60)
    expect(call.body.ScanBy).toBe("TimestampDescending");
  });

  it("caps the timestamp of the period in progress at the read time", async () => {
    cw.put(sqs("jobs"), [{ at: NOW - 20_000, value: 5 }]);
    const { bridge } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
    const a = await read(bridge, "sqs_visible", "queue=jobs");
    expect(a.body.items[0]).toMatchObject({ value: "5", timestamp: iso(NOW), window: 60 });
  });

  it("sends percentiles and other statistics as written, with static and mapped dimensions", async () => {
    const alb = { namespace: "AWS/ApplicationELB", metricName: "TargetResponseTime", dimensions: { LoadBalancer: "app/web/50dc6c495c0c9188", TargetGroup: "targetgroup/web/6d0ecf831eec9f09" } };
    cw.put(alb, Array.from({ length: 100 }, (_, i) => ({ at: NOW - 110_000 + i * 100, value: (i + 1) / 1000 })));
    const rule = `
  - name: alb_p99
    provider: cw
    query:
      namespace: AWS/ApplicationELB
      metricName: TargetResponseTime
      stat: p99
      period: 60
      dimensions: { LoadBalancer: app/web/50dc6c495c0c9188 }
      dimensionLabels:
        tg: { dimension: TargetGroup, values: { web: targetgroup/web/6d0ecf831eec9f09 } }
`;
    const { bridge } = bridgeWithClock(config(cw.endpoint, rule));
    const a = await read(bridge, "alb_p99", "tg=web");
    expect(a.status).toBe(200);
    expect(a.body.items[0]).toMatchObject({ metricLabels: { tg: "web" }, value: "99m" });
    expect(cw.getMetricDataCalls[0]!.body.MetricDataQueries[0].MetricStat).toMatchObject({
      Stat: "p99",
      Metric: {
        Dimensions: [
          { Name: "LoadBalancer", Value: "app/web/50dc6c495c0c9188" },
          { Name: "TargetGroup", Value: "targetgroup/web/6d0ecf831eec9f09" },
        ],
      },
    });
    const outside = await read(bridge, "alb_p99", "tg=api");
    expect(outside.status).toBe(404);
    expect(outside.body.message).toMatch(/tg "api" is not served by this rule/);
  });

  it("sends N concurrent reads of different series as one GetMetricData call", async () => {
    const queues = Array.from({ length: 40 }, (_, i) => `q${i}`);
    queues.forEach((q, i) => cw.put(sqs(q), [{ at: NOW - 90_000, value: i }]));
    const { bridge, provider } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
    const answers = await Promise.all(queues.map((q) => read(bridge, "sqs_visible", `queue=${q}`)));
    answers.forEach((a, i) => expect(a.body.items[0].value).toBe(String(i)));
    expect(cw.getMetricDataCalls).toHaveLength(1);
    expect(cw.getMetricDataCalls[0]!.body.MetricDataQueries).toHaveLength(40);
    expect(provider.batcher.stats).toMatchObject({ calls: 1, items: 40 });
  });

  it("batches reads of different rules, each judged against its own look-back window", async () => {
    cw.put(sqs("jobs"), [{ at: NOW - 500_000, value: 4 }]);
    const rules = `${SQS_RULE}
  - name: sqs_visible_long
    provider: cw
    query:
      namespace: AWS/SQS
      metricName: ApproximateNumberOfMessagesVisible
      stat: Maximum
      period: 60
      lookbackSeconds: 900
      dimensionLabels: { queue: QueueName }
`;
    const { bridge } = bridgeWithClock(config(cw.endpoint, rules));
    const [short, long] = await Promise.all([read(bridge, "sqs_visible", "queue=jobs"), read(bridge, "sqs_visible_long", "queue=jobs")]);
    expect(cw.getMetricDataCalls).toHaveLength(1);
    expect(cw.getMetricDataCalls[0]!.body.StartTime).toBe(NOW / 1000 - 900);
    expect(long.body.items[0]).toMatchObject({ value: "4", timestamp: iso(NOW - 480_000) }); // period [NOW-540 s, NOW-480 s)
    // the datapoint is outside the 300 s window of the other rule: no value, never 0
    expect(short.status).toBe(503);
    expect(short.body.message).toMatch(/no datapoint in the last 300 s.*no value is reported/);
  });

  it("coalesces identical concurrent reads into one query", async () => {
    cw.put(sqs("jobs"), [{ at: NOW - 90_000, value: 8 }]);
    const { bridge } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
    const answers = await Promise.all(Array.from({ length: 25 }, () => read(bridge, "sqs_visible", "queue=jobs")));
    for (const a of answers) expect(a.body.items[0].value).toBe("8");
    expect(cw.getMetricDataCalls).toHaveLength(1);
    expect(cw.getMetricDataCalls[0]!.body.MetricDataQueries).toHaveLength(1);
  });

  it("never puts more than maxQueriesPerCall queries in one call", async () => {
    const queues = Array.from({ length: 12 }, (_, i) => `m${i}`);
    queues.forEach((q) => cw.put(sqs(q), [{ at: NOW - 90_000, value: 1 }]));
    const { bridge } = bridgeWithClock(config(cw.endpoint, SQS_RULE, "    maxQueriesPerCall: 5"));
    const answers = await Promise.all(queues.map((q) => read(bridge, "sqs_visible", `queue=${q}`)));
    for (const a of answers) expect(a.status).toBe(200);
    expect(cw.getMetricDataCalls.map((c) => c.body.MetricDataQueries.length)).toEqual([5, 5, 2]);
  });

  it("re-uses a read for cacheTTLSeconds, then reads again (refresh-ahead off)", async () => {
    cw.put(sqs("jobs"), [{ at: NOW - 90_000, value: 8 }]);
    const { bridge, clock } = bridgeWithClock(config(cw.endpoint, SQS_RULE, "    refreshAhead: false"));
    expect((await read(bridge, "sqs_visible", "queue=jobs")).body.items[0].value).toBe("8");
    cw.put(sqs("jobs"), [{ at: NOW + 5_000, value: 20 }]);
    clock.now += 9_000;
    expect((await read(bridge, "sqs_visible", "queue=jobs")).body.items[0].value).toBe("8");
    expect(cw.getMetricDataCalls).toHaveLength(1);
    clock.now += 2_000; // 11 s > cacheTTLSeconds
    const fresh = await read(bridge, "sqs_visible", "queue=jobs");
    expect(fresh.body.items[0]).toMatchObject({ value: "20", timestamp: iso(NOW + 11_000) });
    expect(cw.getMetricDataCalls).toHaveLength(2);
  });

  describe("refresh-ahead (the HPA controller's 5 blocking workers read one series at a time)", () => {
    /** Read `queues` one after another, each read awaited (a blocking sync worker), at clock time `at` (ms after NOW). */
    async function pass(bridge: Bridge, clock: { now: number }, queues: readonly string[], at: number) {
      clock.now = NOW + at;
      const values: string[] = [];
      for (const q of queues) {
        const a = await read(bridge, "sqs_visible", `queue=${q}`);
        values.push(a.status === 200 ? a.body.items[0].value : `status ${a.status}`);
      }
      return values;
    }
    const settled = (provider: CloudWatchProvider) => waitFor(() => provider.cache.inflight === 0, 2_000);

    it("sequential reads of M recently read series cost ⌈M/500⌉ GetMetricData calls per round (0.9 × TTL), every read after the warm-up a hit", async () => {
      const queues = Array.from({ length: 510 }, (_, i) => `rq${i}`);
      queues.forEach((q, i) => cw.put(sqs(q), [{ at: NOW - 90_000, value: i }]));
      // cacheTTLSeconds 10: rounds every 9 s; timeoutSeconds 4: a 500-query call to the in-process fake on a busy machine
      const { bridge, clock, provider } = bridgeWithClock(config(cw.endpoint, SQS_RULE).replace("timeoutSeconds: 0.5", "timeoutSeconds: 4"));
      // warm-up: every series read once (concurrently, to keep the test short; 2 calls)
      const first = await Promise.all(queues.map((q) => read(bridge, "sqs_visible", `queue=${q}`)));
      expect(first.map((a) => a.body.items[0].value)).toEqual(queues.map((_, i) => String(i)));
      const warmUp = cw.getMetricDataCalls.length;
      // then only blocking sequential reads, one series at a time
      for (let at = 4_500; at <= 40_500; at += 4_500) {
        const values = await pass(bridge, clock, queues, at);
        expect(values.filter((v, i) => v !== String(i))).toEqual([]);
        await settled(provider);
      }
      // rounds at 9, 18, 27 and 36 s, each ⌈510/500⌉ = 2 calls of at most 500 queries
      const rounds = cw.getMetricDataCalls.slice(warmUp).map((c) => c.body.MetricDataQueries.length);
      expect(rounds.sort((a, b) => a - b)).toEqual([10, 10, 10, 10, 500, 500, 500, 500]);
      expect(provider.cache.stats.loads - provider.cache.stats.refreshes).toBe(510); // no read after the warm-up missed
      // the timestamps keep the datapoint's real age, not the refresh time
      const a = await read(bridge, "sqs_visible", "queue=rq7");
      expect(a.body.items[0]).toMatchObject({ value: "7", timestamp: iso(NOW - 60_000) });
    });

    it("a series not read since its last refresh is dropped; a value written later is served after the next round", async () => {
      cw.put(sqs("a"), [{ at: NOW - 90_000, value: 1 }]);
      cw.put(sqs("b"), [{ at: NOW - 90_000, value: 2 }]);
      const { bridge, clock, provider } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
      for (const at of [0, 3_000, 6_000]) await pass(bridge, clock, ["a", "b"], at);
      const before = cw.getMetricDataCalls.length;
      cw.put(sqs("a"), [{ at: NOW + 5_000, value: 10 }]);
      await pass(bridge, clock, ["a"], 9_000); // round: both were read since their load
      await settled(provider);
      for (const at of [12_000, 15_000, 18_000]) {
        expect(await pass(bridge, clock, ["a"], at)).toEqual(["10"]);
        await settled(provider);
      }
      // b, not read after 6 s, is refreshed at 9 s and then no more (18 s round: a alone)
      const queried = cw.getMetricDataCalls.slice(before).map((c) => c.body.MetricDataQueries.map((q: any) => q.MetricStat.Metric.Dimensions[0].Value).sort());
      expect(queried).toEqual([["a", "b"], ["a"]]);
      expect(provider.cache.remembered.keys).toBe(1);
      // nobody reads any more: no call, however much time passes
      clock.now = NOW + 120_000;
      await new Promise((r) => setTimeout(r, 50));
      expect(cw.getMetricDataCalls.length - before).toBe(2);
    });

    it("a failed refresh is never a value: the old one is served only within its TTL (= maxAgeSeconds here), then reads fail with a Status", async () => {
      cw.put(sqs("jobs"), [{ at: NOW - 20_000, value: 8 }]); // period [NOW-60 s, NOW): stamped with the read time
      const text = config(cw.endpoint, SQS_RULE).replace("maxAgeSeconds: 600", "maxAgeSeconds: 10");
      const { bridge, clock, provider } = bridgeWithClock(text);
      await pass(bridge, clock, ["jobs"], 0);
      await pass(bridge, clock, ["jobs"], 3_000);
      cw.behaviour = "internal";
      expect(await pass(bridge, clock, ["jobs"], 9_000)).toEqual(["8"]); // starts the round
      await settled(provider);
      expect(provider.cache.stats.refreshFailures).toBe(1);
      clock.now = NOW + 9_900;
      const old = await read(bridge, "sqs_visible", "queue=jobs");
      expect(old.body.items[0]).toMatchObject({ value: "8", timestamp: iso(NOW) }); // its real age: 9.9 s
      clock.now = NOW + 10_100;
      const failed = await read(bridge, "sqs_visible", "queue=jobs");
      expect(failed.status).toBe(503);
      expect(failed.body.items).toBeUndefined();
      expect(failed.body.message).toMatch(/InternalError|failed/);
    });

    it("close() cancels the round timer and aborts a refresh in flight (the fake sees its connection closed); no round after", async () => {
      cw.hung.length = 0;
      cw.put(sqs("jobs"), [{ at: NOW - 90_000, value: 8 }]);
      const { bridge, clock, provider } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
      await pass(bridge, clock, ["jobs"], 0);
      await pass(bridge, clock, ["jobs"], 3_000);
      expect(provider.cache.refreshTimerArmed).toBe(true);
      cw.behaviour = "hang";
      await pass(bridge, clock, ["jobs"], 9_000);
      await waitFor(() => cw.hung.length === 1, 2_000);
      expect(cw.hung[0]!.closed).toBe(false);
      provider.close();
      expect(provider.cache.refreshTimerArmed).toBe(false);
      await waitFor(() => cw.hung[0]!.closed, 1_000);
      expect(cw.hung[0]!.closed).toBe(true);
      cw.behaviour = "normal";
      const calls = cw.getMetricDataCalls.length;
      await pass(bridge, clock, ["jobs"], 12_000); // expired: an ordinary load
      await pass(bridge, clock, ["jobs"], 15_000);
      await pass(bridge, clock, ["jobs"], 30_000);
      expect(provider.cache.refreshTimerArmed).toBe(false);
      expect(provider.cache.stats.refreshes).toBe(1);
      expect(cw.getMetricDataCalls.length - calls).toBe(2); // 12 s and 30 s: TTL expiries, no refresh
      cw.hung.length = 0;
    });

    it("the Node server's close() stops refresh-ahead (real clock, real HTTP)", async () => {
      cw.put(sqs("jobs"), [{ at: Date.now() - 90_000, value: 8 }]);
      const { config: loaded } = loadConfig(config(cw.endpoint, SQS_RULE), "t.yaml");
      const server = await startNodeServer({ config: loaded, port: 0, log: () => {}, env: { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" } });
      const provider = server.bridge.providers.get("cw") as CloudWatchProvider;
      try {
        for (let i = 0; i < 2; i++) {
          const res = await fetch(`${server.url}${NS}/sqs_visible?labelSelector=queue%3Djobs`);
          expect(res.status).toBe(200);
        }
        expect(provider.cache.refreshTimerArmed).toBe(true);
      } finally {
        await server.close();
      }
      expect(provider.cache.refreshTimerArmed).toBe(false);
    });
  });

  it("a selector naming several series succeeds only if all of them do; the failing query fails only its own reads", async () => {
    cw.put(sqs("good"), [{ at: NOW - 90_000, value: 2 }]);
    cw.put(sqs("other"), [{ at: NOW - 90_000, value: 3 }]);
    // "empty" has no datapoint
    const { bridge } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
    const [both, good, other] = await Promise.all([
      read(bridge, "sqs_visible", "queue in (good,empty)"),
      read(bridge, "sqs_visible", "queue=good"),
      read(bridge, "sqs_visible", "queue in (good,other)"),
    ]);
    expect(cw.getMetricDataCalls).toHaveLength(1);
    expect(both.status).toBe(503);
    expect(both.body.message).toMatch(/QueueName=empty.*no datapoint/);
    expect(good.body.items.map((i: any) => i.value)).toEqual(["2"]);
    expect(other.body.items.map((i: any) => [i.metricLabels.queue, i.value])).toEqual([
      ["good", "2"],
      ["other", "3"],
    ]);
  });

  it("per-query StatusCode Forbidden is 500 and InternalError 503, for those reads only", async () => {
    cw.put(sqs("jobs"), [{ at: NOW - 90_000, value: 6 }]);
    cw.failMetric("CPUUtilization", "Forbidden");
    cw.failMetric("NetworkIn", "InternalError");
    const rules = `${SQS_RULE}
  - name: cpu
    provider: cw
    query: { namespace: AWS/EC2, metricName: CPUUtilization, stat: Average, period: 60, accountId: "123456789012" }
  - name: net
    provider: cw
    query: { namespace: AWS/EC2, metricName: NetworkIn, stat: Sum, period: 300 }
`;
    const { bridge } = bridgeWithClock(config(cw.endpoint, rules));
    const [ok, cpu, net] = await Promise.all([read(bridge, "sqs_visible", "queue=jobs"), read(bridge, "cpu", ""), read(bridge, "net", "")]);
    expect(cw.getMetricDataCalls).toHaveLength(1);
    expect(cw.getMetricDataCalls[0]!.body.MetricDataQueries.find((q: any) => q.MetricStat.Metric.MetricName === "CPUUtilization").AccountId).toBe("123456789012");
    expect(ok.body.items[0].value).toBe("6");
    expect(cpu.status).toBe(500);
    expect(cpu.body.message).toMatch(/provider cw: GetMetricData for metric cpu .*Forbidden/);
    expect(net.status).toBe(503);
    expect(net.headers.get("retry-after")).not.toBeNull();
    expect(net.body.message).toMatch(/InternalError/);
  });

  it("onEmpty: 503 by default, 404 when asked, and a written value only when the rule's author wrote one", async () => {
    const rules = `${SQS_RULE}
  - name: sqs_visible_404
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName }, onEmpty: notFound }
  - name: sqs_visible_idle_is_zero
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName }, onEmpty: { value: "0" } }
`;
    const { bridge } = bridgeWithClock(config(cw.endpoint, rules));
    const [unavailable, missing, zero] = await Promise.all([
      read(bridge, "sqs_visible", "queue=idle"),
      read(bridge, "sqs_visible_404", "queue=idle"),
      read(bridge, "sqs_visible_idle_is_zero", "queue=idle"),
    ]);
    expect(unavailable.status).toBe(503);
    expect(unavailable.headers.get("retry-after")).not.toBeNull();
    expect(missing.status).toBe(404);
    expect(missing.body.message).toMatch(/no datapoint in the last 300 s/);
    expect(zero.status).toBe(200);
    expect(zero.body.items[0]).toEqual({ metricName: "sqs_visible_idle_is_zero", metricLabels: { queue: "idle" }, timestamp: iso(NOW), value: "0" });
  });

  it("refuses a datapoint older than maxAgeSeconds even inside the look-back window", async () => {
    cw.put(sqs("jobs"), [{ at: NOW - 280_000, value: 6 }]);
    const text = config(cw.endpoint, SQS_RULE).replace("maxAgeSeconds: 600", "maxAgeSeconds: 120");
    const a = await read(bridgeWithClock(text).bridge, "sqs_visible", "queue=jobs");
    expect(a.status).toBe(503);
    expect(a.body.message).toMatch(/older than maxAgeSeconds \(120\)/);
  });

  it("evaluates a metric-math expression, batched beside other rules with its ids renamed", async () => {
    const dims = { TargetGroup: "targetgroup/web/6d0ecf831eec9f09", LoadBalancer: "app/web/50dc6c495c0c9188" };
    cw.put({ namespace: "AWS/ApplicationELB", metricName: "RequestCount", dimensions: dims }, [
      { at: NOW - 100_000, value: 300 },
      { at: NOW - 95_000, value: 300 },
    ]);
    cw.put({ namespace: "AWS/ApplicationELB", metricName: "HealthyHostCount", dimensions: dims }, [{ at: NOW - 100_000, value: 4 }]);
    cw.put(sqs("jobs"), [{ at: NOW - 90_000, value: 6 }]);
    const rules = `${SQS_RULE}
  - name: alb_requests_per_healthy_host
    provider: cw
    query:
      expression: "requests / (hosts * 1)"
      metrics:
        requests: { namespace: AWS/ApplicationELB, metricName: RequestCount, stat: Sum, dimensions: { LoadBalancer: app/web/50dc6c495c0c9188 } }
        hosts: { namespace: AWS/ApplicationELB, metricName: HealthyHostCount, stat: Minimum, dimensions: { LoadBalancer: app/web/50dc6c495c0c9188 } }
      period: 60
      dimensionLabels:
        tg: { dimension: TargetGroup, values: { web: targetgroup/web/6d0ecf831eec9f09 } }
`;
    const { bridge } = bridgeWithClock(config(cw.endpoint, rules));
    const [sqsAnswer, alb] = await Promise.all([read(bridge, "sqs_visible", "queue=jobs"), read(bridge, "alb_requests_per_healthy_host", "tg=web")]);
    expect(sqsAnswer.body.items[0].value).toBe("6");
    expect(alb.status).toBe(200);
    expect(alb.body.items[0]).toMatchObject({ value: "150", window: 60, timestamp: iso(NOW - 60_000) });
    const queries = cw.getMetricDataCalls[0]!.body.MetricDataQueries;
    expect(cw.getMetricDataCalls).toHaveLength(1);
    const expression = queries.find((q: any) => q.Expression !== undefined);
    expect(expression.Expression).toMatch(/^q\d_requests \/ \(q\d_hosts \* 1\)$/);
    expect(queries.filter((q: any) => q.ReturnData === false)).toHaveLength(2);
  });

  it("an invalid query fails only its own reads: the rejected call is split until it stands alone", async () => {
    cw.put(sqs("a"), [{ at: NOW - 90_000, value: 1 }]);
    cw.put(sqs("b"), [{ at: NOW - 90_000, value: 2 }]);
    cw.put(sqs("c"), [{ at: NOW - 90_000, value: 3 }]);
    const rules = `${SQS_RULE}
  - name: broken_math
    provider: cw
    query:
      expression: "FOO(m1)"
      metrics: { m1: { namespace: AWS/SQS, metricName: NumberOfMessagesSent, stat: Sum } }
      period: 60
`;
    const { bridge, provider } = bridgeWithClock(config(cw.endpoint, rules));
    const [a, broken, b, c] = await Promise.all([
      read(bridge, "sqs_visible", "queue=a"),
      read(bridge, "broken_math", ""),
      read(bridge, "sqs_visible", "queue=b"),
      read(bridge, "sqs_visible", "queue=c"),
    ]);
    expect([a, b, c].map((x) => x.body.items[0].value)).toEqual(["1", "2", "3"]);
    expect(broken.status).toBe(500);
    expect(broken.body.message).toMatch(/provider cw: GetMetricData for metric broken_math .*invalid.*Unrecognized function FOO/);
    expect(provider.batcher.stats.splits).toBeGreaterThan(0);
  });

  it("follows NextToken pages and merges them", async () => {
    const queues = ["p1", "p2", "p3"];
    queues.forEach((q, i) =>
      cw.put(sqs(q), [
        { at: NOW - 250_000, value: 100 + i },
        { at: NOW - 190_000, value: 200 + i },
        { at: NOW - 70_000, value: 300 + i },
      ]),
    );
    cw.pageSize = 2;
    const { bridge } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
    const answers = await Promise.all(queues.map((q) => read(bridge, "sqs_visible", `queue=${q}`)));
    expect(answers.map((a) => a.body.items[0].value)).toEqual(["300", "301", "302"]);
    expect(cw.getMetricDataCalls).toHaveLength(1);
    expect(cw.calls.length).toBeGreaterThanOrEqual(5); // 9 datapoints, 2 per page
    expect(cw.calls.slice(1).every((c) => typeof c.body.NextToken === "string")).toBe(true);
  });

  it("maps whole-call failures to Status: throttling and outages 503 with Retry-After, refused credentials 500, a hang times out", async () => {
    const { bridge, clock } = bridgeWithClock(config(cw.endpoint, SQS_RULE).replace("cacheTTLSeconds: 10", "cacheTTLSeconds: 0"));
    cw.behaviour = "throttle";
    const throttled = await read(bridge, "sqs_visible", "queue=jobs");
    expect(throttled.status).toBe(503);
    expect(throttled.headers.get("retry-after")).toBe("5"); // throttled without a hint: THROTTLED_RETRY_AFTER_SECONDS
    expect(throttled.body.message).toMatch(/provider cw: GetMetricData .* throttled/);
    clock.now += 31_000; // past every back-off: each behaviour below reaches the fake
    cw.behaviour = "denied";
    const denied = await read(bridge, "sqs_visible", "queue=jobs");
    expect(denied.status).toBe(500);
    expect(denied.body.message).toMatch(/provider cw: .*refused the bridge's credentials/);
    cw.behaviour = "internal";
    const internal = await read(bridge, "sqs_visible", "queue=jobs");
    expect(internal.status).toBe(503);
    expect(internal.headers.get("retry-after")).toBe("1"); // other backend failures: 1 s
    clock.now += 31_000;
    cw.behaviour = "garbage";
    const garbage = await read(bridge, "sqs_visible", "queue=jobs");
    expect(garbage.status).toBe(503);
    clock.now += 31_000;
    cw.behaviour = "hang";
    const hung = await read(bridge, "sqs_visible", "queue=jobs");
    expect(hung.status).toBe(503);
    expect(hung.body.message).toMatch(/timed out/);
    for (const x of [throttled, denied, garbage, hung]) expect(x.body.items).toBeUndefined();
  });

  it("a throttled metric is not asked again by every read: the failure is kept for CloudWatch's Retry-After (clamped to 30 s) and sent on", async () => {
    cw.put(sqs("jobs"), [{ at: NOW - 90_000, value: 6 }]);
    for (const [hint, expected, waitMs] of [["7", "7", 7_000], ["3600", "30", 30_000]] as const) {
      const { bridge, clock } = bridgeWithClock(config(cw.endpoint, SQS_RULE).replace("cacheTTLSeconds: 10", "cacheTTLSeconds: 0"));
      cw.behaviour = "throttle";
      cw.throttleRetryAfter = hint;
      const before = cw.getMetricDataCalls.length;
      const answers = [];
      for (let i = 0; i < 5; i++) {
        const r = await read(bridge, "sqs_visible", "queue=jobs");
        answers.push([r.status, r.headers.get("retry-after"), r.headers.get("cache-control")]);
      }
      expect(answers).toEqual(Array(5).fill([503, expected, "no-store"]));
      expect(cw.getMetricDataCalls.length - before).toBe(1); // one backend call for five reads
      cw.behaviour = "normal";
      clock.now += waitMs - 1_000;
      expect((await read(bridge, "sqs_visible", "queue=jobs")).status).toBe(503); // still backing off
      clock.now += 1_000;
      expect((await read(bridge, "sqs_visible", "queue=jobs")).body.items[0].value).toBe("6");
      expect(cw.getMetricDataCalls.length - before).toBe(2);
    }
    cw.throttleRetryAfter = undefined;
  });

  it("a hanging CloudWatch: the SDK request is aborted at the bridge deadline, not at timeoutSeconds (the fake sees the connection closed)", async () => {
    cw.hung.length = 0;
    cw.behaviour = "hang";
    const app = buildBridge(config(cw.endpoint, SQS_RULE).replace("timeoutSeconds: 0.5", "timeoutSeconds: 4"), "t.yaml", { env: {}, now: () => NOW }, { log: () => {}, deadlineMs: 300 }).app;
    const res = await app.request(`${NS}/sqs_visible?labelSelector=queue%3Djobs`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as any).message).toMatch(/did not answer within 300 ms/);
    expect(cw.hung).toHaveLength(1);
    // The abort reaches the socket promptly; the 4 s per-call limit would leave it open far longer.
    await waitFor(() => cw.hung[0]!.closed, 1_000);
    expect(cw.hung[0]!.closed).toBe(true);
    cw.hung.length = 0;
  });

  it("a client that disconnects cancels the backend call (real HTTP through the Node server)", async () => {
    cw.hung.length = 0;
    cw.behaviour = "hang";
    const { config: loaded } = loadConfig(config(cw.endpoint, SQS_RULE).replace("timeoutSeconds: 0.5", "timeoutSeconds: 4"), "t.yaml");
    const server = await startNodeServer({ config: loaded, port: 0, log: () => {}, env: { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" } });
    try {
      const client = request(`${server.url}${NS}/sqs_visible?labelSelector=queue%3Djobs`);
      client.on("error", () => {});
      client.end();
      await waitFor(() => cw.hung.length === 1, 2_000);
      expect(cw.hung[0]!.closed).toBe(false);
      client.destroy(); // the HPA's client gives up
      await waitFor(() => cw.hung[0]!.closed, 1_000);
      expect(cw.hung[0]!.closed).toBe(true); // well before the 3 s deadline and the 4 s per-call limit
    } finally {
      cw.hung.length = 0;
      await server.close();
    }
  });

  it("an answer cut at the page limit is a 503 naming the limit, never the rule's onEmpty value", async () => {
    cw.endlessPages = true;
    try {
      const rule = `
  - name: zero_when_empty
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName }, onEmpty: { value: "0" } }
`;
      const { bridge } = bridgeWithClock(config(cw.endpoint, rule));
      const res = await read(bridge, "zero_when_empty", "queue=jobs");
      expect(res.status).toBe(503);
      expect(res.body.message, res.body.message).toMatch(/cut at the page limit \(20 pages\)/);
      expect(res.body.items).toBeUndefined();
      expect(cw.calls.filter((c) => c.target.endsWith(".GetMetricData"))).toHaveLength(20);
    } finally {
      cw.endlessPages = false;
    }
  });

  it("500 naming the provider when environment credentials are missing; the SDK signs with them when present", async () => {
    cw.put(sqs("jobs"), [{ at: NOW - 90_000, value: 6 }]);
    const text = config(cw.endpoint, SQS_RULE, "", "{ source: environment }");
    const missing = await read(bridgeWithClock(text, {}).bridge, "sqs_visible", "queue=jobs");
    expect(missing.status).toBe(500);
    expect(missing.body.message).toMatch(/provider cw.*AWS_ACCESS_KEY_ID/);
    expect(cw.calls).toHaveLength(0);
    const present = await read(bridgeWithClock(text, { AWS_ACCESS_KEY_ID: "AKIDENV", AWS_SECRET_ACCESS_KEY: "s" }).bridge, "sqs_visible", "queue=jobs");
    expect(present.body.items[0].value).toBe("6");
    expect(cw.calls.map((c) => c.accessKeyId)).toEqual(["AKIDENV"]);
  });

  it("maps the selector exactly or refuses it with 400 naming the requirement, before any backend call", async () => {
    const { bridge, provider } = bridgeWithClock(config(cw.endpoint, SQS_RULE));
    const other = await read(bridge, "sqs_visible", "queue=jobs,env=prod");
    expect(other.status).toBe(400);
    expect(other.body.message).toMatch(/requirement "env=prod" cannot be mapped: this rule understands only the labels "queue"/);
    const unnamed = await read(bridge, "sqs_visible", "queue!=jobs");
    expect(unnamed.status).toBe(400);
    expect(unnamed.body.message).toMatch(/must name the "queue" values/);
    const none = await read(bridge, "sqs_visible", "queue in (a,b),queue notin (a,b)");
    expect(none.status).toBe(400);
    expect(none.body.message).toMatch(/matches no series/);
    expect(cw.calls).toHaveLength(0);
    expect(provider.plan({ rule: bridge.config.metrics[0] as any, selector: { requirements: [{ key: "queue", operator: "in", values: ["a", "b"] }] }, namespace: "default" })).toBe(
      "CloudWatch GetMetricData, newest datapoint in the last 300 s, for metric sqs_visible (AWS/SQS ApproximateNumberOfMessagesVisible Maximum/60s QueueName=a); " +
        "metric sqs_visible (AWS/SQS ApproximateNumberOfMessagesVisible Maximum/60s QueueName=b)",
    );
  });
});
