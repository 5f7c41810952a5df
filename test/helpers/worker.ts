/**
 * Run the bridge's Cloudflare Worker in workerd for tests.
 *
 * The Worker is built exactly as a deploy builds it — `wrangler deploy
 * --dry-run --outdir …` with the repository's `wrangler.toml` (telemetry off,
 * wrangler state inside the work tree) — and run through the Miniflare API
 * with the toml's compatibility date and flags. The repository's Worker is
 * built once per content of its sources, shared by every test file and run
 * (`test/setup/worker-bundle.ts`, the `unit` project's `globalSetup`); a
 * variant (another root, other flags) is built per call.
 * The config text is the `BRIDGE_CONFIG` binding, as a deployed Worker gets
 * it from a secret; extra bindings (e.g. `AWS_ACCESS_KEY_ID`) are string
 * bindings like Worker secrets. Outbound fetches (the AWS SDK calling a
 * fauxqs emulator on 127.0.0.1) leave workerd for real.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { Miniflare } from "miniflare";
import { ROOT, runWrangler, SHARED_BUILD_ARGS, workerBundle } from "../setup/worker-bundle.ts";

export { ROOT, wranglerEnv } from "../setup/worker-bundle.ts";

/** Output of one wrangler build. */
export interface WorkerBuild {
  /** directory holding `worker.js` (and its source map); the shared build's is read-only: never write into it */
  outdir: string;
  /** the entry module's path */
  script: string;
  compatibilityDate: string;
  compatibilityFlags: string[];
  /** the toml's `[[rules]]` as Miniflare module rules (text modules such as the bundled config) */
  modulesRules: { type: "ESModule" | "CommonJS" | "Text" | "Data" | "CompiledWasm"; include: string[]; fallthrough?: boolean }[];
  /** wrangler's own summary lines (e.g. `Total Upload: … / gzip: …`) */
  output: string;
}

let sharedBuild: Promise<WorkerBuild> | undefined;

/** Directories made by {@link buildWorker}, removed after the test file (or when a script exits). */
const builds = new Set<string>();
function removeBuilds(): void {
  for (const dir of builds) rmSync(dir, { recursive: true, force: true });
  builds.clear();
  sharedBuild = undefined;
}
process.once("exit", removeBuilds);
if (process.env["VITEST"]) {
  // vitest ends its worker processes without an `exit` event: clean up after the importing file
  const { afterAll } = await import("vitest");
  afterAll(removeBuilds);
}

/** Remove build directories an earlier, killed test process left behind (older than an hour). */
function sweepStaleBuilds(): void {
  const cache = join(ROOT, ".cache");
  if (!existsSync(cache)) return;
  for (const name of readdirSync(cache)) {
    if (!/^worker-(build|bundled)-/.test(name)) continue;
    const dir = join(cache, name);
    if (Date.now() - statSync(dir).mtimeMs > 3600_000) rmSync(dir, { recursive: true, force: true });
  }
}
sweepStaleBuilds();

/** Options of {@link buildWorker}. */
export interface BuildOptions {
  /** project directory holding `wrangler.toml` (default: the repository); must lie inside the repository so `node_modules` resolves */
  root?: string;
  /** more `wrangler deploy` flags */
  args?: string[];
}

/** Whether `options` ask for what the shared build is: the repository's Worker, no flags or exactly {@link SHARED_BUILD_ARGS}. */
function isSharedBuild(options: BuildOptions): boolean {
  if (options.root !== undefined && options.root !== ROOT) return false;
  const args = options.args ?? [];
  return args.length === 0 || (args.length === SHARED_BUILD_ARGS.length && args.every((a, i) => a === SHARED_BUILD_ARGS[i]));
}

