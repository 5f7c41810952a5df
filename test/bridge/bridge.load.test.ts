/**
 * `loadBridge` (shared/bridge.ts): the one "load the configured providers'
 * modules, then build" every entry point (Node, Lambda, Worker) starts
 * from. The runtime bag is used as it is unless the entry point's
 * transports loader yields transports (the Worker refreshes its bag's
 * `env` on every request, so a copy would freeze the first request's
 * bindings); the loader is asked once, with the config.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadBridge, type TransportsLoader } from "../../shared/bridge.ts";
import { loadConfig, type BridgeConfig } from "../../shared/config/config.ts";
import type { RuntimeEnv } from "../../shared/providers/types.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const config: BridgeConfig = loadConfig(readFileSync(join(ROOT, "infra/examples/aws-sqs.yaml"), "utf8"), "aws-sqs.yaml").config;

describe("loadBridge", () => {
  it("builds the configured providers with the entry point's own runtime bag (same object) when there are no transports", async () => {
    const runtime: RuntimeEnv = { env: { AWS_REGION: "us-east-1" }, now: () => 0 };
    const bridge = await loadBridge(config, runtime);
    expect(bridge.runtime).toBe(runtime);
    expect([...bridge.providers.keys()]).toEqual(Object.keys(config.providers));
    const none: TransportsLoader = async () => undefined;
    expect((await loadBridge(config, runtime, {}, none)).runtime).toBe(runtime);
  });

  it("asks the transports loader once, with the config, and builds with a copy holding its transports (the caller's bag untouched)", async () => {
    const runtime: RuntimeEnv = { env: { AWS_REGION: "us-east-1" }, now: () => 0 };
    const transports = {} as NonNullable<RuntimeEnv["transports"]>;
    const asked: BridgeConfig[] = [];
    const bridge = await loadBridge(config, runtime, {}, async (c) => (asked.push(c), transports));
    expect(asked).toEqual([config]);
    expect(bridge.runtime.transports).toBe(transports);
    expect(bridge.runtime.env).toBe(runtime.env);
    expect(bridge.runtime.now).toBe(runtime.now);
    expect(runtime.transports).toBeUndefined();
  });

  it("a transports loader that fails fails the load (the entry point answers its Status)", async () => {
    const runtime: RuntimeEnv = { env: {}, now: () => 0 };
    await expect(loadBridge(config, runtime, {}, async () => Promise.reject(new Error("no client")))).rejects.toThrow("no client");
  });
});
