/**
 * Scale to zero without KEDA, end to end on a real control plane
 * (test/k8s/cluster.ts): an `autoscaling/v2` HPA with `minReplicas: 0` on
 * an External metric served by the bridge from an SQS queue (fauxqs),
 * through kube-apiserver's aggregation layer and the shipped proxy.
 *
 *   HPA controller ─► kube-apiserver (aggregator) ─► proxy ─► bridge ─► fauxqs
 *
 * The metric is the queue's backlog, visible + in flight
 * (`ApproximateNumberOfMessages` + `ApproximateNumberOfMessagesNotVisible`,
 * what KEDA's aws-sqs-queue scaler reads by default): a worker that has
 * received messages and is still working on them is not scaled away.
 *
 * `minReplicas: 0` needs the `HPAScaleToZero` feature gate: Beta and on by
 * default from Kubernetes 1.37, Alpha (off) since 1.16
 * (k8s.io/kubernetes `pkg/features/kube_features.go`). On an older release
 * (`EMB_K8S_VERSION=v1.30`, vitest project `e2e-floor`) this suite turns it
 * on in kube-apiserver (which validates `minReplicas: 0`) and
 * kube-controller-manager (which acts on it), as a cluster admin would.
 *
 * Since 1.37 the controller scales up from zero only a workload it scaled
 * to zero itself (its `ScaledToZero` condition; `pkg/controller/podautoscaler/horizontal.go`
 * `shouldComputeMetricsForZeroReplicas`); a Deployment at 0 by other means
 * pauses the HPA (`ScalingDisabled`), as before the gate. Before 1.37, with
 * the gate on, the controller reads the metric for any target at 0.
 *
 * One control plane for the file, HPA sync every 2 s, downscale
 * stabilisation 2 s (a cluster's default is 300 s).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CreateQueueCommand, DeleteMessageBatchCommand, DeleteQueueCommand, ReceiveMessageCommand, type Message } from "@aws-sdk/client-sqs";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { buildControlPlane, k8sModule, logTails, startControlPlane, waitFor, type ControlPlane, type LoggedProcess } from "../k8s/cluster.ts";
import { condition, expectedReplicas, workloadProbe, type Hpa, type WorkloadProbe } from "../k8s/hpa.ts";
import { e2eBridgeConfig, placeholderDeployment, startBridgeBehindShippedProxy } from "../k8s/shipped.ts";

const GROUP_VERSION = "external.metrics.k8s.io/v1beta1";
/** the backlog metric: visible + in flight */
const METRIC = "queue_messages_backlog";
const NS = "jobs";
const QUEUE = "jobs";
/** a second queue, for the Deployment put at 0 by hand */
const MANUAL_QUEUE = "manual-jobs";
const TARGET = 5;
const MAX = 5;
/** bridge deadline (2 s) < proxy → bridge (4 s) < the aggregator's 5 s */
const BACKEND_TIMEOUT_SECONDS = 4;
/** `--horizontal-pod-autoscaler-sync-period` */
const HPA_SYNC_SECONDS = 2;
/** `--horizontal-pod-autoscaler-downscale-stabilization` */
const DOWNSCALE_STABILIZATION_SECONDS = 2;
/** how long a value may be re-used on its way: the bridge's `cacheTTLSeconds` (1, e2eBridgeConfig) plus the proxy's `cache.ttlSeconds` (1, startShippedProxy) */
const CACHE_TTL_SECONDS = 1 + 1;
/** what the machine adds to the bound: the HPA's read and scale write, the deployment read polled every 250 ms by a kubectl process, on 2 shared cores */
const SLACK_SECONDS = 2;
const TEST_TIMEOUT_MS = 180_000;

const K8S = k8sModule();
const MINOR = Number(/^v1\.(\d+)\./.exec(K8S.version)?.[1]);
/** the release turns HPAScaleToZero on by default (Beta from 1.37) */
const GATE_ON_BY_DEFAULT = MINOR >= 37;

let cp: ControlPlane | undefined;
let emulator: Emulator | undefined;
let work = "";
const processes: LoggedProcess[] = [];
let worker: WorkloadProbe;
let manual: WorkloadProbe;

function context(lines = 60): string {
  return `${cp?.logs(lines) ?? ""}\n${logTails(processes, lines)}`;
}

const yamlDocs = (...docs: object[]) => docs.map((d) => stringify(d)).join("---\n");

