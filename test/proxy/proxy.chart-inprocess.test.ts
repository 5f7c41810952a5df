/**
 * The chart's `inProcessBridge` switch (infra/helm/external-metrics-bridge):
 * rendered with helm (offline, the tools of infra/tools/validate.ts), the
 * ProxyConfig it writes validates with the proxy's own loader and has the
 * `inprocess` backend pointing at the mounted bridge.yaml, the bridge config
 * is in the ConfigMap, the signing Secret is not referenced when no `bridge`
 * backend remains, the ServiceAccount carries the cloud-identity
 * annotation, and every object passes kubeconform (strict).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { loadConfig } from "../../shared/config/config.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { ensureSchemas, ensureTool, helmTemplate, kubeconform, ROOT } from "../../infra/tools/validate.ts";

type K8sObject = { kind: string; metadata: { name: string; annotations?: Record<string, string> }; [k: string]: any };

let objects: K8sObject[];
let text: string;

beforeAll(() => {
  ensureTool("helm");
  ensureTool("kubeconform");
  ensureSchemas();
  text = helmTemplate([
    "--set",
    "inProcessBridge.enabled=true",
    "--set-file",
    `inProcessBridge.config=${join(ROOT, "infra/examples/aws-sqs.yaml")}`,
    "--set-json",
    'inProcessBridge.serviceAccountAnnotations={"eks.amazonaws.com/role-arn":"arn:aws:iam::123456789012:role/emb-proxy"}',
    "--set-json",
    "backends=null",
    "--set-json",
    'routes=[{"metric":"queue_.*","backend":"inprocess"}]',
  ]);
  objects = parseAllDocuments(text)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}, 30 * 60_000);

describe("the chart's inProcessBridge switch", () => {
  it("writes an inprocess backend reading the mounted bridge.yaml, and the bridge config beside it", () => {
    const cm = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.endsWith("-config"))!;
    const proxy = loadProxyConfig(cm.data["proxy.yaml"], "proxy.yaml");
    expect(proxy.backends).toEqual([expect.objectContaining({ name: "inprocess", type: "inProcess", bridgeConfig: "/etc/external-metrics-bridge/config/bridge.yaml", timeoutSeconds: 4 })]);
    expect(cm.data["bridge.yaml"].trim()).toBe(readFileSync(join(ROOT, "infra/examples/aws-sqs.yaml"), "utf8").trim());
    expect(loadConfig(cm.data["bridge.yaml"], "bridge.yaml").config.metrics.map((m) => m.name)).toContain("queue_messages_ready");
    const deployment = objects.find((o) => o.kind === "Deployment")!;
    const container = deployment.spec.template.spec.containers[0];
    expect(container.volumeMounts).toContainEqual(expect.objectContaining({ name: "config", mountPath: "/etc/external-metrics-bridge/config" }));
    expect(container.env.map((e: { name: string }) => e.name)).not.toContain("BRIDGE_SIGNING_KEYS");
  });

  it("annotates the ServiceAccount for the pod's cloud identity", () => {
    const sa = objects.find((o) => o.kind === "ServiceAccount")!;
    expect(sa.metadata.annotations).toEqual({ "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/emb-proxy" });
  });

  it("keeps the signing Secret while a bridge backend remains", () => {
    const withBridge = helmTemplate(["--set", "inProcessBridge.enabled=true", "--set-file", `inProcessBridge.config=${join(ROOT, "infra/examples/aws-sqs.yaml")}`]);
    expect(withBridge).toContain("name: BRIDGE_SIGNING_KEYS");
    expect(withBridge).toContain("  inprocess:\n");
  });

  it("passes kubeconform (strict)", () => {
    const result = kubeconform(["-"], text);
    expect(result.ok, JSON.stringify(result.resources.filter((r) => r.status !== "statusValid"))).toBe(true);
  });
});