/**
 * Build the Worker with wrangler (`deploy --dry-run --outdir`), and read the
 * toml's compatibility settings and module rules with wrangler's own config
 * reader. The repository's Worker with default options (or `--metafile`
 * alone) is the shared, content-cached build (`test/setup/worker-bundle.ts`,
 * built with `--metafile`), built here only if the cache lacks the current
 * sources; any other build goes to a fresh directory under `.cache/`,
 * removed after the test file.
 *
 * @throws Error with wrangler's output when the build fails
 */
export async function buildWorker(options: BuildOptions = {}): Promise<WorkerBuild> {
  const root = options.root ?? ROOT;
  let outdir: string;
  let output: string;
  if (isSharedBuild(options)) {
    ({ outdir, output } = await workerBundle());
  } else {
    mkdirSync(join(ROOT, ".cache"), { recursive: true });
    outdir = mkdtempSync(join(ROOT, ".cache/worker-build-"));
    builds.add(outdir);
    output = await runWrangler(root, outdir, options.args ?? []);
  }
  // wrangler's own config reader, so the run uses exactly what the deploy would
  const { experimental_readRawConfig } = await import("wrangler");
  const toml = experimental_readRawConfig({ config: join(root, "wrangler.toml") }).rawConfig as {
    compatibility_date: string;
    compatibility_flags?: string[];
    rules?: { type: WorkerBuild["modulesRules"][number]["type"]; globs: string[]; fallthrough?: boolean }[];
  };
  return {
    outdir,
    script: join(outdir, "worker.js"),
    compatibilityDate: toml.compatibility_date,
    compatibilityFlags: toml.compatibility_flags ?? [],
    modulesRules: (toml.rules ?? []).map((r) => ({ type: r.type, include: r.globs, ...(r.fallthrough !== undefined ? { fallthrough: r.fallthrough } : {}) })),
    output,
  };
}

/** The default build, made once per test process. */
function defaultBuild(): Promise<WorkerBuild> {
  sharedBuild ??= buildWorker();
  return sharedBuild;
}

/** A Worker running in workerd. */
export interface RunningWorker {
  /** base URL of the Worker on 127.0.0.1, e.g. `http://127.0.0.1:40123` (no trailing slash) */
  url: string;
  /** send `path` (with query) to the Worker over real HTTP */
  request(path: string, init?: RequestInit): Promise<Response>;
  /** Miniflare's in-process dispatch (no socket); `input` is a path or absolute URL */
  dispatchFetch(input: string, init?: RequestInit): Promise<Response>;
  /** what workerd wrote to stdout/stderr so far (the Worker's console output) */
  logs(): string;
  /** stop workerd */
  close(): Promise<void>;
  /** the underlying instance, for advanced use */
  miniflare: Miniflare;
}

/**
 * Start the Worker in workerd with `configText` as its `BRIDGE_CONFIG`
 * binding (omitted when `undefined`) and `extraBindings` as more string
 * bindings (vars/secrets).
 *
 * A Worker without `BRIDGE_SIGNING_KEYS` refuses `/apis` requests unless
 * `BRIDGE_INSECURE_ALLOW_UNSIGNED` is `true`; for tests that are not about
 * signing this helper sets `BRIDGE_INSECURE_ALLOW_UNSIGNED=true` when
 * `extraBindings` names neither. A test of the refusal passes
 * `BRIDGE_INSECURE_ALLOW_UNSIGNED: ""`.
 *
 * @param options.build a build from {@link buildWorker} (default: the repository's Worker, built once per process)
 */
