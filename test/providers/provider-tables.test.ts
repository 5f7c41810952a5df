/**
 * The provider tables agree (issue 11 review): `provider-list.ts`
 * `PROVIDER_TYPES` is the source; `provider-loaders.ts` (Node, Lambda: a
 * dynamic import per provider), `infra/worker/providers.ts` (the Worker's
 * default build: static imports) and `infra/tools/provider-tables.ts`
 * `PROVIDER_IMPLEMENTATIONS` (what the Worker build writes for a chosen
 * set) name the same providers in the same order, and every entry of every
 * table loads the same implementation, whose schemas are the ones config
 * validation uses. The committed tables are what
 * `infra/tools/provider-tables.ts` writes from the list (issue 24: a new
 * provider is one folder plus one line, `npm run providers:render`). (The
 * compiler refuses a table missing a type or naming an extra one:
 * `satisfies Record<ProviderType, …>`.)
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { committedTables, PROVIDER_IMPLEMENTATIONS, providerTable, staleTables } from "../../infra/tools/provider-tables.ts";
import { PROVIDERS as WORKER_PROVIDERS } from "../../infra/worker/providers.ts";
import { isProviderType, PROVIDER_TYPES, type ProviderEntry } from "../../shared/providers/provider-list.ts";
import { PROVIDERS } from "../../shared/providers/provider-loaders.ts";
import { builtProviderTypes, notBuiltMessage } from "../../shared/providers/registry.ts";
import type { ProviderModule } from "../../shared/providers/types.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

describe("one list of providers", () => {
  it("every table names exactly PROVIDER_TYPES, in its order", () => {
    expect(Object.keys(PROVIDERS)).toEqual([...PROVIDER_TYPES]);
    expect(Object.keys(WORKER_PROVIDERS)).toEqual([...PROVIDER_TYPES]);
    expect(Object.keys(PROVIDER_IMPLEMENTATIONS)).toEqual([...PROVIDER_TYPES]);
    expect(builtProviderTypes()).toEqual([...PROVIDER_TYPES]);
    expect(PROVIDER_TYPES.every(isProviderType)).toBe(true);
    expect(isProviderType("carrier-pigeon")).toBe(false);
    expect(isProviderType("constructor")).toBe(false);
    expect(notBuiltMessage("carrier-pigeon")).toMatch(/^unknown provider type "carrier-pigeon"/);
  });

  it("the committed tables are what the list writes (npm run providers:render)", () => {
    expect(committedTables().map((t) => t.path)).toEqual(["shared/providers/provider-loaders.ts", "infra/worker/providers.ts"]);
    expect(staleTables()).toEqual([]);
  });

  it.each([...PROVIDER_TYPES])("%s: every table loads the same implementation, with the schemas config validation uses", async (type) => {
    const entry: ProviderEntry = PROVIDERS[type]!;
    const module: ProviderModule<unknown, unknown> = await entry.load();
    expect(typeof module.create).toBe("function");
    // the loaders' synchronous schemas are the implementation's own
    expect(entry.providerSchema).toBe(module.providerSchema);
    expect(entry.querySchema).toBe(module.querySchema);
    // the Worker's default table
    expect(await WORKER_PROVIDERS[type]!.load()).toBe(module);
    // what the Worker build imports for a chosen set: the path and export it names ...
    const impl = PROVIDER_IMPLEMENTATIONS[type]!;
    expect((await import(pathToFileURL(join(ROOT, impl.path)).href))[impl.name]).toBe(module);
    // ... and the table it writes, imported as Node would
    const dir = join(ROOT, ".cache/provider-tables-test");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `providers-${type}.ts`);
    writeFileSync(file, providerTable([type], dir));
    const written = (await import(pathToFileURL(file).href)) as { PROVIDERS: Record<string, ProviderEntry> };
    expect(Object.keys(written.PROVIDERS)).toEqual([type]);
    expect(await written.PROVIDERS[type]!.load()).toBe(module);
    expect(written.PROVIDERS[type]!.providerSchema).toBe(entry.providerSchema);
  });
});
