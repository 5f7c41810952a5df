/**
 * Build the AWS Lambda artifact: `functions/lambda.ts` and everything it
 * imports (Hono, the AWS SDK clients, zod, yaml, and the official Google
 * Cloud Monitoring client with google-gax, gRPC and protobufjs) bundled by
 * esbuild into ES modules for the `nodejs24.x` runtime on arm64: the handler
 * `index.mjs` and, with esbuild's `splitting`, one chunk per dynamic import
 * under `chunks/` — each provider's implementation
 * (`shared/providers/provider-loaders.ts`), the official Google client, the
 * SSM client. A cold start loads `index.mjs` and then only the chunks its
 * config needs: an SQS-only config never loads the Google stack (2.3 MB of
 * code) or the CloudWatch client. serverless.yml packages
 * {@link PACKAGED_FILES} of the output directory.
 *
 *   node infra/lambda/build.ts [--outdir dist/lambda] [--config bridge.yaml]
 *   npm run build:lambda -- --config bridge.yaml   (paths relative to where npm was run; --help)
 *
 * `--config FILE` copies a config into the artifact as `bridge.yaml`, for
 * `BRIDGE_CONFIG_FILE=dist/lambda/bridge.yaml` (resolved against
 * `LAMBDA_TASK_ROOT`, the root of the deployed zip). The config is first
 * validated as the handler loads it (`loadConfig` without file access,
 * `shared/lambda/handler.ts`): an invalid one fails the build with the
 * loader's located messages on stderr and exit status 2, and nothing is
 * written.
 * Prints the size of each file, raw and gzip-compressed (the zip Lambda
 * stores is deflate-compressed, so the gzip figure approximates it), and the
 * packages that weigh most in the bundle.
 *
 * The AWS SDK is bundled rather than taken from the runtime: the runtime's
 * copy changes version without notice, and the bundled one is the one tested.
 *
 * The bundling itself (ES modules, one chunk per dynamic import, the
 * CommonJS banner and the review of `__dirname` users that lets the
 * official Google client run from one bundle) is `infra/build-common.ts`
 * `bundleForNode`, shared with the Node server's build (`infra/node/build.ts`).
 */
import { join } from "node:path";
import { ConfigError } from "../../shared/config/yaml.ts";
import { checkBridgeConfigFile, INVALID_CONFIG_EXIT, printConfigIssues } from "../../functions/config-check.ts";
import { callerPath, parseOrExit } from "../../functions/script-args.ts";
import { bundleForNode, CHUNK_DIR, ROOT, type NodeBundle } from "../build-common.ts";

export { ESBUILD_TARGET, DIRNAME_USERS, CHUNK_DIR, type ArtifactFile } from "../build-common.ts";

/** The Lambda runtime identifier (its esbuild target: `ESBUILD_TARGET`, `infra/build-common.ts`). */
export const LAMBDA_RUNTIME = "nodejs24.x";

/**
 * The files of the output directory that serverless.yml packages (its
 * `package.patterns`, under `dist/lambda/`) and `test/runtimes/build.test.ts` runs:
 * the bundle, the licence notices of what it bundles, the optional config.
 * The source map and `meta.json` stay behind for local debugging.
 */
export const PACKAGED_FILES = ["index.mjs", "index.mjs.LEGAL.txt", "bridge.yaml", "chunks/*.mjs", "chunks/*.LEGAL.txt"] as const;

/** Whether `name` (a path relative to the output directory, `/`-separated) is one of {@link PACKAGED_FILES} (`*` matches within one path segment). */
export function isPackaged(name: string): boolean {
  return PACKAGED_FILES.some((pattern) => matchesPattern(pattern, name));
}

/**
 * The {@link PACKAGED_FILES} patterns that match at least one of `names`
 * (paths relative to the output directory), in their order: what a build
 * really packages, e.g. without `bridge.yaml` when no `--config` was given.
 */
export function packagedPatterns(names: readonly string[]): string[] {
  return PACKAGED_FILES.filter((pattern) => names.some((name) => matchesPattern(pattern, name)));
}

