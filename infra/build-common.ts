/**
 * What the builds of Node artifacts share: {@link bundleForNode}, the
 * esbuild bundling of one Node entry point into ES modules with each
 * dynamic `import()` split into a chunk of its own (the Lambda artifact,
 * `infra/lambda/build.ts`; the Node server, `infra/node/build.ts`), and the
 * review of what in the bundle refers to `__dirname`.
 *
 * **The official Google client in one bundle.** `@google-cloud/monitoring`
 * needs nothing from disk on the bridge's path: its generated
 * `MetricServiceClient` loads its service definition from `protos.json`
 * through `require()` (bundled) and `GrpcClient.loadProtoJSON`. What broke
 * a plain bundle is that three CommonJS modules of the stack compute a
 * directory from `__dirname` when they load, and an ES module has no
 * `__dirname`: loading the bundle threw `ReferenceError`. The banner below
 * gives the bundle CommonJS's `__dirname`/`__filename` (the artifact's
 * directory and the entry module). The modules that use them are listed in
 * {@link DIRNAME_USERS} with why the directory they compute is never read
 * by the bridge; the build fails if any other bundled module refers to
 * `__dirname` or `__filename`, so a dependency update that starts reading
 * files beside itself is caught here instead of on a cold start. (The
 * alternative, `external` google-gax with its `node_modules` shipped beside
 * the bundle, is about 70 packages: 31 MB on disk, 5.5 MB compressed, or
 * 20 MB / 2.4 MB without type declarations and maps, against the ≈ 0.5 MB
 * compressed the client adds to this bundle.) `test/runtimes/build.test.ts` proves
 * the result: the built Lambda artifact, in a fresh Node 24 process, reads
 * Cloud Monitoring through the official client over TLS against a gRPC
 * fake of MetricService.
 */
import { build, type Metafile } from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

/** Repository root. */
export const ROOT = fileURLToPath(new URL("../", import.meta.url));

/**
 * esbuild `define` of every Node bundle: `__EMB_VERSION__` is package.json's
 * version, the `build_info` version (shared/observability/prometheus.ts
 * `BRIDGE_VERSION`; a run from source reads package.json instead).
 */
export const VERSION_DEFINE: Readonly<Record<string, string>> = {
  __EMB_VERSION__: JSON.stringify((JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version),
};

/** The esbuild target of every Node artifact (the Lambda runtime `nodejs24.x`, the Node server's Node 24). */
export const ESBUILD_TARGET = "node24";

/** Directory of the split chunks inside the output directory. */
export const CHUNK_DIR = "chunks";

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
 * Prepended to an ES-module bundle for Node (esbuild `banner.js`): CommonJS's
 * `require` (for Node built-ins and the CommonJS modules' own `require`
 * calls), `__filename` and `__dirname`, which an ES module does not have.
 * The Lambda, Node and proxy builds and `bench:memory`'s baseline bundles use it.
 */
export const BANNER = [
  'import { createRequire as __bridgeCreateRequire } from "node:module";',
  "const require = __bridgeCreateRequire(import.meta.url);",
  "const __filename = import.meta.filename, __dirname = import.meta.dirname;",
].join(" ");

/** One file of the artifact. */
export interface ArtifactFile {
  /** path relative to the output directory, e.g. `index.mjs`, `chunks/NAME.mjs` */
  name: string;
  /** bytes */
  bytes: number;
  /** bytes, gzip level 9 */
  gzipBytes: number;
}

/** What {@link bundleForNode} produced. */
export interface NodeBundle {
  outdir: string;
  /** the entry module, `<name>.mjs` (absolute path) */
  entry: string;
  /** size of the entry module, bytes */
  bytes: number;
  /** size of the entry module gzip-compressed (level 9), bytes */
  gzipBytes: number;
  /** every file written (not `meta.json`), with sizes; chunks as `chunks/NAME` */
  files: ArtifactFile[];
  /** bytes each npm package (or `(bridge)` for this repository) contributes to the entry module (not the chunks), largest first */
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
 * Bundle one Node entry point (ES modules, `splitting`, the CommonJS
 * banner, the `__dirname` review; see the file comment) into `outdir`
 * (emptied first) as `<name>.mjs` plus `chunks/`. Builds the Lambda
 * artifact (`infra/lambda/build.ts`) and the Node server's
 * (`infra/node/build.ts`).
 *
 * @param options.source the entry point, relative to the repository root
 * @param options.name the entry module's name without `.mjs`
 * @param options.config a config file copied into `outdir` as `bridge.yaml` (not validated here)
 * @throws Error when esbuild fails (with its messages), or when a bundled
 *   module not in {@link DIRNAME_USERS} refers to `__dirname`/`__filename`
 *   (`outdir` is removed then)
 */
export async function bundleForNode(options: { outdir: string; config?: string; source: string; name: string }): Promise<NodeBundle> {
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
    define: VERSION_DEFINE,
    banner: { js: BANNER },
  });
  const unreviewed = unreviewedDirnameUsers(result.metafile);
  if (unreviewed.length > 0) {
    rmSync(outdir, { recursive: true, force: true });
    throw new Error(
      `these bundled modules refer to __dirname/__filename, which in the bundle is the artifact's directory: ${unreviewed.join(", ")}. ` +
        "Check what they read from there; if the bridge never reads it, add them to DIRNAME_USERS in infra/build-common.ts with the reason.",
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
