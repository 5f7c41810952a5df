/**
 * Build the bridge's Node server as ES modules: `functions/node.ts` and
 * everything it imports bundled by esbuild for Node 24 into
 * `dist/node/node.mjs`, with each provider, the official Google client and
 * other dynamic imports split into `chunks/` loaded only when a config needs
 * them (the same bundling as the Lambda artifact: `infra/build-common.ts`
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
 *   npm run build:node -- --outdir out   (paths relative to where npm was run; --help)
 *
 * Arguments are parsed by commander (`functions/script-args.ts`, as the
 * Lambda build): `--help` lists them, a usage error exits 2, and a relative
 * `--outdir` is resolved against the directory `npm run` was typed in
 * (`callerPath`).
 */
import { join } from "node:path";
import { callerPath, parseOrExit } from "../../functions/script-args.ts";
import { bundleForNode, CHUNK_DIR, ROOT, type NodeBundle } from "../build-common.ts";

/** Bundle the Node server into `outdir` (emptied first): `node.mjs` plus `chunks/`. @throws as `bundleForNode` (`infra/build-common.ts`) */
export function buildNodeServer(options: { outdir: string }): Promise<NodeBundle> {
  return bundleForNode({ outdir: options.outdir, source: "functions/node.ts", name: "node" });
}

async function main(): Promise<void> {
  const { Command } = await import("commander");
  const program = new Command("npm run build:node --")
    .description("Bundle the bridge's Node server (functions/node.ts) into node.mjs plus chunks/ loaded on demand; run it with node OUTDIR/node.mjs --config FILE.")
    .option("--outdir <dir>", "output directory, emptied first", join(ROOT, "dist/node"))
    .addHelpText("after", "\nRelative paths are resolved against the directory npm was run from (else the working directory).");
  parseOrExit(program);
  const opts = program.opts<{ outdir: string }>();
  const out = await buildNodeServer({ outdir: callerPath(opts.outdir) });
  const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
  const chunks = out.files.filter((f) => f.name.startsWith(`${CHUNK_DIR}/`) && f.name.endsWith(".mjs"));
  console.log(`Node server: ${out.entry} ${kib(out.bytes)} / gzip ${kib(out.gzipBytes)}; ${chunks.length} chunks loaded on demand`);
  console.log(`  largest in node.mjs: ${out.packages.slice(0, 6).map(([p, n]) => `${p} ${kib(n)}`).join(", ")}`);
}

if (import.meta.main) await main();
