/**
 * The admin CLI as a process on `prometheus` rules (test/fixtures/cli/prometheus*.yaml):
 * `check-hpa` maps an HPA's selector as the provider does and shows its PromQL,
 * `policy explain` shows the PromQL the bridge would send, `config validate`
 * and `policy lint --config` warn about rules that are valid but probably wrong.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ROOT } from "../helpers/worker.ts";

const exec = promisify(execFile);
const CONFIG = "test/fixtures/cli/prometheus.yaml";
const HPAS = "test/fixtures/cli/prometheus-hpa.yaml";
const POLICY = "test/fixtures/cli/prometheus-policy.yaml";

/** Run the CLI; resolves with exit code and output (never rejects on a non-zero exit). */
async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [join(ROOT, "functions/cli.ts"), ...args], { cwd: ROOT });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof e.code !== "number") throw err;
    return { code: e.code, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

const ONEMPTY = /^metrics\[1\]\.query\.onEmpty: onEmpty\.value "0" is served whenever Prometheus answers no series for a label set: also when the exporter is down, .* keep it only when the exporter drops a series exactly when its value is 0 \(e\.g\. an empty queue\), else use unavailable \(the default\)$/;
const RANGE = /^metrics\[2\]\.query\.template: template line 2, column 48: the range \[5m\] \(300 s\) is longer than maxAgeSeconds \(60 s\): the value may be computed from samples up to 300 s old/;
const LOOKBACK = /^metrics\[3\]\.query\.lookbackSeconds: lookbackSeconds \(600 s\) is longer than maxAgeSeconds \(60 s\)/;

describe("check-hpa on prometheus rules", () => {
  it("maps each HPA selector as the provider does: the PromQL it would send, values quoted for RE2 then PromQL, allow-listed values mapped, unmappable labels and unlisted values refused", async () => {
    const r = await cli("check-hpa", "--config", CONFIG, HPAS, "-o", "json");
    expect(r.code).toBe(1); // two of the four reads would fail
    const checks = JSON.parse(r.stdout).checks as { hpa: string; metric: string; selector: string; query?: string; problems: string[]; ok: boolean }[];
    expect(checks.map((c) => [c.hpa, c.metric, c.ok])).toEqual([
      ["shop/orders-worker", "rabbitmq_messages_ready", true],
      ["shop/orders-worker", "celery_queue_length", true],
      ["shop/billing", "kafka_consumer_lag", false],
      ["shop/billing", "celery_queue_length", false],
    ]);
    // `in (a.b)` becomes the RE2 `a\.b`, written in a PromQL string as `a\\.b`: it never matches `aXb`
    const both = 'rabbitmq_queue_messages_ready{job="rabbitmq",queue=~"a\\\\.b|orders"}';
    expect(checks[0]!.query).toBe(
      `Prometheus instant query at http://prometheus.monitoring.svc:9090 (lookback_delta 120s): sum by (queue) (${both}), with the samples' time from min by (queue) (timestamp(${both}))`,
    );
    // the allow-list maps the selector value emails to the Prometheus value emails-high
    expect(checks[1]!.query).toContain('sum by (queue_name) (celery_queue_length{queue_name="emails-high"})');
    expect(checks[2]!.problems).toEqual(['400: metric kafka_consumer_lag: selector requirement "env=prod" cannot be mapped: this rule understands only the labels "queue"']);
    expect(checks[3]!.problems).toEqual(['404: metric celery_queue_length: queue "payments" is not served by this rule']);
  });
});

describe("policy explain on prometheus rules", () => {
  it("shows the value and timestamp queries the bridge would send, from the provider's own query builder", async () => {
    const r = await cli("policy", "explain", "--config", CONFIG, "-n", "shop", "-m", "rabbitmq_messages_ready", "-l", "queue in (orders,emails)");
    expect(r.code).toBe(0);
    const sel = 'rabbitmq_queue_messages_ready{job="rabbitmq",queue=~"emails|orders"}';
    expect(r.stdout).toContain(
      `\n  query: Prometheus instant query at http://prometheus.monitoring.svc:9090 (lookback_delta 120s): sum by (queue) (${sel}), with the samples' time from min by (queue) (timestamp(${sel}))\n`,
    );
    const json = JSON.parse((await cli("policy", "explain", "--config", CONFIG, "-n", "shop", "-m", "http_request_rate", "-l", "service=api", "-o", "json")).stdout);
    expect(json).toMatchObject({ decision: "Allow", notes: [] });
    expect(json.query).toBe(
      'Prometheus instant query at http://prometheus.monitoring.svc:9090 (lookback_delta 60s): sum by (service) (sum by (service) (\n  rate(http_requests_total{service="api"}[5m])\n)\n), stamped with the evaluation time',
    );
  });

  it("a selector the rule cannot map: no query, a note with the provider's 400, exit 1 even though the policies allow", async () => {
    const r = await cli("policy", "explain", "--config", CONFIG, "-n", "shop", "-m", "kafka_consumer_lag", "-l", "queue=orders,env=prod");
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^Allow: /);
    expect(r.stdout).not.toContain("  query: ");
    expect(r.stdout).toContain(
      'note: the provider refuses this selector, so the read fails whatever the policies decide: 400: metric kafka_consumer_lag: selector requirement "env=prod" cannot be mapped',
    );
  });
});

