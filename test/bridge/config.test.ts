import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError } from "../../shared/config/yaml.ts";
import { ANONYMOUS, HPA_CONTROLLER, type Caller } from "../../shared/identity.ts";
import { parseSelector } from "../../shared/k8s/selector.ts";
import { policyStartupNotices } from "../../shared/policy/authorize.ts";

const HEAD = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
`;

function issuesOf(text: string) {
  try {
    loadConfig(text, "bridge.yaml");
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error("config was accepted");
}

describe("config loading", () => {
  it("loads the shipped examples", () => {
    for (const file of ["infra/examples/demo.yaml", "infra/examples/aws-sqs.yaml"]) {
      const { config } = loadConfig(readFileSync(file, "utf8"), file);
      expect(config.metrics.length).toBeGreaterThan(0);
    }
  });

  it("the production-shaped examples ship defaultAction Deny and grant the HPA controller (either identity) what they serve, nobody else", () => {
    const controllerManager: Caller = { user: "system:kube-controller-manager", groups: ["system:authenticated"], extra: {} };
    const jane: Caller = { user: "jane", groups: ["system:authenticated"], extra: {} };
    for (const [file, selector] of [
      ["infra/examples/aws-sqs.yaml", "queue=orders"],
      ["infra/examples/cloudwatch.yaml", "queue=orders"],
      ["infra/examples/gcp-pubsub.yaml", "subscription=orders-worker"],
      ["infra/examples/prometheus.yaml", "queue=orders"],
      ["infra/examples/prometheus-gmp.yaml", "queue=orders"],
      ["infra/examples/prometheus-amp.yaml", "queue=orders"],
    ] as const) {
      const { config } = loadConfig(readFileSync(file, "utf8"), file);
      expect(config.policy, file).toMatchObject({ defaultAction: "Deny" });
      expect(config.policy!.implicit, file).toBeUndefined();
      expect(policyStartupNotices(config), file).toEqual([]);
      for (const rule of config.metrics) {
        const request = { namespace: "team-a", metric: rule.key, selector: parseSelector(selector) };
        for (const caller of [HPA_CONTROLLER, controllerManager]) {
          expect(config.policy!.policies.evaluate({ ...request, caller }).decision, `${file} ${rule.name} ${caller.user}`).toBe("Allow");
        }
        for (const caller of [jane, ANONYMOUS]) {
          expect(config.policy!.policies.evaluate({ ...request, caller }).decision, `${file} ${rule.name} ${caller.user}`).toBe("Deny");
        }
      }
    }
  });

  it("the local demo runs open explicitly, and says so on start", () => {
    const file = "infra/examples/demo.yaml";
    const { config } = loadConfig(readFileSync(file, "utf8"), file);
    expect(config.policy).toMatchObject({ defaultAction: "Allow" });
    expect(policyStartupNotices(config)).toEqual([expect.objectContaining({ level: "warn", msg: expect.stringMatching(/^running open: /) })]);
  });

  it("fills defaults and keeps cacheTTLSeconds within maxAgeSeconds", () => {
    const { config } = loadConfig(
      `${HEAD}defaults: { maxAgeSeconds: 3, cacheTTLSeconds: 5 }
providers: { sqs: { type: aws-sqs, region: eu-west-1 } }
metrics:
  - { name: Depth, provider: sqs }
`,
      "x.yaml",
    );
    const rule = config.metrics[0]!;
    expect(rule).toMatchObject({ name: "Depth", key: "depth", maxAgeSeconds: 3, cacheTTLSeconds: 3 });
    expect(rule.query).toEqual({ queueLabel: "queue", queueNameTemplate: "{queue}", attribute: "ApproximateNumberOfMessages", queueIdentifier: "name" });
    expect(config.providers["sqs"]).toEqual({
      type: "aws-sqs",
      config: { region: "eu-west-1", credentials: { source: "default" }, timeoutSeconds: 2, maxAttempts: 2 },
    });
  });

  it("names file, line, column and field path of each problem", () => {
    const issues = issuesOf(`${HEAD}providers:
  sqs:
    type: aws-sqs
    region: mars
    timeoutSeconds: 30
metrics:
  - name: depth
    provider: sqs
    query:
      queueLabel: queue
      attribute: NumberOfCats
      extra: 1
