/**
 * The outputs quoted in docs/providers/*.md ("Expected output"): the bridge
 * run against the fakes and emulators the tests use, with the example
 * configs (infra/examples/aws-sqs.yaml, cloudwatch.yaml, gcp-pubsub.yaml;
 * their policy switched to Allow, endpoints pointed at the fakes). Prints
 * each answer's status, Cache-Control and JSON body.
 *
 *   node test/docs/provider-outputs.ts [aws-sqs|aws-cloudwatch|gcp-monitoring|prometheus …]
 *
 * (no argument: every provider). aws-sqs and aws-cloudwatch go through the
 * Node server (`startNodeServer`); gcp-monitoring through the app with the
 * REST transport (the Node server uses the official gRPC client, whose fake
 * needs its own TLS root). prometheus goes through the Node server against
 * a REAL Prometheus (`test/helpers/prometheus.ts`, built from Go modules
 * and cached) scraping a local exporter every second, with a recording
 * proxy between them that prints each query the bridge sent.
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
const wanted = process.argv.slice(2);
const want = (provider: string) => wanted.length === 0 || wanted.includes(provider);
const now = Date.now();

// SQS
if (want("aws-sqs")) {
const emu = await startEmulator();
await emu.add("prod-orders", 42);
await show("aws-sqs", cfg("infra/examples/aws-sqs.yaml", (t) => t.replace("eu-west-1","us-east-1").replace("timeoutSeconds: 2", `timeoutSeconds: 2\n    endpoint: ${emu.endpoint}\n    credentials: { source: static, accessKeyId: demo, secretAccessKey: demo }`)),
  ["/apis/external.metrics.k8s.io/v1beta1", NS + "queue_messages_ready?labelSelector=queue%3Dorders", NS + "queue_messages_ready?labelSelector=queue%3Dpayments"]);
await emu.stop();
}

// CloudWatch
if (want("aws-cloudwatch")) {
const cw = await startCloudWatchFake();
cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: "orders" } }, [{ at: now - 120_000, value: 17 }, { at: now - 60_000, value: 23 }]);
cw.put({ namespace: "AWS/ApplicationELB", metricName: "RequestCountPerTarget", dimensions: { TargetGroup: "targetgroup/web/6d0ecf831eec9f09" } }, [{ at: now - 60_000, value: 1250 }]);
await show("aws-cloudwatch", cfg("infra/examples/cloudwatch.yaml", (t) => t.replace("timeoutSeconds: 2", `timeoutSeconds: 2\n    endpoint: ${cw.endpoint}\n    credentials: { source: static, accessKeyId: demo, secretAccessKey: demo }`)),
  ["/apis/external.metrics.k8s.io/v1beta1", NS + "sqs_messages_visible?labelSelector=queue%3Dorders", NS + "sqs_messages_visible?labelSelector=queue%3Dnope", NS + "alb_request_count_per_target?labelSelector=targetgroup%3Dweb", NS + "alb_request_count_per_target?labelSelector=targetgroup%3Dapi"]);
await cw.close();
}

// GCP
if (want("gcp-monitoring")) {
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
}

// Prometheus: the real server, scraping an exporter; the docs' rabbitmq_messages_ready rule
if (want("prometheus")) {
  const { startExporter, startPrometheus } = await import(R + "test/helpers/prometheus.ts");
  const { createServer } = await import("node:http");
  const t0 = Math.floor(Date.now() / 1000) * 1000;
  const ready = (queue: string, value: number, ageS: number, node = "rabbit@a") =>
    ({ name: "rabbitmq_queue_messages_ready", labels: { queue, node }, value, timestampMs: t0 - ageS * 1000 });
  const exporter = await startExporter([
    ready("orders", 120, 12),
    ready("orders", 30, 27, "rabbit@b"),
    ready("emails", 7, 12),
    ready("stuck", 4, 200),
    ready("nan", NaN, 12),
  ]);
  // job rabbitmq: the label the rule's `labels: { job: rabbitmq }` matches (Prometheus writes the scrape job's name)
  const prom = await startPrometheus({ targets: [exporter.target], jobName: "rabbitmq" });
  await prom.waitForSeries('rabbitmq_queue_messages_ready{queue="nan"}');
  await prom.waitForSeries('rabbitmq_queue_messages_ready{queue="orders",node="rabbit@b"}');
  // a recording proxy: prints each query as Prometheus receives it
  const seen: string[] = [];
  const proxy = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const form = new URLSearchParams(body);
    seen.push(`${form.get("query")}  (lookback_delta=${form.get("lookback_delta")}, timeout=${form.get("timeout")})`);
    const answer = await fetch(prom.url + req.url, { method: req.method, headers: { "content-type": req.headers["content-type"] ?? "" }, body: req.method === "POST" ? body : undefined });
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
    res.end(await answer.text());
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
  const text = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }
providers:
  prom:
    type: prometheus
    url: ${proxyUrl}
metrics:
  - name: rabbitmq_messages_ready
    provider: prom
    maxAgeSeconds: 120
    query:
      series: rabbitmq_queue_messages_ready
      labels: { job: rabbitmq }
      selectorLabels: { queue: queue }
  - name: rabbitmq_messages_ready_wide
    provider: prom
    maxAgeSeconds: 120
    query:
      series: rabbitmq_queue_messages_ready
      labels: { job: rabbitmq }
      selectorLabels: { queue: queue }
      lookbackSeconds: 600
`;
  console.log(`\n===== prometheus (a real Prometheus, scraping every second; samples stamped by the exporter at ${new Date(t0).toISOString()} minus their age)`);
  const s = await startNodeServer({ config: loadConfig(text, "prometheus.yaml").config, port: 0, log: () => {}, env: { ...process.env, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_SIGNING_KEYS: "" } });
  const PNS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/shop/";
  for (const p of [
    PNS + "rabbitmq_messages_ready?labelSelector=queue%20in%20(orders%2Cemails)",
    PNS + "rabbitmq_messages_ready?labelSelector=queue%3Dstuck",
    PNS + "rabbitmq_messages_ready_wide?labelSelector=queue%3Dstuck",
    PNS + "rabbitmq_messages_ready?labelSelector=queue%3Dnan",
  ]) {
    seen.length = 0;
    const res = await fetch(s.url + p);
    console.log(`--- GET ${p} -> ${res.status} cache-control=${res.headers.get("cache-control")}`);
    console.log(JSON.stringify(await res.json(), null, 2));
    for (const q of seen) console.log(`    Prometheus received: ${q}`);
  }
  await s.close();
  proxy.close();
  await prom.stop();
  await exporter.close();
}
process.exit(0);
