/**
 * custom.metrics.k8s.io through the real proxy (issue 26, contract C3):
 * HTTPS with kube-apiserver's front-proxy client certificate, the fake
 * Kubernetes API (SubjectAccessReviews, pods as PartialObjectMetadataList
 * and watch, discovery and described objects: ./custom-objects.fake.ts),
 * and a bridge-shaped backend that verifies the proxy's `EMB-HMAC-SHA256-3`
 * signature over the body with shared/signing.ts `verifyRequest` and answers
 * with the project's `customAnswer` for the pods or object it was sent.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { customAnswer, type CustomMetricItem } from "../../shared/values/custom-answer.ts";
import { customApiResourceList, type CustomVersion } from "../../shared/k8s/custom-types.ts";
import { parseDecimal } from "../../shared/k8s/quantity.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { MAX_PODS_PER_READ, type DescribedObject } from "../../shared/values/custom-read.ts";
import { MAX_PODS_PER_READ as PROXY_MAX_PODS } from "../../shared/proxy/custom/pods.ts";
import { parseSigningKeys, verifyRequest } from "../../shared/signing.ts";
import type { Caller } from "../../shared/identity.ts";
import { startFakeKubeApiServer, rbac, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { closeServer } from "../helpers/http.ts";
import { customObjectsFake, type CustomObjectsFake } from "./custom-objects.fake.ts";
import { createPki, eventually, KEYS, startHarness, type Harness, type Pki, type Reply, HPA_FRONT_PROXY as HPA } from "./proxy.harness.ts";

const C2 = "/apis/custom.metrics.k8s.io/v1beta2";
const C1 = "/apis/custom.metrics.k8s.io/v1beta1";

/** One request the fake bridge received. */
interface BridgeCall {
  method: string;
  path: string;
  body: unknown;
  /** the caller the signature carried (undefined: refused) */
  caller?: Caller;
  error?: string;
}

/** A bridge-shaped backend for custom reads. */
interface CustomBridge {
  url: string;
  calls: BridgeCall[];
  /** override a values answer: [status, body, headers] */
  answer?: (path: string) => [number, string, Record<string, string>?] | undefined;
  close(): Promise<void>;
}

/** Start the fake bridge: discovery of both groups, signed POSTs of custom reads answered with `customAnswer`. */
async function startCustomBridge(): Promise<CustomBridge> {
  const keys = parseSigningKeys(KEYS);
  const bridge: CustomBridge = { url: "", calls: [], close: () => closeServer(server) };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const url = `http://${req.headers.host}${req.url}`;
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const call: BridgeCall = { method: req.method ?? "", path: req.url ?? "", body: raw.length > 0 ? JSON.parse(raw.toString("utf8")) : undefined };
    bridge.calls.push(call);
    const write = (code: number, body: unknown, extra: Record<string, string> = {}) => {
      res.writeHead(code, { "Content-Type": "application/json", ...extra });
      res.end(typeof body === "string" ? body : JSON.stringify(body));
    };
    try {
      call.caller = await verifyRequest(new Request(url, { method: req.method ?? "GET", headers }), keys, { nowMs: Date.now(), ...(raw.length > 0 ? { body: new Uint8Array(raw) } : {}) });
    } catch (err) {
      call.error = (err as Error).message;
      return write(401, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: call.error, reason: "Unauthorized", code: 401 });
    }
    const path = new URL(url).pathname;
    if (path === "/apis/external.metrics.k8s.io/v1beta1") {
      return write(200, { kind: "APIResourceList", apiVersion: "v1", groupVersion: "external.metrics.k8s.io/v1beta1", resources: [{ name: "queue_depth", singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] }] });
    }
    const version = path.split("/")[3] as CustomVersion;
    if (path === C2 || path === C1) {
      return write(200, customApiResourceList(version, [
        { resource: "pods", metric: "pod_requests", namespaced: true },
        { resource: "services", metric: "svc_latency", namespaced: true },
        { resource: "namespaces", metric: "ns_queue", namespaced: false },
        { resource: "pods", metric: "unrouted_metric", namespaced: true },
      ]));
    }
    const custom = bridge.answer?.(path);
    if (custom) return write(custom[0], custom[1], custom[2]);
    if (req.method !== "POST") return write(405, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "custom reads come as POST", reason: "MethodNotAllowed", code: 405 });
    const segments = path.split("/");
    const metric = segments[segments.length - 1]!;
    const body = call.body as { pods?: string[]; object?: DescribedObject };
    const now = Date.now();
    let items: CustomMetricItem[];
    if (body.pods !== undefined) {
      const namespace = segments[5]!;
      items = body.pods.map((name, i) => ({ describedObject: { kind: "Pod", apiVersion: "v1", namespace, name }, value: parseDecimal(String(i + 1)), timestamp: now }));
    } else if (body.object !== undefined) {
      const o = body.object;
      items = [{ describedObject: { kind: o.kind, apiVersion: o.apiVersion, name: o.name, ...(o.namespace ? { namespace: o.namespace } : {}) }, value: parseDecimal("7"), timestamp: now, windowSeconds: 60 }];
    } else {
      items = [{ describedObject: { kind: "Namespace", apiVersion: "v1", name: segments[5]! }, value: parseDecimal("3"), timestamp: now }];
    }
    return write(200, customAnswer(version, metric, null, items).text, { "Cache-Control": "no-store" });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  bridge.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return bridge;
}

