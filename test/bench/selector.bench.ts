/**
 * `npm run bench:selector`: parsing time of hostile label selectors
 * (test/oracle/selector-cases.ts `hostileInputs`, 200 000 characters each,
 * parsed with no length limit) against a baseline measured in the same run:
 * an ordinary selector of the same length (`k0=v0,k1=v1,…`). A ratio near 1
 * means the hostile shape costs what its length costs — no quadratic or
 * exponential path. Prints figures; asserts nothing (test/wire/selector.test.ts
 * proves the answers; timings live here, not in unit tests).
 */
import { parseSelector, selectorToString } from "../../shared/k8s/selector.ts";
import { hostileInputs } from "../oracle/selector-cases.ts";

function timeParse(input: string, runs = 5): number {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    try {
      selectorToString(parseSelector(input, { maxLength: Infinity }));
    } catch {
      // a SelectorError is an answer too
    }
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

const rows: string[] = [];
for (const { name, input } of hostileInputs()) {
  let baseline = "";
  for (let i = 0; baseline.length < input.length; i++) baseline += `${i > 0 ? "," : ""}k${i % 50}=v${i}`;
  const base = timeParse(baseline.slice(0, input.length).replace(/,[^,]*$/, ""));
  const hostile = timeParse(input);
  rows.push(`| ${name} | ${input.length} | ${hostile.toFixed(1)} | ${base.toFixed(1)} | ${(hostile / base).toFixed(2)}× |`);
}
console.log("| hostile selector | characters | parse ms (median of 5) | ordinary selector of that length, ms | ratio |");
console.log("|---|---:|---:|---:|---:|");
for (const row of rows) console.log(row);
