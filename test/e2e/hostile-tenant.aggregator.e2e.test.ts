/**
 * A hostile tenant against the real control plane (issue 23): every attack
 * that a pod with its own ServiceAccount token can make, sent two ways —
 * through kube-apiserver's aggregation layer (the APIService's path) and
 * straight at the proxy's port (any pod can reach the proxy's Service) — on
 * the shipped proxy (the plain manifests' Deployment arguments and
 * ProxyConfig: cluster policies on, whenNoneApply Defer), an open bridge
 * (`defaultAction: Allow`, so only the cluster's policy objects decide) and
 * fauxqs.
 *
 * The validating webhook is deliberately NOT installed: "with the webhook
 * down or bypassed, nothing stops that edit" — the proxy's own handling of
 * invalid and hostile policy objects is what is tested.
 *
 * Measured on the code before issue 23 (this file run against it): the
 * direct spelling tricks read the forbidden queue, the main port answered
 * AdmissionReviews, an invalid edit opened what it had denied, a new invalid
 * object was dropped, and the hostile patterns held the proxy (reads timed
 * out). Through the aggregator the spellings were already refused: kube-
 * apiserver decodes the path for its own RBAC and forwards it re-escaped, so
 * `team%2Db` reaches the proxy as `team-b`; that test guards it.
 *
 * The tenant `team-b/tenant` may read external metrics in every namespace
 * (RBAC grants it): only the policy objects stand between it and the
 * queues. team-b's ExternalMetricPolicy allows `queue=ci_jobs` only; the
 * cluster guardrail forbids `queue=ledger` everywhere.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { request as httpsRequest } from "node:https";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { buildControlPlane, freePorts, logTails, startControlPlane, startProcess, waitFor, type ControlPlane, type LoggedProcess } from "../k8s/cluster.ts";
import {
  e2eBridgeConfig,
  localProxyFlags,
  PROXY_NS,
  PROXY_SERVICE,
  shippedManifests,
  shippedObjects,
  shippedProxyConfig,
  startBridgeProcess,
  waitForAPIServiceAvailable,
  withFlags,
} from "../k8s/shipped.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const GROUP = "external-metrics-bridge.io";
const API_VERSION = `${GROUP}/v1alpha1`;
const GV = "external.metrics.k8s.io/v1beta1";
const METRIC = "queue_messages_ready";
/** queues and their depths: ci_jobs is team-b's, payments is not; ledger is forbidden by the guardrail; a_jobs is team-a's */
const QUEUES = { ci_jobs: 2, payments: 7, ledger: 9, a_jobs: 3 } as const;

const yamlDocs = (...docs: object[]) => docs.map((d) => stringify(d)).join("---\n");

let cp: ControlPlane | undefined;
let emulator: Emulator | undefined;
let work = "";
let proxyPort = 0;
let token = "";
const processes: LoggedProcess[] = [];

function context(lines = 60): string {
  return `${cp?.logs(lines) ?? ""}\n${logTails(processes, lines)}`;
}

/** A status code and the body text. */
interface Raw {
  status: number;
  text: string;
  ms: number;
}

/**
 * GET or POST `path` exactly as written (no normalization: node:https sends
 * the request target verbatim) to `base`, with the tenant's bearer token.
 */
function raw(base: string, path: string, options: { method?: string; body?: string; ca?: string; auth?: boolean; timeoutMs?: number } = {}): Promise<Raw> {
  const url = new URL(base);
  const started = performance.now();
  return new Promise<Raw>((resolve, reject) => {
    const req = httpsRequest(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: options.method ?? "GET",
        headers: {
          accept: "application/json",
          ...(options.auth === false ? {} : { authorization: `Bearer ${token}` }),
          ...(options.body !== undefined ? { "content-type": "application/json" } : {}),
        },
        ...(options.ca !== undefined ? { ca: options.ca } : { rejectUnauthorized: false }),
        timeout: options.timeoutMs ?? 10_000,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), ms: performance.now() - started }));
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer to ${path} within ${options.timeoutMs ?? 10_000} ms`)));
    req.on("error", reject);
    req.end(options.body);
  });
}

/** Through kube-apiserver (the aggregation layer), as the tenant. */
const viaAggregator = (path: string) => raw(cp!.server, path, { ca: cp!.ca.cert });
/** Straight at the proxy's port, as the tenant (the proxy authenticates the token with a TokenReview). */
const direct = (path: string) => raw(`https://127.0.0.1:${proxyPort}`, path);

