/**
 * Differential test of shared/k8s/quantity.ts against the real
 * k8s.io/apimachinery resource.Quantity (Go program in test/oracle-quantity/).
 *
 * For every value v (the unit-test corpus, boundary values, and several
 * thousand generated decimals and doubles):
 * 1. Go parses the exact plain decimal text of v (what resource.MustParse
 *    would be given) and prints its canonical String(): formatQuantity(v)
 *    must equal it — except where Go's String() itself is lossy (exponent
 *    ≥ 21, where Go drops the missing suffix), checked in step 2 instead;
 * 2. Go parses formatQuantity(v): it must denote exactly the amount Go parsed
 *    from v (so the nano rounding matches), and re-print as the same string;
 * 3. milliValue(v) must equal Go's MilliValue() of formatQuantity(v) — what
 *    the HPA reads from our JSON.
 *
 * And the guard the app serves through: for every value fitsMilliValue(v)
 * accepts — generated near the boundaries where apimachinery's reading goes
 * wrong (19+ canonical digits, large magnitudes with many fractional digits,
 * negative values, |v|×1000 near 2^63) — Go's MilliValue() of
 * formatQuantity(v) must equal the faithful value ×1000 rounded away from
 * zero (faithfulMilliValue), with the right sign.
 *
 * Needs Go (`go` on PATH, or /usr/local/go/bin/go); fails, never skips,
 * without it. The oracle binary is cached by the content of its module
 * (`goBinary`, infra/tools/go.ts), so it is compiled once per change of
 * test/oracle-quantity/, not once per run. Seed: QUANTITY_ORACLE_SEED
 * (printed on failure).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { goBinary } from "../../infra/tools/go.ts";
import {
  decimalFromNumber,
  faithfulMilliValue,
  fitsMilliValue,
  formatDecimal,
  formatQuantity,
  milliValue,
  parseDecimal,
  type Decimal,
  type QuantityInput,
} from "../../shared/k8s/quantity.ts";
import { QUANTITY_CASES } from "../oracle-quantity/cases.ts";

const ORACLE_DIR = fileURLToPath(new URL("../oracle-quantity/", import.meta.url));
const SEED = Number(process.env.QUANTITY_ORACLE_SEED ?? 20261121);
const GENERATED_DECIMALS = 4000;
const GENERATED_DOUBLES = 2000;

interface OracleAnswer {
  ok: boolean;
  string?: string;
  raw?: string;
  milli?: string;
  dec?: string;
  error?: string;
}

let oracleBinary = "";
let buildError: Error | undefined;

function askOracle(inputs: readonly string[]): OracleAnswer[] {
  if (buildError !== undefined) throw buildError;
  if (oracleBinary === "") throw new Error("Go oracle was not built");
  const result = spawnSync(oracleBinary, [], {
    input: inputs.map((input) => JSON.stringify({ input })).join("\n") + "\n",
    encoding: "utf8",
    maxBuffer: 1 << 30,
  });
  if (result.status !== 0) {
    throw new Error(`oracle exited with ${result.status}: ${result.stderr}${result.error?.message ?? ""}`);
  }
  const lines = result.stdout.split("\n").filter((line) => line !== "");
  if (lines.length !== inputs.length) {
    throw new Error(`oracle answered ${lines.length} lines for ${inputs.length} inputs`);
  }
  return lines.map((line) => JSON.parse(line) as OracleAnswer);
}

function toDecimal(value: QuantityInput): Decimal {
  switch (typeof value) {
    case "number":
      return decimalFromNumber(value);
    case "bigint":
      return { mantissa: value, exponent: 0 };
    case "string":
      return parseDecimal(value);
    default:
      return value;
  }
}

function label(value: QuantityInput): string {
  switch (typeof value) {
    case "number":
      return `${Object.is(value, -0) ? "-0" : String(value)} (number)`;
    case "bigint":
      return `${value}n`;
    case "string":
      return JSON.stringify(value);
    default:
      return `{mantissa: ${value.mantissa}n, exponent: ${value.exponent}}`;
  }
}

function sameValue(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return false;
  const x = parseDecimal(a);
  const y = parseDecimal(b);
  return x.mantissa === y.mantissa && x.exponent === y.exponent;
}

/** Values where apimachinery's int64 / inf.Dec code paths change behaviour. */
function boundaryValues(): QuantityInput[] {
  const out: QuantityInput[] = [];
  const int64Max = (1n << 63n) - 1n;
  for (let e = -13; e <= 6; e++) {
    for (const m of [int64Max - 1n, int64Max, int64Max + 1n, int64Max + 2n]) {
      out.push({ mantissa: m, exponent: e }, { mantissa: -m, exponent: e });
    }
  }
  for (let e = -20; e <= 26; e++) {
    out.push({ mantissa: 1n, exponent: e }, { mantissa: -1n, exponent: e });
    for (const digits of [9, 15, 16, 17, 18, 19, 20]) {
      const nines = 10n ** BigInt(digits) - 1n;
      out.push({ mantissa: nines, exponent: e }, { mantissa: -nines, exponent: e });
      out.push({ mantissa: nines + 2n, exponent: e }, { mantissa: -(nines + 2n), exponent: e });
    }
  }
  // 16-digit values ×1000 and 13-digit values ×10^6 straddling 2^63 (wrapping multiplies)
  for (const m of [9223372036854775n, 9223372036854776n, 9223372036854n, 9223372036855n, 9223372036n, 9223372037n]) {
    out.push(m, -m);
  }
  out.push(Number.MIN_VALUE, -Number.MIN_VALUE, Number.MAX_VALUE, -Number.MAX_VALUE, 2 ** 63, -(2 ** 63), 2 ** 64);
  return out;
}

