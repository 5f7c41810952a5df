/**
 * The chart's admission webhook (templates/webhook.yaml): rendered as the
 * contract says (failurePolicy Ignore, 3 s, sideEffects None, v1 reviews,
 * opt-out namespace label, the proxy Service's two paths), with the
 * ProxyConfig's `admission` section the proxy loads, the caBundle writer's
 * RBAC limited to that one object, cert-manager's injection in certManager
 * mode, nothing when disabled; every variant validates with kubeconform.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { proxyCommand } from "../../functions/proxy/main.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { ADMISSION_PATHS } from "../../shared/proxy/admission/admission.ts";
import { WEBHOOK_CONFIGURATION_NAME } from "../../shared/proxy/tls/registration.ts";
import { ensureSchemas, ensureTool, helmTemplate, kubeconform } from "../../infra/tools/validate.ts";

type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; annotations?: Record<string, string> }; [k: string]: any };

function objects(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

function webhookOf(list: K8sObject[]): K8sObject | undefined {
  return list.find((o) => o.kind === "ValidatingWebhookConfiguration");
}

/** kubeconform over the objects it has schemas for (no CRDs, no cert-manager kinds offline). */
function validate(list: K8sObject[]): void {
  const known = list.filter((o) => !["Certificate", "Issuer", "CustomResourceDefinition"].includes(o.kind));
  const result = kubeconform(["-"], known.map((o) => JSON.stringify(o)).join("\n---\n"));
  expect(result.ok, JSON.stringify(result.resources.filter((r) => r.status !== "statusValid"))).toBe(true);
  expect(result.resources.filter((r) => r.status === "statusValid")).toHaveLength(known.length);
}

beforeAll(() => {
  ensureTool("helm");
  ensureTool("kubeconform");
  ensureSchemas();
}, 30 * 60_000);

