/**
 * Exact decimal arithmetic and canonical Kubernetes `resource.Quantity`
 * formatting (Decimal SI), plus the `MilliValue()` the HPA reads back.
 *
 * Reference: k8s.io/apimachinery `pkg/api/resource/quantity.go`
 * (ParseQuantity, CanonicalizeBytes, String, MilliValue, ScaledValue),
 * `amount.go` (int64Amount / infDecAmount AsCanonicalBytes, AsScaledInt64),
 * `math.go` (scaledValue, positiveScaleInt64, negativeScaleInt64) and
 * `suffix.go` (the Decimal SI suffix table). Checked against v0.37.2 by
 * `test/wire/quantity.oracle.test.ts`, which runs the real Go code.
 *
 * Everything is BigInt arithmetic on decimal digits; no value is ever
 * formatted through binary floating point.
 */

/**
 * A decimal number as exact sign/digits: value = mantissa × 10^exponent.
 *
 * - `mantissa`: signed integer carrying the sign and all significant digits.
 * - `exponent`: power of ten, a safe integer (|exponent| ≤ {@link MAX_DECIMAL_EXPONENT}
 *   is enforced wherever a Decimal is consumed).
 *
 * Values returned by this module are normalized: the mantissa has no trailing
 * zero digits, and zero is `{ mantissa: 0n, exponent: 0 }`, so two equal
 * numbers compare equal field by field. Inputs need not be normalized.
 */
export interface Decimal {
  readonly mantissa: bigint;
  readonly exponent: number;
}

/**
 * Thrown for text that is not a plain decimal number, non-finite numbers,
 * malformed {@link Decimal} objects and magnitudes outside the supported
 * bounds. `message` names the offending input.
 */
export class QuantityError extends Error {
  override name = "QuantityError";
}

/**
 * Largest |exponent| {@link parseDecimal} accepts in the exponent part of
 * decimal text (`1e1000` is accepted, `1e1001` is not). With
 * {@link MAX_TEXT_DIGITS} it bounds the BigInts hostile input can make us build.
 */
export const MAX_TEXT_EXPONENT = 1000;
/** Largest number of digits (integer part + fraction part) {@link parseDecimal} accepts. */
export const MAX_TEXT_DIGITS = 1000;
/**
 * Largest |exponent| a {@link Decimal} may carry when passed to
 * {@link addDecimals}, {@link formatQuantity}, {@link milliValue} or
 * {@link formatDecimal}; anything parsed from text stays far inside it.
 */
export const MAX_DECIMAL_EXPONENT = 100_000;

const ZERO: Decimal = Object.freeze({ mantissa: 0n, exponent: 0 });
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const MILLI_DIVISOR = 1_000_000n; // nano (scale 9) → milli (scale 3)
/** positiveScaleInt64 (math.go) scales with a dedicated, wrapping multiply. */
const WRAPPING_SCALES: ReadonlySet<number> = new Set([1, 2, 3, 6, 9]);

/** Decimal SI suffixes by base-10 exponent (apimachinery suffix.go, decSuffixes). */
const DECIMAL_SI_SUFFIX: ReadonlyMap<number, string> = new Map([
  [-9, "n"],
  [-6, "u"],
  [-3, "m"],
  [0, ""],
  [3, "k"],
  [6, "M"],
  [9, "G"],
  [12, "T"],
  [15, "P"],
  [18, "E"],
]);
const MAX_SUFFIX_EXPONENT = 18; // "E"
const NANO_EXPONENT = -9; // resource.Nano: ParseQuantity's precision

const POW10_CACHE: bigint[] = [];
function pow10(k: number): bigint {
  if (k < 64) {
    let p = POW10_CACHE[k];
    if (p === undefined) {
      p = 10n ** BigInt(k);
      POW10_CACHE[k] = p;
    }
    return p;
  }
  return 10n ** BigInt(k);
}

function abs(n: bigint): bigint {
  return n < 0n ? -n : n;
}

function digitCount(n: bigint): number {
  return n === 0n ? 1 : abs(n).toString().length;
}

