/**
 * A custom.metrics Pods read of many pods (shared/values/custom-read.ts,
 * `PlanRequest.maxSeries`): up to `MAX_PODS_PER_READ` (1,000) pods are one
 * read — one query with the prometheus provider's `maxBatchSize: 1000`, ten
 * concurrent queries of 100 with the default — while an External read still
 * names at most 100 series. Through the bridge's POST route and the real
 * `prometheus` provider, against the fake Prometheus API on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { customReadBody } from "../../shared/values/custom-request.ts";
import { MAX_PODS_PER_READ } from "../../shared/values/custom-read.ts";
import { buildBridge, OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { post } from "../runtimes/custom-contract.ts";

const PODS = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/pods/%2A/http_requests?labelSelector=app%3Dweb";
const names = (n: number) => Array.from({ length: n }, (_, i) => `web-${i}`);

function config(url: string, batch: string): string {
  return `${OPEN_CONFIG_HEAD}providers:
  prom: { type: prometheus, url: ${url}, timeoutSeconds: 2${batch} }
metrics:
  - name: pod_requests
    provider: prom
    query: { series: emb_http_requests, selectorLabels: { pod: pod } }
  - name: http_requests
    provider: prom
    describes: { resource: pods, objectLabel: pod, namespaceLabel: namespace }
    query: { series: emb_http_requests, selectorLabels: { pod: pod, namespace: namespace } }
`;
}

describe("a Pods read of many pods", () => {
  let prom: FakePrometheus;
  beforeAll(async () => {
    prom = await startFakePrometheus(() => Date.now());
    const at = Date.now() - 2_000;
    // every pod but the last has a sample: the last one is "missing", never 0
    for (const pod of names(MAX_PODS_PER_READ - 1)) {
      prom.series.push({ labels: { __name__: "emb_http_requests", namespace: "team-a", pod }, value: "2", timeMs: at });
    }
  });
  afterAll(async () => prom?.close());

  const valueQueries = () => prom.requests.filter((q) => q.query.startsWith("sum by"));

  it("reads 1,000 pods in one value query with maxBatchSize: 1000; a pod without data has no item", async () => {
    const bridge = buildBridge(config(prom.url, ", maxBatchSize: 1000"), "t.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    prom.requests.length = 0;
    const res = await bridge.app.request(PODS, post(customReadBody({ pods: names(MAX_PODS_PER_READ) })));
    expect(res.status, await res.clone().text()).toBe(200);
    const items = (await res.json()).items as { describedObject: { name: string }; value: string }[];
    expect(items).toHaveLength(MAX_PODS_PER_READ - 1);
    expect(items.every((i) => i.value === "2")).toBe(true);
    expect(items.some((i) => i.describedObject.name === `web-${MAX_PODS_PER_READ - 1}`)).toBe(false);
    expect(valueQueries()).toHaveLength(1);
  });

  it("with the default maxBatchSize (100) the same read is ten value queries, the same answer", async () => {
    const bridge = buildBridge(config(prom.url, ""), "t.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    prom.requests.length = 0;
    const res = await bridge.app.request(PODS, post(customReadBody({ pods: names(MAX_PODS_PER_READ) })));
    expect(res.status).toBe(200);
    expect((await res.json()).items).toHaveLength(MAX_PODS_PER_READ - 1);
    expect(valueQueries()).toHaveLength(10);
  });

  it("more different series in flight than the series cache holds (10,000) is a 503 (overloaded), never a 500 nor a value", async () => {
    const bridge = buildBridge(config(prom.url, ", maxBatchSize: 1000"), "t.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    prom.respond = () => ({ delayMs: 1_500, body: { status: "success", data: { resultType: "vector", result: [] } } });
    try {
      // ten reads of 1,000 different pods each hold 10,000 loads in flight; the eleventh read's pods find the cache full
      const held = Array.from({ length: 10 }, (_, r) => bridge.app.request(PODS, post(customReadBody({ pods: names(MAX_PODS_PER_READ).map((n) => `${n}-r${r}`) }))));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const res = await bridge.app.request(PODS, post(customReadBody({ pods: ["late-1", "late-2"] })));
      const body = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(503);
      expect(body.message).toMatch(/too many different reads in flight \(10000\).*overloaded, no value is reported/);
      await Promise.all(held);
    } finally {
      prom.respond = undefined;
    }
  });

  it("more than 1,000 pods is a 400 before any query; an External read still names at most 100 series", async () => {
    const bridge = buildBridge(config(prom.url, ", maxBatchSize: 1000"), "t.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    prom.requests.length = 0;
    const over = await bridge.app.request(PODS, post(customReadBody({ pods: names(MAX_PODS_PER_READ + 1) })));
    expect(over.status).toBe(400);
    expect((await over.json()).message).toContain(`at most ${MAX_PODS_PER_READ} pods`);
    const external = await bridge.app.request(
      `/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/pod_requests?labelSelector=${encodeURIComponent(`pod in (${names(101).join(",")})`)}`,
    );
    expect(external.status).toBe(400);
    expect((await external.json()).message).toContain("at most 100");
    expect(prom.requests).toHaveLength(0);
  });
});
