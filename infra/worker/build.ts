/**
 * Build the Cloudflare Worker with only the providers a config uses.
 *
 *   node infra/worker/build.ts [--providers aws-sqs,…] [--config FILE [--json]] [--all] [--outdir dist/worker] [-- WRANGLER_ARGS…]
 *   node infra/worker/build.ts --help
 *
 * Arguments are parsed by commander (`functions/script-args.ts`, as the
 * Lambda build): a usage error exits 2, and relative `--config` and
 * `--outdir` paths are resolved against the directory `npm run` was typed
 * in when run by an npm script, else the working directory (`callerPath`).
 *
 * `npm run build:worker` (plain `wrangler deploy --dry-run`) bundles every
 * provider (wrangler.toml `[alias]` → `infra/worker/providers.ts`), which a
 * Worker whose config comes from the `BRIDGE_CONFIG` secret needs: the
 * secret is not known at build time. This script bundles a table of only
 * the chosen providers instead, so the others' code (their cloud clients)
 * is not in the script at all; a config naming another provider is then
 * answered with a 500 Status saying the provider is not in this build. The
 * set is, first found:
 * 1. `--providers LIST` (comma-separated types, e.g. `aws-sqs`);
 * 2. `--config FILE` — the types of the config's `providers:` (validated
 *    here: an invalid config fails the build with its located messages);
 * 3. the config bundled in `infra/worker/bridge.yaml`, if it holds one;
 * 4. every provider (`--all` forces this).
 * When the set comes from a config (2, 3) that has no provider with
 * `sharedCache: { type: durableObject }`, the shared read tier is left out
 * too (`infra/worker/no-durable-object-tier.ts`: the `SeriesTier` class
 * wrangler.toml binds is still exported, and serves nothing).
 *
 * `--json` bundles the config too, converted to JSON here (from `--config
 * FILE`, else `infra/worker/bridge.yaml`), and replaces the `yaml` package
 * with a JSON-only stand-in (`infra/worker/json-yaml.ts`): the YAML parser
 * (31 KiB gzip) is not in the script. Such a Worker serves the bundled config,
 * or a `BRIDGE_CONFIG` binding written in JSON; a YAML binding is a 500
 * Status saying so.
 *
 * It writes the table (`infra/tools/provider-tables.ts` `providerTable`, as
 * the committed `infra/worker/providers.ts`) to
 * `.cache/worker-build/providers-<types>.ts` and runs
 * `wrangler deploy --dry-run --outdir OUTDIR --alias
 * ./provider-loaders.ts:<table>` with telemetry off and wrangler's state in
 * the work tree; arguments after `--` go to wrangler (e.g. `--metafile`).
 * To deploy, run `wrangler deploy --alias ./provider-loaders.ts:<table>`
 * with the table path it prints. Prints wrangler's own size line.
 *
 *   node infra/worker/build.ts --check [--config FILE]
 *
 * only validates the config the Worker would bundle (`infra/worker/bridge.yaml`,
 * or FILE) as `functions/worker.ts` loads it (`loadConfig(text, source)`), and
 * exits 2 with the loader's located messages when it is invalid
 * (`functions/config-check.ts`, as `config validate` and the Lambda build;
 * so does a build with an invalid config). The config is parsed once,
 * whatever the options (`--json` converts the parsed documents). `npm run
 * build:worker` runs it first (`prebuild:worker` in package.json), so plain
 * `wrangler deploy --dry-run` never packages a config the Worker would refuse.
 */
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import type { BridgeConfig } from "../../shared/config/config.ts";
import { ConfigError } from "../../shared/config/yaml.ts";
import { PROVIDER_TYPES } from "../../shared/providers/provider-list.ts";
import { checkBridgeConfig, checkBridgeConfigFile, INVALID_CONFIG_EXIT, printConfigIssues, type ConfigCheck } from "../../functions/config-check.ts";
import { callerPath, parseOrExit } from "../../functions/script-args.ts";
import { ROOT } from "../build-common.ts";
import { flavourTable, providerTable } from "../tools/provider-tables.ts";

const exec = promisify(execFile);

/** The import specifier `shared/providers/registry.ts` loads its table from; the alias key. */
export const TABLE_SPECIFIER = "./provider-loaders.ts";

/** The import specifier `shared/providers/prometheus/index.ts` loads its flavour table from; the alias key of a `flavourTable` (infra/tools/provider-tables.ts). */
export const FLAVOURS_SPECIFIER = "./flavours.ts";

