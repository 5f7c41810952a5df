/**
 * The list of provider types, and the shape of one entry of a provider
 * table. Both the tables (`./provider-loaders.ts`,
 * `infra/worker/providers.ts`, the ones `infra/worker/build.ts` writes) and
 * `./registry.ts`, which loads the table of its build, import them from
 * here, so no table imports the registry that imports it.
 *
 * **One list of providers.** {@link PROVIDER_TYPES} is the source; the
 * three tables that must name the same providers are checked against it by
 * the compiler (`satisfies Record<ProviderType, …>`: a missing or extra
 * entry does not typecheck): `./provider-loaders.ts` (schemas plus a
 * dynamic `import()` per provider, split into chunks by esbuild),
 * `infra/worker/providers.ts` (the Worker's, static imports) and
 * `infra/worker/build.ts` `PROVIDER_IMPLEMENTATIONS` (the export name of
 * each `shared/providers/<type>/index.ts`, for the tables the Worker build
 * writes). They stay literal because the bundlers need static import paths;
 * `test/provider-tables.test.ts` proves they agree and that every entry
 * loads the same implementation.
 *
 * Adding a provider: its `schema.ts` and `index.ts` under
 * `shared/providers/<type>/`, its type in {@link PROVIDER_TYPES}, then the
 * entry the compiler asks for in each table.
 */
import type { ZodMiniType } from "zod/mini";
import type { ProviderModule } from "./types.ts";

/** Every provider type the project has, whether or not this build holds it: the source of every provider table (see the file comment). */
export const PROVIDER_TYPES = ["aws-sqs", "aws-cloudwatch", "gcp-monitoring"] as const;

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
