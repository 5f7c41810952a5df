/**
 * The regression check of `npm run bench` (test/bench/run-all.ts): each
 * report row's `ratios` (dimensionless, against a baseline measured in the
 * same run — never absolute times, which do not travel between machines)
 * compared with the committed reference ratios
 * (`test/bench/reference-ratios.json`) with a generous margin: a "higher is
 * better" ratio regresses when it falls below reference / margin, a "lower is
 * better" one when it rises above reference × margin (margin 2 by default).
 */
import type { BenchRow } from "./report.ts";

/** One reference ratio. */
export interface ReferenceRatio {
  value: number;
  better: "higher" | "lower";
  /** where the value comes from, when not from the run named in the file's comment */
  note?: string;
}

/** The reference file's shape: row id → ratio name → reference. */
export interface ReferenceFile {
  comment?: string;
  /** how far a ratio may move the wrong way before it is a regression (factor, > 1) */
  margin: number;
  rows: Record<string, Record<string, ReferenceRatio>>;
}

/** One ratio that moved the wrong way by more than the margin (or is not a finite number). */
export interface Regression {
  row: string;
  ratio: string;
  better: "higher" | "lower";
  reference: number;
  measured: number;
  /** the bound it crossed */
  limit: number;
}

/** What {@link compareRatios} found. */
export interface Comparison {
  regressions: Regression[];
  /** ratios checked and within the margin, as `row.ratio` */
  passed: string[];
  /** measured ratios with no reference (new rows or ratios), as `row.ratio` */
  unreferenced: string[];
  /** referenced ratios not measured in this run, as `row.ratio` */
  notMeasured: string[];
}

/** The bound a measured ratio must stay within. */
export function limitFor(reference: ReferenceRatio, margin: number): number {
  return reference.better === "higher" ? reference.value / margin : reference.value * margin;
}

/**
 * Compare the `ratios` of `rows` with `reference`.
 *
 * @throws Error when `reference.margin` is not a number > 1
 */
export function compareRatios(rows: readonly BenchRow[], reference: ReferenceFile): Comparison {
  const margin = reference.margin;
  if (!(margin > 1)) throw new Error(`reference ratios: margin must be > 1, got ${margin}`);
  const out: Comparison = { regressions: [], passed: [], unreferenced: [], notMeasured: [] };
  const measured = new Set<string>();
  for (const row of rows) {
    for (const [ratio, value] of Object.entries(row.ratios ?? {})) {
      const key = `${row.id}.${ratio}`;
      measured.add(key);
      const ref = reference.rows[row.id]?.[ratio];
      if (!ref) {
        out.unreferenced.push(key);
        continue;
      }
      const limit = limitFor(ref, margin);
      const ok = Number.isFinite(value) && (ref.better === "higher" ? value >= limit : value <= limit);
      if (ok) out.passed.push(key);
      else out.regressions.push({ row: row.id, ratio, better: ref.better, reference: ref.value, measured: value, limit });
    }
  }
  for (const [id, ratios] of Object.entries(reference.rows)) {
    for (const ratio of Object.keys(ratios)) if (!measured.has(`${id}.${ratio}`)) out.notMeasured.push(`${id}.${ratio}`);
  }
  return out;
}

/**
 * The reference file after `--update-reference`: the ratios measured in
 * `rows` replace their references (with the row's `better`, default
 * "higher"); references of rows not measured in this run are kept.
 * Non-finite ratios are not stored.
 */
export function updatedReference(previous: ReferenceFile, rows: readonly BenchRow[]): ReferenceFile {
  const next: ReferenceFile = { ...previous, rows: structuredClone(previous.rows) };
  for (const row of rows) {
    const entries = Object.entries(row.ratios ?? {}).filter(([, v]) => Number.isFinite(v));
    if (entries.length === 0) continue;
    next.rows[row.id] = Object.fromEntries(entries.map(([k, v]) => [k, { value: Number(v.toPrecision(3)), better: row.better?.[k] ?? "higher" }]));
  }
  next.rows = Object.fromEntries(Object.entries(next.rows).sort(([a], [b]) => a.localeCompare(b)));
  return next;
}

/** Human-readable lines for a regression list. */
export function describeRegressions(regressions: readonly Regression[], margin: number): string[] {
  return regressions.map(
    (r) =>
      `${r.row} ${r.ratio} = ${Number.isFinite(r.measured) ? r.measured.toFixed(3) : String(r.measured)}: ` +
      `${r.better} is better, reference ${r.reference}, limit ${r.limit.toFixed(3)} (${r.better === "higher" ? `reference / ${margin}` : `reference × ${margin}`})`,
  );
}
