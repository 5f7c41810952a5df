/**
 * The real-Prometheus harness itself (test/helpers/prometheus.ts), through
 * the HTTP API only: Prometheus v3.16.0 built from Go modules scrapes an
 * exporter this test controls, answers what was exported (values, explicit
 * sample timestamps, NaN), counts its own API requests, serves under
 * `--web.route-prefix`, and leaves no process behind when stopped or when
 * its start fails. The provider's suite (prometheus.real.test.ts) builds on
 * these facts.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  PROMETHEUS_BUILD_TIMEOUT_MS,
  exposition,
  prometheusBinary,
  startExporter,
  startPrometheus,
  type Exporter,
  type PrometheusServer,
  type VectorSample,
} from "../helpers/prometheus.ts";
import { waitFor } from "../k8s/cluster.ts";

/** Pids of this process's children whose command is `prometheus` (from /proc). */
function prometheusChildren(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid ...
      const m = /^\d+ \((.*)\) \S+ (\d+)/.exec(stat);
      if (m && m[1] === "prometheus" && Number(m[2]) === process.pid) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

let binary: string;
let exporter: Exporter;
let prom: PrometheusServer;
// set once the servers are built (a cold build takes minutes): a time taken at import would be minutes old by the first read
let sampleTs = 0; // an explicit timestamp 20 s in the past, whole ms

beforeAll(async () => {
  binary = prometheusBinary();
  sampleTs = Date.now() - 20_000;
  exporter = await startExporter([
    { name: "emb_queue_depth", labels: { queue: "a" }, value: 3, timestampMs: sampleTs },
    { name: "emb_queue_depth", labels: { queue: "a.b" }, value: 1e21 },
    { name: "emb_queue_depth", labels: { queue: "aXb" }, value: 1e-7 },
    { name: "emb_queue_depth", labels: { queue: 'q"uote\\' }, value: 0.1 },
    { name: "emb_queue_depth", labels: { queue: "nan" }, value: NaN },
  ]);
  prom = await startPrometheus({ binary, targets: [exporter.target] });
  await prom.waitForSeries('emb_queue_depth{queue="nan"}');
}, PROMETHEUS_BUILD_TIMEOUT_MS + 120_000);

afterAll(async () => {
  await prom?.stop();
  await exporter?.close();
});

describe("exposition format", () => {
  it("writes escaped labels, special values and explicit timestamps", () => {
    expect(
      exposition([
        { name: "x", labels: { queue: 'a"b\\c\nd' }, value: NaN, timestampMs: 1700000000123 },
        { name: "x", value: -Infinity },
        { name: "y_total", value: 1e21 },
      ], { y_total: "counter" }),
    ).toBe('# TYPE x gauge\nx{queue="a\\"b\\\\c\\nd"} NaN 1700000000123\nx -Inf\n# TYPE y_total counter\ny_total 1e+21\n');
  });
});

describe("a real Prometheus scraping the test's exporter", () => {
  it("answers the exported value stamped with the sample's own timestamp, not the evaluation time", async () => {
    expect(exporter.scrapes).toBeGreaterThan(0);
    const r = await prom.query('emb_queue_depth{queue="a"}');
    expect(r.status).toBe("success");
    const [s] = r.data!.result as VectorSample[];
    expect(s!.value[1]).toBe("3");
    expect(s!.metric).toMatchObject({ __name__: "emb_queue_depth", queue: "a", job: "exporter", instance: exporter.target });
    const t = await prom.query('timestamp(emb_queue_depth{queue="a"})');
    expect(Number((t.data!.result as VectorSample[])[0]!.value[1])).toBe(sampleTs / 1000);
    // the instant vector itself carries the evaluation time
    expect(s!.value[0]).toBeGreaterThan(sampleTs / 1000 + 15);
  });

  it("keeps label values that differ only by a regex metacharacter apart, and escaped quotes intact; values in Go's shortest float format", async () => {
    const byQueue = async (q: string) => ((await prom.query(`emb_queue_depth{queue=${JSON.stringify(q)}}`)).data!.result as VectorSample[]).map((s) => s.value[1]);
    expect(await byQueue("a.b")).toEqual(["1e+21"]);
    expect(await byQueue("aXb")).toEqual(["1e-07"]);
    expect(await byQueue('q"uote\\')).toEqual(["0.1"]);
  });

  it("answers NaN as the string NaN (the value a provider must refuse)", async () => {
    const r = await prom.query('emb_queue_depth{queue="nan"}');
    expect((r.data!.result as VectorSample[]).map((s) => s.value[1])).toEqual(["NaN"]);
  });

  it("sees a new value the test sets within a few scrapes", async () => {
    exporter.set([{ name: "emb_queue_depth", labels: { queue: "later" }, value: 42 }]);
    const v = await prom.waitForSeries('emb_queue_depth{queue="later"}', { value: "42", timeoutMs: 15_000 });
    expect(v).toHaveLength(1);
  });

  it("counts its own /api/v1/query requests (how the provider suite counts backend queries)", async () => {
    const before = await prom.requests();
    await Promise.all([prom.query("1"), prom.query("2"), prom.query("3")]);
    expect((await prom.requests()) - before).toBe(3);
    expect(await prom.requests("/api/v1/query_range")).toBe(0);
  });
});

describe("lifecycle", () => {
  it("serves under --web.route-prefix, and stop() ends the process and frees the port", async () => {
    const prefixed = await startPrometheus({ binary, targets: [exporter.target], routePrefix: "/gmp" });
    try {
      expect(prefixed.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/gmp$/);
      expect((await prefixed.query("1")).status).toBe("success");
      const outside = await fetch(`http://127.0.0.1:${prefixed.port}/api/v1/query?query=1`);
      expect(outside.status).toBe(404);
    } finally {
      await prefixed.stop();
    }
    expect(prefixed.process.exitCode).not.toBeUndefined();
    await expect(fetch(`http://127.0.0.1:${prefixed.port}/-/ready`)).rejects.toThrow();
    await prefixed.stop(); // idempotent
  });

  it("kills the server and throws with its log when it is not ready in time", async () => {
    const before = prometheusChildren();
    // serving under a prefix the helper does not know: /-/ready answers 404 for ever, the process keeps running
    const start = startPrometheus({ binary, targets: [exporter.target], extraArgs: ["--web.route-prefix=/elsewhere"], readyTimeoutMs: 3_000 });
    await expect(start).rejects.toThrow(/timed out after 3s waiting for Prometheus ready[\s\S]*probe returned false[\s\S]*----- prometheus/);
    expect(prometheusChildren()).toEqual(before);
  });

  it("throws with its log when the server exits at start (a bad flag)", async () => {
    const before = prometheusChildren();
    await expect(startPrometheus({ binary, targets: [exporter.target], extraArgs: ["--no-such-flag"] })).rejects.toThrow(/exited with 1 before it was ready[\s\S]*no-such-flag/);
    expect(prometheusChildren()).toEqual(before);
  });

  it("dies with the test process even when that is SIGKILLed (no exit handler runs)", async () => {
    const helper = fileURLToPath(new URL("../helpers/prometheus.ts", import.meta.url));
    const script = `
      import { startExporter, startPrometheus } from ${JSON.stringify(helper)};
      const exporter = await startExporter();
      const prom = await startPrometheus({ binary: process.env.PROM_BINARY, targets: [exporter.target] });
      console.log(JSON.stringify({ pid: prom.process.child.pid, dir: prom.dir }));
      setInterval(() => {}, 60_000);`;
    const owner = spawn(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, PROM_BINARY: binary }, stdio: ["ignore", "pipe", "inherit"] });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = "";
        owner.stdout!.on("data", (chunk) => {
          out += chunk;
          if (out.includes("\n")) resolve(out.split("\n")[0]!);
        });
        owner.once("exit", (code) => reject(new Error(`the owner exited with ${code} before starting Prometheus`)));
      });
      const { pid, dir } = JSON.parse(line) as { pid: number; dir: string };
      try {
        expect(() => process.kill(pid, 0)).not.toThrow();
        owner.kill("SIGKILL");
        await waitFor(`Prometheus (pid ${pid}) to be killed with its owner`, async () => {
          try {
            return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8")); // a zombie until reaped
          } catch {
            return true; // gone
          }
        }, { timeoutMs: 10_000 });
      } finally {
        rmSync(dir, { recursive: true, force: true }); // the killed owner could not remove it
      }
    } finally {
      owner.kill("SIGKILL");
    }
  });
});
