/**
 * The one list of providers, and the shape of one entry of a provider
 * table. Both the tables (`./provider-loaders.ts`,
 * `infra/worker/providers.ts`, the ones `infra/worker/build.ts` writes) and
 * `./registry.ts`, which loads the table of its build, import them from
 * here, so no table imports the registry that imports it.
 *
 * **Adding a provider is one folder plus one line.** The folder is
 * `shared/providers/<type>/` (named as its `type:`), holding
 * - `schema.ts`, exporting `providerSchema` (a provider instance, without
 *   `type`) and `querySchema` (a rule's `query:` section): small, read
 *   synchronously by config validation, so they must not import the
 *   provider's cloud client;
 * - `index.ts`, exporting `providerModule`, its {@link ProviderModule}
 *   (whose schemas are those same objects).
 *
 * The line is its type in {@link PROVIDER_TYPES}, e.g. `"http-gauge",`.
 *
 * Every provider table is written from this list by
 * `infra/tools/provider-tables.ts`: the bundlers need literal import paths
 * (esbuild splits only a static `import("./…")` into a chunk, and the
 * synchronous schemas need static imports), so the tables are generated
 * rather than computed. After changing the list run `npm run
 * providers:render`, which rewrites `./provider-loaders.ts` (schemas plus a
 * dynamic `import()` per provider, for Node and Lambda) and
 * `infra/worker/providers.ts` (the Worker's, static imports); the Worker
 * build writes its table for a chosen set with the same code at build time.
 * `test/providers/provider-tables.test.ts` fails when a committed table is stale, and
 * proves that every entry loads the same implementation; the compiler
 * refuses a table missing a type or naming an extra one (`satisfies
 * Record<ProviderType, …>`) and a folder missing one of the exports.
 */
import type { ZodMiniType } from "zod/mini";
import type { ProviderModule } from "./types.ts";

/** Every provider type the project has, whether or not this build holds it, in table order: the source of every provider table (see the file comment). */
export const PROVIDER_TYPES = [
  "aws-sqs",
  "aws-cloudwatch",
  "gcp-monitoring",
  "prometheus",
] as const;

/** A provider type of {@link PROVIDER_TYPES}. */
export type ProviderType = (typeof PROVIDER_TYPES)[number];

/** Whether `type` is one of {@link PROVIDER_TYPES} (in this build or not). */
export function isProviderType(type: string): type is ProviderType {
  return (PROVIDER_TYPES as readonly string[]).includes(type);
}

/** One provider of a build: its schemas (synchronous) and its implementation (loaded on demand). */
export interface ProviderEntry {
  /** schema of a provider instance (without `type`) */
  readonly providerSchema: ZodMiniType<any>;
  /** schema of a rule's `query:` section */
  readonly querySchema: ZodMiniType<any>;
  /** import the implementation; rejects when the module cannot be loaded */
  load(): Promise<ProviderModule<any, any>>;
}

/**
 * The entry of a provider whose implementation is bundled in statically
 * (the Worker's tables: `infra/worker/providers.ts`, `infra/worker/build.ts`).
 */
export function bundledEntry(module: ProviderModule<any, any>): ProviderEntry {
  return { providerSchema: module.providerSchema, querySchema: module.querySchema, load: async () => module };
}