/** Moves trailing zero digits of the mantissa into the exponent; zero → {0n, 0}. */
function normalize(mantissa: bigint, exponent: number): Decimal {
  if (mantissa === 0n) return ZERO;
  const digits = mantissa.toString();
  let end = digits.length;
  while (digits.charCodeAt(end - 1) === 48 /* "0" */) end--;
  const zeros = digits.length - end;
  if (zeros === 0) return { mantissa, exponent };
  return { mantissa: BigInt(digits.slice(0, end)), exponent: exponent + zeros };
}

function checkDecimal(d: Decimal, what: string): Decimal {
  if (
    typeof d !== "object" ||
    d === null ||
    typeof d.mantissa !== "bigint" ||
    typeof d.exponent !== "number" ||
    !Number.isSafeInteger(d.exponent)
  ) {
    throw new QuantityError(`${what}: not a Decimal {mantissa: bigint, exponent: integer}`);
  }
  if (Math.abs(d.exponent) > MAX_DECIMAL_EXPONENT) {
    throw new QuantityError(`${what}: exponent ${d.exponent} is outside ±${MAX_DECIMAL_EXPONENT}`);
  }
  return d;
}

const DECIMAL_TEXT = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?$/;

/**
 * Parses a backend's decimal text exactly.
 *
 * Grammar: optional sign `+`/`-`, digits, optional `.` and fraction digits,
 * optional exponent `e`/`E` with optional sign and digits — `"15"`, `"-0.08"`,
 * `"1.5e3"`, `"1E-7"`, `"1e+21"` (ECMAScript/Go float output). At least one
 * digit must appear before or after the point (`".5"` and `"5."` are
 * accepted). No whitespace, no suffixes, no hex, no `NaN`/`Infinity`.
 *
 * @param text decimal text, unitless.
 * @returns the exact value as a normalized {@link Decimal}; `-0` gives zero.
 * @throws {QuantityError} on any other text, on more than
 *   {@link MAX_TEXT_DIGITS} digits, or on an exponent beyond
 *   ±{@link MAX_TEXT_EXPONENT}.
 *
 * Plain text only: Kubernetes quantity suffixes (`1500m`, `1Ki`) are not
 * accepted here — this reads what metric backends send, not Quantities.
 */
export function parseDecimal(text: string): Decimal {
  if (typeof text !== "string") throw new QuantityError("parseDecimal: input is not a string");
  const shown = text.length > 40 ? `${JSON.stringify(text.slice(0, 40))}…` : JSON.stringify(text);
  // sign + digits + point + "e-1000": anything longer is over a bound anyway.
  if (text.length > MAX_TEXT_DIGITS + 8) {
    throw new QuantityError(`decimal number has more than ${MAX_TEXT_DIGITS} digits: ${shown}`);
  }
  const m = DECIMAL_TEXT.exec(text);
  if (m === null) throw new QuantityError(`not a decimal number: ${shown}`);
  const sign = m[1] ?? "";
  const intPart = m[2] ?? "";
  const fracPart = m[3] ?? "";
  const expPart = m[4];
  if (intPart.length + fracPart.length === 0) throw new QuantityError(`not a decimal number: ${shown}`);
  if (intPart.length + fracPart.length > MAX_TEXT_DIGITS) {
    throw new QuantityError(`decimal number has more than ${MAX_TEXT_DIGITS} digits: ${shown}`);
  }
  let exponent = 0;
  if (expPart !== undefined) {
    // Strip the sign and leading zeros before judging the size, so "1e-0000005" is fine.
    const expDigits = expPart.replace(/^[+-]?0*/, "");
    if (expDigits.length > 6 || Number(expDigits) > MAX_TEXT_EXPONENT) {
      throw new QuantityError(`decimal exponent outside ±${MAX_TEXT_EXPONENT}: ${shown}`);
    }
    exponent = expPart.startsWith("-") ? -Number(expDigits) : Number(expDigits);
  }
  const magnitude = BigInt(intPart + fracPart);
  return normalize(sign === "-" ? -magnitude : magnitude, exponent - fracPart.length);
}

/**
 * Converts a finite JS number to the decimal it was written as: the shortest
 * decimal that round-trips to the same double (ECMAScript Number::toString),
 * which recovers the text a JSON backend sent (`0.1` → 1×10^-1, not the
 * binary expansion 0.1000000000000000055511151231257827…).
 *
 * @param n finite number, unitless.
 * @returns normalized {@link Decimal}; `-0` gives zero.
 * @throws {QuantityError} on NaN, ±Infinity or a non-number.
 */