/** The HPA of the docs (docs/providers/aws-sqs.md, "Scale to zero"): `minReplicas: 0`, one replica per `TARGET` messages of backlog. */
function scaleToZeroHpa(name: string, queue: string): object {
  return {
    apiVersion: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    metadata: { name, namespace: NS },
    spec: {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
      minReplicas: 0,
      maxReplicas: MAX,
      metrics: [{ type: "External", external: { metric: { name: METRIC, selector: { matchLabels: { queue } } }, target: { type: "AverageValue", averageValue: String(TARGET) } } }],
    },
  };
}

/** The HPA's conditions as `type=status reason: message` lines, for the log and the docs. */
function describeConditions(hpa: Hpa): string {
  return (hpa.status.conditions ?? []).map((c) => `  ${c.type}=${c.status} ${c.reason ?? ""}: ${c.message ?? ""}`).join("\n");
}

/** Wait until the HPA's `ScalingActive` is False with `reason`; returns that condition. */
async function scalingInactive(probe: WorkloadProbe, reason: string, seen: Set<number>) {
  return waitFor(
    `HPA ${NS} ScalingActive=False ${reason}`,
    async () => {
      seen.add(await probe.replicasOf(NS));
      const c = condition(await probe.hpaOf(NS), "ScalingActive");
      return c?.status === "False" && c.reason === reason ? c : undefined;
    },
    { timeoutMs: 45_000, intervalMs: 1000, context },
  );
}

async function deleteQueue(name: string): Promise<void> {
  await emulator!.client.send(new DeleteQueueCommand({ QueueUrl: await emulator!.createQueue(name) }));
}

