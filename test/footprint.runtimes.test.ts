/**
 * The Node server loads only the providers its config names
 * (`shared/providers/registry.ts` `loadProviderModules`): a fresh Node
 * process running `startNodeServer` (what `functions/node.ts` runs) with an
 * SQS-only config, answering an SQS read, never loads the CloudWatch client,
 * the Cloud Monitoring provider or the official Google client stack; with a
 * CloudWatch config it loads the CloudWatch client. Every module the
 * process loads is recorded with a `node:module` load hook.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sqsConfigHead, startEmulator, type Emulator } from "./helpers/emulator.ts";
import { ROOT } from "./helpers/worker.ts";

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
