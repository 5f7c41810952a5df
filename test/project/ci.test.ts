/** `.ci/summary.cjs`: the closing line CI reads never says "0 failed" for a failing run. */
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

function summary(report: object | undefined, status: number): string {
  const dir = mkdtempSync(join(tmpdir(), "emb-ci-"));
  const file = join(dir, "report.json");
  if (report !== undefined) writeFileSync(file, JSON.stringify(report));
  return execFileSync(process.execPath, [".ci/summary.cjs", file], { env: { ...process.env, STATUS: String(status) }, encoding: "utf8" }).trim();
}

describe(".ci/summary.cjs", () => {
  it("prints passed and failed counts of a clean run", () => {
    expect(summary({ numPassedTests: 5, numFailedTests: 0, numPendingTests: 0, success: true, testResults: [] }, 0)).toBe("5 passed, 0 failed");
  });

  it("counts a suite whose beforeAll threw (its tests reported as skipped) as a failure", () => {
    const report = {
      numPassedTests: 12,
      numFailedTests: 0,
      numPendingTests: 2,
      success: false,
      testResults: [
        { name: "a.test.ts", status: "passed", assertionResults: [{ status: "passed" }] },
        { name: "b.test.ts", status: "failed", message: "Error: no Go here", assertionResults: [{ status: "skipped" }, { status: "skipped" }] },
      ],
    };
    const out = summary(report, 1);
    expect(out.split("\n").pop()).toBe("12 passed, 1 failed, 2 skipped");
    expect(out).toContain("b.test.ts");
  });

  it("never says 0 failed when npm test failed without a report (e.g. typecheck)", () => {
    expect(summary(undefined, 2)).toBe("0 passed, 1 failed");
  });
});
