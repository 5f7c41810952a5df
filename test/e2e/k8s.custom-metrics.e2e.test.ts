/**
 * custom.metrics.k8s.io end to end on a real control plane (issue 26): the
 * HPA controller of a real kube-controller-manager reads Pods and Object
 * metrics through kube-apiserver's aggregation layer (APIServices
 * `v1beta2.custom.metrics.k8s.io` and `v1beta1.custom.metrics.k8s.io`,
 * registered by the shipped proxy with `customMetrics.enabled`), the proxy
 * (SubjectAccessReview, the pods matching the target's selector from its pod
 * informer, the described object read with its own RBAC, a signed POST) and
 * the bridge (`describes:` rules, ExternalMetricPolicy rules with
 * `resources:`), from a real Prometheus and the SQS emulator:
 *
 *   HPA controller ─► kube-apiserver (aggregator) ─► proxy ─► bridge ─┬─► Prometheus ─scrape─► exporter (a series per pod, one per namespace)
 *                                                                    └─► fauxqs (the queue an ACK `Queue`'s status.queueURL names)
 *
 * No kubelet runs: test/k8s/kubelet.ts writes each pod's Running and Ready
 * status (the HPA ignores Pending pods for a Pods metric and counts Ready
 * pods for an Object `Value` target), and the exporter exports a load
 * shared by the Ready pods of a Deployment (`load / pods` each), so a Pods
 * `AverageValue` HPA settles at `ceil(load / target)`.
 *
 * The HPAs (autoscaling/v2), each scaling up and down on its series:
 * - `web`: Pods `http_requests`, AverageValue (Prometheus, per pod);
 * - `orders`: Object `queue_backlog` of Queue `orders`, Value (SQS);
 * - `emails`: Object `queue_backlog` of Queue `emails`, AverageValue (SQS);
 * - `reports`: Object `jobs_backlog` of the Namespace (the `metrics`
 *   pseudo-resource), AverageValue (Prometheus);
 * - `legacy/reports`: the same in a namespace whose policy has no
 *   `resources:` (External only), refused: a custom read needs a rule naming
 *   its resource.
 * With Prometheus stopped, then fauxqs, each HPA holds its replicas for
 * three sync periods (ScalingActive=False), never acting on a 0.
 *
 * One control plane for the file; `EMB_K8S_VERSION=v1.30` (vitest project
 * `e2e-floor`) runs it on the oldest minor the chart claims.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GetQueueAttributesCommand } from "@aws-sdk/client-sqs";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { PROMETHEUS_BUILD_TIMEOUT_MS, prometheusBinary, startExporter, startPrometheus, type ExportedSample, type Exporter, type PrometheusServer, type VectorSample } from "../helpers/prometheus.ts";
import { QUEUE_GROUP, QUEUE_RESOURCE, QUEUE_VERSION, queueCrd, queueObject, setQueueStatus } from "../k8s/ack-queue.ts";
import { buildControlPlane, k8sModule, logTails, startControlPlane, waitFor, type ControlPlane, type LoggedProcess } from "../k8s/cluster.ts";
import { condition, workloadProbe, type Hpa, type WorkloadProbe } from "../k8s/hpa.ts";
import { HPA_CONTROLLER, impersonatingClient, type ImpersonatingClient, type RawAnswer } from "../k8s/impersonate.ts";
import { startKubelet, type Kubelet } from "../k8s/kubelet.ts";
import { placeholderDeployment, startBridgeBehindShippedProxy } from "../k8s/shipped.ts";

const GROUP = "custom.metrics.k8s.io";
const API_SERVICES = [`v1beta2.${GROUP}`, `v1beta1.${GROUP}`];
const NS = "shop";
/** a namespace whose ExternalMetricPolicy predates `resources:` (External only) */
const LEGACY_NS = "legacy";
/** Pods metric, from the per-pod series {@link POD_SERIES} */
const PODS_METRIC = "http_requests";
const POD_SERIES = "app_http_requests";
/** Object metric of Queue objects: the SQS queue's ApproximateNumberOfMessages */
const QUEUE_METRIC = "queue_backlog";
/** namespace metric, from the series {@link NS_SERIES} */
const NS_METRIC = "jobs_backlog";
const NS_SERIES = "app_jobs_backlog";
/** Object metric of a cluster-scoped object (a Node: the root-scoped path shape, read with kubectl; no HPA reads it), from {@link NODE_SERIES} */
const NODE_METRIC = "node_load";
const NODE_SERIES = "app_node_load";
const NODE = "node-a";
/** SQS queue names (fauxqs) of the two Queue objects `orders` and `emails` */
const SQS_QUEUES = { orders: "shop-orders", emails: "shop-emails" } as const;
/** bridge deadline (2 s) < proxy → bridge (4 s) < the aggregator's 5 s */
const BACKEND_TIMEOUT_SECONDS = 4;
/** `--horizontal-pod-autoscaler-sync-period` */
const HPA_SYNC_SECONDS = 2;
const TEST_TIMEOUT_MS = 240_000;
/** targets and bounds of each HPA */
const WEB = { target: 10, min: 1, max: 6 };
const ORDERS = { target: 5, min: 1, max: 4 };
const EMAILS = { target: 4, min: 1, max: 6 };
const REPORTS = { target: 3, min: 1, max: 6 };

