/**
 * `npm run bench`'s regression check (test/bench/regression.ts) and the
 * generated parts of docs/benchmarks.md (test/bench/render.ts). Made-up
 * ratios only: no figure of this machine is asserted.
 */
import { describe, expect, it } from "vitest";
import { compareRatios, describeRegressions, limitFor, updatedReference, type ReferenceFile } from "../bench/regression.ts";
import { goalTable, replaceBetween, reportSection } from "../bench/render.ts";
import type { BenchReport, BenchRow } from "../bench/report.ts";

const reference: ReferenceFile = {
  margin: 2,
  rows: {
    P1: { rps_vs_baseline: { value: 0.6, better: "higher" }, p99_vs_baseline: { value: 1.5, better: "lower" } },
    P5: { peak_vs_baseline: { value: 1.2, better: "lower" } },
  },
};

function row(id: string, ratios: Record<string, number>, better: Record<string, "higher" | "lower"> = {}): BenchRow {
  return { id, title: id, goal: "g", measured: "m", met: true, ratios, better };
}

describe("compareRatios", () => {
  it("a higher-is-better ratio regresses below reference / margin, a lower-is-better one above reference × margin", () => {
    expect(limitFor({ value: 0.6, better: "higher" }, 2)).toBeCloseTo(0.3);
    expect(limitFor({ value: 1.5, better: "lower" }, 2)).toBeCloseTo(3);
    const ok = compareRatios([row("P1", { rps_vs_baseline: 0.31, p99_vs_baseline: 2.99 })], reference);
    expect(ok.regressions).toEqual([]);
    expect(ok.passed).toEqual(["P1.rps_vs_baseline", "P1.p99_vs_baseline"]);
    const bad = compareRatios([row("P1", { rps_vs_baseline: 0.29, p99_vs_baseline: 3.01 })], reference);
    expect(bad.regressions.map((r) => `${r.row}.${r.ratio}`)).toEqual(["P1.rps_vs_baseline", "P1.p99_vs_baseline"]);
    expect(describeRegressions(bad.regressions, 2)[0]).toMatch(/P1 rps_vs_baseline = 0\.290: higher is better, reference 0\.6, limit 0\.300/);
  });

  it("the reference's direction decides, not the row's claim; improvements never fail", () => {
    // a much better figure in either direction passes
    expect(compareRatios([row("P1", { rps_vs_baseline: 5, p99_vs_baseline: 0.01 }, { rps_vs_baseline: "lower" })], reference).regressions).toEqual([]);
  });

  it("a non-finite ratio is a regression", () => {
    const c = compareRatios([row("P5", { peak_vs_baseline: NaN })], reference);
    expect(c.regressions).toHaveLength(1);
    expect(describeRegressions(c.regressions, 2)[0]).toContain("NaN");
  });

  it("lists ratios without a reference and references not measured, without failing on them", () => {
    const c = compareRatios([row("P4", { p99_vs_baseline: 9 })], reference);
    expect(c.regressions).toEqual([]);
    expect(c.unreferenced).toEqual(["P4.p99_vs_baseline"]);
    expect(c.notMeasured).toEqual(["P1.rps_vs_baseline", "P1.p99_vs_baseline", "P5.peak_vs_baseline"]);
  });

  it("refuses a margin that is not > 1", () => {
    expect(() => compareRatios([], { margin: 1, rows: {} })).toThrow(/margin/);
  });
});

describe("updatedReference", () => {
  it("replaces measured rows (3 significant digits, the row's direction), keeps rows not measured, drops non-finite ratios", () => {
    const next = updatedReference(reference, [row("P1", { rps_vs_baseline: 0.123456, p99_vs_baseline: Infinity }, { rps_vs_baseline: "higher" }), row("P4", { p99_vs_baseline: 4.56789 }, { p99_vs_baseline: "lower" })]);
    expect(next.rows).toEqual({
      P1: { rps_vs_baseline: { value: 0.123, better: "higher" } },
      P4: { p99_vs_baseline: { value: 4.57, better: "lower" } },
      P5: reference.rows["P5"],
    });
    expect(next.margin).toBe(2);
    expect(reference.rows["P1"]!["p99_vs_baseline"]).toBeDefined(); // the input is not modified
  });
});

describe("docs/benchmarks.md generation", () => {
  it("replaces only the text between a script's markers; appends a section when they are absent", () => {
    const doc = "# Benchmarks\n\nhand-written\n\n<!-- bench:latency:begin -->\nold\n<!-- bench:latency:end -->\n\nmore hand-written\n";
    const once = replaceBetween(doc, "latency", "new table");
    expect(once).toBe("# Benchmarks\n\nhand-written\n\n<!-- bench:latency:begin -->\nnew table\n<!-- bench:latency:end -->\n\nmore hand-written\n");
    expect(replaceBetween(once, "latency", "new table")).toBe(once);
    const appended = replaceBetween(doc, "memory", "rss", "## memory");
    expect(appended.startsWith(doc.trimEnd())).toBe(true);
    expect(appended.endsWith("## memory\n\n<!-- bench:memory:begin -->\nrss\n<!-- bench:memory:end -->\n")).toBe(true);
    expect(() => replaceBetween("<!-- bench:x:end --> <!-- bench:x:begin -->", "x", "")).toThrow(/out of order/);
    expect(() => replaceBetween("<!-- bench:x:begin -->", "x", "")).toThrow(/incomplete/);
  });

  it("the goal table lists goal rows in issue 11's order (then issue 26's P7) with ✓/✗, and leaves informational rows out", () => {
    const reports: BenchReport[] = [
      { bench: "memory", startedAt: "t", durationSeconds: 1, rows: [{ ...row("P5", {}), met: false }], figures: [] },
      {
        bench: "latency",
        startedAt: "t",
        durationSeconds: 1,
        rows: [row("P4-inproxy", {}), row("P4", {}), { ...row("P4-proxy-hit", {}), met: null }],
        figures: [],
      },
      { bench: "http-overhead", startedAt: "t", durationSeconds: 1, rows: [{ ...row("P1", {}), measured: "0.5× | p99" }], figures: [] },
      { bench: "custom-pods", startedAt: "t", durationSeconds: 1, rows: [row("bridge-rss-rest", {}), { ...row("P7", {}), met: false }], figures: [] },
    ];
    const lines = goalTable(reports).split("\n").slice(2);
    // issue 26's P7 after issue 11's rows, before the rest
    expect(lines.map((l) => /\*\*([^*]+)\*\*/.exec(l)![1])).toEqual(["P1", "P4", "P4-inproxy", "P5", "P7", "bridge-rss-rest"]);
    expect(lines[0]).toContain("0.5× \\| p99"); // a pipe in a figure does not break the table
    expect(lines[3]!.endsWith("| ✗ |")).toBe(true);
    expect(lines[1]!.endsWith("| ✓ |")).toBe(true);
  });

  it("a script's section links its figures as SVG files under bench/", () => {
    const text = reportSection({
      bench: "memory",
      startedAt: "2026-01-01T00:00:00Z",
      durationSeconds: 12,
      rows: [row("P5", { peak_vs_baseline: 1.25 }, { peak_vs_baseline: "lower" })],
      figures: [{ id: "p5-rss", title: "RSS over a run", kind: "line", xLabel: "s", yLabel: "MB", series: [] }],
      notes: ["a note"],
    });
    expect(text).toContain("![RSS over a run](bench/p5-rss.svg)");
    expect(text).toContain("peak_vs_baseline 1.250 (lower is better)");
    expect(text).toContain("- a note");
  });
});
