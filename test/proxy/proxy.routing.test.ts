/**
 * Routing, merged discovery and pass-through, end to end: the proxy over TLS
 * in front of two real bridges (`functions/node.ts`, reading a fauxqs SQS
 * emulator through the real AWS SDK, verifying the proxy's signatures) and a
 * fake "existing adapter" (an HTTPS server with its own CA that requires the
 * proxy's bearer token, like KEDA's metrics server behind delegated authn).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCA, issueCertificate } from "../../shared/proxy/tls/certs.ts";
import { startNodeServer, type NodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { createPki, KEYS, startHarness, V1, type Harness, type Pki } from "./proxy.harness.ts";
import { closeServer } from "../helpers/http.ts";

const NS = `${V1}/namespaces/default`;
const ADAPTER_TOKEN = `proxy-sa-token-${crypto.randomUUID()}`;

function bridgeConfig(endpoint: string, metrics: string): string {
  return `${sqsConfigHead(endpoint, { defaults: "{ maxAgeSeconds: 30, cacheTTLSeconds: 0 }" })}
metrics:
${metrics}`;
}

/** A fake in-cluster adapter (think KEDA's metrics server): HTTPS, bearer token required. */
async function startAdapter() {
  const ca = await createCA("adapter-ca");
  const cert = await issueCertificate(ca, { commonName: "adapter", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"], usages: ["serverAuth"] });
  const seen: { path: string; authorization?: string; requestId?: string }[] = [];
  const server = https.createServer({ cert: cert.certPem, key: cert.keyPem }, (req, res) => {
    seen.push({ path: req.url ?? "", authorization: req.headers.authorization, requestId: req.headers["x-request-id"] as string });
    const json = (code: number, body: unknown) => {
      res.writeHead(code, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${ADAPTER_TOKEN}`) {
      return json(401, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "Unauthorized", reason: "Unauthorized", code: 401 });
    }
    const path = new URL(req.url ?? "/", "https://x").pathname;
    if (path === V1) {
      return json(200, {
        kind: "APIResourceList",
        apiVersion: "v1",
        groupVersion: "external.metrics.k8s.io/v1beta1",
        resources: [
          { name: "externalmetrics", singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] },
          { name: "s0-rabbitmq-queue", singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] },
        ],
      });
    }
    if (path === `${NS}/s0-rabbitmq-queue`) {
      return json(200, {
        kind: "ExternalMetricValueList",
        apiVersion: "external.metrics.k8s.io/v1beta1",
        metadata: {},
        items: [{ metricName: "s0-rabbitmq-queue", metricLabels: {}, timestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"), value: "25" }],
      });
    }
    return json(404, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "no such metric in the adapter", reason: "NotFound", code: 404 });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    caPem: ca.certPem,
    seen,
    close: () => closeServer(server),
  };
}

let sqs: Emulator;
let pki: Pki;
let a: NodeServer;
let b: NodeServer;
let adapter: Awaited<ReturnType<typeof startAdapter>>;
let h: Harness;
let dir: string;

function routedConfig(extra = "passthrough: keda"): string {
  return `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  a: { url: "${a.url}", timeoutSeconds: 2 }
  b: { url: "${b.url}/", timeoutSeconds: 2 }
  keda:
    url: "${adapter.url}"
    type: passthrough
    caFile: ${join(dir, "adapter-ca.crt")}
    bearerTokenFile: ${join(dir, "token")}
routes:
  - { metric: "queue_messages_ready", backend: a }
  - { metric: "queue_.*|team/.*", backend: b }
${extra}
cache: { ttlSeconds: 0 }
discovery: { ttlSeconds: 0 }
`;
}

const masters = () => ({ cert: pki.frontProxy, headers: { "X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters" } });
const hpa = () => ({ cert: pki.frontProxy, headers: { "X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler" } });

beforeAll(async () => {
  [sqs, pki, adapter] = await Promise.all([startEmulator(), createPki(), startAdapter()]);
  for (const [queue, n] of [["jobs", 7], ["b_jobs", 99], ["team_web", 3], ["mail", 2]] as const) {
    await sqs.createQueue(queue);
    await sqs.add(queue, n);
  }
  const env = { BRIDGE_SIGNING_KEYS: KEYS };
  a = await startNodeServer({
    config: loadConfig(bridgeConfig(sqs.endpoint, "  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }\n"), "a.yaml").config,
    port: 0,
    env,
    log: () => {},
  });
  b = await startNodeServer({
    config: loadConfig(
      bridgeConfig(
        sqs.endpoint,
        `  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue, queueNameTemplate: "b_{queue}" } }
  - { name: queue_messages_backlog, provider: sqs, query: { queueLabel: queue, attribute: [ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible] } }
  - { name: Team/Queue_Depth, provider: sqs, query: { queueLabel: app, queueNameTemplate: "team_{queue}" } }
`,
      ),
      "b.yaml",
    ).config,
    port: 0,
    env,
    log: () => {},
  });
  dir = mkdtempSync(join(tmpdir(), "emb-proxy-routing-"));
  writeFileSync(join(dir, "adapter-ca.crt"), adapter.caPem);
  writeFileSync(join(dir, "token"), `${ADAPTER_TOKEN}\n`);
  h = await startHarness({ pki, proxyConfig: routedConfig() });
  h.fake.authorize = () => ({ allowed: true });
}, 120_000);

afterAll(async () => {
  await h?.close();
  // Some were stopped by the tests already.
  await Promise.all([a?.close(), b?.close(), adapter?.close(), sqs?.stop()].map((p) => p?.catch(() => {})));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("routing", () => {
  it("sends a metric to the first route that matches (ordered), through the real bridge and SQS", async () => {
    const res = await h.get(`${NS}/queue_messages_ready?labelSelector=queue%3Djobs`, hpa());
    expect(res.status, res.text).toBe(200);
    // Bridge a reads `jobs` (7); bridge b would have read `b_jobs` (99).
    expect(res.json().items).toMatchObject([{ metricName: "queue_messages_ready", metricLabels: { queue: "jobs" }, value: "7" }]);
  });

  it("sends other matching names to the second route's backend (with a path prefix on its URL)", async () => {
    const backlog = await h.get(`${NS}/queue_messages_backlog?labelSelector=queue%3Dmail`, hpa());
    expect(backlog.status, backlog.text).toBe(200);
    expect(backlog.json().items[0]).toMatchObject({ metricLabels: { queue: "mail" }, value: "2" });
    const team = await h.get(`${NS}/team%7Cqueue_depth?labelSelector=app%3Dweb`, hpa());
    expect(team.status, team.text).toBe(200);
    expect(team.json().items[0]).toMatchObject({ metricName: "team|queue_depth", value: "3" });
  });

  it("sends metrics no route claims to the pass-through adapter with the proxy's own credentials", async () => {
    const res = await h.get(`${NS}/s0-rabbitmq-queue?labelSelector=scaledobject.keda.sh%2Fname%3Dworker`, hpa());
    expect(res.status, res.text).toBe(200);
    expect(res.json().items[0]).toMatchObject({ metricName: "s0-rabbitmq-queue", value: "25" });
    const seen = adapter.seen.at(-1)!;
    expect(seen).toEqual({
      path: `${NS}/s0-rabbitmq-queue?labelSelector=scaledobject.keda.sh%2Fname%3Dworker`,
      authorization: `Bearer ${ADAPTER_TOKEN}`,
      requestId: res.headers["x-request-id"],
    });
  });

  it("passes a backend's own Status through (the adapter's 404)", async () => {
    const res = await h.get(`${NS}/unknown_to_everyone`, hpa());
    expect(res.status).toBe(404);
    expect(res.json()).toMatchObject({ kind: "Status", reason: "NotFound", message: "no such metric in the adapter" });
  });

  it("answers 400 for a metric name no backend could accept, without calling one", async () => {
    const calls = adapter.seen.length;
    const res = await h.get(`${NS}/bad%00name`, hpa());
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ kind: "Status", reason: "BadRequest" });
    expect(adapter.seen.length).toBe(calls);
  });
});

describe("merged discovery", () => {
  it("lists each backend's metrics that the routes send to it, deduplicated and sorted", async () => {
    const res = await h.get(V1, masters());
    expect(res.status, res.text).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ kind: "APIResourceList", apiVersion: "v1", groupVersion: "external.metrics.k8s.io/v1beta1" });
    expect(body.resources.map((r: { name: string }) => r.name)).toEqual([
      "externalmetrics",
      "queue_messages_backlog",
      "queue_messages_ready",
      "s0-rabbitmq-queue",
      "team|queue_depth",
    ]);
    for (const r of body.resources) expect(r).toEqual({ name: r.name, singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] });
  });

  it("answers /apis and the group itself from the proxy", async () => {
    expect((await h.get("/apis", masters())).json()).toMatchObject({ kind: "APIGroupList", groups: [{ name: "external.metrics.k8s.io" }] });
    expect((await h.get("/apis/external.metrics.k8s.io", masters())).json()).toMatchObject({ kind: "APIGroup", name: "external.metrics.k8s.io" });
  });
});

describe("without a pass-through backend", () => {
  it("answers 404 for metrics no route claims", async () => {
    const h2 = await startHarness({ pki, proxyConfig: routedConfig(""), fake: h.fake });
    try {
      const res = await h2.get(`${NS}/s0-rabbitmq-queue`, hpa());
      expect(res.status).toBe(404);
      expect(res.json().message).toMatch(/no route claims it and no passthrough backend/);
      // …and discovery lists only routed metrics.
      const names = (await h2.get(V1, masters())).json().resources.map((r: { name: string }) => r.name);
      expect(names).toEqual(["queue_messages_backlog", "queue_messages_ready", "team|queue_depth"]);
    } finally {
      await h2.close();
    }
  });
});

describe("a backend that is down", () => {
  it("answers 503 without Retry-After for its metrics; discovery stays partial; readiness holds while one backend answers", async () => {
    await b.close();
    const res = await h.get(`${NS}/queue_messages_backlog?labelSelector=queue%3Dmail`, hpa());
    expect(res.status).toBe(503);
    expect(res.headers["retry-after"]).toBeUndefined(); // one attempt for the HPA's client-go
    expect(res.json()).toMatchObject({ kind: "Status", reason: "ServiceUnavailable" });
    expect(res.json().details?.retryAfterSeconds).toBeUndefined();
    expect(res.json().message).toMatch(/backend b is unreachable/);
    // Discovery keeps what b listed last: a backend's outage never removes its metrics.
    expect(await h.proxy.checkReadiness()).toBe(true);
    const names = (await h.get(V1, masters())).json().resources.map((r: { name: string }) => r.name);
    expect(names).toEqual(["externalmetrics", "queue_messages_backlog", "queue_messages_ready", "s0-rabbitmq-queue", "team|queue_depth"]);
    expect(h.proxy.forwarder.backendHealth.get("b")).toBe(false);
    expect((await h.get("/readyz")).status).toBe(200);
    // Bridge a still serves.
    expect((await h.get(`${NS}/queue_messages_ready?labelSelector=queue%3Djobs`, hpa())).status).toBe(200);
  });

  it("stays ready and answers discovery from the list it holds when no backend answers", async () => {
    await a.close();
    await adapter.close();
    expect(await h.proxy.checkReadiness()).toBe(true);
    const res = await h.get(V1, masters());
    expect(res.status, res.text).toBe(200);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.json().resources.map((r: { name: string }) => r.name)).toEqual([
      "externalmetrics",
      "queue_messages_backlog",
      "queue_messages_ready",
      "s0-rabbitmq-queue",
      "team|queue_depth",
    ]);
    expect(Object.fromEntries(h.proxy.forwarder.backendHealth)).toEqual({ a: false, b: false, keda: false });
    const ready = await h.get("/readyz");
    expect(ready.status, ready.text).toBe(200);
  });
});
