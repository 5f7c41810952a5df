/**
 * CloudWatch inside the real Worker: built by wrangler as a deploy builds
 * it, run in workerd, the AWS SDK signing with credentials from Worker
 * secrets and calling the CloudWatch fake. Concurrent reads in the isolate
 * share one GetMetricData call; a missing secret is a 500 naming the provider.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCloudWatchFake, type CloudWatchFake } from "../fakes/cloudwatch.ts";
import { buildWorker, startWorker, type RunningWorker, type WorkerBuild } from "../helpers/worker.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

function config(endpoint: string) {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: 30 }
providers:
  cw:
    type: aws-cloudwatch
    region: eu-west-1
    endpoint: ${endpoint}
    credentials: { source: environment }
    maxAttempts: 1
    batchWindowSeconds: 0.05
metrics:
  - name: sqs_visible
    provider: cw
    query:
      namespace: AWS/SQS
      metricName: ApproximateNumberOfMessagesVisible
      stat: Maximum
      period: 60
      dimensionLabels: { queue: QueueName }
`;
}

describe("aws-cloudwatch inside the Worker (workerd)", () => {
  let cw: CloudWatchFake;
  let build: WorkerBuild;
  let worker: RunningWorker;
  let periodStart: number;
  beforeAll(async () => {
    [cw, build] = await Promise.all([startCloudWatchFake(), buildWorker()]);
    // a whole period that has ended, so its datapoint is complete
    periodStart = Math.floor(Date.now() / 60_000) * 60_000 - 120_000;
    for (let i = 0; i < 6; i++) {
      cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: `q${i}` } }, [
        { at: periodStart + 5_000, value: 10 * i },
        { at: periodStart + 25_000, value: 10 * i + 3 },
      ]);
    }
    worker = await startWorker(config(cw.endpoint), { AWS_ACCESS_KEY_ID: "AKIDWORKER", AWS_SECRET_ACCESS_KEY: "secret" }, { build });
  });
  afterAll(async () => {
    await worker?.close();
    await cw?.close();
  });

  it("serves the newest datapoint with the end of its period as timestamp and window = period", async () => {
    const res = await worker.request(`${NS}/sqs_visible?labelSelector=queue%3Dq1`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).items).toEqual([
      { metricName: "sqs_visible", metricLabels: { queue: "q1" }, timestamp: new Date(periodStart + 60_000).toISOString().replace(".000Z", "Z"), window: 60, value: "13" },
    ]);
    expect(cw.calls.at(-1)).toMatchObject({ target: "GraniteServiceVersion20100801.GetMetricData", accessKeyId: "AKIDWORKER" });
  });

  it("batches concurrent reads in the isolate into one GetMetricData call", async () => {
    const before = cw.getMetricDataCalls.length;
    const answers = await Promise.all(
      [0, 2, 3, 4, 5].map((i) => worker.request(`${NS}/sqs_visible?labelSelector=queue%3Dq${i}`).then((r) => r.json() as any)),
    );
    expect(answers.map((a) => a.items[0].value)).toEqual(["3", "23", "33", "43", "53"]);
    const calls = cw.getMetricDataCalls.slice(before);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.body.MetricDataQueries).toHaveLength(5);
  });

  it("a missing credentials secret is a 500 naming the provider, with no backend call", async () => {
    const bare = await startWorker(config(cw.endpoint), {}, { build });
    try {
      const before = cw.calls.length;
      const res = await bare.request(`${NS}/sqs_visible?labelSelector=queue%3Dq1`);
      expect(res.status).toBe(500);
      expect(((await res.json()) as any).message).toMatch(/provider cw.*AWS_ACCESS_KEY_ID/);
      expect(cw.calls.length).toBe(before);
    } finally {
      await bare.close();
    }
  });
});
