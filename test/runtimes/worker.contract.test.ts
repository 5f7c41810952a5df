/**
 * The HTTP contract against the Cloudflare Worker — built by wrangler as a
 * deploy builds it, running in workerd through the Miniflare API, reading
 * the fauxqs queue with the real AWS SDK — then what only the Worker has:
 * credentials from Worker secrets, per-isolate caches, config errors as
 * Status answers, and a config bundled at build time.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectStatus, expectValues, externalMetricsContract } from "../helpers/contract.ts";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { buildWorker, ROOT, startWorker, type RunningWorker } from "../helpers/worker.ts";

externalMetricsContract("Cloudflare Worker (workerd)", async (text) => {
  const worker = await startWorker(text);
  return { request: worker.request, close: worker.close };
});

const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const READY = `${V1}/namespaces/default/queue_messages_ready?labelSelector=queue%3Dworker_tasks`;

/** An HTTP hop in front of fauxqs that records what the SDK inside workerd sent. */
interface RecordingProxy {
  endpoint: string;
  calls: { target: string; authorization: string; securityToken: string | undefined }[];
  server: Server;
}

async function startRecordingProxy(upstream: string): Promise<RecordingProxy> {
  const target = new URL(upstream);
  const proxy: RecordingProxy = { endpoint: "", calls: [], server: undefined as never };
  proxy.server = createServer((req, res) => {
    proxy.calls.push({
      target: String(req.headers["x-amz-target"]),
      authorization: String(req.headers["authorization"]),
      securityToken: req.headers["x-amz-security-token"] as string | undefined,
    });
    const out = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        upstreamRes.pipe(res);
      },
    );
    out.on("error", () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => proxy.server.listen(0, "127.0.0.1", resolve));
  proxy.endpoint = `http://127.0.0.1:${(proxy.server.address() as AddressInfo).port}`;
  return proxy;
}

/** A one-rule config reading `worker_tasks` through `endpoint`. */
function workerConfig(endpoint: string, credentials: string, cacheTTLSeconds = 0): string {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 60, cacheTTLSeconds: ${cacheTTLSeconds} }
providers:
  sqs:
    type: aws-sqs
    region: us-east-1
    endpoint: ${endpoint}
    credentials: ${credentials}
    maxAttempts: 1
metrics:
  - name: queue_messages_ready
    provider: sqs
`;
}

/** A config whose discovery names show which source the Worker read. */
const configNamed = (metric: string) => `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1, credentials: { source: environment } }
metrics:
  - name: ${metric}
    provider: sqs
