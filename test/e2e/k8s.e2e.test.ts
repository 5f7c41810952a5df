/**
 * End to end against real Kubernetes: kube-apiserver's aggregation layer and
 * the HPA controller of kube-controller-manager (built from the
 * k8s.io/kubernetes module by test/k8s/build.sh, started by
 * test/k8s/cluster.ts), the in-cluster proxy (functions/proxy/main.ts) and
 * the bridge (functions/node.ts) as local processes, and the fauxqs SQS
 * emulator.
 *
 *   HPA controller ─► kube-apiserver (aggregator) ─► proxy (TLS, front-proxy
 *   authn, SubjectAccessReview, signing) ─► bridge (signature, policy) ─► fauxqs
 *
 * The proxy's namespace, ServiceAccount and RBAC are the shipped plain
 * manifests (infra/manifests/), and the proxy runs with the shipped
 * Deployment's arguments (serving certificate in a Secret it creates, APIService
 * self-registration), overriding only ports, files and timings.
 *
 * Endpoint addresses may not be loopback, so the proxy's Service is an
 * `ExternalName` Service naming 127.0.0.1: the aggregator's default
 * (ClusterIP) resolver dials `externalName:<APIService port>`
 * (k8s.io/apiserver `pkg/util/proxy/proxy.go` ResolveCluster) with TLS
 * ServerName `<service>.<namespace>.svc`, which the proxy's serving
 * certificate carries.
 *
 * The first run builds Kubernetes (about 11 minutes on 2 shared cores, module
 * download included); later runs reuse the cached binaries (see
 * docs/kubernetes-e2e.md).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { startHangingServer, type HangingServer } from "../helpers/hanging-server.ts";
import {
  buildControlPlane,
  freePorts,
  logTails,
  startControlPlane,
  waitFor,
  type ControlPlane,
  type LoggedProcess,
} from "../k8s/cluster.ts";
import { condition, expectedReplicas, workloadProbe, type Hpa } from "../k8s/hpa.ts";
import { API_SERVICE, apiServiceAvailability, e2eBridgeConfig, placeholderDeployment, PROXY_NS, PROXY_SERVICE, startBridgeProcess, startShippedProxy, waitForAPIServiceAvailable } from "../k8s/shipped.ts";

const GROUP_VERSION = "external.metrics.k8s.io/v1beta1";
const METRIC = "queue_messages_ready";
/** routed by the proxy to a backend that accepts connections and never answers */
const STUCK_METRIC = "queue_messages_stuck";
/**
 * The proxy's backend timeout: the agreed budget (bridge deadline 3 s <
 * proxy → backend 4 s < the aggregator's 5 s).
 */
const BACKEND_TIMEOUT_SECONDS = 4;
/** kube-controller-manager `--concurrent-horizontal-pod-autoscaler-syncs` default: the HPA controller's workers */
const HPA_WORKERS = 5;
const HPA_SYNC_SECONDS = 2;
/** per-test limit: every wait inside is bounded well below it */
const TEST_TIMEOUT_MS = 240_000;
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");

const yamlDocs = (...docs: object[]) => docs.map((d) => stringify(d)).join("---\n");

let cp: ControlPlane | undefined;
let emulator: Emulator | undefined;
let hang: HangingServer | undefined;
let work = "";
const processes: LoggedProcess[] = [];
let aliceKubeconfig = "";
let bobKubeconfig = "";

/** Component logs (control plane, proxy, bridge) for failure messages. */
function context(lines = 60): string {
  return `${cp?.logs(lines) ?? ""}\n${logTails(processes, lines)}`;
}

const { kubectlJson, replicasOf, hpaOf, waitForReplicas, expectReplicasHeld } = workloadProbe({ kubectlOk: (...a) => cp!.kubectlOk(...a) }, () => context());

interface Deployment {
  spec: { replicas: number };
  status: { replicas?: number };
}

/** The proxy's JSON request log lines (shared/proxy/app.ts). */
interface ProxyRequestLog {
  msg?: string;
  user?: string;
  authn?: string;
  metric?: string;
  code?: number;
  path?: string;
}
function proxyRequests(): ProxyRequestLog[] {
  const proxy = processes.find((p) => p.name === "proxy");
  if (proxy === undefined) return [];
  return readFileSync(proxy.logFile, "utf8")
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as ProxyRequestLog)
    .filter((r) => r.msg === "request");
}

