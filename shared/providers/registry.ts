/**
 * The provider modules the bridge knows, by `type:`, loaded only when a
 * config names them.
 *
 * Config validation needs only each provider's schemas, which are small and
 * read synchronously ({@link providerEntry}); a provider's implementation —
 * its cloud SDK client — is loaded by {@link loadProviderModules}, a
 * dynamic `import()` per configured type, before {@link buildProviders}
 * builds the instances. So a Node process or a Lambda cold start with an
 * SQS-only config never loads the CloudWatch client or the Google stack,
 * and the Lambda artifact keeps each provider in its own chunk.
 *
 * Which providers a build holds is `./provider-loaders.ts` (all of them);
 * a Worker built for a chosen set bundles another table there
 * (`infra/worker/build.ts`). A config naming a provider that is known but
 * not in the build fails validation with a message saying so.
 *
 * The list of provider types and the shape of a table entry are
 * `./provider-list.ts`, which the tables import (not this file, which
 * imports the table); every table is written from that list
 * (`infra/tools/provider-tables.ts`).
 */
import type { SharedCacheConfig } from "../cache/shared-tier.ts";
import { isProviderType, type ProviderEntry } from "./provider-list.ts";
import { PROVIDERS } from "./provider-loaders.ts";
import type { LogRecord } from "../observability/log.ts";
import type { MetricRule, Provider, ProviderModule, RuleFinding, RuntimeEnv } from "./types.ts";

/** The provider types this build holds, in table order. */
export function builtProviderTypes(): string[] {
  return Object.keys(PROVIDERS);
}

/** The entry of `type` in this build, or undefined when the build does not hold it (or no such type exists). */
export function providerEntry(type: string): ProviderEntry | undefined {
  return Object.hasOwn(PROVIDERS, type) ? PROVIDERS[type] : undefined;
}

/** A validated provider instance from the config: its module type and config. */
export interface ProviderInstanceConfig {
  type: string;
  config: unknown;
  /** the instance's `sharedCache:` (the shared read tier, shared/cache/shared-tier.ts); absent: none */
  sharedCache?: SharedCacheConfig;
}

/** Implementations loaded so far in this process or isolate, by type. */
const loaded = new Map<string, ProviderModule<any, any>>();
/** Loads under way, by type (one `import()` per type however many callers). */
const loading = new Map<string, Promise<ProviderModule<any, any>>>();

/**
 * Load the implementation of every provider type `providers` uses (each
 * type once per process; concurrent callers share one load). Entry points
 * call this before {@link buildProviders}.
 *
 * @param providers the validated `providers:` section (name → instance), or a list of types
 * @throws Error naming the type when this build does not hold it, or the
 *   module's own load error (a later call tries again)
 */
export async function loadProviderModules(providers: Readonly<Record<string, ProviderInstanceConfig>> | readonly string[]): Promise<void> {
  const types = new Set(Array.isArray(providers) ? providers : Object.values(providers as Record<string, ProviderInstanceConfig>).map((p) => p.type));
  await Promise.all(
    [...types].map(async (type) => {
      if (loaded.has(type)) return;
      let pending = loading.get(type);
      if (pending === undefined) {
        const entry = providerEntry(type);
        if (entry === undefined) throw new Error(notBuiltMessage(type));
        pending = entry.load();
        loading.set(type, pending);
      }
      try {
        loaded.set(type, await pending);
      } finally {
        loading.delete(type);
      }
    }),
  );
}

/** Why a type cannot be used in this build. */
export function notBuiltMessage(type: string): string {
  const built = builtProviderTypes().join(", ");
  if (!isProviderType(type)) return `unknown provider type "${type}" (known: ${built})`;
  return `provider type "${type}" is not in this build (it holds: ${built}); build with it included (docs/deploy.md, "Bundle size")`;
}

/**
 * Run each loaded module's `checkRule` (`ProviderModule.checkRule`) on the
 * rules of its instances: the checks a provider's small schema leaves to its
 * implementation, done before anything is served.
 *
 * @param providers validated `providers:` section, name → instance config
 * @param metrics the validated rules
 * @throws Error listing every rule refused (one line each)
 */
