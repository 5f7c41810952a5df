/**
 * `npm run bench`: runs every benchmark script, writes docs/benchmarks.md's
 * generated sections and docs/bench/*.svg, and checks ratios for regressions.
 *
 *   npm run bench [-- --only latency,memory] [-- --quick] [-- --update-reference]
 *
 * 1. Each script of {@link SCRIPTS} runs as a child process (`npm run
 *    --silent <script>`) with `BENCH_REPORT_DIR` set to its own temporary
 *    directory (the contract of test/bench/report.ts), `BENCH_QUICK=1` with
 *    `--quick` (short durations: a smoke run whose figures mean nothing), and
 *    wrangler's state kept in the tree (`XDG_CONFIG_HOME`, `XDG_DATA_HOME`).
 *    Its output goes to a log file; the end of it is printed when it fails.
 *    A script that is not an npm script is "missing"; one that exits non-zero
 *    or writes a malformed report "failed". Either fails the run.
 * 2. Each report is kept as docs/bench/<bench>.json and its figures drawn as
 *    docs/bench/<figure>.svg (test/bench/plot.ts). docs/benchmarks.md gets
 *    the goal table (every goal row of every kept report, so a run with
 *    `--only` updates its scripts and keeps the others' last figures), the
 *    outcome of this run and the regression check between
 *    `<!-- bench:goals:begin -->`/`end`, and each script's rows, notes and
 *    figures between `<!-- bench:<bench>:begin -->`/`end` (appended as a new
 *    section when absent); the hand-written text around them stays.
 * 3. Regression check (test/bench/regression.ts): the ratios of this run's
 *    rows against test/bench/reference-ratios.json, margin 2 (a "higher is
 *    better" ratio below reference / 2, a "lower" one above reference × 2).
 *    A regression exits 1 with the list (with `--quick` it is printed but
 *    does not fail: short runs are noise). `--update-reference` rewrites the
 *    references of the rows measured in this run instead.
 *
 * Options: `--only a,b` (script names with or without `bench:`), `--quick`,
 * `--update-reference`, `--no-docs` (run and check, write nothing under docs/).
 */
import { spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { figureSvg } from "./plot.ts";
import { compareRatios, describeRegressions, updatedReference, type Comparison, type ReferenceFile } from "./regression.ts";
import { goalTable, outcomeTable, replaceBetween, reportSection, type ScriptOutcome } from "./render.ts";
import type { BenchReport } from "./report.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const DOC = join(ROOT, "docs/benchmarks.md");
const FIGURES = join(ROOT, "docs/bench");
const REFERENCE = join(ROOT, "test/bench/reference-ratios.json");

/** The benchmark scripts, in the order they run; `quickArgs` are passed with `--quick` (besides `BENCH_QUICK=1`). */
export const SCRIPTS: readonly { script: string; quickArgs?: string[] }[] = [
  { script: "bench:policy" },
  { script: "bench:selector" },
  { script: "bench:backend-calls" },
  { script: "bench:read-cost", quickArgs: ["--reads", "200"] },
  { script: "bench:footprint", quickArgs: ["--runs", "3"] },
  { script: "bench:http-overhead" },
  { script: "bench:latency" },
  { script: "bench:memory" },
  { script: "bench:hostile", quickArgs: ["--seconds", "3"] },
  { script: "bench:shared-tier" },
  { script: "bench:custom" },
];

/** Longest a script may run, ms, before it is killed and counted as failed. */
const SCRIPT_TIMEOUT_MS = 15 * 60_000;

/** Run one npm script with `BENCH_REPORT_DIR=reportDir`; its output to `logFile`. */
function runScript(script: string, args: string[], reportDir: string, logFile: string, quick: boolean): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    const log = createWriteStream(logFile);
    const child = spawn("npm", ["run", "--silent", script, ...(args.length ? ["--", ...args] : [])], {
      cwd: ROOT,
      env: {
        ...process.env,
        BENCH_REPORT_DIR: reportDir,
        ...(quick ? { BENCH_QUICK: "1" } : {}),
        XDG_CONFIG_HOME: process.env["XDG_CONFIG_HOME"] ?? join(ROOT, ".xdg/config"),
        XDG_DATA_HOME: process.env["XDG_DATA_HOME"] ?? join(ROOT, ".xdg/data"),
        WRANGLER_SEND_METRICS: "false",
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true, // its own process group, so a timeout ends the script and its servers
    });
    // Ctrl-C or a kill of this run ends the script's whole process group too.
    const stop = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    };
    const interrupt = () => {
      stop();
      process.exit(130);
    };
    process.once("SIGINT", interrupt).once("SIGTERM", interrupt);
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    const timer = setTimeout(stop, SCRIPT_TIMEOUT_MS);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      process.off("SIGINT", interrupt).off("SIGTERM", interrupt);
      log.end(() => resolve({ code, signal }));
    });
  });
}

