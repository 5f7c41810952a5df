/**
 * Build the in-cluster proxy as ES modules: `functions/proxy/main.ts` and
 * everything it imports (Hono, prom-client, zod, yaml, re2js, commander)
 * bundled by esbuild for Node 24
 * into `main.mjs` (plus shared chunks it imports statically), and — split
 * off with esbuild's `splitting` — the in-process bridge
 * (`shared/proxy/forward/in-process.ts`: the bridge's providers and cloud SDKs) in
 * chunks loaded only by the dynamic `import()` of an `inProcess` backend.
 * The container image (`infra/Dockerfile`) ships this directory: no
 * `node_modules`. A proxy without an `inProcess` backend never reads the
 * bridge's chunks; its footprint is that of the statically loaded files.
 * A second entry point, `x509-worker.mjs` (shared/proxy/tls/x509-worker.ts), is
 * the worker thread that makes certificates with @peculiar/x509
 * (shared/proxy/tls/cert-generation.ts): the library sits only in it and the
 * chunks it imports, never in what the main thread loads (issue 11 P5). A
 * third, `policy-worker.mjs` (shared/proxy/policy/policy-worker-entry.ts), is the
 * thread that decides admission reviews and vets policy objects within a CPU
 * budget (shared/proxy/policy/policy-worker.ts).
 *
 *   node infra/proxy/build.ts [--outdir dist/proxy]
 *
 * Prints the sizes (raw and gzip) of what the plain proxy loads and of the
 * in-process bridge's chunks, and the packages that weigh most.
 *
 * @throws Error (exit 1) when the files the plain proxy loads would contain
 *   a module it must not depend on ({@link FORBIDDEN}): a cloud SDK, the
 *   bridge's providers, or the bridge's config loader that imports them.
 */
import { build, type Metafile } from "esbuild";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { BANNER, VERSION_DEFINE } from "../build-common.ts";

