/**
 * custom.metrics.k8s.io end to end through the real proxy over TLS and the
 * real bridge (contract C2 + C3): a Pods read resolved from the pod
 * metadata informer and sent as the signed `EMB-HMAC-SHA256-3` POST to the
 * Node bridge (functions/node.ts), which verifies the signature over the
 * body and reads the values from a fake Prometheus through the real
 * provider; a namespace read answered by the bridge inside the proxy
 * (`inProcess`, `readCustom` with typed parts); discovery merged from both.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { startFakeKubeApiServer, rbac, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { customConfig, customSeries } from "../runtimes/custom-contract.ts";
import { customObjectsFake } from "./custom-objects.fake.ts";
import { createPki, KEYS, startHarness, type Harness, type Pki, HPA_FRONT_PROXY as HPA } from "./proxy.harness.ts";

const G = "/apis/custom.metrics.k8s.io";

describe("custom.metrics.k8s.io: proxy and the real bridge", () => {
  let pki: Pki;
  let prom: FakePrometheus;
  let node: Awaited<ReturnType<typeof startNodeServer>>;
  let fake: FakeKubeApiServer;
  let h: Harness;

  beforeAll(async () => {
    pki = await createPki();
    prom = await startFakePrometheus(() => Date.now());
    prom.series.push(...customSeries(Date.now()));
    const text = customConfig(prom.url);
    node = await startNodeServer({ config: loadConfig(text, "custom.yaml").config, port: 0, env: { BRIDGE_SIGNING_KEYS: KEYS }, log: () => {} });
    const dir = mkdtempSync(join(tmpdir(), "emb-custom-bridge-"));
    writeFileSync(join(dir, "bridge.yaml"), text);
    fake = await startFakeKubeApiServer();
    const objects = customObjectsFake();
    objects.pods.set("team-a/web-1", { app: "web" });
    objects.pods.set("team-a/web-2", { app: "web" });
    objects.pods.set("team-a/db-1", { app: "db" });
    fake.extraRoutes = objects.route;
    fake.authorize = rbac([
      { groups: ["system:serviceaccounts:kube-system"], verbs: ["get", "list"], apiGroups: ["custom.metrics.k8s.io"], resources: ["*"] },
      { groups: ["system:serviceaccounts:kube-system"], verbs: ["get"], nonResourceURLs: ["*"] },
    ]);
    h = await startHarness({
      pki,
      fake,
      proxyConfig: [
        "apiVersion: external-metrics-bridge.io/v1alpha1",
        "kind: ProxyConfig",
        "backends:",
        `  node: { url: "${node.url}", timeoutSeconds: 4 }`,
        `  local: { type: inProcess, bridgeConfig: "${join(dir, "bridge.yaml")}", timeoutSeconds: 4 }`,
        "routes:",
        '  - { metric: "http_requests|pod_requests", backend: node }',
        '  - { metric: "backlog", backend: local }',
        "cache: { ttlSeconds: 0 }",
        "customMetrics: { enabled: true }",
      ].join("\n"),
      extra: { kube: kubeConfigFor(fake.url, fake.caPem, fake.token) },
    });
    await h.proxy.checkReadiness();
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    await fake?.close();
    await node?.close();
    await prom?.close();
  });

  const hpa = (path: string) => h.get(path, { cert: pki.frontProxy, headers: HPA });

  it("merges both bridges' custom discovery by the routes", async () => {
    const list = (await hpa(`${G}/v1beta2`)).json();
    expect(list.resources.map((r: { name: string }) => r.name)).toEqual(["namespaces/backlog", "pods/http_requests"]);
  });

  it("answers a Pods read: the proxy's pods, signed over the body, verified and read by the Node bridge", async () => {
    const reply = await hpa(`${G}/v1beta2/namespaces/team-a/pods/%2A/http_requests?labelSelector=app%3Dweb`);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json().items.map((i: any) => [i.describedObject.name, i.value])).toEqual([
      ["web-1", "5"],
      ["web-2", "7500m"],
    ]);
    const v1 = await hpa(`${G}/v1beta1/namespaces/team-a/pods/%2A/http_requests?labelSelector=app%3Dweb`);
    expect(v1.status, v1.text).toBe(200);
    expect(v1.json().items.map((i: any) => [i.describedObject.name, i.metricName])).toEqual([
      ["web-1", "http_requests"],
      ["web-2", "http_requests"],
    ]);
  });

  it("answers a namespace read with the bridge in the proxy's process (readCustom)", async () => {
    const reply = await hpa(`${G}/v1beta1/namespaces/team-a/metrics/backlog`);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json()).toMatchObject({ kind: "MetricValueList", apiVersion: "custom.metrics.k8s.io/v1beta1", items: [{ describedObject: { kind: "Namespace", name: "team-a" }, metricName: "backlog", value: "12" }] });
  });
});
