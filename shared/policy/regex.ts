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
 * Largest compiled program accepted, RE2 instructions (a second bound after
 * {@link MAX_PATTERN_COST}, which is checked before compiling). Matching
 * costs at most (name length × program size) steps.
 */
export const MAX_PROGRAM_SIZE = 4096;

/**
 * Most cost units ({@link patternCost}) of one pattern, checked BEFORE the
 * pattern is compiled, so a pattern that would take long to compile is
 * refused in microseconds. 2048 admits any pattern of at most
 * {@link MAX_PATTERN_LENGTH} characters without repeat counts or Unicode
 * classes, `a{1000}`, or four Unicode classes (`[\pL\pN]\pP\pS`); every
 * pattern seen in practice costs far less (`queue_messages_(ready|delayed)`:
 * 28). Measured (test/policy/policy.pattern-cost.test.ts prints it): the costliest
 * patterns under the bounds compile in a few ms.
 */
export const MAX_PATTERN_COST = 2048;

/**
 * Most variable repeats ({@link PatternCost.fanout}) of one pattern: RE2's
 * NFA keeps up to about this many threads alive at each character, so a match
 * costs about (name length × fanout) steps. 32 admits `(.*_){16}`,
 * `[a-z0-9_]{1,32}` or `(a+)+$` (2).
 */
export const MAX_PATTERN_FANOUT = 32;

/**
 * Most variable repeats of all the `metric` patterns of one policy together:
 * a request's first-rule lookup may try every rule, so this bounds what one
 * policy costs a read with a metric name not seen before (256 rules ending in
 * `.*` fit).
 */
export const MAX_POLICY_PATTERN_FANOUT = 256;

/** RE2's largest repeat count (`x{1000}`; re2 `parse.cc` kMaxRepeat). */
export const MAX_REPEAT_COUNT = 1000;

/**
 * Most cost units of all the `metric` patterns of one policy together (about 8
 * patterns at {@link MAX_PATTERN_COST}, or 32 Unicode classes; 256 rules of 60
 * units each fit): bounds
 * the time one policy object costs to compile, and a request's first-rule
 * lookup in one policy (every rule may be tried), whatever its rule count.
 */
export const MAX_POLICY_PATTERN_COST = 16_000;

/**
 * Cost units of one Unicode class (`\pL`, `\p{Greek}`, `\PN`, in or out of
 * brackets): RE2JS builds its rune ranges, case-folded, at every occurrence
 * (\pL: ~650 ranges, ~0.3–1 ms each time), and each copy makes the lazy DFA's
 * tables wider; a literal character costs 1.
 */
export const UNICODE_CLASS_COST = 500;
/** Cost units of a Perl or ASCII class (`\d`, `\w`, `\s`, `[[:alpha:]]`, negations): at most a few ranges. */
export const PERL_CLASS_COST = 4;

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
 * @throws PatternError when the pattern is too long, costs more than
 *   {@link MAX_PATTERN_COST} ({@link patternCost}, before compiling), does not
 *   compile (message from RE2JS, e.g. `missing closing ]`), uses
 *   backreferences or lookaround, or compiles to more than
 *   {@link MAX_PROGRAM_SIZE} instructions
 */
export function compileMetricPattern(source: string): MetricPattern {
  return compilePattern(source, RE2JS.CASE_INSENSITIVE);
}

/**
 * Compile a pattern that must match a cloud identifier whole, case
 * sensitively (a metric rule's `describes.allow`: queue URLs, ARNs), under
 * the same bounds and errors as {@link compileMetricPattern}.
 *
 * @throws PatternError as {@link compileMetricPattern}
 */
export function compileIdentifierPattern(source: string): MetricPattern {
  return compilePattern(source, 0);
}

