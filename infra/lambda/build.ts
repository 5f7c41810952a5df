/**
 * Build the AWS Lambda artifact: `functions/lambda.ts` and everything it
 * imports (Hono, the AWS SDK clients, zod, yaml) bundled by esbuild into one
 * ES module for the `nodejs24.x` runtime on arm64. serverless.yml packages
 * the output directory.
 *
 *   node infra/lambda/build.ts [--outdir dist/lambda] [--config bridge.yaml]
 *
 * `--config FILE` copies a config into the artifact as `bridge.yaml`, for
 * `BRIDGE_CONFIG_FILE=bridge.yaml` (resolved against `LAMBDA_TASK_ROOT`).
 * Prints the bundle's size raw and gzip-compressed (the zip Lambda stores
 * is deflate-compressed, so the gzip figure approximates it).
 *
 * The AWS SDK is bundled rather than taken from the runtime: the runtime's
 * copy changes version without notice, and the bundled one is the one tested.
 */
import { build, type Metafile } from "esbuild";
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";

/** Repository root. */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The Lambda runtime identifier and the matching esbuild target. */
export const LAMBDA_RUNTIME = "nodejs24.x";
export const ESBUILD_TARGET = "node24";

/** What a build produced. */
export interface LambdaBuild {
  outdir: string;
  /** the handler module, `index.mjs` (handler string `index.handler`) */
  entry: string;
  /** size of `index.mjs`, bytes */
  bytes: number;
  /** size of `index.mjs` gzip-compressed, bytes */
  gzipBytes: number;
  metafile: Metafile;
}

/**
 * Bundle the Lambda handler into `outdir` (emptied first).
 *
 * @param options.config a config file to ship as `bridge.yaml`
 * @throws Error when esbuild fails (with its messages)
 */
export async function buildLambda(options: { outdir: string; config?: string }): Promise<LambdaBuild> {
  const outdir = resolve(options.outdir);
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  const entry = join(outdir, "index.mjs");
  const result = await build({
    entryPoints: [join(ROOT, "functions/lambda.ts")],
    outfile: entry,
    bundle: true,
    platform: "node",
    target: ESBUILD_TARGET,
    format: "esm",
    minify: true,
    keepNames: true,
    sourcemap: "linked",
    legalComments: "external",
    metafile: true,
    logLevel: "warning",
    // CommonJS dependencies call require() for Node built-ins; give the ES module one.
    banner: { js: 'import { createRequire as __bridgeCreateRequire } from "node:module"; const require = __bridgeCreateRequire(import.meta.url);' },
  });
  writeFileSync(join(outdir, "meta.json"), JSON.stringify(result.metafile));
  if (options.config) copyFileSync(options.config, join(outdir, "bridge.yaml"));
  const code = readFileSync(entry);
  return { outdir, entry, bytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length, metafile: result.metafile };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      outdir: { type: "string", default: join(ROOT, "dist/lambda") },
      config: { type: "string" },
    },
  });
  const out = await buildLambda({ outdir: values.outdir, ...(values.config ? { config: values.config } : {}) });
  const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
  console.log(`Lambda artifact (${LAMBDA_RUNTIME}, arm64): ${out.entry}`);
  console.log(`  index.mjs ${kib(out.bytes)} / gzip ${kib(out.gzipBytes)}${values.config ? `; config ${values.config} → bridge.yaml` : ""}`);
}

if (import.meta.main) await main();