function generatedValues(): QuantityInput[] {
  const mantissa = fc
    .integer({ min: 1, max: 25 })
    .chain((length) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: length, maxLength: length }))
    .map((digits) => BigInt(digits.join("")));
  const decimal = fc
    .record({ mantissa, exponent: fc.integer({ min: -15, max: 21 }), negative: fc.boolean() })
    .map(({ mantissa: m, exponent, negative }): QuantityInput => ({ mantissa: negative ? -m : m, exponent }));
  const double = fc.oneof(
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.double({ min: -1e7, max: 1e7, noNaN: true }),
    fc.integer().map((n) => n / 1000),
  );
  return [
    ...fc.sample(decimal, { numRuns: GENERATED_DECIMALS, seed: SEED }),
    ...fc.sample(double, { numRuns: GENERATED_DOUBLES, seed: SEED + 1 }),
  ];
}

/**
 * Values near where fitsMilliValue must draw its line: canonical mantissas of
 * 17–21 digits (apimachinery's int64Amount/inf.Dec switch at 19), large
 * magnitudes with many fractional digits, both signs, and |v|×1000 around 2^63.
 */
function guardBoundaryValues(): QuantityInput[] {
  const out: QuantityInput[] = ["-1563536821837.1743", "1563536821837.1743", -1563536821837.1743, 1563536821837.1743];
  const digitsOf = (n: number) =>
    fc.array(fc.integer({ min: 0, max: 9 }), { minLength: n, maxLength: n }).map((d) => BigInt(`1${d.join("")}`));
  // mantissa of 15–22 digits, exponent placing the value anywhere from 1e3 to 1e17 with fraction digits
  const nearDigits = fc
    .record({ length: fc.integer({ min: 14, max: 21 }), exponent: fc.integer({ min: -12, max: 3 }), negative: fc.boolean() })
    .chain(({ length, exponent, negative }) =>
      digitsOf(length).map((m): QuantityInput => ({ mantissa: negative ? -m : m, exponent })),
    );
  // doubles of large magnitude (their shortest text carries many fraction digits)
  const bigDoubles = fc.oneof(fc.double({ min: 1e9, max: 1e16, noNaN: true }), fc.double({ min: -1e16, max: -1e9, noNaN: true }));
  // |v|×1000 within a few units of 2^63 at every suffix
  const int64Max = (1n << 63n) - 1n;
  for (let e = -12; e <= 0; e++) {
    for (const delta of [-2n, -1n, 0n, 1n, 2n]) {
      const m = (int64Max + delta) * 10n ** BigInt(-e) / 1000n + delta;
      out.push({ mantissa: m, exponent: e }, { mantissa: -m, exponent: e });
    }
  }
  return [
    ...out,
    ...fc.sample(nearDigits, { numRuns: 3000, seed: SEED + 2 }),
    ...fc.sample(bigDoubles, { numRuns: 1000, seed: SEED + 3 }),
  ];
}