/** An existing custom-metrics adapter (prometheus-adapter-like): plain GETs with the proxy's own credentials; it resolves objects itself. */
interface Adapter {
  url: string;
  calls: { method: string; path: string; authorization?: string; body: string }[];
  close(): Promise<void>;
}

async function startAdapter(): Promise<Adapter> {
  const adapter: Adapter = { url: "", calls: [], close: () => closeServer(server) };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    adapter.calls.push({ method: req.method ?? "", path: req.url ?? "", ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}), body: Buffer.concat(chunks).toString("utf8") });
    const path = new URL(req.url ?? "/", "http://adapter").pathname;
    res.writeHead(200, { "Content-Type": "application/json" });
    if (path === "/apis/external.metrics.k8s.io/v1beta1") return res.end(JSON.stringify({ kind: "APIResourceList", apiVersion: "v1", groupVersion: "external.metrics.k8s.io/v1beta1", resources: [] }));
    const version = path.split("/")[3] as CustomVersion;
    if (path === C2 || path === C1) return res.end(JSON.stringify(customApiResourceList(version, [{ resource: "pods", metric: "adapter_rps", namespaced: true }])));
    const items: CustomMetricItem[] = [{ describedObject: { kind: "Pod", apiVersion: "v1", namespace: "team", name: "web-2" }, value: parseDecimal("11"), timestamp: Date.now() }];
    res.end(customAnswer(version, "adapter_rps", null, items).text);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  adapter.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return adapter;
}

let pki: Pki;
let bridge: CustomBridge;
let adapter: Adapter;
let tokenFile: string;

beforeAll(async () => {
  pki = await createPki();
  bridge = await startCustomBridge();
  adapter = await startAdapter();
  tokenFile = join(mkdtempSync(join(tmpdir(), "emb-custom-")), "token");
  writeFileSync(tokenFile, "proxy-sa-token\n");
});
afterAll(async () => {
  await bridge?.close();
  await adapter?.close();
});

/** The HPA's RBAC (kube-system:horizontal-pod-autoscaler may get every custom metric) and a tenant allowed nothing custom. */
const HPA_RBAC = rbac([
  { groups: ["system:serviceaccounts:kube-system"], verbs: ["get", "list"], apiGroups: ["custom.metrics.k8s.io", "external.metrics.k8s.io"], resources: ["*"] },
  { groups: ["system:serviceaccounts:kube-system"], verbs: ["get"], nonResourceURLs: ["*"] },
]);

