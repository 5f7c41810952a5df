import { describe, expect, it } from "vitest";
import {
  addDecimals,
  faithfulMilliValue,
  fitsMilliValue,
  decimalFromNumber,
  formatDecimal,
  formatQuantity,
  milliValue,
  parseDecimal,
  QuantityError,
  type Decimal,
} from "../../shared/k8s/quantity.ts";
import { QUANTITY_CASES } from "../oracle-quantity/cases.ts";

const dec = (mantissa: bigint, exponent: number): Decimal => ({ mantissa, exponent });

describe("formatQuantity / milliValue", () => {
  it.each(QUANTITY_CASES)("%s → %s", (value, text, milli) => {
    expect(formatQuantity(value)).toBe(text);
    expect(milliValue(value)).toBe(milli);
  });

  it("gives the same answer for every spelling of a value", () => {
    for (const v of [1.5, "1.5", "1.50", "15e-1", "0.15E1", "+1.5", dec(15n, -1), dec(150n, -2)]) {
      expect(formatQuantity(v)).toBe("1500m");
    }
    expect(formatQuantity(1500n)).toBe(formatQuantity("1.5e3"));
  });

  it("never emits exponents, fractions, or float noise", () => {
    for (const n of [0.1 + 0.2, 1 / 3, Math.PI, 1e-7, 123456789.123, Number.MAX_SAFE_INTEGER, Number.MAX_VALUE]) {
      expect(formatQuantity(n)).toMatch(/^-?(0|[1-9][0-9]*)(n|u|m|k|M|G|T|P|E)?$/);
    }
    expect(formatQuantity(0.1 + 0.2)).toBe("300000001n"); // 0.30000000000000004: any excess rounds up a nano
    expect(formatQuantity(addDecimals(decimalFromNumber(0.1), decimalFromNumber(0.2)))).toBe("300m");
    expect(formatQuantity(1 / 3)).toBe("333333334n");
    expect(formatQuantity(-1 / 3)).toBe("-333333334n");
  });

  it("rejects what is not a finite decimal", () => {
    for (const bad of [NaN, Infinity, -Infinity, "NaN", "Infinity", "", "1.5m", "0x10", " 1"]) {
      expect(() => formatQuantity(bad)).toThrow(QuantityError);
      expect(() => milliValue(bad)).toThrow(QuantityError);
    }
    expect(() => formatQuantity(dec(1n, 0.5))).toThrow(QuantityError);
    expect(() => formatQuantity(dec(1n, 1e9))).toThrow(QuantityError);
    expect(() => formatQuantity({ mantissa: 1, exponent: 0 } as unknown as Decimal)).toThrow(QuantityError);
    expect(() => formatQuantity(null as unknown as Decimal)).toThrow(QuantityError);
  });
});

describe("parseDecimal", () => {
  it.each([
    ["15", dec(15n, 0)],
    ["-0.08", dec(-8n, -2)],
    ["1.5e3", dec(15n, 2)],
    ["1E-7", dec(1n, -7)],
    ["1e+21", dec(1n, 21)],
    ["+2", dec(2n, 0)],
    ["1500", dec(15n, 2)],
    ["0.000", dec(0n, 0)],
    ["-0", dec(0n, 0)],
    ["-0.0e5", dec(0n, 0)],
    ["007.50", dec(75n, -1)],
    [".5", dec(5n, -1)],
    ["5.", dec(5n, 0)],
    ["1e-0000005", dec(1n, -5)],
    ["12345678901234567890123456789", dec(12345678901234567890123456789n, 0)],
    ["1e1000", dec(1n, 1000)],
    ["1e-1000", dec(1n, -1000)],
  ])("%s", (text, expected) => {
    expect(parseDecimal(text)).toEqual(expected);
  });

  it.each([
    "", "+", "-", ".", "e5", "1e", "1e+", "1.5.5", "1,5", " 1", "1 ", "1\n", "NaN", "nan", "Infinity",
    "-Infinity", "inf", "0x10", "0b1", "1_000", "1500m", "1Ki", "1.5k", "١", "1e1001", "1e-1001",
    "1e99999999999999999999", "1".repeat(1001),
  ])("rejects %j", (text) => {
    expect(() => parseDecimal(text)).toThrow(QuantityError);
  });

  it("rejects non-strings", () => {
    expect(() => parseDecimal(15 as unknown as string)).toThrow(QuantityError);
  });
});