function compilePattern(source: string, flags: number): MetricPattern {
  if (source.length > MAX_PATTERN_LENGTH) {
    throw new PatternError(`pattern is longer than ${MAX_PATTERN_LENGTH} characters`);
  }
  checkPatternCost(patternCost(source));
  let re: RE2JS;
  try {
    re = RE2JS.compile(source, flags);
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


/**
 * Refuse a pattern whose measured cost passes a bound.
 *
 * @throws PatternError naming the bound passed: a repeat count over
 *   {@link MAX_REPEAT_COUNT}, {@link MAX_PATTERN_COST} units or
 *   {@link MAX_PATTERN_FANOUT} variable repeats
 */
export function checkPatternCost(cost: PatternCost): void {
  if (cost.maxCount > MAX_REPEAT_COUNT) {
    throw new PatternError(`invalid repeat count: RE2 accepts at most {${MAX_REPEAT_COUNT}}, this pattern has {${cost.maxCount}}`);
  }
  if (cost.units > MAX_PATTERN_COST) {
    throw new PatternError(
      `pattern is too costly: ${cost.units} units, more than ${MAX_PATTERN_COST} (each character 1, a Perl class such as \\w ${PERL_CLASS_COST}, ` +
        `a Unicode class such as \\pL ${UNICODE_CLASS_COST}, multiplied by the repeat counts around it); simplify it`,
    );
  }
  if (cost.fanout > MAX_PATTERN_FANOUT) {
    throw new PatternError(
      `pattern is too costly to match: ${cost.fanout} variable repeats (*, +, ?, the optional copies of {n,m}, multiplied by the repeat counts around them), ` +
        `more than ${MAX_PATTERN_FANOUT}; simplify it`,
    );
  }
}

/**
 * Check the `metric` patterns of one policy together against
 * {@link MAX_POLICY_PATTERN_COST} and {@link MAX_POLICY_PATTERN_FANOUT},
 * before any is compiled (each pattern's own bounds are
 * {@link compileMetricPattern}'s). Values that are not strings, longer
 * than {@link MAX_PATTERN_LENGTH} or over one pattern's bounds count nothing
 * (they are refused on their own, also before compiling).
 *
 * @param patterns the rules' `metric` values, in rule order
 * @returns undefined within the bounds, else the index of the rule at which
 *   the sum passes a bound and a message saying so
 */
export function checkPolicyPatterns(patterns: readonly unknown[]): { index: number; message: string } | undefined {
  let units = 0;
  let fanout = 0;
  for (const [index, p] of patterns.entries()) {
    if (typeof p !== "string" || p.length > MAX_PATTERN_LENGTH) continue;
    const cost = patternCost(p);
    // A pattern over its own bounds is refused on its own (compileMetricPattern), before compiling.
    if (cost.maxCount > MAX_REPEAT_COUNT || cost.units > MAX_PATTERN_COST || cost.fanout > MAX_PATTERN_FANOUT) continue;
    units += cost.units;
    fanout += cost.fanout;
    if (units > MAX_POLICY_PATTERN_COST) {
      return {
        index,
        message: `the policy's patterns are too costly together: rules[0..${index}] cost ${units} units, more than ${MAX_POLICY_PATTERN_COST} for one policy (see the cost of one pattern); split the policy or simplify its patterns`,
      };
    }
    if (fanout > MAX_POLICY_PATTERN_FANOUT) {
      return {
        index,
        message: `the policy's patterns are too costly to match together: rules[0..${index}] have ${fanout} variable repeats (*, +, ?, {n,m}), more than ${MAX_POLICY_PATTERN_FANOUT} for one policy; split the policy or simplify its patterns`,
      };
    }
  }
  return undefined;
}

/** What {@link patternCost} measures. */
export interface PatternCost {
  /** cost units: the size of what RE2JS compiles (see {@link patternCost}); at most {@link MAX_PATTERN_COST} accepted */
  units: number;
  /**
   * variable repeats: the copies of `*`, `+`, `?`, `{n,}` and the `m − n`
   * optional copies of `{n,m}`, multiplied by the repeat counts around them —
   * a bound of the threads RE2's NFA keeps alive at once, which a match pays
   * at every character; at most {@link MAX_PATTERN_FANOUT} accepted
   */
  fanout: number;
  /** the largest repeat count written (RE2 accepts at most 1000) */
  maxCount: number;
}

/**
 * An upper bound of what a pattern costs RE2JS to compile and to match,
 * read from its RE2 syntax (https://github.com/google/re2/wiki/Syntax)
 * without compiling it: microseconds for the longest pattern accepted.
 * (RE2JS exposes no parser of its own.)
 *
 * Units: a literal character, `.`, an anchor or `\b`: 1; a Perl or ASCII
 * class (`\d`, `\W`, `[[:alpha:]]`): {@link PERL_CLASS_COST}; a Unicode class
 * (`\pL`, `\p{Greek}`, `\PN`): {@link UNICODE_CLASS_COST}; a bracket class
 * `[…]`: 1 plus the sum of its items (a range `a-z` counts 1); a
 * concatenation or an alternation: the sum of its parts, plus 1 a branch; a
 * repetition multiplies what it repeats by the copies RE2 compiles
 * (`x{n,m}` m, `x{n}` and `x{n,}` n, at least 1; `*`, `+`, `?` 1), so nested
 * repetitions multiply (`(?:(?:x){10}){10}` is 100 copies); `\Q…\E` counts
 * its characters. Fanout: see {@link PatternCost.fanout}.
 *
 * It is an upper bound for valid patterns and a finite number for any text
 * (RE2JS then refuses what is invalid): an unclosed group or class counts as
 * closed at the end.
 *
 * @param source the pattern as written (callers accept at most {@link MAX_PATTERN_LENGTH} characters)
 * @returns units, fanout and the largest repeat count; never throws
 */
export function patternCost(source: string): PatternCost {
  return new CostScanner(source).total();
}

/** Cost of a piece of a pattern: units and fanout (see {@link PatternCost}). */
interface Piece {
  c: number;
  f: number;
}

/** The recursive-descent scanner behind {@link patternCost}. */
class CostScanner {
  readonly #s: string;
  #i = 0;
  #maxCount = 0;

  constructor(source: string) {
    this.#s = source;
  }

  total(): PatternCost {
    const sum: Piece = { c: 0, f: 0 };
    // A stray ")" closes a group that was never opened: RE2 refuses it; count on.
    for (;;) {
      add(sum, this.#alternation());
      if (this.#i >= this.#s.length) return { units: sum.c, fanout: sum.f, maxCount: this.#maxCount };
      this.#i++;
    }
  }

  /** branch ( `|` branch )* up to `)` or the end. */
  #alternation(): Piece {
    const sum = this.#concatenation();
    while (this.#s[this.#i] === "|") {
      this.#i++;
      add(sum, this.#concatenation());
      sum.c++;
    }
    return sum;
  }

  /** (atom repeat*)* up to `|`, `)` or the end. */
  #concatenation(): Piece {
    const sum: Piece = { c: 0, f: 0 };
    while (this.#i < this.#s.length) {
      const ch = this.#s[this.#i]!;
      if (ch === "|" || ch === ")") break;
      const item = this.#atom();
      for (;;) {
        const r = this.#repeat();
        if (r === undefined) break;
        item.c *= r.copies;
        item.f = item.f * r.copies + r.variable;
      }
      add(sum, item);
    }
    return sum;
  }

  /** One atom; `#i` moves past it. */
  #atom(): Piece {
    const s = this.#s;
    const ch = s[this.#i]!;
    if (ch === "(") {
      this.#i++;
      if (s[this.#i] === "?") {
        // (?flags) sets flags: no atom; (?flags:…), (?P<name>…), (?<name>…) open a group.
        const head = /^\?(?:P?<\w+>|[a-zA-Z-]*:|[a-zA-Z-]*\))/.exec(s.slice(this.#i, this.#i + 260));
        if (head !== null && head[0].endsWith(")")) {
          this.#i += head[0].length;
          return { c: 0, f: 0 };
        }
        this.#i += head !== null ? head[0].length : 1;
      }
      const inner = this.#alternation();
      if (s[this.#i] === ")") this.#i++;
      return inner;
    }
    if (ch === "[") return { c: this.#bracket(), f: 0 };
    if (ch === "\\") return { c: this.#escape(false), f: 0 };
    return { c: this.#literal(), f: 0 };
  }

  /**
   * A repetition operator at `#i` (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`,
   * each optionally followed by `?`): the copies it compiles and how many of
   * them are optional, or undefined when there is none (a `{` that is not a
   * repeat is a literal).
   */
  #repeat(): { copies: number; variable: number } | undefined {
    const s = this.#s;
    const ch = s[this.#i];
    let out: { copies: number; variable: number };
    if (ch === "*" || ch === "+" || ch === "?") {
      this.#i++;
      out = { copies: 1, variable: 1 };
    } else if (ch === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(s.slice(this.#i, this.#i + 24));
      if (m === null) return undefined;
      this.#i += m[0].length;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[3] === "" ? Infinity : Number(m[3]);
      this.#maxCount = Math.max(this.#maxCount, min, Number.isFinite(max) ? max : 0);
      out = Number.isFinite(max)
        ? { copies: Math.max(1, min, max), variable: Math.max(0, max - min) }
        : { copies: Math.max(1, min), variable: 1 };
    } else return undefined;
    if (s[this.#i] === "?") this.#i++;
    return out;
  }

  /**
   * An escape at `#i` (`\`): its units; `#i` moves past it.
   *
   * @param inClass inside `[…]` (where `\Q…\E` is not special)
   */
  #escape(inClass: boolean): number {
    const s = this.#s;
    const ch = s[this.#i + 1];
    if (ch === undefined) {
      this.#i++;
      return 1;
    }
    if (ch === "p" || ch === "P") {
      if (s[this.#i + 2] === "{") {
        const end = s.indexOf("}", this.#i + 3);
        this.#i = end < 0 ? s.length : end + 1;
      } else this.#i += 2 + ((s.codePointAt(this.#i + 2) ?? 0) > 0xffff ? 2 : 1);
      return UNICODE_CLASS_COST;
    }
    if (ch === "Q" && !inClass) {
      const end = s.indexOf("\\E", this.#i + 2);
      const text = end < 0 ? s.slice(this.#i + 2) : s.slice(this.#i + 2, end);
      this.#i = end < 0 ? s.length : end + 2;
      return Math.max(1, text.length);
    }
    if (ch === "x") {
      const m = /^\\x(?:\{[0-9A-Fa-f]*\}?|[0-9A-Fa-f]{0,2})/.exec(s.slice(this.#i, this.#i + 16))!;
      this.#i += m[0].length;
      return 1;
    }
    this.#i += s.codePointAt(this.#i + 1)! > 0xffff ? 3 : 2;
    return "dDsSwW".includes(ch) ? PERL_CLASS_COST : 1;
  }

  /** A bracket class at `#i` (`[`): 1 plus the sum of its items; `#i` moves past `]`. */
  #bracket(): number {
    const s = this.#s;
    this.#i++;
    let cost = 1;
    if (s[this.#i] === "^") {
      this.#i++;
      cost++;
    }
    // A "]" first in the class is a literal.
    if (s[this.#i] === "]") {
      this.#i++;
      cost++;
    }
    while (this.#i < s.length && s[this.#i] !== "]") {
      if (s.startsWith("[:", this.#i)) {
        const end = s.indexOf(":]", this.#i + 2);
        if (end >= 0) {
          this.#i = end + 2;
          cost += PERL_CLASS_COST;
          continue;
        }
      }
      cost += s[this.#i] === "\\" ? this.#escape(true) : this.#literal();
      // A range a-z counts as its low end: skip "-" and the high end.
      if (s[this.#i] === "-" && s[this.#i + 1] !== undefined && s[this.#i + 1] !== "]") {
        this.#i++;
        if (s[this.#i] === "\\") this.#escape(true);
        else this.#literal();
      }
    }
    if (s[this.#i] === "]") this.#i++;
    return cost;
  }

  /** One literal character (a surrogate pair is one): 1. */
  #literal(): number {
    this.#i += this.#s.codePointAt(this.#i)! > 0xffff ? 2 : 1;
    return 1;
  }
}

function add(sum: Piece, part: Piece): void {
  sum.c += part.c;
  sum.f += part.f;
}
