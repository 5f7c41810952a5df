/**
 * End to end on a Prometheus series: the HPA controller of a real
 * kube-controller-manager reads an External metric through kube-apiserver's
 * aggregation layer, the shipped proxy and the bridge (functions/node.ts)
 * from a real Prometheus (test/helpers/prometheus.ts) that scrapes an
 * exporter this suite controls.
 *
 *   HPA controller ─► kube-apiserver (aggregator) ─► proxy ─► bridge
 *   (`prometheus` provider) ─► Prometheus ─scrape─► exporter
 *
 * The Deployment follows the exported value up and down (AverageValue
 * target: ceil(value / target) replicas); when Prometheus is stopped, reads
 * are 503s, the HPA reports ScalingActive=False (FailedGetExternalMetric)
 * and keeps its replicas: nothing is computed from a 0.
 *
 * One control plane for the whole file, HPA sync every second.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { startExporter, startPrometheus, type Exporter, type PrometheusServer } from "../helpers/prometheus.ts";
import { buildControlPlane, logTails, startControlPlane, waitFor, type ControlPlane, type LoggedProcess } from "../k8s/cluster.ts";
import { condition, expectedReplicas, workloadProbe, type WorkloadProbe } from "../k8s/hpa.ts";
import { placeholderDeployment, startBridgeBehindShippedProxy } from "../k8s/shipped.ts";

const GROUP_VERSION = "external.metrics.k8s.io/v1beta1";
/** the External metric the HPA names, served from the Prometheus series {@link SERIES} */
const METRIC = "jobs_queued";
const SERIES = "app_jobs_queued";
const NS = "jobs";
const QUEUE = "render";
/** bridge deadline (2 s) < proxy → bridge (4 s) < the aggregator's 5 s */
const BACKEND_TIMEOUT_SECONDS = 4;
/** `--horizontal-pod-autoscaler-sync-period`: the shortest the controller takes (whole seconds) */
const HPA_SYNC_SECONDS = 1;
const TEST_TIMEOUT_MS = 180_000;
const [TARGET, MIN, MAX] = [4, 1, 6];

let cp: ControlPlane | undefined;
let exporter: Exporter | undefined;
let prometheus: PrometheusServer | undefined;
let probe: WorkloadProbe;
let work = "";
const processes: LoggedProcess[] = [];

function context(lines = 60): string {
  return `${cp?.logs(lines) ?? ""}\n${logTails(processes, lines)}\n${prometheus?.logs(lines) ?? ""}`;
}

/** Export `value` for the queue and wait until Prometheus has scraped it. */
async function exportDepth(value: number): Promise<void> {
  exporter!.set([{ name: SERIES, labels: { queue: QUEUE }, value }]);
  await prometheus!.waitForSeries(`${SERIES}{queue="${QUEUE}"}`, { value: String(value) });
}

const readPath = `/apis/${GROUP_VERSION}/namespaces/${NS}/${METRIC}?labelSelector=${encodeURIComponent(`queue=${QUEUE}`)}`;

