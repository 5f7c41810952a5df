/**
 * The chart's operational switches (issue 13, item 3), rendered with the
 * repository's pinned helm and validated strictly with kubeconform against
 * the Kubernetes 1.37 schemas (infra/tools/validate.ts): resources: null,
 * the PodDisruptionBudget switch, caBundle without self-registration,
 * ServiceMonitor + /metrics RBAC, NetworkPolicy, hostNetwork/dnsPolicy,
 * topology spread, pod labels/annotations, env/extraArgs, log level,
 * fullnameOverride, values.schema.json, the chart README, and the KEDA
 * coexistence values (infra/examples/keda-coexistence-values.yaml).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { proxyCommand } from "../../functions/proxy/main.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { helmLint, ROOT } from "../../infra/tools/validate.ts";
import { container, ensureChartTools, expectValid, find, NS, podSpec, render, renderError, type K8sObject } from "./chart.helpers.ts";

const CHART = join(ROOT, "infra/helm/external-metrics-bridge");
const KEDA_VALUES = join(ROOT, "infra/examples/keda-coexistence-values.yaml");

beforeAll(ensureChartTools, 30 * 60_000);

describe("chart switches", () => {
  it("resources: null renders a valid Deployment without resources (it rendered `resources:` followed by `null` text before)", () => {
    const list = render("--set", "resources=null");
    expect(container(list)).not.toHaveProperty("resources");
    expectValid(list);
  });

  it("PodDisruptionBudget: off by default with one replica (it would block every drain), on with more, switchable both ways, maxUnavailable instead of minAvailable", () => {
    const pdbs = (...args: string[]) => render(...args).filter((o) => o.kind === "PodDisruptionBudget");
    expect(pdbs("--set", "replicas=1")).toHaveLength(0);
    expect(pdbs()).toHaveLength(1);
    expect(pdbs("--set", "podDisruptionBudget.enabled=false")).toHaveLength(0);
    const forced = pdbs("--set", "replicas=1", "--set", "podDisruptionBudget.enabled=true");
    expect(forced).toHaveLength(1);
    expect(forced[0]!.spec.minAvailable).toBe(1);
    const [max] = pdbs("--set", "podDisruptionBudget.maxUnavailable=1");
    expect(max!.spec).not.toHaveProperty("minAvailable");
    expect(max!.spec.maxUnavailable).toBe(1);
    expectValid(render("--set", "podDisruptionBudget.maxUnavailable=1"));
  });

  it("selfRegister=false with tls.mode existing renders caBundle on the APIService and both webhooks, or refuses to render without a CA", () => {
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const list = render("--set", "tls.mode=existing", "--set", "registration.selfRegister=false", "--set", `registration.caBundle=${pem}`);
    const b64 = Buffer.from(pem).toString("base64");
    expect(find(list, "APIService").spec.caBundle).toBe(b64);
    expect(find(list, "ValidatingWebhookConfiguration").webhooks.map((w: { clientConfig: { caBundle?: string } }) => w.clientConfig.caBundle)).toEqual([b64, b64]);
    expectValid(list);
    // Without a CA the aggregator's discovery check could never pass: the render fails and says what to do.
    // (`helm install` reads ca.crt of the existing Secret instead; `helm template` has no cluster to read.)
    const message = renderError("--set", "tls.mode=existing", "--set", "registration.selfRegister=false");
    expect(message).toContain("nothing writes the APIService's caBundle");
    expect(message).toContain(`create Secret ${NS}/external-metrics-bridge-proxy-tls with ca.crt`);
  });

  it("ServiceMonitor: HTTPS with the proxy's CA and name, authorization from a token Secret, and RBAC for that token's ServiceAccount to GET /metrics", () => {
    const list = render("--set", "serviceMonitor.enabled=true", "--set-json", 'metricsReaders=["monitoring/prometheus-k8s"]', "--set-json", 'serviceMonitor.labels={"release":"kube-prometheus-stack"}');
    const sm = find(list, "ServiceMonitor");
    expect(sm.apiVersion).toBe("monitoring.coreos.com/v1");
    expect(sm.metadata.labels).toMatchObject({ release: "kube-prometheus-stack" });
    const service = find(list, "Service");
    // it selects the proxy's Service by its labels, in its namespace, on its named port
    for (const [k, v] of Object.entries(sm.spec.selector.matchLabels as Record<string, string>)) expect(service.metadata.labels?.[k]).toBe(v);
    expect(sm.spec.namespaceSelector).toEqual({ matchNames: [NS] });
    expect(service.spec.ports.map((p: { name: string }) => p.name)).toContain(sm.spec.endpoints[0].port);
    expect(sm.spec.endpoints[0]).toMatchObject({
      path: "/metrics",
      scheme: "https",
      // Prometheus Operator's authorization (bearerTokenFile is deprecated): the chart's scraper ServiceAccount's token Secret
      authorization: { type: "Bearer", credentials: { name: "external-metrics-bridge-proxy-metrics-scraper-token", key: "token" } },
      // ca.crt is where the proxy keeps its CA bundle in the serving-certificate Secret (shared/proxy/tls/rotation.ts)
      tlsConfig: { ca: { secret: { name: "external-metrics-bridge-proxy-tls", key: "ca.crt" } }, serverName: `external-metrics-bridge-proxy.${NS}.svc` },
    });
    expect(find(list, "ClusterRole", "external-metrics-bridge-proxy:metrics-reader").rules).toEqual([{ nonResourceURLs: ["/metrics"], verbs: ["get"] }]);
    expect(sm.spec.endpoints[0]).not.toHaveProperty("bearerTokenFile");
    // the token Secret belongs to the scraper ServiceAccount, which the /metrics binding names
    const token = find(list, "Secret", "external-metrics-bridge-proxy-metrics-scraper-token");
    expect(token.type).toBe("kubernetes.io/service-account-token");
    expect(token.metadata.annotations).toEqual({ "kubernetes.io/service-account.name": "external-metrics-bridge-proxy-metrics-scraper" });
    expect(find(list, "ServiceAccount", "external-metrics-bridge-proxy-metrics-scraper").metadata.namespace).toBe(NS);
    expect(find(list, "ClusterRoleBinding", "external-metrics-bridge-proxy:metrics-reader")).toMatchObject({
      roleRef: { kind: "ClusterRole", name: "external-metrics-bridge-proxy:metrics-reader" },
      subjects: [
        { kind: "ServiceAccount", namespace: NS, name: "external-metrics-bridge-proxy-metrics-scraper" },
        { kind: "ServiceAccount", namespace: "monitoring", name: "prometheus-k8s" },
      ],
    });
    expectValid(list);
    // An existing Secret's token: the chart renders no scraper, and its ServiceAccount must be a reader.
    const own = render("--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.credentials.secretName=prom-token", "--set-json", 'metricsReaders=["monitoring/prometheus-k8s"]');
    expect(find(own, "ServiceMonitor").spec.endpoints[0].authorization).toEqual({ type: "Bearer", credentials: { name: "prom-token", key: "token" } });
    expect(own.some((o) => o.metadata.name.endsWith("-metrics-scraper"))).toBe(false);
    expect(find(own, "ClusterRoleBinding", "external-metrics-bridge-proxy:metrics-reader").subjects).toEqual([{ kind: "ServiceAccount", namespace: "monitoring", name: "prometheus-k8s" }]);
    // Without a reader it would scrape 403s forever: refused.
    expect(renderError("--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.credentials.secretName=prom-token")).toContain("set metricsReaders to the ServiceAccount whose token that Secret holds");
  });

  it("NetworkPolicy (on by default): ingress only on the API port and the webhook port, from any source unless narrowed; egress restricted only when rules are given", () => {
    const list = render();
    const np = find(list, "NetworkPolicy");
    expect(np.spec.podSelector.matchLabels).toEqual(find(list, "Deployment").spec.selector.matchLabels);
    expect(np.spec.policyTypes).toEqual(["Ingress"]);
    const ports = Object.fromEntries(container(list).ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]));
    expect(ports).toEqual({ https: 6443, webhook: 8443 });
    expect(np.spec.ingress).toEqual([{ ports: [{ protocol: "TCP", port: ports.https }] }, { ports: [{ protocol: "TCP", port: ports.webhook }] }]);
    expectValid(list);
    const egress = [{ to: [{ ipBlock: { cidr: "10.0.0.0/8" } }], ports: [{ protocol: "TCP", port: 443 }] }];
    const from = [{ ipBlock: { cidr: "172.16.0.0/12" } }];
    const webhookFrom = [{ ipBlock: { cidr: "192.168.0.0/16" } }];
    const narrowed = render(
      "--set-json",
      `networkPolicy.egress=${JSON.stringify(egress)}`,
      "--set-json",
      `networkPolicy.ingressFrom=${JSON.stringify(from)}`,
      "--set-json",
      `networkPolicy.webhookIngressFrom=${JSON.stringify(webhookFrom)}`,
    );
    const np2 = find(narrowed, "NetworkPolicy");
    expect(np2.spec.policyTypes).toEqual(["Ingress", "Egress"]);
    expect(np2.spec.egress).toEqual(egress);
    expect(np2.spec.ingress[0].from).toEqual(from);
    expect(np2.spec.ingress[1].from).toEqual(webhookFrom);
    expectValid(narrowed);
    // without the webhook: only the API port
    expect(find(render("--set", "admission.enabled=false"), "NetworkPolicy").spec.ingress).toEqual([{ ports: [{ protocol: "TCP", port: 6443 }] }]);
    expect(render("--set", "networkPolicy.enabled=false").some((o) => o.kind === "NetworkPolicy")).toBe(false);
  });

  it("pod settings: hostNetwork (dnsPolicy ClusterFirstWithHostNet unless set), topology spread with the pods' selector, pod labels and annotations, env, extra flags the proxy accepts, LOG_LEVEL", () => {
    const spread = [{ maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway" }];
    const list = render(
      "--set", "hostNetwork=true",
      "--set-json", `topologySpreadConstraints=${JSON.stringify(spread)}`,
      "--set-json", 'podLabels={"team":"platform"}',
      "--set-json", 'podAnnotations={"example.com/owner":"platform"}',
      "--set-json", 'env=[{"name":"HTTPS_PROXY","value":"http://proxy.internal:3128"}]',
      "--set-json", 'extraArgs=["--kube-api-timeout-seconds=1.5"]',
      "--set", "logLevel=debug",
    );
    const pod = podSpec(list);
    const d = find(list, "Deployment");
    expect(pod.hostNetwork).toBe(true);
    expect(pod.dnsPolicy).toBe("ClusterFirstWithHostNet");
    expect(pod.topologySpreadConstraints).toEqual([{ ...spread[0], labelSelector: { matchLabels: d.spec.selector.matchLabels } }]);
    expect(d.spec.template.metadata.labels).toMatchObject({ team: "platform", ...d.spec.selector.matchLabels });
    expect(d.spec.template.metadata.annotations).toMatchObject({ "example.com/owner": "platform", "checksum/config": expect.any(String) });
    const c = container(list);
    expect(c.env).toEqual(expect.arrayContaining([{ name: "HTTPS_PROXY", value: "http://proxy.internal:3128" }, { name: "LOG_LEVEL", value: "debug" }]));
    const opts = proxyCommand().exitOverride().parse(c.args, { from: "user" }).opts();
    expect(opts["kubeApiTimeoutSeconds"]).toBe(1.5);
    expectValid(list);
    expect(podSpec(render("--set", "hostNetwork=true", "--set", "dnsPolicy=Default")).dnsPolicy).toBe("Default");
    expect(podSpec(render())).not.toHaveProperty("hostNetwork");
    expect(podSpec(render())).not.toHaveProperty("dnsPolicy");
    // the default log level reaches the container too
    expect(container(render()).env).toContainEqual({ name: "LOG_LEVEL", value: "info" });
  });

  it("fullnameOverride names every object of the release and what points at them", () => {
    const list = render("--set", "fullnameOverride=emb", "--set", "serviceMonitor.enabled=true", "--set-json", 'metricsReaders=["monitoring/prometheus-k8s"]');
    for (const kind of ["Deployment", "Service", "ServiceAccount", "ServiceMonitor"]) expect(find(list, kind).metadata.name).toBe("emb");
    expect(find(list, "ServiceAccount", "emb-metrics-scraper").metadata.namespace).toBe(NS);
    expect(find(list, "ConfigMap").metadata.name).toBe("emb-config");
    expect(find(list, "APIService").spec.service.name).toBe("emb");
    expect(find(list, "ValidatingWebhookConfiguration").webhooks[0].clientConfig.service.name).toBe("emb");
    expect(find(list, "ServiceMonitor").spec.endpoints[0].tlsConfig.serverName).toBe(`emb.${NS}.svc`);
    expect(podSpec(list).serviceAccountName).toBe("emb");
    const opts = proxyCommand().exitOverride().parse(container(list).args, { from: "user" }).opts();
    expect(opts["serviceName"]).toBe("emb");
    const bindings = list.filter((o) => o.kind === "ClusterRoleBinding" || o.kind === "RoleBinding");
    for (const b of bindings) for (const s of b.subjects.filter((x: { namespace: string }) => x.namespace === NS)) expect(s.name).toMatch(/^emb(-metrics-scraper)?$/);
    expectValid(list);
  });
});

describe("values.schema.json", () => {
  const schema = JSON.parse(readFileSync(join(CHART, "values.schema.json"), "utf8")) as Schema;
  interface Schema {
    type?: string | string[];
    properties?: Record<string, Schema>;
    additionalProperties?: boolean | Schema;
    anyOf?: Schema[];
  }

  it("describes every value of values.yaml (no key without a schema)", () => {
    const values = parse(readFileSync(join(CHART, "values.yaml"), "utf8")) as Record<string, unknown>;
    const missing: string[] = [];
    const walk = (v: unknown, s: Schema | undefined, path: string) => {
      if (s === undefined) return void missing.push(path);
      if (v === null || typeof v !== "object" || Array.isArray(v)) return;
      // a Kubernetes type passed through as it is (securityContext, affinity, …): the API server checks its keys
      if (s.properties === undefined && s.additionalProperties === undefined) return;
      for (const [k, child] of Object.entries(v)) {
        const sub = s.properties?.[k] ?? (typeof s.additionalProperties === "object" ? s.additionalProperties : undefined);
        walk(child, sub, `${path}.${k}`);
      }
    };
    walk(values, schema, "");
    expect(missing).toEqual([]);
    expect(schema.additionalProperties).toBe(false);
  });

  it.each([
    ["a misspelled value", ["--set", "replicaz=3"], "additional properties 'replicaz' not allowed"],
    ["an unknown log level", ["--set", "logLevel=loud"], "/logLevel"],
    ["a backend timeout over 4.5 s", ["--set", "backends.functions.timeoutSeconds=9"], "/backends/functions/timeoutSeconds"],
    ["a tls.mode the chart does not know", ["--set", "tls.mode=selfSigned"], "/tls/mode"],
    ["a metrics reader that is not namespace/name", ["--set-json", 'metricsReaders=["prometheus"]'], "/metricsReaders/0"],
    ["a policy limit that is not a positive integer", ["--set", "clusterPolicies.limits.maxNamespaceObjects=0"], "/clusterPolicies/limits/maxNamespaceObjects"],
    ["a misspelled policy limit", ["--set", "clusterPolicies.limits.maxNamespaceObject=5"], "additional properties 'maxNamespaceObject' not allowed"],
    ["a resync timeout of zero", ["--set", "clusterPolicies.resyncTimeoutSeconds=0"], "/clusterPolicies/resyncTimeoutSeconds"],
  ])("helm refuses %s", (_what, args, message) => {
    const error = renderError(...args);
    expect(error).toContain("values don't meet the specifications of the schema");
    expect(error).toContain(message);
  });
});

describe("clusterPolicies.limits and resyncTimeoutSeconds", () => {
  it("are absent from the rendered ProxyConfig by default and passed to it when set", () => {
    const configOf = (list: K8sObject[]) => loadProxyConfig(find(list, "ConfigMap").data["proxy.yaml"], "configmap");
    expect(configOf(render()).clusterPolicies).toEqual({ enabled: true, whenNoneApply: "Defer" });
    const list = render("--set", "clusterPolicies.limits.maxNamespaceObjects=200", "--set", "clusterPolicies.limits.maxSpecBytes=4194304", "--set", "clusterPolicies.resyncTimeoutSeconds=60");
    expect(configOf(list).clusterPolicies).toEqual({ enabled: true, whenNoneApply: "Defer", limits: { maxNamespaceObjects: 200, maxSpecBytes: 4194304 }, resyncTimeoutSeconds: 60 });
    expectValid(list);
  });
});

describe("the chart README", () => {
  it("documents every value, nested keys included (as `a.b.c`, or `.c` / `c` in the row of `a.b`)", () => {
    const readme = readFileSync(join(CHART, "README.md"), "utf8");
    const values = parse(readFileSync(join(CHART, "values.yaml"), "utf8")) as Record<string, unknown>;
    const schema = JSON.parse(readFileSync(join(CHART, "values.schema.json"), "utf8")) as { properties?: Record<string, unknown> };
    const undocumented: string[] = [];
    const walk = (v: unknown, s: { properties?: Record<string, unknown> } | undefined, path: string[]) => {
      const last = path.at(-1);
      if (last !== undefined && ![`\`${path.join(".")}`, `\`.${last}`, `.${last}\``, `\`${last}\``].some((form) => readme.includes(form))) undocumented.push(path.join("."));
      // the chart's own objects (schema properties listed); Kubernetes types (resources, securityContext, …) are documented as a whole
      if (path[0] === "resources" || v === null || typeof v !== "object" || Array.isArray(v) || s?.properties === undefined) return;
      for (const [k, child] of Object.entries(v)) walk(child, s.properties[k] as typeof s, [...path, k]);
    };
    walk(values, schema, []);
    expect(undocumented).toEqual([]);
  });
});

describe("infra/examples/keda-coexistence-values.yaml", () => {
  let list: K8sObject[];
  beforeAll(() => {
    list = render("--values", KEDA_VALUES);
  });

  it("lints strictly and renders valid objects", () => {
    const lint = helmLint([KEDA_VALUES]);
    expect(lint.ok, lint.output).toBe(true);
    expectValid(list);
  });

  it("renders no APIService (KEDA's release owns it) and lets the proxy take it over", () => {
    expect(list.some((o) => o.kind === "APIService")).toBe(false);
    const opts = proxyCommand().exitOverride().parse(container(list).args, { from: "user" }).opts();
    expect(opts["register"]).toBe(true);
    expect(list.some((o) => o.metadata.name.endsWith(":apiservice-registrar"))).toBe(true);
  });

  it("forwards unrouted metrics to KEDA, trusting ca.crt of KEDA's Secret kedaorg-certs (not OpenShift's service-ca.crt)", () => {
    const config = loadProxyConfig(find(list, "ConfigMap").data["proxy.yaml"], "configmap");
    expect(config.passthrough).toBe("keda");
    const keda = config.backends.find((b) => b.name === "keda")!;
    expect(keda).toMatchObject({ type: "passthrough", url: "https://keda-operator-metrics-apiserver.keda.svc:443", caFile: "/etc/keda-certs/ca.crt" });
    const c = container(list);
    const mount = c.volumeMounts.find((m: { mountPath: string }) => keda.caFile!.startsWith(`${m.mountPath}/`));
    expect(mount, "a mount holding the caFile").toBeDefined();
    const volume = podSpec(list).volumes.find((v: { name: string }) => v.name === mount.name);
    expect(volume.secret).toEqual({ secretName: "kedaorg-certs", items: [{ key: "ca.crt", path: "ca.crt" }] });
    // The proxy's own token authenticates it to KEDA, which authorizes it by RBAC: the chart binds it.
    expect(find(list, "ClusterRoleBinding", "external-metrics-bridge-proxy:external-metrics-reader").subjects).toContainEqual({
      kind: "ServiceAccount",
      name: "external-metrics-bridge-proxy",
      namespace: NS,
    });
  });
});
