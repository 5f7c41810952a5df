/**
 * Test-only ways to build the bridge from text or parts, with the providers'
 * modules loaded already (the test setup imports them): the product's entry
 * points go through shared/bridge.ts `loadBridge`.
 */
import type { Hono } from "hono";
import { createBridgeApp, type BridgeOptions } from "../../shared/app.ts";
import { fromConfig, type Bridge, type BuildOptions } from "../../shared/bridge.ts";
import { loadConfig } from "../../shared/config/config.ts";
import type { RuntimeEnv } from "../../shared/providers/types.ts";

export type { Bridge } from "../../shared/bridge.ts";

/**
 * Parse the config text, build providers and the app (shared/bridge.ts `fromConfig`).
 *
 * @param text YAML config (see `shared/config/config.ts`)
 * @param source name used in config error messages
 * @param runtime environment bag and clock
 * @param options passed to `createBridgeApp` (log sink, deadline, hooks)
 * @throws ConfigError when the config is invalid (every issue with its line)
 */
export function buildBridge(text: string, source: string, runtime: RuntimeEnv, options: BuildOptions = {}): Bridge {
  const { config } = loadConfig(text, source);
  return fromConfig(config, runtime, options);
}

/** The bridge's Hono app alone (shared/app.ts `createBridgeApp`), for tests that build config and providers by hand. */
export function createApp(options: BridgeOptions): Hono {
  return createBridgeApp(options).app;
}

/**
 * The head of a test BridgeConfig, up to (not including) `providers:`: every
 * read allowed by an explicit `defaultAction: Allow` (the suite is not a
 * policy test) and the defaults `maxAgeSeconds: 300, cacheTTLSeconds: 10`.
 * Ends with a newline.
 */
export const OPEN_CONFIG_HEAD = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 300, cacheTTLSeconds: 10 }
`;
