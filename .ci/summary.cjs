// The plain closing line CI reads ('N passed, N failed[, N skipped]'), from
// vitest's JSON report (argv[2]) and npm test's exit status (env STATUS).
// A suite that failed without a failing test (a beforeAll that threw, an
// import error: vitest then reports its tests as skipped) counts as one
// failure, and a failing run always reports at least one failure, so the
// line never says "0 failed" for a run that failed.
const fs = require("fs");
const status = process.env.STATUS || "0";
let r;
try {
  r = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
} catch {
  console.log(`0 passed, ${status === "0" ? 0 : 1} failed`);
  process.exit(0);
}
const skipped = (r.numPendingTests || 0) + (r.numTodoTests || 0);
let failed = r.numFailedTests || 0;
for (const f of r.testResults || []) {
  const failing = (f.assertionResults || []).some((a) => a.status === "failed");
  if (f.status === "failed" && !failing) {
    failed++;
    console.log(`suite failed without a failing test: ${f.name}: ${String(f.message || "").split("\n")[0]}`);
  }
}
if (failed === 0 && (r.success === false || status !== "0")) failed = 1;
console.log(`${r.numPassedTests || 0} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
