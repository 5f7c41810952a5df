/**
 * Per-namespace identities on the Worker (AWS roles, Google service
 * accounts): not offered there, and said so.
 * The real Worker (built by wrangler as a deploy builds it, run in workerd)
 * given a config with `credentials.assumeRole` (or `credentials.impersonate`) refuses it when it loads it
 * (every request a 500 naming the provider and the reason), and never reads
 * anything under the source's own identity instead.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCloudWatchFake, type CloudWatchFake } from "../fakes/cloudwatch.ts";
import { startWorker, type RunningWorker } from "../helpers/worker.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a";

describe("credentials.assumeRole inside the Worker (workerd)", () => {
  let cw: CloudWatchFake;
  let worker: RunningWorker;
  beforeAll(async () => {
    cw = await startCloudWatchFake();
    worker = await startWorker(
      `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
providers:
  cw:
    type: aws-cloudwatch
    region: eu-west-1
    endpoint: ${cw.endpoint}
    maxAttempts: 1
    credentials:
      source: environment
      assumeRole: { roleArn: "arn:aws:iam::123456789012:role/emb-{namespace}", clusterId: 3f1c9a0e-5b7d-4c2e-9f80-1a2b3c4d5e6f }
metrics:
  - name: sqs_visible
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName } }
`,
      { AWS_ACCESS_KEY_ID: "AKIDWORKER", AWS_SECRET_ACCESS_KEY: "secret" },
    );
  });
  afterAll(async () => {
    await worker?.close();
    await cw?.close();
  });

  it("refuses the config at load with a message saying the Worker does not assume roles; nothing is read", async () => {
    const res = await worker.request(`${NS}/sqs_visible?labelSelector=queue%3Djobs`);
    expect(res.status).toBe(500);
    const body = (await res.json()) as any;
    expect(body.kind).toBe("Status");
    expect(body.message).toContain("provider cw: credentials.assumeRole (a role per namespace) is not available on the Worker");
    expect(body.items).toBeUndefined();
    expect(cw.calls).toHaveLength(0);
  });
});

describe("credentials.impersonate inside the Worker (workerd)", () => {
  let worker: RunningWorker;
  beforeAll(async () => {
    worker = await startWorker(`
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
providers:
  gmp:
    type: prometheus
    flavour: gmp
    project: test-project
    endpoint: http://127.0.0.1:9
    credentials: { source: environment, impersonate: { serviceAccount: "emb-{namespace}@test-project.iam.gserviceaccount.com" } }
metrics:
  - name: queue_ready
    provider: gmp
    query: { series: emb_queue_ready, selectorLabels: { queue: queue } }
`);
  });
  afterAll(async () => worker?.close());

  it("refuses the config at load with a message saying the Worker does not impersonate", async () => {
    const res = await worker.request(`${NS}/queue_ready?labelSelector=queue%3Djobs`);
    expect(res.status).toBe(500);
    const body = (await res.json()) as any;
    expect(body.message).toContain("provider gmp: credentials.impersonate (a service account per namespace) is not available on the Worker");
    expect(body.items).toBeUndefined();
  });
});
