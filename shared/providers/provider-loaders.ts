/**
 * The providers this build holds, by `type:`: each one's config schemas
 * (small, read synchronously by config validation) and its implementation
 * behind a dynamic `import()`, so that a process (Node, Lambda) loads only
 * the providers its config names, and esbuild's `splitting` (the Lambda
 * artifact, `infra/lambda/build.ts`) makes each implementation its own chunk.
 *
 * This file lists every provider. A Worker built for a chosen set replaces
 * it at bundle time: `infra/worker/build.ts --providers …` (or `--config`)
 * writes a table with only those entries and points wrangler's `--alias`
 * for `./provider-loaders.ts` at it, so the other providers' code is not in
 * the bundle at all (wrangler bundles a dynamic import into the one script).
 * Keep the import path `./provider-loaders.ts` in `registry.ts` as it is.
 * The entries are exactly `provider-list.ts` `PROVIDER_TYPES` (the source; the
 * compiler checks it), literal because esbuild splits only a static
 * `import("./…")` into a chunk.
 */
import { awsProviderSchema } from "./aws/common.ts";
import { cloudWatchProviderSchema, cloudWatchQuerySchema } from "./aws-cloudwatch/schema.ts";
import { sqsQuerySchema } from "./aws-sqs/schema.ts";
import { monitoringProviderSchema, monitoringQuerySchema } from "./gcp-monitoring/schema.ts";
import type { ProviderEntry, ProviderType } from "./provider-list.ts";

/** Every provider, by `type:`. */
export const PROVIDERS: Readonly<Record<string, ProviderEntry>> = {
  "aws-sqs": {
    providerSchema: awsProviderSchema,
    querySchema: sqsQuerySchema,
    load: async () => (await import("./aws-sqs/index.ts")).sqsModule,
  },
  "aws-cloudwatch": {
    providerSchema: cloudWatchProviderSchema,
    querySchema: cloudWatchQuerySchema,
    load: async () => (await import("./aws-cloudwatch/index.ts")).cloudWatchModule,
  },
  "gcp-monitoring": {
    providerSchema: monitoringProviderSchema,
    querySchema: monitoringQuerySchema,
    load: async () => (await import("./gcp-monitoring/index.ts")).monitoringModule,
  },
} satisfies Record<ProviderType, ProviderEntry>;
