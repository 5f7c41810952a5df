/**
 * CloudWatch through the Lambda handler (functions/lambda.ts) fed Function
 * URL events: the config and credentials come from the function's
 * environment, as in Lambda; concurrent invocations in one execution
 * environment share one GetMetricData call.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { startCloudWatchFake, type CloudWatchFake } from "../fakes/cloudwatch.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

describe("aws-cloudwatch in the Lambda handler", () => {
  let cw: CloudWatchFake;
  let handler: HttpHandler;
  let periodStart: number;
  beforeAll(async () => {
    cw = await startCloudWatchFake();
    periodStart = Math.floor(Date.now() / 60_000) * 60_000 - 120_000;
    for (const [queue, value] of [["orders", 12], ["emails", 4]] as const) {
      cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: queue } }, [{ at: periodStart + 1_000, value }]);
    }
    const config = `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: 30 }
providers:
  cw: { type: aws-cloudwatch, region: us-east-1, endpoint: ${cw.endpoint}, credentials: { source: default }, maxAttempts: 1, batchWindowSeconds: 0.05 }
metrics:
  - name: sqs_visible
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName } }
`;
    // Lambda puts the execution role's keys in the environment; the SDK's default chain reads them.
    process.env["AWS_ACCESS_KEY_ID"] = "AKIDLAMBDA";
    process.env["AWS_SECRET_ACCESS_KEY"] = "secret";
    process.env["AWS_SESSION_TOKEN"] = "session";
    handler = createLambdaHandler({ ...process.env, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_CONFIG: config }, { log: () => {} }) as unknown as HttpHandler;
  });
  afterAll(async () => {
    delete process.env["AWS_ACCESS_KEY_ID"];
    delete process.env["AWS_SECRET_ACCESS_KEY"];
    delete process.env["AWS_SESSION_TOKEN"];
    await cw?.close();
  });

  it("serves values read with the execution role's credentials, batched across concurrent invocations", async () => {
    const [orders, emails] = await Promise.all([
      invoke(handler, "Function URL", `${NS}/sqs_visible?labelSelector=queue%3Dorders`),
      invoke(handler, "Function URL", `${NS}/sqs_visible?labelSelector=queue%3Demails`),
    ]);
    const iso = new Date(periodStart + 60_000).toISOString().replace(".000Z", "Z");
    expect(((await orders.json()) as any).items).toEqual([{ metricName: "sqs_visible", metricLabels: { queue: "orders" }, timestamp: iso, window: 60, value: "12" }]);
    expect(((await emails.json()) as any).items[0].value).toBe("4");
    expect(cw.getMetricDataCalls).toHaveLength(1);
    expect(cw.getMetricDataCalls[0]!.accessKeyId).toBe("AKIDLAMBDA");
  });
});
