/**
 * Strict RFC 3339 parsing (shared/k8s/time.ts), against a brute-force
 * calendar: every day from 1600-01-01 to 2400-12-31 enumerated one by one
 * with the JavaScript Date object's UTC getters (not its parser), and the
 * instant computed with `setUTCFullYear`/`setUTCHours` — an implementation
 * that shares nothing with the parser's arithmetic.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { daysInMonth, isLeapYear, parseRfc3339 } from "../../shared/k8s/time.ts";
import { fcRuns } from "../helpers/fc.ts";

const DAY_MS = 86_400_000;
/** Every calendar date from 1600 to 2400, as "YYYY-MM-DD", walked a day at a time. */
const CALENDAR = (() => {
  const days = new Set<string>();
  const start = new Date(0);
  start.setUTCFullYear(1600, 0, 1);
  const end = new Date(0);
  end.setUTCFullYear(2401, 0, 1);
  for (let t = start.getTime(); t < end.getTime(); t += DAY_MS) {
    const d = new Date(t);
    days.add(`${String(d.getUTCFullYear()).padStart(4, "0")}-${String(d.getUTCMonth() + 1).padStart(2, "0")}-${String(d.getUTCDate()).padStart(2, "0")}`);
  }
  return days;
})();

const pad = (n: number, w = 2) => String(n).padStart(w, "0");

/** The instant by Date's own field arithmetic (no parsing), ms. */
function oracleMs(y: number, mo: number, d: number, h: number, mi: number, s: number, ms: number, offsetMinutes: number): number {
  const t = new Date(0);
  t.setUTCFullYear(y, mo - 1, d);
  t.setUTCHours(h, mi - offsetMinutes, s, ms);
  return t.getTime();
}

describe("RFC 3339 date-time, strictly", () => {
  it.each([
    ["2026-02-28T23:59:59Z", Date.UTC(2026, 1, 28, 23, 59, 59)],
    ["2024-02-29T00:00:00Z", Date.UTC(2024, 1, 29)],
    ["2000-02-29T12:00:00Z", Date.UTC(2000, 1, 29, 12)],
    ["2026-03-01T08:00:00+09:00", Date.UTC(2026, 1, 28, 23)],
    ["2026-03-01T00:30:00-00:30", Date.UTC(2026, 2, 1, 1)],
    ["2024-05-01T10:00:00.123456789Z", Date.UTC(2024, 4, 1, 10, 0, 0, 123)],
    ["2024-05-01T10:00:00.9Z", Date.UTC(2024, 4, 1, 10, 0, 0, 900)],
    ["1970-01-01T00:00:00Z", 0],
    ["0001-01-01T00:00:00Z", -62135596800000],
    ["9999-12-31T23:59:59Z", 253402300799000],
  ])("reads %s", (text, ms) => {
    expect(parseRfc3339(text)).toBe(ms);
  });

  it.each([
    "2026-02-30T00:00:00Z", // Date.parse: 2 March
    "2026-02-29T00:00:00Z", // not a leap year
    "2100-02-29T00:00:00Z", // a century not divisible by 400
    "2026-04-31T00:00:00Z",
    "2026-00-10T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-01-00T00:00:00Z",
    "2026-01-01T24:00:00Z",
    "2026-01-01T00:60:00Z",
    "2026-01-01T00:00:60Z", // a leap second: Go's time.Parse refuses it
    "2026-01-01T00:00:00+24:00",
    "2026-01-01T00:00:00+05:60",
    "2026-01-01T00:00:00", // no offset
    "2026-01-01 00:00:00Z", // space for T
    "2026-01-01t00:00:00z",
    "2026-01-01T00:00:00.Z",
    "2026-01-01T00:00Z",
    "2026-1-01T00:00:00Z",
    "+02026-01-01T00:00:00Z",
    "2026-01-01T00:00:00+0100",
    "Thu, 01 Jan 2026 00:00:00 GMT",
    "2026-01-01",
    "",
    " 2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00Z\n",
    `2026-01-01T00:00:00.${"1".repeat(100)}Z`,
  ])("refuses %j", (text) => {
    expect(parseRfc3339(text)).toBeUndefined();
  });

  it("refuses what is not a string", () => {
    for (const v of [undefined, null, 0, 1_700_000_000_000, new Date(), {}]) expect(parseRfc3339(v)).toBeUndefined();
  });

  it("knows the calendar: leap years and month lengths agree with the day-by-day calendar from 1600 to 2400", () => {
    for (let y = 1600; y <= 2400; y++) {
      expect(isLeapYear(y), String(y)).toBe(CALENDAR.has(`${y}-02-29`));
      for (let m = 1; m <= 12; m++) {
        const n = daysInMonth(y, m);
        expect(CALENDAR.has(`${y}-${pad(m)}-${pad(n)}`), `${y}-${m}`).toBe(true);
        expect(CALENDAR.has(`${y}-${pad(m)}-${pad(n + 1)}`), `${y}-${m}`).toBe(false);
      }
    }
  });

  it("accepts exactly the dates of the calendar, at the instant Date's field arithmetic gives (property)", () => {
    fc.assert(
      fc.property(
        fc.record({
          y: fc.integer({ min: 1600, max: 2400 }),
          mo: fc.integer({ min: 0, max: 13 }),
          d: fc.integer({ min: 0, max: 32 }),
          h: fc.integer({ min: 0, max: 25 }),
          mi: fc.integer({ min: 0, max: 60 }),
          s: fc.integer({ min: 0, max: 61 }),
          frac: fc.option(fc.stringMatching(/^[0-9]{1,12}$/), { nil: undefined }),
          offset: fc.option(fc.record({ sign: fc.constantFrom("+", "-"), oh: fc.integer({ min: 0, max: 24 }), om: fc.integer({ min: 0, max: 60 }) }), { nil: undefined }),
        }),
        ({ y, mo, d, h, mi, s, frac, offset }) => {
          const text =
            `${pad(y, 4)}-${pad(mo)}-${pad(d)}T${pad(h)}:${pad(mi)}:${pad(s)}${frac !== undefined ? `.${frac}` : ""}` +
            (offset === undefined ? "Z" : `${offset.sign}${pad(offset.oh)}:${pad(offset.om)}`);
          const valid =
            CALENDAR.has(`${pad(y, 4)}-${pad(mo)}-${pad(d)}`) && h <= 23 && mi <= 59 && s <= 59 && (offset === undefined || (offset.oh <= 23 && offset.om <= 59));
          const got = parseRfc3339(text);
          if (!valid) {
            expect(got, text).toBeUndefined();
            return;
          }
          const ms = Number((frac ?? "").padEnd(3, "0").slice(0, 3));
          const offsetMinutes = offset === undefined ? 0 : (offset.sign === "-" ? -1 : 1) * (offset.oh * 60 + offset.om);
          expect(got, text).toBe(oracleMs(y, mo, d, h, mi, s, ms, offsetMinutes));
        },
      ),
      fcRuns(3000),
    );
  });

  it("reads back every instant written as toISOString, years 0001–9999 (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: -62135596800000, max: 253402300799999 }), (ms) => {
        expect(parseRfc3339(new Date(ms).toISOString())).toBe(ms);
      }),
      fcRuns(2000),
    );
  });

  it("never throws, whatever the text (property)", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (text) => {
        const got = parseRfc3339(text);
        expect(got === undefined || Number.isFinite(got)).toBe(true);
      }),
      fcRuns(2000),
    );
  });
});