/** Whether `name` matches one {@link PACKAGED_FILES} pattern (`*` within one path segment). */
function matchesPattern(pattern: string, name: string): boolean {
  return new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`).test(name);
}

/** What a Lambda build produced: the handler module is `index.mjs` (handler string `index.handler`). */
export type LambdaBuild = NodeBundle;

/**
 * Bundle the Lambda handler into `outdir` (emptied first).
 *
 * @param options.config a config file to validate ({@link validateLambdaConfig}) and ship as `bridge.yaml`
 * @throws ConfigError (every problem located; nothing is written) when the
 *   config is invalid or unreadable; as `bundleForNode` when bundling fails
 */
export async function buildLambda(options: { outdir: string; config?: string }): Promise<LambdaBuild> {
  if (options.config !== undefined) validateLambdaConfig(options.config);
  return bundleForNode({ ...options, source: "functions/lambda.ts", name: "index" });
}

/**
 * Validate a config file as the Lambda handler loads it (`loadConfig(text,
 * source)` with no file access: `policy.files` is refused there too),
 * through `functions/config-check.ts` as the other tools do.
 *
 * @throws ConfigError with every problem located (an unreadable file is one
 *   problem, `cannot read: …`)
 */
export function validateLambdaConfig(path: string): void {
  const check = checkBridgeConfigFile(path);
  if (check.config === undefined) throw new ConfigError(check.issues);
}

async function main(): Promise<void> {
  const { Command } = await import("commander");
  const program = new Command("npm run build:lambda --")
    .description(`Bundle the AWS Lambda handler (functions/lambda.ts) for ${LAMBDA_RUNTIME} on arm64; serverless.yml packages the result.`)
    .option("--outdir <dir>", "output directory, emptied first", join(ROOT, "dist/lambda"))
    .option("--config <file>", "a bridge config to validate and ship as bridge.yaml (BRIDGE_CONFIG_FILE=bridge.yaml in the function)")
    .addHelpText("after", "\nRelative paths are resolved against the directory npm was run from. Exit 2: an invalid config (nothing is written).");
  parseOrExit(program);
  const opts = program.opts<{ outdir: string; config?: string }>();
  const values = { outdir: callerPath(opts.outdir), ...(opts.config !== undefined ? { config: callerPath(opts.config) } : {}) };
  const out = await buildLambda({ outdir: values.outdir, ...(values.config ? { config: values.config } : {}) });
  const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
  console.log(`Lambda artifact (${LAMBDA_RUNTIME}, arm64): ${out.outdir}`);
  for (const f of out.files.filter((f) => !f.name.startsWith(`${CHUNK_DIR}/`))) console.log(`  ${f.name} ${kib(f.bytes)} / gzip ${kib(f.gzipBytes)}`);
  const chunks = out.files.filter((f) => f.name.startsWith(`${CHUNK_DIR}/`) && f.name.endsWith(".mjs"));
  const chunkSum = (key: "bytes" | "gzipBytes") => chunks.reduce((n, f) => n + f[key], 0);
  console.log(`  ${CHUNK_DIR}/ (${chunks.length} chunks, loaded on demand): ${kib(chunkSum("bytes"))} / gzip ${kib(chunkSum("gzipBytes"))}`);
  const packaged = out.files.filter((f) => isPackaged(f.name));
  const sum = (key: "bytes" | "gzipBytes") => packaged.reduce((n, f) => n + f[key], 0);
  console.log(
    `  packaged (${packagedPatterns(out.files.map((f) => f.name)).join(", ")}; ${packaged.length} files): ${kib(sum("bytes"))} / gzip ${kib(sum("gzipBytes"))} (Lambda's limits: 50 MiB zipped, 250 MiB unzipped)`,
  );
  console.log(`  largest in index.mjs: ${out.packages.slice(0, 6).map(([p, n]) => `${p} ${kib(n)}`).join(", ")}`);
  if (values.config) console.log(`  config ${values.config} → bridge.yaml`);
}

if (import.meta.main) {
  try {
    await main();
  } catch (err) {
    // an invalid --config: the loader's messages, one a line, and exit 2 (functions/config-check.ts, as `config validate`)
    if (err instanceof ConfigError) process.exit(printConfigIssues(err.issues));
    console.error((err as Error).message);
    process.exit(INVALID_CONFIG_EXIT);
  }
}
