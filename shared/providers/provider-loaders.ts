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
 * The imports are literal because esbuild splits only a static
 * `import("./…")` into a chunk.
 *
 * Written by `npm run providers:render` (`infra/tools/provider-tables.ts`)
 * from `shared/providers/provider-list.ts` `PROVIDER_TYPES`: do not edit
 * (`test/providers/provider-tables.test.ts` fails when it is stale).
 */
import { providerSchema as awsSqsProviderSchema, querySchema as awsSqsQuerySchema } from "./aws-sqs/schema.ts";
import { providerSchema as awsCloudwatchProviderSchema, querySchema as awsCloudwatchQuerySchema } from "./aws-cloudwatch/schema.ts";
import { providerSchema as gcpMonitoringProviderSchema, querySchema as gcpMonitoringQuerySchema } from "./gcp-monitoring/schema.ts";
import { providerSchema as prometheusProviderSchema, querySchema as prometheusQuerySchema } from "./prometheus/schema.ts";
import type { ProviderEntry, ProviderType } from "./provider-list.ts";

/** Every provider, by `type:`. */
export const PROVIDERS: Readonly<Record<string, ProviderEntry>> = {
  "aws-sqs": {
    providerSchema: awsSqsProviderSchema,
    querySchema: awsSqsQuerySchema,
    load: async () => (await import("./aws-sqs/index.ts")).providerModule,
  },
  "aws-cloudwatch": {
    providerSchema: awsCloudwatchProviderSchema,
    querySchema: awsCloudwatchQuerySchema,
    load: async () => (await import("./aws-cloudwatch/index.ts")).providerModule,
  },
  "gcp-monitoring": {
    providerSchema: gcpMonitoringProviderSchema,
    querySchema: gcpMonitoringQuerySchema,
    load: async () => (await import("./gcp-monitoring/index.ts")).providerModule,
  },
  "prometheus": {
    providerSchema: prometheusProviderSchema,
    querySchema: prometheusQuerySchema,
    load: async () => (await import("./prometheus/index.ts")).providerModule,
  },
} satisfies Record<ProviderType, ProviderEntry>;
