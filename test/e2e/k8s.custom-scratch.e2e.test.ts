// SCRATCH (not committed): the parts of the custom-metrics suite that need no custom API.
import { afterAll, beforeAll, expect, it } from "vitest";
import { stringify } from "yaml";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { startExporter, startPrometheus, type Exporter, type PrometheusServer, type VectorSample } from "../helpers/prometheus.ts";
import { QUEUE_GROUP, QUEUE_VERSION, queueCrd, queueObject, setQueueStatus } from "../k8s/ack-queue.ts";
import { buildControlPlane, startControlPlane, waitFor, type ControlPlane } from "../k8s/cluster.ts";
import { condition, workloadProbe } from "../k8s/hpa.ts";
import { impersonatingClient, type ImpersonatingClient } from "../k8s/impersonate.ts";
import { startKubelet, type Kubelet } from "../k8s/kubelet.ts";
import { placeholderDeployment } from "../k8s/shipped.ts";

let cp: ControlPlane; let client: ImpersonatingClient; let kubelet: Kubelet; let exporter: Exporter; let prom: PrometheusServer; let emu: Emulator;
const loads = new Map<string, number>([["web", 25]]);
const y = (...d: object[]) => d.map((x) => stringify(x)).join("---\n");
const ctx = () => `${cp?.logs(40)}\nkubelet ${kubelet?.writes} ${kubelet?.lastError}`;
beforeAll(async () => {
  const binDir = await buildControlPlane({ log: console.log });
  cp = await startControlPlane({ binDir, hpaSyncPeriodSeconds: 2, log: console.log });
  client = await impersonatingClient(cp);
  kubelet = startKubelet(client, ["shop"]);
  exporter = await startExporter();
  exporter.set(() => { const out = []; for (const [app, load] of loads) { const pods = kubelet.readyPods("shop", { app }); for (const pod of pods) out.push({ name: "app_http_requests", labels: { namespace: "shop", pod }, value: load / pods.length }); } return out; });
  prom = await startPrometheus({ targets: [exporter.target] });
  emu = await startEmulator();
}, 3_000_000);
afterAll(async () => { await kubelet?.stop(); await prom?.stop(); await exporter?.close(); await emu?.stop(); client?.close(); await cp?.stop(); }, 60_000);
it("pre-landing pieces", async () => {
  await cp.kubectlOk(["apply", "-f", "-"], { input: y(queueCrd(), { apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } }) });
  await waitFor("crd", async () => (await cp.kubectl(["get", "queues", "-A"])).status === 0, { timeoutMs: 30_000 });
  const url = await emu.createQueue("shop-orders");
  await cp.kubectlOk(["apply", "-f", "-"], { input: y(queueObject("orders", "shop", "shop-orders"), placeholderDeployment("web", "shop", 2), placeholderDeployment("orders", "shop", 1)) });
  await setQueueStatus(client, "shop", "orders", url);
  console.log(await cp.kubectlOk(["-n", "shop", "get", "queue", "orders", "-o", "yaml"]));
  console.log(await cp.kubectlOk(["-n", "shop", "get", "queues"]));
  await cp.kubectlOk(["-n", "shop", "patch", "queue", "orders", "--type=merge", "-p", JSON.stringify({ spec: { delaySeconds: "0" }, status: { queueURL: "https://elsewhere.example/1/x" } })]);
  expect(JSON.parse(await cp.kubectlOk(["-n", "shop", "get", "queue", "orders", "-o", "json"])).status.queueURL).toBe(url);
  const pods = await waitFor("2 ready", async () => { const p = kubelet.readyPods("shop", { app: "web" }); return p.length === 2 ? p : undefined; }, { timeoutMs: 60_000, context: ctx });
  console.log(await cp.kubectlOk(["-n", "shop", "get", "pods", "-o", "wide"]));
  const v = await waitFor("series", async () => { const r = ((await prom.query('app_http_requests{namespace="shop"}')).data?.result ?? []) as VectorSample[]; return r.length === 2 ? r : undefined; }, { timeoutMs: 30_000 });
  console.log(JSON.stringify(v));
  expect(v.map((s) => s.metric["pod"]).sort()).toEqual(pods);
  await cp.kubectlOk(["apply", "-f", "-"], { input: y(
    { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler", metadata: { name: "web", namespace: "shop" }, spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "web" }, minReplicas: 1, maxReplicas: 6, metrics: [{ type: "Pods", pods: { metric: { name: "http_requests" }, target: { type: "AverageValue", averageValue: "10" } } }] } },
    { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler", metadata: { name: "orders", namespace: "shop" }, spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "orders" }, minReplicas: 1, maxReplicas: 4, metrics: [{ type: "Object", object: { describedObject: { apiVersion: `${QUEUE_GROUP}/${QUEUE_VERSION}`, kind: "Queue", name: "orders" }, metric: { name: "queue_backlog" }, target: { type: "Value", value: "5" } } }] } },
  ) });
  for (const [name, reason] of [["web", "FailedGetPodsMetric"], ["orders", "FailedGetObjectMetric"]]) {
    const p = workloadProbe(cp, ctx, name);
    const c = await waitFor(`${name} ${reason}`, async () => { const c = condition(await p.hpaOf("shop"), "ScalingActive"); return c?.reason === reason ? c : undefined; }, { timeoutMs: 60_000, context: ctx });
    console.log(name, JSON.stringify(c));
  }
  console.log(await cp.kubectlOk(["-n", "shop", "get", "hpa"]));
  // scale: the RS makes more pods, the stand-in makes them Ready, the exporter follows
  await cp.kubectlOk(["-n", "shop", "scale", "deployment", "web", "--replicas=4"]);
  await waitFor("4 ready", async () => kubelet.readyPods("shop", { app: "web" }).length === 4, { timeoutMs: 60_000, context: ctx });
  await cp.kubectlOk(["-n", "shop", "scale", "deployment", "web", "--replicas=1"]);
  await waitFor("1 ready", async () => kubelet.readyPods("shop", { app: "web" }).length === 1, { timeoutMs: 60_000, context: ctx });
  console.log(await cp.kubectlOk(["-n", "shop", "get", "pods"]));
}, 300_000);
