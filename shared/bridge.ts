/**
 * Build the whole bridge — config, providers, app — from one config text.
 * The single place every entry point (Node, Worker, Lambda, demo) starts from,
 * through `./bootstrap.ts` (signing check, config, notices):
 * {@link loadBridge} loads the configured providers' modules (only those) and
 * builds; {@link fromConfig} builds from modules loaded already.
 */
import type { Hono } from "hono";
import { createBridgeApp, type AuthorizationRequest, type BridgeOptions } from "./app.ts";
import type { APIResourceList } from "./k8s/types.ts";
import type { ReadValues } from "./values/read.ts";
import type { CustomValuesOutcome, CustomValuesRead } from "./values/custom-read.ts";
import type { CustomGroupVersion, CustomVersion } from "./k8s/custom-types.ts";
import type { Caller } from "./identity.ts";
import type { Selector } from "./k8s/selector.ts";
import type { BridgeConfig } from "./config/config.ts";
import { buildProviders, checkRules, loadProviderModules } from "./providers/registry.ts";
import { policyHooks } from "./policy/authorize.ts";
import { callerKey } from "./identity.ts";
import { signatureAuthenticator } from "./signing.ts";
import type { Provider, RuntimeEnv } from "./providers/types.ts";

/** A built bridge: its Hono app plus what it was built from (for tests and tools). */
export interface Bridge {
  app: Hono;
  /** the typed values read (shared/values/read.ts), which the proxy's in-process backend calls directly */
  readValues: ReadValues;
  /** the `APIResourceList` the app serves at `/apis/external.metrics.k8s.io/v1beta1` */
  discovery: APIResourceList;
  /** the typed custom read (shared/app.ts `BridgeApp.readCustom`), which the proxy's in-process backend calls directly */
  readCustom: (read: CustomValuesRead) => Promise<CustomValuesOutcome>;
  /** the custom discovery per version (shared/app.ts `BridgeApp.customDiscovery`); undefined without custom rules */
  customDiscovery: Readonly<Record<CustomVersion, APIResourceList<CustomGroupVersion>>> | undefined;
  config: BridgeConfig;
  providers: Map<string, Provider>;
  /** the runtime bag the providers and the app were built with */
  runtime: RuntimeEnv;
}

/** What the app is built with besides config, providers and runtime (log sink, deadline, hooks): `createBridgeApp`'s options (shared/app.ts). */
export type BuildOptions = Omit<BridgeOptions, "config" | "providers" | "runtime">;

/**
 * The transports of an entry point for a config (`RuntimeEnv.transports`),
 * loaded on demand: e.g. `officialTransports`
 * (`shared/providers/gcp-monitoring/official-transports.ts`), which imports
 * the official Cloud Monitoring client only when a `gcp-monitoring`
 * provider is configured. Undefined: none.
 */
export type TransportsLoader = (config: BridgeConfig) => Promise<RuntimeEnv["transports"] | undefined>;

/**
 * Load what `config` needs, then build the bridge: the implementation of
 * each configured provider type only (`loadProviderModules`,
 * `./providers/registry.ts`: one dynamic `import()` per type, a chunk of
 * its own in the Lambda and Node bundles, so an SQS-only config never loads
 * the CloudWatch client or the Google stack) and, at the same time, the
 * entry point's transports; then {@link fromConfig}. Every entry point
 * starts here, through `./bootstrap.ts` `bootstrap`: Node
 * (`functions/node.ts`), Lambda (`shared/lambda/handler.ts`), the Worker
 * (`functions/worker.ts`); the proxy's in-process bridge calls it directly.
 *
 * @param config a validated config (`loadConfig`)
 * @param runtime the entry point's bag; used as it is (the Worker refreshes
 *   its `env` on every request) unless `transports` yields transports, then
 *   a copy holding them (`Bridge.runtime`)
 * @param transports the entry point's transports for `config` (Node, Lambda)
 * @throws Error naming a configured type this build does not hold, or a
 *   provider module's own load error (a later call tries again); what
 *   {@link fromConfig} throws
 */
export async function loadBridge(config: BridgeConfig, runtime: RuntimeEnv, options: BuildOptions = {}, transports?: TransportsLoader): Promise<Bridge> {
  const [loaded] = await Promise.all([transports?.(config), loadProviderModules(config.providers)]);
  return fromConfig(config, loaded !== undefined ? { ...runtime, transports: loaded } : runtime, options);
}

