/**
 * The Node server's metrics and audit log through the real process
 * (`node functions/node.ts`): `/metrics` on its own listener after reads
 * against the SQS emulator, a backend failure counted with its HTTP code and
 * error kind in separate labels and logged with its text, probes not logged
 * at info, the exposition linted by the linter `promtool check metrics` runs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { promlint, sample } from "../helpers/promlint.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** package.json's version: what build_info reports. */
const PACKAGE_VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

const PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

describe("the Node server's /metrics and audit log (real process)", () => {
  let emulator: Emulator;
  let child: ChildProcess;
  let output = "";
  let url = "";
  let metricsUrl = "";
  const dir = mkdtempSync(join(tmpdir(), "emb-obs-"));

  beforeAll(async () => {
    emulator = await startEmulator();
    await emulator.add("orders", 3);
    const config =
      sqsConfigHead(emulator.endpoint) +
      `  nocreds:
    type: aws-sqs
    region: us-east-1
    endpoint: ${emulator.endpoint}
    credentials: { source: environment }
    maxAttempts: 1
metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
  - { name: broken_depth, provider: nocreds, query: { queueLabel: queue } }
`;
    writeFileSync(join(dir, "bridge.yaml"), config);
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith("AWS_") || k.startsWith("BRIDGE_") || k === "LOG_LEVEL" || k.startsWith("METRICS_")) delete env[k];
    child = spawn(process.execPath, [join(ROOT, "functions/node.ts"), "--port", "0", "--metrics-port", "0", "--insecure-allow-unsigned", "--config", join(dir, "bridge.yaml")], {
      cwd: ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    await new Promise<void>((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`exited ${code}: ${output}`)));
      const check = () => {
        const m = /listening on (http:\/\/\S+) .*metrics at (http:\/\/\S+)\/metrics/.exec(output);
        if (m) {
          url = m[1]!;
          metricsUrl = m[2]!;
          resolve();
        }
      };
      child.stderr!.on("data", check);
    });
  }, 30_000);

  afterAll(async () => {
    child?.kill("SIGTERM");
    await emulator?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The JSON log lines written so far. */
  const logLines = () =>
    output
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  it("counts reads, cache outcomes, policy decisions, the served value and a failure with code and kind apart; logs the audit record with the error text", async () => {
    const read = (metric: string, id: string) => fetch(`${url}${PATH}/${metric}?labelSelector=queue%3Dorders`, { headers: { "X-Request-Id": id } });
    expect((await read("queue_messages_ready", "first")).status).toBe(200);
    expect((await read("queue_messages_ready", "second")).status).toBe(200);
    const failed = await read("broken_depth", "nocreds");
    expect(failed.status).toBe(500);
    const failure = ((await failed.json()) as { message: string }).message;
    expect(failure).toMatch(/no AWS credentials were found/);
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    // the API port never serves metrics
    expect((await fetch(`${url}/metrics`)).status).toBe(404);

    const res = await fetch(`${metricsUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(sample(text, "emb_bridge_requests_total", { kind: "values", code: "200" })).toBe(2);
    expect(sample(text, "emb_bridge_requests_total", { kind: "values", code: "500" })).toBe(1);
    expect(sample(text, "emb_bridge_requests_total", { kind: "probe", code: "200" })).toBe(1);
    expect(sample(text, "emb_bridge_cache_requests_total", { provider: "sqs", result: "hit" })).toBe(1);
    expect(sample(text, "emb_bridge_cache_requests_total", { provider: "sqs", result: "miss" })).toBe(1);
    expect(sample(text, "emb_bridge_backend_errors_total", { provider: "nocreds", code: "500", kind: "credentials" })).toBe(1);
    expect(sample(text, "emb_bridge_backend_request_duration_seconds_count", { provider: "sqs" })).toBeGreaterThanOrEqual(1);
    expect(sample(text, "emb_bridge_metric_value", { metric: "queue_messages_ready" })).toBe(3);
    expect(sample(text, "emb_bridge_metric_value_age_seconds", { metric: "queue_messages_ready" })).toBeGreaterThanOrEqual(0);
    expect(sample(text, "emb_bridge_policy_decisions_total", { layer: "bridge", decision: "allow" })).toBe(3);
    expect(sample(text, "emb_bridge_build_info", { version: PACKAGE_VERSION })).toBe(1);

    await new Promise((r) => setTimeout(r, 100)); // the log is written once per event-loop turn
    const lines = logLines();
    const audit = lines.find((l) => l["requestId"] === "nocreds")!;
    expect(audit).toMatchObject({
      level: "error",
      msg: "request",
      user: "system:anonymous",
      namespace: "default",
      metric: "broken_depth",
      selector: "queue=orders",
      provider: "nocreds",
      decision: "allow",
      cache: "load",
      code: 500,
      errorKind: "credentials",
      error: failure,
    });
    expect(typeof audit["durationMs"]).toBe("number");
    expect(lines.find((l) => l["requestId"] === "second")).toMatchObject({ level: "info", code: 200, cache: "hit", metric: "queue_messages_ready" });
    // probes are debug: not written at the default level
    expect(lines.some((l) => l["path"] === "/readyz")).toBe(false);
  });

  it("passes the Prometheus naming linter (client_golang promlint, as promtool check metrics)", async () => {
    const text = await (await fetch(`${metricsUrl}/metrics`)).text();
    // prom-client's own Node gauges (collectDefaultMetrics) carry a `_total` suffix the linter flags; their names are the library's, shared by every Node exporter
    const library = /^emb_bridge_nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/;
    expect(promlint(text).filter((p) => !library.test(p))).toEqual([]);
    expect(promlint(text.replace(/^emb_bridge_nodejs_active_.*$/gm, ""))).toEqual([]);
    // the linter does flag a bad name of ours
    expect(promlint(`${text}# HELP emb_bridge_bad_seconds_total x\n# TYPE emb_bridge_bad_seconds_total gauge\nemb_bridge_bad_seconds_total 1\n`)).toContainEqual(
      expect.stringMatching(/^emb_bridge_bad_seconds_total /),
    );
  }, 300_000);
});
