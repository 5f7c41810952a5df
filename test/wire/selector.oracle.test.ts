/**
 * Differential test: shared/k8s/selector.ts against the real
 * k8s.io/apimachinery, run through the Go program in test/oracle.
 *
 * The Go program is built once (into a temporary directory), then fed every
 * hand-written case of test/oracle/selector-cases.ts plus several thousand
 * generated selectors and metav1.LabelSelectors (fast-check, fixed seeds, so
 * a failure reproduces). For each one, both sides must agree on accept or
 * reject, on the canonical string or the exact error message, and on whether
 * a label set matches. Without a Go toolchain this test fails; it never skips.
 */
import { beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  fromLabelSelector,
  matchesLabels,
  parseSelector,
  selectorToString,
  validateLabelKey,
  validateLabelValue,
  type LabelSelector,
  type Selector,
} from "../../shared/k8s/selector.ts";
import { goBinary } from "../../infra/tools/go.ts";
import { hostileInputs, LABEL_SELECTOR_CASES, MATCH_CASES, PARSE_CASES } from "../oracle/selector-cases.ts";

const ORACLE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "oracle");

// ---------------------------------------------------------------------------
// The oracle process
// ---------------------------------------------------------------------------

/** One request line of the oracle protocol (see test/oracle/main.go). */
type OracleRequest =
  | { op: "selector"; input: string; labels?: Record<string, string> }
  | { op: "labelSelector"; labelSelector: LabelSelector | null; labels?: Record<string, string> };

/** One answer line. `protocolError` means the oracle did not understand the request. */
interface OracleAnswer {
  ok: boolean;
  string?: string;
  matches?: boolean;
  nothing?: boolean;
  error?: string;
  protocolError?: string;
}

/** The Go toolchain: $GO, else `go` on PATH, else /usr/local/go/bin/go. */

let oracleBinary = "";

function ask(requests: readonly OracleRequest[]): OracleAnswer[] {
  if (oracleBinary === "") throw new Error("the oracle was not built");
  const input = requests.map((r) => JSON.stringify(r)).join("\n") + "\n";
  const run = spawnSync(oracleBinary, [], { input, encoding: "utf8", maxBuffer: 1 << 30, timeout: 120_000 });
  if (run.status !== 0) throw new Error(`oracle failed (${run.status ?? run.signal}): ${run.error ?? ""} ${run.stderr}`);
  const lines = run.stdout.split("\n").filter((line) => line.length > 0);
  if (lines.length !== requests.length) throw new Error(`oracle answered ${lines.length} lines for ${requests.length} requests`);
  return lines.map((line, i) => {
    const answer = JSON.parse(line) as OracleAnswer;
    if (answer.protocolError !== undefined) {
      throw new Error(`oracle protocol error ${answer.protocolError} for ${JSON.stringify(requests[i])}`);
    }
    return answer;
  });
}

beforeAll(() => {
  oracleBinary = goBinary(ORACLE_DIR, "selector-oracle");
}, 300_000);


// ---------------------------------------------------------------------------
// Our side, in the oracle's answer shape
// ---------------------------------------------------------------------------