/** A proxy with custom metrics on, against its own fake API and the objects fake. */
async function customProxy(options: { extraConfig?: string; objectsFake?: CustomObjectsFake; register?: boolean; custom?: string; clusterPolicies?: boolean } = {}): Promise<{ h: Harness; fake: FakeKubeApiServer; objects: CustomObjectsFake }> {
  const fake = await startFakeKubeApiServer();
  const objects = options.objectsFake ?? customObjectsFake();
  fake.extraRoutes = objects.route;
  fake.authorize = HPA_RBAC;
  const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
  const config = [
    "apiVersion: external-metrics-bridge.io/v1alpha1",
    "kind: ProxyConfig",
    "backends:",
    `  fns: { url: "${bridge.url}", timeoutSeconds: 2 }`,
    `  down: { url: "http://127.0.0.1:1", timeoutSeconds: 1 }`,
    `  adapter: { url: "${adapter.url}", type: passthrough, bearerTokenFile: "${tokenFile}", timeoutSeconds: 2 }`,
    "routes:",
    '  - { metric: "down_.*", backend: down }',
    '  - { metric: "adapter_.*", backend: adapter }',
    '  - { metric: "pod_.*|svc_.*|ns_.*|ing_.*|bad_.*|queue_.*", backend: fns }',
    "cache: { ttlSeconds: 0 }",
    options.custom ?? "customMetrics: { enabled: true, objects: { maxBytes: 4096, timeoutMs: 800 } }",
    options.extraConfig ?? "",
  ].join("\n");
  const h = await startHarness({
    pki,
    fake,
    proxyConfig: config,
    ...(options.register ? { register: true } : {}),
    extra: { kube: kc, ...(options.clusterPolicies ? { clusterPolicies: { kc, debounceMs: 20, backoffMs: 50 } } : {}) },
  });
  return { h, fake, objects };
}

function hpa(h: Harness, path: string): Promise<Reply> {
  return h.get(path, { cert: pki.frontProxy, headers: HPA });
}

function seedObjects(objects: CustomObjectsFake): void {
  objects.pods.set("team/web-1", { app: "web", tier: "front" });
  objects.pods.set("team/web-2", { app: "web" });
  objects.pods.set("team/db-1", { app: "db" });
  objects.pods.set("other/web-9", { app: "web" });
  for (let i = 0; i < 1001; i++) objects.pods.set(`big/p-${String(i).padStart(4, "0")}`, { app: "many" });
  objects.objects.set("/api/v1/namespaces/team/services/frontend", {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "frontend", namespace: "team", labels: { app: "web" }, annotations: { "emb.io/id": "lb-1" }, resourceVersion: "5", managedFields: [{ manager: "kubectl" }] },
    spec: { ports: [{ port: 80 }] },
    status: { loadBalancer: { ingress: [{ hostname: "lb-1.example" }] } },
  });
  objects.objects.set("/api/v1/namespaces/team/services/huge", {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "huge", namespace: "team", annotations: { big: "x".repeat(8000) } },
  });
  objects.objects.set("/apis/networking.k8s.io/v1/namespaces/team/ingresses/web", {
    apiVersion: "networking.k8s.io/v1",
    kind: "Ingress",
    metadata: { name: "web", namespace: "team", labels: { app: "web" } },
    status: { loadBalancer: {} },
  });
  objects.forbidden.add("/api/v1/namespaces/team/configmaps/secret-ish");
}