`);
    const text = issues.map((i) => `${i.line}:${i.column} ${i.path}: ${i.message}`);
    expect(text).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^6:13 providers\.sqs\.region: must be an AWS region/),
        expect.stringMatching(/^7:21 providers\.sqs\.timeoutSeconds: /),
        expect.stringMatching(/^13:18 metrics\[0\]\.query\.attribute: /),
        expect.stringMatching(/^14:7 metrics\[0\]\.query\.extra: unknown field/),
      ]),
    );
    expect(issues.every((i) => i.source === "bridge.yaml")).toBe(true);
  });

  it("zod's English messages name each problem (zod/mini with its locale loaded, shared/config/zod.ts)", () => {
    const issues = issuesOf(`${HEAD}providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: "not a url", timeoutSeconds: 30, maxAttempts: 1.5, credentials: { source: static, accessKeyId: "" } }
metrics:
  - { name: depth, provider: sqs, cacheTTLSeconds: -1, query: { queues: [] } }
policy: { defaultAction: Maybe }
`);
    expect(issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      "metrics[0].cacheTTLSeconds: Too small: expected number to be >=0",
      'policy.defaultAction: Invalid option: expected one of "Allow"|"Deny"',
    ]);
    const providerIssues = issuesOf(`${HEAD}providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: "not a url", timeoutSeconds: 30, maxAttempts: 1.5, credentials: { source: static, accessKeyId: "" } }
metrics:
  - { name: depth, provider: sqs, query: { queues: [] } }
`);
    expect(providerIssues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      "providers.sqs.endpoint: Invalid URL",
      "providers.sqs.credentials.accessKeyId: Too small: expected string to have >=1 characters",
      "providers.sqs.credentials.secretAccessKey: Invalid input: expected string, received undefined",
      "providers.sqs.timeoutSeconds: Too big: expected number to be <=4",
      "providers.sqs.maxAttempts: Invalid input: expected int, received number",
      "metrics[0].query.queues: Too small: expected array to have >=1 items",
    ]);
  });

  it("refuses unknown providers, unknown types, duplicate names and TTL above maxAge", () => {
    const issues = issuesOf(`${HEAD}providers:
  sqs: { type: aws-sqs, region: us-east-1 }
  odd: { type: carrier-pigeon }
metrics:
  - { name: depth, provider: sqs }
  - { name: DEPTH, provider: sqs }
  - { name: other, provider: nope }
  - { name: stale, provider: sqs, maxAgeSeconds: 5, cacheTTLSeconds: 10 }
`);
    const messages = issues.map((i) => `${i.line} ${i.path}: ${i.message}`);
    expect(messages).toEqual([
      expect.stringMatching(/^5 providers\.odd\.type: unknown provider type "carrier-pigeon"/),
      expect.stringMatching(/^8 metrics\[1\]\.name: metric "DEPTH" is already defined by metrics\[0\]/),
      expect.stringMatching(/^9 metrics\[2\]\.provider: no provider named "nope"/),
      expect.stringMatching(/^10 metrics\[3\]\.cacheTTLSeconds: must not exceed maxAgeSeconds/),
    ]);
  });

  it("reports YAML syntax errors with their line", () => {
    const issues = issuesOf(`${HEAD}providers:\n  sqs: { type: aws-sqs\nmetrics: []\n`);
    expect(issues[0]!.message).toMatch(/^YAML: /);
    expect(issues[0]!.line).toBeGreaterThanOrEqual(4);
  });

  it("refuses a source without exactly one BridgeConfig, and bad metric names", () => {
    expect(issuesOf("kind: Other\n")[0]!.message).toMatch(/exactly one document with kind: BridgeConfig/);
    const issues = issuesOf(`${HEAD}providers: { sqs: { type: aws-sqs, region: us-east-1 } }
metrics:
  - { name: "has space", provider: sqs }
  - { name: "..", provider: sqs }
`);
    expect(issues.map((i) => i.path)).toEqual(["metrics[0].name", "metrics[1].name"]);
  });

  it("keeps documents of other kinds for other loaders", () => {
    const { others } = loadConfig(
      `${HEAD}providers: { sqs: { type: aws-sqs, region: us-east-1 } }
metrics: [{ name: depth, provider: sqs }]
---
kind: SomethingElse
`,
      "x.yaml",
    );
    expect(others.map((d) => (d.value as { kind: string }).kind)).toEqual(["SomethingElse"]);
  });
});
