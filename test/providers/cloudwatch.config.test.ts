/**
 * The aws-cloudwatch rule schema through the real config loader (errors
 * with line and field path), the metric-math tokenizer/renamer, and the
 * shipped example config.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue } from "../../shared/config/yaml.ts";
import { checkExpression, renameExpressionIds, STAT_PATTERN } from "../../shared/providers/aws-cloudwatch/schema.ts";
import { providerRefreshAhead as cloudWatchRefreshAhead } from "../../shared/providers/refresh-ahead.ts";

const HEAD = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { cw: { type: aws-cloudwatch, region: us-east-1 } }
metrics:
`;

function problems(rules: string): string[] {
  try {
    loadConfig(HEAD + rules, "bridge.yaml");
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map(formatIssue);
  }
  throw new Error("config was accepted");
}

describe("aws-cloudwatch config", () => {
  it("loads the shipped example", () => {
    const file = "infra/examples/cloudwatch.yaml";
    const { config } = loadConfig(readFileSync(file, "utf8"), file);
    expect(config.providers["cloudwatch"]?.config).toMatchObject({ maxQueriesPerCall: 500, batchWindowSeconds: 0.01 });
    expect(config.metrics.map((m) => m.name)).toContain("sqs_messages_visible");
  });

  it("fills defaults: onEmpty unavailable, no dimension labels, provider batching", () => {
    const { config } = loadConfig(`${HEAD}  - { name: cpu, provider: cw, query: { namespace: AWS/EC2, metricName: CPUUtilization, stat: Average, period: 300 } }\n`, "x.yaml");
    expect(config.metrics[0]!.query).toEqual({ namespace: "AWS/EC2", metricName: "CPUUtilization", stat: "Average", period: 300, dimensionLabels: {}, onEmpty: "unavailable" });
  });

  it("refuses bad statistics, periods, ids and mixed forms with line and path", () => {
    const found = problems(`  - name: a
    provider: cw
    query: { namespace: AWS/EC2, metricName: CPUUtilization, stat: p999.1x, period: 45 }
  - name: b
    provider: cw
    query: { namespace: AWS/EC2, metricName: CPUUtilization, stat: Average, period: 60, expression: "m1", metrics: { m1: { namespace: N, metricName: M, stat: Sum } } }
  - name: c
    provider: cw
    query:
      expression: "m1 + other"
      metrics: { m1: { namespace: N, metricName: M, stat: Sum } }
      period: 60
  - name: d
    provider: cw
    query:
      expression: "SUM(METRICS())"
      metrics: { m1: { namespace: N, metricName: M, stat: Sum } }
      period: 60
  - name: e
    provider: cw
    query:
      namespace: AWS/SQS
      metricName: ApproximateNumberOfMessagesVisible
      stat: Maximum
      period: 60
      dimensions: { QueueName: fixed }
      dimensionLabels: { queue: QueueName, "bad key!": X }
      onEmpty: { value: zero }
`);
    const text = found.join("\n");
    expect(text).toMatch(/bridge\.yaml:7:\d+: metrics\[0\]\.query\.stat: must be a CloudWatch statistic/);
    expect(text).toMatch(/metrics\[0\]\.query\.period: must be 1, 5, 10, 20, 30 or a multiple of 60/);
    expect(text).toMatch(/metrics\[1\]\.query: give either one metric .* not both/);
    expect(text).toMatch(/metrics\[2\]\.query\.expression: "other" is not one of the declared metrics \(m1\)/);
    expect(text).toMatch(/metrics\[3\]\.query\.expression: METRICS reads every query of the request and cannot be batched/);
    expect(text).toMatch(/metrics\[4\]\.query\.dimensionLabels\.bad key!: Invalid key/);
    expect(text).toMatch(/metrics\[4\]\.query\.onEmpty/);
  });

  it("refresh-ahead: as written, else on in a long-lived process and off on AWS Lambda", () => {
    const { config } = loadConfig(`${HEAD.replace("region: us-east-1 }", "region: us-east-1, refreshAhead: false }")}  - { name: cpu, provider: cw, query: { namespace: AWS/EC2, metricName: CPUUtilization, stat: Average, period: 300 } }\n`, "x.yaml");
    expect(config.providers["cw"]?.config).toMatchObject({ refreshAhead: false });
    expect(cloudWatchRefreshAhead({ refreshAhead: false }, { env: {}, now: Date.now })).toBeUndefined();
    expect(cloudWatchRefreshAhead({}, { env: {}, now: Date.now })).toMatchObject({ maxKeys: 10_000 });
    expect(cloudWatchRefreshAhead({}, { env: { AWS_LAMBDA_FUNCTION_NAME: "bridge" }, now: Date.now })).toBeUndefined();
    expect(cloudWatchRefreshAhead({ refreshAhead: true }, { env: { AWS_LAMBDA_FUNCTION_NAME: "bridge" }, now: Date.now })).toBeDefined();
  });

  it("refresh-ahead: the runtime's explicit longLived decides when the config is silent, over the environment's guess", () => {
    // Node server / the proxy's in-process bridge pass true: on, even where the guess would say Lambda
    expect(cloudWatchRefreshAhead({}, { env: { AWS_LAMBDA_FUNCTION_NAME: "bridge" }, now: Date.now, longLived: true })).toMatchObject({ maxKeys: 10_000 });
    // Lambda and the Worker pass false: off, even where the guess would say long-lived (no Lambda variable, no Workers user agent)
    expect(cloudWatchRefreshAhead({}, { env: {}, now: Date.now, longLived: false })).toBeUndefined();
    // the config still wins both ways
    expect(cloudWatchRefreshAhead({ refreshAhead: true }, { env: {}, now: Date.now, longLived: false })).toBeDefined();
    expect(cloudWatchRefreshAhead({ refreshAhead: false }, { env: {}, now: Date.now, longLived: true })).toBeUndefined();
  });

  it("accepts CloudWatch's statistic spellings", () => {
    for (const ok of ["SampleCount", "Average", "Sum", "Minimum", "Maximum", "IQM", "p99", "p99.9", "p100", "p0", "tm90", "tc99.5", "ts80", "wm95", "PR(10:)", "TM(2%:98%)", "TC(:500)", "WM(0.5:2.5)"]) {
      expect(STAT_PATTERN.test(ok), ok).toBe(true);
    }
    for (const bad of ["average", "p", "p999", "P99", "tm", "PR(10)", "Max", "p99.", ""]) {
      expect(STAT_PATTERN.test(bad), bad).toBe(false);
    }
  });

  it("renames only declared ids, never function names, keywords or strings", () => {
    const ids = new Set(["m1", "errors"]);
    expect(renameExpressionIds(`IF(errors > 0, errors / m1, FILL(m1, REPEAT)) + LABEL("errors m1")`, (id) => `q7_${id}`, ids)).toBe(
      `IF(q7_errors > 0, q7_errors / q7_m1, FILL(q7_m1, REPEAT)) + LABEL("errors m1")`,
    );
    expect(renameExpressionIds(`m1+m10`, (id) => `x_${id}`, new Set(["m1", "m10"]))).toBe("x_m1+x_m10");
    expect(checkExpression(`'unterminated`, ids)).toMatch(/unterminated string/);
    expect(checkExpression(`SEARCH('{AWS/EC2} cpu', 'Average')`, ids)).toMatch(/SEARCH reads every query/);
    expect(checkExpression(`ABS(5)`, ids)).toMatch(/reads none of the declared metrics/);
    expect(checkExpression(`ABS(m1) * 2`, ids)).toBeUndefined();
  });
});
