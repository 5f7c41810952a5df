/**
 * Running test/custom-metrics-oracle/ (the real custom.metrics.k8s.io Go
 * client of k8s.io/metrics v0.37.1, the HPA controller's, over client-go
 * discovery): its input and output types and the runner, shared by
 * test/wire/custom-metrics.oracle.test.ts (answers served by builders) and
 * test/wire/custom-metrics-served.oracle.test.ts (answers of served bridges).
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { goBinary } from "../../infra/tools/go.ts";
import type { LabelSelector } from "../../shared/k8s/selector.ts";

const ORACLE_DIR = fileURLToPath(new URL("../custom-metrics-oracle/", import.meta.url));

/** The bound on building the oracle (client-go and k8s.io/metrics), ms: a `beforeAll` that builds it needs this as its timeout. */
export const ORACLE_BUILD_TIMEOUT_MS = 16 * 60_000;

/** One call of the Go program (see its main.go). */
export interface Call {
  namespace: string;
  group: string;
  kind: string;
  name?: string;
  selector?: string;
  metric: string;
  metricSelector: string;
}

/** An item as the Go program prints it: the internal MetricValue, field by field. */
export interface Decoded {
  describedObject: { kind: string; namespace: string; name: string; uid: string; apiVersion: string; resourceVersion: string; fieldPath: string };
  metric: { name: string; selector: LabelSelector | null };
  timestamp: string;
  unix: number;
  windowSeconds: number | null;
  value: string;
  /** decimal int64 text */
  milliValue: string;
}

/** What the Go program prints. */
export interface OracleOutput {
  calls: { items?: Decoded[]; error?: string }[];
  selectors: { labelSelector?: LabelSelector; error?: string }[];
  resourceLists: { list?: unknown; error?: string }[];
}

/** The oracle's binary, built now (synchronously, cached by content: infra/tools/go.ts) when the cache lacks it. */
export function customMetricsOracleBinary(): string {
  return goBinary(ORACLE_DIR, "custom-metrics-oracle", { timeoutMs: ORACLE_BUILD_TIMEOUT_MS - 60_000 });
}

/** Run the Go program against `input.host` (asynchronously: this process serves its requests meanwhile). */
export function runCustomMetricsOracle(binary: string, input: { host: string; calls: Call[]; selectors?: string[]; resourceLists?: string[] }): Promise<OracleOutput> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, [], { stdio: ["pipe", "pipe", "pipe"], timeout: 120_000 });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(JSON.parse(out) as OracleOutput) : reject(new Error(`oracle exited ${code}: ${err}`))));
    child.stdin.end(JSON.stringify({ selectors: [], resourceLists: [], ...input }));
  });
}
