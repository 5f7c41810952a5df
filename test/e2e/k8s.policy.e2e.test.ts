/**
 * ExternalMetricPolicy as a Kubernetes API, end to end on a real control
 * plane (test/k8s/cluster.ts: etcd, kube-apiserver, kube-controller-manager
 * built from the Go modules):
 *
 *   kubectl apply ─► kube-apiserver ─► CRDs (shipped manifests), RBAC (aggregated ClusterRoles)
 *                                  └─► ValidatingWebhookConfiguration ─► proxy /admission/{hpa,policies}
 *   HPA controller ─► aggregator ─► proxy: authn, SAR, cluster policies (informer) ─► bridge ─► fauxqs
 *
 * The CRDs, the RBAC and the webhook configuration are the objects of the
 * shipped plain manifests (infra/manifests/), the proxy runs with the shipped
 * Deployment's arguments and the shipped ProxyConfig (cluster policies on,
 * whenNoneApply Defer, admission Warn, its values cache: the chart's
 * defaults) with only its backend and, in the last test, admission mode
 * changed, and
 * the bridge runs open (`defaultAction: Allow`), so that what changes is what
 * the cluster's policy objects say. The proxy's Service is an ExternalName
 * Service naming 127.0.0.1 (test/k8s/shipped.ts): kube-apiserver resolves a
 * webhook's `clientConfig.service` with the same resolver as an APIService's
 * (`buildServiceResolver` in kubernetes `cmd/kube-apiserver/app/server.go`:
 * the ClusterIP resolver of k8s.io/kube-aggregator), so the webhook reaches
 * the local proxy the same way the aggregator does, on the port the
 * webhook's `service.port` names.
 *
 * Reads "as the HPA controller" are kube-apiserver requests impersonating its
 * identity (test/k8s/impersonate.ts), polled every ~100 ms to time a policy
 * change; the HPA controller's own view is its `ScalingActive` condition.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { buildControlPlane, freePorts, logTails, startControlPlane, startProcess, waitFor, type ControlPlane, type LoggedProcess } from "../k8s/cluster.ts";
import { HPA_CONTROLLER, impersonatingClient, type ImpersonatingClient } from "../k8s/impersonate.ts";
import {
  API_SERVICE,
  e2eBridgeConfig,
  PROXY_NS,
  PROXY_SERVICE,
  shippedManifests,
  shippedObjects,
  shippedProxyConfig,
  startBridgeProcess,
  waitForAPIServiceAvailable,
  localProxyFlags,
  placeholderDeployment,
  withFlags,
  type Condition,
} from "../k8s/shipped.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const GROUP = "external-metrics-bridge.io";
const API_VERSION = `${GROUP}/v1alpha1`;
const METRICS_GV = "external.metrics.k8s.io/v1beta1";
const METRIC = "queue_messages_ready";
const HPA_SYNC_SECONDS = 2;
/** the issue's bound: a policy change is in force within 2 s of `kubectl apply` */
const POLICY_LATENCY_MS = 2_000;
const TEST_TIMEOUT_MS = 240_000;
/** queues and their depths */
const QUEUES = { "team-a-jobs": 3, "team-b-jobs": 4, "payments-ledger": 5 } as const;

const yamlDocs = (...docs: object[]) => docs.map((d) => stringify(d)).join("---\n");

let cp: ControlPlane | undefined;
let emulator: Emulator | undefined;
let reader: ImpersonatingClient | undefined;
let work = "";
const processes: LoggedProcess[] = [];
let proxyArgs: string[] = [];
let proxyEnv: NodeJS.ProcessEnv = {};
let proxyConfigFor: (mode: "Warn" | "Deny") => string = () => "";

function context(lines = 60): string {
  return `${cp?.logs(lines) ?? ""}\n${logTails(processes, lines)}`;
}

// --- the objects an admin and a team apply (also the examples of docs/policy.md "Policies in a cluster") ---

/** Cluster guardrail: queue metrics only for a named queue, and never the payments ledger. */
const GUARDRAIL = {
  apiVersion: API_VERSION,
  kind: "ClusterExternalMetricPolicy",
  metadata: { name: "queue-guardrail" },
  spec: {
    rules: [
      {
        metric: "queue_messages_.*",
        selector: {
          matchExpressions: [
            { key: "queue", operator: "Exists" },
            { key: "queue", operator: "NotIn", values: ["payments-ledger"] },
          ],
        },
      },
    ],
    defaultAction: "Deny",
  },
};