/** The `prometheus` flavours other than `generic` a validated config uses, sorted, each once. */
export function flavoursOf(config: BridgeConfig): string[] {
  const flavours = Object.values(config.providers).flatMap((p) => {
    const flavour = p.type === "prometheus" ? (p.config as { flavour?: string }).flavour : undefined;
    return flavour !== undefined && flavour !== "generic" ? [flavour] : [];
  });
  return [...new Set(flavours)].sort();
}

/** The import specifier `functions/worker.ts` loads the shared read tier from; a build for a config without it aliases it to `infra/worker/no-durable-object-tier.ts`. */
export const TIER_SPECIFIER = "../shared/cache/durable-object-tier.ts";

/** Whether a validated config has a provider with `sharedCache: { type: durableObject }` (the Worker's shared read tier). */
export function usesDurableObjectTier(config: BridgeConfig): boolean {
  return Object.values(config.providers).some((p) => p.sharedCache?.type === "durableObject");
}

/** The import specifier `functions/worker.ts` reads the bundled config text from. */
export const BUNDLED_CONFIG_SPECIFIER = "../infra/worker/bridge.yaml";

/**
 * A module whose default export is the config `text` (YAML) as JSON text:
 * one document as its value, several as an array (what
 * `infra/worker/json-yaml.ts` reads back).
 *
 * @throws ConfigError when the config is invalid
 */
export function jsonConfigModule(text: string, source: string): string {
  return jsonModuleOf(validCheck(checkBridgeConfig(text, source)));
}

/** {@link jsonConfigModule} of a config checked already (`functions/config-check.ts`): its parsed documents, not parsed again. @throws ConfigError when it is invalid */
export function jsonModuleOf(check: ConfigCheck): string {
  const values = validCheck(check).documents!.map((d) => d.value);
  const json = JSON.stringify(values.length === 1 ? values[0] : values);
  return `// Written by infra/worker/build.ts --json from ${JSON.stringify(check.source)}.\nexport default ${JSON.stringify(json)};\n`;
}

/** `check` when its config is valid. @throws ConfigError with its issues otherwise */
function validCheck(check: ConfigCheck): ConfigCheck & { config: BridgeConfig } {
  if (check.config === undefined) throw new ConfigError(check.issues);
  return check as ConfigCheck & { config: BridgeConfig };
}

/**
 * The provider types used by the config text `text` (validated).
 *
 * @throws ConfigError when the config is invalid (every problem, located)
 */
export function providersOfConfig(text: string, source: string): string[] {
  return providersOf(validCheck(checkBridgeConfig(text, source)).config);
}

/** The provider types a validated config uses, sorted, each once. */
export function providersOf(config: BridgeConfig): string[] {
  return [...new Set(Object.values(config.providers).map((p) => p.type))].sort();
}

/** What {@link buildWorker} produced. */
export interface WorkerBuildResult {
  /** the provider types bundled */
  providers: string[];
  /** the table file passed to wrangler's `--alias` */
  table: string;
  /** every `--alias` passed to wrangler (`specifier:path`), for the deploy command */
  aliases: string[];
  /** the directory holding `worker.js` */
  outdir: string;
  /** wrangler's `Total Upload: … / gzip: …` line */
  sizeLine: string;
  /** wrangler's gzip figure, bytes (KiB as wrangler prints it × 1024) */
  gzipBytes: number;
}

/**
 * Bundle the Worker with the providers `types` (all of {@link PROVIDER_TYPES} when undefined).
 *
 * @param options.outdir where wrangler writes `worker.js`
 * @param options.wranglerArgs extra arguments for `wrangler deploy --dry-run`
 * @throws Error with wrangler's output when the build fails
 */
