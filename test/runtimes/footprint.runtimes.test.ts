/**
 * The Node server loads only the providers its config names
 * (`shared/providers/registry.ts` `loadProviderModules`): a fresh Node
 * process running `startNodeServer` (what `functions/node.ts` runs) with an
 * SQS-only config, answering an SQS read, never loads the CloudWatch client,
 * the Cloud Monitoring provider or the official Google client stack; with a
 * CloudWatch config it loads the CloudWatch client. The Node server's
 * bundle (`infra/node/build.ts`) runs alone, outside the repository, and
 * loads only the SQS provider's chunk. Every module a process loads is
 * recorded with a `node:module` load hook.
 */
import { execFile, spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildNodeServer } from "../../infra/node/build.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { ROOT } from "../helpers/worker.ts";

const exec = promisify(execFile);
const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
/** What an SQS-only bridge must never load. */
const NOT_FOR_SQS = /node_modules\/(@google-cloud\/monitoring|google-gax|@grpc\/grpc-js|protobufjs|@aws-sdk\/client-cloudwatch)\/|shared\/providers\/(gcp-monitoring|aws-cloudwatch)\/index\.ts$/;

/** Start the Node server in a fresh process with `config`, GET `path`, and return the answer and every module URL loaded. */
async function runNode(config: string, path: string): Promise<{ status: number; body: any; loaded: string[] }> {
  const script = `
    import { registerHooks } from "node:module";
    const loaded = new Set();
    registerHooks({ load(url, context, next) { loaded.add(url); return next(url, context); } });
    const { startNodeServer } = await import(${JSON.stringify(pathToFileURL(join(ROOT, "functions/node.ts")).href)});
    const { loadConfig } = await import(${JSON.stringify(pathToFileURL(join(ROOT, "shared/config/config.ts")).href)});
    const { config } = loadConfig(process.env.BRIDGE_CONFIG, "<env:BRIDGE_CONFIG>");
    const server = await startNodeServer({ config, port: 0, env: { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }, log: () => {} });
    const res = await fetch(server.url + process.env.READ_PATH);
    const text = await res.text();
    let body; try { body = JSON.parse(text); } catch { body = text; }
    await server.close();
    console.log(JSON.stringify({ status: res.status, body, loaded: [...loaded] }));
  `;
  const r = await exec(process.execPath, ["--input-type=module", "-e", script], {
    cwd: ROOT,
    env: { PATH: process.env["PATH"] ?? "", BRIDGE_CONFIG: config, READ_PATH: path },
    maxBuffer: 16 << 20,
  });
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

describe("Node server: only the configured providers are loaded", () => {
  let sqs: Emulator;
  beforeAll(async () => {
    sqs = await startEmulator();
    await sqs.add("worker_tasks", 7);
  });
  afterAll(async () => {
    await sqs?.stop();
  });

  it("an SQS-only config, serving an SQS read, loads the SQS client and none of the CloudWatch or Google modules", async () => {
    const config = `${sqsConfigHead(sqs.endpoint)}metrics:
  - name: queue_messages_ready
    provider: sqs
    query: { queueLabel: queue, attribute: ApproximateNumberOfMessages }
`;
    const { status, body, loaded } = await runNode(config, `${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`);
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body.items[0]).toMatchObject({ metricLabels: { queue: "worker_tasks" }, value: "7" });
    expect(loaded.some((u) => u.endsWith("/shared/providers/aws-sqs/index.ts"))).toBe(true);
    expect(loaded.some((u) => u.includes("/node_modules/@aws-sdk/client-sqs/"))).toBe(true);
    expect(loaded.filter((u) => NOT_FOR_SQS.test(u))).toEqual([]);
  });

  it("the Node server's bundle (infra/node/build.ts), run alone outside the repository, serves SQS reads and loads only the SQS provider's chunk", async () => {
    const out = mkdtempSync(join(ROOT, ".cache/node-build-"));
    const alone = mkdtempSync(join(tmpdir(), "bridge-node-"));
    try {
      const build = await buildNodeServer({ outdir: out });
      for (const name of readdirSync(out, { recursive: true, encoding: "utf8" })) {
        if (name.endsWith(".mjs")) cpSync(join(out, name), join(alone, name), { recursive: true });
      }
      for (let d = alone; dirname(d) !== d; d = dirname(d)) expect(existsSync(join(dirname(d), "node_modules")), dirname(d)).toBe(false);
      const configFile = join(alone, "bridge.yaml");
      writeFileSync(
        configFile,
        `${sqsConfigHead(sqs.endpoint)}metrics:
  - name: queue_messages_ready
    provider: sqs
    query: { queueLabel: queue, attribute: ApproximateNumberOfMessages }
`,
      );
      const meta = build.metafile.outputs;
      const chunkOf = (pattern: RegExp) =>
        Object.entries(meta)
          .filter(([, o]) => Object.keys(o.inputs).some((i) => pattern.test(i)))
          .map(([file]) => file.split("/").at(-1)!);
      const googleChunks = chunkOf(/node_modules\/(google-gax|@google-cloud\/monitoring)\//);
      expect(googleChunks.length).toBeGreaterThan(0);
      // start it as `node dist/node/node.mjs --config …` would be, with a load hook listing the files it reads
      const hook = `data:text/javascript,${encodeURIComponent(
        'import { registerHooks } from "node:module"; registerHooks({ load(url, c, next) { if (url.startsWith("file:")) process.stderr.write("LOADED " + url + "\\n"); return next(url, c); } });',
      )}`;
      const child = spawn(process.execPath, ["--import", hook, join(alone, "node.mjs"), "--config", configFile, "--port", "0"], {
        cwd: alone,
        env: { PATH: process.env["PATH"] ?? "", BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d));
      try {
        const url = await new Promise<string>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no listening line: ${stderr}`)), 20_000);
          child.stderr.on("data", () => {
            const m = /listening on (http:\/\/\S+)/.exec(stderr);
            if (m) {
              clearTimeout(timer);
              resolve(m[1]!);
            }
          });
          child.once("exit", (code) => reject(new Error(`exited ${code}: ${stderr}`)));
        });
        const res = await fetch(`${url}${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`);
        const body = (await res.json()) as any;
        expect(res.status, JSON.stringify(body)).toBe(200);
        expect(body.items[0]).toMatchObject({ metricLabels: { queue: "worker_tasks" }, value: "7" });
        const loaded = [...stderr.matchAll(/LOADED file:\/\/(\S+)/g)].map((m) => m[1]!.split("/").at(-1)!);
        expect(loaded).toContain("node.mjs");
        expect(loaded.some((f) => f.startsWith("aws-sqs-"))).toBe(true);
        expect(loaded.filter((f) => googleChunks.includes(f) || f.startsWith("aws-cloudwatch-") || f.startsWith("gcp-monitoring-"))).toEqual([]);
      } finally {
        child.kill("SIGTERM");
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
      rmSync(alone, { recursive: true, force: true });
    }
  });

  it("a CloudWatch config loads the CloudWatch client and not the SQS one", async () => {
    const config = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }
providers:
  cw: { type: aws-cloudwatch, region: eu-west-1, endpoint: "http://127.0.0.1:9", credentials: { source: static, accessKeyId: a, secretAccessKey: b } }
metrics:
  - name: visible
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName } }
`;
    const { status, loaded } = await runNode(config, "/healthz");
    expect(status).toBe(200);
    expect(loaded.some((u) => u.endsWith("/shared/providers/aws-cloudwatch/index.ts"))).toBe(true);
    expect(loaded.some((u) => u.includes("/node_modules/@aws-sdk/client-cloudwatch/"))).toBe(true);
    expect(loaded.some((u) => u.includes("/node_modules/@aws-sdk/client-sqs/"))).toBe(false);
  });
});