describe("config validate and policy lint on prometheus rules", () => {
  it("config validate: valid, exit 0, with a located warning for onEmpty.value, a template range and a lookbackSeconds longer than maxAgeSeconds", async () => {
    const r = await cli("config", "validate", CONFIG, "-o", "json");
    expect(r.code).toBe(0);
    const file = JSON.parse(r.stdout).files[0];
    expect(file).toMatchObject({ valid: true, issues: [] });
    const warnings = file.warnings as { line: number; column: number; path: string; message: string }[];
    expect(warnings.map((w) => `${w.line}:${w.column}`)).toEqual(["24:16", "29:17", "41:24"]);
    const lines = warnings.map((w) => `${w.path}: ${w.message}`);
    expect(lines[0]).toMatch(ONEMPTY);
    expect(lines[1]).toMatch(RANGE);
    expect(lines[2]).toMatch(LOOKBACK);
    expect(lines).toHaveLength(3);
    const text = await cli("config", "validate", CONFIG);
    expect(text.stdout.split("\n")[1]).toMatch(/^test\/fixtures\/cli\/prometheus\.yaml:24:16: warning: metrics\[1\]\.query\.onEmpty: onEmpty\.value "0"/);
  });

  it("no warning for the same rules written as advised (range within maxAgeSeconds, no lookbackSeconds, no onEmpty value)", async () => {
    const { readFileSync, writeFileSync, mkdtempSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const fixed = readFileSync(join(ROOT, CONFIG), "utf8")
      .replace('      onEmpty: { value: "0" }\n', "")
      .replace("[5m]", "[1m]")
      .replace("      lookbackSeconds: 600\n", "");
    const path = join(mkdtempSync(join(tmpdir(), "emb-prom-cli-")), "fixed.yaml");
    writeFileSync(path, fixed);
    const r = await cli("config", "validate", path, "-o", "json");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).files[0]).toMatchObject({ valid: true, warnings: [] });
  });

  it("policy lint --config: the same warnings beside the policy's own (a requirement on a label the prometheus rule cannot map); --strict fails on them", async () => {
    const r = await cli("policy", "lint", "--config", CONFIG, POLICY, "-o", "json");
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ errors: 0, warnings: 4 });
    const lines = (out.findings as { source: string; path: string; message: string }[]).map((f) => `${f.path}: ${f.message}`);
    expect(lines.filter((l) => ONEMPTY.test(l) || RANGE.test(l) || LOOKBACK.test(l))).toHaveLength(3);
    expect(lines).toContainEqual(expect.stringMatching(/^spec\.rules\[0\]\.selector: requirement "env=prod" is on a label the metric rule cannot map \(kafka_consumer_lag\)/));
    expect((await cli("policy", "lint", "--strict", "--config", CONFIG)).code).toBe(1);
  });
});