export function checkRules(providers: Readonly<Record<string, ProviderInstanceConfig>>, metrics: readonly MetricRule[]): void {
  const problems: string[] = [];
  for (const rule of metrics) {
    const instance = providers[rule.provider];
    const check = instance !== undefined ? loaded.get(instance.type)?.checkRule : undefined;
    if (check === undefined) continue;
    try {
      check(rule);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (problems.length > 0) throw new Error(`invalid metric rules:\n${problems.join("\n")}`);
}

/**
 * Run each loaded module's `lintRule` (`ProviderModule.lintRule`) on the
 * rules of its instances: advice, never a refusal (the admin tools print
 * each finding as a warning).
 *
 * @param providers validated `providers:` section, name → instance config
 * @param metrics the validated rules, in config order
 * @returns the findings, each with the index of its rule in `metrics`; a
 *   rule whose module is not loaded gets none
 */
export function lintRules(providers: Readonly<Record<string, ProviderInstanceConfig>>, metrics: readonly MetricRule[]): (RuleFinding & { index: number })[] {
  const out: (RuleFinding & { index: number })[] = [];
  metrics.forEach((rule, index) => {
    const instance = providers[rule.provider];
    const lint = instance !== undefined ? loaded.get(instance.type)?.lintRule : undefined;
    for (const finding of lint?.(rule) ?? []) out.push({ ...finding, index: rule.index ?? index });
  });
  return out;
}

/**
 * Build every configured provider instance (no network I/O). Synchronous:
 * the implementations must have been loaded by {@link loadProviderModules}.
 * An instance with a `sharedCache:` gets the runtime's shared read tier
 * (`RuntimeEnv.sharedTier`, issue 28), keyed with {@link configDigest} of
 * its config (`Provider.useTier`); without `runtime.sharedTier` (the CLI
 * tools) the section is ignored.
 *
 * @param providers validated `providers:` section, name → instance config
 * @param log where a provider's tier warnings go (the app's log); absent: the console logger
 * @throws Error when a type's implementation is not loaded (a caller that
 *   skipped {@link loadProviderModules}), naming the type; what
 *   `runtime.sharedTier` throws (a tier type this runtime refuses, naming
 *   the provider); when a provider with a `sharedCache:` cannot use a tier
 */
export function buildProviders(
  providers: Readonly<Record<string, ProviderInstanceConfig>>,
  runtime: RuntimeEnv,
  log?: (record: LogRecord) => void,
): Map<string, Provider> {
  const built = new Map<string, Provider>();
  for (const [name, instance] of Object.entries(providers)) {
    const module = loaded.get(instance.type);
    if (module === undefined) {
      throw new Error(`provider module ${instance.type} (provider ${name}) is not loaded: await loadProviderModules(config.providers) before building the bridge`);
    }
    const provider = module.create(name, instance.config, runtime);
    if (instance.sharedCache !== undefined && runtime.sharedTier !== undefined) {
      const digest = configDigest(instance);
      const tier = runtime.sharedTier(name, instance.sharedCache, digest);
      if (tier !== undefined) {
        if (provider.useTier === undefined) {
          tier.close?.();
          throw new Error(`provider ${name} (${instance.type}) cannot read through a shared cache: remove its sharedCache:`);
        }
        provider.useTier(tier, { configDigest: digest, ...(log !== undefined ? { log } : {}) });
      }
    }
    built.set(name, provider);
  }
  return built;
}

/**
 * A digest of a provider instance's config — its type, its validated
 * settings and its `sharedCache:` — as 32 hex digits (two 64-bit FNV-1a
 * hashes of the canonical JSON, keys sorted): instances of two configs
 * that differ in anything share no tier key (`tierKey`,
 * `../cache/shared-tier.ts`), while the replicas of one config (every
 * Lambda environment, Worker isolate, Node pod) compute the same digest.
 * Not a secret-keeping hash: it only separates configs (a tier's store
 * holds readings, never the config).
 */
export function configDigest(instance: ProviderInstanceConfig): string {
  const text = canonicalJson({ type: instance.type, config: instance.config, sharedCache: instance.sharedCache ?? null });
  return fnv1a64(text, 0xcbf29ce484222325n) + fnv1a64(text, 0x84222325cbf29ce4n);
}

/** JSON with object keys sorted (undefined members left out, as JSON.stringify does), for {@link configDigest}. */
function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const entries = Object.keys(value)
    .sort()
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(",")}}`;
}

/** 64-bit FNV-1a of `text`'s UTF-16 code units from `offset`, as 16 hex digits. */
function fnv1a64(text: string, offset: bigint): string {
  const prime = 0x100000001b3n;
  let hash = offset;
  for (let i = 0; i < text.length; i++) hash = BigInt.asUintN(64, (hash ^ BigInt(text.charCodeAt(i))) * prime);
  return hash.toString(16).padStart(16, "0");
}