/** The last `n` lines of a file. */
function tail(file: string, n: number): string {
  return readFileSync(file, "utf8").trimEnd().split("\n").slice(-n).join("\n");
}

/**
 * Read the reports a script wrote.
 *
 * @throws Error when a file is not a {@link BenchReport}
 */
function readReports(dir: string): BenchReport[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => {
      const r = JSON.parse(readFileSync(join(dir, f), "utf8")) as BenchReport;
      if (typeof r.bench !== "string" || !Array.isArray(r.rows) || !Array.isArray(r.figures) || r.rows.some((row) => typeof row.id !== "string")) {
        throw new Error(`${f}: not a BenchReport (test/bench/report.ts)`);
      }
      return r;
    });
}

function readReference(): ReferenceFile {
  if (!existsSync(REFERENCE)) return { margin: 2, rows: {} };
  return JSON.parse(readFileSync(REFERENCE, "utf8")) as ReferenceFile;
}

/** The regression section of the page. */
function regressionText(comparison: Comparison, margin: number, quick: boolean, updated: boolean): string {
  const lines = [
    `Regression check against \`test/bench/reference-ratios.json\` (margin ${margin}×): ${comparison.passed.length} ratios within the margin, ` +
      `${comparison.regressions.length} regressions, ${comparison.unreferenced.length} without a reference${updated ? " — references updated by this run (`--update-reference`)" : ""}` +
      `${quick ? " — quick run: not enforced" : ""}.`,
  ];
  for (const line of describeRegressions(comparison.regressions, margin)) lines.push(`- ✗ ${line}`);
  return lines.join("\n");
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      only: { type: "string" },
      quick: { type: "boolean", default: false },
      "update-reference": { type: "boolean", default: false },
      "no-docs": { type: "boolean", default: false },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log("usage: npm run bench [-- --only a,b] [-- --quick] [-- --update-reference] [-- --no-docs]");
    return 0;
  }
  const quick = values.quick;
  const known = new Set(SCRIPTS.map((s) => s.script));
  const only = values.only ? values.only.split(",").map((s) => (s.trim().startsWith("bench:") ? s.trim() : `bench:${s.trim()}`)) : undefined;
  for (const o of only ?? []) if (!known.has(o)) throw new Error(`--only: unknown benchmark ${o} (${[...known].join(", ")})`);
  const selected = SCRIPTS.filter((s) => !only || only.includes(s.script));
  const npmScripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;

  const work = mkdtempSync(join(tmpdir(), "emb-bench-"));
  const outcomes: ScriptOutcome[] = [];
  const reports: BenchReport[] = [];
  const started = Date.now();
  for (const { script, quickArgs } of selected) {
    const t0 = Date.now();
    if (!npmScripts[script]) {
      process.stderr.write(`✗ ${script}: missing (no such npm script in package.json)\n`);
      outcomes.push({ script, status: "missing", seconds: 0, reports: [] });
      continue;
    }
    process.stderr.write(`· ${script} …\n`);
    const dir = join(work, script.replace(/[^a-z0-9-]/gi, "_"));
    const logFile = `${dir}.log`;
    const { code, signal } = await runScript(script, quick ? (quickArgs ?? []) : [], dir, logFile, quick);
    const seconds = (Date.now() - t0) / 1000;
    let mine: BenchReport[] = [];
    let detail = code === 0 ? undefined : signal ? `killed by ${signal}${seconds * 1000 >= SCRIPT_TIMEOUT_MS ? " (timeout)" : ""}` : `exit ${code}`;
    try {
      mine = readReports(dir);
    } catch (err) {
      detail = `${detail ? `${detail}; ` : ""}${(err as Error).message}`;
    }
    reports.push(...mine);
    outcomes.push({ script, status: detail ? "failed" : "ok", ...(detail ? { detail } : {}), seconds, reports: mine.map((r) => r.bench) });
    if (detail) process.stderr.write(`✗ ${script}: ${detail} after ${seconds.toFixed(0)} s; end of its output:\n${tail(logFile, 30).replace(/^/gm, "    ")}\n`);
    else process.stderr.write(`✓ ${script}: ${seconds.toFixed(0)} s, reports: ${mine.map((r) => r.bench).join(", ") || "none (prints only)"}\n`);
  }

  const reference = readReference();
  const rows = reports.flatMap((r) => r.rows);
  const comparison = compareRatios(rows, reference);
  const update = values["update-reference"];
  if (update) {
    const next = updatedReference(reference, rows);
    next.comment ??= "Reference ratios of npm run bench's regression check (test/bench/regression.ts). Rewrite with: npm run bench -- --update-reference";
    writeFileSync(REFERENCE, JSON.stringify(next, null, 2) + "\n");
    process.stderr.write(`reference ratios of ${rows.filter((r) => r.ratios).length} rows written to ${REFERENCE}\n`);
  }

  if (!values["no-docs"]) {
    mkdirSync(FIGURES, { recursive: true });
    for (const r of reports) {
      writeFileSync(join(FIGURES, `${r.bench}.json`), JSON.stringify(r, null, 2) + "\n");
      for (const f of r.figures) writeFileSync(join(FIGURES, `${f.id}.svg`), await figureSvg(f));
    }
    // Every kept report, this run's and earlier ones (a run with --only keeps the others' figures).
    const kept = readReports(FIGURES);
    let text = readFileSync(DOC, "utf8");
    const header = [
      `_Last \`npm run bench\`${only ? ` (--only ${only.join(",")})` : ""}: ${new Date(started).toISOString()}, ${((Date.now() - started) / 1000).toFixed(0)} s.${quick ? " **Quick smoke run (`--quick`): the figures below mean nothing.**" : ""}_`,
      "",
      goalTable(kept),
      "",
      "Each row is judged against a baseline measured in the same run on the same machine; the tables per script follow in their sections below.",
      "",
      outcomeTable(outcomes),
      "",
      regressionText(comparison, reference.margin, quick, update),
    ].join("\n");
    text = replaceBetween(text, "goals", header, "## Goals");
    for (const r of kept) text = replaceBetween(text, r.bench, reportSection(r), `## ${r.bench} (generated)`);
    writeFileSync(DOC, text);
    process.stderr.write(`wrote ${DOC} and ${kept.reduce((n, r) => n + r.figures.length, 0)} figures under ${FIGURES}\n`);
  }
  rmSync(work, { recursive: true, force: true });

  let failed = false;
  const bad = outcomes.filter((o) => o.status !== "ok");
  if (bad.length > 0) {
    failed = true;
    console.error(`\n${bad.length} benchmark script(s) did not complete:\n${bad.map((o) => `  ${o.script}: ${o.status}${o.detail ? ` (${o.detail})` : ""}`).join("\n")}`);
  }
  if (comparison.regressions.length > 0 && !update) {
    const list = describeRegressions(comparison.regressions, reference.margin).map((l) => `  ${l}`).join("\n");
    if (quick) console.error(`\nratios outside the margin in this quick run (not enforced):\n${list}`);
    else {
      failed = true;
      console.error(`\nregression: ${comparison.regressions.length} ratio(s) moved the wrong way by more than ${reference.margin}×:\n${list}`);
    }
  }
  if (!failed) console.error(`\nnpm run bench: ${outcomes.length} scripts ok; ${comparison.passed.length} ratios within the margin.`);
  return failed ? 1 : 0;
}

try {
  process.exitCode = await main();
} catch (err) {
  console.error((err as Error).stack ?? err);
  process.exitCode = 1;
}
