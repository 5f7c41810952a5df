/**
 * The `gmp` flavour's provider schema through the real config loader: the
 * shipped example loads with its defaults filled, the base URL is built
 * from project and location, Application Default Credentials
 * (`source: default`) are accepted (the Worker refuses them at read time,
 * `prometheus.gmp.worker.test.ts`), and a config the flavour cannot serve
 * (a generic-only field, a bad project or location, no credentials) is
 * refused with its path.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue } from "../../shared/config/yaml.ts";
import { gmpBaseUrl } from "../../shared/providers/prometheus/gmp.ts";

const RULE = `metrics:
  - { name: m, provider: gmp, query: { series: up } }
`;

function problems(provider: string): string {
  try {
    loadConfig(`apiVersion: external-metrics-bridge.io/v1alpha1\nkind: BridgeConfig\nproviders:\n  gmp: ${provider}\n${RULE}`, "bridge.yaml");
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map(formatIssue).join("\n");
  }
  throw new Error("config was accepted");
}

describe("prometheus provider, flavour gmp: config", () => {
  it("loads the shipped example with the defaults filled", () => {
    const file = "infra/examples/prometheus-gmp.yaml";
    const { config } = loadConfig(readFileSync(file, "utf8"), file);
    expect(config.providers["gmp"]).toEqual({
      type: "prometheus",
      config: {
        flavour: "gmp",
        project: "my-project",
        location: "global",
        endpoint: "https://monitoring.googleapis.com",
        credentials: { source: "environment", variable: "GOOGLE_SERVICE_ACCOUNT_JSON" },
        timeoutSeconds: 2,
        batchWindowSeconds: 0.01,
        maxBatchSize: 100,
      },
    });
    expect(gmpBaseUrl(config.providers["gmp"]!.config as never)).toBe("https://monitoring.googleapis.com/v1/projects/my-project/location/global/prometheus");
    expect(gmpBaseUrl({ endpoint: "http://127.0.0.1:8085/", project: "123456789012", location: "us-central1" })).toBe(
      "http://127.0.0.1:8085/v1/projects/123456789012/location/us-central1/prometheus",
    );
  });

  it("accepts Application Default Credentials (source default): the config does not know the runtime; the Worker refuses them when read", () => {
    const { config } = loadConfig(
      `apiVersion: external-metrics-bridge.io/v1alpha1\nkind: BridgeConfig\nproviders:\n  gmp: { type: prometheus, flavour: gmp, project: my-project, credentials: { source: default } }\n${RULE}`,
      "bridge.yaml",
    );
    expect(config.providers["gmp"]!.config).toMatchObject({ flavour: "gmp", credentials: { source: "default" } });
  });

  it("refuses generic-only fields, a bad project or location, and no credentials", () => {
    const generic = problems("{ type: prometheus, flavour: gmp, project: my-project, url: http://p:9090, credentials: { source: environment } }");
    expect(generic).toMatch(/providers\.gmp\.url: unknown field/);
    expect(problems("{ type: prometheus, flavour: gmp, project: My_Project, credentials: { source: environment } }")).toMatch(
      /providers\.gmp\.project: must be a Google Cloud project id or number/,
    );
    expect(problems("{ type: prometheus, flavour: gmp, project: my-project, location: Global/x, credentials: { source: environment } }")).toMatch(
      /providers\.gmp\.location: must be a Google Cloud location/,
    );
    expect(problems("{ type: prometheus, flavour: gmp, project: my-project }")).toMatch(/providers\.gmp\.credentials: Invalid input: expected object, received undefined/);
    expect(problems("{ type: prometheus, flavour: amz, url: http://p:9090 }")).toMatch(/providers\.gmp\.flavour: Invalid discriminator value\. Expected .*'gmp'/);
  });
});
