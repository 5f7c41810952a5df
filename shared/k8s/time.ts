/**
 * Strict RFC 3339 timestamps, for every time a backend sends as text
 * (Cloud Monitoring `interval.endTime`/`startTime`, IAM Credentials
 * `expireTime`, a bridge's `ExternalMetricValue.timestamp` read by the proxy).
 *
 * `Date.parse` is not a validator: V8 takes `2026-02-30T00:00:00Z` as
 * 2 March, and reads many forms RFC 3339 does not allow. This is the RFC 3339
 * §5.6 `date-time` grammar, checked against the real Gregorian calendar
 * (§5.7: month lengths, leap years — divisible by 4, except centuries not
 * divisible by 400):
 *
 * ```
 * date-time  = full-date "T" full-time
 * full-date  = 4DIGIT "-" 2DIGIT(01-12) "-" 2DIGIT(01-28/29/30/31)
 * full-time  = 2DIGIT(00-23) ":" 2DIGIT(00-59) ":" 2DIGIT(00-59) ["." 1*DIGIT] time-offset
 * time-offset = "Z" / ("+" / "-") 2DIGIT(00-23) ":" 2DIGIT(00-59)
 * ```
 *
 * Narrower than the RFC in two places, as Go's `time.Parse(time.RFC3339, …)`
 * (`time/format_rfc3339.go`) is — the HPA and kube-apiserver parse these
 * times with it, so what Go refuses is refused here: second `60` (a leap
 * second, §5.7) and lower-case `t`/`z` (allowed by ABNF's case-insensitive
 * strings, §5.6 NOTE). The space for `T` of the §5.6 NOTE is refused too.
 */

/** The §5.6 shape; the ranges and the calendar are checked after. */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))$/;
/** Longest accepted text (a 9-digit fraction and an offset is 35 characters; generous for longer fractions). */
const MAX_LENGTH = 64;
const DAY_MS = 86_400_000;

/** Whether `year` is a Gregorian leap year (RFC 3339 §5.7, Appendix C). */
export function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

/**
 * Days in `month` (1–12) of `year` (RFC 3339 §5.7 table).
 *
 * @throws RangeError when `month` is not 1–12
 */
export function daysInMonth(year: number, month: number): number {
  if (!Number.isInteger(month) || month < 1 || month > 12) throw new RangeError(`month ${month} is not 1–12`);
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * Days from 1970-01-01 to `year-month-day` in the proleptic Gregorian
 * calendar (negative before 1970). H. Hinnant's `days_from_civil`
 * ("chrono-Compatible Low-Level Date Algorithms"), so years 0–99 are what
 * they say (unlike `Date.UTC`, which maps them to 1900–1999).
 */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

/**
 * Parse a strict RFC 3339 `date-time` (see the module comment).
 *
 * @param text e.g. `2026-02-28T23:59:59.123456789Z`, `2026-03-01T08:00:00+09:00`
 * @returns ms since the Unix epoch (UTC; a fraction beyond milliseconds is
 *   truncated), or undefined when `text` is not a valid RFC 3339 time or the
 *   date does not exist (`2026-02-30`, `2100-02-29`, hour 24, second 60, an
 *   offset of `+24:00`)
 */
export function parseRfc3339(text: unknown): number | undefined {
  if (typeof text !== "string" || text.length > MAX_LENGTH) return undefined;
  const m = DATE_TIME.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (m[8] === undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  const ms = Number((m[7] ?? "").padEnd(3, "0").slice(0, 3));
  return daysFromCivil(year, month, day) * DAY_MS + ((hour * 60 + minute - offsetMinutes) * 60 + second) * 1000 + ms;
}
