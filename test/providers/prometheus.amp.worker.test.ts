/**
 * The `prometheus` provider's `amp` flavour inside the real Worker: built by
 * wrangler as a deploy builds it, run in workerd, signing its queries with
 * SigV4 (`@smithy/signature-v4` over WebCrypto) with the AWS keys of Worker
 * secrets, through the SigV4-verifying front door (`test/sigv4-proxy/`) to a
 * real Prometheus under `/workspaces/<id>`. A wrong secret is the "refused
 * credentials" 500; `credentials.source: default` (the SDK chain, which a
 * Worker lacks) is the "no credentials" 500 with nothing sent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROMETHEUS_BUILD_TIMEOUT_MS, prometheusBinary, startExporter, startPrometheus, type Exporter, type PrometheusServer } from "../helpers/prometheus.ts";
import { sigv4ProxyBinary, startSigv4Proxy, type Sigv4Proxy } from "../helpers/sigv4-proxy.ts";
import { buildWorker, startWorker, type RunningWorker, type WorkerBuild } from "../helpers/worker.ts";
import { ampConfig } from "../helpers/amp.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const WORKSPACE = "ws-0f9e8d7c-6b5a-4321-8fed-cba987654321";
const REGION = "us-west-2";
const KEYS = { AWS_ACCESS_KEY_ID: "AKIDAMPWORKER", AWS_SECRET_ACCESS_KEY: "amp-worker-secret" };
// set once the servers are built (a cold build takes minutes): a time taken at import would be minutes old by the first read
let SAMPLE_TS = 0;
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");

function config(endpoint: string, credentials: string): string {
  return ampConfig({ region: REGION, workspaceId: WORKSPACE, endpoint }, credentials);
}

let exporter: Exporter;
let prom: PrometheusServer;
let proxy: Sigv4Proxy;
let build: WorkerBuild;
const workers: RunningWorker[] = [];

beforeAll(async () => {
  const binary = prometheusBinary();
  sigv4ProxyBinary();
  SAMPLE_TS = Math.floor((Date.now() - 20_000) / 1000) * 1000;
  exporter = await startExporter();
  exporter.set(() => [{ name: "emb_queue_ready", labels: { queue: "a" }, value: 3, timestampMs: SAMPLE_TS }]);
  [prom, build] = await Promise.all([startPrometheus({ binary, targets: [exporter.target], routePrefix: `/workspaces/${WORKSPACE}` }), buildWorker()]);
  proxy = await startSigv4Proxy({ upstream: `http://127.0.0.1:${prom.port}`, accessKeyId: KEYS.AWS_ACCESS_KEY_ID, secretAccessKey: KEYS.AWS_SECRET_ACCESS_KEY, region: REGION });
  await prom.waitForSeries('emb_queue_ready{queue="a"}');
}, 2 * PROMETHEUS_BUILD_TIMEOUT_MS + 180_000);

afterAll(async () => {
  for (const w of workers) await w.close();
  await proxy?.close();
  await prom?.stop();
  await exporter?.close();
});

async function read(credentials: string, secrets: Record<string, string>) {
  const worker = await startWorker(config(proxy.endpoint, credentials), secrets, { build });
  workers.push(worker);
  const res = await worker.request(`${NS}/queue_ready?labelSelector=${encodeURIComponent("queue=a")}`);
  return { status: res.status, body: (await res.json()) as any };
}

describe("prometheus amp flavour inside the Worker (workerd)", () => {
  it("signs its queries with the keys of Worker secrets, verified by the front door, and serves the value", async () => {
    const before = proxy.forwarded().length;
    const res = await read("{ source: environment }", KEYS);
    expect(res.status).toBe(200);
    expect(res.body.items).toEqual([{ metricName: "queue_ready", metricLabels: { queue: "a" }, timestamp: iso(SAMPLE_TS), value: "3" }]);
    expect(proxy.forwarded().length - before).toBe(2);
  });

  it("a wrong secret: 500 'AWS refused the bridge's credentials', never a value", async () => {
    const res = await read("{ source: environment }", { ...KEYS, AWS_SECRET_ACCESS_KEY: "wrong" });
    expect(res.status).toBe(500);
    expect(res.body.items).toBeUndefined();
    expect(res.body.message).toMatch(/AWS refused the bridge's credentials \(InvalidSignatureException\)/);
  });

  it("credentials.source default: the Worker has no SDK chain, a 'no credentials' 500 and nothing sent", async () => {
    const before = proxy.forwarded().length + proxy.refused().length;
    const res = await read("{ source: default }", KEYS);
    expect(res.status).toBe(500);
    expect(res.body.message).toMatch(/no AWS credentials were found, so nothing was sent to AWS \(CredentialsMissingError\): credentials.source "default" .* is not available on the Worker/);
    expect(proxy.forwarded().length + proxy.refused().length).toBe(before);
  });
});
