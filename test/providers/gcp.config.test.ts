/**
 * The gcp-monitoring rule schema through the real config loader: the
 * shipped example loads, defaults are filled, and invalid aggregation,
 * label mappings and values are refused with line and field path.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue } from "../../shared/config/yaml.ts";

const HEAD = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { gcp: { type: gcp-monitoring, project: my-project } }
metrics:
`;

function problems(rules: string): string {
  try {
    loadConfig(HEAD + rules, "bridge.yaml");
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map(formatIssue).join("\n");
  }
  throw new Error("config was accepted");
}

describe("gcp-monitoring config", () => {
  it("loads the shipped example", () => {
    const file = "infra/examples/gcp-pubsub.yaml";
    const { config } = loadConfig(readFileSync(file, "utf8"), file);
    expect(config.providers["gcp"]?.config).toMatchObject({ project: "my-project", credentials: { source: "environment", variable: "GOOGLE_SERVICE_ACCOUNT_JSON" } });
    expect(config.metrics.map((m) => m.name)).toContain("pubsub_num_undelivered_messages");
  });

  it("fills defaults", () => {
    const { config } = loadConfig(`${HEAD}  - { name: m, provider: gcp, query: { metricType: custom.googleapis.com/x } }\n`, "x.yaml");
    expect(config.metrics[0]!.query).toEqual({ metricType: "custom.googleapis.com/x", metricLabels: {}, resourceLabels: {}, selectorLabels: {}, lookbackSeconds: 300, onEmpty: "unavailable" });
    expect(config.providers["gcp"]!.config).toEqual({ project: "my-project", credentials: { source: "default" }, timeoutSeconds: 2, batchWindowSeconds: 0.01, maxSeriesPerCall: 50 });
  });

  it("refuses bad aggregation, mappings and values with line and path", () => {
    const text = problems(`  - name: a
    provider: gcp
    query: { metricType: custom.googleapis.com/x, reducer: REDUCE_SUM, alignmentPeriod: 60 }
  - name: b
    provider: gcp
    query: { metricType: "bad type!", aligner: ALIGN_AVERAGE }
  - name: c
    provider: gcp
    query:
      metricType: custom.googleapis.com/x
      selectorLabels: { a: metric.labels.k, b: metric.labels.k, c: "metric.labels.k OR x", d: project }
      metricLabels: { k: v }
  - name: d
    provider: gcp
    query: { metricType: custom.googleapis.com/x, aligner: ALIGN_MEAN, alignmentPeriod: 600, lookbackSeconds: 300, groupByFields: [metric.labels.a] }
`);
    expect(text).toMatch(/bridge\.yaml:7:\d+: metrics\[0\]\.query\.alignmentPeriod: needs an aligner other than ALIGN_NONE/);
    expect(text).toMatch(/metrics\[0\]\.query\.reducer: a cross-series reducer needs an aligner/);
    expect(text).toMatch(/metrics\[1\]\.query\.metricType: must be a metric type/);
    expect(text).toMatch(/metrics\[1\]\.query\.aligner/);
    expect(text).toMatch(/metrics\[2\]\.query\.selectorLabels: metric\.labels\.k is mapped from two labels/);
    expect(text).toMatch(/metrics\[2\]\.query\.selectorLabels\.c/);
    expect(text).toMatch(/metrics\[2\]\.query\.selectorLabels\.d/);
    expect(text).toMatch(/metrics\[2\]\.query\.metricLabels\.k: metric\.labels\.k is also mapped from a selector label/);
    expect(text).toMatch(/metrics\[3\]\.query\.groupByFields: only meaningful with a reducer/);
    expect(text).toMatch(/metrics\[3\]\.query\.lookbackSeconds: must be at least the alignment period/);
  });

  it("refuses a provider without a project or with a malformed credentials variable", () => {
    expect(() =>
      loadConfig(`apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { gcp: { type: gcp-monitoring, credentials: { source: environment, variable: "A-B" } } }
metrics: [{ name: m, provider: gcp, query: { metricType: custom.googleapis.com/x } }]
`, "p.yaml"),
    ).toThrow(/providers\.gcp\.project[\s\S]*providers\.gcp\.credentials\.variable: must be an environment variable name/);
  });
});