export async function buildWorker(options: {
  types?: readonly string[];
  outdir: string;
  wranglerArgs?: readonly string[];
  /** bundle this config as JSON and leave the YAML parser out (see the file comment): its text, or the check of it (`functions/config-check.ts`, not parsed again) */
  jsonConfig?: { text: string; source: string } | ConfigCheck;
  /** the `prometheus` flavours to bundle besides `generic` (default: those of `jsonConfig` when given, else every flavour) */
  flavours?: readonly string[];
  /** bundle the shared read tier (`sharedCache: { type: durableObject }`; default: whether `jsonConfig` uses it when given, else true) */
  durableObjectTier?: boolean;
}): Promise<WorkerBuildResult> {
  const types = [...(options.types ?? PROVIDER_TYPES)];
  const dir = join(ROOT, ".cache/worker-build");
  mkdirSync(dir, { recursive: true });
  const table = join(dir, `providers-${types.length > 0 ? types.join("+") : "none"}.ts`);
  writeFileSync(table, providerTable(types, dir));
  const aliases = [`${TABLE_SPECIFIER}:${table}`];
  const json = options.jsonConfig;
  const flavours = options.flavours ?? (json === undefined ? undefined : flavoursOf(validCheck("text" in json ? checkBridgeConfig(json.text, json.source) : json).config));
  if (flavours !== undefined && types.includes("prometheus")) {
    const flavourFile = join(dir, `prometheus-flavours-${flavours.join("+") || "generic"}.ts`);
    writeFileSync(flavourFile, flavourTable(flavours, dir));
    aliases.push(`${FLAVOURS_SPECIFIER}:${flavourFile}`);
  }
  const tier = options.durableObjectTier ?? (json === undefined ? true : usesDurableObjectTier(validCheck("text" in json ? checkBridgeConfig(json.text, json.source) : json).config));
  if (!tier) aliases.push(`${TIER_SPECIFIER}:${join(ROOT, "infra/worker/no-durable-object-tier.ts")}`);
  if (json !== undefined) {
    const configModule = join(dir, `config-${types.join("+") || "none"}.json.ts`);
    writeFileSync(configModule, "text" in json ? jsonConfigModule(json.text, json.source) : jsonModuleOf(json));
    aliases.push(`${BUNDLED_CONFIG_SPECIFIER}:${configModule}`, `yaml:${join(ROOT, "infra/worker/json-yaml.ts")}`);
  }
  const args = ["deploy", "--dry-run", "--outdir", options.outdir, ...aliases.flatMap((a) => ["--alias", a]), ...(options.wranglerArgs ?? [])];
  const env = {
    ...process.env,
    PATH: `${join(ROOT, "node_modules/.bin")}:${process.env["PATH"] ?? ""}`,
    WRANGLER_SEND_METRICS: "false",
    XDG_CONFIG_HOME: process.env["XDG_CONFIG_HOME"] ?? join(ROOT, ".xdg/config"),
  };
  let output: string;
  try {
    const r = await exec(join(ROOT, "node_modules/.bin/wrangler"), args, { cwd: ROOT, env, maxBuffer: 16 << 20 });
    output = r.stdout + r.stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`wrangler failed: ${e.message}\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
  const sizeLine = /Total Upload: [\d.]+ KiB \/ gzip: ([\d.]+) KiB/.exec(output);
  if (sizeLine === null) throw new Error(`wrangler printed no size line:\n${output}`);
  return { providers: types, table, aliases, outdir: options.outdir, sizeLine: sizeLine[0], gzipBytes: Math.round(Number(sizeLine[1]) * 1024) };
}

/** The options of the command line (paths absolute or relative to the working directory). */
export interface WorkerBuildOptions {
  providers?: string;
  config?: string;
  all?: boolean;
  json?: boolean;
  check?: boolean;
}

/** What a build from the command line bundles (see the file comment for the order of the sources). */
export interface WorkerBuildPlan {
  /** the config file read (`--config`, else `infra/worker/bridge.yaml`), as printed: relative to the repository root */
  shown: string;
  /** the provider types to bundle; undefined: every provider (with `--check`: the file holds no config) */
  types?: string[];
  /** the `prometheus` flavours to bundle (besides `generic`) when the types come from a config; undefined: every flavour */
  flavours?: string[];
  /** where {@link types} came from, as printed */
  why: string;
  /** whether to bundle the shared read tier when the types come from a config (whether it uses `sharedCache: { type: durableObject }`); undefined: bundled */
  durableObjectTier?: boolean;
  /** the config to bundle as JSON (`--json`), checked: its parsed documents are converted, not parsed again */
  jsonConfig?: ConfigCheck;
}

/**
 * Decide what to bundle from the command line's options: reads and parses
 * the config (once, `functions/config-check.ts`) only when the options need
 * it, and validates it.
 *
 * @throws ConfigError when the config is invalid or unreadable (the caller
 *   prints it and exits 2); Error when `--json` has no config to bundle
 */
export function planWorkerBuild(values: WorkerBuildOptions): WorkerBuildPlan {
  const configPath = values.config ?? join(ROOT, "infra/worker/bridge.yaml");
  const shown = relative(ROOT, configPath) || configPath;
  const needed = values.check === true || values.json === true || (values.all !== true && values.providers === undefined);
  const check = needed ? checkBridgeConfigFile(configPath) : undefined;
  const empty = check?.documents?.length === 0;
  if (values.check) return empty ? { shown, why: "--check" } : { shown, types: providersOf(validCheck(check!).config), why: "--check" };
  let types: string[] | undefined;
  let why: string;
  if (values.all) [types, why] = [undefined, "--all"];
  else if (values.providers !== undefined) [types, why] = [values.providers.split(",").map((t) => t.trim()).filter((t) => t !== ""), "--providers"];
  else if (empty && values.config === undefined) [types, why] = [undefined, "no bundled config: every provider"];
  else [types, why] = [providersOf(validCheck(check!).config), shown];
  const fromConfig = why === shown;
  const flavours = fromConfig ? { flavours: flavoursOf(validCheck(check!).config), durableObjectTier: usesDurableObjectTier(validCheck(check!).config) } : {};
  if (!values.json) return { shown, ...(types !== undefined ? { types } : {}), ...flavours, why };
  if (empty) throw new Error(`--json needs a config: --config FILE, or one in ${shown}`);
  return { shown, ...(types !== undefined ? { types } : {}), ...flavours, why, jsonConfig: validCheck(check!) };
}

async function main(): Promise<void> {
  const { Command } = await import("commander");
  const program = new Command("node infra/worker/build.ts")
    .description("Bundle the Cloudflare Worker (wrangler deploy --dry-run) with only the providers a config uses; or, with --check, only validate the config it would bundle.")
    .option("--providers <types>", `comma-separated provider types to bundle (known: ${PROVIDER_TYPES.join(", ")})`)
    .option("--config <file>", "a bridge config: its providers are bundled (validated first; default: infra/worker/bridge.yaml when it holds one)")
    .option("--all", "bundle every provider")
    .option("--json", "bundle the config (--config, else infra/worker/bridge.yaml) as JSON and leave the YAML parser out")
    .option("--check", "only validate the config the Worker would bundle (--config, else infra/worker/bridge.yaml)")
    .option("--outdir <dir>", "where wrangler writes worker.js", join(ROOT, "dist/worker"))
    .argument("[wrangler-args...]", "after --: arguments for wrangler deploy --dry-run (e.g. -- --metafile)")
    .addHelpText("after", "\nRelative paths are resolved against the directory npm was run from (else the working directory). Exit 2: an invalid config (wrangler is not run) or bad arguments.");
  parseOrExit(program);
  const values = program.opts<WorkerBuildOptions & { outdir: string }>();
  const plan = planWorkerBuild({ ...values, ...(values.config !== undefined ? { config: callerPath(values.config) } : {}) });
  if (values.check) {
    console.log(`${plan.shown}: ${plan.types === undefined ? "no config bundled (the Worker reads its BRIDGE_CONFIG binding)" : `valid BridgeConfig (providers ${plan.types.join(", ")})`}`);
    return;
  }
  const { types, why, jsonConfig, flavours, durableObjectTier } = plan;
  const wranglerArgs = program.args;
  const out = await buildWorker({
    ...(types !== undefined ? { types } : {}),
    ...(flavours !== undefined ? { flavours } : {}),
    ...(durableObjectTier !== undefined ? { durableObjectTier } : {}),
    outdir: callerPath(values.outdir),
    wranglerArgs,
    ...(jsonConfig !== undefined ? { jsonConfig } : {}),
  });
  console.log(`Worker with providers ${out.providers.join(", ")} (${why})${jsonConfig ? `, config ${plan.shown} bundled as JSON, no YAML parser` : ""}: ${out.outdir}`);
  console.log(`  ${out.sizeLine}`);
  const aliases = out.aliases.map((a) => {
    const at = a.indexOf(":");
    return `--alias ${a.slice(0, at)}:./${relative(ROOT, a.slice(at + 1))}`;
  });
  console.log(`  provider table: ${relative(ROOT, out.table)}; deploy with: npx wrangler deploy ${aliases.join(" ")}`);
}

if (import.meta.main) {
  try {
    await main();
  } catch (err) {
    // an invalid config: the loader's messages, one a line, exit 2 (functions/config-check.ts, as `config validate`)
    if (err instanceof ConfigError) process.exit(printConfigIssues(err.issues));
    console.error((err as Error).message);
    process.exit(INVALID_CONFIG_EXIT);
  }
}
