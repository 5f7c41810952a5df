/**
 * The custom read of the bridge's app (shared/app.ts) without a runtime:
 * `BridgeApp.readCustom` (the proxy's in-process backend) answers exactly
 * what `POST` of the same read answers, with the same audit record and
 * counters (`kind="custom"`, policy decisions); a bridge built without a
 * custom decision denies every custom read (fail closed); the bridge's
 * decision (shared/bridge.ts: ExternalMetricPolicy `resources:`,
 * shared/policy/authorize.ts) allows a custom read only by a rule naming
 * its resource, or a bridge that runs open on purpose; discovery exists
 * only with custom rules. Values from a fake
 * Prometheus API on 127.0.0.1 through the real `prometheus` provider (the
 * runtimes' contract is test/runtimes/custom-contract.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBridgeApp } from "../../shared/app.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { HPA_CONTROLLER } from "../../shared/identity.ts";
import { customMetricsRead, parseRequestPath } from "../../shared/k8s/request-path.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import type { LogRecord } from "../../shared/observability/log.ts";
import { BridgeMetrics } from "../../shared/observability/metrics.ts";
import { buildProviders } from "../../shared/providers/registry.ts";
import { customReadBody } from "../../shared/values/custom-request.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { buildBridge } from "../helpers/bridge.ts";
import { customConfig, customSeries, PODS, QUEUE, QUEUE_OBJECT } from "../runtimes/custom-contract.ts";

let prom: FakePrometheus;
beforeAll(async () => {
  prom = await startFakePrometheus(() => Date.now());
  prom.series.push(...customSeries(Date.now()));
});
afterAll(async () => prom?.close());

const PODS_PATH = PODS.slice(0, PODS.indexOf("?"));
const target = customMetricsRead(parseRequestPath(PODS_PATH))!;
const post = (body: string) => ({ method: "POST", body, headers: { "content-type": "application/json", "x-request-id": "r-post" } });

describe("readCustom and POST", () => {
  it("answer the same text, write the same audit record and count kind=custom and the policy decision", async () => {
    const records: LogRecord[] = [];
    const metrics = new BridgeMetrics();
    const bridge = buildBridge(customConfig(prom.url), "custom.yaml", { env: {}, now: () => Date.now(), metrics }, { log: (r) => void records.push(r) });
    const typed = await bridge.readCustom({ target, metricLabelSelector: "", labelSelector: "app=web", objects: { pods: ["web-1", "web-2"] }, caller: bridge.config.policy!.localIdentity, requestId: "r-typed" });
    expect(typed).not.toBeInstanceOf(StatusError);
    const res = await bridge.app.request(PODS, post(customReadBody({ pods: ["web-1", "web-2"] })));
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.text()).toBe((typed as { text: string }).text);

    const audits = records.filter((r) => r["resource"] === "pods");
    expect(audits).toHaveLength(2);
    const { durationMs: _a, requestId: typedId, ...typedRecord } = audits[0]!;
    const { durationMs: _b, requestId: postId, ...postRecord } = audits[1]!;
    expect([typedId, postId]).toEqual(["r-typed", "r-post"]);
    expect(typedRecord).toEqual(postRecord);
    expect(postRecord).toMatchObject({ level: "info", method: "POST", path: PODS_PATH, resource: "pods", name: "*", metric: "http_requests", decision: "allow", code: 200, items: 2 });

    expect(metrics.requests.get("custom", "200").n).toBe(2);
    expect(metrics.policy.get("bridge", "allow").n).toBe(2);
    expect(metrics.requests.get("values", "200").n).toBe(0);
  });

  it("a failure is a Status, audited with its errorKind, never a throw", async () => {
    const records: LogRecord[] = [];
    const bridge = buildBridge(customConfig(prom.url), "custom.yaml", { env: {}, now: () => Date.now() }, { log: (r) => void records.push(r) });
    const outcome = await bridge.readCustom({ target, metricLabelSelector: "pod=web-3", objects: { pods: ["web-1"] }, caller: HPA_CONTROLLER, requestId: "r" });
    expect(outcome).toBeInstanceOf(StatusError);
    expect((outcome as StatusError).code).toBe(400);
    expect(records.find((r) => r["resource"] === "pods")).toMatchObject({ level: "warn", code: 400, errorKind: expect.any(String), error: expect.stringMatching(/may not constrain "pod"/) });
  });
});

describe("the custom decision", () => {
  it("createBridgeApp without authorizeCustom denies every custom read (403, audited as deny, counted)", async () => {
    const { config } = loadConfig(customConfig(prom.url), "custom.yaml");
    const records: LogRecord[] = [];
    const metrics = new BridgeMetrics();
    const runtime = { env: {}, now: () => Date.now() };
    const asked = prom.requests.length;
    const built = createBridgeApp({ config, providers: buildProviders(config.providers, runtime), runtime, metrics, log: (r) => void records.push(r) });
    const res = await built.app.request(PODS, post(customReadBody({ pods: ["web-1"] })));
    expect(res.status).toBe(403);
    expect((await res.json()).details).toEqual({ name: "http_requests", group: "custom.metrics.k8s.io", kind: "pods" });
    expect(records.find((r) => r["resource"] === "pods")).toMatchObject({ decision: "deny", code: 403 });
    expect(metrics.policy.get("bridge", "deny").n).toBe(1);
    expect(prom.requests.length).toBe(asked); // denied before any backend call
  });

  it("the bridge's decision allows a custom read only by a rule naming its resource, or a bridge running open on purpose; an implicit or Deny default, an External-only rule or a policy's defaultAction Allow is 403", async () => {
    const withPolicy = (head: string) => customConfig(prom.url).replace(/^apiVersion[\s\S]*?defaults:/m, `${head}defaults:`);
    const HEAD = "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: BridgeConfig\n";
    const policyDoc = (spec: string) => `---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: all, namespace: team-a }
spec:
${spec}
`;
    const cases: [string, number, RegExp?][] = [
      [customConfig(prom.url), 200],
      [withPolicy(HEAD), 403, /no ExternalMetricPolicy applies/],
      [withPolicy(`${HEAD}policy: { defaultAction: Deny }\n`), 403, /no ExternalMetricPolicy applies/],
      [`${customConfig(prom.url)}${policyDoc('  rules:\n    - { metric: ".*", selector: {} }')}`, 403, /a custom read needs a rule naming its resource/],
      [`${customConfig(prom.url)}${policyDoc("  defaultAction: Allow\n  rules: []")}`, 403, /a custom read needs a rule naming its resource/],
      [`${customConfig(prom.url)}${policyDoc('  rules:\n    - { metric: ".*", resources: [ingresses.networking.k8s.io], selector: {} }')}`, 403, /a custom read needs a rule naming its resource/],
      [`${customConfig(prom.url)}${policyDoc('  rules:\n    - { metric: http_requests, resources: [pods], deny: true }\n    - { metric: ".*", resources: [pods], selector: {} }')}`, 403, /is a deny rule/],
      [`${customConfig(prom.url)}${policyDoc('  rules:\n    - { metric: ".*", resources: [external, pods], selector: {} }')}`, 200],
    ];
    for (const [text, code, message] of cases) {
      const bridge = buildBridge(text, "custom.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
      const res = await bridge.app.request(PODS, post(customReadBody({ pods: ["web-1"] })));
      expect(res.status, await res.clone().text()).toBe(code);
      if (message !== undefined) expect((await res.json()).message).toMatch(message);
    }
  });

  it("decides the policy before reading the object: a denied caller learns nothing of it (403, not the object's 404 or allow-list 403)", async () => {
    const denied = buildBridge(customConfig(prom.url).replace("defaultAction: Allow", "defaultAction: Deny"), "custom.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    const open = buildBridge(customConfig(prom.url), "custom.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    const noUrl = { object: { ...QUEUE_OBJECT.object, status: {} } };
    const otherAccount = { object: { ...QUEUE_OBJECT.object, status: { queueURL: "https://sqs.us-east-1.amazonaws.com/999999999999/other" } } };
    expect((await open.app.request(QUEUE, post(customReadBody(noUrl)))).status).toBe(404);
    expect((await open.app.request(QUEUE, post(customReadBody(otherAccount)))).status).toBe(403);
    for (const body of [noUrl, otherAccount]) {
      const res = await denied.app.request(QUEUE, post(customReadBody(body)));
      expect(res.status).toBe(403);
      expect((await res.json()).message).toMatch(/no ExternalMetricPolicy applies/);
    }
  });
});

describe("customDiscovery", () => {
  it("is the APIResourceList per version with custom rules, undefined without", () => {
    const bridge = buildBridge(customConfig(prom.url), "custom.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    expect(bridge.customDiscovery?.v1beta2.groupVersion).toBe("custom.metrics.k8s.io/v1beta2");
    expect(bridge.customDiscovery?.v1beta1.resources.map((r) => r.name)).toEqual(["namespaces/backlog", "pods/http_requests", "queues.sqs.services.k8s.aws/queue_ready"]);
    const bare = buildBridge(customConfig(prom.url, false), "custom.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    expect(bare.customDiscovery).toBeUndefined();
  });
});
