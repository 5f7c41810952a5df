/**
 * The proxy's deployment: the Helm chart lints, renders exactly the plain
 * manifests in infra/manifests/ (so they cannot drift), and every object
 * validates strictly against the Kubernetes OpenAPI schemas with kubeconform
 * — offline: helm and kubeconform are built with `go install` from the Go
 * module proxy into .cache/bin, and the schemas are generated from
 * k8s.io/kubernetes' own api/openapi-spec/swagger.json (infra/tools/).
 * The chart's ProxyConfig and flags are checked against the proxy's own
 * config loader and command line, and the example Role against the
 * SubjectAccessReview the proxy sends.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { reviewSpec } from "../../shared/proxy/authz/authorize.ts";
import { loadProxyConfig, PROXY_API_VERSION } from "../../shared/proxy/config.ts";
import { proxyCommand } from "../../functions/proxy/main.ts";
import { requestInfo } from "../../shared/proxy/request-info.ts";
import { CONFIG_API_VERSION } from "../../shared/config/config.ts";
import { rbac, type FakeRule } from "../fakes/kube-apiserver.ts";
import {
  ensureSchemas,
  ensureTool,
  helmLint,
  helmTemplate,
  kubeconform,
  MANIFESTS,
  manifestsFile,
  ROOT,
} from "../../infra/tools/validate.ts";

const CRDS = join(ROOT, "infra/helm/external-metrics-bridge/files/crds");

type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; annotations?: Record<string, string>; labels?: Record<string, string> }; [k: string]: any };

function objects(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

function find(list: K8sObject[], kind: string, name?: string): K8sObject {
  const found = list.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (!found) throw new Error(`no ${kind}${name ? ` ${name}` : ""} in ${list.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")}`);
  return found;
}

let rendered: string;
let manifests: K8sObject[];

beforeAll(() => {
  // First run: go install of helm takes minutes on 2 cores; later runs reuse .cache/bin.
  ensureTool("helm");
  ensureTool("kubeconform");
  ensureSchemas();
  rendered = helmTemplate();
  manifests = objects(rendered);
}, 30 * 60_000);

describe("the Helm chart", () => {
  it("passes helm lint --strict", () => {
    const lint = helmLint();
    expect(lint.ok, lint.output).toBe(true);
  });

  it("renders exactly the committed plain manifests", () => {
    expect(readFileSync(MANIFESTS, "utf8")).toBe(manifestsFile(rendered));
  });

  it("renders every object the proxy needs", () => {
    const names = manifests.map((o) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`).sort();
    expect(names).toEqual(
      [
        "APIService//v1beta1.external.metrics.k8s.io",
        "ClusterRole//external-metrics-bridge-policy-admin",
        "ClusterRole//external-metrics-bridge-policy-viewer",
        "ClusterRole//external-metrics-bridge-proxy:policy-reader",
        "ClusterRoleBinding//external-metrics-bridge-proxy:policy-reader",
        "CustomResourceDefinition//clusterexternalmetricpolicies.external-metrics-bridge.io",
        "CustomResourceDefinition//externalmetricpolicies.external-metrics-bridge.io",
        "ClusterRole//external-metrics-bridge-proxy:apiservice-registrar",
        "ClusterRole//external-metrics-bridge-proxy:external-metrics-reader",
        "ClusterRole//external-metrics-bridge-proxy:webhook-cabundle",
        "ClusterRoleBinding//external-metrics-bridge-proxy:apiservice-registrar",
        "ClusterRoleBinding//external-metrics-bridge-proxy:external-metrics-reader",
        "ClusterRoleBinding//external-metrics-bridge-proxy:webhook-cabundle",
        "ClusterRoleBinding//external-metrics-bridge-proxy:system:auth-delegator",
        "ConfigMap/external-metrics-bridge/external-metrics-bridge-proxy-config",
        "Deployment/external-metrics-bridge/external-metrics-bridge-proxy",
        "Namespace//external-metrics-bridge",
        "NetworkPolicy/external-metrics-bridge/external-metrics-bridge-proxy",
        "PodDisruptionBudget/external-metrics-bridge/external-metrics-bridge-proxy",
        "Role/external-metrics-bridge/external-metrics-bridge-proxy:serving-certificate",
        "RoleBinding/external-metrics-bridge/external-metrics-bridge-proxy:serving-certificate",
        "RoleBinding/kube-system/external-metrics-bridge-proxy:extension-apiserver-authentication-reader",
        "Service/external-metrics-bridge/external-metrics-bridge-proxy",
        "ServiceAccount/external-metrics-bridge/external-metrics-bridge-proxy",
        "ValidatingWebhookConfiguration//external-metrics-bridge",
      ].sort(),
    );
  });

  it("runs 2 non-root replicas with a read-only root filesystem, probes, resources and keys from a Secret", () => {
    const d = find(manifests, "Deployment");
    const pod = d.spec.template.spec;
    const c = pod.containers[0];
    expect(d.spec.replicas).toBe(2);
    // no fixed runAsUser (OpenShift assigns a UID of the namespace's range): the image's numeric USER applies
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
    expect(c.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } });
    expect(c.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "https", scheme: "HTTPS" });
    expect(c.livenessProbe.httpGet).toEqual({ path: "/livez", port: "https", scheme: "HTTPS" });
    expect(c.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(c.resources.limits.memory).toBeDefined();
    const keys = c.env.find((e: { name: string }) => e.name === "BRIDGE_SIGNING_KEYS");
    expect(keys).toEqual({ name: "BRIDGE_SIGNING_KEYS", valueFrom: { secretKeyRef: { name: "external-metrics-bridge-signing", key: "BRIDGE_SIGNING_KEYS" } } });
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(5 + 20);
    const pdb = find(manifests, "PodDisruptionBudget");
    expect(pdb.spec).toEqual({ minAvailable: 1, selector: { matchLabels: d.spec.selector.matchLabels } });
    expect(find(manifests, "Service").spec.selector).toEqual(d.spec.selector.matchLabels);
  });

  it("grants exactly the RBAC an aggregated API server needs", () => {
    const proxySA = { kind: "ServiceAccount", name: "external-metrics-bridge-proxy", namespace: "external-metrics-bridge" };
    expect(find(manifests, "ClusterRoleBinding", "external-metrics-bridge-proxy:system:auth-delegator")).toMatchObject({
      roleRef: { kind: "ClusterRole", name: "system:auth-delegator" },
      subjects: [proxySA],
    });
    expect(find(manifests, "RoleBinding", "external-metrics-bridge-proxy:extension-apiserver-authentication-reader")).toMatchObject({
      metadata: { namespace: "kube-system" },
      roleRef: { kind: "Role", name: "extension-apiserver-authentication-reader" },
      subjects: [proxySA],
    });
    const registrar = find(manifests, "ClusterRole", "external-metrics-bridge-proxy:apiservice-registrar");
    expect(registrar.rules).toEqual([
      { apiGroups: ["apiregistration.k8s.io"], resources: ["apiservices"], resourceNames: ["v1beta1.external.metrics.k8s.io"], verbs: ["get", "update"] },
      { apiGroups: ["apiregistration.k8s.io"], resources: ["apiservices"], verbs: ["create"] },
    ]);
    expect(find(manifests, "ClusterRole", "external-metrics-bridge-proxy:external-metrics-reader").rules).toEqual([
      { apiGroups: ["external.metrics.k8s.io"], resources: ["*"], verbs: ["get", "list"] },
    ]);
    expect(find(manifests, "ClusterRoleBinding", "external-metrics-bridge-proxy:external-metrics-reader").subjects).toEqual([
      { kind: "ServiceAccount", name: "horizontal-pod-autoscaler", namespace: "kube-system" },
    ]);
    expect(find(manifests, "APIService").spec).toEqual({
      group: "external.metrics.k8s.io",
      version: "v1beta1",
      service: { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy", port: 443 },
      insecureSkipTLSVerify: false,
      groupPriorityMinimum: 100,
      versionPriority: 100,
    });
  });

  it("ships the policy CRDs of files/crds/ (templates: installed and upgraded with the release, kept on uninstall), in the plain manifests too", () => {
    for (const file of readdirSync(CRDS)) {
      const [crd] = objects(readFileSync(join(CRDS, file), "utf8"));
      const shipped = find(manifests, "CustomResourceDefinition", crd!.metadata.name);
      expect({ ...shipped, metadata: { name: shipped.metadata.name } }).toEqual({ ...crd, metadata: { name: crd!.metadata.name } });
      expect(shipped.metadata.annotations).toMatchObject({ "helm.sh/resource-policy": "keep" });
    }
  });

  it("grants policy authors plain RBAC: namespace admins and editors write their namespace's ExternalMetricPolicies, only cluster-admin writes ClusterExternalMetricPolicies", () => {
    const group = "external-metrics-bridge.io";
    const admin = find(manifests, "ClusterRole", "external-metrics-bridge-policy-admin");
    expect(admin.metadata.labels).toMatchObject({ "rbac.authorization.k8s.io/aggregate-to-admin": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true" });
    expect(admin.metadata.labels).not.toHaveProperty("rbac.authorization.k8s.io/aggregate-to-view");
    expect(admin.rules).toEqual([
      { apiGroups: [group], resources: ["externalmetricpolicies"], verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"] },
    ]);
    const viewer = find(manifests, "ClusterRole", "external-metrics-bridge-policy-viewer");
    expect(viewer.metadata.labels).toMatchObject({
      "rbac.authorization.k8s.io/aggregate-to-view": "true",
      "rbac.authorization.k8s.io/aggregate-to-edit": "true",
      "rbac.authorization.k8s.io/aggregate-to-admin": "true",
    });
    expect(viewer.rules).toEqual([{ apiGroups: [group], resources: ["externalmetricpolicies", "clusterexternalmetricpolicies"], verbs: ["get", "list", "watch"] }]);
    // No aggregated role writes the cluster-scoped kind or any status.
    const aggregated = manifests.filter((o) => o.kind === "ClusterRole" && Object.keys(o.metadata.labels ?? {}).some((l: string) => l.startsWith("rbac.authorization.k8s.io/aggregate-to-")));
    const writes = aggregated.flatMap((r) => r.rules).filter((rule: FakeRule) => rule.verbs.some((v) => !["get", "list", "watch"].includes(v)));
    expect(writes.flatMap((rule: FakeRule) => rule.resources)).toEqual(["externalmetricpolicies"]);
    // The proxy watches both kinds, writes only their status, and creates Events about invalid ones.
    expect(find(manifests, "ClusterRole", "external-metrics-bridge-proxy:policy-reader").rules).toEqual([
      { apiGroups: [group], resources: ["externalmetricpolicies", "clusterexternalmetricpolicies"], verbs: ["get", "list", "watch"] },
      { apiGroups: [group], resources: ["externalmetricpolicies/status", "clusterexternalmetricpolicies/status"], verbs: ["update"] },
      { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create"] },
    ]);
    expect(find(manifests, "ClusterRoleBinding", "external-metrics-bridge-proxy:policy-reader")).toMatchObject({
      roleRef: { kind: "ClusterRole", name: "external-metrics-bridge-proxy:policy-reader" },
      subjects: [{ kind: "ServiceAccount", name: "external-metrics-bridge-proxy", namespace: "external-metrics-bridge" }],
    });
    // With the cluster policy layer off, the proxy gets no access to policies (authors keep theirs).
    const off = objects(helmTemplate(["--set", "clusterPolicies.enabled=false"])).map((o) => `${o.kind}/${o.metadata.name}`);
    expect(off.filter((n) => n.includes("polic"))).toEqual([
      "CustomResourceDefinition/clusterexternalmetricpolicies.external-metrics-bridge.io",
      "CustomResourceDefinition/externalmetricpolicies.external-metrics-bridge.io",
      "ClusterRole/external-metrics-bridge-policy-admin",
      "ClusterRole/external-metrics-bridge-policy-viewer",
    ]);
  });

  it("renders a ProxyConfig the proxy loads, and flags its command line accepts", () => {
    const cm = find(manifests, "ConfigMap");
    const config = loadProxyConfig(cm.data["proxy.yaml"], "configmap");
    expect(config.backends.map((b) => [b.name, b.type])).toEqual([["functions", "bridge"]]);
    // The cluster policy layer is on in the chart (off in the library), deferring reads no policy covers.
    expect(config.clusterPolicies).toEqual({ enabled: true, whenNoneApply: "Defer" });
    expect(PROXY_API_VERSION).toBe(CONFIG_API_VERSION);
    const args: string[] = find(manifests, "Deployment").spec.template.spec.containers[0].args;
    const opts = proxyCommand().exitOverride().parse(args, { from: "user" }).opts();
    expect(opts).toMatchObject({
      config: "/etc/external-metrics-bridge/config/proxy.yaml",
      securePort: 6443,
      tlsSecret: "external-metrics-bridge/external-metrics-bridge-proxy-tls",
      register: true,
      shutdownDelaySeconds: 5,
      drainTimeoutSeconds: 20,
    });
    // The config path is where the ConfigMap is mounted.
    const mount = find(manifests, "Deployment").spec.template.spec.containers[0].volumeMounts.find((m: { name: string }) => m.name === "config");
    expect(`${mount.mountPath}/proxy.yaml`).toBe(opts["config"]);
  });

  it("renders tls.mode certManager: a self-signed CA chain, cainjector fills caBundle, the proxy reads files and never registers", () => {
    const text = helmTemplate(["--set", "tls.mode=certManager"]);
    const list = objects(text);
    const api = find(list, "APIService");
    const serving = list.find((o) => o.kind === "Certificate" && o.spec.isCA !== true)!;
    const ca = list.find((o) => o.kind === "Certificate" && o.spec.isCA === true)!;
    expect(serving, "a serving Certificate").toBeDefined();
    expect(ca, "a CA Certificate").toBeDefined();
    // cainjector reads the CA of the serving Certificate named by the annotation.
    expect(api.metadata.annotations?.["cert-manager.io/inject-ca-from"]).toBe(`external-metrics-bridge/${serving.metadata.name}`);
    expect(api.spec.caBundle).toBeUndefined();
    // The serving certificate covers the name the aggregator verifies (<service>.<namespace>.svc).
    expect(serving.spec.dnsNames).toContain("external-metrics-bridge-proxy.external-metrics-bridge.svc");
    const issuers = list.filter((o) => o.kind === "Issuer").map((o) => o.metadata.name);
    expect(issuers).toContain(serving.spec.issuerRef.name);
    expect(issuers).toContain(ca.spec.issuerRef.name);
    const args: string[] = find(list, "Deployment").spec.template.spec.containers[0].args;
    const opts = proxyCommand().exitOverride().parse(args, { from: "user" }).opts();
    expect(opts).toMatchObject({ register: false, tlsCertFile: "/etc/external-metrics-bridge/tls/tls.crt", tlsCaFile: "/etc/external-metrics-bridge/tls/ca.crt" });
    expect(list.some((o) => o.metadata.name.endsWith(":apiservice-registrar"))).toBe(false);
    // cert-manager's CRD schemas are not available offline: kubeconform checks every other object.
    const others = list.filter((o) => o.kind !== "Certificate" && o.kind !== "Issuer");
    const result = kubeconform(["-"], others.map((o) => JSON.stringify(o)).join("\n---\n"));
    expect(result.resources.filter((r) => r.status === "statusValid")).toHaveLength(others.length);
    expect(result.ok, JSON.stringify(result.resources.filter((r) => r.status !== "statusValid"))).toBe(true);
  });

  it("renders variants: pass-through backend, existing TLS Secret, no self-registration, per-namespace HPA access, /metrics readers", () => {
    const text = helmTemplate([
      "--set-json",
      'backends={"aws":{"url":"https://emb.example.workers.dev","timeoutSeconds":3},"keda":{"url":"https://keda-operator-metrics-apiserver.keda.svc","type":"passthrough","bearerTokenFile":"/var/run/secrets/kubernetes.io/serviceaccount/token"}}',
      "--set-json",
      'routes=[{"metric":"queue_.*","backend":"aws"}]',
      "--set",
      "passthrough=keda",
      "--set",
      "tls.mode=existing",
      "--set",
      "registration.selfRegister=false",
      "--set",
      "registration.caBundle=-----BEGIN CERTIFICATE-----",
      "--set",
      "hpa.clusterWide=false",
      "--set-json",
      'metricsReaders=["monitoring/prometheus-k8s"]',
    ]);
    const list = objects(text);
    const config = loadProxyConfig(find(list, "ConfigMap").data["proxy.yaml"], "configmap");
    expect(config.passthrough).toBe("keda");
    expect(config.routes.map((r) => r.backend)).toEqual(["aws"]);
    const args: string[] = find(list, "Deployment").spec.template.spec.containers[0].args;
    const opts = proxyCommand().exitOverride().parse(args, { from: "user" }).opts();
    expect(opts).toMatchObject({ register: false, tlsCertFile: "/etc/external-metrics-bridge/tls/tls.crt", tlsCaFile: "/etc/external-metrics-bridge/tls/ca.crt" });
    expect(list.some((o) => o.metadata.name.endsWith(":apiservice-registrar"))).toBe(false);
    expect(list.some((o) => o.metadata.name.endsWith(":serving-certificate"))).toBe(false);
    // With a pass-through backend the proxy itself reads external metrics; the HPA is not bound cluster-wide.
    expect(find(list, "ClusterRoleBinding", "external-metrics-bridge-proxy:external-metrics-reader").subjects).toEqual([
      { kind: "ServiceAccount", name: "external-metrics-bridge-proxy", namespace: "external-metrics-bridge" },
    ]);
    expect(find(list, "ClusterRole", "external-metrics-bridge-proxy:metrics-reader").rules).toEqual([{ nonResourceURLs: ["/metrics"], verbs: ["get"] }]);
    expect(find(list, "APIService").spec.caBundle).toBe(Buffer.from("-----BEGIN CERTIFICATE-----").toString("base64"));
    const result = kubeconform(["-"], text);
    expect(result.ok, JSON.stringify(result.resources.filter((r) => r.status !== "statusValid"))).toBe(true);
  });
});

describe("kubeconform against the Kubernetes schemas", () => {
  it("validates the plain manifests and the example RBAC strictly", () => {
    const result = kubeconform([MANIFESTS, join(ROOT, "infra/examples/rbac")]);
    const checked = result.resources.filter((r) => r.kind !== ""); // the header comment is an empty document
    expect(result.ok, JSON.stringify(checked.filter((r) => r.status !== "statusValid"), null, 2)).toBe(true);
    expect(checked.every((r) => r.status === "statusValid")).toBe(true);
    expect(checked.length).toBe(manifests.length + 2);
  });

  it.each([
    ["a wrongly typed field", (t: string) => t.replace("replicas: 2", 'replicas: "two"'), /replicas/],
    ["an unknown field", (t: string) => t.replace("revisionHistoryLimit: 5", "revisionHistoryLimit: 5\n  replicaz: 3"), /replicaz/],
    ["a misspelled probe field", (t: string) => t.replace("periodSeconds: 5", "periodSecond: 5"), /periodSecond/],
    ["a bad APIService port", (t: string) => t.replace("port: 443\n  insecureSkipTLSVerify", 'port: "https"\n  insecureSkipTLSVerify'), /port/],
  ])("catches %s", (_what, mutate, message) => {
    const broken = mutate(rendered);
    expect(broken).not.toBe(rendered);
    const result = kubeconform(["-"], broken);
    expect(result.ok).toBe(false);
    const invalid = result.resources.filter((r) => r.status === "statusInvalid");
    expect(invalid.length).toBe(1);
    expect(invalid[0]!.msg).toMatch(message);
  });

  it("fails on a kind it has no schema for", () => {
    const result = kubeconform(["-"], "apiVersion: example.com/v1\nkind: Widget\nmetadata: { name: w }\n");
    expect(result.ok).toBe(false);
    expect(result.resources[0]!.status).toBe("statusError");
  });
});

describe("the example per-team Role", () => {
  it("allows exactly what the proxy's SubjectAccessReview asks for team-a's metrics, and nothing else", () => {
    const docs = objects(readFileSync(join(ROOT, "infra/examples/rbac/team-a-metrics-reader.yaml"), "utf8"));
    const role = find(docs, "Role");
    const binding = find(docs, "RoleBinding");
    const users = binding.subjects
      .filter((s: { kind: string }) => s.kind === "ServiceAccount")
      .map((s: { name: string; namespace: string }) => `system:serviceaccount:${s.namespace}:${s.name}`);
    const groups = binding.subjects.filter((s: { kind: string }) => s.kind === "Group").map((s: { name: string }) => s.name);
    const rules: FakeRule[] = role.rules.map((r: { apiGroups: string[]; resources: string[]; verbs: string[] }) => ({
      users,
      groups,
      namespace: role.metadata.namespace,
      verbs: r.verbs,
      apiGroups: r.apiGroups,
      resources: r.resources,
    }));
    const decide = rbac(rules);
    const ask = (user: string, path: string) =>
      decide(reviewSpec({ user, groups: user === "jane" ? ["team-a-developers"] : [], extra: {} }, requestInfo("GET", new URL(`https://x${path}`)))).allowed;
    const V1 = "/apis/external.metrics.k8s.io/v1beta1";
    // The example does not bind the HPA controller: its built-in ClusterRole already reads every
    // external metric, so a Role cannot limit it (ExternalMetricPolicy does; docs/proxy.md).
    expect(binding.subjects.map((x: { name: string }) => x.name)).not.toContain("horizontal-pod-autoscaler");
    expect(ask("system:serviceaccount:kube-system:horizontal-pod-autoscaler", `${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Da`)).toBe(false);
    expect(ask("jane", `${V1}/namespaces/team-a/queue_messages_delayed`)).toBe(true);
    expect(ask("jane", `${V1}/namespaces/team-a/payroll_depth`)).toBe(false);
    expect(ask("jane", `${V1}/namespaces/team-b/queue_messages_ready`)).toBe(false);
    expect(ask("system:serviceaccount:team-b:deployer", `${V1}/namespaces/team-a/queue_messages_ready`)).toBe(false);
  });
});

describe("the container image", () => {
  // No Docker daemon (and no registry to pull base images from) here: the
  // Dockerfile's structure is checked, not built.
  const dockerfile = readFileSync(join(ROOT, "infra/Dockerfile"), "utf8");
  const stages = dockerfile.split(/^FROM /m).slice(1);

  it("is multi-stage: locked install without install scripts and the proxy bundle in a build stage; the final stage holds only the bundle", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(stages[0]).toMatch(/npm ci --ignore-scripts/);
    expect(stages[0]).toMatch(/node infra\/proxy\/build\.ts --outdir \/app\/dist\/proxy/);
    expect(stages.at(-1)).not.toMatch(/npm (ci|install)/);
    expect(stages.at(-1)).not.toMatch(/node_modules/);
    expect(stages.at(-1)).toMatch(/COPY --from=build --chown=65532:65532 \/app\/dist\/proxy \.\//);
  });

  it("runs the proxy as a non-root user", () => {
    const final = stages.at(-1)!;
    expect(final).toMatch(/^USER 65532:65532$/m);
    const deployment = find(manifests, "Deployment");
    expect(final).toMatch(/^ENTRYPOINT \["\/nodejs\/bin\/node", "--max-old-space-size=\d+", "--max-semi-space-size=\d+", "\/app\/main\.mjs"\]$/m);
    // The chart passes the proxy's flags as args (they follow the ENTRYPOINT); it never replaces the command.
    expect(deployment.spec.template.spec.containers[0].command).toBeUndefined();
    expect(deployment.spec.template.spec.containers[0].args[0]).toMatch(/^--config=/);
    // The chart fixes no runAsUser: runAsNonRoot is verified by the kubelet against this numeric USER.
    expect(deployment.spec.template.spec.securityContext).toMatchObject({ runAsNonRoot: true });
    expect(deployment.spec.template.spec.securityContext).not.toHaveProperty("runAsUser");
  });
});