/** `helm template` values of the install: custom metrics on, the proxy's RBAC to get Queue objects */
const CHART_ARGS = ["--set", "customMetrics.enabled=true", "--set-json", `customMetrics.objectResources=${JSON.stringify([QUEUE_RESOURCE, "nodes"])}`];

const K8S = k8sModule();

let cp: ControlPlane | undefined;
let prometheus: PrometheusServer | undefined;
let exporter: Exporter | undefined;
let emulator: Emulator | undefined;
let client: ImpersonatingClient | undefined;
let kubelet: Kubelet | undefined;
let work = "";
const processes: LoggedProcess[] = [];
const probes: Record<string, WorkloadProbe> = {};
/** the load each Deployment's Ready pods share (the per-pod series), by Deployment */
const loads = new Map<string, number>();
/** the namespace series' value by namespace */
const backlogs = new Map<string, number>();
/** the queue URLs fauxqs gave, by Queue object name */
const queueUrls: Record<string, string> = {};

function context(lines = 60): string {
  return [cp?.logs(lines) ?? "", logTails(processes, lines), prometheus?.logs(lines) ?? "", `kubelet stand-in: ${kubelet?.writes ?? 0} status writes, last error: ${kubelet?.lastError || "none"}`].join("\n");
}

const yamlDocs = (...docs: object[]) => docs.map((d) => stringify(d)).join("---\n");

/** RE2 text matching `s` literally. */
const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** What the exporter serves at each scrape: `load / pods` for each Ready pod of each loaded Deployment, and the namespaces' series. */
function samples(): ExportedSample[] {
  const out: ExportedSample[] = [];
  for (const [app, load] of loads) {
    const pods = kubelet?.readyPods(NS, { app }) ?? [];
    for (const pod of pods) out.push({ name: POD_SERIES, labels: { namespace: NS, pod }, value: load / pods.length });
  }
  for (const [namespace, value] of backlogs) out.push({ name: NS_SERIES, labels: { namespace }, value });
  out.push({ name: NODE_SERIES, labels: { node: NODE }, value: 0.25 });
  return out;
}

/** Set the depth of an SQS queue (ApproximateNumberOfMessages) to `depth`. */
async function setDepth(queue: keyof typeof SQS_QUEUES, depth: number): Promise<void> {
  const { ApproximateNumberOfMessages } = await queueAttributes(queue);
  const now = Number(ApproximateNumberOfMessages ?? 0);
  if (depth > now) await emulator!.add(SQS_QUEUES[queue], depth - now);
  else if (depth < now) await emulator!.drain(SQS_QUEUES[queue], now - depth);
  expect(Number((await queueAttributes(queue)).ApproximateNumberOfMessages)).toBe(depth);
}

async function queueAttributes(queue: keyof typeof SQS_QUEUES): Promise<Record<string, string>> {
  const out = await emulator!.client.send(new GetQueueAttributesCommand({ QueueUrl: queueUrls[queue], AttributeNames: ["ApproximateNumberOfMessages"] }));
  return out.Attributes ?? {};
}

/** The HPA `name` of namespace `ns` with one metric. */
function hpa(name: string, ns: string, bounds: { min: number; max: number }, metric: object): object {
  return {
    apiVersion: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    metadata: { name, namespace: ns },
    spec: {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
      minReplicas: bounds.min,
      maxReplicas: bounds.max,
      metrics: [metric],
      // scale up without the default 15 s rate limit; scale-down waits the 2 s stabilisation window
      behavior: { scaleUp: { stabilizationWindowSeconds: 0, policies: [{ type: "Pods", value: 100, periodSeconds: 1 }] } },
    },
  };
}

const queueRef = (name: string) => ({ apiVersion: `${QUEUE_GROUP}/${QUEUE_VERSION}`, kind: "Queue", name });
const namespaceRef = (name: string) => ({ apiVersion: "v1", kind: "Namespace", name });


/** The `reports` HPA of namespace `ns`: an Object metric describing the namespace itself (HPA client: `…/namespaces/{ns}/metrics/{metric}`). */
const reportsHpa = (ns: string) =>
  hpa("reports", ns, REPORTS, { type: "Object", object: { describedObject: namespaceRef(ns), metric: { name: NS_METRIC }, target: { type: "AverageValue", averageValue: String(REPORTS.target) } } });

