/**
 * The proxy's bundle (infra/proxy/build.ts, the files the container image
 * ships) as real processes, started as test/proxy/proxy.flood.test.ts starts it
 * (kubeconfig file at the fake Kubernetes API, generated serving
 * certificate, self-registration, the image's Node flags):
 *
 * - a plain proxy (a network bridge backend) serves a read with the
 *   in-process bridge's chunks DELETED from its directory: it never loads
 *   them (and its resident memory at rest is printed);
 * - a proxy with an `inProcess` backend loads those chunks and serves a read
 *   from the bundled bridge (SQS through the bundled AWS SDK, against
 *   fauxqs) with the caller's policy applied, with no BRIDGE_SIGNING_KEYS.
 */
import { spawn, type ChildProcess } from "node:child_process";
import https from "node:https";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProxy, imageEnv, imageNodeFlags, type ProxyBuild } from "../../infra/proxy/build.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { authenticationData, call, createPki, eventually, KEYS, proxyConfigText, startEchoBackend, V1, writeFakeKubeconfig, type EchoBackend, type Pki } from "./proxy.harness.ts";
import { freePort } from "../helpers/ports.ts";

const NS = `${V1}/namespaces/team-a`;

let dir: string;
let out: ProxyBuild;
let pki: Pki;
let sqs: Emulator;
let backend: EchoBackend;
const running: { child: ChildProcess; fake: FakeKubeApiServer }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "emb-proxy-bundle-inprocess-"));
  [out, pki, sqs, backend] = await Promise.all([buildProxy(join(dir, "dist")), createPki(), startEmulator(), startEchoBackend(["queue_messages_ready"])]);
  await sqs.add("a_jobs", 3);
}, 120_000);

afterAll(async () => {
  for (const { child, fake } of running) {
    child.kill("SIGKILL");
    await fake.close();
  }
  await backend?.close();
  await sqs?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});


/** Start the bundled proxy in `appDir` with `configText`; resolves once it registered its APIService (its CA known). */
async function startBundled(name: string, appDir: string, configText: string, env: Record<string, string | undefined>) {
  const fake = await startFakeKubeApiServer();
  fake.setConfigMap("kube-system", "extension-apiserver-authentication", authenticationData(pki));
  fake.authorize = () => ({ allowed: true });
  const kubeconfig = writeFakeKubeconfig(join(dir, `${name}.kubeconfig.yaml`), fake);
  const config = join(dir, `${name}.proxy.yaml`);
  writeFileSync(config, configText);
  const port = await freePort();
  const admissionPort = await freePort();
  const lines: string[] = [];
  const child = spawn(
    process.execPath,
    [
      ...imageNodeFlags(),
      join(appDir, "main.mjs"),
      ...["--config", config, "--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--secure-port", String(port), "--admission-port", String(admissionPort), "--shutdown-delay-seconds", "0"],
    ],
    { cwd: appDir, env: { ...process.env, ...imageEnv(), BRIDGE_SIGNING_KEYS: undefined, ...env, POD_NAMESPACE: "emb" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  running.push({ child, fake });
  for (const stream of [child.stdout!, child.stderr!]) stream.on("data", (chunk: Buffer) => lines.push(...chunk.toString("utf8").split("\n").filter(Boolean)));
  await eventually(() => fake.apiServices.has("v1beta1.external.metrics.k8s.io") || child.exitCode !== null, 30_000, `${name} registered its APIService`);
  expect(child.exitCode, lines.join("\n")).toBeNull();
  const api = fake.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string } };
  const ca = Buffer.from(api.spec.caBundle, "base64").toString("utf8");
  const read = (user: string, selector: string) =>
    call(`https://127.0.0.1:${port}${NS}/queue_messages_ready?labelSelector=${encodeURIComponent(selector)}`, ca, {
      cert: pki.frontProxy,
      headers: { "X-Remote-User": user },
    });
  const rssBytes = () => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? NaN) * 1024;
  /** POST without credentials to the webhook's own listener (as kube-apiserver calls the admission webhook) */
  const post = (path: string, body: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = https.request(`https://127.0.0.1:${admissionPort}${path}`, { method: "POST", ca, agent: false, headers: { "Content-Type": "application/json" } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      });
      req.on("error", reject);
      req.end(body);
    });
  return { child, lines, read, rssBytes, post };
}

