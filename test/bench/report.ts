/**
 * The one shape every benchmark script reports its figures in, so that
 * `npm run bench` (test/bench/run-all.ts) can collect them, write
 * docs/benchmarks.md's tables and plots, and compare ratios against the
 * committed reference ratios (regression check).
 *
 * A script always prints its figures for a human; when the environment
 * variable `BENCH_REPORT_DIR` is set it also writes `<dir>/<bench>.json`
 * (a {@link BenchReport}) through {@link writeReport}. Nothing here asserts a
 * figure.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * One row of a goal table: a project goal (issue 11's table), what this run
 * measured, and the baseline measured in the same run.
 */
export interface BenchRow {
  /** Stable id, e.g. `"P1"`, `"P2-cloudwatch"`, `"P4-inproxy"`; used by the regression check. */
  id: string;
  /** What is measured, e.g. `"cache-hit read, Node bridge vs trivial Hono route"`. */
  title: string;
  /** The goal as text, e.g. `"≥ 0.5× req/s, p99 ≤ 2×"`. */
  goal: string;
  /** The measured figure as text, e.g. `"0.62× req/s; p99 1.4×"`. */
  measured: string;
  /** The same-run baseline as text, e.g. `"trivial Hono: 18,400 req/s"` (optional). */
  baseline?: string;
  /** Whether the goal is met (`null`: the row has no goal, informational). */
  met: boolean | null;
  /**
   * Ratios this row is judged by (dimensionless, against the same-run
   * baseline), keyed by a stable name, e.g. `{ "rps_vs_baseline": 0.62 }`.
   * The regression check compares these, never absolute times.
   */
  ratios?: Record<string, number>;
  /** For each key of `ratios`: `"higher"` when bigger is better, `"lower"` when smaller is better. */
  better?: Record<string, "higher" | "lower">;
}

/** One plot: a bar or line chart of named series. */
export interface BenchFigure {
  /** File-name-safe id, e.g. `"p1-throughput"`; the SVG is written as docs/bench/<id>.svg. */
  id: string;
  title: string;
  kind: "bar" | "line";
  xLabel: string;
  yLabel: string;
  /** Each series: a name and its points (x is a category for bars, a number for lines). */
  series: { name: string; points: [x: number | string, y: number][] }[];
}

/** What one benchmark script reports. */
export interface BenchReport {
  /** The script's name, e.g. `"http-overhead"`; the file is `<BENCH_REPORT_DIR>/<bench>.json`. */
  bench: string;
  /** ISO time the run started. */
  startedAt: string;
  /** Seconds the run took. */
  durationSeconds: number;
  rows: BenchRow[];
  figures: BenchFigure[];
  /** Free-form notes shown under the script's table (method, machine, caveats). */
  notes?: string[];
}

/**
 * Write `report` as `<BENCH_REPORT_DIR>/<report.bench>.json` when that
 * variable is set; otherwise do nothing. Creates the directory.
 *
 * @throws Error when the directory cannot be created or the file written
 */
export function writeReport(report: BenchReport): void {
  const dir = process.env.BENCH_REPORT_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${report.bench}.json`), JSON.stringify(report, null, 2) + "\n");
}
