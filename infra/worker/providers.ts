/**
 * The provider table of the Cloudflare Worker (all providers), bundled in
 * place of `shared/providers/provider-loaders.ts` (wrangler.toml `[alias]`).
 *
 * Same entries, but each implementation is imported statically: wrangler
 * bundles a Worker into one script (no code splitting), so a dynamic
 * `import()` would save nothing there and only wrap every module it reaches
 * in esbuild's lazy-initialisation code (measured: +70 KiB, +26 KiB gzip).
 * A Worker built for a chosen set of providers (`infra/worker/build.ts
 * --providers …` or `--config FILE`) bundles a table written like this one
 * with only those entries. The entries are exactly `provider-list.ts`
 * `PROVIDER_TYPES` (the compiler checks it).
 */
import { cloudWatchModule } from "../../shared/providers/aws-cloudwatch/index.ts";
import { sqsModule } from "../../shared/providers/aws-sqs/index.ts";
import { monitoringModule } from "../../shared/providers/gcp-monitoring/index.ts";
import { bundledEntry, type ProviderEntry, type ProviderType } from "../../shared/providers/provider-list.ts";

/** Every provider, by `type:`, implementations bundled in. */
export const PROVIDERS: Readonly<Record<string, ProviderEntry>> = {
  "aws-sqs": bundledEntry(sqsModule),
  "aws-cloudwatch": bundledEntry(cloudWatchModule),
  "gcp-monitoring": bundledEntry(monitoringModule),
} satisfies Record<ProviderType, ProviderEntry>;
