/**
 * `bootstrap` (shared/bootstrap.ts): the one start-up of the Node, Worker
 * and Lambda entries. The signing check comes first — with `refuse` (Node)
 * a refusal or a malformed setting throws before anything is built or the
 * request log is made; without (Lambda) the mode is returned; without
 * signing facts (the Worker, which checks per request) none is — then the
 * config text is validated, the request log made once and the bridge built
 * with the entry point's own runtime bag. The notices are returned, not
 * logged: the signing notice, then the policy notices.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { bootstrap, StartRefusedError, type BootstrapFacts } from "../../shared/bootstrap.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError } from "../../shared/config/yaml.ts";
import { policyStartupNotices } from "../../shared/policy/authorize.ts";
import type { RuntimeEnv } from "../../shared/providers/types.ts";
import { fixtureKey } from "../helpers/keys.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const source = "aws-sqs.yaml";
const text = readFileSync(join(ROOT, "infra/examples/aws-sqs.yaml"), "utf8");
/** The same config without its policy section: a start-up notice that every read is denied. */
const noPolicy = text.slice(0, text.indexOf("policy:")).trimEnd() + "\n";
const KEYS = `key-a:${fixtureKey(1).toString("base64")}`;

/** Facts of a test start: the runtime bag given, the request log counted. */
function facts(env: Record<string, string>, more: Partial<BootstrapFacts> = {}): BootstrapFacts & { made: () => number } {
  let made = 0;
  const runtime: RuntimeEnv = { env, now: () => 0, longLived: false };
  return {
    runtime,
    config: { text, source },
    log: () => (made++, () => {}),
    made: () => made,
    ...more,
  };
}

describe("bootstrap", () => {
  it("refuses (Node) without keys or the insecure setting, and for malformed keys, before the request log is made", async () => {
    const f = facts({}, { signing: { refuse: true, flag: "--insecure-allow-unsigned" } });
    await expect(bootstrap(f)).rejects.toThrow(StartRefusedError);
    await expect(bootstrap(f)).rejects.toThrow(/BRIDGE_SIGNING_KEYS is empty or missing.*--insecure-allow-unsigned/);
    await expect(bootstrap(facts({ BRIDGE_SIGNING_KEYS: "key-a:short" }, { signing: { refuse: true } }))).rejects.toThrow(/^request signing is misconfigured: /);
    expect(f.made()).toBe(0);
  });

  it("with keys: the signed mode, no signing notice, the config's policy notices; the runtime bag used as it is", async () => {
    const f = facts({ BRIDGE_SIGNING_KEYS: KEYS }, { signing: { refuse: true } });
    const { bridge, signing, notices } = await bootstrap(f);
    expect(signing).toEqual({ mode: "signed" });
    expect(notices).toEqual(policyStartupNotices(loadConfig(text, source).config));
    expect(bridge.runtime).toBe(f.runtime);
    expect(f.made()).toBe(1);
  });

  it("the insecure flag (Node) or setting: the warning first, then the policy notices", async () => {
    const { signing, notices } = await bootstrap(facts({}, { config: { text: noPolicy, source }, signing: { refuse: true, insecureAllowUnsigned: true, flag: "--insecure-allow-unsigned" } }));
    expect(signing?.mode).toBe("insecure");
    expect(notices.map((n) => [n.level, n.msg.split(":")[0]])).toEqual([
      ["warn", "running insecure"],
      ["warn", "policy"],
    ]);
  });

  it("without refuse (Lambda) a refusal is returned with its error notice; without signing facts (Worker) only the policy notices", async () => {
    const lambda = await bootstrap(facts({}, { signing: { refuse: false } }));
    expect(lambda.signing?.mode).toBe("refused");
    expect(lambda.notices[0]).toMatchObject({ level: "error", msg: expect.stringMatching(/^request signing is not configured/) });
    const worker = await bootstrap(facts({}, { config: { text: noPolicy, source } }));
    expect(worker.signing).toBeUndefined();
    expect(worker.notices).toEqual([expect.objectContaining({ level: "warn", source })]);
  });

  it("an invalid config text is a ConfigError naming its source, before the request log is made; a validated config is used as given", async () => {
    const f = facts({ BRIDGE_SIGNING_KEYS: KEYS }, { config: { text: "kind: BridgeConfig\n", source: "broken.yaml" } });
    await expect(bootstrap(f)).rejects.toThrow(ConfigError);
    await expect(bootstrap(f)).rejects.toThrow(/broken\.yaml/);
    expect(f.made()).toBe(0);
    const config = loadConfig(text, source).config;
    expect((await bootstrap(facts({ BRIDGE_SIGNING_KEYS: KEYS }, { config }))).bridge.config).toBe(config);
  });
});
