/**
 * What `infra/worker/build.ts` bundles, decided from its options
 * (`planWorkerBuild`): the config is read and parsed once, whatever the
 * options (before, `--config FILE --json` parsed it three times and
 * validated it twice), only when the options need it, and the JSON
 * bundled is made from those parsed documents.
 */
import { join } from "node:path";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { ConfigError } from "../shared/config/yaml.ts";

const parses = vi.hoisted(() => ({ count: 0 }));
vi.mock("../shared/config/yaml.ts", async (original) => {
  const real = await original<typeof import("../shared/config/yaml.ts")>();
  return {
    ...real,
    parseYamlDocuments: (...args: Parameters<typeof real.parseYamlDocuments>) => {
      parses.count++;
      return real.parseYamlDocuments(...args);
    },
  };
});

const { jsonModuleOf, planWorkerBuild } = await import("../infra/worker/build.ts");
const ROOT = new URL("..", import.meta.url).pathname;
const SQS = join(ROOT, "infra/examples/aws-sqs.yaml");

beforeEach(() => {
  parses.count = 0;
});

describe("planWorkerBuild", () => {
  it("--config FILE --json: one parse gives the providers and the JSON bundled", () => {
    const plan = planWorkerBuild({ config: SQS, json: true });
    expect(plan).toMatchObject({ types: ["aws-sqs"], why: "infra/examples/aws-sqs.yaml" });
    const module = jsonModuleOf(plan.jsonConfig!);
    expect(parses.count).toBe(1);
    type Doc = { kind: string; providers: Record<string, { type: string }> };
    const value = JSON.parse(JSON.parse(/export default (".*");/.exec(module)![1]!)) as Doc | Doc[];
    const bridge = (Array.isArray(value) ? value : [value]).find((d) => d.kind === "BridgeConfig")!;
    expect(Object.values(bridge.providers).map((p) => p.type)).toEqual(["aws-sqs"]);
  });

  it("--config FILE and --check: one parse each", () => {
    expect(planWorkerBuild({ config: SQS }).types).toEqual(["aws-sqs"]);
    expect(parses.count).toBe(1);
    expect(planWorkerBuild({ config: SQS, check: true })).toMatchObject({ shown: "infra/examples/aws-sqs.yaml", types: ["aws-sqs"] });
    expect(parses.count).toBe(2);
  });

  it("--providers or --all without --json read no config", () => {
    expect(planWorkerBuild({ providers: "aws-sqs, aws-cloudwatch", config: "/nonexistent.yaml" })).toMatchObject({ types: ["aws-sqs", "aws-cloudwatch"], why: "--providers" });
    expect(planWorkerBuild({ all: true }).types).toBeUndefined();
    expect(parses.count).toBe(0);
  });

  it("the shipped placeholder bridge.yaml: every provider, --check says no config, --json refuses", () => {
    expect(planWorkerBuild({})).toMatchObject({ why: "no bundled config: every provider" });
    expect(planWorkerBuild({}).types).toBeUndefined();
    expect(planWorkerBuild({ check: true }).types).toBeUndefined();
    expect(() => planWorkerBuild({ json: true })).toThrow(/--json needs a config/);
  });

  it("an invalid or unreadable config is a ConfigError with every problem located", () => {
    expect(() => planWorkerBuild({ config: "/nonexistent.yaml" })).toThrow(ConfigError);
    expect(() => planWorkerBuild({ config: "/nonexistent.yaml", check: true })).toThrow(/^\/nonexistent\.yaml:1:1: cannot read: ENOENT/);
  });
});
