/**
 * The chart's standard keys (issue 27, item 2), as users of the KEDA and
 * prometheus-adapter charts expect them: each rendered with the repository's
 * pinned helm and validated strictly with kubeconform (Kubernetes 1.37
 * schemas; cert-manager and Prometheus Operator kinds have none offline).
 */
import { describe, expect, it, beforeAll } from "vitest";
import { ensureChartTools, expectValid, find, container, NS, podSpec, render, valuesFile, type K8sObject } from "./chart.helpers.ts";

beforeAll(ensureChartTools, 30 * 60_000);

describe("security contexts", () => {
  it("default: Pod Security restricted without a fixed UID (the image's USER, or the UID OpenShift assigns)", () => {
    const list = render();
    expect(podSpec(list).securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
    expect(container(list).securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } });
    expect(JSON.stringify(find(list, "Deployment"))).not.toContain("runAsUser");
    expectValid(list);
  });

  it("podSecurityContext and securityContext replace the defaults", () => {
    const pod = { runAsNonRoot: true, runAsUser: 1000680000, fsGroup: 1000680000, seccompProfile: { type: "RuntimeDefault" } };
    const c = { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ["ALL"] } };
    const list = render("--values", valuesFile({ podSecurityContext: pod, securityContext: c }));
    expect(podSpec(list).securityContext).toEqual(pod);
    expect(container(list).securityContext).toEqual(c);
    expectValid(list);
  });
});

describe("Service", () => {
  it("service.type and service.annotations", () => {
    const list = render("--set", "service.type=NodePort", "--set-json", 'service.annotations={"service.beta.kubernetes.io/aws-load-balancer-internal":"true"}');
    const svc = find(list, "Service");
    expect(svc.spec.type).toBe("NodePort");
    expect(svc.metadata.annotations).toEqual({ "service.beta.kubernetes.io/aws-load-balancer-internal": "true" });
    expect(find(render(), "Service").spec.type).toBe("ClusterIP");
    expect(find(render(), "Service").metadata).not.toHaveProperty("annotations");
    expectValid(list);
  });
});

describe("commonLabels and commonAnnotations", () => {
  it("are on every object the chart renders, pods and CRDs included; the chart's own labels win on a clash", () => {
    const list = render(
      "--set-json", 'commonLabels={"team":"platform","app.kubernetes.io/name":"mine"}',
      "--set-json", 'commonAnnotations={"example.com/owner":"platform"}',
      "--set", "serviceMonitor.enabled=true",
      "--set", "namespace.create=true",
    );
    const all: { kind: string; name: string; metadata: K8sObject["metadata"] }[] = list.map((o) => ({ kind: o.kind, name: o.metadata.name, metadata: o.metadata }));
    all.push({ kind: "Pod", name: "template", metadata: find(list, "Deployment").spec.template.metadata });
    expect(list.map((o) => o.kind)).toEqual(expect.arrayContaining(["CustomResourceDefinition", "ServiceMonitor", "Namespace", "Secret", "APIService"]));
    for (const o of all) {
      expect(o.metadata.labels, `${o.kind}/${o.name}`).toMatchObject({ team: "platform", "app.kubernetes.io/name": "external-metrics-bridge-proxy" });
      expect(o.metadata.annotations, `${o.kind}/${o.name}`).toMatchObject({ "example.com/owner": "platform" });
    }
    // an object's own annotations stay (the scraper token's ServiceAccount, the CRDs' keep policy)
    expect(find(list, "Secret").metadata.annotations).toMatchObject({ "kubernetes.io/service-account.name": "external-metrics-bridge-proxy-metrics-scraper" });
    expect(find(list, "CustomResourceDefinition").metadata.annotations).toMatchObject({ "helm.sh/resource-policy": "keep" });
    expectValid(list);
  });
});

describe("extraObjects", () => {
  it("renders objects and tpl strings with the release", () => {
    const values = {
      extraObjects: [
        { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "extra-plain", namespace: NS }, data: { a: "b" } },
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra-{{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\ndata:\n  chart: {{ .Chart.Name }}\n",
      ],
    };
    const list = render("--values", valuesFile(values));
    expect(find(list, "ConfigMap", "extra-plain").data).toEqual({ a: "b" });
    const templated = find(list, "ConfigMap", "extra-external-metrics-bridge");
    expect(templated.metadata.namespace).toBe(NS);
    expect(templated.data).toEqual({ chart: "external-metrics-bridge" });
    expectValid(list);
  });
});

describe("pod settings", () => {
  it("priorityClassName, dnsConfig, affinity (replacing the default anti-affinity), probe timing", () => {
    const dnsConfig = { options: [{ name: "ndots", value: "2" }], searches: ["svc.cluster.local"] };
    const affinity = { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 1, preference: { matchExpressions: [{ key: "node-role", operator: "In", values: ["infra"] }] } }] } };
    const list = render(
      "--values",
      valuesFile({
        priorityClassName: "system-cluster-critical",
        dnsConfig,
        affinity,
        startupProbe: { periodSeconds: 5, failureThreshold: 60 },
        livenessProbe: { periodSeconds: 20, timeoutSeconds: 5, failureThreshold: 6, initialDelaySeconds: 1 },
        readinessProbe: { periodSeconds: 3, timeoutSeconds: 2, failureThreshold: 1, successThreshold: 2 },
      }),
    );
    const pod = podSpec(list);
    expect(pod).toMatchObject({ priorityClassName: "system-cluster-critical", dnsConfig, affinity });
    expect(pod.affinity).not.toHaveProperty("podAntiAffinity");
    const c = container(list);
    expect(c.startupProbe).toEqual({ httpGet: { path: "/livez", port: "https", scheme: "HTTPS" }, periodSeconds: 5, failureThreshold: 60 });
    expect(c.livenessProbe).toEqual({ httpGet: { path: "/livez", port: "https", scheme: "HTTPS" }, periodSeconds: 20, timeoutSeconds: 5, failureThreshold: 6, initialDelaySeconds: 1 });
    expect(c.readinessProbe).toEqual({ httpGet: { path: "/readyz", port: "https", scheme: "HTTPS" }, periodSeconds: 3, timeoutSeconds: 2, failureThreshold: 1, successThreshold: 2 });
    expectValid(list);
    // the default: a preferred anti-affinity by hostname between the proxy's pods
    expect(podSpec(render()).affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey).toBe("kubernetes.io/hostname");
  });

  it("replicaCount wins over replicas when set, 0 included (and no PodDisruptionBudget then)", () => {
    expect(find(render("--set", "replicaCount=3"), "Deployment").spec.replicas).toBe(3);
    const zero = render("--set", "replicaCount=0");
    expect(find(zero, "Deployment").spec.replicas).toBe(0);
    expect(zero.some((o) => o.kind === "PodDisruptionBudget")).toBe(false);
    expect(find(render("--set", "replicas=4"), "Deployment").spec.replicas).toBe(4);
    expectValid(zero);
  });
});