describe("the admission webhook in the chart", () => {
  it("renders by default: both webhooks fail open, 3 s, v1 reviews, opt-out label, the proxy Service's webhook port and paths; ProxyConfig admission mode Warn", () => {
    const list = objects(helmTemplate());
    const vwc = webhookOf(list)!;
    expect(vwc.metadata.name).toBe(WEBHOOK_CONFIGURATION_NAME);
    expect(vwc.webhooks.map((w: { name: string }) => w.name)).toEqual(["hpa.external-metrics-bridge.io", "policies.external-metrics-bridge.io"]);
    for (const w of vwc.webhooks) {
      expect(w).toMatchObject({
        failurePolicy: "Ignore",
        timeoutSeconds: 3,
        sideEffects: "None",
        admissionReviewVersions: ["v1"],
        matchPolicy: "Equivalent",
        namespaceSelector: { matchExpressions: [{ key: "external-metrics-bridge.io/admission", operator: "NotIn", values: ["disabled"] }] },
      });
      expect(w.clientConfig.service).toMatchObject({ namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy", port: 8443 });
      expect(w.clientConfig.caBundle).toBeUndefined(); // the registering proxy writes it
    }
    expect(vwc.webhooks[0].clientConfig.service.path).toBe(ADMISSION_PATHS.hpa);
    expect(vwc.webhooks[0].rules).toEqual([{ apiGroups: ["autoscaling"], apiVersions: ["v2"], resources: ["horizontalpodautoscalers"], operations: ["CREATE", "UPDATE"], scope: "Namespaced" }]);
    expect(vwc.webhooks[1].clientConfig.service.path).toBe(ADMISSION_PATHS.policies);
    expect(vwc.webhooks[1].rules[0]).toMatchObject({ apiGroups: ["external-metrics-bridge.io"], resources: ["externalmetricpolicies", "clusterexternalmetricpolicies"] });
    // The Service the webhooks name exists, and its port 8443 reaches the webhook's own listener (not the API port).
    const service = list.find((o) => o.kind === "Service")!;
    expect(service.metadata.name).toBe("external-metrics-bridge-proxy");
    expect(service.spec.ports).toContainEqual({ name: "webhook", port: 8443, targetPort: "webhook", protocol: "TCP" });
    const proxy = list.find((o) => o.kind === "Deployment")!.spec.template.spec.containers[0];
    expect(proxy.ports).toContainEqual({ name: "webhook", containerPort: 8443, protocol: "TCP" });
    const opts = proxyCommand().exitOverride().parse(proxy.args, { from: "user" }).opts();
    expect([opts["admissionPort"], opts["securePort"]]).toEqual([8443, 6443]);
    const config = loadProxyConfig(list.find((o) => o.kind === "ConfigMap")!.data["proxy.yaml"], "configmap");
    expect(config.admission).toEqual({ mode: "Warn" });
    // RBAC: get and update of that one webhook configuration, nothing else.
    const role = list.find((o) => o.kind === "ClusterRole" && o.metadata.name === "external-metrics-bridge-proxy:webhook-cabundle")!;
    expect(role.rules).toEqual([
      { apiGroups: ["admissionregistration.k8s.io"], resources: ["validatingwebhookconfigurations"], resourceNames: [WEBHOOK_CONFIGURATION_NAME], verbs: ["get", "update"] },
    ]);
    const binding = list.find((o) => o.kind === "ClusterRoleBinding" && o.metadata.name === "external-metrics-bridge-proxy:webhook-cabundle")!;
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "external-metrics-bridge-proxy", namespace: "external-metrics-bridge" }]);
    validate(list);
  });

  it("admission.clientCA: the ConfigMap is mounted and the ProxyConfig's clientCA names the mounted file", () => {
    const list = objects(helmTemplate(["--set", "admission.clientCA.configMap=apiserver-webhook-client-ca", "--set", "admission.clientCA.key=ca.pem"]));
    const config = loadProxyConfig(list.find((o) => o.kind === "ConfigMap")!.data["proxy.yaml"], "configmap");
    expect(config.admission).toEqual({ mode: "Warn", clientCA: "/etc/external-metrics-bridge/admission-client-ca/ca.pem" });
    const pod = list.find((o) => o.kind === "Deployment")!.spec.template.spec;
    const mount = pod.containers[0].volumeMounts.find((m: { mountPath: string }) => config.admission!.clientCA!.startsWith(`${m.mountPath}/`));
    expect(mount).toMatchObject({ name: "admission-client-ca", readOnly: true });
    expect(pod.volumes.find((v: { name: string }) => v.name === mount.name).configMap).toEqual({ name: "apiserver-webhook-client-ca", items: [{ key: "ca.pem", path: "ca.pem" }] });
    validate(list);
    // no clientCA by default: no mount, no clientCA in the ProxyConfig
    const plain = objects(helmTemplate());
    expect(plain.find((o) => o.kind === "Deployment")!.spec.template.spec.volumes.some((v: { name: string }) => v.name === "admission-client-ca")).toBe(false);
  });

  it("admission.mode Deny reaches the ProxyConfig", () => {
    const list = objects(helmTemplate(["--set", "admission.mode=Deny"]));
    expect(loadProxyConfig(list.find((o) => o.kind === "ConfigMap")!.data["proxy.yaml"], "configmap").admission).toEqual({ mode: "Deny" });
  });

  it("tls.mode certManager: cainjector fills caBundle from the serving Certificate; the proxy gets no RBAC to write it", () => {
    const list = objects(helmTemplate(["--set", "tls.mode=certManager"]));
    const vwc = webhookOf(list)!;
    const serving = list.find((o) => o.kind === "Certificate" && o.spec.isCA !== true)!;
    expect(vwc.metadata.annotations?.["cert-manager.io/inject-ca-from"]).toBe(`external-metrics-bridge/${serving.metadata.name}`);
    expect(list.find((o) => o.kind === "APIService")!.metadata.annotations?.["cert-manager.io/inject-ca-from"]).toBe(vwc.metadata.annotations?.["cert-manager.io/inject-ca-from"]);
    expect(list.some((o) => o.metadata.name.endsWith(":webhook-cabundle"))).toBe(false);
    validate(list);
  });

  it("registration.caBundle given (no self-registration): rendered into both webhooks as into the APIService", () => {
    const list = objects(helmTemplate(["--set", "registration.selfRegister=false", "--set", "tls.mode=existing", "--set", "registration.caBundle=-----BEGIN CERTIFICATE-----"]));
    const b64 = Buffer.from("-----BEGIN CERTIFICATE-----").toString("base64");
    expect(webhookOf(list)!.webhooks.map((w: { clientConfig: { caBundle?: string } }) => w.clientConfig.caBundle)).toEqual([b64, b64]);
    expect(list.some((o) => o.metadata.name.endsWith(":webhook-cabundle"))).toBe(false);
    validate(list);
  });

  it("admission.enabled false: no webhook configuration, no RBAC for it, no admission section, no webhook port (the proxy serves no webhook path)", () => {
    const list = objects(helmTemplate(["--set", "admission.enabled=false"]));
    expect(list.find((o) => o.kind === "Service")!.spec.ports.map((p: { name: string }) => p.name)).toEqual(["https"]);
    const proxy = list.find((o) => o.kind === "Deployment")!.spec.template.spec.containers[0];
    expect(proxy.ports.map((p: { name: string }) => p.name)).toEqual(["https"]);
    expect(proxy.args.some((a: string) => a.startsWith("--admission-port"))).toBe(false);
    expect(webhookOf(list)).toBeUndefined();
    expect(list.some((o) => o.metadata.name.endsWith(":webhook-cabundle"))).toBe(false);
    expect(loadProxyConfig(list.find((o) => o.kind === "ConfigMap")!.data["proxy.yaml"], "configmap").admission).toBeUndefined();
  });
});