/** A team's namespace policy: `selector` as the team wrote it. */
function teamPolicy(ns: string, name: string, selector: object): object {
  return {
    apiVersion: API_VERSION,
    kind: "ExternalMetricPolicy",
    metadata: { name, namespace: ns },
    spec: { rules: [{ metric: "queue_messages_.*", selector }], defaultAction: "Deny" },
  };
}

/** A policy whose pattern RE2 refuses (lookahead): valid for the CRD schema, invalid for the policy compiler. */
function brokenPolicy(ns: string, name: string): object {
  return {
    apiVersion: API_VERSION,
    kind: "ExternalMetricPolicy",
    metadata: { name, namespace: ns },
    spec: { rules: [{ metric: "queue_messages_(?!ready)", selector: { matchLabels: { queue: `${ns}-jobs` } } }], defaultAction: "Deny" },
  };
}

/** A Deployment (pods stay Pending: no kubelet) and an autoscaling/v2 HPA on `queue`'s depth. */
function hpaOn(ns: string, name: string, queue: string): object[] {
  return [
    placeholderDeployment(name, ns),
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name, namespace: ns },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
        minReplicas: 1,
        maxReplicas: 4,
        metrics: [
          { type: "External", external: { metric: { name: METRIC, selector: { matchLabels: { queue } } }, target: { type: "AverageValue", averageValue: "2" } } },
        ],
      },
    },
  ];
}

const valuesPath = (ns: string, queue: string) => `/apis/${METRICS_GV}/namespaces/${ns}/${METRIC}?labelSelector=${encodeURIComponent(`queue=${queue}`)}`;

/** One read as the HPA controller: the value on 200, else the Status message (with its code). */
async function readAsHpa(ns: string, queue: string): Promise<{ status: number; value?: string; message?: string }> {
  const r = await reader!.get(valuesPath(ns, queue), HPA_CONTROLLER);
  const body = r.body as { items?: { value: string }[]; message?: string };
  return r.status === 200 ? { status: 200, value: body.items?.[0]?.value } : { status: r.status, message: body.message ?? String(r.body) };
}

/** Poll reads as the HPA controller every ~100 ms until `until` holds; resolves with the answer and the ms since `since`. */
async function pollRead(ns: string, queue: string, until: (a: { status: number }) => boolean, since: number, timeoutMs = 15_000) {
  return waitFor(
    `a read of ${queue} in ${ns} as the HPA controller to change`,
    async () => {
      const a = await readAsHpa(ns, queue);
      return until(a) ? { answer: a, ms: Date.now() - since } : undefined;
    },
    { timeoutMs, intervalMs: 100, context },
  );
}

/**
 * Run `command` (a `kubectl apply`/`delete`), then poll reads as the HPA
 * controller until `until` holds. `afterReturn`: ms from kubectl's return
 * (the object is stored) to the first read that shows the change — what the
 * 2 s bound is about; `afterStart` adds kubectl's own run (process start,
 * discovery, the policies webhook), which on a loaded 2-core machine alone
 * can take seconds.
 */
async function changeAndPoll<T>(command: () => Promise<T>, ns: string, queue: string, until: (a: { status: number }) => boolean) {
  const started = Date.now();
  const result = await command();
  const returned = Date.now();
  const seen = await pollRead(ns, queue, until, returned);
  return { result, answer: seen.answer, afterReturn: seen.ms, afterStart: seen.ms + (returned - started) };
}

interface PolicyObject {
  metadata: { generation: number };
  status?: { observedGeneration?: number; conditions?: (Condition & { observedGeneration?: number })[] };
}

/** Wait until the policy's `Accepted` condition is for its current generation; resolves with the condition. */
async function acceptedCondition(args: string[]): Promise<Condition & { observedGeneration?: number }> {
  return waitFor(
    `Accepted condition of ${args.join(" ")}`,
    async () => {
      const obj = JSON.parse(await cp!.kubectlOk(["get", ...args, "-o", "json"])) as PolicyObject;
      const c = obj.status?.conditions?.find((x) => x.type === "Accepted");
      return c !== undefined && c.observedGeneration === obj.metadata.generation ? c : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 250, context },
  );
}

interface Hpa {
  status: { conditions?: Condition[] };
}
async function scalingActive(ns: string, name: string, status: "True" | "False"): Promise<Condition> {
  return waitFor(
    `HPA ${ns}/${name} ScalingActive=${status}`,
    async () => {
      const hpa = JSON.parse(await cp!.kubectlOk(["-n", ns, "get", "hpa", name, "-o", "json"])) as Hpa;
      const c = hpa.status.conditions?.find((x) => x.type === "ScalingActive");
      return c?.status === status ? c : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 1000, context },
  );
}