export function decimalFromNumber(n: number): Decimal {
  if (typeof n !== "number" || !Number.isFinite(n)) {
    throw new QuantityError(`not a finite number: ${String(n)}`);
  }
  return parseDecimal(String(n));
}

/**
 * Exact sum a + b.
 *
 * @returns normalized {@link Decimal}.
 * @throws {QuantityError} if either argument is not a well-formed Decimal
 *   (bigint mantissa, safe-integer exponent within ±{@link MAX_DECIMAL_EXPONENT}).
 */
export function addDecimals(a: Decimal, b: Decimal): Decimal {
  checkDecimal(a, "addDecimals");
  checkDecimal(b, "addDecimals");
  if (a.mantissa === 0n) return normalize(b.mantissa, b.exponent);
  if (b.mantissa === 0n) return normalize(a.mantissa, a.exponent);
  const exponent = Math.min(a.exponent, b.exponent);
  return normalize(
    a.mantissa * pow10(a.exponent - exponent) + b.mantissa * pow10(b.exponent - exponent),
    exponent,
  );
}

/**
 * Plain decimal text for a Decimal, without exponent or suffix
 * (`{15n, -1}` → `"1.5"`, `{1n, 3}` → `"1000"`, `{-8n, -2}` → `"-0.08"`).
 * The text denotes the value exactly and is accepted by both
 * {@link parseDecimal} and apimachinery's `resource.ParseQuantity`.
 *
 * @throws {QuantityError} on a malformed Decimal.
 */
export function formatDecimal(d: Decimal): string {
  checkDecimal(d, "formatDecimal");
  const { mantissa, exponent } = normalize(d.mantissa, d.exponent);
  const sign = mantissa < 0n ? "-" : "";
  const digits = abs(mantissa).toString();
  if (exponent >= 0) return mantissa === 0n ? "0" : sign + digits + "0".repeat(exponent);
  const point = digits.length + exponent;
  if (point > 0) return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
  return `${sign}0.${"0".repeat(-point)}${digits}`;
}

/** What formatQuantity and milliValue accept. */
export type QuantityInput = Decimal | number | bigint | string;

function toDecimal(value: QuantityInput): Decimal {
  switch (typeof value) {
    case "number":
      return decimalFromNumber(value);
    case "bigint":
      return normalize(value, 0);
    case "string":
      return parseDecimal(value);
    default:
      return checkDecimal(value, "quantity");
  }
}

/**
 * The canonical Decimal SI amount of a value, as apimachinery computes it:
 * `mantissa × 10^exponent` with exponent a multiple of 3 in [-9, 18].
 *
 * 1. ParseQuantity rounds to nano (10^-9) with inf.RoundUp — away from zero,
 *    so 1e-10 → 1n and -1.5e-9 → -2n (quantity.go, "rounds non-zero values
 *    up to the minimum representable value").
 * 2. It caps only BinarySI amounts at 2^63-1; Decimal SI is not capped.
 * 3. CanonicalizeBytes/AsCanonicalBytes (amount.go) move trailing zeros into
 *    the exponent, then lower the exponent to a multiple of 3.
 * 4. suffix.go has no Decimal SI suffix above E (10^18). For exponents ≥ 21
 *    apimachinery's String() silently drops the suffix (1e21 prints "1"),
 *    which changes the value; we keep the value and stay at E instead
 *    (1e21 → mantissa 1000, exponent 18, "1000E"), which ParseQuantity reads
 *    back as exactly 1e21.
 */
function canonicalAmount(d: Decimal): Decimal {
  let { mantissa, exponent } = d;
  if (mantissa === 0n) return ZERO;
  if (exponent < NANO_EXPONENT) {
    const drop = NANO_EXPONENT - exponent;
    const negative = mantissa < 0n;
    const magnitude = abs(mantissa);
    let rounded: bigint;
    if (digitCount(magnitude) <= drop) {
      rounded = 1n; // 0 < |value| < 1n: rounds away from zero to one nano
    } else {
      const divisor = pow10(drop);
      rounded = magnitude / divisor;
      if (magnitude % divisor !== 0n) rounded += 1n;
    }
    mantissa = negative ? -rounded : rounded;
    exponent = NANO_EXPONENT;
  }
  ({ mantissa, exponent } = normalize(mantissa, exponent));
  const down = ((exponent % 3) + 3) % 3;
  mantissa *= pow10(down);
  exponent -= down;
  if (exponent > MAX_SUFFIX_EXPONENT) {
    mantissa *= pow10(exponent - MAX_SUFFIX_EXPONENT);
    exponent = MAX_SUFFIX_EXPONENT;
  }
  return { mantissa, exponent };
}

