/**
 * The chart's `customMetrics` switch (infra/helm/external-metrics-bridge):
 * rendered with helm (offline, the tools of infra/tools/validate.ts). Off
 * (the default): one APIService, no pod RBAC, the ProxyConfig's custom
 * metrics off. On: the APIServices v1beta2 and v1beta1 of
 * custom.metrics.k8s.io with prometheus-adapter's priorities, the registrar
 * may update them, the proxy may list/watch pods and get the object
 * resources named in `customMetrics.objectResources`, the ProxyConfig it
 * writes loads with the proxy's own loader, and every object passes
 * kubeconform (strict). The values schema refuses what the loader would.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { helmTemplate, kubeconform } from "../../infra/tools/validate.ts";
import { ensureChartTools, find, objects, render, renderError, type K8sObject } from "../project/chart.helpers.ts";

const ON = ["--set", "customMetrics.enabled=true", "--set-json", 'customMetrics.objectResources=["services","ingresses.networking.k8s.io"]'];

let on: K8sObject[];
let off: K8sObject[];
let text: string;

beforeAll(() => {
  ensureChartTools();
  text = helmTemplate(ON);
  on = objects(text);
  off = render();
}, 30 * 60_000);

const proxyConfig = (list: K8sObject[]) => loadProxyConfig(list.find((o) => o.kind === "ConfigMap" && o.metadata.name.endsWith("-config"))!.data["proxy.yaml"], "proxy.yaml");

describe("the chart's customMetrics switch", () => {
  it("renders nothing of custom metrics by default", () => {
    expect(off.filter((o) => o.kind === "APIService").map((o) => o.metadata.name)).toEqual(["v1beta1.external.metrics.k8s.io"]);
    expect(off.some((o) => o.metadata.name.endsWith(":custom-metrics-objects"))).toBe(false);
    expect(proxyConfig(off).customMetrics?.enabled).toBe(false);
    const registrar = find(off, "ClusterRole", "external-metrics-bridge-proxy:apiservice-registrar");
    expect(registrar.rules[0].resourceNames).toEqual(["v1beta1.external.metrics.k8s.io"]);
  });

  it("renders the custom APIServices with prometheus-adapter's priorities and the same service", () => {
    const api = (name: string) => find(on, "APIService", name).spec;
    expect(api("v1beta2.custom.metrics.k8s.io")).toMatchObject({ group: "custom.metrics.k8s.io", version: "v1beta2", groupPriorityMinimum: 100, versionPriority: 200, insecureSkipTLSVerify: false });
    expect(api("v1beta1.custom.metrics.k8s.io")).toMatchObject({ group: "custom.metrics.k8s.io", version: "v1beta1", groupPriorityMinimum: 100, versionPriority: 100 });
    expect(api("v1beta2.custom.metrics.k8s.io").service).toEqual(api("v1beta1.external.metrics.k8s.io").service);
    const registrar = find(on, "ClusterRole", "external-metrics-bridge-proxy:apiservice-registrar");
    expect(registrar.rules[0].resourceNames).toEqual(["v1beta1.external.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io"]);
  });

  it("lets the proxy list/watch pods and get exactly the object resources named", () => {
    const role = find(on, "ClusterRole", "external-metrics-bridge-proxy:custom-metrics-objects");
    expect(role.rules).toEqual([
      { apiGroups: [""], resources: ["pods"], verbs: ["list", "watch"] },
      { apiGroups: [""], resources: ["services"], verbs: ["get"] },
      { apiGroups: ["networking.k8s.io"], resources: ["ingresses"], verbs: ["get"] },
    ]);
    const binding = find(on, "ClusterRoleBinding", "external-metrics-bridge-proxy:custom-metrics-objects");
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "external-metrics-bridge-proxy", namespace: "external-metrics-bridge" }]);
  });

  it("writes a ProxyConfig with custom metrics on and its bounds, which the proxy loads", () => {
    expect(proxyConfig(on).customMetrics).toEqual({ enabled: true, pods: { maxEntries: 50000, maxBytes: 33554432 }, objects: { maxBytes: 65536, timeoutMs: 2000 } });
    const tuned = proxyConfig(render(...ON, "--set", "customMetrics.objects.timeoutMs=1500", "--set", "customMetrics.pods.maxEntries=200"));
    expect(tuned.customMetrics).toMatchObject({ pods: { maxEntries: 200 }, objects: { timeoutMs: 1500 } });
  });

  it("refuses what the proxy would refuse: an object limit over 64 KiB, a bad group resource", () => {
    expect(renderError(...ON, "--set", "customMetrics.objects.maxBytes=70000")).toMatch(/maxBytes/);
    expect(renderError("--set-json", 'customMetrics.objectResources=["Services"]')).toMatch(/objectResources/);
  });

  it("passes kubeconform (strict)", () => {
    const result = kubeconform(["-"], text);
    expect(result.ok, JSON.stringify(result.resources.filter((r) => r.status !== "statusValid"))).toBe(true);
  });
});