const HPAS = {
  web: hpa("web", NS, WEB, { type: "Pods", pods: { metric: { name: PODS_METRIC }, target: { type: "AverageValue", averageValue: String(WEB.target) } } }),
  orders: hpa("orders", NS, ORDERS, { type: "Object", object: { describedObject: queueRef("orders"), metric: { name: QUEUE_METRIC }, target: { type: "Value", value: String(ORDERS.target) } } }),
  emails: hpa("emails", NS, EMAILS, { type: "Object", object: { describedObject: queueRef("emails"), metric: { name: QUEUE_METRIC }, target: { type: "AverageValue", averageValue: String(EMAILS.target) } } }),
  reports: reportsHpa(NS),
};

/** `ceil(value / target)` within the HPA's bounds: what an AverageValue target settles at (replica_calculator.go). */
const averageReplicas = (value: number, hpa: { target: number; min: number; max: number }) => Math.min(hpa.max, Math.max(hpa.min, Math.ceil(value / hpa.target)));

const path = (version: string, rest: string) => `/apis/${GROUP}/${version}/namespaces/${NS}/${rest}`;

/** A read through kube-apiserver as the HPA controller; the answer must be a MetricValueList. */
async function readAsHpa(p: string): Promise<{ apiVersion: string; kind: string; items: Record<string, unknown>[] }> {
  const r = await client!.get(p, HPA_CONTROLLER);
  expect(r.status, `GET ${p}: ${JSON.stringify(r.body)}`).toBe(200);
  return r.body as { apiVersion: string; kind: string; items: Record<string, unknown>[] };
}

/** A 403 metav1.Status. */
function expectForbiddenStatus(r: RawAnswer, what: string): { message: string } {
  expect(r.status, `${what}: ${JSON.stringify(r.body)}`).toBe(403);
  expect(r.body).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", code: 403, reason: "Forbidden" });
  return r.body as { message: string };
}

/** Wait until an HPA's ScalingActive is False with `reason`, recording the replicas seen meanwhile. */
async function scalingInactive(name: string, reason: string, seen: Set<number>, ns = NS) {
  return waitFor(
    `HPA ${ns}/${name} ScalingActive=False ${reason}`,
    async () => {
      seen.add(await probes[name]!.replicasOf(ns));
      const c = condition(await probes[name]!.hpaOf(ns), "ScalingActive");
      return c?.status === "False" && c.reason === reason ? c : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 1000, context },
  );
}

function describeConditions(h: Hpa): string {
  return (h.status.conditions ?? []).map((c) => `  ${c.type}=${c.status} ${c.reason ?? ""}: ${c.message ?? ""}`).join("\n");
}