/**
 * Canonical Decimal SI text of a value: what `resource.MustParse(<exact
 * decimal>).String()` prints (with the parse-time string cache cleared).
 *
 * Rules (apimachinery quantity.go ParseQuantity + CanonicalizeBytes, amount.go
 * AsCanonicalBytes, suffix.go):
 * - rounded to nano precision, away from zero: 1e-10 → `"1n"`,
 *   -1e-10 → `"-1n"`, -1.5e-9 → `"-2n"`;
 * - integer digits only, with the largest suffix of `n u m "" k M G T P E`
 *   that keeps the value exact: 1000 → `"1k"`, 1500 → `"1500"`,
 *   1.5 → `"1500m"`, 0.08 → `"80m"`, 1234567e6 → `"1234567M"`, 0 → `"0"`;
 * - no magnitude cap for Decimal SI (only BinarySI is capped at 2^63-1):
 *   1e19 → `"10E"`, 2^63 → `"9223372036854775808"`;
 * - deliberate deviation: from 10^21 on apimachinery's String() drops the
 *   missing suffix and prints a wrong value (1e21 → `"1"`); here the digits
 *   are kept at `E` instead (1e21 → `"1000E"`, 1.23e23 → `"123000E"`), which
 *   ParseQuantity reads back as the exact value.
 *
 * @param value a {@link Decimal}, a finite number (read via
 *   {@link decimalFromNumber}), a bigint, or decimal text (via {@link parseDecimal}).
 * @returns the Quantity string, e.g. `"1500m"`; never an exponent, never a fraction.
 * @throws {QuantityError} for input the converters reject (NaN, ±Infinity,
 *   malformed text or Decimal).
 */
export function formatQuantity(value: QuantityInput): string {
  const { mantissa, exponent } = canonicalAmount(toDecimal(value));
  if (mantissa === 0n) return "0";
  return `${mantissa}${DECIMAL_SI_SUFFIX.get(exponent) ?? ""}`;
}

/**
 * `Quantity.MilliValue()` of the quantity the HPA decodes from
 * `formatQuantity(value)` — i.e. `resource.ParseQuantity(formatQuantity(value))
 * .MilliValue()`, an int64, returned as a bigint in [-2^63, 2^63-1].
 *
 * Nominally ceil(value × 1000), but reproduced exactly as apimachinery
 * computes it (quantity.go ScaledValue, amount.go AsScaledInt64, math.go):
 * - canonical text with ≤ 18 digits parses to an int64Amount:
 *   - below milli precision (`n`/`u` suffix) the result is rounded **away
 *     from zero** (negativeScaleInt64): 1n → 1, -1n → -1 (not 0), -1500u → -2;
 *   - otherwise value×1000 exactly while it fits int64; on overflow
 *     (positiveScaleInt64) the `""`, `k` and `M` suffixes (×10^3, ×10^6,
 *     ×10^9) wrap modulo 2^64 (9223372036854776 → -9223372036854775616) and
 *     `G` and above give **0** (1E → 0);
 * - text with ≥ 19 digits parses to an inf.Dec (scale 9) and goes through
 *   math.go scaledValue, whose int64 conversions wrap modulo 2^64 (big.Int.Int64)
 *   and whose "ceil" truncates then adds 1, so large or long negative values
 *   give wrapped results: 9223372036854775807 → -1000.
 * Only |value| below about 9.22e15 (2^63 milli) is read faithfully.
 *
 * @param value as for {@link formatQuantity}.
 * @throws {QuantityError} as for {@link formatQuantity}.
 */
