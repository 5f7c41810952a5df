/**
 * The provider tables, written from the one list of providers
 * (`shared/providers/provider-list.ts` `PROVIDER_TYPES`) and the layout of a
 * provider folder (`shared/providers/<type>/schema.ts` exporting
 * `providerSchema` and `querySchema`, `index.ts` exporting `providerModule`;
 * see that file).
 *
 *   node infra/tools/provider-tables.ts            # exit 1 naming each committed table that is stale
 *   node infra/tools/provider-tables.ts --write    # rewrite them (npm run providers:render)
 *
 * The tables are source, not data computed at run time, because the
 * bundlers need literal import paths: esbuild splits only a static
 * `import("./…")` into a chunk (the Lambda artifact), config validation
 * reads the schemas synchronously (static imports), and the Worker bundles
 * every implementation statically. Written here:
 * - {@link loaderTable}: `shared/providers/provider-loaders.ts`, the table of
 *   Node and Lambda (schemas plus a dynamic `import()` per provider);
 * - {@link providerTable}: a Worker table of the given types (static
 *   imports) — every provider in `infra/worker/providers.ts` (committed,
 *   wrangler.toml `[alias]`), a chosen set at build time
 *   (`infra/worker/build.ts`).
 *
 * `test/providers/provider-tables.test.ts` fails when a committed table differs from
 * what this writes.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { PROVIDER_TYPES } from "../../shared/providers/provider-list.ts";
import { ROOT } from "../build-common.ts";

/** The export of a provider folder's `index.ts` holding its `ProviderModule`. */
export const MODULE_EXPORT = "providerModule";

/** Each provider type's implementation: module path (from the repository root, `shared/providers/<type>/index.ts`) and export name, in `PROVIDER_TYPES` order. */
export const PROVIDER_IMPLEMENTATIONS: Readonly<Record<string, { path: string; name: string }>> = Object.fromEntries(
  PROVIDER_TYPES.map((type) => [type, { path: `shared/providers/${type}/index.ts`, name: MODULE_EXPORT }]),
);

/** The committed Node and Lambda table, from the repository root. */
export const LOADER_TABLE = "shared/providers/provider-loaders.ts";

/** The committed Worker table of every provider (wrangler.toml `[alias]`), from the repository root. */
export const WORKER_TABLE = "infra/worker/providers.ts";

const GENERATED_NOTE = ` * Written by \`npm run providers:render\` (\`infra/tools/provider-tables.ts\`)
 * from \`shared/providers/provider-list.ts\` \`PROVIDER_TYPES\`: do not edit
 * (\`test/providers/provider-tables.test.ts\` fails when it is stale).`;

const LOADER_HEADER = `/**
 * The providers this build holds, by \`type:\`: each one's config schemas
 * (small, read synchronously by config validation) and its implementation
 * behind a dynamic \`import()\`, so that a process (Node, Lambda) loads only
 * the providers its config names, and esbuild's \`splitting\` (the Lambda
 * artifact, \`infra/lambda/build.ts\`) makes each implementation its own chunk.
 *
 * This file lists every provider. A Worker built for a chosen set replaces
 * it at bundle time: \`infra/worker/build.ts --providers …\` (or \`--config\`)
 * writes a table with only those entries and points wrangler's \`--alias\`
 * for \`./provider-loaders.ts\` at it, so the other providers' code is not in
 * the bundle at all (wrangler bundles a dynamic import into the one script).
 * Keep the import path \`./provider-loaders.ts\` in \`registry.ts\` as it is.
 * The imports are literal because esbuild splits only a static
 * \`import("./…")\` into a chunk.
 *
${GENERATED_NOTE}
 */`;

const WORKER_HEADER = `/**
 * The provider table of the Cloudflare Worker (all providers), bundled in
 * place of \`shared/providers/provider-loaders.ts\` (wrangler.toml \`[alias]\`).
 *
 * Same entries, but each implementation is imported statically: wrangler
 * bundles a Worker into one script (no code splitting), so a dynamic
 * \`import()\` would save nothing there and only wrap every module it reaches
 * in esbuild's lazy-initialisation code (measured: +70 KiB, +26 KiB gzip).
 * A Worker built for a chosen set of providers (\`infra/worker/build.ts
 * --providers …\` or \`--config FILE\`) bundles a table written like this one
 * with only those entries.
 *
${GENERATED_NOTE}
 */`;

/**
 * The identifier a table names a provider's imports by: its type in
 * camelCase (`aws-sqs` → `awsSqs`).
 *
 * @throws Error when `type` is not lowercase letters, digits and single
 *   hyphens starting with a letter (a provider folder's name)
 */
