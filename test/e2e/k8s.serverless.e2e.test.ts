/**
 * End to end against real Kubernetes with the bridge on its serverless
 * runtimes: the scaling scenario of test/e2e/k8s.e2e.test.ts, with the HPA
 * controller's reads going through the aggregator and the in-cluster proxy
 * (signatures on) to
 *
 * - the **Cloudflare Worker** as a deploy builds it (`wrangler deploy
 *   --dry-run`, `test/helpers/worker.ts`), running in workerd, and
 * - the **Lambda handler** as `npm run build:lambda` builds it
 *   (`infra/lambda/build.ts`), behind a local Function-URL-shaped adapter in
 *   its own process (`test/k8s/function-url.ts`: HTTP request → payload 2.0
 *   event → the artifact's `handler` → HTTP answer),
 *
 * each reading the fauxqs SQS emulator through the real AWS SDK:
 *
 *   HPA controller ─► kube-apiserver (aggregator) ─► proxy (front-proxy
 *   authn, SubjectAccessReview, signing) ─► Worker (workerd) | Lambda (adapter) ─► fauxqs
 *
 * One control plane and one proxy serve both runtimes (two routes by metric
 * name); each runtime has its own namespace, queue, metric and
 * ExternalMetricPolicy. Both functions get `BRIDGE_SIGNING_KEYS` like the
 * proxy and refuse an unsigned read; the Lambda also gets `BRIDGE_AUDIENCE`,
 * the origin the proxy addresses, since it sees its Function URL domain as
 * its own origin.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { buildLambda } from "../../infra/lambda/build.ts";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { startWorker, type RunningWorker } from "../helpers/worker.ts";
import { buildControlPlane, freePorts, logTails, startControlPlane, startProcess, waitFor, type ControlPlane, type LoggedProcess } from "../k8s/cluster.ts";
import { e2eBridgeConfig, localProxyFlags, placeholderDeployment, PROXY_NS, PROXY_SERVICE, shippedManifests, waitForAPIServiceAvailable, withFlags, type Condition } from "../k8s/shipped.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const GROUP_VERSION = "external.metrics.k8s.io/v1beta1";
const HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";
const HPA_SYNC_SECONDS = 2;
/** the agreed budget: bridge deadline 3 s < proxy → backend 4 s < the aggregator's 5 s */
const BACKEND_TIMEOUT_SECONDS = 4;
const TEST_TIMEOUT_MS = 240_000;

/** The two serverless runtimes: namespace, queue and metric of each (the proxy routes by metric). */
const RUNTIMES = {
  worker: { ns: "team-worker", queue: "team-worker-jobs", metric: "worker_messages_ready" },
  lambda: { ns: "team-lambda", queue: "team-lambda-jobs", metric: "lambda_messages_ready" },
} as const;
type Runtime = keyof typeof RUNTIMES;

const yamlDocs = (...docs: object[]) => docs.map((d) => stringify(d)).join("---\n");

/** ceil(depth / target) clamped to [min, max]: what an AverageValue HPA wants. */
const expectedReplicas = (depth: number, target: number, min: number, max: number) => Math.min(max, Math.max(min, Math.ceil(depth / target)));

/** The config of one runtime's bridge: its SQS rule and its namespace's policy (reads of its own queue only). */
function bridgeConfigText(endpoint: string, runtime: Runtime): string {
  const { ns, queue, metric } = RUNTIMES[runtime];
  return yamlDocs(e2eBridgeConfig(endpoint, [{ name: metric, attribute: "ApproximateNumberOfMessages" }]), {
    apiVersion: "external-metrics-bridge.io/v1alpha1",
    kind: "ExternalMetricPolicy",
    metadata: { name: `${ns}-queue`, namespace: ns },
    // only the HPA controller, as the proxy's signature names it
    spec: { subjects: { serviceAccounts: ["kube-system/horizontal-pod-autoscaler"] }, rules: [{ metric, selector: { matchLabels: { queue } } }], defaultAction: "Deny" },
  });
}

/** Namespace, Deployment `worker` (pods stay Pending: no kubelet) and an AverageValue HPA on `metric{queue}`. */
function workload(runtime: Runtime, target: number, min: number, max: number): string {
  const { ns, queue, metric } = RUNTIMES[runtime];
  return yamlDocs(
    { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
    placeholderDeployment("worker", ns),
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "worker", namespace: ns },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "worker" },
        minReplicas: min,
        maxReplicas: max,
        metrics: [{ type: "External", external: { metric: { name: metric, selector: { matchLabels: { queue } } }, target: { type: "AverageValue", averageValue: String(target) } } }],
        behavior: { scaleUp: { stabilizationWindowSeconds: 0, policies: [{ type: "Pods", value: 100, periodSeconds: 1 }] } },
      },
    },
  );
}

let cp: ControlPlane | undefined;
let emulator: Emulator | undefined;
let worker: RunningWorker | undefined;
let lambdaUrl = "";
let work = "";
const processes: LoggedProcess[] = [];