describe("custom.metrics.k8s.io through the proxy", () => {
  let h: Harness;
  let fake: FakeKubeApiServer;
  let objects: CustomObjectsFake;
  beforeAll(async () => {
    objects = customObjectsFake();
    seedObjects(objects);
    ({ h, fake, objects } = await customProxy({ objectsFake: objects, register: true }));
    await h.proxy.checkReadiness();
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
  });

  it("lists the custom group and each version's resources merged from the routed backends", async () => {
    const apis = (await hpa(h, "/apis")).json();
    expect(apis.groups.map((g: { name: string }) => g.name)).toEqual(["external.metrics.k8s.io", "custom.metrics.k8s.io"]);
    const group = (await hpa(h, "/apis/custom.metrics.k8s.io")).json();
    expect(group).toMatchObject({ kind: "APIGroup", name: "custom.metrics.k8s.io", preferredVersion: { groupVersion: "custom.metrics.k8s.io/v1beta2" } });
    for (const [path, gv] of [[C2, "custom.metrics.k8s.io/v1beta2"], [C1, "custom.metrics.k8s.io/v1beta1"]] as const) {
      const list = (await hpa(h, path)).json();
      expect(list.groupVersion).toBe(gv);
      // unrouted_metric is listed by the backend but no route sends it there: not listed.
      expect(list.resources.map((r: { name: string }) => r.name)).toEqual(["namespaces/ns_queue", "pods/adapter_rps", "pods/pod_requests", "services/svc_latency"]);
      expect(list.resources.find((r: { name: string }) => r.name === "namespaces/ns_queue").namespaced).toBe(false);
    }
    expect((await hpa(h, "/apis/custom.metrics.k8s.io/v1")).status).toBe(404);
  });

  it("registers v1beta2 and v1beta1 of custom.metrics.k8s.io beside External", async () => {
    await eventually(() => fake.apiServices.size === 3, 5000, "three APIServices");
    const spec = (name: string) => (fake.apiServices.get(name) as unknown as { spec: Record<string, unknown> }).spec;
    expect(spec("v1beta2.custom.metrics.k8s.io")).toMatchObject({ group: "custom.metrics.k8s.io", version: "v1beta2", groupPriorityMinimum: 100, versionPriority: 200 });
    expect(spec("v1beta1.custom.metrics.k8s.io")).toMatchObject({ group: "custom.metrics.k8s.io", version: "v1beta1", groupPriorityMinimum: 100, versionPriority: 100 });
    expect(spec("v1beta1.external.metrics.k8s.io")).toMatchObject({ group: "external.metrics.k8s.io", version: "v1beta1" });
    expect(spec("v1beta2.custom.metrics.k8s.io")["caBundle"]).toBe(spec("v1beta1.external.metrics.k8s.io")["caBundle"]);
  });

  it("answers a Pods read with the namespace's matching pods from the metadata informer, signed over the body", async () => {
    const before = bridge.calls.length;
    const reply = await hpa(h, `${C2}/namespaces/team/pods/%2A/pod_requests?labelSelector=app%3Dweb`);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.headers["retry-after"]).toBeUndefined();
    const list = reply.json();
    expect(list).toMatchObject({ kind: "MetricValueList", apiVersion: "custom.metrics.k8s.io/v1beta2" });
    expect(list.items.map((i: { describedObject: { name: string } }) => i.describedObject.name)).toEqual(["web-1", "web-2"]);
    const sent = bridge.calls.slice(before).filter((c) => c.method === "POST");
    expect(sent).toHaveLength(1);
    expect(sent[0]!.path).toBe("/apis/custom.metrics.k8s.io/v1beta2/namespaces/team/pods/%2A/pod_requests?labelSelector=app%3Dweb");
    expect(sent[0]!.body).toEqual({ pods: ["web-1", "web-2"] });
    expect(sent[0]!.caller?.user).toBe(HPA["X-Remote-User"]);
    // metadata only: the list asked for PartialObjectMetadataList, the watch for PartialObjectMetadata
    expect(objects.podRequests.find((r) => !r.watch)?.accept).toMatch(/^application\/json;as=PartialObjectMetadataList;g=meta\.k8s\.io;v=v1/);
    await eventually(() => objects.podRequests.some((r) => r.watch), 2000, "the pod watch");
    expect(objects.podRequests.find((r) => r.watch)?.accept).toMatch(/^application\/json;as=PartialObjectMetadata;g=meta\.k8s\.io;v=v1/);
    // the SubjectAccessReview carries requestinfo.go's attributes of the path
    const review = fake.reviews.subjectAccessReviews.find((r) => r.resourceAttributes?.subresource === "pod_requests");
    expect(review?.resourceAttributes).toEqual({ namespace: "team", verb: "get", group: "custom.metrics.k8s.io", version: "v1beta2", resource: "pods", subresource: "pod_requests", name: "*" });
  });

  it("follows the pod watch: a new matching pod is in the next read, a deleted one is not", async () => {
    objects.setPod("team", "web-3", { app: "web" });
    objects.deletePod("team", "web-1");
    await eventually(async () => {
      const list = (await hpa(h, `${C2}/namespaces/team/pods/%2A/pod_requests?labelSelector=app%3Dweb`)).json();
      return JSON.stringify(list.items.map((i: { describedObject: { name: string } }) => i.describedObject.name)) === JSON.stringify(["web-2", "web-3"]);
    }, 3000, "web-3 in and web-1 out");
  });

  it("sends a read routed to a passthrough adapter as the HPA's GET with the proxy's credentials, resolving no object", async () => {
    const before = adapter.calls.length;
    const podLists = objects.podRequests.length;
    const reply = await hpa(h, `${C2}/namespaces/big/pods/%2A/adapter_rps?labelSelector=app%3Dmany`);
    expect(reply.status, reply.text).toBe(200);
    const call = adapter.calls.slice(before).find((c) => c.path.includes("adapter_rps"));
    expect(call).toEqual({ method: "GET", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/big/pods/%2A/adapter_rps?labelSelector=app%3Dmany", authorization: "Bearer proxy-sa-token", body: "" });
    // the adapter resolves the 1001 pods itself: no 400 from the proxy's limit, no list
    expect(objects.podRequests.length).toBe(podLists);
  });

  it("refuses a Pods read selecting more than MAX_PODS_PER_READ pods with 400 naming the limit, before the bridge", async () => {
    expect(PROXY_MAX_PODS).toBe(MAX_PODS_PER_READ); // the proxy's copy of the bridge's limit
    const before = bridge.calls.length;
    const reply = await hpa(h, `${C2}/namespaces/big/pods/%2A/pod_requests?labelSelector=app%3Dmany`);
    expect(reply.status).toBe(400);
    expect(reply.json().message).toMatch(/more than 1000 pods/);
    expect(bridge.calls.length).toBe(before);
  });

  it("answers an Object read with the object read by GET, reduced to the described object", async () => {
    const before = bridge.calls.length;
    const reply = await hpa(h, `${C2}/namespaces/team/services/frontend/svc_latency`);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json().items).toHaveLength(1);
    const sent = bridge.calls.slice(before).find((c) => c.method === "POST");
    expect(sent?.body).toEqual({
      object: { kind: "Service", apiVersion: "v1", name: "frontend", namespace: "team", labels: { app: "web" }, annotations: { "emb.io/id": "lb-1" }, status: { loadBalancer: { ingress: [{ hostname: "lb-1.example" }] } } },
    });
    expect(sent?.caller).toBeDefined();
  });

  it("finds a grouped resource's URL by discovery of its group (cached) and serves v1beta1", async () => {
    const reply = await hpa(h, `${C1}/namespaces/team/ingresses.networking.k8s.io/web/ing_rps`);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json().apiVersion).toBe("custom.metrics.k8s.io/v1beta1");
    expect(reply.json().items[0]).toMatchObject({ describedObject: { kind: "Ingress", name: "web", namespace: "team", apiVersion: "networking.k8s.io/v1" }, metricName: "ing_rps", window: 60 });
    const discoveries = objects.gets.filter((p) => p === "/apis/networking.k8s.io").length;
    expect((await hpa(h, `${C1}/namespaces/team/ingresses.networking.k8s.io/web/ing_rps`)).status).toBe(200);
    expect(objects.gets.filter((p) => p === "/apis/networking.k8s.io").length).toBe(discoveries);
    expect((await hpa(h, `${C2}/namespaces/team/widgets.example.com/w/ing_rps`)).status).toBe(404);
  });

  it("answers a namespace read with an empty body; its review names resource metrics", async () => {
    const before = bridge.calls.length;
    const reply = await hpa(h, `${C2}/namespaces/team/metrics/ns_queue`);
    expect(reply.status, reply.text).toBe(200);
    expect(bridge.calls.slice(before).find((c) => c.method === "POST")?.body).toEqual({});
    const review = fake.reviews.subjectAccessReviews.find((r) => r.resourceAttributes?.resource === "metrics");
    expect(review?.resourceAttributes).toEqual({ namespace: "team", verb: "get", group: "custom.metrics.k8s.io", version: "v1beta2", resource: "metrics", name: "ns_queue" });
  });

  it("maps the object's 404 and 403 to Status, and refuses an object over the byte limit", async () => {
    const missing = await hpa(h, `${C2}/namespaces/team/services/nope/svc_latency`);
    expect(missing.status).toBe(404);
    expect(missing.json()).toMatchObject({ kind: "Status", code: 404, details: { name: "nope", group: "custom.metrics.k8s.io", kind: "services" } });
    const denied = await hpa(h, `${C2}/namespaces/team/configmaps/secret-ish/svc_latency`);
    expect(denied.status).toBe(403);
    expect(denied.json().message).toMatch(/the proxy may not read configmaps .*RBAC "get configmaps"/);
    const huge = await hpa(h, `${C2}/namespaces/team/services/huge/svc_latency`);
    expect(huge.status).toBe(500);
    expect(huge.json().message).toMatch(/larger than 4096 bytes/);
    // a cluster-scoped read of a namespaced resource
    expect((await hpa(h, `${C2}/services/frontend/svc_latency`)).status).toBe(404);
  });

  it("refuses a caller RBAC denies with 403, before any object or backend work", async () => {
    const token = "tenant-token";
    fake.tokens.set(token, { username: "system:serviceaccount:team:app", groups: ["system:serviceaccounts", "system:authenticated"] });
    const before = bridge.calls.length;
    const gets = objects.gets.length;
    const reply = await h.get(`${C2}/namespaces/team/services/frontend/svc_latency`, { headers: { Authorization: `Bearer ${token}` } });
    expect(reply.status).toBe(403);
    expect(reply.json().message).toMatch(/custom\.metrics\.k8s\.io/);
    expect(bridge.calls.length).toBe(before);
    expect(objects.gets.length).toBe(gets);
  });

  it("answers 503 without Retry-After when the bridge is down or answers 503, and never passes a bad answer as a value", async () => {
    const down = await hpa(h, `${C2}/namespaces/team/metrics/down_metric`);
    expect(down.status).toBe(503);
    expect(down.headers["retry-after"]).toBeUndefined();
    bridge.answer = (path) => {
      if (path.endsWith("/ns_busy")) return [503, JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "provider throttled", reason: "ServiceUnavailable", code: 503, details: { retryAfterSeconds: 5 } }), { "Retry-After": "5" }];
      if (path.endsWith("/ns_nan")) return [200, JSON.stringify({ kind: "MetricValueList", apiVersion: "custom.metrics.k8s.io/v1beta2", metadata: {}, items: [{ describedObject: { kind: "Namespace", name: "team", apiVersion: "v1" }, metric: { name: "ns_nan", selector: null }, timestamp: "2026-01-01T00:00:00Z", value: "NaN" }] })];
      if (path.endsWith("/svc_empty")) return [200, JSON.stringify({ kind: "MetricValueList", apiVersion: "custom.metrics.k8s.io/v1beta2", metadata: {}, items: [] })];
      return undefined;
    };
    try {
      const busy = await hpa(h, `${C2}/namespaces/team/metrics/ns_busy`);
      expect(busy.status).toBe(503);
      expect(busy.headers["retry-after"]).toBeUndefined();
      expect(busy.json().message).toBe("provider throttled");
      const nan = await hpa(h, `${C2}/namespaces/team/metrics/ns_nan`);
      expect(nan.status).toBe(503);
      expect(nan.json().message).toMatch(/items\[0\]\.value/);
      const empty = await hpa(h, `${C2}/namespaces/team/services/frontend/svc_empty`);
      expect(empty.status).toBe(503);
      expect(empty.json().message).toMatch(/0 items for one object/);
    } finally {
      bridge.answer = undefined;
    }
  });

  it("refuses a selection of another resource than pods, a repeated selector, and a GET of an unknown shape", async () => {
    expect((await hpa(h, `${C2}/namespaces/team/services/%2A/svc_latency`)).status).toBe(400);
    expect((await hpa(h, `${C2}/namespaces/team/metrics/ns_queue?metricLabelSelector=a%3Db&metricLabelSelector=c%3Dd`)).status).toBe(400);
    expect((await hpa(h, `${C2}/namespaces/team/pods`)).status).toBe(404);
  });

  it("labels custom reads in the proxy's metrics and logs", async () => {
    await hpa(h, `${C2}/namespaces/team/metrics/ns_queue`);
    const text = await (await hpa(h, "/metrics")).text;
    expect(text).toMatch(/emb_proxy_requests_total\{code="200",kind="custom",metric="ns_queue"\}/);
    // the pod index and the resource cache are bounded caches like the others
    expect(text).toMatch(/emb_proxy_cache_entries\{cache="custom-pods"\} [1-9]/);
    expect(text).toMatch(/emb_proxy_cache_bytes\{cache="custom-pods"\} [1-9]/);
    expect(text).toMatch(/emb_proxy_cache_entries\{cache="custom-resources"\} [1-9]/);
    const line = h.logs.filter((l) => l.msg === "request" && (l as Record<string, unknown>)["resource"] === "namespaces").pop() as Record<string, unknown> | undefined;
    expect(line).toMatchObject({ metric: "ns_queue", namespace: "team", resource: "namespaces", backend: "fns", code: 200 });
  });
});

