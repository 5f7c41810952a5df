/**
 * Defaults and messages the docs promise (issue 27, "Docs and defaults that
 * are true"), in process: a config error lists the values a field accepts;
 * an `onEmpty` value on CloudWatch and Cloud Monitoring rules is warned
 * about unless every label is allow-listed, and no shipped example invents
 * one; `config validate` and the Worker build agree on a file holding no
 * document; the Lambda build lists only what it packaged; the demo's
 * port-taken hint keeps the port the user moved; the Node entry refuses a
 * Node older than the one it is built for.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { validateConfigText } from "../../functions/cli/config-validate.ts";
import { startCommand } from "../../functions/demo.ts";
import { nodeTooOld, nodeTooOldMessage, REQUIRED_NODE_MAJOR } from "../../functions/script-args.ts";
import { packagedPatterns, PACKAGED_FILES } from "../../infra/lambda/build.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue } from "../../shared/config/yaml.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

const SQS_HEAD = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1 }
policy: { defaultAction: Deny }
metrics:
  - name: q
    provider: sqs
    query:
`;

/** The formatted issues of a config the loader refuses. */
function problems(text: string): string[] {
  try {
    loadConfig(text, "bridge.yaml");
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.map(formatIssue);
    throw err;
  }
  throw new Error("config was accepted");
}

const CW_RULE = (labels: string, onEmpty: string) => `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  cw: { type: aws-cloudwatch, region: eu-west-1 }
policy: { defaultAction: Deny }
metrics:
  - name: sqs_messages_visible
    provider: cw
    query:
      namespace: AWS/SQS
      metricName: ApproximateNumberOfMessagesVisible
      stat: Maximum
      period: 60
      dimensionLabels: ${labels}
      onEmpty: ${onEmpty}
`;

const VALID_ATTRIBUTES = '"ApproximateNumberOfMessages"|"ApproximateNumberOfMessagesNotVisible"|"ApproximateNumberOfMessagesDelayed"';