/**
 * Build providers and app from an already validated config, the providers'
 * modules loaded already (else use {@link loadBridge}).
 *
 * @throws Error when a configured type's module is not loaded (`buildProviders`),
 *   or listing the rules a module's `checkRule` refused (`checkRules`)
 */
export function fromConfig(
  config: BridgeConfig,
  runtime: RuntimeEnv,
  options: BuildOptions = {},
): Bridge {
  checkRules(config.providers, [...config.metrics, ...config.customMetrics]);
  const providers = buildProviders(config.providers, runtime, options.log);
  // Policy: the local identity as caller and the ExternalMetricPolicy
  // authorizer; an `authenticate` in options (the proxy's verifier) wins.
  // Request signing (`shared/signing.ts`): when BRIDGE_SIGNING_KEYS is in
  // the environment, only a valid proxy signature establishes the caller
  // (unsigned, tampered or stale → 401); otherwise the policy's local identity.
  const hooks = policyHooks(config);
  const authenticate = signatureAuthenticator(runtime, hooks.authenticate);
  const authorize = rememberAllowed(hooks.authorize);
  // custom reads: ExternalMetricPolicy rules naming the resource (`resources:`), fail closed (shared/policy/authorize.ts)
  const authorizeCustom = hooks.authorizeCustom;
  const { app, readValues, discovery, readCustom, customDiscovery } = createBridgeApp({ config, providers, runtime, authenticate, authorize, authorizeCustom, ...options });
  return { app, readValues, discovery, readCustom, customDiscovery, config, providers, runtime };
}

/** Most remembered Allow decisions per selector (then that selector's are forgotten at once). */
export const MAX_REMEMBERED_ALLOWS = 256;

/**
 * A policy authorizer (`policyAuthorizer`, `./policy/authorize.ts`) whose
 * Allow decisions are remembered: the HPA controller asks the same (caller,
 * namespace, metric, selector) every 15 s, and the policies — loaded once
 * with the config — decide the same each time (issue 11 P1: evaluation was
 * about a tenth of a cached read's CPU). Only an Allow is remembered; a
 * Deny (403) is decided again every time, so nothing is ever allowed that
 * the policies would not allow now. Keyed by the selector object (the app
 * re-uses one frozen object per selector text; a WeakMap, so an entry dies
 * with it), then by namespace, metric and the caller's whole identity
 * (user, uid, groups, extra). Bounded: at most {@link MAX_REMEMBERED_ALLOWS}
 * per selector. An authorizer that answers asynchronously is not remembered.
 *
 * @param authorize a pure function of (caller, namespace, metric, selector)
 */
export function rememberAllowed(
  authorize: (request: AuthorizationRequest) => void | Promise<void>,
): (request: AuthorizationRequest) => void | Promise<void> {
  const allowed = new WeakMap<Selector, RememberedAllows>();
  return (request) => {
    const known = allowed.get(request.selector);
    // The last Allow of this selector, compared by identity first: the app's
    // memo of a URL hands the same namespace and metric strings to every
    // read of it, and an unsigned bridge the same caller object (no key text
    // to build or hash, issue 11 P1).
    if (known !== undefined && known.lastCaller === request.caller && known.lastNamespace === request.namespace && known.lastMetric === request.metric) return;
    const key = `${request.namespace}\u0000${request.metric}\u0000${memoCallerKey(request.caller)}`;
    if (known?.keys.has(key) !== true) {
      const result = authorize(request); // throws StatusError 403 on Deny
      if (result !== undefined) return result;
    }
    let entry = known;
    if (entry === undefined) allowed.set(request.selector, (entry = { keys: new Set<string>(), lastCaller: request.caller, lastNamespace: request.namespace, lastMetric: request.metric }));
    if (!entry.keys.has(key)) {
      if (entry.keys.size >= MAX_REMEMBERED_ALLOWS) entry.keys.clear();
      entry.keys.add(key);
    }
    entry.lastCaller = request.caller;
    entry.lastNamespace = request.namespace;
    entry.lastMetric = request.metric;
  };
}

/** The Allow decisions remembered for one selector ({@link rememberAllowed}): their keys, and the last one's parts by identity. */
interface RememberedAllows {
  keys: Set<string>;
  lastCaller: Caller;
  lastNamespace: string;
  lastMetric: string;
}

const callerKeys = new WeakMap<Caller, string>();

/** Everything a policy may match on in a caller, as one string (identity.ts `callerKey`, made once per caller object). */
function memoCallerKey(caller: Caller): string {
  let key = callerKeys.get(caller);
  if (key === undefined) {
    key = callerKey(caller);
    callerKeys.set(caller, key);
  }
  return key;
}
