/**
 * The outputs quoted in docs/providers/*.md ("Expected output"): the bridge
 * run against the fakes and emulators the tests use, with the example
 * configs (infra/examples/aws-sqs.yaml, cloudwatch.yaml, gcp-pubsub.yaml;
 * their policy switched to Allow, endpoints pointed at the fakes). Prints
 * each answer's status, Cache-Control and JSON body.
 *
 *   npx node test/docs/provider-outputs.ts
 *
 * aws-sqs and aws-cloudwatch go through the Node server (`startNodeServer`);
 * gcp-monitoring through the app with the REST transport (the Node server
 * uses the official gRPC client, whose fake needs its own TLS root).
 */
import { readFileSync } from "node:fs";
import type { BridgeConfig } from "../../shared/config/config.ts";


const R = new URL("../../", import.meta.url).pathname;
const { startNodeServer } = await import(R + "functions/node.ts");
const { loadConfig } = await import(R + "shared/config/config.ts");
const { startEmulator } = await import(R + "test/helpers/emulator.ts");
const { startCloudWatchFake } = await import(R + "test/fakes/cloudwatch.ts");
const { startGoogleFakes } = await import(R + "test/fakes/google.ts");

function cfg(file: string, patch: (text: string) => string): BridgeConfig {
  const text = patch(readFileSync(R + file, "utf8").split(/^---$/m)[0]!).replace("defaultAction: Deny", "defaultAction: Allow");
  return loadConfig(text, file).config;
}
async function show(title: string, config: BridgeConfig, paths: string[], env: Record<string, string> = {}) {
  const s = await startNodeServer({ config, port: 0, log: () => {}, env: { ...process.env, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_SIGNING_KEYS: "", ...env } });
  console.log(`\n===== ${title}`);
  for (const p of paths) {
    const res = await fetch(s.url + p);
    console.log(`--- GET ${p} -> ${res.status} cache-control=${res.headers.get("cache-control")}`);
    console.log(JSON.stringify(await res.json(), null, 2));
  }
  await s.close();
}
const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/";

// SQS
const emu = await startEmulator();
await emu.add("prod-orders", 42);
await show("aws-sqs", cfg("infra/examples/aws-sqs.yaml", (t) => t.replace("eu-west-1","us-east-1").replace("timeoutSeconds: 2", `timeoutSeconds: 2\n    endpoint: ${emu.endpoint}\n    credentials: { source: static, accessKeyId: demo, secretAccessKey: demo }`)),
  ["/apis/external.metrics.k8s.io/v1beta1", NS + "queue_messages_ready?labelSelector=queue%3Dorders", NS + "queue_messages_ready?labelSelector=queue%3Dpayments"]);
await emu.stop();

// CloudWatch
const cw = await startCloudWatchFake();
const now = Date.now();
cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: "orders" } }, [{ at: now - 120_000, value: 17 }, { at: now - 60_000, value: 23 }]);
cw.put({ namespace: "AWS/ApplicationELB", metricName: "RequestCountPerTarget", dimensions: { TargetGroup: "targetgroup/web/6d0ecf831eec9f09" } }, [{ at: now - 60_000, value: 1250 }]);
await show("aws-cloudwatch", cfg("infra/examples/cloudwatch.yaml", (t) => t.replace("timeoutSeconds: 2", `timeoutSeconds: 2\n    endpoint: ${cw.endpoint}\n    credentials: { source: static, accessKeyId: demo, secretAccessKey: demo }`)),
  ["/apis/external.metrics.k8s.io/v1beta1", NS + "sqs_messages_visible?labelSelector=queue%3Dorders", NS + "sqs_messages_visible?labelSelector=queue%3Dnope", NS + "alb_request_count_per_target?labelSelector=targetgroup%3Dweb", NS + "alb_request_count_per_target?labelSelector=targetgroup%3Dapi"]);
await cw.close();

// GCP
const g = await startGoogleFakes();
const BACKLOG = "pubsub.googleapis.com/subscription/num_undelivered_messages";
g.store.series = [
  { project: "my-project", metricType: BACKLOG, resourceType: "pubsub_subscription", metricKind: "GAUGE", valueType: "INT64", resourceLabels: { project_id: "my-project", subscription_id: "orders-worker" }, points: [{ end: now - 60_000, value: { int64Value: "314" } }] },
];
{
  const { buildBridge } = await import(R + "test/helpers/bridge.ts");
  await (await import(R + "shared/providers/registry.ts")).loadProviderModules({ gcp: { type: "gcp-monitoring" } } as never);
  const text = readFileSync(R + "infra/examples/gcp-pubsub.yaml", "utf8").split(/^---$/m)[0]!.replace("defaultAction: Deny", "defaultAction: Allow").replace("timeoutSeconds: 2", `timeoutSeconds: 2\n    endpoint: ${g.rest.endpoint}`);
  const bridge = buildBridge(text, "gcp-pubsub.yaml", { env: { GOOGLE_SERVICE_ACCOUNT_JSON: g.account.text, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }, now: Date.now }, { log: () => {} });
  console.log("\n===== gcp-monitoring (REST transport, as on Workers)");
  for (const p of [NS + "pubsub_num_undelivered_messages?labelSelector=subscription%3Dorders-worker", NS + "pubsub_num_undelivered_messages?labelSelector=subscription%3Dmissing", NS + "pubsub_num_undelivered_messages"]) {
    const res = await bridge.app.fetch(new Request("http://bridge.local" + p));
    console.log(`--- GET ${p} -> ${res.status} cache-control=${res.headers.get("cache-control")}`);
    console.log(JSON.stringify(await res.json(), null, 2));
  }
}
await g.close();
process.exit(0);