function context(lines = 60): string {
  return `${cp?.logs(lines) ?? ""}\n${logTails(processes, lines)}\n----- workerd -----\n${(worker?.logs() ?? "").split("\n").slice(-lines).join("\n")}`;
}

/** JSON lines of one logged process. */
function jsonLines(name: string): Record<string, unknown>[] {
  const p = processes.find((x) => x.name === name);
  if (p === undefined) return [];
  return readFileSync(p.logFile, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return []; // a line cut by a concurrent write
      }
    });
}

interface Hpa {
  status: { conditions?: Condition[]; currentMetrics?: unknown[] };
}
const kubectlJson = async <T,>(args: string[]) => JSON.parse(await cp!.kubectlOk([...args, "-o", "json"])) as T;
const replicasOf = async (ns: string) => (await kubectlJson<{ spec: { replicas: number } }>(["-n", ns, "get", "deployment", "worker"])).spec.replicas;

async function waitForReplicas(ns: string, replicas: number, timeoutMs = 90_000): Promise<void> {
  let last = "";
  await waitFor(
    `deployment ${ns}/worker at ${replicas} replicas`,
    async () => {
      const [current, hpa] = [await replicasOf(ns), await kubectlJson<Hpa>(["-n", ns, "get", "hpa", "worker"])];
      last = `spec.replicas=${current}, hpa.status=${JSON.stringify(hpa.status)}`;
      return current === replicas;
    },
    { timeoutMs, intervalMs: 1000, context: () => `${last}\n${context()}` },
  );
}

