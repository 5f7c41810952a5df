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
 * **The official Google client in one bundle.** `@google-cloud/monitoring`
 * needs nothing from disk on the bridge's path: its generated
 * `MetricServiceClient` loads its service definition from `protos.json`
 * through `require()` (bundled) and `GrpcClient.loadProtoJSON`. What broke
 * a plain bundle is that three CommonJS modules of the stack compute a
 * directory from `__dirname` when they load, and an ES module has no
 * `__dirname`: loading the bundle threw `ReferenceError`. The banner below
 * gives the bundle CommonJS's `__dirname`/`__filename` (the artifact's
 * directory and `index.mjs`). The modules that use them are listed in
 * {@link DIRNAME_USERS} with why the directory they compute is never read
 * by the bridge; the build fails if any other bundled module refers to
 * `__dirname` or `__filename`, so a dependency update that starts reading
 * files beside itself is caught here instead of on a cold start. (The
 * alternative, `external` google-gax with its `node_modules` shipped beside
 * the bundle, is about 70 packages: 31 MB on disk, 5.5 MB compressed, or
 * 20 MB / 2.4 MB without type declarations and maps, against the ≈ 0.5 MB
 * compressed the client adds to this bundle.) `test/build.test.ts` proves
 * the result: the built
 * artifact, in a fresh Node 24 process, reads Cloud Monitoring through the
 * official client over TLS against a gRPC fake of MetricService.
 */
import { build, type Metafile } from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue } from "../../shared/config/yaml.ts";
import { callerPath, parseOrExit } from "../../functions/script-args.ts";

/** Repository root. */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The Lambda runtime identifier and the matching esbuild target. */
export const LAMBDA_RUNTIME = "nodejs24.x";
export const ESBUILD_TARGET = "node24";

/**
 * The files of the output directory that serverless.yml packages (its
 * `package.patterns`, under `dist/lambda/`) and `test/build.test.ts` runs:
 * the bundle, the licence notices of what it bundles, the optional config.
 * The source map and `meta.json` stay behind for local debugging.
 */
export const PACKAGED_FILES = ["index.mjs", "index.mjs.LEGAL.txt", "bridge.yaml", "chunks/*.mjs", "chunks/*.LEGAL.txt"] as const;

/** Directory of the split chunks inside the output directory. */
export const CHUNK_DIR = "chunks";

