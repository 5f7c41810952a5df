/**
 * What `infra/worker/build.ts` bundles, decided from its options
 * (`planWorkerBuild`): the config is read and parsed once, whatever the
 * options (before, `--config FILE --json` parsed it three times and
 * validated it twice), only when the options need it, and the JSON
 * bundled is made from those parsed documents: the file is not read again,
 * so a file changed after planning does not change what is bundled, and a
 * config the options do not need may be missing.
 */
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jsonModuleOf, planWorkerBuild } from "../../infra/worker/build.ts";
import { ConfigError } from "../../shared/config/yaml.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const SQS = join(ROOT, "infra/examples/aws-sqs.yaml");

describe("planWorkerBuild", () => {
  it("--config FILE --json: the providers and the JSON bundled come from one reading of the file", () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-worker-plan-"));
    try {
      const file = join(dir, "bridge.yaml");
      copyFileSync(SQS, file);
      const plan = planWorkerBuild({ config: file, json: true });
      expect(plan.types).toEqual(["aws-sqs"]);
      writeFileSync(file, "kind: [not, a, config\n"); // changed after planning: what is bundled stays what was read
      const module = jsonModuleOf(plan.jsonConfig!);
      type Doc = { kind: string; providers: Record<string, { type: string }> };
      const value = JSON.parse(JSON.parse(/export default (".*");/.exec(module)![1]!)) as Doc | Doc[];
      const bridge = (Array.isArray(value) ? value : [value]).find((d) => d.kind === "BridgeConfig")!;
      expect(Object.values(bridge.providers).map((p) => p.type)).toEqual(["aws-sqs"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("--config FILE and --check: its providers", () => {
    expect(planWorkerBuild({ config: SQS }).types).toEqual(["aws-sqs"]);
    expect(planWorkerBuild({ config: SQS, check: true })).toMatchObject({ shown: "infra/examples/aws-sqs.yaml", types: ["aws-sqs"] });
  });

  it("--providers or --all without --json need no config: a missing one is no error", () => {
    expect(planWorkerBuild({ providers: "aws-sqs, aws-cloudwatch", config: "/nonexistent.yaml" })).toMatchObject({ types: ["aws-sqs", "aws-cloudwatch"], why: "--providers" });
    const all = planWorkerBuild({ all: true, config: "/nonexistent.yaml" });
    expect(all.why).toBe("--all");
    expect(all.types).toBeUndefined();
  });

  it("the shipped placeholder bridge.yaml: every provider, --check says no config, --json refuses", () => {
    expect(planWorkerBuild({})).toMatchObject({ why: "no bundled config: every provider" });
    expect(planWorkerBuild({}).types).toBeUndefined();
    expect(planWorkerBuild({ check: true }).types).toBeUndefined();
    expect(() => planWorkerBuild({ json: true })).toThrow(/--json needs a config/);
  });

  it("a Worker built for a config bundles only the prometheus flavours it uses (the flavour table's alias); --providers bundles every flavour", () => {
    expect(planWorkerBuild({ config: join(ROOT, "infra/examples/prometheus.yaml") })).toMatchObject({ types: ["prometheus"], flavours: [] });
    expect(planWorkerBuild({ config: join(ROOT, "infra/examples/prometheus-gmp.yaml"), json: true })).toMatchObject({ types: ["prometheus"], flavours: ["gmp"] });
    expect(planWorkerBuild({ config: join(ROOT, "infra/examples/prometheus-amp.yaml") })).toMatchObject({ types: ["prometheus"], flavours: ["amp"] });
    expect(planWorkerBuild({ providers: "prometheus", config: "/nonexistent.yaml" }).flavours).toBeUndefined();
  });

  it("an invalid or unreadable config is a ConfigError with every problem located", () => {
    expect(() => planWorkerBuild({ config: "/nonexistent.yaml" })).toThrow(ConfigError);
    expect(() => planWorkerBuild({ config: "/nonexistent.yaml", check: true })).toThrow(/^\/nonexistent\.yaml:1:1: cannot read: ENOENT/);
  });
});
