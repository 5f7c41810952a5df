/**
 * Build the whole bridge — config, providers, app — from one config text.
 * The single place every entry point (Node, Worker, Lambda, demo) starts from.
 */
import type { Hono } from "hono";
import { createApp, type BridgeOptions } from "./app.ts";
import { loadConfig, type BridgeConfig } from "./config/config.ts";
import { buildProviders } from "./providers/registry.ts";
import { policyHooks } from "./policy/authorize.ts";
import { ANONYMOUS } from "./identity.ts";
import { signatureAuthenticator } from "./signing.ts";
import type { Provider, RuntimeEnv } from "./providers/types.ts";

/** A built bridge: its Hono app plus what it was built from (for tests and tools). */
export interface Bridge {
  app: Hono;
  config: BridgeConfig;
  providers: Map<string, Provider>;
}

/**
 * Parse the config text, build providers and the app.
 *
 * @param text YAML config (see `shared/config/config.ts`)
 * @param source name used in config error messages
 * @param runtime environment bag and clock of the entry point
 * @param options passed to {@link createApp} (log sink, deadline)
 * @throws ConfigError when the config is invalid (every issue with its line)
 */
export function buildBridge(
  text: string,
  source: string,
  runtime: RuntimeEnv,
  options: Omit<BridgeOptions, "config" | "providers" | "runtime"> = {},
): Bridge {
  const { config } = loadConfig(text, source);
  return fromConfig(config, runtime, options);
}

/** Build providers and app from an already validated config. */
export function fromConfig(
  config: BridgeConfig,
  runtime: RuntimeEnv,
  options: Omit<BridgeOptions, "config" | "providers" | "runtime"> = {},
): Bridge {
  const providers = buildProviders(config.providers, runtime);
  // Policy: the local identity as caller and the ExternalMetricPolicy
  // authorizer; an `authenticate` in options (the proxy's verifier) wins.
  // Request signing (`shared/signing.ts`): when BRIDGE_SIGNING_KEYS is in
  // the environment, only a valid proxy signature establishes the caller
  // (unsigned, tampered or stale → 401); otherwise the policy's local identity.
  const hooks = policyHooks(config);
  const authenticate = signatureAuthenticator(runtime, hooks.authenticate ?? (() => ANONYMOUS));
  const app = createApp({ config, providers, runtime, ...hooks, authenticate, ...options });
  return { app, config, providers };
}