function startProxy(mode: "Warn" | "Deny"): LoggedProcess {
  const args = withFlags(proxyArgs, { "--config": proxyConfigFor(mode) });
  const proxy = startProcess("proxy", process.execPath, [join(ROOT, "functions/proxy/main.ts"), ...args], {
    logFile: join(work, `proxy-${mode}.log`),
    env: proxyEnv,
  });
  const old = processes.findIndex((p) => p.name === "proxy");
  if (old >= 0) processes.splice(old, 1);
  processes.push(proxy);
  return proxy;
}

/** kube-apiserver's log (dispatcher lines of webhook calls: k8s.io/apiserver `pkg/admission/plugin/webhook/validating/dispatcher.go`). */
function apiserverLog(): string {
  return readFileSync(join(cp!.dir, "kube-apiserver.log"), "utf8");
}

/** Print a command's output for the record (docs/policy.md quotes these). */
function show(what: string, text: string): void {
  console.log(`----- ${what}\n${text.trimEnd()}`);
}

describe("real Kubernetes: ExternalMetricPolicy CRDs, live enforcement, status, admission, RBAC", () => {
  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    cp = await startControlPlane({
      binDir,
      hpaSyncPeriodSeconds: HPA_SYNC_SECONDS,
      // fills admin/edit/view from the shipped aggregate-to-* ClusterRoles
      extraControllers: ["clusterrole-aggregation-controller"],
      log: (l) => console.log(l),
    });
    work = mkdtempSync(join(tmpdir(), "emb-k8s-policy-"));
    emulator = await startEmulator();
    for (const [queue, depth] of Object.entries(QUEUES)) {
      await emulator.createQueue(queue);
      await emulator.add(queue, depth);
    }
    reader = await impersonatingClient(cp);

    // --- the bridge: open (its own policy layer allows everything), signatures required ---
    const signingKeys = `e2e:${randomBytes(32).toString("base64")}`;
    const bridgeConfig = join(work, "bridge.yaml");
    writeFileSync(bridgeConfig, stringify({ ...e2eBridgeConfig(emulator.endpoint, [{ name: METRIC, attribute: "ApproximateNumberOfMessages" }]), policy: { defaultAction: "Allow" } }));
    const [bridgePort, proxyPort, webhookPort] = (await freePorts(3)) as [number, number, number];
    const env = { ...process.env, BRIDGE_SIGNING_KEYS: signingKeys };
    processes.push(await startBridgeProcess({ config: bridgeConfig, port: bridgePort, env, logFile: join(work, "bridge.log"), context }));

    // --- the shipped manifests: CRDs first (kubectl waits for them to be served), RBAC, Service, webhook configuration ---
    const crds = shippedObjects(["CustomResourceDefinition"]);
    expect(crds.map((c) => c.metadata.name).sort()).toEqual([`clusterexternalmetricpolicies.${GROUP}`, `externalmetricpolicies.${GROUP}`]);
    await cp.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(...crds) });
    await cp.kubectlOk(["wait", "--for=condition=Established", "--timeout=60s", ...crds.map((c) => `crd/${c.metadata.name}`)]);
    const shipped = { ...shippedManifests(), config: shippedProxyConfig() };
    // the chart's defaults, which this suite runs with
    expect(shipped.config).toMatchObject({ clusterPolicies: { enabled: true, whenNoneApply: "Defer" }, admission: { mode: "Warn" } });
    await cp.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(...shipped.install) });
    // The webhook's Service is the ExternalName one: kube-apiserver dials 127.0.0.1 on the port the webhook names,
    // the proxy's admission listener (--admission-port below).
    const webhooks = shippedObjects(["ValidatingWebhookConfiguration"]).map((w) => ({
      ...w,
      webhooks: (w["webhooks"] as { clientConfig: { service?: Record<string, unknown> } }[]).map((h) => ({
        ...h,
        clientConfig: { ...h.clientConfig, ...(h.clientConfig.service ? { service: { ...h.clientConfig.service, port: webhookPort } } : {}) },
      })),
    }));
    expect(webhooks.map((w) => w.metadata.name)).toEqual(["external-metrics-bridge"]);
    await cp.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(...webhooks) });
    for (const ns of ["team-a", "team-b"]) await cp.kubectlOk(["create", "namespace", ns]);

    // --- the proxy: shipped Deployment arguments, cluster policies on (the chart's default) ---
    const token = (await cp.kubectlOk(["-n", PROXY_NS, "create", "token", PROXY_SERVICE, "--duration=2h"])).trim();
    proxyConfigFor = (mode) => {
      const file = join(work, `proxy-${mode}.yaml`);
      writeFileSync(
        file,
        stringify({
          ...shipped.config,
          backends: { bridge: { url: `http://127.0.0.1:${bridgePort}`, timeoutSeconds: 4 } },
          routes: [{ metric: ".*", backend: "bridge" }],
          admission: { ...(shipped.config["admission"] as object), mode },
        }),
      );
      return file;
    };
    proxyArgs = withFlags(shipped.proxyArgs, { ...localProxyFlags(cp.tokenKubeconfig("proxy", token), proxyPort), "--admission-port": String(webhookPort) });
    proxyEnv = { ...env, POD_NAMESPACE: PROXY_NS, POD_NAME: "proxy-0" };
    const proxy = startProxy("Warn");
    await waitForAPIServiceAvailable(cp, [proxy], { timeoutMs: 90_000, context });
  }, 50 * 60_000);

  afterEach(({ task }) => {
    if (task.result?.state === "fail") console.error(`component logs after the failure of "${task.name}":\n${context(80)}`);
  });

  afterAll(async () => {
    reader?.close();
    for (const p of [...processes].reverse()) await p.stop(5_000);
    await emulator?.stop();
    await cp?.stop();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("the shipped CRDs are served: kubectl explain describes them, short names and scopes are as agreed", async () => {
    const rules = await cp!.kubectlOk(["explain", "externalmetricpolicy.spec.rules"]);
    show("kubectl explain externalmetricpolicy.spec.rules", rules);
    expect(rules).toContain(`GROUP:      ${GROUP}`);
    expect(rules).toMatch(/FIELD: rules/);
    for (const field of ["metric", "selector", "deny"]) expect(rules).toMatch(new RegExp(`^\\s+${field}\\s+<`, "m"));
    const cluster = await cp!.kubectlOk(["explain", "cemp.spec"]);
    expect(cluster).toContain("KIND:       ClusterExternalMetricPolicy");
    for (const field of ["subjects", "rules", "defaultAction"]) expect(cluster).toMatch(new RegExp(`^\\s+${field}\\s+<`, "m"));
    const resources = await cp!.kubectlOk(["api-resources", `--api-group=${GROUP}`, "--no-headers"]);
    const rows = resources.trim().split("\n").map((l) => l.trim().split(/\s+/));
    expect(rows).toEqual(
      expect.arrayContaining([
        ["externalmetricpolicies", "emp", API_VERSION, "true", "ExternalMetricPolicy"],
        ["clusterexternalmetricpolicies", "cemp", API_VERSION, "false", "ClusterExternalMetricPolicy"],
      ]),
    );
  }, TEST_TIMEOUT_MS);

  it("the proxy wrote its CA into both webhooks of the shipped ValidatingWebhookConfiguration (the APIService's caBundle)", async () => {
    const apiService = JSON.parse(await cp!.kubectlOk(["get", "apiservice", API_SERVICE, "-o", "json"])) as { spec: { caBundle?: string } };
    const vwc = JSON.parse(await cp!.kubectlOk(["get", "validatingwebhookconfiguration", "external-metrics-bridge", "-o", "json"])) as {
      webhooks: { name: string; failurePolicy: string; timeoutSeconds: number; clientConfig: { caBundle?: string } }[];
    };
    expect(apiService.spec.caBundle).toBeTruthy();
    expect(vwc.webhooks.map((w) => [w.name, w.failurePolicy, w.timeoutSeconds, w.clientConfig.caBundle])).toEqual([
      ["hpa.external-metrics-bridge.io", "Ignore", 3, apiService.spec.caBundle],
      ["policies.external-metrics-bridge.io", "Ignore", 3, apiService.spec.caBundle],
    ]);
  }, TEST_TIMEOUT_MS);

  it(`kubectl apply of a cluster guardrail changes what the HPA controller reads within ${POLICY_LATENCY_MS / 1000} s; deleting it restores the read`, async () => {
    // No cluster policy yet: whenNoneApply Defer leaves the read to the (open) bridge. The proxy now holds
    // this answer in its values cache (the chart's ttlSeconds, 2 s); a new policy applies before that cache.
    expect(await readAsHpa("team-a", "payments-ledger")).toEqual({ status: 200, value: String(QUEUES["payments-ledger"]) });

    const file = join(work, "guardrail.yaml");
    writeFileSync(file, yamlDocs(GUARDRAIL));
    const denied = await changeAndPoll(() => cp!.kubectlOk(["apply", "-f", file]), "team-a", "payments-ledger", (a) => a.status !== 200);
    show("kubectl apply -f guardrail.yaml", denied.result);
    console.log(`guardrail in force ${denied.afterReturn} ms after kubectl apply returned (${denied.afterStart} ms after it started)`);
    expect(denied.answer.status).toBe(403);
    show("read as the HPA controller, refused", denied.answer.message ?? "");
    expect(denied.answer.message).toContain("cluster policy");
    expect(denied.answer.message).toContain("queue-guardrail");
    expect(denied.answer.message).toContain("rules[0]");
    expect(denied.afterReturn).toBeLessThanOrEqual(POLICY_LATENCY_MS);
    // what the guardrail still allows
    expect(await readAsHpa("team-a", "team-a-jobs")).toEqual({ status: 200, value: String(QUEUES["team-a-jobs"]) });

    const restored = await changeAndPoll(() => cp!.kubectlOk(["delete", "-f", file]), "team-a", "payments-ledger", (a) => a.status === 200);
    console.log(`guardrail deleted: read restored ${restored.afterReturn} ms after kubectl delete returned (${restored.afterStart} ms after it started)`);
    expect(restored.answer).toEqual({ status: 200, value: String(QUEUES["payments-ledger"]) });
    expect(restored.afterReturn).toBeLessThanOrEqual(POLICY_LATENCY_MS);

    // back in force for the rest of the suite
    await cp!.kubectlOk(["apply", "-f", file]);
    await pollRead("team-a", "payments-ledger", (a) => a.status === 403, Date.now());
  }, TEST_TIMEOUT_MS);

  it("kubectl get shows the policies Accepted (status written back by the proxy)", async () => {
    const c = await acceptedCondition(["cemp", "queue-guardrail"]);
    expect(c).toMatchObject({ status: "True", reason: "Valid" });
    const table = await cp!.kubectlOk(["get", "clusterexternalmetricpolicies"]);
    show("kubectl get clusterexternalmetricpolicies", table);
    const [header, row] = table.trim().split("\n").map((l) => l.trim().split(/\s{2,}/));
    expect(header).toEqual(expect.arrayContaining(["NAME", "DEFAULT", "ACCEPTED", "AGE"]));
    expect(row![header!.indexOf("NAME")]).toBe("queue-guardrail");
    expect(row![header!.indexOf("ACCEPTED")]).toBe("True");
    expect(row![header!.indexOf("DEFAULT")]).toBe("Deny");
  }, TEST_TIMEOUT_MS);

  it("a broken policy is refused at kubectl apply by the webhook, with a message naming the object and rule, not a file", async () => {
    const r = await cp!.kubectl(["apply", "-f", "-"], { input: yamlDocs(brokenPolicy("team-a", "broken")) });
    show("kubectl apply of a policy with a lookahead", r.stderr);
    expect(r.status).not.toBe(0);
    // a 422 Invalid Status: kubectl prints its causes ("The <kind> "<name>" is invalid: <field>: <why>")
    expect(r.stderr).toContain('The ExternalMetricPolicy "broken" is invalid: spec.rules[0].metric: lookaround');
    expect(r.stderr).not.toMatch(/\.ya?ml:\d+/);
    // … which kube-apiserver got from the webhook (the CRD schema cannot compile RE2; the last test shows the
    // same object admitted while the webhook is down)
    expect(apiserverLog()).toMatch(/rejected by webhook "policies\.external-metrics-bridge\.io".*denied the request: ExternalMetricPolicy\/team-a\/broken is invalid: spec\.rules\[0\]\.metric/);
    expect((await cp!.kubectl(["-n", "team-a", "get", "emp", "broken"])).stderr).toMatch(/NotFound/);
  }, TEST_TIMEOUT_MS);

  it("resources: (issue 26): kube-apiserver's own CRD schema refuses a bad or duplicate entry; a valid list is stored, compiled and Accepted", async () => {
    const withResources = (name: string, resources: string[]) => ({
      apiVersion: API_VERSION,
      kind: "ExternalMetricPolicy",
      metadata: { name, namespace: "team-custom" },
      spec: { rules: [{ metric: "http_requests_per_second", resources, selector: {} }], defaultAction: "Deny" },
    });
    await cp!.kubectlOk(["create", "namespace", "team-custom"]); // its own namespace: no other test reads there
    // dry run: the schema answers before any webhook would (validation precedes validating admission)
    const upper = await cp!.kubectl(["apply", "--dry-run=server", "-f", "-"], { input: yamlDocs(withResources("upper", ["Pods"])) });
    show("kubectl apply of resources: [Pods]", upper.stderr);
    expect(upper.status).not.toBe(0);
    expect(upper.stderr).toMatch(/spec\.rules\[0\]\.resources\[0\]: Invalid value: "Pods": spec\.rules\[0\]\.resources\[0\] in body should match/);
    const dup = await cp!.kubectl(["apply", "--dry-run=server", "-f", "-"], { input: yamlDocs(withResources("dup", ["pods", "external", "pods"])) });
    show("kubectl apply of resources: [pods, external, pods]", dup.stderr);
    expect(dup.status).not.toBe(0);
    expect(dup.stderr).toMatch(/spec\.rules\[0\]\.resources\[2\]: Duplicate value: "pods"/);
    const many = await cp!.kubectl(["apply", "--dry-run=server", "-f", "-"], { input: yamlDocs(withResources("many", Array.from({ length: 17 }, (_, i) => `r${i}`))) });
    expect(many.stderr).toMatch(/spec\.rules\[0\]\.resources: Too many: 17: must have at most 16 items/);
    await cp!.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(withResources("web", ["pods", "ingresses.networking.k8s.io"])) });
    expect(await acceptedCondition(["-n", "team-custom", "emp", "web"])).toMatchObject({ status: "True", reason: "Valid" });
    const stored = JSON.parse(await cp!.kubectlOk(["-n", "team-custom", "get", "emp", "web", "-o", "json"])) as { spec: { rules: { resources: string[] }[] } };
    expect(stored.spec.rules[0]!.resources).toEqual(["pods", "ingresses.networking.k8s.io"]);
    await cp!.kubectlOk(["-n", "team-custom", "delete", "emp", "web"]);
  }, TEST_TIMEOUT_MS);

  it("an HPA whose External metric the policy denies is created with an admission warning naming the policy and rule; its controller reports FailedGetExternalMetric", async () => {
    const allowed = await cp!.kubectl(["apply", "-f", "-"], { input: yamlDocs(...hpaOn("team-a", "jobs", "team-a-jobs")) });
    expect(allowed.status, allowed.stderr).toBe(0);
    expect(allowed.stderr).not.toMatch(/Warning/);

    const warned = await cp!.kubectl(["apply", "-f", "-"], { input: yamlDocs(...hpaOn("team-a", "ledger", "payments-ledger")) });
    show("kubectl apply of an HPA on payments-ledger (Warn mode)", `${warned.stdout}${warned.stderr}`);
    expect(warned.status, warned.stderr).toBe(0);
    const warning = warned.stderr.split("\n").find((l) => l.startsWith("Warning:")) ?? "";
    expect(warning).toContain("queue-guardrail");
    expect(warning).toContain("rules[0]");
    expect(warning).toContain(METRIC);

    await scalingActive("team-a", "jobs", "True");
    const failing = await scalingActive("team-a", "ledger", "False");
    show("HPA team-a/ledger ScalingActive", JSON.stringify(failing, null, 2));
    expect(failing.reason).toBe("FailedGetExternalMetric");
    expect(failing.message).toContain("queue-guardrail");
  }, TEST_TIMEOUT_MS);

  it("a namespace admin (built-in admin role) writes the namespace's policies, not cluster ones, and cannot widen access", async () => {
    await cp!.kubectlOk(["-n", "team-a", "create", "rolebinding", "carol-admin", "--clusterrole=admin", "--user=carol"]);
    await cp!.kubectlOk(["-n", "team-a", "create", "rolebinding", "dave-view", "--clusterrole=view", "--user=dave"]);
    const canI = async (user: string, verb: string, resource: string, ns?: string) =>
      (await cp!.kubectl(["auth", "can-i", verb, `${resource}.${GROUP}`, "--as", user, ...(ns ? ["-n", ns] : [])])).stdout.trim();
    // The clusterrole-aggregation controller copies the shipped policy-admin/viewer rules into admin/view.
    await waitFor("admin aggregates the policy-admin ClusterRole", async () => (await canI("carol", "create", "externalmetricpolicies", "team-a")) === "yes", {
      timeoutMs: 30_000,
      context,
    });
    expect(await canI("carol", "create", "clusterexternalmetricpolicies")).toBe("no");
    // A RoleBinding grants only in its namespace: the viewer rules aggregated into admin do not reach
    // cluster-scoped objects (a ClusterRoleBinding to the viewer ClusterRole does; docs/policy.md).
    expect(await canI("carol", "list", "clusterexternalmetricpolicies")).toBe("no");
    expect(await canI("carol", "create", "externalmetricpolicies", "team-b")).toBe("no");
    expect(await canI("dave", "list", "externalmetricpolicies", "team-a")).toBe("yes");
    expect(await canI("dave", "create", "externalmetricpolicies", "team-a")).toBe("no");
    // The shipped ClusterRoles bound directly: a policy author who is not a namespace admin, and everyone reading the guardrails.
    await cp!.kubectlOk(["-n", "team-a", "create", "rolebinding", "erin-policies", "--clusterrole=external-metrics-bridge-policy-admin", "--user=erin"]);
    await cp!.kubectlOk(["create", "clusterrolebinding", "guardrails-readable", "--clusterrole=external-metrics-bridge-policy-viewer", "--group=system:authenticated"]);
    expect(await canI("erin", "create", "externalmetricpolicies", "team-a")).toBe("yes");
    expect(await canI("erin", "create", "deployments", "team-a")).toBe("no");
    expect(await canI("erin", "create", "clusterexternalmetricpolicies")).toBe("no");
    expect((await cp!.kubectl(["auth", "can-i", "list", `clusterexternalmetricpolicies.${GROUP}`, "--as", "carol", "--as-group", "system:authenticated"])).stdout.trim()).toBe("yes");

    const asCarol = (input: string) => cp!.kubectl(["apply", "--as", "carol", "-f", "-"], { input });
    // A cluster policy of her own: refused.
    const cluster = await asCarol(yamlDocs({ ...GUARDRAIL, metadata: { name: "carol-everything" }, spec: { rules: [{ metric: ".*", selector: {} }], defaultAction: "Allow" } }));
    show("kubectl apply --as carol of a ClusterExternalMetricPolicy", cluster.stderr);
    expect(cluster.status).not.toBe(0);
    expect(cluster.stderr).toContain(`User "carol" cannot create resource "clusterexternalmetricpolicies" in API group "${GROUP}" at the cluster scope`);
    const deleteGuardrail = await cp!.kubectl(["delete", "cemp", "queue-guardrail", "--as", "carol"]);
    expect(deleteGuardrail.stderr).toContain(`User "carol" cannot delete resource "clusterexternalmetricpolicies"`);
    // Another namespace's policy: refused.
    const otherNs = await asCarol(yamlDocs(teamPolicy("team-b", "queues", {})));
    expect(otherNs.stderr).toContain(`User "carol" cannot create resource "externalmetricpolicies" in API group "${GROUP}" in the namespace "team-b"`);

    // Her own namespace: a permissive policy is accepted, and widens nothing: the guardrail still denies.
    const wide = await asCarol(yamlDocs(teamPolicy("team-a", "queues", {})));
    expect(wide.status, wide.stderr).toBe(0);
    expect(await acceptedCondition(["-n", "team-a", "emp", "queues"])).toMatchObject({ status: "True" });
    const stillDenied = await readAsHpa("team-a", "payments-ledger");
    expect(stillDenied.status).toBe(403);
    expect(stillDenied.message).toContain("queue-guardrail");
    expect(await readAsHpa("team-a", "team-b-jobs")).toMatchObject({ status: 200 });

    // … and narrowing works: her namespace reads only its own queue, within 2 s.
    const narrowed = await changeAndPoll(() => asCarol(yamlDocs(teamPolicy("team-a", "queues", { matchLabels: { queue: "team-a-jobs" } }))), "team-a", "team-b-jobs", (a) => a.status !== 200);
    expect(narrowed.result.status, narrowed.result.stderr).toBe(0);
    console.log(`team-a's narrower policy in force ${narrowed.afterReturn} ms after kubectl apply returned (${narrowed.afterStart} ms after it started)`);
    show("read of team-b-jobs in team-a as the HPA controller, after team-a's policy", narrowed.answer.message ?? "");
    expect(narrowed.answer.status).toBe(403);
    expect(narrowed.answer.message).toContain("team-a/queues");
    expect(narrowed.answer.message).toContain("rules[0]");
    expect(narrowed.afterReturn).toBeLessThanOrEqual(POLICY_LATENCY_MS);
    expect(await readAsHpa("team-a", "team-a-jobs")).toEqual({ status: 200, value: String(QUEUES["team-a-jobs"]) });
    show("kubectl get emp -A", await cp!.kubectlOk(["get", "emp", "-A"]));
  }, TEST_TIMEOUT_MS);

  // Last: it stops the proxy and starts it again in Deny mode.
  it("with the webhook down HPAs and policies are still created (failurePolicy Ignore); in Deny mode a denied HPA is refused naming the policy and rule; an invalid policy shows Accepted=False", async () => {
    const proxy = processes.find((p) => p.name === "proxy")!;
    await proxy.stop(5_000);
    const started = Date.now();
    const down = await cp!.kubectl(["apply", "-f", "-"], { input: yamlDocs(...hpaOn("team-b", "ledger-while-down", "payments-ledger")) });
    console.log(`HPA created ${Date.now() - started} ms with the webhook down`);
    expect(down.status, down.stderr).toBe(0);
    // kube-apiserver called the webhook, failed, and admitted the HPA (failurePolicy Ignore): no denial, no warning
    expect(down.stderr).not.toMatch(/denied|Warning/);
    expect(apiserverLog()).toMatch(/Failed calling webhook, failing open hpa\.external-metrics-bridge\.io: .*connection refused/);
    // a policy the webhook would have refused gets in too: the proxy reports it in its status
    const broken = await cp!.kubectl(["apply", "-f", "-"], { input: yamlDocs(brokenPolicy("team-b", "broken")) });
    expect(broken.status, broken.stderr).toBe(0);

    const deny = startProxy("Deny");
    await waitForAPIServiceAvailable(cp!, [deny], { timeoutMs: 90_000, context });
    const invalid = await acceptedCondition(["-n", "team-b", "emp", "broken"]);
    expect(invalid).toMatchObject({ status: "False", reason: "InvalidPattern" });
    expect(invalid.message).toContain("rules[0]");
    const table = await cp!.kubectlOk(["-n", "team-b", "get", "emp"]);
    show("kubectl get emp -n team-b", table);
    expect(table).toMatch(/^broken\s+Deny\s+False\s+InvalidPattern\s/m);
    show("Accepted condition of team-b/broken", JSON.stringify(invalid, null, 2));
    // Never seen valid: it denies every read in team-b (fail closed) until it is fixed or deleted.
    const closed = await readAsHpa("team-b", "team-b-jobs");
    expect(closed.status).toBe(403);
    expect(closed.message).toContain("ExternalMetricPolicy team-b/broken is invalid");
    await cp!.kubectlOk(["-n", "team-b", "delete", "emp", "broken"]);
    // Deleted: the remaining policies decide again (and the admission webhook below no longer counts it).
    await pollRead("team-b", "team-b-jobs", (a) => !(a as { message?: string }).message?.includes("team-b/broken"), Date.now());

    // The webhook answers again (the first calls after the restart may still find it starting).
    const refused = await waitFor(
      "the HPA webhook refusing a denied HPA (Deny mode)",
      async () => {
        const r = await cp!.kubectl(["apply", "-f", "-"], { input: yamlDocs(...hpaOn("team-b", "ledger-deny", "payments-ledger")) });
        if (r.status === 0) {
          await cp!.kubectl(["-n", "team-b", "delete", "hpa", "ledger-deny"]);
          return undefined;
        }
        return r;
      },
      { timeoutMs: 30_000, intervalMs: 1000, context },
    );
    show("kubectl apply of an HPA on payments-ledger (Deny mode)", refused.stderr);
    expect(refused.stderr).toContain("denied the request");
    expect(refused.stderr).toContain("queue-guardrail");
    expect(refused.stderr).toContain("rules[0]");
    expect((await cp!.kubectl(["-n", "team-b", "get", "hpa", "ledger-deny"])).stderr).toMatch(/NotFound/);
    // an allowed one still goes through, without a warning
    const ok = await cp!.kubectl(["apply", "-f", "-"], { input: yamlDocs(...hpaOn("team-b", "jobs", "team-b-jobs")) });
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stderr).not.toMatch(/Warning/);
    // a namespace that opts out (label on the namespace; the webhook's namespaceSelector) is not checked
    await cp!.kubectlOk(["label", "namespace", "team-b", "external-metrics-bridge.io/admission=disabled"]);
    const optedOut = await cp!.kubectl(["apply", "-f", "-"], { input: yamlDocs(...hpaOn("team-b", "ledger-deny", "payments-ledger")) });
    expect(optedOut.status, optedOut.stderr).toBe(0);
    expect(optedOut.stderr).not.toMatch(/Warning|denied/);
  }, TEST_TIMEOUT_MS);
});
