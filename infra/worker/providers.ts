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
 * with only those entries.
 *
 * Written by `npm run providers:render` (`infra/tools/provider-tables.ts`)
 * from `shared/providers/provider-list.ts` `PROVIDER_TYPES`: do not edit
 * (`test/providers/provider-tables.test.ts` fails when it is stale).
 */
import { bundledEntry, type ProviderEntry, type ProviderType } from "../../shared/providers/provider-list.ts";
import { providerModule as awsSqs } from "../../shared/providers/aws-sqs/index.ts";
import { providerModule as awsCloudwatch } from "../../shared/providers/aws-cloudwatch/index.ts";
import { providerModule as gcpMonitoring } from "../../shared/providers/gcp-monitoring/index.ts";
import { providerModule as prometheus } from "../../shared/providers/prometheus/index.ts";

/** The providers of this build, by `type:`, implementations bundled in. */
export const PROVIDERS: Readonly<Record<string, ProviderEntry>> = {
  "aws-sqs": bundledEntry(awsSqs),
  "aws-cloudwatch": bundledEntry(awsCloudwatch),
  "gcp-monitoring": bundledEntry(gcpMonitoring),
  "prometheus": bundledEntry(prometheus),
} satisfies Record<ProviderType, ProviderEntry>;
