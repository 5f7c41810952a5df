/**
 * The repository's Worker bundle, built by wrangler once per content and
 * shared by every test file (vitest `globalSetup` of the `unit` project, and
 * `test/helpers/worker.ts`'s `buildWorker()` with default options).
 *
 * Built exactly as a deploy builds it — `wrangler deploy --dry-run --outdir
 * OUT --metafile` with the repository's `wrangler.toml`, telemetry off,
 * wrangler state inside the work tree. `--metafile` only adds
 * `bundle-meta.json` beside `worker.js`, so the one build serves both the
 * files that run the Worker and `test/runtimes/build.test.ts`, which inspects it.
 *
 * Cache: `<root>/worker-bundle/<key>/` with `<root>` as for the Go tools
 * (`$EMB_CACHE_DIR`, else `$HOME/.cache/external-metrics-bridge`;
 * infra/tools/go.ts), outside the work tree. `<key>` is the SHA-256 (first
 * 16 hex digits) of everything wrangler bundles or reads: every file under
 * `shared/` and `infra/worker/`, `functions/worker.ts`, `wrangler.toml`,
 * `tsconfig.json`, `package.json`, `package-lock.json` (the pinned wrangler,
 * esbuild and dependencies), and this file (the build's flags). Any change
 * there is a new key, so a stale bundle is never run. An entry is written
 * to a temporary directory and renamed into place, so two concurrent runs
 * never see a half-written one (the slower build is discarded). At most
 * {@link KEEP_ENTRIES} entries are kept (least recently used removed).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { toolCacheDir } from "../../infra/tools/go.ts";

const exec = promisify(execFile);

/** Repository root. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The flags of the shared build (after `deploy --dry-run --outdir OUT`). */
export const SHARED_BUILD_ARGS: readonly string[] = ["--metafile"];

/** Most cache entries kept (each ≈ 2 MB: the bundle, its source map and metafile). */
const KEEP_ENTRIES = 6;

/** What the Worker bundle is made from, relative to the repository root (directories: every file under them). */
const INPUTS = ["shared", "infra/worker", "functions/worker.ts", "wrangler.toml", "tsconfig.json", "package.json", "package-lock.json", "test/setup/worker-bundle.ts"];

/** Environment for wrangler child processes: state in the tree, no telemetry, no network lookups. */
export function wranglerEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PATH: `${join(ROOT, "node_modules/.bin")}:${process.env["PATH"] ?? ""}`,
    XDG_CONFIG_HOME: join(ROOT, ".xdg/config"),
    XDG_DATA_HOME: join(ROOT, ".xdg/data"),
    XDG_CACHE_HOME: join(ROOT, ".xdg/cache"),
    WRANGLER_SEND_METRICS: "false",
    CLOUDFLARE_CF_FETCH_ENABLED: "false",
    DO_NOT_TRACK: "1",
    CI: "true",
  };
}

/**
 * Run `wrangler deploy --dry-run --outdir outdir ...args` in `cwd`.
 *
 * @returns wrangler's stdout and stderr (its summary lines, e.g. `Total Upload: …`)
 * @throws Error with wrangler's output when the build fails
 */
export async function runWrangler(cwd: string, outdir: string, args: readonly string[]): Promise<string> {
  const all = ["deploy", "--dry-run", "--outdir", outdir, ...args];
  try {
    const r = await exec(join(ROOT, "node_modules/.bin/wrangler"), all, { cwd, env: wranglerEnv(), maxBuffer: 16 << 20 });
    return `${r.stdout}${r.stderr}`;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`wrangler ${all.join(" ")} failed:\n${e.stdout ?? ""}${e.stderr ?? e.message}`);
  }
}

/** Every file under `path` (or `path` itself), sorted, relative to the root. */
function files(path: string): string[] {
  const abs = join(ROOT, path);
  if (!existsSync(abs)) return [];
  if (!statSync(abs).isDirectory()) return [path];
  return readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => relative(ROOT, join(d.parentPath, d.name)))
    .sort();
}

/** The content key of the Worker bundle: SHA-256 of {@link INPUTS}' names and bytes, 16 hex digits. */
export function workerBundleKey(): string {
  const hash = createHash("sha256");
  for (const file of INPUTS.flatMap(files)) hash.update(file).update("\0").update(readFileSync(join(ROOT, file))).update("\0");
  return hash.digest("hex").slice(0, 16);
}

/** A cached build: wrangler's output directory and what it printed. */
export interface CachedBundle {
  /** wrangler's `--outdir` (`worker.js`, its source map, text modules, `bundle-meta.json`) */
  outdir: string;
  /** wrangler's stdout and stderr from the build */
  output: string;
}

/**
 * The cached bundle of the current sources, built now (≈ 5–10 s) when the
 * cache has none.
 *
 * @throws Error with wrangler's output when the build fails (nothing cached)
 */
export async function workerBundle(): Promise<CachedBundle> {
  const base = join(toolCacheDir(), "worker-bundle");
  const entry = join(base, workerBundleKey());
  const outdir = join(entry, "out");
  const outputFile = join(entry, "wrangler-output.txt");
  if (existsSync(outputFile)) {
    const now = new Date();
    utimesSync(entry, now, now); // recently used: kept by the pruning below
    return { outdir, output: readFileSync(outputFile, "utf8") };
  }
  mkdirSync(base, { recursive: true });
  const tmp = `${entry}.tmp-${process.pid}-${Date.now()}`;
  try {
    const output = await runWrangler(ROOT, join(tmp, "out"), SHARED_BUILD_ARGS);
    writeFileSync(join(tmp, "wrangler-output.txt"), output);
    try {
      renameSync(tmp, entry);
    } catch (err) {
      // another run cached the same key meanwhile: use theirs
      if (!existsSync(outputFile)) throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  prune(base);
  return { outdir, output: readFileSync(outputFile, "utf8") };
}

/** Keep the {@link KEEP_ENTRIES} most recently used entries; remove leftovers of killed builds older than an hour. */
function prune(base: string): void {
  const entries = readdirSync(base).map((name) => ({ path: join(base, name), name, mtime: statSync(join(base, name)).mtimeMs }));
  for (const e of entries) if (e.name.includes(".tmp-") && Date.now() - e.mtime > 3600_000) rmSync(e.path, { recursive: true, force: true });
  const done = entries.filter((e) => !e.name.includes(".tmp-")).sort((a, b) => b.mtime - a.mtime);
  for (const e of done.slice(KEEP_ENTRIES)) rmSync(e.path, { recursive: true, force: true });
}

/**
 * vitest `globalSetup`: build (or find) the bundle once, before any test
 * file starts. A failed build does not stop the run: the files that need
 * the Worker call `workerBundle()` again and fail with wrangler's output,
 * the others run as usual.
 */
export default async function setup(): Promise<void> {
  try {
    await workerBundle();
  } catch (err) {
    console.error(`the Worker bundle could not be built before the tests (the Worker's tests will report it):\n${(err as Error).message}`);
  }
}