describe("real Kubernetes: the HPA scales through the proxy on the Worker (workerd) and the Lambda handler (Function URL adapter)", () => {
  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    work = mkdtempSync(join(tmpdir(), "emb-k8s-serverless-"));
    // the two deploy builds while the control plane starts
    const [started, lambdaBuild] = await Promise.all([
      startControlPlane({ binDir, hpaSyncPeriodSeconds: HPA_SYNC_SECONDS, downscaleStabilizationSeconds: 4, log: (l) => console.log(l) }),
      buildLambda({ outdir: join(work, "lambda") }),
      startEmulator().then((e) => (emulator = e)),
    ]);
    cp = started;
    for (const { queue } of Object.values(RUNTIMES)) await emulator!.createQueue(queue);

    const signingKeys = `e2e:${randomBytes(32).toString("base64")}`;
    const [lambdaPort, proxyPort] = (await freePorts(2)) as [number, number];

    // --- the Worker in workerd: config and keys as Worker secrets ---
    worker = await startWorker(bridgeConfigText(emulator!.endpoint, "worker"), { BRIDGE_SIGNING_KEYS: signingKeys });

    // --- the Lambda artifact behind the Function URL adapter; config and keys as Lambda environment variables ---
    lambdaUrl = `http://127.0.0.1:${lambdaPort}`;
    const lambdaEnv = {
      PATH: process.env["PATH"] ?? "",
      BRIDGE_CONFIG: bridgeConfigText(emulator!.endpoint, "lambda"),
      BRIDGE_SIGNING_KEYS: signingKeys,
      BRIDGE_AUDIENCE: lambdaUrl,
      AWS_REGION: "us-east-1",
    };
    const lambda = startProcess("lambda", process.execPath, [join(ROOT, "test/k8s/function-url.ts"), "--artifact", lambdaBuild.outdir, "--port", String(lambdaPort)], {
      logFile: join(work, "lambda.log"),
      env: lambdaEnv,
    });
    processes.push(lambda);
    await waitFor(
      "Function URL adapter /healthz",
      async () => {
        if (lambda.exitCode !== undefined) throw new Error(`adapter exited with ${lambda.exitCode}`);
        return (await fetch(`${lambdaUrl}/healthz`)).ok;
      },
      { timeoutMs: 30_000, context },
    );

    // --- the proxy as shipped, one route per runtime, signing with the same keys ---
    const shipped = shippedManifests();
    await cp.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(...shipped.install) });
    const token = (await cp.kubectlOk(["-n", PROXY_NS, "create", "token", PROXY_SERVICE, "--duration=2h"])).trim();
    const proxyConfig = join(work, "proxy.yaml");
    writeFileSync(
      proxyConfig,
      stringify({
        apiVersion: "external-metrics-bridge.io/v1alpha1",
        kind: "ProxyConfig",
        backends: {
          worker: { url: worker.url, timeoutSeconds: BACKEND_TIMEOUT_SECONDS },
          lambda: { url: lambdaUrl, timeoutSeconds: BACKEND_TIMEOUT_SECONDS },
        },
        routes: [
          { metric: RUNTIMES.worker.metric, backend: "worker" },
          { metric: RUNTIMES.lambda.metric, backend: "lambda" },
        ],
        cache: { ttlSeconds: 1 },
      }),
    );
    const proxyArgs = withFlags(shipped.proxyArgs, {
      "--config": proxyConfig,
      ...localProxyFlags(cp.tokenKubeconfig("proxy", token), proxyPort),
    });
    const proxy = startProcess("proxy", process.execPath, [join(ROOT, "functions/proxy/main.ts"), ...proxyArgs], {
      logFile: join(work, "proxy.log"),
      env: { ...process.env, BRIDGE_SIGNING_KEYS: signingKeys, POD_NAMESPACE: PROXY_NS },
    });
    processes.push(proxy);
    await waitForAPIServiceAvailable(cp, [proxy, lambda], { timeoutMs: 90_000, context });
  }, 50 * 60_000);

  afterEach(({ task }) => {
    if (task.result?.state === "fail") console.error(`component logs after the failure of "${task.name}":\n${context(80)}`);
  });

  afterAll(async () => {
    for (const p of [...processes].reverse()) await p.stop(5_000);
    await worker?.close();
    await emulator?.stop();
    await cp?.stop();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("both functions refuse an unsigned read (signatures are on), and discovery through kube-apiserver lists both metrics", async () => {
    for (const runtime of ["worker", "lambda"] as const) {
      const { ns, queue, metric } = RUNTIMES[runtime];
      const url = `${runtime === "worker" ? worker!.url : lambdaUrl}/apis/${GROUP_VERSION}/namespaces/${ns}/${metric}?labelSelector=${encodeURIComponent(`queue=${queue}`)}`;
      const res = await fetch(url);
      expect(res.status, `${runtime}: ${await res.clone().text()}`).toBe(401);
      expect(await res.json()).toMatchObject({ kind: "Status", reason: "Unauthorized" });
    }
    const discovery = JSON.parse(await cp!.kubectlOk(["get", "--raw", `/apis/${GROUP_VERSION}`])) as { resources: { name: string }[] };
    expect(discovery.resources.map((r) => r.name).sort()).toEqual([RUNTIMES.lambda.metric, RUNTIMES.worker.metric]);
  });

  it("each function evaluates the caller the proxy signed for: the cluster admin (allowed by RBAC) is refused by the function's policy", async () => {
    for (const runtime of ["worker", "lambda"] as const) {
      const { ns, queue, metric } = RUNTIMES[runtime];
      const r = await cp!.kubectl(["get", "--raw", `/apis/${GROUP_VERSION}/namespaces/${ns}/${metric}?labelSelector=${encodeURIComponent(`queue=${queue}`)}`]);
      expect(r.status, `${runtime}: ${r.stdout}`).not.toBe(0);
      expect(r.stderr, runtime).toMatch(/Forbidden/);
      // the function's own answer (the proxy here runs no cluster policies): it saw the admin, not the proxy, as the caller
      expect(r.stderr, runtime).toContain(`user "kubernetes-admin" may not read it in namespace "${ns}": no ExternalMetricPolicy applies to user "kubernetes-admin"`);
      expect(r.stderr, runtime).toContain("the bridge's policy.defaultAction is Deny");
    }
  });

  for (const runtime of ["worker", "lambda"] as const) {
    it(`${runtime}: an AverageValue HPA scales to ceil(depth/target) on the emulated queue, capped at max, and back to min when drained`, async () => {
      const { ns, queue, metric } = RUNTIMES[runtime];
      const [target, min, max] = [4, 1, 5];
      await emulator!.add(queue, 7);
      await cp!.kubectlOk(["apply", "-f", "-"], { input: workload(runtime, target, min, max) });
      await waitForReplicas(ns, expectedReplicas(7, target, min, max)); // 2

      await emulator!.add(queue, 23); // 30 → 8, capped at 5
      await waitForReplicas(ns, expectedReplicas(30, target, min, max));
      const hpa = await kubectlJson<Hpa>(["-n", ns, "get", "hpa", "worker"]);
      expect(hpa.status.conditions?.find((c) => c.type === "ScalingActive")?.status).toBe("True");
      expect(hpa.status.conditions?.find((c) => c.type === "ScalingLimited")).toMatchObject({ status: "True", reason: "TooManyReplicas" });

      // The HPA controller's reads reached the proxy through the aggregator
      // and went, signed, to this runtime's backend, which answered them.
      const reads = jsonLines("proxy").filter((r) => r["msg"] === "request" && r["metric"] === metric && String(r["path"]).includes(`/namespaces/${ns}/`));
      const fromHpa = reads.filter((r) => r["user"] === HPA_USER && r["authn"] === "front-proxy" && r["code"] === 200);
      expect(fromHpa.length, JSON.stringify(reads.slice(-5))).toBeGreaterThan(0);
      expect(new Set(fromHpa.map((r) => r["backend"]))).toEqual(new Set([runtime]));
      if (runtime === "lambda") {
        const invocations = jsonLines("lambda").filter((r) => r["msg"] === "invoke" && String(r["path"]).includes(`/namespaces/${ns}/${metric}`));
        expect(invocations.filter((r) => r["status"] === 200).length).toBeGreaterThan(0);
      }

      expect(await emulator!.drain(queue, 30)).toBe(30);
      await waitForReplicas(ns, min);
    }, TEST_TIMEOUT_MS);
  }
});