interface Mismatch {
  value: string;
  exactText: string;
  problem: string;
  ours: { string: string; milli: string };
  go: { canonical?: string; parsedOurs?: OracleAnswer; parsedExact?: OracleAnswer };
}

function compareWithOracle(values: readonly QuantityInput[]): { mismatches: Mismatch[]; lossyGo: number } {
  const cases = values.map((value) => ({
    value,
    exactText: formatDecimal(toDecimal(value)),
    string: formatQuantity(value),
    milli: milliValue(value),
  }));
  const answers = askOracle(cases.flatMap((c) => [c.exactText, c.string]));
  const exact = (i: number): OracleAnswer => answers[2 * i] ?? { ok: false, error: "missing" };
  const ours = (i: number): OracleAnswer => answers[2 * i + 1] ?? { ok: false, error: "missing" };
  // Is Go's own canonical string a faithful rendering of the value? (Not from 1e21 up.)
  const reparsed = askOracle(cases.map((_, i) => exact(i).string ?? "?"));

  const mismatches: Mismatch[] = [];
  let lossyGo = 0;
  cases.forEach((c, i) => {
    const goExact = exact(i);
    const goOurs = ours(i);
    const goCanonicalFaithful = sameValue(reparsed[i]?.dec, goExact.dec);
    if (!goCanonicalFaithful) lossyGo++;
    const problems: string[] = [];
    if (!goExact.ok) problems.push(`Go rejects the exact text: ${goExact.error}`);
    if (!goOurs.ok) problems.push(`Go rejects formatQuantity output: ${goOurs.error}`);
    if (goExact.ok && goOurs.ok) {
      if (!sameValue(goOurs.dec, goExact.dec)) {
        problems.push(`value differs: ours denotes ${goOurs.dec}, Go parsed the input as ${goExact.dec}`);
      }
      if (goCanonicalFaithful) {
        if (c.string !== goExact.string) problems.push(`string differs from Go's ${goExact.string}`);
        if (goOurs.string !== c.string) problems.push(`not a fixed point: Go re-prints ours as ${goOurs.string}`);
      } else if (!c.string.endsWith("E")) {
        problems.push(`Go's String() is lossy here (${goExact.string}); expected an exact …E form`);
      }
      if (goOurs.milli !== String(c.milli)) problems.push(`milli differs from Go's ${goOurs.milli}`);
    }
    if (problems.length > 0) {
      mismatches.push({
        value: label(c.value),
        exactText: c.exactText.length > 80 ? `${c.exactText.slice(0, 80)}…` : c.exactText,
        problem: problems.join("; "),
        ours: { string: c.string, milli: String(c.milli) },
        go: {
          ...(goExact.string !== undefined ? { canonical: goExact.string } : {}),
          parsedExact: goExact,
          parsedOurs: goOurs,
        },
      });
    }
  });
  return { mismatches, lossyGo };
}

