/**
 * Shared corpus for test/wire/quantity.test.ts (expected answers) and
 * test/wire/quantity.oracle.test.ts (which also checks every input against the Go
 * oracle in this directory).
 */
import type { Decimal, QuantityInput } from "../../shared/k8s/quantity.ts";

const dec = (mantissa: bigint, exponent: number): Decimal => ({ mantissa, exponent });

/**
 * Value → [canonical string, MilliValue()] as apimachinery v0.37.2 computes
 * them (confirmed by test/wire/quantity.oracle.test.ts, which also feeds every
 * input here to the Go oracle).
 */
export const QUANTITY_CASES: ReadonlyArray<readonly [QuantityInput, string, bigint]> = [
  // KUBERNETES.md examples
  [1000, "1k", 1_000_000n],
  [1500, "1500", 1_500_000n],
  [1.5, "1500m", 1500n],
  [0.5, "500m", 500n],
  [0.08, "80m", 80n],
  [1e9, "1G", 1_000_000_000_000n],
  [1234567e6, "1234567M", 1_234_567_000_000_000n],
  [1e-6, "1u", 1n],
  [0, "0", 0n],
  [-0, "0", 0n],
  [-1.5, "-1500m", -1500n],
  [0.1, "100m", 100n],
  [1e-10, "1n", 1n],
  // every suffix
  ["0.000000007", "7n", 1n],
  ["0.000042", "42u", 1n],
  ["0.25", "250m", 250n],
  ["7", "7", 7000n],
  ["12000", "12k", 12_000_000n],
  ["3e6", "3M", 3_000_000_000n],
  ["4e12", "4T", 4_000_000_000_000_000n],
  ["5e15", "5P", 5_000_000_000_000_000_000n],
  ["1e16", "10P", 0n], // 1e19 milli overflows int64: G and above give 0
  ["1e18", "1E", 0n],
  // exponent lowered to a multiple of 3, fraction digits become a smaller suffix
  ["12.345", "12345m", 12345n],
  ["1.5e3", "1500", 1_500_000n],
  ["15e4", "150k", 150_000_000n],
  ["1E-7", "100n", 1n],
  ["0.0000015", "1500n", 1n],
  ["123.456789", "123456789u", 123457n],
  ["1.000000001", "1000000001n", 1001n],
  // negatives
  [-1, "-1", -1000n],
  ["-0.001", "-1m", -1n],
  ["-0.08", "-80m", -80n],
  ["-0.0015", "-1500u", -2n], // MilliValue rounds away from zero below milli
  ["-0.0000015", "-1500n", -1n],
  ["-1234567e6", "-1234567M", -1_234_567_000_000_000n],
  // nano rounding: away from zero (inf.RoundUp) for both signs
  ["0.0000000001", "1n", 1n],
  ["-0.0000000001", "-1n", -1n],
  ["-0.0000000015", "-2n", -1n],
  ["0.0000000015", "2n", 1n],
  ["1.0000000001", "1000000001n", 1001n],
  ["-1.0000000001", "-1000000001n", -1001n],
  ["1e-300", "1n", 1n],
  [5e-324, "1n", 1n],
  // large values: Decimal SI is never capped
  ["1e19", "10E", 0n],
  ["1.5e21", "1500E", 0n],
  ["9223372036854775807", "9223372036854775807", -1000n], // MilliValue wraps (inf.Dec path)
  ["9223372036854775808", "9223372036854775808", 0n],
  ["-9223372036854775808", "-9223372036854775808", 0n],
  ["9223372036854775.807", "9223372036854775807m", 9_223_372_036_854_775_807n],
  ["9223372036854775.808", "9223372036854775808m", -9_223_372_036_854_775_808n],
  ["9223372036854775", "9223372036854775", 9_223_372_036_854_775_000n],
  ["9223372036854776", "9223372036854776", -9_223_372_036_854_775_616n], // ×1000 wraps
  ["-999999999999999999.999999999", "-999999999999999999999999999n", 6_930_898_827_445n],
  // ≥ 1e21: apimachinery's String() would drop the suffix ("1"); we keep the value
  ["1e21", "1000E", 0n],
  ["-1e21", "-1000E", 0n],
  ["1.23e23", "123000E", 0n],
  [1e300, `1${"0".repeat(282)}E`, 0n],
  // bigints and Decimals
  [1500n, "1500", 1_500_000n],
  [-(2n ** 63n), "-9223372036854775808", 0n],
  [dec(15n, -1), "1500m", 1500n],
  [dec(1500n, -4), "150m", 150n],
  [dec(0n, 42), "0", 0n],
];
