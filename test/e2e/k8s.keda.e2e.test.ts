/**
 * Installing next to KEDA, end to end on a real control plane
 * (test/k8s/cluster.ts: etcd, kube-apiserver v1.37, kube-controller-manager
 * built from the Go modules) with the repository's pinned helm
 * (infra/tools/validate.ts):
 *
 *  0. (Chart, tls.mode existing without self-registration) a render against
 *     the cluster takes the APIService's caBundle from the existing Secret.
 *  1. A stand-in for KEDA's metrics server (an HTTPS server answering the
 *     External Metrics API as KEDA's does: one `externalmetrics` resource in
 *     discovery, ExternalMetricValueLists for its `s<N>-…` metrics) owns
 *     APIService v1beta1.external.metrics.k8s.io first, installed by
 *     `helm install keda` from a chart rendering it exactly as KEDA's chart
 *     does (kedacore/charts keda/templates/metrics-server/apiservice.yaml:
 *     same name, labels, service, port, priorities; Helm's own ownership
 *     label and annotations), with caBundle patched from its Secret
 *     `kedaorg-certs` as KEDA's operator does.
 *  2. Our chart with default values: `helm install` fails with Helm's
 *     ownership conflict on the APIService (what users hit today).
 *  3. The documented path (docs/proxy.md, "Next to KEDA";
 *     infra/examples/keda-coexistence-values.yaml): `helm install` succeeds,
 *     the proxy (run with the installed Deployment's arguments and
 *     ConfigMap) takes the APIService over, and through the aggregator both
 *     KEDA's metric (forwarded to KEDA, verified with KEDA's CA from
 *     kedaorg-certs) and a bridge metric read.
 *  4. A KEDA `helm upgrade`: what it does to the APIService, and the proxy
 *     taking it back.
 *  5. `helm uninstall keda` deletes the APIService; the proxy recreates it.
 *  6. The chart's ServiceMonitor and /metrics RBAC: scraping as the
 *     ServiceMonitor says (its CA Secret, server name, the ServiceAccount
 *     token of its authorization credentials Secret), Prometheus's bound ServiceAccount reads /metrics through the
 *     proxy's TokenReview + SubjectAccessReview; another ServiceAccount
 *     gets 403.
 *
 * Everything listens on 127.0.0.1; Services are ExternalName Services naming
 * 127.0.0.1 (test/k8s/shipped.ts), so the aggregator dials the local
 * processes on the APIService's port.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { TLSSocket } from "node:tls";
import { fileURLToPath } from "node:url";
import { parse, stringify } from "yaml";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { buildControlPlane, freePorts, logTails, startControlPlane, startProcess, waitFor, type ControlPlane, type LoggedProcess } from "../k8s/cluster.ts";
import { createCA } from "../k8s/pki.ts";
import { API_SERVICE, e2eBridgeConfig, localProxyFlags, startBridgeProcess, waitForAPIServiceAvailable, withFlags } from "../k8s/shipped.ts";
import { ensureTool } from "../../infra/tools/validate.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const CHART = join(ROOT, "infra/helm/external-metrics-bridge");
const KEDA_VALUES = join(ROOT, "infra/examples/keda-coexistence-values.yaml");
const NS = "keda";
const PROXY = "external-metrics-bridge-proxy";
const KEDA_SERVICE = "keda-operator-metrics-apiserver";
const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const KEDA_METRIC = "s0-rabbitmq-orders";
const OUR_METRIC = "queue_messages_ready";
const QUEUE_DEPTH = 5;
const KEDA_VALUE = "7";

/** prometheus-operator's ServiceMonitor kind (group, names, scope as upstream), without its schema. */
const SERVICE_MONITOR_CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "servicemonitors.monitoring.coreos.com" },
  spec: {
    group: "monitoring.coreos.com",
    scope: "Namespaced",
    names: { kind: "ServiceMonitor", listKind: "ServiceMonitorList", plural: "servicemonitors", singular: "servicemonitor", shortNames: ["smon"] },
    versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } }],
  },
};

let cp: ControlPlane | undefined;
let emulator: Emulator | undefined;
let keda: Server | undefined;
let work = "";
let proxyPort = 0;
let kedaPort = 0;
const processes: LoggedProcess[] = [];
/** requests the stand-in KEDA received: path, whether a bearer token / a client certificate came with it */
const kedaRequests: { path: string; bearer: boolean; clientCert: boolean }[] = [];

