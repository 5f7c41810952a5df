/**
 * The shared read tier in the Lambda handler (shared/lambda/handler.ts) fed
 * Function URL events: two handlers are two execution environments of one
 * function (each its own cache and clients), the config from
 * `BRIDGE_CONFIG`, the tier's region from `AWS_REGION` and its credentials
 * from the environment, as Lambda sets them. The aws-cloudwatch provider
 * reads the CloudWatch fake; the tier is dynalite on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import type { LogRecord } from "../../shared/observability/log.ts";
import { startCloudWatchFake, type CloudWatchFake } from "../fakes/cloudwatch.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";
import { startDynalite, type Dynalite } from "./dynalite.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

function config(cwEndpoint: string, sharedCache: string): string {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: 30 }
providers:
  cw:
    type: aws-cloudwatch
    region: us-east-1
    endpoint: ${cwEndpoint}
    credentials: { source: environment }
    maxAttempts: 1
    sharedCache: ${sharedCache}
metrics:
  - name: sqs_visible
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName } }
`;
}

describe("shared read tier in the Lambda handler", () => {
  let cw: CloudWatchFake;
  let ddb: Dynalite;
  const env = { AWS_REGION: "us-east-1", AWS_ACCESS_KEY_ID: "AKIDLAMBDA", AWS_SECRET_ACCESS_KEY: "secret", AWS_SESSION_TOKEN: "session", BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" };
  beforeAll(async () => {
    [cw, ddb] = await Promise.all([startCloudWatchFake(), startDynalite()]);
    await ddb.createTable("lambda-series");
    const periodStart = Math.floor(Date.now() / 60_000) * 60_000 - 120_000;
    cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: "orders" } }, [{ at: periodStart + 1_000, value: 12 }]);
  });
  afterAll(async () => {
    await cw?.close();
    await ddb?.stop();
  });

  it("two execution environments make one GetMetricData call for a series; the second is answered by the tier", async () => {
    const text = config(cw.endpoint, `{ type: dynamodb, table: lambda-series, endpoint: ${ddb.endpoint}, credentials: { source: environment } }`);
    const logs: LogRecord[] = [];
    const [first, second] = [0, 1].map(() => createLambdaHandler({ ...env, BRIDGE_CONFIG: text }, { log: (r) => logs.push(r) }) as unknown as HttpHandler);
    const a = await invoke(first!, "Function URL", `${NS}/sqs_visible?labelSelector=queue%3Dorders`);
    const b = await invoke(second!, "Function URL", `${NS}/sqs_visible?labelSelector=queue%3Dorders`);
    expect(((await a.json()) as any).items[0].value).toBe("12");
    expect(((await b.json()) as any).items[0].value).toBe("12");
    expect(cw.getMetricDataCalls).toHaveLength(1);
    expect(logs.filter((r) => /shared read tier/.test(r.msg))).toEqual([]);
    const items = await ddb.scan("lambda-series");
    expect(items).toHaveLength(1);
    expect(items[0]!["k"]!.S).toMatch(/^cw#[A-Za-z0-9_-]{43}$/);
  });

  it("a durableObject tier is a config fault: every request answers 500 naming it", async () => {
    const logs: LogRecord[] = [];
    const handler = createLambdaHandler({ ...env, BRIDGE_CONFIG: config(cw.endpoint, "{ type: durableObject }") }, { log: (r) => logs.push(r) }) as unknown as HttpHandler;
    const res = await invoke(handler, "Function URL", `${NS}/sqs_visible?labelSelector=queue%3Dorders`);
    expect(res.status).toBe(500);
    expect(((await res.json()) as any).message).toMatch(/provider cw: sharedCache type durableObject is served by the Cloudflare Worker only/);
    expect(logs.some((r) => r.level === "error" && /durableObject/.test(String(r["error"])))).toBe(true);
  });
});