describe(`real Kubernetes ${K8S.version}${GATE_ON_BY_DEFAULT ? "" : " with --feature-gates=HPAScaleToZero=true"}: an HPA with minReplicas 0 on the SQS backlog`, () => {
  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    cp = await startControlPlane({
      binDir,
      hpaSyncPeriodSeconds: HPA_SYNC_SECONDS,
      downscaleStabilizationSeconds: DOWNSCALE_STABILIZATION_SECONDS,
      ...(GATE_ON_BY_DEFAULT ? {} : { featureGates: { HPAScaleToZero: true } }),
      log: (l) => console.log(l),
    });
    worker = workloadProbe(cp, context, "worker");
    manual = workloadProbe(cp, context, "manual");
    work = mkdtempSync(join(tmpdir(), "emb-k8s-s2z-e2e-"));
    emulator = await startEmulator();
    for (const q of [QUEUE, MANUAL_QUEUE]) await emulator.createQueue(q);

    const signingKeys = `e2e:${randomBytes(32).toString("base64")}`;
    const bridgeConfig = join(work, "bridge.yaml");
    writeFileSync(
      bridgeConfig,
      yamlDocs(e2eBridgeConfig(emulator.endpoint, [{ name: METRIC, attribute: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }]), {
        apiVersion: "external-metrics-bridge.io/v1alpha1",
        kind: "ExternalMetricPolicy",
        metadata: { name: "jobs-queues", namespace: NS },
        spec: { rules: [{ metric: METRIC, selector: { matchExpressions: [{ key: "queue", operator: "In", values: [QUEUE, MANUAL_QUEUE] }] } }], defaultAction: "Deny" },
      }),
    );
    processes.push(...(await startBridgeBehindShippedProxy(cp, { work, bridgeConfig, signingKeys, backendTimeoutSeconds: BACKEND_TIMEOUT_SECONDS, context })));
  }, 50 * 60_000);

  afterEach(({ task }) => {
    if (task.result?.state === "fail") console.error(`component logs after the failure of "${task.name}":\n${context(80)}`);
  });

  afterAll(async () => {
    for (const p of [...processes].reverse()) await p.stop(5_000);
    await emulator?.stop();
    await cp?.stop();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("an empty queue takes the Deployment from 1 replica to 0", async () => {
    await cp!.kubectlOk(["apply", "-f", "-"], {
      input: yamlDocs({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } }, placeholderDeployment("worker", NS, 1), scaleToZeroHpa("worker", QUEUE)),
    });
    const started = Date.now();
    await worker.waitForReplicas(NS, 0, 60_000);
    const hpa = await worker.hpaOf(NS);
    console.log(`${K8S.version}: scaled to 0 ${((Date.now() - started) / 1000).toFixed(1)}s after the HPA was created; conditions:\n${describeConditions(hpa)}`);
    console.log(`$ kubectl -n ${NS} get hpa worker\n${await cp!.kubectlOk(["-n", NS, "get", "hpa", "worker"])}`);
    expect(condition(hpa, "ScalingActive")?.status).toBe("True");
    expect(condition(hpa, "AbleToScale")).toMatchObject({ status: "True", reason: "SucceededRescale" });
    // 1.37 records that the controller itself scaled to zero: what lets it scale up from there
    if (GATE_ON_BY_DEFAULT) expect(condition(hpa, "ScaledToZero")).toMatchObject({ status: "True", reason: "ScaledToZero" });
    else expect(condition(hpa, "ScaledToZero")).toBeUndefined();
    const list = JSON.parse(await cp!.kubectlOk(["get", "--raw", `/apis/${GROUP_VERSION}/namespaces/${NS}/${METRIC}?labelSelector=${encodeURIComponent(`queue=${QUEUE}`)}`])) as { items: { value: string }[] };
    expect(list.items.map((i) => i.value)).toEqual(["0"]);
  }, TEST_TIMEOUT_MS);

  it(`one message brings it back to 1 replica within one sync period plus the cache TTL (${HPA_SYNC_SECONDS} s + ${CACHE_TTL_SECONDS} s)`, async () => {
    expect(await worker.replicasOf(NS)).toBe(0);
    await emulator!.add(QUEUE, 1);
    const arrived = Date.now();
    await waitFor("deployment jobs/worker above 0 replicas", async () => (await worker.replicasOf(NS)) > 0, { timeoutMs: 60_000, intervalMs: 250, context });
    const seconds = (Date.now() - arrived) / 1000;
    console.log(`${K8S.version}: 0 → ${await worker.replicasOf(NS)} replicas ${seconds.toFixed(1)}s after the message was sent (bound ${HPA_SYNC_SECONDS} + ${CACHE_TTL_SECONDS} + ${SLACK_SECONDS} s)`);
    expect(await worker.replicasOf(NS)).toBe(expectedReplicas(1, TARGET, 0, MAX)); // any non-zero backlog: 1
    expect(seconds).toBeLessThan(HPA_SYNC_SECONDS + CACHE_TTL_SECONDS + SLACK_SECONDS);
    const hpa = await worker.hpaOf(NS);
    if (GATE_ON_BY_DEFAULT) expect(condition(hpa, "ScaledToZero")).toMatchObject({ status: "False", reason: "NotScaledToZero" });
    console.log(`$ kubectl -n ${NS} get hpa worker\n${await cp!.kubectlOk(["-n", NS, "get", "hpa", "worker"])}`);
  }, TEST_TIMEOUT_MS);

  it("a message in flight keeps the worker that received it (backlog = visible + in flight); deleting it takes the Deployment to 0", async () => {
    const url = await emulator!.createQueue(QUEUE);
    const received = await emulator!.client.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, VisibilityTimeout: 600, WaitTimeSeconds: 0 }));
    const messages: Message[] = received.Messages ?? [];
    expect(messages).toHaveLength(1);
    // ApproximateNumberOfMessages is now 0: a rule reading only it would scale the worker away mid-message
    await worker.expectReplicasHeld(NS, 1, 3 * HPA_SYNC_SECONDS + DOWNSCALE_STABILIZATION_SECONDS);
    const raw = await cp!.kubectlOk(["get", "--raw", `/apis/${GROUP_VERSION}/namespaces/${NS}/${METRIC}?labelSelector=${encodeURIComponent(`queue=${QUEUE}`)}`]);
    expect((JSON.parse(raw) as { items: { value: string }[] }).items.map((i) => i.value)).toEqual(["1"]);
    console.log(`one message in flight, none visible: the backlog through kube-apiserver\n${JSON.stringify(JSON.parse(raw), null, 2)}`);
    await emulator!.client.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: messages.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle! })) }));
    await worker.waitForReplicas(NS, 0, 60_000);
    // the HPA's own status catches up a sync later (currentReplicas 0 is omitted on the wire): what `kubectl get hpa` shows at rest at 0
    await waitFor("HPA status.currentReplicas 0", async () => ((await worker.hpaOf(NS)).status.currentReplicas ?? 0) === 0, { timeoutMs: 30_000, intervalMs: 500, context });
    console.log(`$ kubectl -n ${NS} get hpa worker\n${await cp!.kubectlOk(["-n", NS, "get", "hpa", "worker"])}`);
  }, TEST_TIMEOUT_MS);

  it("a Deployment put at 0 by hand: scaled up on 1.30 with the gate, left alone (ScalingDisabled) from 1.37", async () => {
    await emulator!.add(MANUAL_QUEUE, 2);
    await cp!.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(placeholderDeployment("manual", NS, 0), scaleToZeroHpa("manual", MANUAL_QUEUE)) });
    if (GATE_ON_BY_DEFAULT) {
      const seen = new Set<number>();
      const disabled = await scalingInactive(manual, "ScalingDisabled", seen);
      expect([...seen]).toEqual([0]);
      expect(disabled.message).toBe("scaling is disabled since the replica count of the target is zero");
      await manual.expectReplicasHeld(NS, 0, 3 * HPA_SYNC_SECONDS);
    } else {
      await manual.waitForReplicas(NS, expectedReplicas(2, TARGET, 0, MAX), 60_000);
    }
    console.log(`${K8S.version}: Deployment created at 0 replicas, 2 messages: ${await manual.replicasOf(NS)} replicas; conditions:\n${describeConditions(await manual.hpaOf(NS))}`);
    await cp!.kubectlOk(["-n", NS, "delete", "hpa", "manual"]);
  }, TEST_TIMEOUT_MS);

  it("a failed read scales nothing: at 1 replica it holds (not 0), at 0 it stays 0 (queue deleted, then fauxqs stopped)", async () => {
    // at 1 replica, minReplicas 0: a failed read is not a 0
    await emulator!.add(QUEUE, 1);
    await worker.waitForReplicas(NS, 1, 60_000);
    await deleteQueue(QUEUE);
    const seenAtOne = new Set<number>();
    const missingAtOne = await scalingInactive(worker, "FailedGetExternalMetric", seenAtOne);
    expect(missingAtOne.message).toContain(`SQS queue "${QUEUE}" does not exist`);
    await worker.expectReplicasHeld(NS, 1, 3 * HPA_SYNC_SECONDS + DOWNSCALE_STABILIZATION_SECONDS);
    expect([...seenAtOne]).toEqual([1]);

    // the queue back, empty: to 0
    await emulator!.client.send(new CreateQueueCommand({ QueueName: QUEUE }));
    await worker.waitForReplicas(NS, 0, 60_000);

    // at 0: the queue deleted
    await deleteQueue(QUEUE);
    const seenAtZero = new Set<number>();
    const missing = await scalingInactive(worker, "FailedGetExternalMetric", seenAtZero);
    expect(missing.message).toContain(`SQS queue "${QUEUE}" does not exist`);
    await worker.expectReplicasHeld(NS, 0, 3 * HPA_SYNC_SECONDS);
    const hpaMissing = await worker.hpaOf(NS);
    console.log(`${K8S.version}: at 0 replicas, queue deleted; conditions:\n${describeConditions(hpaMissing)}`);

    // at 0: the SQS endpoint gone
    await emulator!.stop();
    await waitFor(
      "the HPA's condition to name the unreachable endpoint",
      async () => {
        seenAtZero.add(await worker.replicasOf(NS));
        const c = condition(await worker.hpaOf(NS), "ScalingActive");
        return c?.status === "False" && c.reason === "FailedGetExternalMetric" && !c.message?.includes("does not exist") ? c : undefined;
      },
      { timeoutMs: 45_000, intervalMs: 1000, context },
    );
    await worker.expectReplicasHeld(NS, 0, 3 * HPA_SYNC_SECONDS);
    expect([...seenAtZero]).toEqual([0]);
    const hpaDown = await worker.hpaOf(NS);
    console.log(`${K8S.version}: at 0 replicas, fauxqs stopped; conditions:\n${describeConditions(hpaDown)}`);
    expect(condition(hpaDown, "ScalingActive")?.message).toContain("unable to get external metric");
    expect(condition(hpaDown, "ScalingActive")?.message).toContain(`GetQueueUrl for queue "${QUEUE}" failed: backend unreachable`);
    console.log(`$ kubectl -n ${NS} get hpa worker\n${await cp!.kubectlOk(["-n", NS, "get", "hpa", "worker"])}`);
    if (GATE_ON_BY_DEFAULT) expect(condition(hpaDown, "ScaledToZero")?.status).toBe("True");
  }, TEST_TIMEOUT_MS);
});
