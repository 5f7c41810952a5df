/**
 * Build the in-cluster proxy as one ES module: `functions/proxy/main.ts` and
 * everything it imports (Hono, @kubernetes/client-node, @peculiar/x509,
 * prom-client, zod, yaml, re2js, commander) bundled by esbuild for Node 24.
 * The container image (`infra/Dockerfile`) ships only this file: no
 * `node_modules`, and none of the bridge's cloud SDKs, which the proxy
 * never uses.
 *
 *   node infra/proxy/build.ts [--outdir dist/proxy]
 *
 * Prints the bundle's size (raw and gzip) and the packages that weigh most.
 *
 * @throws Error (exit 1) when the bundle would contain a module the proxy
 *   must not depend on ({@link FORBIDDEN}): a cloud SDK, the bridge's
 *   providers, or the bridge's config loader that imports them.
 */
import { build, type Metafile } from "esbuild";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";

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

/** What {@link buildProxy} produced. */
export interface ProxyBuild {
  /** the bundle's path */
  file: string;
  bytes: number;
  gzipBytes: number;
  /** every bundled input path (repository-relative or under node_modules) */
  inputs: string[];
  /** bytes of bundled input per npm package, largest first */
  packages: [string, number][];
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
    entryPoints: ["functions/proxy/main.ts"],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    outfile: file,
    metafile: true,
    legalComments: "linked",
    logLevel: "warning",
    // CommonJS dependencies bundled into an ES module still call require() for Node built-ins.
    banner: { js: "import { createRequire as __emb_createRequire } from 'node:module'; const require = __emb_createRequire(import.meta.url);" },
  });
  const inputs = Object.keys(result.metafile.inputs);
  const bad = inputs.filter((i) => FORBIDDEN.some((re) => re.test(i)));
  if (bad.length > 0) throw new Error(`the proxy bundle must not contain these modules (cloud SDKs or bridge providers):\n  ${bad.slice(0, 20).join("\n  ")}`);
  const raw = readFileSync(file);
  return { file, bytes: raw.length, gzipBytes: gzipSync(raw).length, inputs, packages: packageSizes(result.metafile) };
}

function packageSizes(metafile: Metafile): [string, number][] {
  const sizes = new Map<string, number>();
  for (const [path, input] of Object.entries(metafile.inputs)) {
    const name = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1] ?? "(project)";
    sizes.set(name, (sizes.get(name) ?? 0) + input.bytes);
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
    console.log(`${out.file}: ${kib(out.bytes)} (gzip ${kib(out.gzipBytes)})`);
    console.log("largest inputs by package:");
    for (const [name, bytes] of out.packages.slice(0, 8)) console.log(`  ${name.padEnd(28)} ${kib(bytes)}`);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
