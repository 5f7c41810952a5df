/**
 * The proxy's entry point as a process: `--help`, refusal of bad input with
 * exit code 2, and a full run — kubeconfig file pointing at the fake
 * Kubernetes API, generated certificate, an echo bridge, self-registration —
 * that serves over TLS and drains on SIGTERM.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { authenticationData, call, createPki, eventually, KEYS, proxyConfigText, startEchoBackend, V1, writeFakeKubeconfig, type EchoBackend, type Pki } from "./proxy.harness.ts";
import { freePort } from "../helpers/ports.ts";

const MAIN = fileURLToPath(new URL("../../functions/proxy/main.ts", import.meta.url));
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "emb-proxy-cli-"));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function runSync(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [MAIN, ...args], { encoding: "utf8", timeout: 30_000, env: { ...process.env, ...env, KUBERNETES_SERVICE_HOST: "" } });
}

describe("command line", () => {
  it("documents its flags with --help", () => {
    const r = runSync(["--help"]);
    expect(r.status).toBe(0);
    for (const flag of ["--config", "--kubeconfig", "--tls-cert-file", "--tls-secret", "--no-register", "--shutdown-delay-seconds", "BRIDGE_SIGNING_KEYS"]) {
      expect(r.stdout).toContain(flag);
    }
  });

  it("exits 2 naming the line of an invalid config", () => {
    const file = join(dir, "bad.yaml");
    writeFileSync(file, "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ProxyConfig\nbackends:\n  a: { url: not-a-url }\nroutes: []\n");
    const r = runSync(["--config", file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`${file}:4:\\d+: backends\\.a\\.url`));
  });

  it("exits 2 on malformed signing keys without printing them", () => {
    const file = join(dir, "ok.yaml");
    writeFileSync(file, proxyConfigText({ a: "https://a.example" }, [[".*", "a"]]));
    const r = runSync(["--config", file], { BRIDGE_SIGNING_KEYS: "k:c2hvcnQ=" });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/at least 32/);
    expect(r.stderr).not.toContain("c2hvcnQ");
  });

  it("requires a config", () => {
    const r = runSync([]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/--config/);
  });
});

describe("a full run", () => {
  let fake: FakeKubeApiServer;
  let pki: Pki;
  let backend: EchoBackend;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    [fake, pki, backend] = await Promise.all([startFakeKubeApiServer(), createPki(), startEchoBackend(["queue_messages_ready"])]);
    fake.setConfigMap("kube-system", "extension-apiserver-authentication", authenticationData(pki));
  }, 60_000);

  afterAll(async () => {
    child?.kill("SIGKILL");
    await backend?.close();
    await fake?.close();
  });

  it("serves over TLS, registers the APIService, and exits 0 after draining on SIGTERM", async () => {
    const kubeconfig = writeFakeKubeconfig(join(dir, "kubeconfig.yaml"), fake);
    const config = join(dir, "proxy.yaml");
    writeFileSync(config, proxyConfigText({ echo: backend.url }, [[".*", "echo"]]));
    const port = await freePort();
    const lines: string[] = [];
    child = spawn(
      process.execPath,
      [MAIN, "--config", config, "--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1", "--secure-port", String(port), "--shutdown-delay-seconds", "0", "--readiness-interval-seconds", "1"],
      { env: { ...process.env, BRIDGE_SIGNING_KEYS: KEYS, POD_NAMESPACE: "emb" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    for (const stream of [child.stdout!, child.stderr!]) stream.on("data", (chunk: Buffer) => lines.push(...chunk.toString("utf8").split("\n").filter(Boolean)));
    const exited = new Promise<number | null>((resolve) => child!.once("exit", (code) => resolve(code)));

    await eventually(() => fake.apiServices.has("v1beta1.external.metrics.k8s.io"), 20_000, "APIService registered");
    const api = fake.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string; service: unknown } };
    expect(api.spec.service).toEqual({ namespace: "emb", name: "external-metrics-bridge-proxy", port: 443 });
    const ca = Buffer.from(api.spec.caBundle, "base64").toString("utf8");
    const res = await call(`https://127.0.0.1:${port}${V1}/namespaces/default/queue_messages_ready`, ca, {
      cert: pki.frontProxy,
      headers: { "X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters" },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.json().items[0].metricLabels).toEqual({ caller: "system:kube-aggregator" });

    // Log lines are written once per event-loop turn (shared/proxy/log.ts): the request's line may follow its answer.
    const records = () => lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
    await eventually(() => records().some((r) => r["msg"] === "request" && r["code"] === 200), 5_000, "the request's log line");
    expect(records().find((r) => r["msg"] === "proxy listening")).toMatchObject({ level: "info", backends: ["echo(bridge)"] });
    expect(records().find((r) => r["msg"] === "request" && r["code"] === 200)).toMatchObject({ user: "system:kube-aggregator", authn: "front-proxy" });

    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    child = undefined;
    expect(lines.some((l) => l.includes('"msg":"shut down"'))).toBe(true);
  }, 60_000);
});