describe("real Kubernetes and a real Prometheus: an HPA on a Prometheus series", () => {
  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    cp = await startControlPlane({ binDir, hpaSyncPeriodSeconds: HPA_SYNC_SECONDS, downscaleStabilizationSeconds: 2, log: (l) => console.log(l) });
    probe = workloadProbe(cp, context);
    work = mkdtempSync(join(tmpdir(), "emb-k8s-prom-e2e-"));
    exporter = await startExporter();
    prometheus = await startPrometheus({ targets: [exporter.target] });

    const signingKeys = `e2e:${randomBytes(32).toString("base64")}`;
    const bridgeConfig = join(work, "bridge.yaml");
    writeFileSync(
      bridgeConfig,
      stringify({
        apiVersion: "external-metrics-bridge.io/v1alpha1",
        kind: "BridgeConfig",
        defaults: { maxAgeSeconds: 30, cacheTTLSeconds: 1 },
        providers: { prom: { type: "prometheus", url: prometheus.url, timeoutSeconds: 2 } },
        metrics: [{ name: METRIC, provider: "prom", query: { series: SERIES, selectorLabels: { queue: "queue" } } }],
        // not a policy test: every read allowed, explicitly
        policy: { defaultAction: "Allow" },
      }),
    );
    processes.push(...(await startBridgeBehindShippedProxy(cp, { work, bridgeConfig, signingKeys, backendTimeoutSeconds: BACKEND_TIMEOUT_SECONDS, context })));
  }, 50 * 60_000);

  afterEach(({ task }) => {
    if (task.result?.state === "fail") console.error(`component logs after the failure of "${task.name}":\n${context(80)}`);
  });

  afterAll(async () => {
    for (const p of [...processes].reverse()) await p.stop(5_000);
    await prometheus?.stop();
    await exporter?.close();
    await cp?.stop();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("kubectl get --raw reads the exported value through kube-apiserver, proxy, bridge and Prometheus", async () => {
    await exportDepth(7);
    const list = JSON.parse(await cp!.kubectlOk(["get", "--raw", readPath])) as { kind: string; items: { metricName: string; metricLabels: Record<string, string>; value: string }[] };
    expect(list.kind).toBe("ExternalMetricValueList");
    expect(list.items).toEqual([expect.objectContaining({ metricName: METRIC, metricLabels: { queue: QUEUE }, value: "7" })]);
  }, TEST_TIMEOUT_MS);

  it("an AverageValue HPA follows the series: up when it rises, down when it falls", async () => {
    await cp!.kubectlOk(["apply", "-f", "-"], {
      input: [
        { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
        placeholderDeployment("worker", NS, 1),
        {
          apiVersion: "autoscaling/v2",
          kind: "HorizontalPodAutoscaler",
          metadata: { name: "worker", namespace: NS },
          spec: {
            scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "worker" },
            minReplicas: MIN,
            maxReplicas: MAX,
            metrics: [{ type: "External", external: { metric: { name: METRIC, selector: { matchLabels: { queue: QUEUE } } }, target: { type: "AverageValue", averageValue: String(TARGET) } } }],
            // scale up without the default 15 s rate limit; scale-down waits the 2 s stabilisation window
            behavior: { scaleUp: { stabilizationWindowSeconds: 0, policies: [{ type: "Pods", value: 100, periodSeconds: 1 }] } },
          },
        },
      ]
        .map((d) => stringify(d))
        .join("---\n"),
    });
    await probe.waitForReplicas(NS, expectedReplicas(7, TARGET, MIN, MAX)); // 2
    await exportDepth(17);
    await probe.waitForReplicas(NS, expectedReplicas(17, TARGET, MIN, MAX)); // 5
    const hpa = await probe.hpaOf(NS);
    expect(condition(hpa, "ScalingActive")?.status).toBe("True");
    expect(hpa.status.currentMetrics).toEqual([expect.objectContaining({ type: "External", external: expect.objectContaining({ current: expect.objectContaining({ averageValue: expect.any(String) }) }) })]);
    await exportDepth(6);
    await probe.waitForReplicas(NS, expectedReplicas(6, TARGET, MIN, MAX)); // 2
  }, TEST_TIMEOUT_MS);

  it("when Prometheus stops, reads are 503s and the HPA holds its replicas (ScalingActive=False, FailedGetExternalMetric)", async () => {
    const before = await probe.replicasOf(NS);
    expect(before).toBe(2); // a read of 0 would make it MIN (1)
    await prometheus!.stop();
    const stoppedAt = Date.now();
    const seen = new Set<number>();
    const active = await waitFor(
      "HPA ScalingActive=False after Prometheus stopped",
      async () => {
        seen.add(await probe.replicasOf(NS));
        const c = condition(await probe.hpaOf(NS), "ScalingActive");
        return c?.status === "False" ? c : undefined;
      },
      { timeoutMs: 45_000, intervalMs: 1000, context },
    );
    console.log(`HPA reported FailedGetExternalMetric ${Math.round((Date.now() - stoppedAt) / 1000)}s after Prometheus stopped`);
    expect([...seen], "replicas while the metric was failing").toEqual([before]);
    expect(active.reason).toBe("FailedGetExternalMetric");
    // the bridge's 503 Status message, carried through proxy, aggregator and client-go
    expect(active.message).toContain("unable to fetch metrics from external metrics API");
    expect(active.message).toContain(`provider prom: query for metric ${METRIC} (${SERIES}{queue="${QUEUE}"}) failed`);
    expect(active.message).toContain("backend unreachable");
    await probe.expectReplicasHeld(NS, before, 6 * HPA_SYNC_SECONDS);

    const read = await cp!.kubectl(["get", "--raw", readPath, "-v=6"], { timeoutMs: 60_000 });
    expect(read.status).not.toBe(0);
    expect(read.stderr).toMatch(/ServiceUnavailable|service unavailable/i);
    expect(read.stderr.split("\n").filter((l) => l.includes(`/namespaces/${NS}/${METRIC}`) && /\b503\b/.test(l)), read.stderr).toHaveLength(1);
  }, TEST_TIMEOUT_MS);
});