describe("formatQuantity / milliValue against k8s.io/apimachinery", () => {
  // A build failure is recorded and rethrown by every test (askOracle), so the
  // tests fail one by one instead of being reported as skipped.
  beforeAll(() => {
    try {
      // content-addressed cache outside the work tree (infra/tools/go.ts): built once per oracle change
      oracleBinary = goBinary(ORACLE_DIR, "quantity-oracle", { args: ["-mod=readonly"] });
    } catch (error) {
      buildError = new Error(`cannot build the Go oracle in ${ORACLE_DIR}: ${(error as Error).message}`);
    }
  }, 300_000);

  it("the oracle answers like apimachinery", () => {
    // "raw" shows why the oracle clears ParseQuantity's string cache, and why
    // inputs go in as plain decimals: an "e" exponent selects DecimalExponent.
    expect(askOracle(["1.5", "12.345", "0.0000000001", "1e3", "abc"])).toEqual([
      { ok: true, string: "1500m", raw: "1500m", milli: "1500", dec: "1.5" },
      { ok: true, string: "12345m", raw: "12.345", milli: "12345", dec: "12.345" },
      { ok: true, string: "1n", raw: "1n", milli: "1", dec: "0.000000001" },
      { ok: true, string: "1e3", raw: "1e3", milli: "1000000", dec: "1000" },
      { ok: false, error: expect.stringContaining("quantities must match") as unknown as string },
    ]);
  });

  it("unit-test corpus and boundary values", () => {
    const values = [...QUANTITY_CASES.map(([value]) => value), ...boundaryValues()];
    const { mismatches, lossyGo } = compareWithOracle(values);
    expect(mismatches.slice(0, 20), `${mismatches.length} of ${values.length} values disagree with Go`).toEqual([]);
    expect(lossyGo, "corpus must exercise Go's lossy ≥1e21 String()").toBeGreaterThan(0);
  });

  it("fitsMilliValue accepts only values apimachinery reads back with the right MilliValue (generated near the boundaries)", () => {
    const values = [
      ...QUANTITY_CASES.map(([value]) => value),
      ...boundaryValues(),
      ...generatedValues(),
      ...guardBoundaryValues(),
    ];
    const accepted = values.filter((v) => fitsMilliValue(v));
    const refused = values.filter((v) => !fitsMilliValue(v));
    const answers = askOracle(accepted.map((v) => formatQuantity(v)));
    const wrong = accepted
      .map((v, i) => ({ value: label(v), served: formatQuantity(v), want: String(faithfulMilliValue(v)), go: answers[i]?.milli ?? answers[i]?.error }))
      .filter((r) => r.go !== r.want);
    expect(wrong.slice(0, 20), `${wrong.length} of ${accepted.length} accepted values are misread by Go (seed ${SEED})`).toEqual([]);
    // The guard is not vacuous: both sides of the line are exercised, and the
    // refused side holds values Go really misreads (the example first).
    expect(accepted.length).toBeGreaterThan(5000);
    expect(refused.length).toBeGreaterThan(1000);
    const refusedAnswers = askOracle(refused.map((v) => formatQuantity(v)));
    const misreadRefused = refused.filter((v, i) => refusedAnswers[i]?.milli !== String(faithfulMilliValue(v)));
    expect(misreadRefused.length).toBeGreaterThan(100);
    expect(fitsMilliValue("-1563536821837.1743")).toBe(false);
    expect(askOracle(["-1563536821837174300u"])[0]).toMatchObject({ ok: true, milli: "4436424428138" });
  });

  it(`${GENERATED_DECIMALS} generated decimals and ${GENERATED_DOUBLES} doubles (seed ${SEED})`, () => {
    const values = generatedValues();
    const { mismatches } = compareWithOracle(values);
    expect(
      mismatches.slice(0, 20),
      `${mismatches.length} of ${values.length} values disagree with Go (QUANTITY_ORACLE_SEED=${SEED})`,
    ).toEqual([]);
  });
});
