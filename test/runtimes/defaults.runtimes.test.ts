/**
 * Defaults that fail closed, on every runtime:
 *
 * - request signing: the Node server (`functions/node.ts`, the `npm run
 *   serve` process) exits 2 without `BRIDGE_SIGNING_KEYS`, naming both
 *   settings; the Worker (workerd, built by wrangler) and the Lambda handler
 *   answer every `/apis` request with a 500 Status naming the missing setting
 *   while health probes stay ok; `BRIDGE_INSECURE_ALLOW_UNSIGNED=true` (Node
 *   also `--insecure-allow-unsigned`) serves unsigned requests and logs a
 *   warning on every start (once per Worker isolate / Lambda cold start);
 * - policy: a BridgeConfig without a `policy:` section denies every read
 *   (403 before any backend call) and says so at start, with how to open it;
 *   an explicit `defaultAction: Allow` without policies logs "running open"
 *   on every start.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { startNodeServer, StartRefusedError } from "../../functions/node.ts";
import type { LogRecord } from "../../shared/app.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { expectStatus } from "../helpers/contract.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";
import { startWorker } from "../helpers/worker.ts";
import { fixtureKey } from "../helpers/keys.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const VALUES = `${V1}/namespaces/default/queue_messages_ready?labelSelector=queue%3Djobs`;
const KEYS = `k1:${fixtureKey(5).toString("base64")}`;

/** A config whose backend is never reached (port 9 refuses): reads are decided before any backend call. */
const CONFIG = (policy = "") => `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: "http://127.0.0.1:9", credentials: { source: static, accessKeyId: x, secretAccessKey: y }, maxAttempts: 1 }
metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
${policy}`;
const OPEN = "policy: { defaultAction: Allow }\n";