/** The APIService's `Available` condition. */
const availability = () => apiServiceAvailability(cp!);

/**
 * Create an empty namespace, delete it, and return the seconds until it is
 * gone. The namespace controller lists every namespaced resource through
 * discovery first (aggregated groups included) and holds the namespace in
 * `Terminating` while a group's discovery fails
 * (`NamespaceDeletionDiscoveryFailure`).
 */
async function namespaceDeletionSeconds(ns: string, timeoutMs: number): Promise<number> {
  await cp!.kubectlOk(["create", "namespace", ns]);
  const started = Date.now();
  await cp!.kubectlOk(["delete", "namespace", ns, "--wait=false"]);
  await waitFor(
    `namespace ${ns} deleted`,
    async () => {
      const r = await cp!.kubectl(["get", "namespace", ns, "-o", "json"]);
      if (r.status !== 0 && /NotFound/.test(r.stderr)) return true;
      throw new Error(r.status === 0 ? `still there: ${JSON.stringify((JSON.parse(r.stdout) as { status?: unknown }).status)}` : r.stderr.trim());
    },
    { timeoutMs, intervalMs: 250, context },
  );
  return (Date.now() - started) / 1000;
}

/** The proxy's JSON log lines with `msg` (health changes, registration, …). */
function proxyLog(msg: string): Record<string, unknown>[] {
  const proxy = processes.find((p) => p.name === "proxy");
  if (proxy === undefined) return [];
  return readFileSync(proxy.logFile, "utf8")
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((r) => r["msg"] === msg);
}

/** A Deployment of `replicas` (pods stay Pending: no kubelet) and an HPA on it with `metrics` (none = the v2 default, CPU). */
function scaledWorkload(ns: string, name: string, replicas: number, min: number, max: number, metrics?: object[]): object[] {
  return [
    placeholderDeployment(name, ns, replicas),
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name, namespace: ns },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
        minReplicas: min,
        maxReplicas: max,
        ...(metrics ? { metrics } : {}),
      },
    },
  ];
}

function workload(ns: string, replicas: number, queue: string, target: number, min: number, max: number): string {
  return yamlDocs(
    { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "worker", namespace: ns },
      spec: {
        replicas,
        selector: { matchLabels: { app: "worker" } },
        // No kubelet runs: pods stay Pending, which an AverageValue target does not mind.
        template: { metadata: { labels: { app: "worker" } }, spec: { containers: [{ name: "worker", image: "registry.invalid/worker:1" }] } },
      },
    },
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "worker", namespace: ns },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "worker" },
        minReplicas: min,
        maxReplicas: max,
        metrics: [
          {
            type: "External",
            external: {
              metric: { name: METRIC, selector: { matchLabels: { queue } } },
              target: { type: "AverageValue", averageValue: String(target) },
            },
          },
        ],
        // Scale up without the default 15 s rate limit; scale-down
        // stabilisation comes from --horizontal-pod-autoscaler-downscale-stabilization.
        behavior: { scaleUp: { stabilizationWindowSeconds: 0, policies: [{ type: "Pods", value: 100, periodSeconds: 1 }] } },
      },
    },
  );
}

