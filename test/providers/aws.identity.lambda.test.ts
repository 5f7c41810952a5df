/**
 * Per-namespace AWS roles in the Lambda handler (functions/lambda.ts) fed
 * Function URL events: the execution role's keys (in the environment, as
 * Lambda sets them; the SDK default chain) sign STS `AssumeRole` at the STS
 * fake (`test/fakes/sts.ts`, SigV4 checked), and each namespace's
 * GetMetricData call is signed with its own role's temporary keys.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { startCloudWatchFake, type CloudWatchFake } from "../fakes/cloudwatch.ts";
import { startStsFake, type StsFake } from "../fakes/sts.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";

const CLUSTER = "3f1c9a0e-5b7d-4c2e-9f80-1a2b3c4d5e6f";
const ROLE = (ns: string) => `arn:aws:iam::123456789012:role/emb-${ns}`;

describe("credentials.assumeRole in the Lambda handler", () => {
  let cw: CloudWatchFake;
  let sts: StsFake;
  let handler: HttpHandler;
  beforeAll(async () => {
    [cw, sts] = await Promise.all([startCloudWatchFake(), startStsFake()]);
    sts.callers.set("AKIDLAMBDA", "lambda-secret");
    for (const ns of ["team-a", "team-b"]) sts.roles.set(ROLE(ns), `emb:${CLUSTER}:${ns}`);
    const at = Math.floor(Date.now() / 60_000) * 60_000 - 120_000 + 1_000;
    for (const [queue, value] of [["team-a-jobs", 12], ["team-b-jobs", 4]] as const) {
      cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: queue } }, [{ at, value }]);
    }
    const config = `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: the identity alone limits what a namespace reads
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: 30 }
providers:
  cw:
    type: aws-cloudwatch
    region: us-east-1
    endpoint: ${cw.endpoint}
    maxAttempts: 1
    credentials:
      source: default
      assumeRole: { roleArn: "arn:aws:iam::123456789012:role/emb-{namespace}", clusterId: ${CLUSTER}, stsEndpoint: "${sts.endpoint}" }
metrics:
  - name: sqs_visible
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName } }
`;
    // Lambda puts the execution role's keys in the environment; the SDK's default chain reads them.
    process.env["AWS_ACCESS_KEY_ID"] = "AKIDLAMBDA";
    process.env["AWS_SECRET_ACCESS_KEY"] = "lambda-secret";
    handler = createLambdaHandler({ ...process.env, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_CONFIG: config }, { log: () => {} }) as unknown as HttpHandler;
  });
  afterAll(async () => {
    delete process.env["AWS_ACCESS_KEY_ID"];
    delete process.env["AWS_SECRET_ACCESS_KEY"];
    await cw?.close();
    await sts?.close();
  });

  it("assumes each namespace's role with the execution role and signs its reads with the role's keys", async () => {
    const [a, b] = await Promise.all([
      invoke(handler, "Function URL", "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/sqs_visible?labelSelector=queue%3Dteam-a-jobs"),
      invoke(handler, "Function URL", "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-b/sqs_visible?labelSelector=queue%3Dteam-b-jobs"),
    ]);
    expect([((await a.json()) as any).items[0].value, ((await b.json()) as any).items[0].value]).toEqual(["12", "4"]);
    expect(sts.calls.map((c) => [c.RoleArn, c.ExternalId, c.accessKeyId]).sort()).toEqual([
      [ROLE("team-a"), `emb:${CLUSTER}:team-a`, "AKIDLAMBDA"],
      [ROLE("team-b"), `emb:${CLUSTER}:team-b`, "AKIDLAMBDA"],
    ]);
    expect(cw.getMetricDataCalls.map((c) => sts.issued.get(c.accessKeyId ?? "")?.roleArn).sort()).toEqual([ROLE("team-a"), ROLE("team-b")]);
  });
});
