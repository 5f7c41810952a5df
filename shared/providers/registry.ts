/**
 * The provider modules the bridge knows, by `type:`. Adding a provider means
 * adding its module here; nothing else changes.
 */
import { cloudWatchModule } from "./aws-cloudwatch/index.ts";
import { sqsModule } from "./aws-sqs/index.ts";
import { monitoringModule } from "./gcp-monitoring/index.ts";
import type { Provider, ProviderModule, RuntimeEnv } from "./types.ts";

/** Every provider module, keyed by its `type`. */
export const PROVIDER_MODULES: Readonly<Record<string, ProviderModule<any, any>>> = {
  [sqsModule.type]: sqsModule,
  [cloudWatchModule.type]: cloudWatchModule,
  [monitoringModule.type]: monitoringModule,
};

/** A validated provider instance from the config: its module type and config. */
export interface ProviderInstanceConfig {
  type: string;
  config: unknown;
}

/**
 * Build every configured provider instance (no network I/O).
 *
 * @param providers validated `providers:` section, name → instance config
 * @throws Error when a type has no module (cannot happen after config validation)
 */
export function buildProviders(
  providers: Readonly<Record<string, ProviderInstanceConfig>>,
  runtime: RuntimeEnv,
): Map<string, Provider> {
  const built = new Map<string, Provider>();
  for (const [name, instance] of Object.entries(providers)) {
    const module = PROVIDER_MODULES[instance.type];
    if (module === undefined) throw new Error(`no provider module for type ${instance.type}`);
    built.set(name, module.create(name, instance.config, runtime));
  }
  return built;
}