describe("the bundled proxy and the in-process bridge's chunks", () => {
  it("a plain proxy serves with the in-process bridge's chunks deleted: it never loads them", async () => {
    const appDir = join(dir, "plain");
    cpSync(out.outdir, appDir, { recursive: true });
    expect(out.lazy.files.length).toBeGreaterThan(0);
    for (const file of out.lazy.files) rmSync(join(appDir, file));
    const proxy = await startBundled("plain", appDir, proxyConfigText({ echo: backend.url }, [[".*", "echo"]]), { BRIDGE_SIGNING_KEYS: KEYS });
    const res = await proxy.read("system:serviceaccount:kube-system:horizontal-pod-autoscaler", "queue=jobs");
    expect(res.status, res.text).toBe(200);
    expect(res.json().items[0].value).toBe("42");
    console.log(`plain bundled proxy RSS after one read: ${(proxy.rssBytes() / 1024 / 1024).toFixed(1)} MiB`);
  }, 60_000);

  it("the bundled proxy decides admission reviews in its policy worker (policy-worker.mjs beside main.mjs)", async () => {
    const appDir = join(dir, "admission");
    cpSync(out.outdir, appDir, { recursive: true });
    for (const file of out.lazy.files) rmSync(join(appDir, file));
    const proxy = await startBundled("admission", appDir, proxyConfigText({ echo: backend.url }, [[".*", "echo"]], "admission: { mode: Deny }"), { BRIDGE_SIGNING_KEYS: KEYS });
    const object = {
      apiVersion: "external-metrics-bridge.io/v1alpha1",
      kind: "ExternalMetricPolicy",
      metadata: { name: "hostile", namespace: "team-a" },
      spec: { rules: [{ metric: "(?:\\pL|\\pN|\\pP){1000}", deny: true }] },
    };
    const review = {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: { uid: "bundle-1", kind: { group: "external-metrics-bridge.io", version: "v1alpha1", kind: "ExternalMetricPolicy" }, operation: "CREATE", namespace: "team-a", name: "hostile", object },
    };
    const res = await proxy.post("/admission/policies", JSON.stringify(review));
    expect(res.status, res.text).toBe(200);
    const response = JSON.parse(res.text).response;
    expect(response).toMatchObject({ uid: "bundle-1", allowed: false, status: { code: 422 } });
    expect(response.status.message).toMatch(/spec\.rules\[0\]\.metric: pattern is too costly/);
  }, 60_000);

  it("a proxy with an inProcess backend serves from the bundled bridge with the caller's policy, without BRIDGE_SIGNING_KEYS", async () => {
    const bridgeFile = join(dir, "bridge.yaml");
    writeFileSync(
      bridgeFile,
      `${sqsConfigHead(sqs.endpoint, { policy: "{ defaultAction: Deny }", defaults: "{ maxAgeSeconds: 30, cacheTTLSeconds: 0 }" })}metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: jane, namespace: team-a }
spec:
  subjects: { users: [jane] }
  rules: [{ metric: "queue_.*", selector: "queue=a_jobs" }]
`,
    );
    const proxy = await startBundled(
      "inprocess",
      out.outdir,
      `apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ProxyConfig\nbackends:\n  local: { type: inProcess, bridgeConfig: "${bridgeFile}" }\nroutes:\n  - { metric: ".*", backend: local }\n`,
      {},
    );
    const allowed = await proxy.read("jane", "queue=a_jobs");
    expect(allowed.status, `${allowed.text}\n${proxy.lines.join("\n")}`).toBe(200);
    expect(allowed.json().items[0]).toMatchObject({ metricLabels: { queue: "a_jobs" }, value: "3" });
    const denied = await proxy.read("bob", "queue=a_jobs");
    expect(denied.status, denied.text).toBe(403);
    expect(denied.json().message).toContain("bob");
    console.log(`bundled proxy with the in-process bridge RSS after two reads: ${(proxy.rssBytes() / 1024 / 1024).toFixed(1)} MiB`);
  }, 60_000);
});