/** Repository root. */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Input paths (as esbuild's metafile names them) the proxy bundle must never contain. */
export const FORBIDDEN: readonly RegExp[] = [
  /node_modules\/@aws-sdk\//,
  /node_modules\/@smithy\//,
  /node_modules\/@google-cloud\//,
  /node_modules\/google-gax\//,
  /node_modules\/@grpc\//,
  /node_modules\/protobufjs\//,
  /^shared\/providers\//,
  /^shared\/config\/config\.ts$/,
  // issue 11 P5: +83 MiB / +29 MiB of RSS at import; the proxy has its own client (shared/proxy/kube/client.ts)
  /node_modules\/@kubernetes\/client-node\//,
  /node_modules\/undici\//,
  // issue 11 P5: @peculiar/x509 and what it needs, ~9 MB of RSS: only in the certificate worker (x509-worker.mjs) or a dynamic import()
  /node_modules\/@peculiar\//,
  /node_modules\/reflect-metadata\//,
  /node_modules\/tsyringe\//,
  /node_modules\/asn1js\//,
];

/**
 * The Node flags the container runs the bundle with: the `ENTRYPOINT` of
 * infra/Dockerfile between the node binary and the bundle, read from the
 * Dockerfile itself so tests start the bundle exactly as the image does.
 *
 * @throws Error when the Dockerfile has no exec-form ENTRYPOINT running node on main.mjs
 */
export function imageNodeFlags(): string[] {
  const dockerfile = readFileSync(join(ROOT, "infra/Dockerfile"), "utf8");
  const m = /^ENTRYPOINT (\[.*\])\s*$/m.exec(dockerfile);
  const argv = m ? (JSON.parse(m[1]!) as string[]) : [];
  if (argv.length < 2 || !argv[0]!.endsWith("/node") || !argv.at(-1)!.endsWith("/main.mjs")) {
    throw new Error("infra/Dockerfile: expected ENTRYPOINT [\"…/node\", …flags, \"…/main.mjs\"]");
  }
  return argv.slice(1, -1);
}

/**
 * The environment the container sets for the bundle: the `ENV KEY=VALUE …`
 * lines of infra/Dockerfile's final stage (e.g. `NODE_ENV=production`,
 * `MALLOC_ARENA_MAX=2`), read from the Dockerfile itself so tests and
 * benchmarks start the bundle as the image does (with {@link imageNodeFlags}).
 *
 * @returns variable → value, in the Dockerfile's order
 * @throws Error when an ENV line of the final stage is not `KEY=VALUE` pairs
 *   without quotes (the only form this reader understands)
 */
export function imageEnv(): Record<string, string> {
  const dockerfile = readFileSync(join(ROOT, "infra/Dockerfile"), "utf8");
  const finalStage = dockerfile.split(/^FROM /m).at(-1)!;
  const env: Record<string, string> = {};
  for (const m of finalStage.matchAll(/^ENV (.*)$/gm)) {
    for (const pair of m[1]!.trim().split(/\s+/)) {
      const kv = /^([A-Za-z_][A-Za-z0-9_]*)=([^"'\s]*)$/.exec(pair);
      if (kv === null) throw new Error(`infra/Dockerfile: expected ENV KEY=VALUE pairs without quotes, got "ENV ${m[1]}"`);
      env[kv[1]!] = kv[2]!;
    }
  }
  return env;
}

/** What {@link buildProxy} produced. */
export interface ProxyBuild {
  /** the entry module's path (`outdir/main.mjs`) */
  file: string;
  /** the output directory (ship all of it) */
  outdir: string;
  /** bytes of the files the plain proxy loads: `main.mjs` and the chunks it imports statically */
  bytes: number;
  gzipBytes: number;
  /** every input bundled into the files the plain proxy loads (repository-relative or under node_modules) */
  inputs: string[];
  /** bytes of bundled input per npm package in those files, largest first */
  packages: [string, number][];
  /** the files (names in outdir) the plain proxy loads */
  staticFiles: string[];
  /**
   * what only a dynamic `import()` loads — an `inProcess` backend (the
   * in-process bridge), or a client certificate chain with intermediates
   * (shared/proxy/authn/client-cert-chain.ts): files (names in outdir), bytes, gzip bytes, inputs
   */
  lazy: { files: string[]; bytes: number; gzipBytes: number; inputs: string[] };
  /**
   * the certificate worker's entry (`x509-worker.mjs`) and the chunks it
   * imports statically (some may be shared with the main thread's files):
   * loaded only inside a generation worker thread; ship them with main.mjs
   */
  worker: { file: string; files: string[]; inputs: string[] };
  /**
   * the policy worker's entry (`policy-worker.mjs`, shared/proxy/policy/policy-worker-entry.ts:
   * admission reviews and policy objects off the request loop) and the chunks
   * it imports statically; ship them with main.mjs
   */
  policyWorker: { file: string; files: string[]; inputs: string[] };
}

/**
 * Bundle the proxy into `outdir/main.mjs`.
 *
 * @throws Error when esbuild fails or a {@link FORBIDDEN} input is bundled
 */
export async function buildProxy(outdir = join(ROOT, "dist/proxy")): Promise<ProxyBuild> {
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  const file = join(outdir, "main.mjs");
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: { main: "functions/proxy/main.ts", "x509-worker": "shared/proxy/tls/x509-worker.ts", "policy-worker": "shared/proxy/policy/policy-worker-entry.ts" },
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node24",
    outdir,
    outExtension: { ".js": ".mjs" },
    chunkNames: "chunks/[name]-[hash]",
    metafile: true,
    legalComments: "linked",
    logLevel: "warning",
    define: VERSION_DEFINE,
    // CommonJS dependencies bundled into an ES module still call require() for
    // Node built-ins; three CommonJS modules of the Google client (in the
    // in-process bridge's chunks) compute a directory from __dirname when they
    // load and never read it on the bridge's path (see infra/lambda/build.ts DIRNAME_USERS).
    banner: { js: BANNER },
  });
  const outputs = result.metafile.outputs;
  for (const key of Object.keys(outputs)) if (key.endsWith(".mjs")) asciiOnly(resolve(ROOT, key));
  const rel = (abs: string) => relative(outdir, resolve(ROOT, abs));
  const mainKey = Object.keys(outputs).find((k) => rel(k) === "main.mjs")!;
  const workerKey = Object.keys(outputs).find((k) => rel(k) === "x509-worker.mjs")!;
  const policyWorkerKey = Object.keys(outputs).find((k) => rel(k) === "policy-worker.mjs")!;
  // Follow static imports only: what Node loads before main.mjs runs.
  const visit = (key: string, loaded: Set<string>) => {
    if (loaded.has(key)) return loaded;
    loaded.add(key);
    for (const i of outputs[key]!.imports) if (i.kind === "import-statement" && outputs[i.path] !== undefined) visit(i.path, loaded);
    return loaded;
  };
  const loaded = visit(mainKey, new Set());
  const workerLoaded = visit(workerKey, new Set());
  const policyWorkerLoaded = visit(policyWorkerKey, new Set());
  const code = Object.keys(outputs).filter((k) => k.endsWith(".mjs"));
  const staticKeys = code.filter((k) => loaded.has(k));
  const workerKeys = code.filter((k) => workerLoaded.has(k));
  const policyWorkerKeys = code.filter((k) => policyWorkerLoaded.has(k));
  const lazyKeys = code.filter((k) => !loaded.has(k) && !workerLoaded.has(k) && !policyWorkerLoaded.has(k));
  const inputsOf = (keys: string[]) => [...new Set(keys.flatMap((k) => Object.entries(outputs[k]!.inputs).filter(([, v]) => v.bytesInOutput > 0).map(([i]) => i)))];
  const inputs = inputsOf(staticKeys);
  const bad = inputs.filter((i) => FORBIDDEN.some((re) => re.test(i)));
  if (bad.length > 0) throw new Error(`the proxy bundle must not contain these modules (cloud SDKs or bridge providers):\n  ${bad.slice(0, 20).join("\n  ")}`);
  const sizes = (keys: string[]) => {
    const data = keys.map((k) => readFileSync(resolve(ROOT, k)));
    return { bytes: data.reduce((n, d) => n + d.length, 0), gzipBytes: data.reduce((n, d) => n + gzipSync(d).length, 0) };
  };
  return {
    file,
    outdir,
    ...sizes(staticKeys),
    inputs,
    packages: packageSizes(outputs, staticKeys),
    staticFiles: staticKeys.map(rel),
    lazy: { files: lazyKeys.map(rel), ...sizes(lazyKeys), inputs: inputsOf(lazyKeys) },
    worker: { file: join(outdir, "x509-worker.mjs"), files: workerKeys.map(rel), inputs: inputsOf(workerKeys) },
    policyWorker: { file: join(outdir, "policy-worker.mjs"), files: policyWorkerKeys.map(rel), inputs: inputsOf(policyWorkerKeys) },
  };
}

/**
 * Rewrite `file` with every non-ASCII character as a `\uXXXX` escape (UTF-16
 * code units). esbuild already writes strings, regular expressions and
 * identifiers in ASCII (its default `charset`), but keeps the comments it
 * keeps (JSDoc of class members) as written, and one `→` or `—` in them is
 * enough for V8 to hold the whole script source — kept for lazy compilation
 * — as two bytes a character (issue 11 P5: main.mjs, ~1.2 M characters, was
 * ~2.4 MB of heap instead of ~1.2). Only comments are left to change, where
 * an escape is plain text.
 */
function asciiOnly(file: string): void {
  const text = readFileSync(file, "utf8");
  if (!/[^\x00-\x7f]/.test(text)) return;
  writeFileSync(file, text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`));
}

function packageSizes(outputs: Metafile["outputs"], keys: string[]): [string, number][] {
  const sizes = new Map<string, number>();
  for (const key of keys) {
    for (const [path, input] of Object.entries(outputs[key]!.inputs)) {
      const name = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1] ?? "(project)";
      sizes.set(name, (sizes.get(name) ?? 0) + input.bytesInOutput);
    }
  }
  return [...sizes].sort((a, b) => b[1] - a[1]);
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { outdir: { type: "string", default: "dist/proxy" }, help: { type: "boolean", short: "h" } } });
  if (values.help) {
    console.log("usage: node infra/proxy/build.ts [--outdir dist/proxy]\nBundles functions/proxy/main.ts into <outdir>/main.mjs for the container image.");
    process.exit(0);
  }
  try {
    const out = await buildProxy(resolve(values.outdir));
    const kib = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
    console.log(`${out.file} and the ${out.staticFiles.length - 1} chunks it imports: ${kib(out.bytes)} (gzip ${kib(out.gzipBytes)})`);
    console.log(`in-process bridge (loaded only for an inProcess backend): ${out.lazy.files.length} chunks, ${kib(out.lazy.bytes)} (gzip ${kib(out.lazy.gzipBytes)})`);
    console.log(`certificate worker (loaded only in a generation worker thread): x509-worker.mjs and ${out.worker.files.length - 1} chunks`);
    console.log("largest inputs by package:");
    for (const [name, bytes] of out.packages.slice(0, 8)) console.log(`  ${name.padEnd(28)} ${kib(bytes)}`);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
