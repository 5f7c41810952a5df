/**
 * Cloud Monitoring through the Lambda handler (functions/lambda.ts) fed
 * Function URL events, the service-account key in the function's
 * environment. The handler builds its runtime without a transport choice,
 * so this exercises the default REST transport against the REST fake; the
 * official-client transport is proven identical in gcp.transports.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../functions/lambda.ts";
import { startGoogleFakes, type GoogleFakes } from "./fakes/google.ts";
import { invoke, type HttpHandler } from "./helpers/lambda.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const BACKLOG = "pubsub.googleapis.com/subscription/num_undelivered_messages";

describe("gcp-monitoring in the Lambda handler", () => {
  let fakes: GoogleFakes;
  let handler: HttpHandler;
  let now: number;
  beforeAll(async () => {
    fakes = await startGoogleFakes();
    now = Date.now();
    fakes.store.series = ["orders", "emails"].map((id, i) => ({
      metricType: BACKLOG,
      resourceType: "pubsub_subscription",
      resourceLabels: { project_id: "test-project", subscription_id: id },
      points: [{ end: now - 20_000, value: { int64Value: String(30 + i) } }],
    }));
    const config = `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
defaults: { maxAgeSeconds: 300, cacheTTLSeconds: 30 }
providers:
  gcp: { type: gcp-monitoring, project: test-project, endpoint: ${fakes.rest.endpoint}, credentials: { source: environment }, batchWindowSeconds: 0.05 }
metrics:
  - name: pubsub_backlog
    provider: gcp
    query: { metricType: ${BACKLOG}, resourceType: pubsub_subscription, selectorLabels: { subscription: resource.labels.subscription_id } }
`;
    handler = createLambdaHandler({ BRIDGE_CONFIG: config, GOOGLE_SERVICE_ACCOUNT_JSON: fakes.account.text }, { log: () => {} }) as unknown as HttpHandler;
  });
  afterAll(async () => fakes?.close());

  it("serves the newest points, batched across concurrent invocations", async () => {
    const answers = await Promise.all(
      ["orders", "emails"].map((s) => invoke(handler, "Function URL", `${NS}/pubsub_backlog?labelSelector=subscription%3D${s}`).then((r) => r.json() as any)),
    );
    expect(answers.map((a) => [a.items[0].metricLabels.subscription, a.items[0].value])).toEqual([
      ["orders", "30"],
      ["emails", "31"],
    ]);
    expect(answers[0].items[0].timestamp).toBe(new Date(now - 20_000).toISOString().replace(/\.\d{3}Z$/, "Z"));
    expect(fakes.store.requests).toHaveLength(1);
    expect(fakes.oauth.requests).toHaveLength(1);
  });
});