const selector = (queue: string) => `labelSelector=${encodeURIComponent(`queue=${queue}`)}`;
const read = (ns: string, queue: string) => `/apis/${GV}/namespaces/${ns}/${METRIC}?${selector(queue)}`;

/**
 * Every spelling of "team-b's queue_messages_ready with queue=payments" that
 * is not the canonical one: percent-encoded unreserved characters in either
 * case, an encoded `/`, dot segments plain and encoded, empty segments,
 * trailing segments.
 */
const DENIED = selector("payments");
const VARIANTS: readonly string[] = [
  `/apis/${GV}/namespaces/team%2Db/${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces/team%2db/${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces/%74eam-b/${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces/%74%65%61%6D%2D%62/${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces/team-b/queue_messages_%72eady?${DENIED}`,
  `/apis/${GV}/namespaces/team-b%2F${METRIC}/secret_depth?${DENIED}`,
  `/apis/${GV}/namespaces/team-b%2f${METRIC}/secret_depth?${DENIED}`,
  `/apis/${GV}/namespaces/team-a/%2E%2E/team-b/${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces/team-a/../team-b/${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces/team-b/./${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces//team-b/${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces/team-b//${METRIC}?${DENIED}`,
  `/apis/${GV}/namespaces/team-b/${METRIC}/?${DENIED}`,
  `/apis/${GV}/namespaces/team-b/${METRIC}/extra?${DENIED}`,
  `/apis/${GV}//namespaces/team-b/${METRIC}?${DENIED}`,
];

/** Whether an answer hands out a value (an ExternalMetricValueList with items). */
function leaksValue(a: Raw): boolean {
  if (a.status !== 200) return false;
  try {
    const body = JSON.parse(a.text) as { kind?: string; items?: unknown[] };
    return body.kind === "ExternalMetricValueList" || (body.items?.length ?? 0) > 0;
  } catch {
    return true; // a 200 that is not JSON is not ours to allow either
  }
}

/** A namespace policy: `metric` pattern, selector as written. */
function nsPolicy(ns: string, name: string, rule: Record<string, unknown>): Record<string, unknown> {
  return { apiVersion: API_VERSION, kind: "ExternalMetricPolicy", metadata: { name, namespace: ns }, spec: { rules: [rule], defaultAction: "Deny" } };
}

/** The cluster guardrail: queue metrics for any queue but the ledger. */
function guardrail(pattern = "queue_messages_.*"): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: "ClusterExternalMetricPolicy",
    metadata: { name: "no-ledger" },
    spec: {
      rules: [{ metric: pattern, selector: { matchExpressions: [{ key: "queue", operator: "NotIn", values: ["ledger"] }] } }],
      defaultAction: "Deny",
    },
  };
}

const TEAM_B = nsPolicy("team-b", "ci-only", { metric: "queue_messages_.*", selector: { matchLabels: { queue: "ci_jobs" } } });

/**
 * A pattern RE2 compiles only at great cost: a 60-way alternation of
 * two-class sequences repeated `times` (≤ 1000) times, 429 characters (the
 * CRD allows 1,024). RE2JS takes ~90 ms to compile one on this machine
 * (before a program-size check refused it, after compiling); `times`
 * varies so that no two rules share a compile.
 */
function hostilePattern(times: number): string {
  const classes = ["\\pL", "\\pN", "\\pP", "\\pS", "\\pM", "\\pZ"];
  const p = `(?:${Array.from({ length: 60 }, (_, k) => classes[k % 6]! + classes[(k + 1) % 6]!).join("|")}){${times}}`;
  expect(p.length).toBeLessThanOrEqual(1024);
  return p;
}

async function apply(...objects: object[]): Promise<void> {
  await cp!.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(...objects) });
}

/** Poll `path` through the aggregator until `until` holds for its answer. */
async function eventually(path: string, until: (a: Raw) => boolean, what: string): Promise<Raw> {
  return waitFor(
    what,
    async () => {
      const a = await viaAggregator(path);
      return until(a) ? a : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 200, context },
  );
}