`;

async function discoveryNames(worker: RunningWorker): Promise<string[]> {
  const res = await worker.request(V1);
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as { resources: { name: string }[] }).resources.map((r) => r.name);
}

describe("Cloudflare Worker runtime bindings", () => {
  let sqs: Emulator;
  let proxy: RecordingProxy;
  const running: RunningWorker[] = [];
  const start = async (text: string | undefined, bindings?: Record<string, string>) => {
    const worker = await startWorker(text, bindings);
    running.push(worker);
    return worker;
  };

  beforeAll(async () => {
    sqs = await startEmulator();
    await sqs.add("worker_tasks", 7);
    proxy = await startRecordingProxy(sqs.endpoint);
  }, 120_000);
  afterAll(async () => {
    await Promise.all(running.map((w) => w.close()));
    await new Promise((resolve) => proxy?.server.close(resolve));
    await sqs?.stop();
  });

  it("signs SDK calls with the AWS credentials held in Worker secrets (credentials.source: environment)", async () => {
    const worker = await start(workerConfig(proxy.endpoint, "{ source: environment }"), {
      AWS_ACCESS_KEY_ID: "AKIDWORKERSECRET",
      AWS_SECRET_ACCESS_KEY: "worker-secret-key",
      AWS_SESSION_TOKEN: "worker-session-token",
    });
    proxy.calls.length = 0;
    const body = await expectValues(await worker.request(READY));
    expect(body.items[0]!.value).toBe("7");
    expect(proxy.calls.map((c) => c.target)).toEqual(["AmazonSQS.GetQueueUrl", "AmazonSQS.GetQueueAttributes"]);
    for (const call of proxy.calls) {
      expect(call.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDWORKERSECRET\/\d{8}\/us-east-1\/sqs\/aws4_request/);
      expect(call.securityToken).toBe("worker-session-token");
    }
  });

  it("answers 500 naming the missing secret, without calling AWS, when the secrets are not set", async () => {
    const worker = await start(workerConfig(proxy.endpoint, "{ source: environment }"));
    proxy.calls.length = 0;
    await expectStatus(await worker.request(READY), 500, "InternalError", /AWS_ACCESS_KEY_ID/);
    expect(proxy.calls).toEqual([]);
  });

  it("keeps provider caches for the isolate's life: one backend read serves requests within the TTL", async () => {
    const worker = await start(workerConfig(proxy.endpoint, "{ source: static, accessKeyId: a, secretAccessKey: b }", 30));
    proxy.calls.length = 0;
    const first = await expectValues(await worker.request(READY));
    await sqs.add("worker_tasks", 5);
    for (let i = 0; i < 3; i++) {
      const again = await expectValues(await worker.request(READY));
      expect(again.items[0]!.value).toBe(first.items[0]!.value);
      expect(again.items[0]!.timestamp).toBe(first.items[0]!.timestamp);
    }
    expect(proxy.calls.filter((c) => c.target === "AmazonSQS.GetQueueAttributes")).toHaveLength(1);
    await sqs.drain("worker_tasks", 5);
  });

  it("answers every request with a 500 Status naming each config problem, and keeps serving", async () => {
    const bad = configNamed("ok").replace("region: us-east-1", "region: mars") + "    query: { attribute: Nope }\n";
    const worker = await start(bad);
    for (const path of [V1, "/healthz", READY, V1]) {
      const body = await expectStatus(await worker.request(path), 500, "InternalError");
      expect(body.message).toMatch(/<binding:BRIDGE_CONFIG>:5:\d+: providers\.sqs\.region/);
      expect(body.message).toMatch(/<binding:BRIDGE_CONFIG>:\d+:\d+: metrics\[0\]\.query\.attribute/);
    }
    await expectStatus(await worker.request(V1), 500, "InternalError", /invalid/);
    expect(worker.logs()).toMatch(/invalid config/);
  });

  it("answers a 500 Status naming BRIDGE_CONFIG when no config is bound or bundled", async () => {
    const worker = await start(undefined);
    await expectStatus(await worker.request(V1), 500, "InternalError", /BRIDGE_CONFIG/);
    await expectStatus(await worker.request("/healthz"), 500, "InternalError", /no config/);
  });
});

describe("Cloudflare Worker with a config bundled at build time", () => {
  let project: string;
  const running: RunningWorker[] = [];

  beforeAll(() => {
    // A copy of the deployable project (inside the repository, so node_modules
    // resolves) whose infra/worker/bridge.yaml holds a real config.
    mkdirSync(join(ROOT, ".cache"), { recursive: true });
    project = mkdtempSync(join(ROOT, ".cache/worker-bundled-"));
    for (const dir of ["functions", "shared", "infra/worker"]) cpSync(join(ROOT, dir), join(project, dir), { recursive: true });
    for (const file of ["wrangler.toml", "tsconfig.json", "package.json"]) cpSync(join(ROOT, file), join(project, file));
    writeFileSync(join(project, "infra/worker/bridge.yaml"), configNamed("bundled_metric"));
  });
  afterAll(async () => {
    await Promise.all(running.map((w) => w.close()));
    rmSync(project, { recursive: true, force: true });
  });

  it("serves the bundled config, and a BRIDGE_CONFIG binding wins over it", async () => {
    const build = await buildWorker({ root: project });
    const bundled = await startWorker(undefined, {}, { build });
    running.push(bundled);
    expect(await discoveryNames(bundled)).toEqual(["bundled_metric"]);
    const bound = await startWorker(configNamed("bound_metric"), {}, { build });
    running.push(bound);
    expect(await discoveryNames(bound)).toEqual(["bound_metric"]);
  });
});