/** Whether `name` (a path relative to the output directory, `/`-separated) is one of {@link PACKAGED_FILES} (`*` matches within one path segment). */
export function isPackaged(name: string): boolean {
  return PACKAGED_FILES.some((pattern) => new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`).test(name));
}

/**
 * Bundled modules allowed to refer to `__dirname`/`__filename`, with why
 * the directory they compute is never read by the bridge (paths relative to
 * the repository root, as esbuild's metafile names them).
 */
export const DIRNAME_USERS: Readonly<Record<string, string>> = {
  "node_modules/google-gax/build/src/grpc.js":
    "googleProtoFilesDir, the .proto include path of GrpcClient.loadProto()/GoogleProtoFilesRoot; the generated MetricServiceClient uses loadProtoJSON() with its bundled protos.json",
  "node_modules/@grpc/grpc-js/build/src/channelz.js": "channelz.proto, loaded only when a gRPC server registers the channelz admin service",
  "node_modules/@grpc/grpc-js/build/src/orca.js": "ORCA load-report protos, loaded only by a server or an xDS client with ORCA",
};

/**
 * Prepended to the bundle: CommonJS's `require` (for Node built-ins and the
 * CommonJS modules' own `require` calls), `__filename` and `__dirname`,
 * which an ES module does not have.
 */
const BANNER = [
  'import { createRequire as __bridgeCreateRequire } from "node:module";',
  "const require = __bridgeCreateRequire(import.meta.url);",
  "const __filename = import.meta.filename, __dirname = import.meta.dirname;",
].join(" ");

/** One file of the artifact. */
export interface ArtifactFile {
  name: string;
  /** bytes */
  bytes: number;
  /** bytes, gzip level 9 */
  gzipBytes: number;
}

/** What a build produced. */
export interface LambdaBuild {
  outdir: string;
  /** the handler module, `index.mjs` (handler string `index.handler`) */
  entry: string;
  /** size of `index.mjs`, bytes */
  bytes: number;
  /** size of `index.mjs` gzip-compressed, bytes */
  gzipBytes: number;
  /** every file written (not `meta.json`), with sizes; chunks as `chunks/NAME` */
  files: ArtifactFile[];
  /** bytes each npm package (or `(bridge)` for this repository) contributes to `index.mjs` (not the chunks), largest first */
  packages: [string, number][];
  metafile: Metafile;
}

/** Package name of a metafile input path, or `(bridge)` for this repository's own files. */
function packageOf(input: string): string {
  const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\/(?!.*node_modules\/)/.exec(input);
  return m ? m[1]! : "(bridge)";
}

/**
 * The bundled modules that refer to `__dirname` or `__filename` and are not
 * in {@link DIRNAME_USERS}.
 */
function unreviewedDirnameUsers(metafile: Metafile): string[] {
  const inputs = Object.values(metafile.outputs).flatMap((o) => Object.entries(o.inputs).filter(([, v]) => v.bytesInOutput > 0).map(([k]) => k));
  return inputs.filter((input) => {
    if (!/\.[cm]?js$/.test(input) || DIRNAME_USERS[input] !== undefined) return false;
    return /\b__(?:dirname|filename)\b/.test(readFileSync(join(ROOT, input), "utf8"));
  });
}

/**
 * Bundle the Lambda handler into `outdir` (emptied first).
 *
 * @param options.config a config file to ship as `bridge.yaml`
 * @throws Error when esbuild fails (with its messages), or when a bundled
 *   module not in {@link DIRNAME_USERS} refers to `__dirname`/`__filename`
 */
export async function buildLambda(options: { outdir: string; config?: string }): Promise<LambdaBuild> {
  if (options.config !== undefined) validateLambdaConfig(options.config);
  return bundleForNode({ ...options, source: "functions/lambda.ts", name: "index" });
}

/**
 * Validate a config file as the Lambda handler loads it (`loadConfig(text,
 * source)` with no file access: `policy.files` is refused there too).
 *
 * @throws ConfigError with every problem located; Error when unreadable
 */
export function validateLambdaConfig(path: string): void {
  loadConfig(readFileSync(path, "utf8"), path);
}

/**
 * Bundle one Node entry point the way the Lambda artifact is bundled (ES
 * modules, `splitting`, the CommonJS banner, the `__dirname` review) into
 * `outdir` (emptied first) as `<name>.mjs` plus `chunks/`. Also builds the
 * Node server's artifact (`infra/node/build.ts`).
 *
 * @param options.source the entry point, relative to the repository root
 * @param options.name the entry module's name without `.mjs`
 * @throws as {@link buildLambda}
 */
export async function bundleForNode(options: { outdir: string; config?: string; source: string; name: string }): Promise<LambdaBuild> {
  const outdir = resolve(options.outdir);
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  const entryFile = `${options.name}.mjs`;
  const entry = join(outdir, entryFile);
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [join(ROOT, options.source)],
    outdir,
    entryNames: options.name,
    chunkNames: `${CHUNK_DIR}/[name]-[hash]`,
    outExtension: { ".js": ".mjs" },
    // every dynamic import() becomes a chunk loaded only when reached
    splitting: true,
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
    banner: { js: BANNER },
  });
  const unreviewed = unreviewedDirnameUsers(result.metafile);
  if (unreviewed.length > 0) {
    rmSync(outdir, { recursive: true, force: true });
    throw new Error(
      `these bundled modules refer to __dirname/__filename, which in the bundle is the artifact's directory: ${unreviewed.join(", ")}. ` +
        "Check what they read from there; if the bridge never reads it, add them to DIRNAME_USERS in infra/lambda/build.ts with the reason.",
    );
  }
  writeFileSync(join(outdir, "meta.json"), JSON.stringify(result.metafile));
  if (options.config) copyFileSync(options.config, join(outdir, "bridge.yaml"));
  const files = readdirSync(outdir, { recursive: true, encoding: "utf8" })
    .filter((name) => name !== "meta.json" && name !== CHUNK_DIR)
    .sort()
    .map((name): ArtifactFile => {
      const data = readFileSync(join(outdir, name));
      return { name, bytes: data.length, gzipBytes: gzipSync(data, { level: 9 }).length };
    });
  const main = files.find((f) => f.name === entryFile)!;
  const sizes = new Map<string, number>();
  const entryOutput = Object.entries(result.metafile.outputs).find(([name]) => name.endsWith(`/${entryFile}`) || name === entryFile)![1];
  for (const [input, { bytesInOutput }] of Object.entries(entryOutput.inputs)) sizes.set(packageOf(input), (sizes.get(packageOf(input)) ?? 0) + bytesInOutput);
  const packages = [...sizes].sort((a, b) => b[1] - a[1]);
  return { outdir, entry, bytes: main.bytes, gzipBytes: main.gzipBytes, files, packages, metafile: result.metafile };
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
    `  packaged (${PACKAGED_FILES.join(", ")}; ${packaged.length} files): ${kib(sum("bytes"))} / gzip ${kib(sum("gzipBytes"))} (Lambda's limits: 50 MiB zipped, 250 MiB unzipped)`,
  );
  console.log(`  largest in index.mjs: ${out.packages.slice(0, 6).map(([p, n]) => `${p} ${kib(n)}`).join(", ")}`);
  if (values.config) console.log(`  config ${values.config} → bridge.yaml`);
}

if (import.meta.main) {
  try {
    await main();
  } catch (err) {
    // an invalid --config: the loader's messages, one a line, and exit 2 (as `config validate`)
    if (err instanceof ConfigError) for (const issue of err.issues) console.error(formatIssue(issue));
    else console.error((err as Error).message);
    process.exit(2);
  }
}