function identifierOf(type: string): string {
  if (!/^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/.test(type)) {
    throw new Error(`provider type "${type}": a provider's type (and folder) is lowercase letters, digits and hyphens, starting with a letter`);
  }
  return type.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** The import specifier of `path` (from the repository root) for a file in `dir`. */
function specifier(dir: string, path: string): string {
  const rel = relative(dir, join(ROOT, path));
  return JSON.stringify(rel.startsWith(".") ? rel : `./${rel}`);
}

/**
 * The source of `shared/providers/provider-loaders.ts`: every provider of
 * `PROVIDER_TYPES`, its schemas imported statically from its `schema.ts`,
 * its implementation behind a literal dynamic `import()` of its `index.ts`.
 *
 * @throws Error naming a type that cannot be a folder name
 */
export function loaderTable(): string {
  const dir = join(ROOT, "shared/providers");
  const imports: string[] = [];
  const entries: string[] = [];
  for (const type of PROVIDER_TYPES) {
    const id = identifierOf(type);
    imports.push(`import { providerSchema as ${id}ProviderSchema, querySchema as ${id}QuerySchema } from ${specifier(dir, `shared/providers/${type}/schema.ts`)};`);
    entries.push(
      `  ${JSON.stringify(type)}: {`,
      `    providerSchema: ${id}ProviderSchema,`,
      `    querySchema: ${id}QuerySchema,`,
      `    load: async () => (await import(${specifier(dir, PROVIDER_IMPLEMENTATIONS[type]!.path)})).${MODULE_EXPORT},`,
      "  },",
    );
  }
  return [
    LOADER_HEADER,
    ...imports,
    `import type { ProviderEntry, ProviderType } from "./provider-list.ts";`,
    "",
    "/** Every provider, by `type:`. */",
    "export const PROVIDERS: Readonly<Record<string, ProviderEntry>> = {",
    ...entries,
    "} satisfies Record<ProviderType, ProviderEntry>;",
    "",
  ].join("\n");
}

/**
 * The source of a Worker provider table holding `types` only, for a file in
 * `dir` (implementations imported statically, see `infra/worker/providers.ts`).
 * A table of every provider, in `PROVIDER_TYPES` order, is checked by the
 * compiler against the list (`satisfies Record<ProviderType, …>`).
 *
 * @param header the file comment (default: one line saying what it holds)
 * @throws Error naming an unknown type
 */
export function providerTable(types: readonly string[], dir: string, header?: string): string {
  const imports: string[] = [];
  const entries: string[] = [];
  for (const type of types) {
    const impl = Object.hasOwn(PROVIDER_IMPLEMENTATIONS, type) ? PROVIDER_IMPLEMENTATIONS[type] : undefined;
    if (impl === undefined) throw new Error(`unknown provider type "${type}" (known: ${PROVIDER_TYPES.join(", ")})`);
    const id = identifierOf(type);
    imports.push(`import { ${impl.name} as ${id} } from ${specifier(dir, impl.path)};`);
    entries.push(`  ${JSON.stringify(type)}: bundledEntry(${id}),`);
  }
  const complete = types.length === PROVIDER_TYPES.length && types.every((type, i) => type === PROVIDER_TYPES[i]);
  return [
    header ?? `// Written by infra/worker/build.ts: the Worker's provider table with ${types.join(", ") || "no provider"} only.`,
    `import { bundledEntry, type ProviderEntry${complete ? ", type ProviderType" : ""} } from ${specifier(dir, "shared/providers/provider-list.ts")};`,
    ...imports,
    "",
    "/** The providers of this build, by `type:`, implementations bundled in. */",
    "export const PROVIDERS: Readonly<Record<string, ProviderEntry>> = {",
    ...entries,
    `}${complete ? " satisfies Record<ProviderType, ProviderEntry>" : ""};`,
    "",
  ].join("\n");
}

/** The committed tables (paths from the repository root) and the text each must hold. */
export function committedTables(): { path: string; text: string }[] {
  return [
    { path: LOADER_TABLE, text: loaderTable() },
    { path: WORKER_TABLE, text: providerTable(PROVIDER_TYPES, join(ROOT, "infra/worker"), WORKER_HEADER) },
  ];
}

/** The committed tables whose file differs from what {@link committedTables} writes (missing files count), paths from the repository root. */
export function staleTables(): string[] {
  return committedTables()
    .filter(({ path, text }) => {
      try {
        return readFileSync(join(ROOT, path), "utf8") !== text;
      } catch {
        return true;
      }
    })
    .map(({ path }) => path);
}

function main(argv: readonly string[]): number {
  if (argv.includes("--write")) {
    for (const { path, text } of committedTables()) {
      writeFileSync(join(ROOT, path), text);
      console.log(`wrote ${path}`);
    }
    return 0;
  }
  const stale = staleTables();
  for (const path of stale) console.error(`${path} is stale: run npm run providers:render`);
  return stale.length === 0 ? 0 : 1;
}

/**
 * A flavour table of the `prometheus` provider holding only `flavours`
 * (the shape of `shared/providers/prometheus/flavours.ts`: each flavour is
 * the module of that folder named as it, exporting `flavour`), written to
 * `dir`: a Worker built for a config bundles only the flavours it uses.
 */
export function flavourTable(flavours: readonly string[], dir: string): string {
  const imports = flavours.map((f, i) => `import { flavour as f${i} } from ${specifier(dir, `shared/providers/prometheus/${f}.ts`)};`);
  return [
    `// Written by infra/worker/build.ts: the prometheus flavours of this build: ${flavours.join(", ") || "generic only"}.`,
    `import type { FlavourFactory } from ${specifier(dir, "shared/providers/prometheus/flavour.ts")};`,
    ...imports,
    "",
    "export const FLAVOURS: Readonly<Record<string, FlavourFactory>> = {",
    ...flavours.map((f, i) => `  ${JSON.stringify(f)}: f${i},`),
    "};",
    "",
  ].join("\n");
}

if (import.meta.main) process.exit(main(process.argv.slice(2)));