describe("ProxyConfig customMetrics", () => {
  const head = "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ProxyConfig\nbackends:\n  fns: { url: \"http://127.0.0.1:1\" }\nroutes:\n  - { metric: \".*\", backend: fns }\n";
  it("is off by default, with its bounds' defaults", () => {
    expect(loadProxyConfig(head, "proxy.yaml").customMetrics).toEqual({ enabled: false, pods: { maxEntries: 50000, maxBytes: 33554432 }, objects: { maxBytes: 65536, timeoutMs: 2000 } });
  });
  it("refuses an object limit over 64 KiB, a deadline past 3 s and an unknown field, naming them", () => {
    expect(() => loadProxyConfig(`${head}customMetrics: { enabled: true, objects: { maxBytes: 65537 } }`, "proxy.yaml")).toThrow(/customMetrics\.objects\.maxBytes/);
    expect(() => loadProxyConfig(`${head}customMetrics: { objects: { timeoutMs: 5000 } }`, "proxy.yaml")).toThrow(/customMetrics\.objects\.timeoutMs/);
    expect(() => loadProxyConfig(`${head}customMetrics: { enable: true }`, "proxy.yaml")).toThrow(/enable/);
  });
});

describe("custom.metrics.k8s.io switched off (the default)", () => {
  it("lists no custom group, answers 404 on its paths, registers only External and lists no pod", async () => {
    const { h, fake, objects } = await customProxy({ custom: "", register: true });
    try {
      await h.proxy.checkReadiness();
      const apis = (await hpa(h, "/apis")).json();
      expect(apis.groups.map((g: { name: string }) => g.name)).toEqual(["external.metrics.k8s.io"]);
      expect((await hpa(h, "/apis/custom.metrics.k8s.io")).status).toBe(404);
      expect((await hpa(h, C2)).status).toBe(404);
      expect((await hpa(h, `${C2}/namespaces/team/pods/%2A/pod_requests`)).status).toBe(404);
      await eventually(() => fake.apiServices.size >= 1, 5000, "the APIService");
      expect([...fake.apiServices.keys()]).toEqual(["v1beta1.external.metrics.k8s.io"]);
      expect(objects.podRequests).toEqual([]);
    } finally {
      await h.close();
      await fake.close();
    }
  });
});

