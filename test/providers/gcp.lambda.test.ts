/**
 * Cloud Monitoring through the Lambda handler (functions/lambda.ts) fed
 * Function URL events, the service-account key in the function's
 * environment. The handler reads through the official
 * `@google-cloud/monitoring` client (gRPC, TLS) — here against the gRPC
 * fake of MetricService, trusted through the transport's `rootCertificates`
 * as in gcp.transports.test.ts — and answers exactly as over REST. The
 * built artifact's default wiring (no injected transport, the CA trusted
 * through NODE_EXTRA_CA_CERTS) is proven in build.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler, lambdaTransports } from "../../functions/lambda.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { createGrpcTransportFactory, nodeTransports } from "../../shared/providers/gcp-monitoring/grpc.ts";
import { TRANSPORT_KEY } from "../../shared/providers/gcp-monitoring/transport.ts";
import { startGoogleFakes, type GoogleFakes } from "../fakes/google.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const BACKLOG = "pubsub.googleapis.com/subscription/num_undelivered_messages";

const config = (endpoint: string) => `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 300, cacheTTLSeconds: 30 }
providers:
  gcp: { type: gcp-monitoring, project: test-project, endpoint: ${endpoint}, credentials: { source: environment }, batchWindowSeconds: 0.05 }
metrics:
  - name: pubsub_backlog
    provider: gcp
    query: { metricType: ${BACKLOG}, resourceType: pubsub_subscription, selectorLabels: { subscription: resource.labels.subscription_id } }
`;

describe("gcp-monitoring in the Lambda handler", () => {
  let fakes: GoogleFakes;
  let now: number;
  beforeAll(async () => {
    fakes = await startGoogleFakes();
    now = Date.now();
    fakes.store.series = ["orders", "emails"].map((id, i) => ({
      metricType: BACKLOG,
      resourceType: "pubsub_subscription",
      resourceLabels: { project_id: "test-project", subscription_id: id },
      points: [{ end: now - 20_000, value: { int64Value: i === 0 ? "9007199254740993" : "31" } }],
    }));
  });
  afterAll(async () => fakes?.close());

  /** Two concurrent invocations, one per subscription; their answers. */
  const readBoth = (handler: HttpHandler) =>
    Promise.all(
      ["orders", "emails"].map(async (s) => {
        const res = await invoke(handler, "Function URL", `${NS}/pubsub_backlog?labelSelector=subscription%3D${s}`);
        return { status: res.status, body: (await res.json()) as any };
      }),
    );

  it("chooses the official client when the config has a gcp-monitoring provider, and loads it only then", async () => {
    expect(await lambdaTransports(loadConfig(config("https://monitoring.googleapis.com"), "gcp.yaml").config)).toBe(nodeTransports);
    expect(nodeTransports[TRANSPORT_KEY]).toBeTypeOf("function");
    const sqsOnly = "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: BridgeConfig\nproviders: { sqs: { type: aws-sqs, region: us-east-1 } }\nmetrics: [{ name: q, provider: sqs }]\n";
    expect(await lambdaTransports(loadConfig(sqsOnly, "sqs.yaml").config)).toBeUndefined();
  });

  it("serves the newest points through the official gRPC client, batched across concurrent invocations", async () => {
    const from = fakes.store.requests.length;
    const callers = fakes.grpc.callers.length;
    const handler = createLambdaHandler(
      { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_CONFIG: config(fakes.grpc.endpoint), GOOGLE_SERVICE_ACCOUNT_JSON: fakes.account.text },
      { log: () => {}, transports: { [TRANSPORT_KEY]: createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) } },
    ) as unknown as HttpHandler;
    const answers = await readBoth(handler);
    expect(answers.map((a) => [a.status, a.body.items[0].metricLabels.subscription, a.body.items[0].value])).toEqual([
      [200, "orders", "9007199254740993"],
      [200, "emails", "31"],
    ]);
    expect(answers[0]!.body.items[0].timestamp).toBe(new Date(now - 20_000).toISOString().replace(/\.\d{3}Z$/, "Z"));
    // one ListTimeSeries over gRPC for both reads, authenticated with the key's self-signed JWT
    expect(fakes.store.requests.slice(from).map((r) => r.transport)).toEqual(["grpc"]);
    expect(fakes.grpc.callers.slice(callers)).toHaveLength(1);
    expect(fakes.grpc.callers.at(-1)).toMatchObject({ iss: fakes.account.json.client_email });
  });

  it("answers exactly as the REST transport does", async () => {
    const env = { GOOGLE_SERVICE_ACCOUNT_JSON: fakes.account.text, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" };
    const grpc = createLambdaHandler({ ...env, BRIDGE_CONFIG: config(fakes.grpc.endpoint) }, {
      log: () => {},
      transports: { [TRANSPORT_KEY]: createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) },
    }) as unknown as HttpHandler;
    const rest = createLambdaHandler({ ...env, BRIDGE_CONFIG: config(fakes.rest.endpoint) }, { log: () => {}, transports: {} }) as unknown as HttpHandler;
    const from = fakes.store.requests.length;
    const [overGrpc, overRest] = [await readBoth(grpc), await readBoth(rest)];
    expect(overGrpc).toEqual(overRest);
    expect(fakes.store.requests.slice(from).map((r) => r.transport)).toEqual(["grpc", "rest"]);
  });

  it("a key the service does not know is a 500 naming the provider, never a value", async () => {
    const handler = createLambdaHandler(
      { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_CONFIG: config(fakes.grpc.endpoint), GOOGLE_SERVICE_ACCOUNT_JSON: JSON.stringify({ ...fakes.account.json, client_email: "stranger@test-project.iam.gserviceaccount.com" }) },
      { log: () => {}, transports: { [TRANSPORT_KEY]: createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) } },
    ) as unknown as HttpHandler;
    const res = await invoke(handler, "Function URL", `${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`);
    expect(res.status).toBe(500);
    expect(((await res.json()) as any).message).toMatch(/provider gcp: .*UNAUTHENTICATED.*unknown service account stranger@/);
  });
});
