/**
 * The `metric` patterns of ExternalMetricPolicy rules.
 *
 * Decision: patterns are compiled with RE2JS (the `re2js` package, a port of
 * Go's `regexp`/RE2), not with the JavaScript `RegExp` engine. RE2 matches in
 * time linear in the input (a DFA, falling back to a Thompson NFA), so no
 * pattern an admin writes — `(a+)+$`, `(x+x+)+y`, … — can make the request
 * path slow; and RE2JS is plain JavaScript, so it runs unchanged on Node,
 * Lambda and Cloudflare Workers. The price is RE2 syntax
 * (https://github.com/google/re2/wiki/Syntax): no backreferences (`\1`) and
 * no lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`). Those are refused when the
 * policy is loaded, with a message saying why.
 *
 * Matching: the pattern must match the WHOLE metric name (as if written
 * `^(?:pattern)$`), case-insensitively, against the name's lookup key — the
 * requested name lowercased with `|` and `\|` written as `/`
 * (`shared/metric-name.ts` `metricKey`).
 */
import { RE2JS } from "re2js";

/** Longest pattern accepted, characters. */
export const MAX_PATTERN_LENGTH = 1024;

/**
 * Largest compiled program accepted, RE2 instructions. Matching costs at
 * most (name length × program size) steps; with names of at most 512
 * characters this keeps one test well under a millisecond. (`a{2,1000}` is
 * 2000 instructions.)
 */
export const MAX_PROGRAM_SIZE = 4096;

/** A compiled policy pattern. */
export interface MetricPattern {
  /** the pattern as written */
  readonly source: string;
  /** whether the pattern matches the whole lookup key (case-insensitive) */
  matches(metricKey: string): boolean;
}

/** Raised by {@link compileMetricPattern}; `message` says what is wrong and why. */
export class PatternError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PatternError";
  }
}

/** Syntax RE2 refuses that admins often reach for, with the reason. */
const UNSUPPORTED: readonly { test: RegExp; what: string }[] = [
  { test: /\\[1-9]/, what: "backreferences (\\1 … \\9)" },
  { test: /\\k</, what: "named backreferences (\\k<name>)" },
  { test: /\(\?<?[=!]/, what: "lookaround ((?=…), (?!…), (?<=…), (?<!…))" },
];

/**
 * Compile a rule's `metric` pattern.
 *
 * @param source RE2 syntax, at most {@link MAX_PATTERN_LENGTH} characters
 * @returns a matcher that tests whole lookup keys in linear time
 * @throws PatternError when the pattern is too long, does not compile
 *   (message from RE2JS, e.g. `missing closing ]`), uses backreferences or
 *   lookaround, or compiles to more than {@link MAX_PROGRAM_SIZE} instructions
 */
export function compileMetricPattern(source: string): MetricPattern {
  if (source.length > MAX_PATTERN_LENGTH) {
    throw new PatternError(`pattern is longer than ${MAX_PATTERN_LENGTH} characters`);
  }
  let re: RE2JS;
  try {
    re = RE2JS.compile(source, RE2JS.CASE_INSENSITIVE);
  } catch (err) {
    // RE2JS compiles CASE_INSENSITIVE as the pattern prefixed with "(?i)" and
    // quotes that text in some errors ("missing closing ): `(?i)(a`"); the
    // admin wrote no "(?i)", so it is taken out of the message.
    const reason = (err as Error).message.replace(/`\(\?i\)/g, "`");
    const unsupported = UNSUPPORTED.find((u) => u.test.test(source));
    if (unsupported !== undefined) {
      throw new PatternError(
        `${unsupported.what} are not supported: policy patterns use RE2 syntax, which matches in linear time (${reason})`,
      );
    }
    throw new PatternError(`invalid RE2 pattern: ${reason}`);
  }
  const size = re.programSize();
  if (size > MAX_PROGRAM_SIZE) {
    throw new PatternError(`pattern compiles to ${size} instructions, more than ${MAX_PROGRAM_SIZE}; simplify it`);
  }
  return { source, matches: (metricKey: string) => re.testExact(metricKey) };
}