const dir = mkdtempSync(join(tmpdir(), "emb-defaults-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The process environment without any signing setting (a developer's shell may have some). */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of ["BRIDGE_SIGNING_KEYS", "BRIDGE_INSECURE_ALLOW_UNSIGNED", "BRIDGE_AUDIENCE", "BRIDGE_CONFIG", "BRIDGE_CONFIG_FILE"]) delete env[k];
  return { ...env, ...extra };
}

/** Run `node functions/node.ts` until it prints its listening line (then SIGTERM) or exits. */
async function serve(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string; url?: string; probe?: (path: string) => Promise<Response> }> {
  const child = spawn(process.execPath, [join(ROOT, "functions/node.ts"), "--port", "0", ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const listening = new Promise<string>((resolve) => {
    const check = () => {
      const m = /listening on (http:\/\/\S+)/.exec(output);
      if (m) resolve(m[1]!);
    };
    child.stdout.on("data", check);
    child.stderr.on("data", check);
  });
  const first = await Promise.race([exited.then((code) => ({ code })), listening.then((url) => ({ url }))]);
  if ("code" in first) return { code: first.code, output };
  const url = first.url;
  return {
    code: null,
    output,
    url,
    probe: async (path: string) => {
      try {
        return await fetch(`${url}${path}`);
      } finally {
        // the caller probes once; then the server is stopped
        child.kill("SIGTERM");
        await exited;
      }
    },
  };
}

describe("the Node server (functions/node.ts) refuses to start unsigned", () => {
  const file = join(dir, "bridge.yaml");
  writeFileSync(file, CONFIG(OPEN));

  it("exits 2 without BRIDGE_SIGNING_KEYS, naming both settings and the flag", async () => {
    const run = await serve(["--config", file], cleanEnv());
    expect(run.code, run.output).toBe(2);
    expect(run.output).toMatch(/refuses to start: .*BRIDGE_SIGNING_KEYS is empty or missing/);
    expect(run.output).toContain("BRIDGE_INSECURE_ALLOW_UNSIGNED=true");
    expect(run.output).toContain("--insecure-allow-unsigned");
    expect(run.output).not.toMatch(/listening on/);
  });

  it("exits 2 for an empty key list, and for malformed keys or audience", async () => {
    expect((await serve(["--config", file], cleanEnv({ BRIDGE_SIGNING_KEYS: " " }))).code).toBe(2);
    const short = await serve(["--config", file], cleanEnv({ BRIDGE_SIGNING_KEYS: "a:c2hvcnQ=" }));
    expect(short.code).toBe(2);
    expect(short.output).toMatch(/misconfigured: .*at least 32/);
    expect(short.output).not.toContain("c2hvcnQ");
    const audience = await serve(["--config", file], cleanEnv({ BRIDGE_SIGNING_KEYS: KEYS, BRIDGE_AUDIENCE: "bridge.example.com" }));
    expect(audience.code).toBe(2);
    expect(audience.output).toMatch(/BRIDGE_AUDIENCE/);
  });

  it.each([
    ["--insecure-allow-unsigned", ["--insecure-allow-unsigned"], {}],
    ["BRIDGE_INSECURE_ALLOW_UNSIGNED=true", [], { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }],
  ] as const)("serves unsigned with %s, warning on start (and warns that the explicit Allow runs open)", async (_name, flags, env) => {
    const run = await serve(["--config", file, ...flags], cleanEnv(env));
    expect(run.url, run.output).toBeDefined();
    const res = await run.probe!(V1);
    expect(res.status).toBe(200);
    expect(run.output).toMatch(/"level":"warn","msg":"running insecure: BRIDGE_SIGNING_KEYS is not set/);
    expect(run.output).toMatch(/"level":"warn","msg":"running open: policy.defaultAction is Allow and there is no ExternalMetricPolicy/);
  });

  it("starts with keys and no warning about signing", async () => {
    const run = await serve(["--config", file], cleanEnv({ BRIDGE_SIGNING_KEYS: KEYS }));
    expect(run.url, run.output).toBeDefined();
    expect((await run.probe!(V1)).status).toBe(401); // unsigned → 401
    expect(run.output).not.toMatch(/running insecure/);
  });

  it("startNodeServer (the library the demo uses) refuses the same way", async () => {
    await expect(startNodeServer({ config: loadConfig(CONFIG(OPEN), "b.yaml").config, port: 0, env: {}, log: () => {} })).rejects.toThrow(StartRefusedError);
  });
});

describe("a BridgeConfig without a policy section denies every read", () => {
  it("403 before any backend call, a notice at every start saying how to open it; discovery still answers", async () => {
    const logs: LogRecord[] = [];
    const config = loadConfig(CONFIG(), "closed.yaml").config;
    for (let start = 0; start < 2; start++) {
      const server = await startNodeServer({ config, port: 0, env: { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }, log: (r) => logs.push(r) });
      try {
        const body = await expectStatus(await fetch(`${server.url}${VALUES}`), 403, "Forbidden");
        expect(body.message).toMatch(/no policy section, so every read is denied \(defaultAction Deny\).*policy: \{ defaultAction: Allow \}/);
        expect((await fetch(`${server.url}${V1}`)).status).toBe(200);
      } finally {
        await server.close();
      }
    }
    const notices = logs.filter((r) => r.msg.startsWith("policy: the BridgeConfig has no policy section"));
    expect(notices).toHaveLength(2);
    expect(notices[0]).toMatchObject({ level: "warn", source: "closed.yaml" });
    // a request that reached the backend (port 9) would be a 5xx; none did
    expect(logs.filter((r) => r.msg === "request" && Number(r["code"]) >= 500)).toEqual([]);
  });

  it("an explicit Allow with no policies warns \"running open\" on every start; a Deny with policies says nothing", async () => {
    const logs: LogRecord[] = [];
    for (let start = 0; start < 2; start++) {
      const server = await startNodeServer({ config: loadConfig(CONFIG(OPEN), "open.yaml").config, port: 0, env: { BRIDGE_SIGNING_KEYS: KEYS }, log: (r) => logs.push(r) });
      await server.close();
    }
    expect(logs.filter((r) => r.level === "warn" && r.msg.startsWith("running open: "))).toHaveLength(2);
    const quiet: LogRecord[] = [];
    const server = await startNodeServer({
      config: loadConfig(`${CONFIG("policy: { defaultAction: Deny }\n")}---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: hpa, namespace: default }
spec:
  rules: [{ metric: ".*", selector: { matchLabels: { queue: jobs } } }]
`, "cluster.yaml").config,
      port: 0,
      env: { BRIDGE_SIGNING_KEYS: KEYS },
      log: (r) => quiet.push(r),
    });
    await server.close();
    expect(quiet).toEqual([]);
  });
});

describe("the Worker (workerd) refuses /apis without signing keys", () => {
  it("500 naming BRIDGE_SIGNING_KEYS on every /apis path, health probes ok", async () => {
    const worker = await startWorker(CONFIG(OPEN), { BRIDGE_INSECURE_ALLOW_UNSIGNED: "" });
    try {
      for (const path of ["/apis", V1, VALUES]) {
        const body = await expectStatus(await worker.request(path), 500, "InternalError", /BRIDGE_SIGNING_KEYS is empty or missing/);
        expect(body.message).toContain("BRIDGE_INSECURE_ALLOW_UNSIGNED=true");
      }
      expect(await (await worker.request("/healthz")).text()).toBe("ok");
      await expect.poll(() => worker.logs()).toMatch(/"level":"error","msg":"request signing is not configured/);
    } finally {
      await worker.close();
    }
  }, 120_000);

  it("serves unsigned with BRIDGE_INSECURE_ALLOW_UNSIGNED=true, warning once per isolate; the policy notice with it", async () => {
    const worker = await startWorker(CONFIG(), { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" });
    try {
      expect((await worker.request(V1)).status).toBe(200);
      await expectStatus(await worker.request(VALUES), 403, "Forbidden", /no policy section/);
      await expect.poll(() => worker.logs()).toMatch(/running insecure: BRIDGE_SIGNING_KEYS is not set/);
      expect(worker.logs().match(/running insecure/g)).toHaveLength(1);
      expect(worker.logs().match(/policy: the BridgeConfig has no policy section/g)).toHaveLength(1);
    } finally {
      await worker.close();
    }
  }, 120_000);
});

describe("the Lambda handler refuses /apis without signing keys", () => {
  it("500 naming BRIDGE_SIGNING_KEYS on every /apis path, health probes ok, logged at cold start", async () => {
    const logs: LogRecord[] = [];
    const handler = createLambdaHandler({ BRIDGE_CONFIG: CONFIG(OPEN) }, { log: (r) => logs.push(r) }) as unknown as HttpHandler;
    for (const path of ["/apis", V1, VALUES]) {
      await expectStatus(await invoke(handler, "Function URL", path), 500, "InternalError", /BRIDGE_SIGNING_KEYS is empty or missing.*BRIDGE_INSECURE_ALLOW_UNSIGNED=true/);
    }
    expect(await (await invoke(handler, "Function URL", "/healthz")).text()).toBe("ok");
    expect(logs.filter((r) => r.level === "error" && /request signing is not configured/.test(r.msg))).toHaveLength(1);
  });

  it("serves unsigned with BRIDGE_INSECURE_ALLOW_UNSIGNED=true, warning once per cold start", async () => {
    const logs: LogRecord[] = [];
    const env = { BRIDGE_CONFIG: CONFIG(OPEN), BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" };
    const handler = createLambdaHandler(env, { log: (r) => logs.push(r) }) as unknown as HttpHandler;
    expect((await invoke(handler, "Function URL", V1)).status).toBe(200);
    expect((await invoke(handler, "API Gateway HTTP API v2", V1)).status).toBe(200);
    expect(logs.filter((r) => r.level === "warn" && r.msg.startsWith("running insecure: "))).toHaveLength(1);
    expect(logs.filter((r) => r.level === "warn" && r.msg.startsWith("running open: "))).toHaveLength(1);
    // a new execution environment (cold start) warns again
    const again = createLambdaHandler(env, { log: (r) => logs.push(r) }) as unknown as HttpHandler;
    await invoke(again, "Function URL", V1);
    expect(logs.filter((r) => r.msg.startsWith("running insecure: "))).toHaveLength(2);
  });
});