function describeOurs(make: () => Selector, labels: Record<string, string> | undefined): OracleAnswer {
  let sel: Selector;
  try {
    sel = make();
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
  const answer: OracleAnswer = { ok: true, string: selectorToString(sel) };
  if (sel.nothing === true) answer.nothing = true;
  if (labels !== undefined) answer.matches = matchesLabels(sel, labels);
  return answer;
}

function ours(request: OracleRequest): OracleAnswer {
  if (request.op === "selector") {
    // apimachinery has no length limit; ours is checked in selector.test.ts.
    return describeOurs(() => parseSelector(request.input, { maxLength: Infinity }), request.labels);
  }
  return describeOurs(() => fromLabelSelector(request.labelSelector), request.labels);
}

/** Runs every request on both sides; returns the disagreements, printable. */
function disagreements(requests: readonly OracleRequest[]): string[] {
  const answers = ask(requests);
  const out: string[] = [];
  requests.forEach((request, i) => {
    const go = answers[i] as OracleAnswer;
    const mine = ours(request);
    const normalizedGo: OracleAnswer = { ok: go.ok };
    if (go.ok) normalizedGo.string = go.string ?? "";
    else normalizedGo.error = go.error ?? "";
    if (go.nothing === true) normalizedGo.nothing = true;
    if (go.matches !== undefined) normalizedGo.matches = go.matches;
    if (JSON.stringify(mine) !== JSON.stringify(normalizedGo)) {
      out.push(`request: ${JSON.stringify(request)}\n  apimachinery: ${JSON.stringify(normalizedGo)}\n  ours:         ${JSON.stringify(mine)}`);
    }
  });
  return out;
}

function expectAgreement(requests: readonly OracleRequest[]): void {
  const diffs = disagreements(requests);
  expect(diffs.length, `${diffs.length} of ${requests.length} cases disagree; first ones:\n${diffs.slice(0, 15).join("\n")}`).toBe(0);
}

// ---------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------

/** Pools of tokens: mostly valid, some near-valid, some hostile. */
const VALID_KEYS = ["a", "b", "x", "app", "in", "notin", "exists", "example.com/app", "k8s.io/x", "A_B.c-d", "1", "a.b", "a".repeat(63), "constructor", "toString"];
const BAD_KEYS = ["-a", "a-", "Example.com/a", "a/b/c", "/a", "a/", "é", "x~", "a".repeat(64), "__proto__", "a\u200bb"];
const VALID_VALUES = ["", "a", "b", "z", "1", "42", "007", "9223372036854775807", "in", "notin", "x".repeat(63), "a.b", "A-Z", "0"];
const BAD_VALUES = [
  "-1", "+1", "9223372036854775808", "-9223372036854775808", "é", "日本", "😀", "\u200b", "\u00a0", "\x01", "\x7f",
  "\ud800", "x".repeat(64), "a_", "_a", '"', "\\", "1_0", "0x1", "&a",
];
const SPACES = [" ", "  ", "\t", "\n", "\r\n"];
const ODD_SPACES = ["\x00", "\u00a0", "\u3000", "\v", "\f"];
const VALID_OPS = ["=", "==", "!=", " in ", " notin ", ">", "<"];
const BAD_OPS = ["in", "!", "=>", "!==", "===", "<=", "~", " ", "=!", "=="];
const BAD_SEPARATORS = [", ", " ,", ",,", "", " ", ";", "|", "\x00", "&&"];
const NOISE = "abxz019-_./=!<>(),~ \t\n\x00éÿ日😀\u200b\"\\";

function mostly(good: readonly string[], bad: readonly string[], goodWeight = 6): fc.Arbitrary<string> {
  return fc.oneof({ weight: goodWeight, arbitrary: fc.constantFrom(...good) }, { weight: 1, arbitrary: fc.constantFrom(...bad) });
}

const ws = fc.oneof({ weight: 12, arbitrary: fc.constant("") }, { weight: 4, arbitrary: fc.constantFrom(...SPACES) }, { weight: 1, arbitrary: fc.constantFrom(...ODD_SPACES) });
const key = mostly(VALID_KEYS, BAD_KEYS);
const value = mostly(VALID_VALUES, BAD_VALUES);
const separator = mostly([","], BAD_SEPARATORS, 10);

/** One requirement, usually well formed, with optional surrounding noise. */
const requirement: fc.Arbitrary<string> = fc.oneof(
  fc.tuple(ws, key, ws).map(([s1, k, s2]) => `${s1}${k}${s2}`),
  fc.tuple(ws, key, ws).map(([s1, k, s2]) => `${s1}!${s2}${k}`),
  fc.tuple(key, ws, mostly(VALID_OPS, BAD_OPS), ws, value).map(([k, s1, op, s2, v]) => `${k}${s1}${op}${s2}${v}`),
  fc
    .tuple(key, mostly([" in ", " notin "], ["in", " in", "notin ", " notin", "(in)"]), ws, fc.array(fc.tuple(ws, value, ws), { maxLength: 5 }), mostly(["yes"], ["no"], 10))
    .map(([k, op, s, vals, close]) => `${k}${op}${s}(${vals.map(([a, v, b]) => `${a}${v}${b}`).join(",")}${close === "yes" ? ")" : ""}`),
  fc.tuple(key, fc.constantFrom(">", "<"), fc.integer({ min: -5, max: 99 })).map(([k, op, n]) => `${k}${op}${n}`),
);

/** Requirements joined by mostly-commas. */
const selector: fc.Arbitrary<string> = fc
  .array(fc.tuple(requirement, separator), { maxLength: 8 })
  .map((parts) => parts.map(([r, sep], i) => (i === parts.length - 1 ? r : r + sep)).join(""));

/** A selector with a few characters inserted or deleted. */
const mutated: fc.Arbitrary<string> = fc
  .tuple(selector, fc.array(fc.tuple(fc.nat(), fc.constantFrom(...NOISE), fc.boolean()), { minLength: 1, maxLength: 3 }))
  .map(([s, edits]) => {
    let out = s;
    for (const [at, ch, insert] of edits) {
      const i = out.length === 0 ? 0 : at % (out.length + 1);
      out = insert ? out.slice(0, i) + ch + out.slice(i) : out.slice(0, i) + out.slice(i + 1);
    }
    return out;
  });

/** Short strings over the characters that matter to the lexer. */
const noise: fc.Arbitrary<string> = fc.string({ unit: fc.constantFrom(...NOISE), maxLength: 24 });

/** Many requirements over few keys: exercises Go's unstable sort (pdqsort, > 12 items). */
const crowded: fc.Arbitrary<string> = fc
  .array(
    fc.tuple(fc.constantFrom("a", "b", "c", "d"), fc.constantFrom("=", "!=", " in ", ">", ""), fc.integer({ min: 0, max: 9 })),
    { minLength: 10, maxLength: 70 },
  )
  .map((reqs) => reqs.map(([k, op, n]) => (op === "" ? k : op === " in " ? `${k} in (${n})` : `${k}${op}${n}`)).join(","));

const labelSet: fc.Arbitrary<Record<string, string>> = fc.dictionary(
  fc.constantFrom("a", "b", "c", "d", "x", "app", "in", "notin", "example.com/app"),
  fc.constantFrom("", "a", "b", "z", "0", "1", "5", "42", "+7", "-3", "007", "x", "in", "9223372036854775807", "9223372036854775808"),
  { maxKeys: 4 },
);

const labelSelectorArb: fc.Arbitrary<LabelSelector> = fc
  .record(
    {
      matchLabels: fc.dictionary(key, value, { maxKeys: 4 }),
      matchExpressions: fc.array(
        fc.record(
          {
            key,
            operator: fc.constantFrom("In", "NotIn", "Exists", "DoesNotExist", "In", "NotIn", "in", "Gt", "") as fc.Arbitrary<"In">,
            values: fc.array(value, { maxLength: 4 }),
          },
          { requiredKeys: ["key", "operator"] },
        ),
        { maxLength: 6 },
      ),
    },
    { requiredKeys: [] },
  )
  // Go walks matchLabels in random map order and reports the first bad entry:
  // keep at most one bad entry so its answer is deterministic.
  .filter((ls) => Object.entries(ls.matchLabels ?? {}).filter(([k, v]) => validateLabelKey(k) || validateLabelValue(v)).length <= 1);

function sample<T>(arb: fc.Arbitrary<T>, seed: number, numRuns: number): T[] {
  return fc.sample(arb, { seed, numRuns });
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

describe("selector oracle (k8s.io/apimachinery)", () => {
  it("speaks the protocol: unknown ops and bad lines are protocol errors", () => {
    const run = spawnSync(oracleBinary, [], { input: '{"op":"nope"}\nnot json\n', encoding: "utf8" });
    const lines = run.stdout.trim().split("\n").map((l) => JSON.parse(l) as OracleAnswer);
    expect(lines).toHaveLength(2);
    expect(lines[0]?.protocolError).toBe('unknown op "nope"');
    expect(lines[1]?.protocolError).toMatch(/^bad request: /);
  });

  it("agrees with the hand-written parse cases, and they hold on apimachinery", () => {
    const requests: OracleRequest[] = PARSE_CASES.map((c) => ({ op: "selector", input: c.input }));
    expectAgreement(requests);
    const answers = ask(requests);
    const wrong = PARSE_CASES.flatMap((c, i) => {
      const go = answers[i] as OracleAnswer;
      const expected = "string" in c ? { ok: true, string: c.string } : { ok: false, error: c.error };
      const actual = go.ok ? { ok: true, string: go.string } : { ok: false, error: go.error };
      return JSON.stringify(expected) === JSON.stringify(actual) ? [] : [`${JSON.stringify(c)}\n  apimachinery: ${JSON.stringify(actual)}`];
    });
    expect(wrong, wrong.join("\n")).toEqual([]);
  });

  it("agrees with the hand-written match cases, and they hold on apimachinery", () => {
    const requests: OracleRequest[] = MATCH_CASES.map((c) => ({ op: "selector", input: c.selector, labels: { ...c.labels } }));
    expectAgreement(requests);
    const answers = ask(requests);
    const wrong = MATCH_CASES.filter((c, i) => answers[i]?.matches !== c.matches).map((c) => JSON.stringify(c));
    expect(wrong, wrong.join("\n")).toEqual([]);
  });

  it("agrees with the hand-written LabelSelector cases, and they hold on apimachinery", () => {
    const requests: OracleRequest[] = LABEL_SELECTOR_CASES.map((c) => ({ op: "labelSelector", labelSelector: c.labelSelector }));
    expectAgreement(requests);
    const answers = ask(requests);
    const wrong = LABEL_SELECTOR_CASES.flatMap((c, i) => {
      const go = answers[i] as OracleAnswer;
      const expected =
        "string" in c ? { ok: true, string: c.string, nothing: c.nothing === true } : { ok: false, error: c.error };
      const actual = go.ok ? { ok: true, string: go.string, nothing: go.nothing === true } : { ok: false, error: go.error };
      return JSON.stringify(expected) === JSON.stringify(actual) ? [] : [`${JSON.stringify(c)}\n  apimachinery: ${JSON.stringify(actual)}`];
    });
    expect(wrong, wrong.join("\n")).toEqual([]);
  });

  it("agrees on huge and hostile inputs", () => {
    expectAgreement(hostileInputs().map(({ input }) => ({ op: "selector", input, labels: { x: "1", k1: "v1" } })));
  });

  it("agrees on 4000 generated selectors (accept/reject, canonical string, error, match)", () => {
    const inputs = [
      ...sample(selector, 1, 1500),
      ...sample(mutated, 2, 1500),
      ...sample(noise, 3, 1000),
    ];
    const labels = sample(labelSet, 4, inputs.length);
    const requests: OracleRequest[] = inputs.map((input, i) => ({ op: "selector", input, labels: labels[i] ?? {} }));
    // Make sure the corpus is not all rejections (or all acceptances).
    const accepted = ask(requests).filter((a) => a.ok).length;
    expect(accepted).toBeGreaterThan(requests.length / 5);
    expect(accepted).toBeLessThan((requests.length * 4) / 5);
    expectAgreement(requests);
  });

  it("agrees on the order of 1000 crowded selectors (Go's unstable sort.Sort)", () => {
    const inputs = sample(crowded, 5, 1000);
    const labels = sample(labelSet, 6, inputs.length);
    expectAgreement(inputs.map((input, i) => ({ op: "selector", input, labels: labels[i] ?? {} })));
  });

  it("agrees on 1500 generated metav1.LabelSelectors", () => {
    const selectors = sample(labelSelectorArb, 7, 1500);
    const labels = sample(labelSet, 8, selectors.length);
    const requests: OracleRequest[] = selectors.map((labelSelector, i) => ({ op: "labelSelector", labelSelector, labels: labels[i] ?? {} }));
    requests.push({ op: "labelSelector", labelSelector: null, labels: {} });
    expectAgreement(requests);
  });

  it("agrees that canonical strings re-parse to themselves", () => {
    const inputs = [...sample(selector, 9, 1000), ...sample(crowded, 10, 200)];
    const canonical = inputs.flatMap((input) => {
      try {
        return [selectorToString(parseSelector(input, { maxLength: Infinity }))];
      } catch {
        return [];
      }
    });
    expect(canonical.length).toBeGreaterThan(100);
    const answers = ask(canonical.map((input) => ({ op: "selector", input })));
    const wrong = canonical.filter((s, i) => answers[i]?.string !== s || selectorToString(parseSelector(s, { maxLength: Infinity })) !== s);
    expect(wrong, wrong.slice(0, 10).join("\n")).toEqual([]);
  });
});