describe("real Kubernetes: aggregation layer, HPA controller, proxy, bridge", () => {
  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    cp = await startControlPlane({ binDir, hpaSyncPeriodSeconds: HPA_SYNC_SECONDS, downscaleStabilizationSeconds: 4, log: (l) => console.log(l) });
    work = mkdtempSync(join(tmpdir(), "emb-k8s-e2e-"));
    emulator = await startEmulator();
    hang = await startHangingServer();
    for (const q of ["team-a-jobs", "team-b-jobs"]) await emulator.createQueue(q);

    // --- the bridge: SQS rule, policies, signature required ---
    const signingKeys = `e2e:${randomBytes(32).toString("base64")}`;
    const bridgeConfig = join(work, "bridge.yaml");
    writeFileSync(
      bridgeConfig,
      yamlDocs(
        e2eBridgeConfig(emulator.endpoint, [
          { name: METRIC, attribute: "ApproximateNumberOfMessages" },
          { name: "queue_messages_delayed", attribute: "ApproximateNumberOfMessagesDelayed" },
          { name: "queue_messages_in_flight", attribute: "ApproximateNumberOfMessagesNotVisible" },
        ]),
        ...(["team-a", "team-b"] as const).map((team) => ({
          apiVersion: "external-metrics-bridge.io/v1alpha1",
          kind: "ExternalMetricPolicy",
          metadata: { name: `${team}-queues`, namespace: team },
          spec: {
            rules: [{ metric: "queue_messages_.*", selector: { matchLabels: { queue: `${team}-jobs` } } }],
            defaultAction: "Deny",
          },
        })),
      ),
    );
    const [bridgePort, proxyPort] = (await freePorts(2)) as [number, number];
    const env = { ...process.env, BRIDGE_SIGNING_KEYS: signingKeys };
    processes.push(await startBridgeProcess({ config: bridgeConfig, port: bridgePort, env, logFile: join(work, "bridge.log"), context }));

    // Users: the shipped example Role lets group team-a-developers read two
    // queue metrics in team-a; bob has no RBAC at all.
    await cp.kubectlOk(["apply", "-f", "-"], { input: yamlDocs({ apiVersion: "v1", kind: "Namespace", metadata: { name: "team-a" } }) });
    await cp.kubectlOk(["apply", "-f", join(ROOT, "infra/examples/rbac/team-a-metrics-reader.yaml")]);
    aliceKubeconfig = await cp.userKubeconfig("alice", ["team-a-developers"]);
    bobKubeconfig = await cp.userKubeconfig("bob");

    // --- the proxy's identity, RBAC and Service (the shipped manifests), the proxy with the shipped Deployment's arguments; it registers the APIService itself ---
    const proxy = await startShippedProxy(cp, {
      work,
      port: proxyPort,
      backends: {
        bridge: { url: `http://127.0.0.1:${bridgePort}`, timeoutSeconds: BACKEND_TIMEOUT_SECONDS },
        stuck: { url: hang.url, timeoutSeconds: BACKEND_TIMEOUT_SECONDS },
      },
      routes: [
        { metric: STUCK_METRIC, backend: "stuck" },
        { metric: ".*", backend: "bridge" },
      ],
      env,
    });
    processes.push(proxy);

    await waitForAPIServiceAvailable(cp, [proxy], { timeoutMs: 90_000, context });
  }, 50 * 60_000);

  afterEach(({ task }) => {
    if (task.result?.state === "fail") console.error(`component logs after the failure of "${task.name}":\n${context(80)}`);
  });

  afterAll(async () => {
    for (const p of [...processes].reverse()) await p.stop(5_000);
    await emulator?.stop();
    await hang?.close();
    await cp?.stop();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("the proxy registered the APIService itself, pointing at its Service with its CA", async () => {
    const apiService = await kubectlJson<{ spec: { service: { name: string; namespace: string }; caBundle?: string; insecureSkipTLSVerify?: boolean; group: string } }>([
      "get",
      "apiservice",
      "v1beta1.external.metrics.k8s.io",
    ]);
    expect(apiService.spec.group).toBe("external.metrics.k8s.io");
    expect(apiService.spec.service).toMatchObject({ name: PROXY_SERVICE, namespace: PROXY_NS });
    expect(apiService.spec.insecureSkipTLSVerify ?? false).toBe(false);
    const caBundle = Buffer.from(apiService.spec.caBundle ?? "", "base64").toString();
    expect(caBundle).toContain("-----BEGIN CERTIFICATE-----");
    // The shipped arguments keep the serving certificate in a Secret (--tls-secret),
    // which the proxy created; its CA is what the aggregator trusts.
    const secret = await kubectlJson<{ data: Record<string, string> }>(["-n", PROXY_NS, "get", "secret", `${PROXY_SERVICE}-tls`]);
    expect(Buffer.from(secret.data["ca.crt"] ?? "", "base64").toString()).toBe(caBundle);
  }, TEST_TIMEOUT_MS);

  it("kubectl get --raw serves discovery and values through kube-apiserver to a user RBAC allows", async () => {
    await emulator!.add("team-a-jobs", 7);
    const discovery = JSON.parse(await cp!.kubectlOk(["get", "--raw", `/apis/${GROUP_VERSION}`], { kubeconfig: aliceKubeconfig })) as {
      kind: string;
      groupVersion: string;
      resources: { name: string; namespaced: boolean; kind: string; verbs: string[] }[];
    };
    expect(discovery).toMatchObject({ kind: "APIResourceList", groupVersion: GROUP_VERSION });
    expect(discovery.resources.map((r) => r.name)).toContain(METRIC);

    const path = `/apis/${GROUP_VERSION}/namespaces/team-a/${METRIC}?labelSelector=${encodeURIComponent("queue=team-a-jobs")}`;
    const values = JSON.parse(await cp!.kubectlOk(["get", "--raw", path], { kubeconfig: aliceKubeconfig })) as {
      kind: string;
      items: { metricName: string; metricLabels: Record<string, string>; value: string; timestamp: string }[];
    };
    expect(values.kind).toBe("ExternalMetricValueList");
    expect(values.items).toHaveLength(1);
    expect(values.items[0]).toMatchObject({ metricName: METRIC, metricLabels: { queue: "team-a-jobs" }, value: "7" });
    expect(values.items[0]!.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  }, TEST_TIMEOUT_MS);

  it("refuses a user without RBAC, and a metric or namespace RBAC does not grant", async () => {
    const path = (ns: string, metric: string) => `/apis/${GROUP_VERSION}/namespaces/${ns}/${metric}?labelSelector=queue%3Dteam-a-jobs`;
    const bob = await cp!.kubectl(["get", "--raw", path("team-a", METRIC)], { kubeconfig: bobKubeconfig });
    expect(bob.status).not.toBe(0);
    expect(bob.stderr).toMatch(/Forbidden/);
    expect(bob.stderr).toContain(`cannot list resource "${METRIC}" in API group "external.metrics.k8s.io" in the namespace "team-a"`);
    // kube-apiserver itself refused: the request never reached the proxy.
    expect(proxyRequests().filter((r) => r.user === "bob")).toEqual([]);
    // Per-metric RBAC: alice's Role names two metrics (the resource is the metric name).
    const granted = await cp!.kubectl(["get", "--raw", path("team-a", "queue_messages_delayed")], { kubeconfig: aliceKubeconfig });
    expect(granted.stderr).toBe("");
    expect(JSON.parse(granted.stdout)).toMatchObject({ kind: "ExternalMetricValueList", items: [{ value: "0" }] });
    const otherMetric = await cp!.kubectl(["get", "--raw", path("team-a", "queue_messages_in_flight")], { kubeconfig: aliceKubeconfig });
    expect(otherMetric.status).not.toBe(0);
    expect(otherMetric.stderr).toMatch(/Forbidden/);
    const otherNamespace = await cp!.kubectl(["get", "--raw", path("team-b", METRIC)], { kubeconfig: aliceKubeconfig });
    expect(otherNamespace.status).not.toBe(0);
    expect(otherNamespace.stderr).toMatch(/Forbidden/);
  }, TEST_TIMEOUT_MS);

  it("the bridge's ExternalMetricPolicy refuses another team's queue through kube-apiserver (403 naming the policy)", async () => {
    const path = `/apis/${GROUP_VERSION}/namespaces/team-a/${METRIC}?labelSelector=queue%3Dteam-b-jobs`;
    const r = await cp!.kubectl(["get", "--raw", path], { kubeconfig: aliceKubeconfig });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/Forbidden/);
    expect(r.stderr).toContain("team-a-queues");
  }, TEST_TIMEOUT_MS);

  it("an AverageValue HPA scales the Deployment to ceil(depth/target), capped at max, and back to min when drained", async () => {
    const [target, min, max] = [4, 1, 6];
    // team-a-jobs holds 7 messages from the previous test.
    await cp!.kubectlOk(["apply", "-f", "-"], { input: workload("team-a", 1, "team-a-jobs", target, min, max) });
    await waitForReplicas("team-a", expectedReplicas(7, target, min, max)); // 2

    await emulator!.add("team-a-jobs", 10); // 17
    await waitForReplicas("team-a", expectedReplicas(17, target, min, max)); // 5
    const hpa = await hpaOf("team-a");
    expect(condition(hpa, "ScalingActive")?.status).toBe("True");
    expect(hpa.status.currentMetrics).toEqual([
      expect.objectContaining({ type: "External", external: expect.objectContaining({ metric: expect.objectContaining({ name: METRIC }) }) }),
    ]);

    // The HPA's reads reached the proxy through the aggregator's front-proxy
    // certificate, as the controller's service account.
    const hpaReads = proxyRequests().filter((r) => r.metric === METRIC && r.path?.includes("/namespaces/team-a/"));
    expect(hpaReads.filter((r) => r.user === "system:serviceaccount:kube-system:horizontal-pod-autoscaler" && r.code === 200).length).toBeGreaterThan(0);
    expect(new Set(hpaReads.map((r) => r.authn))).toEqual(new Set(["front-proxy"]));

    await emulator!.add("team-a-jobs", 23); // 40 → 10, capped at 6
    await waitForReplicas("team-a", expectedReplicas(40, target, min, max));
    expect(condition(await hpaOf("team-a"), "ScalingLimited")).toMatchObject({ status: "True", reason: "TooManyReplicas" });

    expect(await emulator!.drain("team-a-jobs", 40)).toBe(40);
    await waitForReplicas("team-a", min);
  }, TEST_TIMEOUT_MS);

  it("a namespace whose ExternalMetricPolicy denies the queue: ScalingActive=False FailedGetExternalMetric, replicas unchanged", async () => {
    await emulator!.add("team-a-jobs", 30);
    // team-b's HPA names team A's queue; team-b's policy allows only team-b-jobs.
    await cp!.kubectlOk(["apply", "-f", "-"], { input: workload("team-b", 2, "team-a-jobs", 4, 1, 6) });
    const active = await waitFor(
      "team-b HPA ScalingActive=False",
      async () => {
        const c = condition(await hpaOf("team-b"), "ScalingActive");
        return c?.status === "False" ? c : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000, context },
    );
    expect(active.reason).toBe("FailedGetExternalMetric");
    expect(active.message).toContain("team-b-queues");
    await expectReplicasHeld("team-b", 2, 4 * HPA_SYNC_SECONDS);
    // team-a reads the same 30 messages and scales on them meanwhile.
    await waitForReplicas("team-a", expectedReplicas(30, 4, 1, 6));
  }, TEST_TIMEOUT_MS);

  it("stopping the emulator scales nothing down (the metric fails; the HPA holds)", async () => {
    const before = await replicasOf("team-a");
    expect(before).toBe(expectedReplicas(30, 4, 1, 6));
    await emulator!.stop();
    const stoppedAt = Date.now();
    // The bridge answers 503 (its Retry-After is the proxy's back-off for
    // the series); the proxy passes the Status on without Retry-After, so
    // client-go (the HPA's client), which retries a 5xx only when it carries
    // Retry-After (k8s.io/client-go rest/with_retry.go), makes one attempt.
    // Meanwhile the HPA must not scale.
    const seen = new Set<number>();
    const active = await waitFor(
      "team-a HPA ScalingActive=False after the emulator stopped",
      async () => {
        seen.add(await replicasOf("team-a"));
        const c = condition(await hpaOf("team-a"), "ScalingActive");
        return c?.status === "False" ? c : undefined;
      },
      { timeoutMs: 45_000, intervalMs: 1000, context },
    );
    expect([...seen], "replicas while the metric was failing").toEqual([before]);
    console.log(`HPA reported FailedGetExternalMetric ${Math.round((Date.now() - stoppedAt) / 1000)}s after the emulator stopped`);
    expect(active.reason).toBe("FailedGetExternalMetric");
    // the bridge's 503 Status message, carried through proxy, aggregator and client-go
    expect(active.message).toContain("unable to fetch metrics from external metrics API");
    expect(active.message).toContain("GetQueueAttributes");
    await expectReplicasHeld("team-a", before, 5 * HPA_SYNC_SECONDS);
    await expectReplicasHeld("team-b", 2, 1);
  }, TEST_TIMEOUT_MS);

  it("a client-go read of a metric whose backend hangs fails in one attempt, in under 6 s", async () => {
    // kubectl get --raw is client-go's rest.Request, the HPA's client: a 5xx
    // with Retry-After is retried up to 10 times (11 × the proxy's timeout
    // before); without it, one attempt. -v=6 logs each response.
    const ns = `probe-${randomBytes(3).toString("hex")}`;
    const path = `/apis/${GROUP_VERSION}/namespaces/${ns}/${STUCK_METRIC}?labelSelector=${encodeURIComponent("queue=stuck")}`;
    const started = Date.now();
    const r = await cp!.kubectl(["get", "--raw", path, "-v=6"], { timeoutMs: 120_000 });
    const seconds = (Date.now() - started) / 1000;
    console.log(`hanging backend: kubectl get --raw failed after ${seconds.toFixed(1)}s`);
    expect(r.status, r.stdout).not.toBe(0);
    expect(r.stderr).toMatch(/ServiceUnavailable|service unavailable/i);
    expect(r.stderr).toContain(`did not answer within ${BACKEND_TIMEOUT_SECONDS * 1000} ms`);
    // One attempt, seen three ways: client-go's own log, the proxy, the backend.
    const responses = r.stderr.split("\n").filter((l) => l.includes(`/namespaces/${ns}/${STUCK_METRIC}`) && /\b503\b/.test(l));
    expect(responses, r.stderr).toHaveLength(1);
    expect(proxyRequests().filter((p) => p.path?.includes(`/namespaces/${ns}/`))).toHaveLength(1);
    expect(hang!.requestLines.filter((l) => l.includes(`/namespaces/${ns}/`))).toHaveLength(1);
    expect(seconds).toBeLessThan(6);
  }, TEST_TIMEOUT_MS);

  it(`an unrelated HPA's change applies within a sync period and one backend timeout while ${HPA_WORKERS} HPAs read a hanging backend`, async () => {
    // Every HPA controller worker is held by a hanging read at times: before,
    // each hanging read held its worker for 11 attempts (≈ 45 s), and every
    // other HPA in the cluster (CPU ones too) waited that long.
    const minBump = async (ns: string, name: string, replicas: number) => {
      const started = Date.now();
      await cp!.kubectlOk(["-n", ns, "patch", "hpa", name, "--type=merge", "-p", JSON.stringify({ spec: { minReplicas: replicas } })]);
      await waitFor(
        `deployment ${ns}/${name} at ${replicas} replicas`,
        async () => (await kubectlJson<Deployment>(["-n", ns, "get", "deployment", name])).spec.replicas === replicas,
        { timeoutMs: 90_000, intervalMs: 200, context },
      );
      return (Date.now() - started) / 1000;
    };
    // A CPU HPA (no metrics server here: it scales only to enforce minReplicas, which needs no metric read).
    await cp!.kubectlOk(["apply", "-f", "-"], {
      input: yamlDocs({ apiVersion: "v1", kind: "Namespace", metadata: { name: "calm" } }, ...scaledWorkload("calm", "web", 1, 1, 8)),
    });
    const baseline = await minBump("calm", "web", 2);

    const stuck = (i: number) =>
      scaledWorkload("stuck", `reader-${i}`, 1, 1, 4, [
        {
          type: "External",
          external: { metric: { name: STUCK_METRIC, selector: { matchLabels: { queue: `stuck-${i}` } } }, target: { type: "AverageValue", averageValue: "1" } },
        },
      ]);
    await cp!.kubectlOk(["apply", "-f", "-"], {
      input: yamlDocs({ apiVersion: "v1", kind: "Namespace", metadata: { name: "stuck" } }, ...Array.from({ length: HPA_WORKERS }, (_, i) => stuck(i)).flat()),
    });
    try {
      // Every hanging HPA has been read (and failed) at least once: the workers are busy with them.
      await waitFor(
        `the ${HPA_WORKERS} hanging HPAs report FailedGetExternalMetric`,
        async () => {
          for (let i = 0; i < HPA_WORKERS; i++) {
            const hpa = await kubectlJson<Hpa>(["-n", "stuck", "get", "hpa", `reader-${i}`]);
            if (condition(hpa, "ScalingActive")?.status !== "False") return false;
          }
          return true;
        },
        { timeoutMs: 120_000, intervalMs: 1000, context },
      );
      const latencies: number[] = [];
      for (const replicas of [3, 4, 5]) latencies.push(await minBump("calm", "web", replicas));
      console.log(`unrelated HPA change applied after ${latencies.map((l) => l.toFixed(1)).join(", ")}s with ${HPA_WORKERS} hanging HPAs (baseline ${baseline.toFixed(1)}s)`);
      // One sync period to be picked up, at most one hanging read (the proxy's
      // backend timeout) to wait for a free worker, and slack for this machine.
      for (const l of latencies) expect(l).toBeLessThan(HPA_SYNC_SECONDS + BACKEND_TIMEOUT_SECONDS + 2);
      const reads = hang!.requestLines.filter((l) => l.includes("/namespaces/stuck/"));
      expect(reads.length).toBeGreaterThan(0);
    } finally {
      await cp!.kubectl(["-n", "stuck", "delete", "hpa", "--all"]);
    }
  }, TEST_TIMEOUT_MS);

  // Last: it stops the bridge.
  it("with every backend down the APIService stays Available, kubectl api-resources works, an empty namespace deletes as fast as before, and value reads answer a Status", async () => {
    const healthy = await namespaceDeletionSeconds("doomed-healthy", 60_000);
    const bridge = processes.find((p) => p.name === "bridge")!;
    await bridge.stop(5_000);
    const stoppedAt = Date.now();
    const requestsBefore = proxyRequests().length;

    // 15 s: 15 readiness rounds (1 s), past the proxy's 10 s discovery TTL,
    // and an aggregator availability check forced every 3 s (an APIService
    // update requeues it: kube-aggregator remote_available_controller.go).
    let poke = 0;
    while (Date.now() - stoppedAt < 15_000) {
      const available = await availability();
      const at = ((Date.now() - stoppedAt) / 1000).toFixed(1);
      expect(available, `APIService Available ${at}s after the bridge stopped`).toMatchObject({ status: "True" });
      if (Date.now() - stoppedAt >= poke * 3000) {
        await cp!.kubectlOk(["annotate", "apiservice", API_SERVICE, `e2e.external-metrics-bridge.io/poke=${poke++}`, "--overwrite"]);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    const checks = proxyRequests()
      .slice(requestsBefore)
      .filter((r) => r.user === "system:kube-aggregator" && r.path === `/apis/${GROUP_VERSION}`);
    expect(checks.length, "aggregator availability checks during the outage").toBeGreaterThanOrEqual(3);
    expect(checks.filter((r) => r.code !== 200)).toEqual([]);
    // The proxy saw the outage (logged once) and discovery kept what the bridge listed.
    expect(proxyLog("backend does not answer discovery; discovery keeps what it last listed").filter((l) => l["backend"] === "bridge")).toHaveLength(1);
    const discovery = JSON.parse(await cp!.kubectlOk(["get", "--raw", `/apis/${GROUP_VERSION}`])) as { resources: { name: string }[] };
    expect(discovery.resources.map((r) => r.name)).toContain(METRIC);

    const apiResources = await cp!.kubectl(["api-resources"]);
    expect(apiResources.status, apiResources.stderr).toBe(0);
    expect(apiResources.stderr).not.toMatch(/external\.metrics/);
    expect(apiResources.stdout).toContain(`${GROUP_VERSION}`);

    const outage = await namespaceDeletionSeconds("doomed-outage", 60_000);
    console.log(`empty namespace deleted in ${healthy.toFixed(1)}s with the bridge up, ${outage.toFixed(1)}s with it down`);
    expect(outage).toBeLessThan(20);

    // A value read answers a Status error, in one attempt.
    const path = `/apis/${GROUP_VERSION}/namespaces/team-a/${METRIC}?labelSelector=${encodeURIComponent("queue=team-a-jobs")}`;
    const started = Date.now();
    const read = await cp!.kubectl(["get", "--raw", path, "-v=6"], { kubeconfig: aliceKubeconfig, timeoutMs: 120_000 });
    expect(read.status).not.toBe(0);
    expect(read.stderr).toMatch(/ServiceUnavailable|service unavailable/i);
    expect(read.stderr).toContain("backend bridge is unreachable");
    expect(read.stderr.split("\n").filter((l) => l.includes(`/namespaces/team-a/${METRIC}`) && /\b503\b/.test(l))).toHaveLength(1);
    expect((Date.now() - started) / 1000).toBeLessThan(6);
  }, TEST_TIMEOUT_MS);
});