function context(lines = 60): string {
  return `${cp?.logs(lines) ?? ""}\n${logTails(processes, lines)}`;
}

/** Print a command's output for the record (docs/proxy.md quotes these). */
function show(what: string, text: string): void {
  console.log(`----- ${what}\n${text.trimEnd()}`);
}

/** Run the pinned helm against the test cluster (admin kubeconfig), state in the work directory. */
async function helm(args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      ensureTool("helm"),
      args,
      {
        encoding: "utf8",
        timeout: 120_000,
        env: {
          PATH: process.env["PATH"] ?? "",
          HOME: work,
          KUBECONFIG: cp!.adminKubeconfig,
          HELM_CACHE_HOME: join(work, "helm/cache"),
          HELM_CONFIG_HOME: join(work, "helm/config"),
          HELM_DATA_HOME: join(work, "helm/data"),
        },
      },
      (err, stdout, stderr) => resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function helmOk(args: string[]): Promise<string> {
  const r = await helm(args);
  if (r.status !== 0) throw new Error(`helm ${args.join(" ")} failed (${r.status}):\n${r.stderr}${r.stdout}\n${context()}`);
  return r.stdout;
}

/**
 * A chart standing in for KEDA's: the APIService exactly as
 * kedacore/charts keda/templates/metrics-server/apiservice.yaml renders it
 * (port: the stand-in's local port instead of 443), and KEDA's metrics
 * server Service as an ExternalName Service naming 127.0.0.1.
 */
function writeKedaChart(version: string): string {
  const dir = join(work, `keda-chart-${version}`);
  mkdirSync(join(dir, "templates"), { recursive: true });
  writeFileSync(join(dir, "Chart.yaml"), stringify({ apiVersion: "v2", name: "keda", version, appVersion: version }));
  const labels = {
    "app.kubernetes.io/name": "v1beta1.external.metrics.k8s.io",
    "app.kubernetes.io/part-of": "keda-operator",
    "app.kubernetes.io/version": version,
    "app.kubernetes.io/managed-by": "Helm",
    "helm.sh/chart": `keda-${version}`,
  };
  writeFileSync(
    join(dir, "templates/apiservice.yaml"),
    stringify({
      apiVersion: "apiregistration.k8s.io/v1",
      kind: "APIService",
      metadata: { labels, name: API_SERVICE },
      spec: {
        service: { name: KEDA_SERVICE, namespace: NS, port: kedaPort },
        group: "external.metrics.k8s.io",
        version: "v1beta1",
        groupPriorityMinimum: 100,
        versionPriority: 100,
      },
    }),
  );
  writeFileSync(
    join(dir, "templates/service.yaml"),
    stringify({ apiVersion: "v1", kind: "Service", metadata: { name: KEDA_SERVICE, namespace: NS }, spec: { type: "ExternalName", externalName: "127.0.0.1" } }),
  );
  return dir;
}

/** The stand-in for KEDA's metrics server: HTTPS with KEDA's serving certificate, the External Metrics API as KEDA answers it. */
async function startKeda(tls: { cert: string; key: string }, port: number): Promise<Server> {
  const server = createServer({ ...tls, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const url = new URL(req.url ?? "/", "https://keda");
    const socket = req.socket as TLSSocket;
    kedaRequests.push({ path: url.pathname, bearer: /^Bearer \S+/.test(req.headers.authorization ?? ""), clientCert: socket.getPeerCertificate()?.subject !== undefined });
    const json = (code: number, body: object) => {
      res.writeHead(code, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (url.pathname === V1) {
      // KEDA lists one generic resource; its metric names are not in discovery.
      return json(200, {
        kind: "APIResourceList",
        apiVersion: "v1",
        groupVersion: "external.metrics.k8s.io/v1beta1",
        resources: [{ name: "externalmetrics", singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] }],
      });
    }
    const m = /^\/apis\/external\.metrics\.k8s\.io\/v1beta1\/namespaces\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    if (m && m[2] === KEDA_METRIC) {
      return json(200, {
        kind: "ExternalMetricValueList",
        apiVersion: "external.metrics.k8s.io/v1beta1",
        metadata: {},
        items: [{ metricName: KEDA_METRIC, metricLabels: null, timestamp: new Date().toISOString(), value: KEDA_VALUE }],
      });
    }
    return json(404, { kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404, message: `no metric ${m?.[2] ?? url.pathname}` });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return server;
}

interface APIServiceObject {
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: { service: { namespace: string; name: string; port: number }; caBundle?: string };
}
async function apiService(): Promise<APIServiceObject> {
  return JSON.parse(await cp!.kubectlOk(["get", "apiservice", API_SERVICE, "-o", "json"])) as APIServiceObject;
}

/** `kubectl get --raw` of a values read as admin: the first item's value. */
async function readValue(ns: string, metric: string, selector: string): Promise<string | undefined> {
  const out = await cp!.kubectlOk(["get", "--raw", `${V1}/namespaces/${ns}/${metric}?labelSelector=${encodeURIComponent(selector)}`]);
  return (JSON.parse(out) as { items: { value: string }[] }).items[0]?.value;
}

/** GET https://127.0.0.1:<proxyPort>/metrics as Prometheus would: the given CA and server name, a bearer token. */
async function scrape(ca: string, serverName: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port: proxyPort, path: "/metrics", method: "GET", ca, servername: serverName, headers: { Authorization: `Bearer ${token}` }, timeout: 10_000 },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("real Kubernetes: installing next to KEDA, and scraping /metrics as the chart's ServiceMonitor says", () => {
  let kedaCaPem = "";

  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    ensureTool("helm");
    cp = await startControlPlane({ binDir, log: (l) => console.log(l) });
    work = mkdtempSync(join(tmpdir(), "emb-k8s-keda-"));
    [proxyPort, kedaPort] = (await freePorts(2)) as [number, number];
    emulator = await startEmulator();
    await emulator.createQueue("orders");
    await emulator.add("orders", QUEUE_DEPTH);

    // --- KEDA as its operator leaves it: namespace, its certificates in kedaorg-certs, the metrics server ---
    const kedaCa = await createCA("keda-ca");
    kedaCaPem = kedaCa.cert;
    const kedaTls = await kedaCa.issue(`${KEDA_SERVICE}.${NS}.svc`, ["server"], {
      dns: [KEDA_SERVICE, `${KEDA_SERVICE}.${NS}`, `${KEDA_SERVICE}.${NS}.svc`, `${KEDA_SERVICE}.${NS}.svc.cluster.local`],
    });
    keda = await startKeda(kedaTls, kedaPort);
    await cp.kubectlOk(["create", "namespace", NS]);
    const caFile = join(work, "keda-ca.crt");
    writeFileSync(caFile, kedaCa.cert);
    writeFileSync(join(work, "keda-tls.crt"), kedaTls.cert);
    writeFileSync(join(work, "keda-tls.key"), kedaTls.key);
    // prometheus-operator's ServiceMonitor kind, as a schemaless stand-in CRD (its real schema is not available offline)
    await cp.kubectlOk(["apply", "-f", "-"], { input: stringify(SERVICE_MONITOR_CRD) });
    await cp.kubectlOk(["wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com"]);
    await cp.kubectlOk(["-n", NS, "create", "secret", "generic", "kedaorg-certs", `--from-file=ca.crt=${caFile}`, `--from-file=tls.crt=${join(work, "keda-tls.crt")}`, `--from-file=tls.key=${join(work, "keda-tls.key")}`]);
  }, 50 * 60_000);

  afterEach(({ task }) => {
    if (task.result?.state === "fail") console.error(`component logs after the failure of "${task.name}":\n${context(80)}`);
  });

  afterAll(async () => {
    for (const p of [...processes].reverse()) await p.stop(5_000);
    await new Promise((resolve) => (keda ? keda.close(resolve) : resolve(undefined)));
    await emulator?.stop();
    await cp?.stop();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("tls.mode existing without self-registration: a render against the cluster (helm --dry-run=server) takes caBundle from ca.crt of the existing Secret", async () => {
    const ns = "emb-existing";
    const ca = await createCA("existing-ca");
    const leaf = await ca.issue(`${PROXY}.${ns}.svc`, ["server"], { dns: [`${PROXY}.${ns}.svc`] });
    await cp!.kubectlOk(["create", "namespace", ns]);
    const files = { "ca.crt": ca.cert, "tls.crt": leaf.cert, "tls.key": leaf.key };
    for (const [name, pem] of Object.entries(files)) writeFileSync(join(work, `existing-${name}`), pem);
    await cp!.kubectlOk(["-n", ns, "create", "secret", "generic", "external-metrics-bridge-proxy-tls", "--type=kubernetes.io/tls", ...Object.keys(files).map((k) => `--from-file=${k}=${join(work, `existing-${k}`)}`)]);
    const rendered = await helmOk(["template", "emb", CHART, "-n", ns, "--dry-run=server", "--set", "tls.mode=existing", "--set", "registration.selfRegister=false"]);
    const docs = rendered.split(/^---$/m).map((d) => parse(d) as { kind?: string; spec?: { caBundle?: string }; webhooks?: { clientConfig: { caBundle?: string } }[] } | null);
    const b64 = Buffer.from(ca.cert).toString("base64");
    expect(docs.find((d) => d?.kind === "APIService")?.spec?.caBundle).toBe(b64);
    expect(docs.find((d) => d?.kind === "ValidatingWebhookConfiguration")?.webhooks?.map((w) => w.clientConfig.caBundle)).toEqual([b64, b64]);
  }, 60_000);

  it("KEDA's release owns the APIService first (helm install keda; the operator patches caBundle) and serves its metric through the aggregator", async () => {
    await helmOk(["install", "keda", writeKedaChart("2.20.2"), "-n", NS]);
    // KEDA's operator injects its CA (certificates.operator.apiServicePatching, on by default).
    await cp!.kubectlOk(["patch", "apiservice", API_SERVICE, "--type=merge", "-p", JSON.stringify({ spec: { caBundle: Buffer.from(kedaCaPem).toString("base64") } })]);
    await waitForAPIServiceAvailable(cp!, [], { timeoutMs: 60_000, context });
    const owned = await apiService();
    expect(owned.metadata.annotations).toMatchObject({ "meta.helm.sh/release-name": "keda", "meta.helm.sh/release-namespace": NS });
    expect(owned.metadata.labels).toMatchObject({ "app.kubernetes.io/managed-by": "Helm" });
    expect(await readValue("default", KEDA_METRIC, "scaledobject.keda.sh/name=orders")).toBe(KEDA_VALUE);
  }, 120_000);

  it("our chart with default values does not install: Helm's ownership conflict on the APIService", async () => {
    await cp!.kubectlOk(["-n", NS, "create", "secret", "generic", "external-metrics-bridge-signing", `--from-literal=BRIDGE_SIGNING_KEYS=e2e:${randomBytes(32).toString("base64")}`]);
    const r = await helm(["install", "emb-defaults", CHART, "-n", NS]);
    show("helm install with registration.render=true next to KEDA", r.stderr);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`APIService "${API_SERVICE}"`);
    expect(r.stderr).toMatch(/cannot be imported into the current release: invalid ownership metadata/);
    expect(r.stderr).toContain(`annotation validation error: key "meta.helm.sh/release-name" must equal "emb-defaults": current value is "keda"`);
    // nothing of ours was created, and KEDA still serves
    expect((await cp!.kubectl(["-n", NS, "get", "deployment", PROXY])).status).not.toBe(0);
    expect((await apiService()).spec.service.name).toBe(KEDA_SERVICE);
  }, 120_000);

  it("the documented path installs, the proxy takes the APIService over, and KEDA's metric and ours read through the aggregator", async () => {
    // The steps of docs/proxy.md "Next to KEDA" (the signing Secret exists already).
    const installed = await helmOk([
      "install", "external-metrics-bridge", CHART, "-n", NS, "-f", KEDA_VALUES,
      "--set", "serviceMonitor.enabled=true", "--set-json", 'metricsReaders=["monitoring/prometheus-k8s"]',
      // Prometheus's token from a Secret of this namespace (the chart's own scraper token needs the token controller, which this control plane does not run)
      "--set", "serviceMonitor.credentials.secretName=prometheus-k8s-token",
    ]);
    show("helm install -f infra/examples/keda-coexistence-values.yaml", installed);
    // KEDA's object is untouched by the install (registration.render: false)
    expect((await apiService()).spec.service.name).toBe(KEDA_SERVICE);

    // --- run the proxy as the installed Deployment would, against local processes ---
    const deployment = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "deployment", PROXY, "-o", "json"])) as {
      spec: { template: { spec: { containers: { name: string; args: string[] }[] } } };
    };
    const args = deployment.spec.template.spec.containers.find((c) => c.name === "proxy")!.args;
    const cm = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "configmap", `${PROXY}-config`, "-o", "json"])) as { data: Record<string, string> };
    const config = parse(cm.data["proxy.yaml"]!) as { backends: Record<string, Record<string, unknown>>; passthrough?: string };
    expect(config.passthrough).toBe("keda");
    // KEDA's CA as the pod's volume holds it: ca.crt of kedaorg-certs.
    const secret = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "secret", "kedaorg-certs", "-o", "json"])) as { data: Record<string, string> };
    const kedaCaFile = join(work, "mounted-keda-ca.crt");
    writeFileSync(kedaCaFile, Buffer.from(secret.data["ca.crt"]!, "base64"));
    const token = (await cp!.kubectlOk(["-n", NS, "create", "token", PROXY, "--duration=2h"])).trim();
    const tokenFile = join(work, "proxy-token");
    writeFileSync(tokenFile, token);
    const signing = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "secret", "external-metrics-bridge-signing", "-o", "json"])) as { data: Record<string, string> };
    const signingKeys = Buffer.from(signing.data["BRIDGE_SIGNING_KEYS"]!, "base64").toString();
    const [bridgePort] = (await freePorts(1)) as [number];
    const bridgeConfig = join(work, "bridge.yaml");
    writeFileSync(bridgeConfig, stringify({ ...e2eBridgeConfig(emulator!.endpoint, [{ name: OUR_METRIC, attribute: "ApproximateNumberOfMessages" }]), policy: { defaultAction: "Allow" } }));
    const env = { ...process.env, BRIDGE_SIGNING_KEYS: signingKeys };
    processes.push(await startBridgeProcess({ config: bridgeConfig, port: bridgePort, env, logFile: join(work, "bridge.log"), context }));
    const localConfig = join(work, "proxy.yaml");
    writeFileSync(
      localConfig,
      stringify({
        ...config,
        backends: {
          functions: { ...config.backends["functions"], url: `http://127.0.0.1:${bridgePort}` },
          // same backend, dialled locally: KEDA's certificate names keda-operator-metrics-apiserver.keda.svc
          keda: { ...config.backends["keda"], url: `https://127.0.0.1:${kedaPort}`, serverName: `${KEDA_SERVICE}.${NS}.svc`, caFile: kedaCaFile, bearerTokenFile: tokenFile },
        },
      }),
    );
    // The proxy's Service as ExternalName 127.0.0.1 (no pod network here).
    await cp!.kubectlOk(["-n", NS, "delete", "service", PROXY]);
    await cp!.kubectlOk(["apply", "-f", "-"], { input: stringify({ apiVersion: "v1", kind: "Service", metadata: { name: PROXY, namespace: NS }, spec: { type: "ExternalName", externalName: "127.0.0.1" } }) });
    const proxy = startProcess(
      "proxy",
      process.execPath,
      [
        join(ROOT, "functions/proxy/main.ts"),
        ...withFlags(args, {
          "--config": localConfig,
          ...localProxyFlags(cp!.tokenKubeconfig("proxy", token), proxyPort),
        }),
      ],
      { logFile: join(work, "proxy.log"), env: { ...env, POD_NAMESPACE: NS, POD_NAME: "proxy-0" } },
    );
    processes.push(proxy);

    // --- the takeover: spec.service and caBundle are the proxy's; KEDA's metadata stays ---
    const taken = await waitFor(
      "the proxy to take the APIService over",
      async () => {
        if (proxy.exitCode !== undefined) throw new Error(`proxy exited with ${proxy.exitCode}`);
        const a = await apiService();
        return a.spec.service.name === PROXY ? a : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500, context },
    );
    await waitForAPIServiceAvailable(cp!, [proxy], { timeoutMs: 60_000, context });
    expect(taken.spec.service).toEqual({ namespace: NS, name: PROXY, port: proxyPort });
    expect(Buffer.from(taken.spec.caBundle ?? "", "base64").toString()).not.toContain(kedaCaPem.trim().split("\n")[1]);
    expect(taken.metadata.annotations).toMatchObject({ "meta.helm.sh/release-name": "keda" });
    show("APIService after the takeover (metadata, spec.service)", stringify({ labels: taken.metadata.labels, annotations: taken.metadata.annotations, service: taken.spec.service }));

    // --- reads through the aggregator: KEDA's metric (passthrough, KEDA's CA, the proxy's token) and ours (signed, the bridge) ---
    const before = kedaRequests.length;
    expect(await readValue("default", KEDA_METRIC, "scaledobject.keda.sh/name=orders")).toBe(KEDA_VALUE);
    const forwarded = kedaRequests.slice(before).filter((r) => r.path.endsWith(`/${KEDA_METRIC}`));
    expect(forwarded.length).toBeGreaterThanOrEqual(1);
    expect(forwarded.every((r) => r.bearer)).toBe(true); // the proxy's ServiceAccount token, not the aggregator's client certificate
    expect(await readValue("default", OUR_METRIC, "queue=orders")).toBe(String(QUEUE_DEPTH));
    const discovery = JSON.parse(await cp!.kubectlOk(["get", "--raw", V1])) as { resources: { name: string }[] };
    expect(discovery.resources.map((r) => r.name)).toEqual(expect.arrayContaining(["externalmetrics", OUR_METRIC]));
  }, 240_000);

  it("KEDA's helm upgrade (Helm 4, server-side apply): refused by a field conflict; --server-side=false upgrades and leaves the APIService ours; --force-conflicts hands it back to KEDA until the proxy re-asserts it (within a minute)", async () => {
    // 1. The default: KEDA's release was installed with server-side apply, so its upgrade applies the
    //    APIService again and conflicts with the proxy's field manager on spec.service. Nothing changes.
    const ssa = await helm(["upgrade", "keda", writeKedaChart("2.20.3"), "-n", NS]);
    show(`helm upgrade keda (exit ${ssa.status})`, ssa.stderr);
    expect(ssa.status).not.toBe(0);
    expect(ssa.stderr).toContain('conflicts with "external-metrics-bridge-proxy"');
    expect(ssa.stderr).toContain(".spec.service.name");
    expect((await apiService()).spec.service.name).toBe(PROXY);

    // 2. The documented upgrade: client-side apply patches only what changed between KEDA's chart
    //    versions (its labels here); spec.service stays the proxy's, nothing to take back.
    const csa = await helm(["upgrade", "keda", writeKedaChart("2.20.4"), "-n", NS, "--server-side=false"]);
    show(`helm upgrade keda --server-side=false (exit ${csa.status})`, csa.stderr + csa.stdout);
    expect(csa.status, csa.stderr).toBe(0);
    const kept = await apiService();
    expect(kept.spec.service.name).toBe(PROXY);
    expect(kept.metadata.labels).toMatchObject({ "helm.sh/chart": "keda-2.20.4" });
    await waitForAPIServiceAvailable(cp!, processes, { timeoutMs: 10_000, context });
    expect(await readValue("default", KEDA_METRIC, "scaledobject.keda.sh/name=orders")).toBe(KEDA_VALUE);

    // 3. --force-conflicts: KEDA's spec.service comes back (with the proxy's caBundle, which KEDA's
    //    certificate does not match) until the proxy's once-a-minute re-assertion takes it back.
    const forced = await helm(["upgrade", "keda", writeKedaChart("2.20.5"), "-n", NS, "--server-side=true", "--force-conflicts"]);
    expect(forced.status, forced.stderr).toBe(0);
    const t0 = Date.now();
    expect((await apiService()).spec.service.name).toBe(KEDA_SERVICE);
    const broken = await waitFor(
      "the aggregator to see the reverted APIService",
      async () => {
        const a = await apiService();
        const c = (a as { status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] } }).status?.conditions?.find((x) => x.type === "Available");
        return a.spec.service.name === KEDA_SERVICE && c?.status === "False" ? c : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, context },
    );
    show("APIService Available condition while reverted", JSON.stringify(broken));
    expect(broken.reason).toBe("FailedDiscoveryCheck");
    expect(broken.message).toContain("x509: certificate signed by unknown authority");
    await waitFor("the proxy to take the APIService back", async () => ((await apiService()).spec.service.name === PROXY ? true : undefined), {
      timeoutMs: 90_000,
      intervalMs: 1000,
      context,
    });
    console.log(`APIService pointed at KEDA's Service for ${Date.now() - t0} ms after helm upgrade --force-conflicts`);
    await waitForAPIServiceAvailable(cp!, processes, { timeoutMs: 30_000, context });
    expect(await readValue("default", KEDA_METRIC, "scaledobject.keda.sh/name=orders")).toBe(KEDA_VALUE);
  }, 240_000);

  it("the chart's ServiceMonitor scrape: Prometheus's bound ServiceAccount reads /metrics through TokenReview + SubjectAccessReview; another gets 403", async () => {
    // What the installed ServiceMonitor tells Prometheus (a stand-in CRD stores it: prometheus-operator's schema is not available offline).
    const sm = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "servicemonitors.monitoring.coreos.com", PROXY, "-o", "json"])) as {
      spec: { endpoints: { scheme: string; path: string; authorization: { type: string; credentials: { name: string; key: string } }; tlsConfig: { ca: { secret: { name: string; key: string } }; serverName: string } }[] };
    };
    const ep = sm.spec.endpoints[0]!;
    expect(ep).toMatchObject({ scheme: "https", path: "/metrics", authorization: { type: "Bearer", credentials: { name: "prometheus-k8s-token", key: "token" } } });
    const tlsSecret = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "secret", ep.tlsConfig.ca.secret.name, "-o", "json"])) as { data: Record<string, string> };
    const ca = Buffer.from(tlsSecret.data[ep.tlsConfig.ca.secret.key]!, "base64").toString();
    await cp!.kubectlOk(["create", "namespace", "monitoring"]);
    await cp!.kubectlOk(["-n", "monitoring", "create", "serviceaccount", "prometheus-k8s"]);
    await cp!.kubectlOk(["-n", "monitoring", "create", "serviceaccount", "not-prometheus"]);
    // the Secret the ServiceMonitor's authorization names, holding Prometheus's token; the scrape sends what it holds
    const issued = (await cp!.kubectlOk(["-n", "monitoring", "create", "token", "prometheus-k8s"])).trim();
    const { name: credName, key: credKey } = ep.authorization.credentials;
    await cp!.kubectlOk(["-n", NS, "create", "secret", "generic", credName, `--from-literal=${credKey}=${issued}`]);
    const credSecret = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "secret", credName, "-o", "json"])) as { data: Record<string, string> };
    const prometheus = Buffer.from(credSecret.data[credKey]!, "base64").toString();
    const other = (await cp!.kubectlOk(["-n", "monitoring", "create", "token", "not-prometheus"])).trim();
    const ok = await scrape(ca, ep.tlsConfig.serverName, prometheus);
    expect(ok.status, ok.body.slice(0, 500)).toBe(200);
    expect(ok.body).toMatch(/^emb_proxy_requests_total\{/m);
    const denied = await scrape(ca, ep.tlsConfig.serverName, other);
    expect(denied.status).toBe(403);
    const status = JSON.parse(denied.body) as { kind: string; code: number; message: string };
    expect(status).toMatchObject({ kind: "Status", code: 403 });
    show("GET /metrics as monitoring/not-prometheus", status.message);
    expect(status.message).toContain("system:serviceaccount:monitoring:not-prometheus");
  }, 120_000);

  it("uninstalling KEDA's release deletes the APIService (it is in KEDA's release manifest); the proxy creates it again within a minute", async () => {
    await helmOk(["uninstall", "keda", "-n", NS]);
    const t0 = Date.now();
    const gone = await cp!.kubectl(["get", "apiservice", API_SERVICE]);
    show("kubectl get apiservice right after helm uninstall keda", gone.stderr + gone.stdout);
    await waitFor("the proxy to create the APIService again", async () => ((await cp!.kubectl(["get", "apiservice", API_SERVICE])).status === 0 ? true : undefined), {
      timeoutMs: 90_000,
      intervalMs: 1000,
      context,
    });
    console.log(`APIService recreated ${Date.now() - t0} ms after helm uninstall keda`);
    const recreated = await apiService();
    expect(recreated.spec.service.name).toBe(PROXY);
    await waitForAPIServiceAvailable(cp!, processes, { timeoutMs: 30_000, context });
    // our metric still reads; KEDA's Service is gone with its release, so its metric no longer does
    expect(await readValue("default", OUR_METRIC, "queue=orders")).toBe(String(QUEUE_DEPTH));
  }, 150_000);
});