describe("a value matching no branch of a union names what the field accepts", () => {
  it("a misspelt attribute lists the valid attributes (not zod's bare 'Invalid input')", () => {
    expect(problems(`${SQS_HEAD}      attribute: ApproximateNumberOfMessage\n`)).toEqual([
      `bridge.yaml:10:18: metrics[0].query.attribute: Invalid option: expected one of ${VALID_ATTRIBUTES}`,
    ]);
  });

  it("a misspelt item of a list is located at the item", () => {
    expect(problems(`${SQS_HEAD}      attribute: [ApproximateNumberOfMessages, Visible]\n`)).toEqual([
      `bridge.yaml:10:48: metrics[0].query.attribute[1]: Invalid option: expected one of ${VALID_ATTRIBUTES}`,
    ]);
  });

  it("a misspelt onEmpty keyword lists the keywords", () => {
    const cw = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  cw: { type: aws-cloudwatch, region: eu-west-1 }
metrics:
  - name: m
    provider: cw
    query: { namespace: AWS/SQS, metricName: M, stat: Sum, period: 60, onEmpty: unavailible }
`;
    expect(problems(cw)).toEqual([`bridge.yaml:8:81: metrics[0].query.onEmpty: Invalid option: expected one of "unavailable"|"notFound"`]);
  });

  it("a value of a type no branch takes names the types the branches take", () => {
    expect(problems(CW_RULE("{ queue: 5 }", "unavailable"))).toEqual([
      "bridge.yaml:14:33: metrics[0].query.dimensionLabels.queue: Invalid input: expected string or object, received number",
    ]);
  });
});

const GCP_RULE = (labels: string, onEmpty: string) => `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  gcp: { type: gcp-monitoring, project: my-project }
policy: { defaultAction: Deny }
metrics:
  - name: pubsub_undelivered
    provider: gcp
    query:
      metricType: pubsub.googleapis.com/subscription/num_undelivered_messages
      selectorLabels: ${labels}
      onEmpty: ${onEmpty}
`;

describe("an onEmpty value on CloudWatch and Cloud Monitoring rules", () => {
  it("is warned about when a label has no allow-list: a misspelt queue would read the value", () => {
    const r = validateConfigText(CW_RULE("{ queue: QueueName }", '{ value: "0" }'), "cw.yaml");
    expect(r.valid).toBe(true);
    expect(r.warnings.map(formatIssue)).toEqual([expect.stringMatching(/^cw\.yaml:15:16: metrics\[0\]\.query\.onEmpty: onEmpty\.value "0" is served for every series CloudWatch has no datapoint for: with the label queue without an allow-list, also for a name that is misspelt/)]);
    expect(r.warnings[0]!.message).toContain("publishes on activity alone");
    expect(r.warnings[0]!.message).toContain("allow-list (queue: { dimension: QueueName, values: { orders: orders } })");
  });

  it("is not warned about when every label is allow-listed, nor without a value", () => {
    expect(validateConfigText(CW_RULE("{ queue: { dimension: QueueName, values: { orders: orders } } }", '{ value: "0" }'), "cw.yaml").warnings).toEqual([]);
    expect(validateConfigText(CW_RULE("{ queue: QueueName }", "unavailable"), "cw.yaml").warnings).toEqual([]);
  });

  it("Cloud Monitoring: the same advice, with its own field names", () => {
    const open = validateConfigText(GCP_RULE("{ subscription: resource.labels.subscription_id }", '{ value: "0" }'), "gcp.yaml");
    expect(open.warnings.map((w) => w.message)).toEqual([expect.stringContaining("every series Cloud Monitoring has no datapoint for: with the label subscription without an allow-list")]);
    expect(open.warnings[0]!.message).toContain("each label in selectorLabels an allow-list");
    const listed = validateConfigText(GCP_RULE("{ subscription: { field: resource.labels.subscription_id, values: { orders: orders } } }", '{ value: "0" }'), "gcp.yaml");
    expect(listed.warnings).toEqual([]);
  });

  it("no shipped example invents a value for series that may not exist", () => {
    const dir = join(ROOT, "infra/examples");
    const files = readdirSync(dir).filter((f) => f.endsWith(".yaml"));
    const found = files.flatMap((f) => {
      const r = validateConfigText(readFileSync(join(dir, f), "utf8"), `infra/examples/${f}`);
      return r.kind === "BridgeConfig" ? r.warnings.filter((w) => /CloudWatch|Cloud Monitoring/.test(w.message)).map(formatIssue) : [];
    });
    expect(files).toContain("cloudwatch.yaml");
    expect(found).toEqual([]);
  });
});

describe("config validate and the Worker build agree on a file with no document", () => {
  it("infra/worker/bridge.yaml as shipped is no config, valid, with what that means to each runtime", () => {
    const r = validateConfigText(readFileSync(join(ROOT, "infra/worker/bridge.yaml"), "utf8"), "infra/worker/bridge.yaml");
    expect(r).toMatchObject({ valid: true, issues: [] });
    expect(r.kind).toBeUndefined();
    expect(r.summary).toMatch(/^no YAML document .*BRIDGE_CONFIG binding/);
  });
  it("a BridgeConfig with errors next to it is still refused", () => {
    expect(validateConfigText(`${SQS_HEAD}      attribute: Nope\n`, "x.yaml").valid).toBe(false);
  });
});

describe("build:lambda lists what it packaged", () => {
  it("bridge.yaml only when the build wrote one (--config)", () => {
    const without = ["index.mjs", "index.mjs.LEGAL.txt", "index.mjs.map", "meta.json", "chunks/aws-sqs-X.mjs", "chunks/aws-sqs-X.mjs.map"];
    expect(packagedPatterns(without)).toEqual(["index.mjs", "index.mjs.LEGAL.txt", "chunks/*.mjs"]);
    expect(packagedPatterns([...without, "bridge.yaml", "chunks/g.mjs.LEGAL.txt"])).toEqual([...PACKAGED_FILES]);
  });
});

describe("the demo's port-taken hint", () => {
  it("keeps the port the user had already moved, and writes only the ports that are not the default", () => {
    expect(startCommand({ sqsPort: 4567, port: 8081 })).toBe("SQS_PORT=4567 PORT=8081 npm start");
    expect(startCommand({ sqsPort: 4566, port: 8081 })).toBe("PORT=8081 npm start");
    expect(startCommand({ sqsPort: 4567, port: 8080 })).toBe("SQS_PORT=4567 npm start");
  });
});

describe("the Node entry's version guard", () => {
  it("refuses a Node older than the one the bundle is built for, naming both versions", () => {
    expect(REQUIRED_NODE_MAJOR).toBe(24);
    expect(nodeTooOld("20.20.2")).toBe(true);
    expect(nodeTooOld("22.12.0")).toBe(true);
    expect(nodeTooOld("24.0.0")).toBe(false);
    expect(nodeTooOld(process.versions.node)).toBe(false);
    expect(nodeTooOldMessage("external-metrics-bridge", "20.20.2")).toMatch(/^external-metrics-bridge cannot run on Node\.js v20\.20\.2: it needs Node\.js 24 or later/);
  });
});