export function milliValue(value: QuantityInput): bigint {
  const { mantissa, exponent } = canonicalAmount(toDecimal(value));
  if (mantissa === 0n) return 0n;
  if (digitCount(mantissa) <= 18) {
    // int64Amount{value: mantissa, scale: exponent}.AsScaledInt64(Milli)
    if (exponent >= -3) {
      // positiveScaleInt64: the ×10^1,2,3,6,9 cases return the wrapped
      // product on overflow; the generic ×10 loop returns 0.
      const shift = exponent + 3;
      const product = mantissa * pow10(shift);
      if (product >= INT64_MIN && product <= INT64_MAX) return product;
      return WRAPPING_SCALES.has(shift) ? BigInt.asIntN(64, product) : 0n;
    }
    const divisor = pow10(-3 - exponent);
    let result = mantissa / divisor; // truncates toward zero, like Go
    if (mantissa % divisor !== 0n) result += mantissa < 0n ? -1n : 1n;
    return result;
  }
  // infDecAmount rounded to scale 9: scaledValue(unscaled, 9, 3)
  const unscaled = mantissa * pow10(exponent - NANO_EXPONENT);
  if (unscaled < INT64_MAX) {
    const low = BigInt.asIntN(64, unscaled); // big.Int.Int64()
    const result = low / MILLI_DIVISOR;
    return low % MILLI_DIVISOR !== 0n ? result + 1n : result;
  }
  const quotient = BigInt.asIntN(64, unscaled / MILLI_DIVISOR);
  return BigInt.asIntN(64, unscaled % MILLI_DIVISOR !== 0n ? quotient + 1n : quotient);
}

/**
 * Longest canonical mantissa, in digits, that apimachinery reads through its
 * exact int64 fast path: `ParseQuantity` keeps an `int64Amount` only when the
 * digits fit `int64` (quantity.go, `parseQuantityString` then
 * `int64Amount`/`infDecAmount`; at most 18 digits always fit). With 19 or
 * more digits it switches to `inf.Dec`, whose `MilliValue` goes through
 * math.go `scaledValue` with wrapping `big.Int.Int64()` conversions and a
 * truncate-then-add-one "ceil" that is wrong for negative values.
 */
export const MAX_EXACT_QUANTITY_DIGITS = 18;

/**
 * Whether the HPA reads `value` faithfully: apimachinery, parsing our
 * canonical string ({@link formatQuantity}), must return from
 * `Quantity.MilliValue()` exactly value × 1000 rounded away from zero.
 * That holds when both:
 * - the canonical mantissa has at most {@link MAX_EXACT_QUANTITY_DIGITS}
 *   digits (int64Amount, whose AsScaledInt64 is exact); longer strings take
 *   the inf.Dec path, which misreads e.g. `-1563536821837.1743` —
 *   canonical `-1563536821837174300u`, read back as MilliValue()
 *   4436424428138, sign flipped;
 * - |value| × 1000, rounded away from zero, is ≤ 2^63−1 (|value| below
 *   about 9.22e15): past it {@link milliValue} wraps or gives 0
 *   (apimachinery math.go `positiveScaleInt64`).
 * Proven against the real apimachinery by `test/wire/quantity.oracle.test.ts`:
 * every value accepted here is read back with the right MilliValue.
 *
 * @throws {QuantityError} as for {@link formatQuantity}
 */
export function fitsMilliValue(value: QuantityInput): boolean {
  const { mantissa, exponent } = canonicalAmount(toDecimal(value));
  if (digitCount(mantissa) > MAX_EXACT_QUANTITY_DIGITS) return false;
  return abs(exactMilliValue(mantissa, exponent)) <= INT64_MAX;
}

/**
 * The milli-value a faithful reader gets from a value: value × 1000 rounded
 * away from zero (ParseQuantity rounds to nano away from zero, MilliValue
 * then rounds to milli away from zero; the two compose into one rounding),
 * with no int64 bound. `fitsMilliValue(v)` implies `milliValue(v) ===
 * faithfulMilliValue(v)`.
 *
 * @throws {QuantityError} as for {@link formatQuantity}
 */
export function faithfulMilliValue(value: QuantityInput): bigint {
  const { mantissa, exponent } = canonicalAmount(toDecimal(value));
  return exactMilliValue(mantissa, exponent);
}

function exactMilliValue(mantissa: bigint, exponent: number): bigint {
  const magnitude = abs(mantissa);
  const shift = exponent + 3;
  let milli: bigint;
  if (shift >= 0) {
    milli = magnitude * pow10(shift);
  } else {
    const divisor = pow10(-shift);
    milli = magnitude / divisor + (magnitude % divisor === 0n ? 0n : 1n);
  }
  return mantissa < 0n ? -milli : milli;
}