describe("image", () => {
  it("registry prefixes the repository; a digest pins the image instead of the tag", () => {
    const digest = `sha256:${"ab".repeat(32)}`;
    expect(container(render()).image).toBe("ghcr.io/external-metrics-bridge/proxy:0.1.0");
    expect(container(render("--set", "image.registry=registry.example.com:5000", "--set", "image.repository=platform/emb-proxy")).image).toBe("registry.example.com:5000/platform/emb-proxy:0.1.0");
    const pinned = render("--set", "image.registry=registry.example.com", "--set", "image.repository=platform/emb-proxy", "--set", `image.digest=${digest}`);
    expect(container(pinned).image).toBe(`registry.example.com/platform/emb-proxy@${digest}`);
    expectValid(pinned);
  });
});

describe("serviceAccount", () => {
  it("create false uses an existing ServiceAccount by name, in the pod and in every binding", () => {
    const list = render("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=platform-emb");
    expect(list.some((o) => o.kind === "ServiceAccount")).toBe(false);
    expect(podSpec(list).serviceAccountName).toBe("platform-emb");
    const bindings = list.filter((o) => o.kind === "ClusterRoleBinding" || o.kind === "RoleBinding");
    const ours = bindings.flatMap((b) => b.subjects.filter((s: { namespace: string }) => s.namespace === NS));
    expect(ours.length).toBeGreaterThan(3);
    for (const s of ours) expect(s.name).toBe("platform-emb");
    expectValid(list);
  });
});

describe("cert-manager with an existing issuer", () => {
  it("issuerRef names a ClusterIssuer: no self-signed chain, the serving Certificate is signed by it, cainjector fills caBundle from it", () => {
    const list = render("--set", "tls.mode=certManager", "--set", "tls.certManager.issuerRef.name=platform-ca", "--set", "tls.certManager.issuerRef.kind=ClusterIssuer");
    const certs = list.filter((o) => o.apiVersion === "cert-manager.io/v1");
    expect(certs.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(["Certificate/external-metrics-bridge-proxy-serving"]);
    expect(certs[0]!.spec.issuerRef).toEqual({ group: "cert-manager.io", kind: "ClusterIssuer", name: "platform-ca" });
    expect(certs[0]!.spec.secretName).toBe("external-metrics-bridge-proxy-tls");
    expect(find(list, "APIService").metadata.annotations).toEqual({ "cert-manager.io/inject-ca-from": `${NS}/external-metrics-bridge-proxy-serving` });
    expectValid(list);
    // without issuerRef: the chart's own chain (self-signed Issuer, CA Certificate, CA Issuer, serving Certificate)
    const own = render("--set", "tls.mode=certManager").filter((o) => o.apiVersion === "cert-manager.io/v1");
    expect(own.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      "Certificate/external-metrics-bridge-proxy-ca",
      "Certificate/external-metrics-bridge-proxy-serving",
      "Issuer/external-metrics-bridge-proxy-ca",
      "Issuer/external-metrics-bridge-proxy-selfsigned",
    ]);
    expect(find(own, "Certificate", "external-metrics-bridge-proxy-serving").spec.issuerRef).toEqual({ group: "cert-manager.io", kind: "Issuer", name: "external-metrics-bridge-proxy-ca" });
  });
});

describe("CRDs", () => {
  it("installed and upgraded with the release (templates), kept on uninstall; crds.keep=false drops the policy; crds.install=false renders none", () => {
    const crds = (...args: string[]) => render(...args).filter((o) => o.kind === "CustomResourceDefinition");
    const shipped = crds("--set-json", 'crds.annotations={"argocd.argoproj.io/sync-options":"Replace=true"}');
    expect(shipped.map((c) => c.metadata.name).sort()).toEqual(["clusterexternalmetricpolicies.external-metrics-bridge.io", "externalmetricpolicies.external-metrics-bridge.io"]);
    for (const c of shipped) {
      expect(c.metadata.annotations).toEqual({ "helm.sh/resource-policy": "keep", "argocd.argoproj.io/sync-options": "Replace=true" });
      expect(c.metadata.labels).toMatchObject({ "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "external-metrics-bridge" });
    }
    expectValid(shipped);
    for (const c of crds("--set", "crds.keep=false")) expect(c.metadata.annotations ?? {}).not.toHaveProperty(["helm.sh/resource-policy"]);
    expect(crds("--set", "crds.install=false")).toEqual([]);
  });
});