describe("custom.metrics.k8s.io edge cases", () => {
  it("answers 503 without Retry-After while the pod informer has not synced within the read's deadline", async () => {
    const objects = customObjectsFake();
    objects.pods.set("team/web-1", { app: "web" });
    objects.holdPodLists = true;
    const { h, fake } = await customProxy({ objectsFake: objects, custom: "customMetrics: { enabled: true, objects: { timeoutMs: 300 } }" });
    try {
      const started = Date.now();
      const reply = await hpa(h, `${C2}/namespaces/team/pods/%2A/pod_requests?labelSelector=app%3Dweb`);
      expect(reply.status).toBe(503);
      expect(reply.headers["retry-after"]).toBeUndefined();
      expect(reply.json().message).toMatch(/has not listed the cluster's pods yet/);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      await h.close();
      await fake.close();
    }
  });

  it("says why the informer has not synced: the proxy may not list pods", async () => {
    const objects = customObjectsFake();
    objects.forbidPodLists = true;
    const { h, fake } = await customProxy({ objectsFake: objects, custom: "customMetrics: { enabled: true, objects: { timeoutMs: 500 } }" });
    try {
      const reply = await hpa(h, `${C2}/namespaces/team/pods/%2A/pod_requests?labelSelector=app%3Dweb`);
      expect(reply.status).toBe(503);
      expect(reply.headers["retry-after"]).toBeUndefined();
      expect(reply.json().message).toMatch(/has not listed the cluster's pods yet .*cannot list resource "pods"/);
    } finally {
      await h.close();
      await fake.close();
    }
  });

  it("refuses Pods reads with 503 when the cluster has more pods than the informer may hold", async () => {
    const objects = customObjectsFake();
    for (let i = 0; i < 20; i++) objects.pods.set(`team/p-${i}`, { app: "web" });
    const { h, fake } = await customProxy({ objectsFake: objects, custom: "customMetrics: { enabled: true, pods: { maxEntries: 10 } }" });
    try {
      const reply = await hpa(h, `${C2}/namespaces/team/pods/%2A/pod_requests?labelSelector=app%3Dweb`);
      expect(reply.status).toBe(503);
      expect(reply.headers["retry-after"]).toBeUndefined();
      expect(reply.json().message).toMatch(/more pods than the pod informer may hold/);
    } finally {
      await h.close();
      await fake.close();
    }
  });

  it("asks the cluster policy layer about custom reads (whenNoneApply Deny refuses them with 403)", async () => {
    const { h, fake } = await customProxy({ extraConfig: "clusterPolicies: { enabled: true, whenNoneApply: Deny }", clusterPolicies: true });
    try {
      await eventually(() => h.proxy.clusterPolicies?.ready() === true, 5000, "the policies listed");
      const before = bridge.calls.length;
      const reply = await hpa(h, `${C2}/namespaces/team/metrics/ns_queue`);
      expect(reply.status).toBe(403);
      expect(bridge.calls.length).toBe(before);
    } finally {
      await h.close();
      await fake.close();
    }
  });
});
