/**
 * The per-read audit record and metrics on the serverless runtimes: the
 * Lambda handler writes one JSON object per line on stdout carrying
 * CloudWatch Embedded Metric Format metadata that validates against the
 * EMF specification's rules; the Worker in workerd writes one audit line per
 * values read (Workers Logs) and keeps probes below info.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { startWorker } from "../helpers/worker.ts";

const PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
  await emulator.add("orders", 2);
});
afterAll(() => emulator?.stop());

const config = () =>
  sqsConfigHead(emulator.endpoint) +
  `metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
`;

/**
 * The EMF specification's rules for one log event: `_aws.Timestamp` a
 * number; each directive's `Namespace` a string, `Dimensions` arrays of
 * member names whose values are top-level strings (at most 30 per set),
 * each `Metrics[].Name` a top-level number (or array of numbers).
 * https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
 */
function emfProblems(event: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const aws = event["_aws"] as { Timestamp?: unknown; CloudWatchMetrics?: unknown } | undefined;
  if (aws === undefined) return ["no _aws"];
  if (typeof aws.Timestamp !== "number") problems.push("Timestamp is not a number");
  if (!Array.isArray(aws.CloudWatchMetrics) || aws.CloudWatchMetrics.length === 0) return [...problems, "no CloudWatchMetrics"];
  for (const d of aws.CloudWatchMetrics as { Namespace?: unknown; Dimensions?: unknown; Metrics?: unknown }[]) {
    if (typeof d.Namespace !== "string" || d.Namespace === "") problems.push("Namespace");
    for (const set of d.Dimensions as string[][]) {
      if (set.length > 30) problems.push("more than 30 dimensions");
      for (const name of set) if (typeof event[name] !== "string") problems.push(`dimension ${name} is not a top-level string`);
    }
    for (const m of d.Metrics as { Name: string; Unit?: string }[]) {
      if (typeof event[m.Name] !== "number") problems.push(`metric ${m.Name} is not a top-level number`);
    }
  }
  return problems;
}

describe("Lambda: EMF in the audit record", () => {
  it("writes one JSON object per line on stdout per values read, with EMF metrics; a failure names its kind and text", async () => {
    const writes: string[] = [];
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
    try {
      const handler = createLambdaHandler({ BRIDGE_CONFIG: config(), BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", BRIDGE_METRICS_NAMESPACE: "Test/EMB" }) as unknown as HttpHandler;
      expect((await invoke(handler, "Function URL", `${PATH}/queue_messages_ready?labelSelector=queue%3Dorders`)).status).toBe(200);
      expect((await invoke(handler, "Function URL", "/healthz")).status).toBe(200);
      expect((await invoke(handler, "Function URL", `${PATH}/queue_messages_ready?labelSelector=queue%3Dmissing`)).status).toBe(404);
    } finally {
      spy.mockRestore();
    }
    const lines = writes.join("").split("\n").filter((l) => l !== "");
    const events = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const reads = events.filter((e) => e["metric"] === "queue_messages_ready");
    expect(reads).toHaveLength(2);
    for (const e of reads) expect(emfProblems(e)).toEqual([]);
    const [ok, missing] = reads;
    expect(ok).toMatchObject({ level: "info", code: 200, provider: "sqs", namespace: "default", selector: "queue=orders", decision: "allow", value: 2 });
    expect(ok!["emb_bridge_metric_value"]).toBe(2);
    expect(ok!["emb_bridge_requests_total"]).toBe(1);
    expect((ok!["_aws"] as { CloudWatchMetrics: { Namespace: string }[] }).CloudWatchMetrics[0]!.Namespace).toBe("Test/EMB");
    expect(missing).toMatchObject({ level: "warn", code: 404, errorKind: "not_found", emb_bridge_backend_errors_total: 1 });
    expect(String(missing!["error"])).toMatch(/missing/);
    // the probe is debug: not written at the default level
    expect(events.some((e) => e["path"] === "/healthz")).toBe(false);
  });
});

describe("Worker (workerd): the per-read audit line", () => {
  it("logs each values read once with caller, selector, decision, provider, outcome and latency; probes stay below info", async () => {
    const worker = await startWorker(config());
    try {
      expect((await worker.request(`${PATH}/queue_messages_ready?labelSelector=queue%3Dorders`, { headers: { "X-Request-Id": "worker-read" } })).status).toBe(200);
      expect((await worker.request("/readyz")).status).toBe(200);
      let lines: Record<string, unknown>[] = [];
      for (let i = 0; i < 50 && !lines.some((l) => l["requestId"] === "worker-read"); i++) {
        await new Promise((r) => setTimeout(r, 50));
        lines = worker
          .logs()
          .split("\n")
          .map((l) => l.slice(l.indexOf("{")))
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l) as Record<string, unknown>);
      }
      const reads = lines.filter((l) => l["requestId"] === "worker-read");
      expect(reads).toHaveLength(1);
      expect(reads[0]).toMatchObject({ level: "info", msg: "request", user: "system:anonymous", namespace: "default", metric: "queue_messages_ready", selector: "queue=orders", decision: "allow", provider: "sqs", code: 200, value: 2 });
      expect(typeof reads[0]!["durationMs"]).toBe("number");
      expect(lines.some((l) => l["path"] === "/readyz")).toBe(false);
    } finally {
      await worker.close();
    }
  }, 120_000);
});
