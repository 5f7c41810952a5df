/**
 * Build the bridge's Node server as ES modules: `functions/node.ts` and
 * everything it imports bundled by esbuild for Node 24 into
 * `dist/node/node.mjs`, with each provider, the official Google client and
 * other dynamic imports split into `chunks/` loaded only when a config needs
 * them (the same bundling as the Lambda artifact: `infra/lambda/build.ts`
 * `bundleForNode`). Ship the directory alone (no `node_modules`) and run
 *
 *   node dist/node/node.mjs --config bridge.yaml [--host 0.0.0.0] [--port 8080]
 *
 * with the same flags and environment as `npm run serve`.
 *
 * Why: run from source (`node functions/node.ts`), Node strips the types of
 * every `.ts` file it loads (its built-in stripper adds ≈ 18 MB of resident
 * memory) and keeps each module's source; the bundle at rest, with the demo
 * SQS config, measured 78 MB against 130 MB from source (bare Node +
 * `@hono/node-server`: 67 MB) on the 2-core development machine
 * (`npm run bench:footprint`).
 *
 *   node infra/node/build.ts [--outdir dist/node]
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { bundleForNode, CHUNK_DIR, type LambdaBuild } from "../lambda/build.ts";

/** Repository root. */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Bundle the Node server into `outdir` (emptied first): `node.mjs` plus `chunks/`. @throws as `bundleForNode` */
export function buildNodeServer(options: { outdir: string }): Promise<LambdaBuild> {
  return bundleForNode({ outdir: options.outdir, source: "functions/node.ts", name: "node" });
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { outdir: { type: "string", default: join(ROOT, "dist/node") } } });
  const out = await buildNodeServer({ outdir: values.outdir });
  const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
  const chunks = out.files.filter((f) => f.name.startsWith(`${CHUNK_DIR}/`) && f.name.endsWith(".mjs"));
  console.log(`Node server: ${out.entry} ${kib(out.bytes)} / gzip ${kib(out.gzipBytes)}; ${chunks.length} chunks loaded on demand`);
  console.log(`  largest in node.mjs: ${out.packages.slice(0, 6).map(([p, n]) => `${p} ${kib(n)}`).join(", ")}`);
}

if (import.meta.main) await main();