describe("decimalFromNumber", () => {
  it.each([
    [0.1, dec(1n, -1)],
    [0.08, dec(8n, -2)],
    [1500, dec(15n, 2)],
    [-1.5, dec(-15n, -1)],
    [1e21, dec(1n, 21)],
    [1.5e-7, dec(15n, -8)],
    [5e-324, dec(5n, -324)],
    [Number.MAX_VALUE, dec(17976931348623157n, 292)],
    [2 ** 53 + 2, dec(9007199254740994n, 0)],
    [0, dec(0n, 0)],
    [-0, dec(0n, 0)],
  ])("%s", (n, expected) => {
    expect(decimalFromNumber(n)).toEqual(expected);
  });

  it("rejects NaN and infinities", () => {
    for (const n of [NaN, Infinity, -Infinity]) expect(() => decimalFromNumber(n)).toThrow(QuantityError);
    expect(() => decimalFromNumber("1" as unknown as number)).toThrow(QuantityError);
  });
});

describe("addDecimals", () => {
  it("is exact", () => {
    expect(addDecimals(decimalFromNumber(0.1), decimalFromNumber(0.2))).toEqual(dec(3n, -1));
    expect(addDecimals(dec(1n, 21), dec(1n, -9))).toEqual(dec(1_000_000_000_000_000_000_000_000_000_001n, -9));
    expect(addDecimals(dec(15n, -1), dec(-15n, -1))).toEqual(dec(0n, 0));
    expect(addDecimals(dec(5n, -1), dec(5n, -1))).toEqual(dec(1n, 0));
    expect(addDecimals(dec(0n, 7), dec(120n, 0))).toEqual(dec(12n, 1));
    expect(formatQuantity(addDecimals(parseDecimal("0.0000000005"), parseDecimal("0.0000000005")))).toBe("1n");
  });

  it("rejects malformed Decimals", () => {
    expect(() => addDecimals(dec(1n, Number.NaN), dec(1n, 0))).toThrow(QuantityError);
    expect(() => addDecimals(dec(1n, 0), dec(1n, 200_000))).toThrow(QuantityError);
  });
});

describe("formatDecimal", () => {
  it.each([
    [dec(15n, -1), "1.5"],
    [dec(1n, 3), "1000"],
    [dec(-8n, -2), "-0.08"],
    [dec(0n, 5), "0"],
    [dec(-1234n, -2), "-12.34"],
    [dec(1500n, -4), "0.15"],
  ])("%o → %s", (d, text) => {
    expect(formatDecimal(d)).toBe(text);
    expect(parseDecimal(formatDecimal(d))).toEqual(parseDecimal(text));
  });
});

describe("fitsMilliValue (what the HPA can read)", () => {
  it("accepts values whose milli value fits int64 and refuses larger ones", () => {
    expect(fitsMilliValue("9223372036854775")).toBe(true);
    expect(fitsMilliValue("-9223372036854775")).toBe(true);
    expect(fitsMilliValue("9223372036854776")).toBe(false); // ×1000 past 2^63-1
    expect(fitsMilliValue("1e16")).toBe(false);
    expect(fitsMilliValue(0)).toBe(true);
    expect(fitsMilliValue("1e-12")).toBe(true);
  });

  it("refuses canonical strings of more than 18 digits, which apimachinery reads through inf.Dec (sign flips, wraps)", () => {
    // issue 10: served as -1563536821837174300u, read back by client-go as MilliValue() = 4436424428138
    expect(formatQuantity("-1563536821837.1743")).toBe("-1563536821837174300u");
    expect(milliValue("-1563536821837.1743")).toBe(4436424428138n);
    expect(fitsMilliValue("-1563536821837.1743")).toBe(false);
    expect(fitsMilliValue(-1563536821837.1743)).toBe(false);
    // 19 digits: milli fits int64, but the inf.Dec path gives 1 for the negative one
    expect(milliValue("-9223372036854775.807")).toBe(1n);
    expect(fitsMilliValue("-9223372036854775.807")).toBe(false);
    expect(fitsMilliValue("9223372036854775.807")).toBe(false);
    // 18 digits: the exact int64 path, both signs
    expect(formatQuantity("-999999999999.999999")).toBe("-999999999999999999u");
    expect(fitsMilliValue("-999999999999.999999")).toBe(true);
    expect(milliValue("-999999999999.999999")).toBe(faithfulMilliValue("-999999999999.999999"));
    expect(faithfulMilliValue("-999999999999.999999")).toBe(-1000000000000000n);
  });
});