export async function startWorker(
  configText: string | undefined,
  extraBindings: Record<string, string> = {},
  options: { build?: WorkerBuild } = {},
): Promise<RunningWorker> {
  const build = options.build ?? (await defaultBuild());
  const bindings: Record<string, string> = { ...extraBindings };
  if (!("BRIDGE_SIGNING_KEYS" in bindings) && !("BRIDGE_INSECURE_ALLOW_UNSIGNED" in bindings)) bindings["BRIDGE_INSECURE_ALLOW_UNSIGNED"] = "true";
  if (configText !== undefined) bindings["BRIDGE_CONFIG"] = configText;
  let captured = "";
  const capture = (stream: Readable) => {
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      captured += chunk;
      if (captured.length > 1 << 20) captured = captured.slice(-(1 << 19));
    });
  };
  const miniflare = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    cf: false,
    modules: true,
    scriptPath: build.script,
    modulesRoot: build.outdir,
    compatibilityDate: build.compatibilityDate,
    compatibilityFlags: build.compatibilityFlags,
    modulesRules: build.modulesRules,
    bindings,
    handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
      capture(stdout);
      capture(stderr);
    },
  });
  const url = (await miniflare.ready).origin;
  return {
    url,
    request: (path, init) => fetch(`${url}${path}`, init),
    dispatchFetch: (input, init) =>
      miniflare.dispatchFetch(input.startsWith("/") ? `${url}${input}` : input, init as never) as unknown as Promise<Response>,
    logs: () => captured,
    close: () => miniflare.dispose(),
    miniflare,
  };
}

/** One Worker script of {@link startWorkers}: its own isolate, string bindings and Durable Object bindings. */
export interface WorkerScript {
  name: string;
  /** string bindings (vars/secrets), e.g. `BRIDGE_CONFIG` */
  bindings: Record<string, string>;
  /** binding name → Durable Object class, in this script (a string) or another (`scriptName`) */
  durableObjects?: Record<string, string | { className: string; scriptName: string }>;
}

/** Several Worker scripts in one workerd (separate isolates), each reachable by name. */
export interface RunningWorkers {
  /** send a request to the script `name` (Miniflare's dispatch; `path` is a path) */
  fetch(name: string, path: string, init?: RequestInit): Promise<Response>;
  /** what workerd wrote to stdout/stderr so far */
  logs(): string;
  /** restart workerd with the same scripts: every isolate and Durable Object starts afresh (in-memory storage is lost) */
  restart(): Promise<void>;
  close(): Promise<void>;
  miniflare: Miniflare;
}

/**
 * Start several scripts of one build in workerd (Miniflare's `workers:`),
 * e.g. bound to one Durable Object namespace defined in one of them.
 * Every script gets `BRIDGE_INSECURE_ALLOW_UNSIGNED=true` unless it names
 * signing bindings (as {@link startWorker}).
 */
export async function startWorkers(build: WorkerBuild, scripts: readonly WorkerScript[]): Promise<RunningWorkers> {
  let captured = "";
  const capture = (stream: Readable) => {
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      captured += chunk;
      if (captured.length > 1 << 20) captured = captured.slice(-(1 << 19));
    });
  };
  const options = {
    host: "127.0.0.1",
    port: 0,
    cf: false,
    handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
      capture(stdout);
      capture(stderr);
    },
    workers: scripts.map((s) => {
      const bindings = { ...s.bindings };
      if (!("BRIDGE_SIGNING_KEYS" in bindings) && !("BRIDGE_INSECURE_ALLOW_UNSIGNED" in bindings)) bindings["BRIDGE_INSECURE_ALLOW_UNSIGNED"] = "true";
      return {
        name: s.name,
        modules: true,
        scriptPath: build.script,
        modulesRoot: build.outdir,
        compatibilityDate: build.compatibilityDate,
        compatibilityFlags: build.compatibilityFlags,
        modulesRules: build.modulesRules,
        bindings,
        ...(s.durableObjects !== undefined ? { durableObjects: s.durableObjects } : {}),
      };
    }),
  };
  const miniflare = new Miniflare(options);
  await miniflare.ready;
  return {
    fetch: async (name, path, init) => {
      const w = (await miniflare.getWorker(name)) as unknown as { fetch(input: string, init?: RequestInit): Promise<Response> };
      return w.fetch(`http://localhost${path}`, init);
    },
    logs: () => captured,
    restart: async () => {
      await miniflare.setOptions(options);
    },
    close: () => miniflare.dispose(),
    miniflare,
  };
}
