/**
 * The custom.metrics.k8s.io read (shared/values/custom-read.ts) through the
 * real `prometheus` provider against a REAL Prometheus v3.16.0 scraping an
 * exporter this test controls: a Pods read answers one item per pod that
 * has data (a pod without data is left out, another namespace's pod of the
 * same name never leaks in), an Object read maps a `status` field to the
 * series under the rule's allow-list, a namespace read answers the
 * namespace; every failure is a Status without `Retry-After`, never a
 * value; the policy hook decides before any backend call. v1beta1 answers
 * carry `metricName`/`window`, v1beta2 `metric`/`windowSeconds` (the Go
 * client's decoding of both is test/wire/custom-metrics.oracle.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Caller } from "../../shared/identity.ts";
import { customMetricsRead, parseRequestPath } from "../../shared/k8s/request-path.ts";
import { forbidden, StatusError } from "../../shared/k8s/status.ts";
import { createCustomValuesReader, MAX_PODS_PER_READ, type CustomAuthorizationRequest, type ReadObjects } from "../../shared/values/custom-read.ts";
import { buildBridge, OPEN_CONFIG_HEAD, type Bridge } from "../helpers/bridge.ts";
import { PROMETHEUS_BUILD_TIMEOUT_MS, prometheusBinary, startExporter, startPrometheus, type Exporter, type PrometheusServer } from "../helpers/prometheus.ts";

const QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/team-a-jobs";
const HPA: Caller = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts"], extra: {} };

let exporter: Exporter;
let prom: PrometheusServer;

beforeAll(async () => {
  const binary = prometheusBinary();
  exporter = await startExporter([
    { name: "emb_http_requests", labels: { namespace: "team-a", pod: "web-1" }, value: 5 },
    { name: "emb_http_requests", labels: { namespace: "team-a", pod: "web-2" }, value: 7.5 },
    { name: "emb_http_requests", labels: { namespace: "team-b", pod: "web-3" }, value: 100 },
    { name: "emb_queue_ready", labels: { queue: QUEUE_URL }, value: 42 },
    { name: "emb_queue_ready", labels: { queue: "https://sqs.us-east-1.amazonaws.com/999999999999/other" }, value: 9 },
    { name: "emb_namespace_backlog", labels: { namespace: "team-a" }, value: 12 },
  ]);
  prom = await startPrometheus({ binary, targets: [exporter.target] });
  await prom.waitForSeries("emb_namespace_backlog");
}, PROMETHEUS_BUILD_TIMEOUT_MS + 120_000);

afterAll(async () => {
  await prom?.stop();
  await exporter?.close();
});

function config(url: string): string {
  return `
${OPEN_CONFIG_HEAD}providers:
  prom:
    type: prometheus
    url: ${url}
    timeoutSeconds: 2
metrics:
  - name: queue_ready
    provider: prom
    query: { series: emb_queue_ready, selectorLabels: { queue: queue } }
  - name: http_requests
    provider: prom
    describes: { resource: pods, objectLabel: pod, namespaceLabel: namespace }
    query: { series: emb_http_requests, selectorLabels: { pod: pod, namespace: namespace } }
  - name: queue_ready
    provider: prom
    describes:
      resource: queues.sqs.services.k8s.aws
      objectLabel: queue
      identifier: { from: status, path: status.queueURL }
      allow: ['https://sqs\\.us-east-1\\.amazonaws\\.com/123456789012/team-a-.*']
    query: { series: emb_queue_ready, selectorLabels: { queue: queue } }
  - name: backlog
    provider: prom
    describes: { resource: namespaces, objectLabel: namespace }
    query: { series: emb_namespace_backlog, selectorLabels: { namespace: namespace } }
`;
}

interface Harness {
  bridge: Bridge;
  decisions: CustomAuthorizationRequest[];
  read(path: string, options?: { objects?: ReadObjects; metricLabelSelector?: string }): Promise<{ status: number; body: any; retryAfter: number | undefined }>;
}

function harness(url: string, deny = false): Harness {
  const bridge = buildBridge(config(url), "test.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
  const decisions: CustomAuthorizationRequest[] = [];
  const reader = createCustomValuesReader({
    config: bridge.config,
    providers: bridge.providers,
    now: () => Date.now(),
    authorize: (request) => {
      decisions.push(request);
      if (deny) throw forbidden(`denied ${request.resource}/${request.metric}`);
    },
  });
  return {
    bridge,
    decisions,
    async read(path, options = {}) {
      const target = customMetricsRead(parseRequestPath(path))!;
      const outcome = await reader({ target, metricLabelSelector: options.metricLabelSelector ?? "", objects: options.objects, caller: HPA, requestId: "r" });
      if (outcome instanceof StatusError) return { status: outcome.code, body: outcome.toStatus(), retryAfter: outcome.retryAfterSeconds };
      return { status: 200, body: JSON.parse(outcome.text), retryAfter: undefined };
    },
  };
}

const PODS = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/pods/%2A/http_requests";
const QUEUE = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/queues.sqs.services.k8s.aws/jobs/queue_ready";
const queueObject = (queueURL: unknown, name = "jobs"): ReadObjects => ({
  object: { kind: "Queue", apiVersion: "sqs.services.k8s.aws/v1alpha1", name, namespace: "team-a", status: { queueURL } },
});

describe("a Pods read", () => {
  it("answers one item per pod that has data, keyed by describedObject; a pod without data has no item (never 0)", async () => {
    const h = harness(prom.url);
    const r = await h.read(PODS, { objects: { pods: ["web-1", "web-2", "web-9"] } });
    expect(r.status).toBe(200);
    expect(r.body.apiVersion).toBe("custom.metrics.k8s.io/v1beta2");
    expect(r.body.items.map((i: any) => [i.describedObject, i.metric, i.value])).toEqual([
      [{ kind: "Pod", namespace: "team-a", name: "web-1", apiVersion: "/v1" }, { name: "http_requests", selector: null }, "5"],
      [{ kind: "Pod", namespace: "team-a", name: "web-2", apiVersion: "/v1" }, { name: "http_requests", selector: null }, "7500m"],
    ]);
    // every item stamped with its sample's own time, not the read's
    for (const item of r.body.items) expect(Date.now() - Date.parse(item.timestamp)).toBeLessThan(60_000);
    expect(h.decisions.map((d) => [d.resource, d.metric, d.namespace])).toEqual([["pods", "http_requests", "team-a"]]);
  });

  it("answers an empty list when the labelSelector selected no pod, after the policy, without a backend call", async () => {
    const h = harness(prom.url);
    const before = await prom.requests();
    const r = await h.read(PODS, { objects: { pods: [] } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ kind: "MetricValueList", items: [] });
    expect(h.decisions.map((d) => d.resource)).toEqual(["pods"]);
    expect(await prom.requests()).toBe(before);
    expect((await harness(prom.url, true).read(PODS, { objects: { pods: [] } })).status).toBe(403);
  });

  it("never reads another namespace's pod of the given name (namespaceLabel), and only the pods given", async () => {
    const r = await harness(prom.url).read(PODS, { objects: { pods: ["web-3"] } });
    expect(r.status).toBe(200);
    expect(r.body.items).toEqual([]);
  });

  it("answers v1beta1 with metricName, and selector null when the read has no metricLabelSelector (Go nil)", async () => {
    const r = await harness(prom.url).read(PODS.replace("v1beta2", "v1beta1"), { objects: { pods: ["web-1"] } });
    expect(r.body.items).toEqual([
      { describedObject: { kind: "Pod", namespace: "team-a", name: "web-1", apiVersion: "/v1" }, metricName: "http_requests", timestamp: expect.any(String), value: "5", selector: null },
    ]);
  });

  it("refuses what the bridge must not guess: no pods, too many, a selection of another resource, a metricLabelSelector on the pod label (400)", async () => {
    const h = harness(prom.url);
    const cases = [
      await h.read(PODS),
      await h.read(PODS, { objects: { pods: Array.from({ length: MAX_PODS_PER_READ + 1 }, (_, i) => `p-${i}`) } }),
      await h.read(PODS, { objects: { pods: ["Web_1"] } }),
      await h.read("/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/deployments.apps/%2A/http_requests", { objects: { pods: ["web-1"] } }),
      await h.read(PODS, { objects: { pods: ["web-1"] }, metricLabelSelector: "pod=web-3" }),
      await h.read(PODS, { objects: { pods: ["web-1"] }, metricLabelSelector: "namespace=team-b" }),
    ];
    expect(cases.map((c) => c.status)).toEqual([400, 400, 400, 404, 400, 400]);
    expect(cases[0]!.body.message).toMatch(/must carry the pods/);
    expect(cases[1]!.body.message).toMatch(/at most 1000 pods/);
    expect(cases[4]!.body.message).toMatch(/may not constrain "pod"/);
    // the policy decides first (a caller it denies learns nothing of the objects), before any backend call;
    // a metricLabelSelector on the pod label and the path without a rule are refused before it
    expect(h.decisions.map((d) => d.resource)).toEqual(["pods", "pods", "pods"]);
  });
});

describe("an Object read", () => {
  it("reads the series named by the object's status field: exactly one item describing the object", async () => {
    const r = await harness(prom.url).read(QUEUE, { objects: queueObject(QUEUE_URL) });
    expect(r.status).toBe(200);
    expect(r.body.items).toHaveLength(1);
    expect(r.body.items[0]).toMatchObject({ describedObject: { kind: "Queue", namespace: "team-a", name: "jobs", apiVersion: "sqs.services.k8s.aws/v1alpha1" }, value: "42" });
  });

  it("refuses an identifier outside describes.allow (403), an object without the field (404), another object than the path's (400)", async () => {
    const h = harness(prom.url);
    const other = await h.read(QUEUE, { objects: queueObject("https://sqs.us-east-1.amazonaws.com/999999999999/other") });
    expect(other.status).toBe(403);
    expect(other.body.message).toMatch(/not an identifier this rule allows/);
    const missing = await h.read(QUEUE, { objects: queueObject(undefined) });
    expect(missing.status).toBe(404);
    expect(missing.body.message).toMatch(/has no status\.queueURL/);
    const notString = await h.read(QUEUE, { objects: queueObject({ nested: QUEUE_URL }) });
    expect(notString.status).toBe(404);
    const swapped = await h.read(QUEUE, { objects: queueObject(QUEUE_URL, "mail") });
    expect(swapped.status).toBe(400);
    // each was decided by the policy first (a caller it denies learns nothing of the object: test/bridge/app.custom.test.ts)
    expect(h.decisions.map((d) => d.resource)).toEqual(Array(4).fill("queues.sqs.services.k8s.aws"));
  });

  it("a series that does not exist is a 503 without Retry-After (client-go would retry it ten times), never 0", async () => {
    const r = await harness(prom.url).read(QUEUE, { objects: queueObject("https://sqs.us-east-1.amazonaws.com/123456789012/team-a-gone") });
    expect(r.status).toBe(503);
    expect(r.body.message).toMatch(/no series in the answer/);
    expect(r.retryAfter).toBeUndefined();
    expect(r.body.details?.retryAfterSeconds).toBeUndefined();
  });
});

describe("a namespace read and the policy", () => {
  it("answers the namespace's series, describing the Namespace", async () => {
    const r = await harness(prom.url).read("/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/metrics/backlog");
    expect(r.status).toBe(200);
    expect(r.body.items.map((i: any) => [i.describedObject, i.value])).toEqual([[{ kind: "Namespace", name: "team-a", apiVersion: "/v1" }, "12"]]);
  });

  it("a denial is a 403 before any backend call; an External rule of the same name is not a custom rule (404)", async () => {
    const before = await prom.requests();
    const denied = await harness(prom.url, true).read(PODS, { objects: { pods: ["web-1"] } });
    expect(denied.status).toBe(403);
    expect(await prom.requests()).toBe(before);
    const h = harness(prom.url);
    const external = await h.read("/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/pods/%2A/queue_ready", { objects: { pods: ["web-1"] } });
    expect(external.status).toBe(404);
    // and the External API never sees the custom rules
    expect(h.bridge.discovery.resources.map((r) => r.name)).toEqual(["queue_ready"]);
  });
});

describe("building the read", () => {
  it("refuses a rule whose query does not map the labels the bridge sets, naming the rule", () => {
    const text = config(prom.url).replace("describes: { resource: pods, objectLabel: pod, namespaceLabel: namespace }", "describes: { resource: pods, objectLabel: pod, namespaceLabel: ns }");
    // the bridge builds its custom read at start-up (shared/app.ts), so building the bridge is what refuses it
    expect(() => buildBridge(text, "test.yaml", { env: {}, now: () => Date.now() }, { log: () => {} })).toThrow(
      /metric http_requests \(describes pods\): its query cannot be read by pod and ns: .*ns/,
    );
  });
});

describe("a stopped Prometheus", () => {
  it("fails the whole Pods read (503, no partial list, no Retry-After)", async () => {
    const own = await startPrometheus({ targets: [exporter.target] });
    await own.waitForSeries('emb_http_requests{pod="web-1"}');
    const h = harness(own.url);
    expect((await h.read(PODS, { objects: { pods: ["web-1"] } })).status).toBe(200);
    await own.stop();
    const r = await harness(own.url).read(PODS, { objects: { pods: ["web-1", "web-2"] } });
    expect(r.status).toBe(503);
    expect(r.body.message).toMatch(/backend unreachable/);
    expect(r.retryAfter).toBeUndefined();
  });
});