describe("a hostile tenant on a real control plane: the aggregator and the proxy's own port", () => {
  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    cp = await startControlPlane({ binDir, log: (l) => console.log(l) });
    work = mkdtempSync(join(tmpdir(), "emb-hostile-"));
    emulator = await startEmulator();
    for (const [queue, depth] of Object.entries(QUEUES)) {
      await emulator.createQueue(queue);
      await emulator.add(queue, depth);
    }

    // --- the bridge: open, signatures required ---
    const signingKeys = `e2e:${randomBytes(32).toString("base64")}`;
    const bridgeConfig = join(work, "bridge.yaml");
    writeFileSync(bridgeConfig, stringify({ ...e2eBridgeConfig(emulator.endpoint, [{ name: METRIC, attribute: "ApproximateNumberOfMessages" }]), policy: { defaultAction: "Allow" } }));
    const [bridgePort, port] = (await freePorts(2)) as [number, number];
    proxyPort = port;
    const env = { ...process.env, BRIDGE_SIGNING_KEYS: signingKeys };
    processes.push(await startBridgeProcess({ config: bridgeConfig, port: bridgePort, env, logFile: join(work, "bridge.log"), context }));

    // --- CRDs, RBAC, Service; no webhook configuration (bypassed) ---
    const crds = shippedObjects(["CustomResourceDefinition"]);
    await apply(...crds);
    await cp.kubectlOk(["wait", "--for=condition=Established", "--timeout=60s", ...crds.map((c) => `crd/${c.metadata.name}`)]);
    const shipped = { ...shippedManifests(), config: shippedProxyConfig() };
    await apply(...shipped.install);
    for (const ns of ["team-a", "team-b"]) await cp.kubectlOk(["create", "namespace", ns]);

    // --- the tenant: a ServiceAccount that RBAC lets read external metrics anywhere ---
    await apply(
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "tenant", namespace: "team-b" } },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: "read-external-metrics" },
        rules: [{ apiGroups: ["external.metrics.k8s.io"], resources: ["*"], verbs: ["get", "list"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: "tenant-reads-external-metrics" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "read-external-metrics" },
        subjects: [{ kind: "ServiceAccount", name: "tenant", namespace: "team-b" }],
      },
    );
    token = (await cp.kubectlOk(["-n", "team-b", "create", "token", "tenant", "--duration=2h"])).trim();
    await apply(guardrail(), TEAM_B);

    // --- the proxy, as shipped ---
    const proxyToken = (await cp.kubectlOk(["-n", PROXY_NS, "create", "token", PROXY_SERVICE, "--duration=2h"])).trim();
    const config = join(work, "proxy.yaml");
    writeFileSync(
      config,
      stringify({ ...shipped.config, backends: { bridge: { url: `http://127.0.0.1:${bridgePort}`, timeoutSeconds: 4 } }, routes: [{ metric: ".*", backend: "bridge" }] }),
    );
    const args = withFlags(shipped.proxyArgs, { ...localProxyFlags(cp.tokenKubeconfig("proxy", proxyToken), proxyPort), "--config": config });
    const proxy = startProcess("proxy", process.execPath, [join(ROOT, "functions/proxy/main.ts"), ...args], {
      logFile: join(work, "proxy.log"),
      env: { ...env, POD_NAMESPACE: PROXY_NS, POD_NAME: "proxy-0" },
    });
    processes.push(proxy);
    await waitForAPIServiceAvailable(cp, [proxy], { timeoutMs: 90_000, context });
    // the policies are in force: team-b's own read of ci_jobs works, payments is refused
    await eventually(read("team-b", "payments"), (a) => a.status === 403, "team-b's policy to refuse queue=payments");
    await eventually(read("team-b", "ci_jobs"), (a) => a.status === 200, "team-b's policy to allow queue=ci_jobs");
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

  for (const [way, get] of [
    ["through the aggregator", viaAggregator],
    ["straight at the proxy", direct],
  ] as const) {
    it(`${way}: no spelling of team-b's path reads the queue its policy forbids`, async () => {
      expect((await get(read("team-b", "payments"))).status).toBe(403);
      const allowed = await get(read("team-b", "ci_jobs"));
      expect(allowed.status, allowed.text).toBe(200);
      expect(JSON.parse(allowed.text).items[0].value).toBe(String(QUEUES.ci_jobs));
      const leaks: string[] = [];
      for (const path of VARIANTS) {
        const a = await get(path);
        console.log(`${way}: ${a.status} ${path}`);
        if (leaksValue(a)) leaks.push(`${path} → ${a.status} ${a.text.slice(0, 200)}`);
        else expect([400, 403, 404, 301]).toContain(a.status);
      }
      expect(leaks).toEqual([]);
    });
  }

  it("straight at the proxy: the main port serves no admission webhook (no policy content to anyone)", async () => {
    const review = {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: { uid: "1", kind: { group: "autoscaling", version: "v2", kind: "HorizontalPodAutoscaler" }, operation: "CREATE", namespace: "team-b", object: {} },
    };
    for (const auth of [false, true]) {
      const a = await raw(`https://127.0.0.1:${proxyPort}`, "/admission/hpa", { method: "POST", body: JSON.stringify(review), auth });
      expect(a.status, a.text).not.toBe(200);
      expect(a.text).not.toContain("ci_jobs");
    }
  });

  it("an invalid edit of team-b's policy or of the guardrail keeps the last valid version in force", async () => {
    // team-b's policy edited into one with an invalid label key
    await apply(nsPolicy("team-b", "ci-only", { metric: "queue_messages_.*", selector: { matchLabels: { "bad key!": "ci_jobs" } } }));
    // the guardrail edited into one whose pattern does not compile
    await apply(guardrail("(x"));
    await waitFor(
      "both objects to be reported Accepted=False",
      async () => {
        const objs = [
          JSON.parse(await cp!.kubectlOk(["-n", "team-b", "get", "externalmetricpolicy", "ci-only", "-o", "json"])),
          JSON.parse(await cp!.kubectlOk(["get", "clusterexternalmetricpolicy", "no-ledger", "-o", "json"])),
        ] as { metadata: { generation: number }; status?: { conditions?: { type: string; status: string; observedGeneration?: number }[] } }[];
        return objs.every((o) => o.status?.conditions?.some((c) => c.type === "Accepted" && c.status === "False" && c.observedGeneration === o.metadata.generation)) ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250, context },
    );
    // what they refused stays refused; what they allowed stays allowed
    for (const get of [viaAggregator, direct]) {
      expect((await get(read("team-b", "payments"))).status).toBe(403);
      expect((await get(read("team-a", "ledger"))).status).toBe(403);
      expect((await get(read("team-b", "ci_jobs"))).status).toBe(200);
    }
    await apply(guardrail(), TEAM_B);
  });

  it("a new invalid policy denies reads in its own namespace only, until it is fixed or deleted", async () => {
    await eventually(read("team-a", "a_jobs"), (a) => a.status === 200, "team-a's read to be allowed");
    await apply(nsPolicy("team-a", "broken", { metric: "(x", selector: { matchLabels: { queue: "a_jobs" } } }));
    const refused = await eventually(read("team-a", "a_jobs"), (a) => a.status !== 200, "the broken policy to close team-a");
    expect([403, 503]).toContain(refused.status);
    expect(refused.text).toContain("broken");
    expect((await viaAggregator(read("team-b", "ci_jobs"))).status).toBe(200);
    await cp!.kubectlOk(["-n", "team-a", "delete", "externalmetricpolicy", "broken"]);
    await eventually(read("team-a", "a_jobs"), (a) => a.status === 200, "team-a's read to be allowed again");
  });

  it("hostile patterns never hold the proxy's event loop: /healthz and reads answer within 1 s while they are processed", async () => {
    // 2 objects of 64 rules, each pattern distinct: ~6 s of one thread per object if compiled on it.
    const objects = Array.from({ length: 2 }, (_, i) => {
      const rules = Array.from({ length: 64 }, (_, r) => ({ metric: hostilePattern(1000 - i * 64 - r), selector: { matchLabels: { queue: "a_jobs" } } }));
      return { ...nsPolicy("team-a", `hostile-${i}`, rules[0]!), spec: { rules, defaultAction: "Deny" } };
    });
    let slowest = 0;
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const [health, value] = await Promise.all([raw(`https://127.0.0.1:${proxyPort}`, "/healthz", { auth: false }), direct(read("team-b", "ci_jobs"))]);
        slowest = Math.max(slowest, health.ms, value.ms);
        expect(health.status).toBe(200);
        expect(value.status).toBe(200);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      await apply(...objects);
      // fail closed: team-a's reads are refused while the hostile objects exist
      const refused = await eventually(read("team-a", "a_jobs"), (a) => a.status !== 200, "the hostile policies to close team-a");
      expect([403, 503]).toContain(refused.status);
      await new Promise((r) => setTimeout(r, 2_000)); // and keep polling a while after
    } finally {
      polling = false;
      await poll;
    }
    console.log(`slowest /healthz or cached read while hostile policies were processed: ${slowest.toFixed(1)} ms`);
    expect(slowest).toBeLessThan(1_000);
    await cp!.kubectlOk(["-n", "team-a", "delete", "externalmetricpolicies", "--all"]);
    await eventually(read("team-a", "a_jobs"), (a) => a.status === 200, "team-a's read to be allowed again");
  });
});