describe(`real Kubernetes ${K8S.version}: HPAs on custom.metrics.k8s.io (Pods, Object, namespace metrics)`, () => {
  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    prometheusBinary(); // built once, cached (minutes when cold)
    cp = await startControlPlane({ binDir, hpaSyncPeriodSeconds: HPA_SYNC_SECONDS, downscaleStabilizationSeconds: 2, log: (l) => console.log(l) });
    for (const name of [...Object.keys(HPAS)]) probes[name] = workloadProbe(cp, context, name);
    work = mkdtempSync(join(tmpdir(), "emb-k8s-custom-e2e-"));
    client = await impersonatingClient(cp, "e2e-custom");
    kubelet = startKubelet(client, [NS, LEGACY_NS]);
    exporter = await startExporter();
    exporter.set(samples);
    prometheus = await startPrometheus({ targets: [exporter.target] });
    emulator = await startEmulator();
    queueUrls["orders"] = await emulator.createQueue(SQS_QUEUES.orders);
    queueUrls["emails"] = await emulator.createQueue(SQS_QUEUES.emails);
    const queueBase = new URL(queueUrls["orders"]).origin;

    const signingKeys = `e2e:${randomBytes(32).toString("base64")}`;
    const bridgeConfig = join(work, "bridge.yaml");
    writeFileSync(
      bridgeConfig,
      yamlDocs(
        {
          apiVersion: "external-metrics-bridge.io/v1alpha1",
          kind: "BridgeConfig",
          defaults: { maxAgeSeconds: 30, cacheTTLSeconds: 1 },
          providers: {
            prom: { type: "prometheus", url: prometheus.url, timeoutSeconds: 2 },
            sqs: { type: "aws-sqs", region: "us-east-1", endpoint: emulator.endpoint, credentials: { source: "static", accessKeyId: "e2e", secretAccessKey: "e2e" }, timeoutSeconds: 2 },
          },
          metrics: [
            {
              name: PODS_METRIC,
              provider: "prom",
              describes: { resource: "pods", objectLabel: "pod", namespaceLabel: "namespace" },
              query: { series: POD_SERIES, selectorLabels: { pod: "pod", namespace: "namespace" } },
            },
            {
              name: QUEUE_METRIC,
              provider: "sqs",
              describes: {
                resource: QUEUE_RESOURCE,
                objectLabel: "queue_url",
                identifier: { from: "status", path: "status.queueURL" },
                // only this account's shop- queues, whatever a Queue's status says
                allow: [`${literal(queueBase)}/[0-9]{12}/shop-.*`],
              },
              query: { queueLabel: "queue_url", queueIdentifier: "url", attribute: "ApproximateNumberOfMessages" },
            },
            {
              name: NS_METRIC,
              provider: "prom",
              describes: { resource: "namespaces", objectLabel: "namespace" },
              query: { series: NS_SERIES, selectorLabels: { namespace: "namespace" } },
            },
            {
              name: NODE_METRIC,
              provider: "prom",
              describes: { resource: "nodes", objectLabel: "node" },
              query: { series: NODE_SERIES, selectorLabels: { node: "node" } },
            },
          ],
          // no policy applies: Deny (a cluster's default)
          policy: { defaultAction: "Deny" },
        },
        {
          apiVersion: "external-metrics-bridge.io/v1alpha1",
          kind: "ExternalMetricPolicy",
          metadata: { name: "shop-autoscaling", namespace: NS },
          spec: {
            subjects: { serviceAccounts: ["kube-system/horizontal-pod-autoscaler"] },
            rules: [
              { metric: PODS_METRIC, resources: ["pods"], selector: {} },
              { metric: QUEUE_METRIC, resources: [QUEUE_RESOURCE], selector: {} },
              { metric: NS_METRIC, resources: ["namespaces"], selector: {} },
            ],
            defaultAction: "Deny",
          },
        },
        {
          // no namespace: cluster scope, the only policies that apply to a cluster-scoped object (contract C1). It
          // applies to the HPA controller's reads in every namespace too, and a custom read that a policy has no
          // rule for is denied whatever its defaultAction: so it names the namespaced reads as well (the namespace
          // policies narrow them)
          apiVersion: "external-metrics-bridge.io/v1alpha1",
          kind: "ExternalMetricPolicy",
          metadata: { name: "hpa-custom-metrics" },
          spec: {
            subjects: { serviceAccounts: ["kube-system/horizontal-pod-autoscaler"] },
            rules: [
              { metric: NODE_METRIC, resources: ["nodes"], selector: {} },
              { metric: ".*", resources: ["pods", "namespaces", QUEUE_RESOURCE], selector: {} },
            ],
            defaultAction: "Deny",
          },
        },
        {
          // written before resources: existed: it speaks of External reads only, so its Allow says nothing of custom reads
          apiVersion: "external-metrics-bridge.io/v1alpha1",
          kind: "ExternalMetricPolicy",
          metadata: { name: "legacy-external", namespace: LEGACY_NS },
          spec: { rules: [{ metric: ".*", selector: {} }], defaultAction: "Allow" },
        },
      ),
    );
    processes.push(
      ...(await startBridgeBehindShippedProxy(cp, {
        work,
        bridgeConfig,
        signingKeys,
        backendTimeoutSeconds: BACKEND_TIMEOUT_SECONDS,
        context,
        proxyConfig: { customMetrics: { enabled: true } },
        // the chart as a user installs it for these metrics: the APIServices the proxy may register, list/watch on pods, get on the described Queues
        chartArgs: CHART_ARGS,
        apiServices: API_SERVICES,
      })),
    );
  }, PROMETHEUS_BUILD_TIMEOUT_MS + 50 * 60_000);

  afterEach(({ task }) => {
    if (task.result?.state === "fail") console.error(`component logs after the failure of "${task.name}":\n${context(80)}`);
  });

  afterAll(async () => {
    await kubelet?.stop();
    for (const p of [...processes].reverse()) await p.stop(5_000);
    await prometheus?.stop();
    await exporter?.close();
    await emulator?.stop();
    client?.close();
    await cp?.stop();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("the objects the HPAs read: Running and Ready pods with a series each in Prometheus, a Queue whose status names its SQS queue, the namespace's series", async () => {
    await cp!.kubectlOk(["apply", "-f", "-"], {
      input: yamlDocs(
        queueCrd(),
        { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
        { apiVersion: "v1", kind: "Namespace", metadata: { name: LEGACY_NS } },
        // a Node object only (no kubelet behind it): the cluster-scoped object a root-scoped read describes
        { apiVersion: "v1", kind: "Node", metadata: { name: NODE, labels: { "kubernetes.io/hostname": NODE } } },
      ),
    });
    await waitFor("CRD queues.sqs.services.k8s.aws Established", async () => (await cp!.kubectl(["get", "queues", "-A"])).status === 0, { timeoutMs: 30_000, context });
    await cp!.kubectlOk(["apply", "-f", "-"], {
      input: yamlDocs(
        queueObject("orders", NS, SQS_QUEUES.orders),
        queueObject("emails", NS, SQS_QUEUES.emails),
        queueObject("pending", NS, "shop-pending"), // no status yet: ACK has not created it
        placeholderDeployment("web", NS, 2),
        placeholderDeployment("orders", NS, 1),
        placeholderDeployment("emails", NS, 1),
        placeholderDeployment("reports", NS, 1),
        placeholderDeployment("reports", LEGACY_NS, 2),
      ),
    });
    // what ACK's controller writes once the queue exists, through the status subresource
    for (const name of ["orders", "emails"] as const) await setQueueStatus(client!, NS, name, queueUrls[name]!);
    const queue = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "queue", "orders", "-o", "json"])) as { status?: { queueURL?: string } };
    expect(queue.status?.queueURL).toBe(queueUrls["orders"]);
    // a write of the main resource leaves the status alone (the status subresource is its own endpoint)
    await cp!.kubectlOk(["-n", NS, "patch", "queue", "orders", "--type=merge", "-p", JSON.stringify({ spec: { delaySeconds: "0" }, status: { queueURL: "https://elsewhere.example/1/x" } })]);
    expect((JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "queue", "orders", "-o", "json"])) as { status: { queueURL: string } }).status.queueURL).toBe(queueUrls["orders"]);

    // the Deployments' pods, Running and Ready through the stand-in
    const webPods = await waitFor("2 Ready pods of web", async () => {
      const pods = kubelet!.readyPods(NS, { app: "web" });
      return pods.length === 2 ? pods : undefined;
    }, { timeoutMs: 60_000, context });
    const pod = JSON.parse(await cp!.kubectlOk(["-n", NS, "get", "pod", webPods[0]!, "-o", "json"])) as { status: { phase: string; conditions: { type: string; status: string }[] } };
    expect(pod.status.phase).toBe("Running");
    expect(pod.status.conditions).toContainEqual(expect.objectContaining({ type: "Ready", status: "True" }));

    // a load of 25 shared by web's pods, one series per pod (orders' pod has its own: a read selecting web's must not include it); the namespace's backlog
    loads.set("web", 25);
    loads.set("orders", 30);
    backlogs.set(NS, 7);
    backlogs.set(LEGACY_NS, 7);
    const vector = await waitFor("a series per web pod in Prometheus", async () => {
      const r = await prometheus!.query(`${POD_SERIES}{namespace="${NS}",pod=~"web-.*"}`);
      const result = (r.data?.result ?? []) as VectorSample[];
      return result.length === 2 ? result : undefined;
    }, { timeoutMs: 30_000, context });
    expect(vector.map((s) => s.metric["pod"]).sort()).toEqual(webPods);
    expect(vector.map((s) => s.value[1])).toEqual(["12.5", "12.5"]);
    await prometheus!.waitForSeries(`${POD_SERIES}{namespace="${NS}",pod=~"orders-.*"}`, { value: "30" });
    await prometheus!.waitForSeries(`${NS_SERIES}{namespace="${NS}"}`, { value: "7" });
  }, TEST_TIMEOUT_MS);

  it("discovery through kube-apiserver: both APIServices Available, v1beta2 preferred, one resource per rule", async () => {
    const group = await readRaw(`/apis/${GROUP}`);
    expect(group).toMatchObject({ kind: "APIGroup", name: GROUP, preferredVersion: { groupVersion: `${GROUP}/v1beta2`, version: "v1beta2" } });
    for (const version of ["v1beta2", "v1beta1"]) {
      const list = (await readRaw(`/apis/${GROUP}/${version}`)) as { kind: string; groupVersion: string; resources: { name: string; namespaced: boolean; kind: string; verbs: string[] }[] };
      expect(list.kind).toBe("APIResourceList");
      expect(list.groupVersion).toBe(`${GROUP}/${version}`);
      expect(list.resources.map((r) => r.name).sort()).toEqual([`namespaces/${NS_METRIC}`, `nodes/${NODE_METRIC}`, `pods/${PODS_METRIC}`, `${QUEUE_RESOURCE}/${QUEUE_METRIC}`].sort());
      for (const r of list.resources) expect(r).toMatchObject({ kind: "MetricValueList", verbs: ["get"] });
    }
    const apis = (await readRaw("/apis")) as { groups: { name: string }[] };
    expect(apis.groups.map((g) => g.name)).toContain(GROUP);
  }, TEST_TIMEOUT_MS);

  it("reads as the HPA controller on every path shape, v1beta2 and v1beta1: a value per Ready pod, the Queue's SQS depth, the namespace's series", async () => {
    const webPods = kubelet!.readyPods(NS, { app: "web" });
    await setDepth("orders", 3);
    const selector = `labelSelector=${encodeURIComponent("app=web")}`;
    for (const star of ["*", "%2A"]) {
      const pods = await readAsHpa(path("v1beta2", `pods/${star}/${PODS_METRIC}?${selector}`));
      expect(pods).toMatchObject({ kind: "MetricValueList", apiVersion: `${GROUP}/v1beta2` });
      expect(pods.items.map((i) => [(i["describedObject"] as { name: string }).name, i["value"]]).sort()).toEqual(webPods.map((p) => [p, "12500m"]));
      for (const item of pods.items) expect(item).toMatchObject({ describedObject: { kind: "Pod", namespace: NS, apiVersion: "/v1" }, metric: { name: PODS_METRIC } });
    }
    const podsV1 = await readAsHpa(path("v1beta1", `pods/%2A/${PODS_METRIC}?${selector}`));
    expect(podsV1.items.map((i) => i["metricName"])).toEqual([PODS_METRIC, PODS_METRIC]);
    // a selector matching no pod: no item (never a 0)
    expect((await readAsHpa(path("v1beta2", `pods/%2A/${PODS_METRIC}?labelSelector=${encodeURIComponent("app=nothing")}`))).items).toEqual([]);

    for (const version of ["v1beta2", "v1beta1"]) {
      const queue = await readAsHpa(path(version, `${QUEUE_RESOURCE}/orders/${QUEUE_METRIC}`));
      expect(queue.items).toHaveLength(1);
      expect(queue.items[0]).toMatchObject({ describedObject: { kind: "Queue", namespace: NS, name: "orders", apiVersion: `${QUEUE_GROUP}/${QUEUE_VERSION}` }, value: "3" });
      const ns = await readAsHpa(path(version, `metrics/${NS_METRIC}`));
      expect(ns.items).toHaveLength(1);
      expect(ns.items[0]).toMatchObject({ describedObject: { kind: "Namespace", name: NS, apiVersion: "/v1" }, value: "7" });
    }

    // the root-scoped shape: a cluster-scoped object, decided by the cluster-scoped policy; kubectl get --raw as the HPA controller
    for (const version of ["v1beta2", "v1beta1"]) {
      const raw = await cp!.kubectlOk(["get", "--raw", `/apis/${GROUP}/${version}/nodes/${NODE}/${NODE_METRIC}`, "--as", HPA_CONTROLLER.user, ...HPA_CONTROLLER.groups.flatMap((g) => ["--as-group", g])]);
      const node = JSON.parse(raw) as { items: Record<string, unknown>[] };
      expect(node.items).toHaveLength(1);
      expect(node.items[0]).toMatchObject({ describedObject: { kind: "Node", name: NODE }, value: "250m" });
      expect(node.items[0]!["describedObject"]).not.toHaveProperty("namespace");
    }

    // a Queue ACK has not given a URL yet, and one that does not exist: 404 Status, no value
    const pending = await client!.get(path("v1beta2", `${QUEUE_RESOURCE}/pending/${QUEUE_METRIC}`), HPA_CONTROLLER);
    expect(pending.status, JSON.stringify(pending.body)).toBe(404);
    expect(pending.body).toMatchObject({ kind: "Status", code: 404 });
    expect((pending.body as { message: string }).message).toContain("status.queueURL");
    const missing = await client!.get(path("v1beta2", `${QUEUE_RESOURCE}/gone/${QUEUE_METRIC}`), HPA_CONTROLLER);
    expect(missing.status, JSON.stringify(missing.body)).toBe(404);
    expect(missing.body).toMatchObject({ kind: "Status", code: 404 });
  }, TEST_TIMEOUT_MS);

  it("refusals are 403 Status: a user without RBAC (kube-apiserver), a user with RBAC but no policy, a namespace whose policy names no resource (the bridge)", async () => {
    const reads = [path("v1beta2", `pods/%2A/${PODS_METRIC}?labelSelector=app%3Dweb`), path("v1beta2", `${QUEUE_RESOURCE}/orders/${QUEUE_METRIC}`), path("v1beta2", `metrics/${NS_METRIC}`)];
    // RBAC: nobody has no grant on custom.metrics.k8s.io; dev may get every custom metric in the namespace
    await cp!.kubectlOk(["apply", "-f", "-"], {
      input: yamlDocs(
        { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: "custom-metrics-reader" }, rules: [{ apiGroups: [GROUP], resources: ["*"], verbs: ["get"] }] },
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "RoleBinding",
          metadata: { name: "dev-custom-metrics", namespace: NS },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "custom-metrics-reader" },
          subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "dev" }],
        },
      ),
    });
    const messages: string[] = [];
    for (const p of reads) {
      const rbac = expectForbiddenStatus(await client!.get(p, { user: "nobody", groups: ["system:authenticated"] }), `nobody ${p}`);
      expect(rbac.message).toContain(`User "nobody" cannot get resource`);
      expect(rbac.message).toContain(`in API group "${GROUP}"`);
      const policy = expectForbiddenStatus(await client!.get(p, { user: "dev", groups: ["system:authenticated"] }), `dev ${p}`);
      expect(policy.message).toContain('user "dev"');
      expect(policy.message).not.toContain("cannot get resource"); // not kube-apiserver's RBAC: the bridge's policy
      messages.push(`GET ${p}\n  nobody: ${rbac.message}\n  dev: ${policy.message}`);
    }
    // kubectl get --raw as the cluster admin: RBAC lets it through, no policy names it
    const admin = await cp!.kubectl(["get", "--raw", reads[2]!]);
    expect(admin.status).not.toBe(0);
    expect(admin.stderr).toMatch(/Forbidden|forbidden/);
    // the HPA controller in a namespace whose policy allows External reads only
    const legacy = expectForbiddenStatus(await client!.get(`/apis/${GROUP}/v1beta2/namespaces/${LEGACY_NS}/metrics/${NS_METRIC}`, HPA_CONTROLLER), "legacy namespace");
    expect(legacy.message).toContain(`namespaces.${GROUP} "${NS_METRIC}" is forbidden`);
    expect(legacy.message).toContain("a custom read needs a rule");
    console.log(`${K8S.version}: 403 answers\n${messages.join("\n")}\nthe HPA controller in ${LEGACY_NS}: ${legacy.message}`);
  }, TEST_TIMEOUT_MS);

  it("each HPA scales up and down on its series: Pods AverageValue, Object Value, Object AverageValue, namespace AverageValue", async () => {
    // start: web load 25 (2 pods), orders 3 messages, emails 10, namespace backlog 7
    await setDepth("emails", 10);
    await cp!.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(...Object.values(HPAS)) });
    await Promise.all([
      probes["web"]!.waitForReplicas(NS, averageReplicas(25, WEB)), // 3
      probes["orders"]!.waitForReplicas(NS, ORDERS.min), // 3 < 5: ceil(1 × 0.6) = 1
      probes["emails"]!.waitForReplicas(NS, averageReplicas(10, EMAILS)), // 3
      probes["reports"]!.waitForReplicas(NS, averageReplicas(7, REPORTS)), // 3
    ]);
    for (const name of Object.keys(HPAS)) {
      await waitFor(`HPA ${NS}/${name} ScalingActive=True`, async () => condition(await probes[name]!.hpaOf(NS), "ScalingActive")?.status === "True", { timeoutMs: 30_000, intervalMs: 1000, context });
    }

    // up
    loads.set("web", 55);
    backlogs.set(NS, 16);
    await setDepth("orders", 12); // 12 / 5 per replica: doubles until maxReplicas
    await setDepth("emails", 22);
    await Promise.all([
      probes["web"]!.waitForReplicas(NS, averageReplicas(55, WEB)), // 6
      probes["orders"]!.waitForReplicas(NS, ORDERS.max), // 4
      probes["emails"]!.waitForReplicas(NS, averageReplicas(22, EMAILS)), // 6
      probes["reports"]!.waitForReplicas(NS, averageReplicas(16, REPORTS)), // 6
    ]);
    const web = await probes["web"]!.hpaOf(NS);
    expect(web.status.currentMetrics).toEqual([expect.objectContaining({ type: "Pods", pods: expect.objectContaining({ metric: { name: PODS_METRIC } }) })]);
    const orders = await probes["orders"]!.hpaOf(NS);
    expect(orders.status.currentMetrics).toEqual([expect.objectContaining({ type: "Object", object: expect.objectContaining({ current: expect.objectContaining({ value: "12" }) }) })]);

    // down
    loads.set("web", 15);
    backlogs.set(NS, 4);
    await setDepth("orders", 0);
    await setDepth("emails", 5);
    await Promise.all([
      probes["web"]!.waitForReplicas(NS, averageReplicas(15, WEB)), // 2
      probes["orders"]!.waitForReplicas(NS, ORDERS.min), // 1
      probes["emails"]!.waitForReplicas(NS, averageReplicas(5, EMAILS)), // 2
      probes["reports"]!.waitForReplicas(NS, averageReplicas(4, REPORTS)), // 2
    ]);

    // the same HPA in the namespace whose policy names no custom resource: refused, never scaled
    const legacyProbe = workloadProbe(cp!, context, "reports");
    await cp!.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(reportsHpa(LEGACY_NS)) });
    const seen = new Set<number>();
    const refused = await waitFor(
      "legacy HPA ScalingActive=False FailedGetObjectMetric",
      async () => {
        seen.add(await legacyProbe.replicasOf(LEGACY_NS));
        const c = condition(await legacyProbe.hpaOf(LEGACY_NS), "ScalingActive");
        return c?.status === "False" && c.reason === "FailedGetObjectMetric" ? c : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000, context },
    );
    console.log(`${K8S.version}: HPA ${LEGACY_NS}/reports conditions:\n${describeConditions(await legacyProbe.hpaOf(LEGACY_NS))}`);
    expect(refused.message).toContain(`namespaces.${GROUP} "${NS_METRIC}" is forbidden`);
    expect(refused.message).toContain("a custom read needs a rule");
    expect([...seen]).toEqual([2]);
  }, TEST_TIMEOUT_MS);

  it("Prometheus stopped: the Pods and namespace HPAs hold their replicas for three sync periods (ScalingActive=False); the SQS ones keep working", async () => {
    await setDepth("orders", 12);
    await probes["orders"]!.waitForReplicas(NS, ORDERS.max);
    const before = { web: await probes["web"]!.replicasOf(NS), reports: await probes["reports"]!.replicasOf(NS) };
    expect(before).toEqual({ web: 2, reports: 2 }); // a read of 0 would make either 1
    await prometheus!.stop();
    const seen = { web: new Set<number>(), reports: new Set<number>() };
    const [webDown, reportsDown] = await Promise.all([scalingInactive("web", "FailedGetPodsMetric", seen.web), scalingInactive("reports", "FailedGetObjectMetric", seen.reports)]);
    for (const c of [webDown, reportsDown]) expect(c.message).toContain("unable to fetch metrics from custom metrics API");
    await Promise.all([probes["web"]!.expectReplicasHeld(NS, before.web, 3 * HPA_SYNC_SECONDS), probes["reports"]!.expectReplicasHeld(NS, before.reports, 3 * HPA_SYNC_SECONDS)]);
    expect([...seen.web]).toEqual([before.web]);
    expect([...seen.reports]).toEqual([before.reports]);
    console.log(`${K8S.version}: Prometheus stopped; HPA web conditions:\n${describeConditions(await probes["web"]!.hpaOf(NS))}`);
    // the SQS-backed HPAs are not affected
    expect(condition(await probes["orders"]!.hpaOf(NS), "ScalingActive")?.status).toBe("True");
    const read = await client!.get(path("v1beta2", `metrics/${NS_METRIC}`), HPA_CONTROLLER);
    expect(read.status).toBe(503);
    expect(read.body).toMatchObject({ kind: "Status", code: 503 });
  }, TEST_TIMEOUT_MS);

  it("fauxqs stopped: the Queue HPAs hold their replicas for three sync periods (ScalingActive=False, FailedGetObjectMetric)", async () => {
    const before = { orders: await probes["orders"]!.replicasOf(NS), emails: await probes["emails"]!.replicasOf(NS) };
    expect(before).toEqual({ orders: ORDERS.max, emails: 2 }); // a read of 0 would make either 1
    await emulator!.stop();
    const seen = { orders: new Set<number>(), emails: new Set<number>() };
    const [ordersDown] = await Promise.all([scalingInactive("orders", "FailedGetObjectMetric", seen.orders), scalingInactive("emails", "FailedGetObjectMetric", seen.emails)]);
    expect(ordersDown.message).toContain("unable to fetch metrics from custom metrics API");
    await Promise.all([probes["orders"]!.expectReplicasHeld(NS, before.orders, 3 * HPA_SYNC_SECONDS), probes["emails"]!.expectReplicasHeld(NS, before.emails, 3 * HPA_SYNC_SECONDS)]);
    expect([...seen.orders]).toEqual([before.orders]);
    expect([...seen.emails]).toEqual([before.emails]);
    console.log(`${K8S.version}: fauxqs stopped; HPA orders conditions:\n${describeConditions(await probes["orders"]!.hpaOf(NS))}`);
  }, TEST_TIMEOUT_MS);
});

/** GET `p` through kube-apiserver as the HPA controller, expecting 200; the parsed body. */
async function readRaw(p: string): Promise<unknown> {
  const r = await client!.get(p, HPA_CONTROLLER);
  expect(r.status, `GET ${p}: ${JSON.stringify(r.body)}`).toBe(200);
  return r.body;
}
