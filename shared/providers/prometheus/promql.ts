/**
 * PromQL text the `prometheus` provider generates: label matchers built from
 * label sets, and the admin's query templates those matchers go into.
 *
 * The threat is injection and widening: a selector value a user wrote
 * (`queue in (a.b)`) or a config value must select exactly that series, never
 * close a string, never add a selector or an operator, and never match more
 * than itself (prometheus-adapter passes `in (…)` values into `=~` unescaped,
 * so `in (a.b)` also matches `aXb`). So:
 *
 * - label names are checked against the legacy charset (Prometheus
 *   `model.LabelName.IsValid` under legacy validation; Prometheus 3 also
 *   accepts quoted UTF-8 names, which we refuse);
 * - a value in a regexp matcher is escaped with Go's `regexp.QuoteMeta`
 *   (Prometheus anchors `=~` as `^(?s:…)$`, model/labels/regexp.go
 *   `NewFastRegexMatcher`, so an escaped literal matches itself only);
 * - every value is then written as a double-quoted PromQL string literal
 *   that the server's lexer (promql/parser/lex.go `lexString`, `lexEscape`)
 *   and unquoting (`strconv.Unquote` semantics) read back to exactly it;
 * - a template is parsed at config load with the Prometheus project's own
 *   grammar (`@prometheus-io/lezer-promql`) and must carry the placeholder
 *   as a matcher inside the braces of every vector selector.
 *
 * test/providers/prometheus.oracle.test.ts proves the generated text against
 * Prometheus's Go parser over arbitrary hostile strings.
 */
import { parser } from "@prometheus-io/lezer-promql";
import { isLabelName } from "./names.ts";

export { isLabelName, LABEL_NAME } from "./names.ts";

/** A lone UTF-16 surrogate: the string has no UTF-8 encoding. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Why `text` cannot be sent to Prometheus as a label value, or undefined when
 * it can: it must be valid Unicode (no lone UTF-16 surrogate), since
 * Prometheus reads UTF-8 and its lexer refuses an invalid rune
 * (promql/parser/lex.go `lexString`: "invalid UTF-8 rune").
 */
export function valueProblem(text: string): string | undefined {
  const m = LONE_SURROGATE.exec(text);
  return m ? `is not valid Unicode (a lone surrogate U+${m[0].charCodeAt(0).toString(16).toUpperCase()} at index ${m.index}), so it has no UTF-8 form Prometheus could read` : undefined;
}

/** @throws Error when {@link valueProblem} finds one */
function checkValue(text: string): void {
  const problem = valueProblem(text);
  if (problem !== undefined) throw new Error(`label value ${JSON.stringify(text)} ${problem}`);
}

/**
 * Go's `regexp.QuoteMeta` (regexp/regexp.go): every one of `\.+*?()|[]{}^$`
 * backslash-escaped, everything else as is, so the RE2 pattern matches
 * exactly the literal `text`.
 */
export function quoteRegex(text: string): string {
  return text.replace(/[\\.+*?()|[\]{}^$]/g, "\\$&");
}

/** Escapes with a short form in Go string literals (strconv.Unquote, lex.go `lexEscape`). */
const SHORT_ESCAPES: Readonly<Record<string, string>> = { "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * A double-quoted PromQL string literal that Prometheus reads back to exactly
 * `text`, on one line: `\` and `"` escaped, C0 controls and DEL as `\xHH`
 * (newline, CR and tab as `\n`, `\r`, `\t`), and U+FFFD as `\uFFFD`: the
 * lexer reads a raw U+FFFD as the decoder's error rune and refuses it
 * (promql/parser/lex.go `lexString`, `lexEscape`; the value is then unquoted
 * with `strconv.Unquote` semantics, util/strutil/quote.go). Other characters
 * are written as themselves.
 *
 * @throws Error when `text` is not valid Unicode (a lone surrogate)
 */
export function promqlString(text: string): string {
  checkValue(text);
  // eslint-disable-next-line no-control-regex
  const body = text.replace(/[\\"\u0000-\u001f\u007f\ufffd]/g, (c) => {
    const short = SHORT_ESCAPES[c];
    if (short !== undefined) return short;
    if (c === "\ufffd") return "\\uFFFD";
    return `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`;
  });
  return `"${body}"`;
}

/** @throws Error when `name` is not a legacy label name */
function checkLabelName(name: string): void {
  if (!isLabelName(name)) {
    throw new Error(`label name ${JSON.stringify(name)} is not a Prometheus label name: it must match [a-zA-Z_][a-zA-Z0-9_]* (names that need quoting are not supported)`);
  }
}

/**
 * One label's matcher: `name="v"` for one value; for several,
 * `name=~"q1|q2"` with each value escaped by {@link quoteRegex}, the
 * alternation written by {@link promqlString}. Values are deduplicated and
 * sorted (UTF-16 code unit order), so one set of values gives one text
 * whatever its order (identical reads batch and cache together).
 *
 * Prometheus anchors `=~` (`^(?s:q1|q2)$`, model/labels/regexp.go), so the
 * regexp matches exactly the listed values. As everywhere in Prometheus, a
 * value `""` also matches series without the label.
 *
 * @throws Error on a bad label name, no values, or a value that is not valid Unicode
 */
export function labelMatcher(name: string, values: readonly string[]): string {
  checkLabelName(name);
  if (values.length === 0) throw new Error(`label ${name}: no values to match`);
  const unique = [...new Set(values)].sort();
  if (unique.length === 1) return `${name}=${promqlString(unique[0]!)}`;
  for (const v of unique) checkValue(v);
  return `${name}=~${promqlString(unique.map(quoteRegex).join("|"))}`;
}

/** `a` before `b` in UTF-16 code unit order. */
const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The matchers text (comma-joined, no braces, e.g. `job="api",queue=~"a|b"`)
 * of fixed label values and per-label value lists: the fixed labels by name,
 * then the listed labels by name, each through {@link labelMatcher}. A label
 * in both gets both matchers (their intersection). Empty when both are empty.
 *
 * @throws Error on a bad label name, an empty value list, or a value that is not valid Unicode
 */
export function matchersText(fixed: Readonly<Record<string, string>>, byLabel: Readonly<Record<string, readonly string[]>>): string {
  const parts: string[] = [];
  for (const name of Object.keys(fixed).sort(byCodeUnits)) parts.push(labelMatcher(name, [fixed[name]!]));
  for (const name of Object.keys(byLabel).sort(byCodeUnits)) parts.push(labelMatcher(name, byLabel[name]!));
  return parts.join(",");
}

/** Where a template puts the matchers of the HPA's selector: prometheus-adapter's spelling, familiar to users. */
export const MATCHERS_PLACEHOLDER = "<<.LabelMatchers>>";

/** The matcher that stands for the placeholder while a template is parsed (only its position matters). */
const DUMMY_NAME = "__emb_placeholder__";
const DUMMY = `${DUMMY_NAME}="x"`;

/**
 * A query template the config cannot use. `line` and `column` are 1-based,
 * in the template's own text (the column counts Unicode code points);
 * `message` is `line L, column C: <reason>`, `reason` the same without the
 * position (for callers that show the position their own way).
 */
export class TemplateError extends Error {
  readonly line: number;
  readonly column: number;
  readonly reason: string;
  constructor(reason: string, line: number, column: number) {
    super(`line ${line}, column ${column}: ${reason}`);
    this.name = "TemplateError";
    this.line = line;
    this.column = column;
    this.reason = reason;
  }
}

/** An admin's query template, checked by {@link parseTemplate}. */
export interface QueryTemplate {
  /** the template as written, with its {@link MATCHERS_PLACEHOLDER}s */
  readonly text: string;
}

/** What {@link renderTemplate} needs of a checked template. */
interface Compiled {
  /** the text between the placeholders (one more than the placeholders) */
  readonly pieces: readonly string[];
  /** the template rendered with no matchers (each placeholder and a comma next to it removed), or an Error saying why it cannot be */
  readonly empty: string | Error;
  /** the range of every range selector and subquery, in text order */
  readonly ranges: readonly TemplateRange[];
}

/**
 * The range of one range selector (`m{…}[5m]`) or subquery
 * (`rate(m{…}[1m])[10m:30s]`, its first duration) of a template: how far
 * back from the evaluation time the samples it reads may be, beyond
 * `lookback_delta`, which bounds only instant selectors (Prometheus
 * `promql/engine.go`: a matrix selector reads `[t - range, t]`, whatever
 * the lookback delta).
 */
export interface TemplateRange {
  /** the duration as written, e.g. `5m` */
  readonly text: string;
  /** seconds; undefined for a duration expression that is not a literal (`[5m+1m]`) */
  readonly seconds: number | undefined;
  /** 1-based line and column of the duration in the template */
  readonly line: number;
  readonly column: number;
}

/** Seconds per unit of a Prometheus duration (`prometheus/common` `model/time.go` `ParseDuration`). */
const DURATION_UNITS: Readonly<Record<string, number>> = { y: 365 * 86_400, w: 7 * 86_400, d: 86_400, h: 3600, m: 60, s: 1, ms: 0.001 };

/**
 * Seconds of a duration literal as PromQL reads it: units in decreasing
 * order, each at most once (`1h30m`, `90s`, `500ms`), or a plain number of
 * seconds (`300`, `1.5`) (`model/time.go` `ParseDuration`; promql/parser
 * `lex.go` number durations).
 *
 * @returns undefined when `text` is not such a literal
 */
export function durationSeconds(text: string): number | undefined {
  if (/^\d+(?:\.\d+)?$/.test(text)) return Number(text);
  const m = /^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$/.exec(text);
  if (m === null || text === "") return undefined;
  const units = ["y", "w", "d", "h", "m", "s", "ms"];
  return units.reduce((sum, unit, i) => sum + Number(m[i + 1] ?? 0) * DURATION_UNITS[unit]!, 0);
}

/**
 * The range of every range selector and subquery of a template
 * ({@link TemplateRange}), in text order.
 *
 * @param template from {@link parseTemplate} (a plain `{ text }` is parsed now)
 * @throws TemplateError when a plain `{ text }` is not a valid template
 */
export function templateRanges(template: QueryTemplate): readonly TemplateRange[] {
  return (compiled.get(template) ?? compiled.get(parseTemplate(template.text))!).ranges;
}

const compiled = new WeakMap<QueryTemplate, Compiled>();

/** 1-based line and code point column of `offset` in `text`. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const lineStart = before.lastIndexOf("\n") + 1;
  let line = 1;
  for (const c of before) if (c === "\n") line++;
  return { line, column: [...before.slice(lineStart)].length + 1 };
}

/** Digits and bound of a numeric escape (promql/parser/lex.go `lexEscape`). */
const NUMERIC_ESCAPES: Readonly<Record<string, { skip: number; digits: number; base: number; max: number }>> = {
  x: { skip: 1, digits: 2, base: 16, max: 255 },
  u: { skip: 1, digits: 4, base: 16, max: 0x10ffff },
  U: { skip: 1, digits: 8, base: 16, max: 0x10ffff },
};

/**
 * Why a string literal token (as the grammar delimits it) is one Prometheus's
 * lexer refuses, with the offset in the token: unterminated (the grammar
 * lets `"…` run to the end of the line), an unknown or malformed escape, an
 * escaped surrogate or a code point past U+10FFFF, or a U+FFFD (the lexer's
 * invalid-rune marker) (promql/parser/lex.go `lexString`, `lexRawString`,
 * `lexEscape`).
 */
function stringLiteralProblem(token: string): { offset: number; message: string } | undefined {
  const quote = token[0]!;
  const fffd = token.indexOf("\ufffd");
  if (fffd >= 0) return { offset: fffd, message: "U+FFFD in a string: Prometheus reads it as an invalid UTF-8 rune (write \\uFFFD)" };
  if (quote === "`") return undefined; // raw: the grammar requires the closing backquote
  let i = 1;
  while (i < token.length) {
    const c = token[i]!;
    if (c === quote) return undefined;
    if (c !== "\\") {
      i++;
      continue;
    }
    const e = token[i + 1] ?? "";
    if (e !== "" && (e === quote || "abfnrtv\\".includes(e))) {
      i += 2;
      continue;
    }
    const numeric = /[0-7]/.test(e) ? { skip: 0, digits: 3, base: 8, max: 255 } : NUMERIC_ESCAPES[e];
    if (numeric === undefined) return { offset: i, message: `unknown escape sequence \\${e} in a string` };
    const digits = token.slice(i + 1 + numeric.skip, i + 1 + numeric.skip + numeric.digits);
    const valid = numeric.base === 8 ? /^[0-7]+$/ : /^[0-9a-fA-F]+$/;
    if (digits.length < numeric.digits || !valid.test(digits)) return { offset: i, message: "malformed escape sequence in a string" };
    const value = parseInt(digits, numeric.base);
    if (value > numeric.max || (value >= 0xd800 && value < 0xe000)) return { offset: i, message: "escape sequence is an invalid Unicode code point" };
    i += 1 + numeric.skip + numeric.digits;
  }
  return { offset: 0, message: "unterminated string" };
}

/**
 * Check an admin's query template at config load and keep it for
 * {@link renderTemplate}.
 *
 * The template is parsed with the Prometheus project's PromQL grammar
 * (`@prometheus-io/lezer-promql`, the grammar of Prometheus's own UI) after
 * each {@link MATCHERS_PLACEHOLDER} is replaced by a stand-in matcher. It is
 * refused when:
 * - it has another placeholder than {@link MATCHERS_PLACEHOLDER} (such as
 *   prometheus-adapter's `<<.Series>>` or `<<.GroupBy>>`);
 * - it is not valid Unicode, or does not parse (a syntax error node), or a
 *   string literal is one Prometheus's lexer refuses (unterminated, bad
 *   escape);
 * - a placeholder is anywhere but as a whole matcher inside a vector
 *   selector's braces (`m{a="b", <<.LabelMatchers>>}`: not in a string, a
 *   comment, glued to other text), or appears twice in one selector;
 * - a vector selector (anywhere: inside range selectors, subqueries,
 *   function arguments, binary operations) lacks the placeholder — it would
 *   read series the HPA's selector did not choose;
 * - there is no vector selector at all.
 *
 * The grammar checks syntax only: what Prometheus checks beyond it (types,
 * e.g. `rate()` of an instant vector, function arity) is refused by the
 * server at query time (a failed read, never a value).
 *
 * @returns the template (its `text` is `text`)
 * @throws TemplateError with the 1-based line and column in `text` of the offending place
 */
export function parseTemplate(text: string): QueryTemplate {
  const fail = (offset: number, message: string): never => {
    const { line, column } = lineColumn(text, offset);
    throw new TemplateError(message, line, column);
  };
  const surrogate = LONE_SURROGATE.exec(text);
  if (surrogate) fail(surrogate.index, "the template is not valid Unicode (a lone surrogate)");
  for (const m of text.matchAll(/<<[^<>\n]*>>/g)) {
    if (m[0] !== MATCHERS_PLACEHOLDER) {
      fail(m.index, `unknown placeholder ${m[0]}: the only one is ${MATCHERS_PLACEHOLDER} (write the metric name and the grouping labels themselves, prometheus-adapter's <<.Series>> and <<.GroupBy>> are not supported)`);
    }
  }

  // Placeholders at their original offsets; the parsed text has DUMMY in their place.
  const pieces = text.split(MATCHERS_PLACEHOLDER);
  const shift = DUMMY.length - MATCHERS_PLACEHOLDER.length;
  const spans: { from: number; to: number; original: number }[] = [];
  let original = 0;
  for (let k = 0; k < pieces.length - 1; k++) {
    original += pieces[k]!.length;
    spans.push({ from: original + k * shift, to: original + k * shift + DUMMY.length, original });
    original += MATCHERS_PLACEHOLDER.length;
  }
  /** An offset in the parsed text, back in `text` (inside a stand-in: the placeholder's start). */
  const toOriginal = (at: number): number => {
    let delta = 0;
    for (const s of spans) {
      if (at < s.from) break;
      if (at < s.to) return s.original;
      delta += shift;
    }
    return at - delta;
  };
  const substituted = pieces.join(DUMMY);
  const tree = parser.parse(substituted);

  type Node = ReturnType<typeof tree.resolve>;
  const selectors: Node[] = [];
  const ranges: TemplateRange[] = [];
  const placeholderAt = new Map<number, Node>(); // stand-in matchers by start offset
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) {
        const at = toOriginal(ref.from);
        fail(at, at >= text.length ? "PromQL syntax error: the template ends too early" : `PromQL syntax error at ${JSON.stringify([...text.slice(at)].slice(0, 20).join(""))}`);
      }
      if (ref.name === "StringLiteral") {
        const problem = stringLiteralProblem(substituted.slice(ref.from, ref.to));
        if (problem) fail(toOriginal(ref.from + problem.offset), problem.message);
      }
      if (ref.name === "VectorSelector") selectors.push(ref.node);
      if (ref.name === "MatrixSelector" || ref.name === "SubqueryExpr") {
        const range = ref.node.getChild("DurationExpr");
        if (range !== null) {
          const at = toOriginal(range.from);
          const written = text.slice(at, toOriginal(range.to));
          ranges.push({ text: written, seconds: durationSeconds(written), ...lineColumn(text, at) });
        }
      }
      if (ref.name === "UnquotedLabelMatcher" && ref.node.parent?.name === "LabelMatchers" && ref.node.parent.parent?.name === "VectorSelector") {
        placeholderAt.set(ref.from, ref.node);
      }
    },
  });
  for (const s of spans) {
    const node = placeholderAt.get(s.from);
    if (node === undefined || node.to !== s.to) {
      fail(s.original, `${MATCHERS_PLACEHOLDER} must be a whole label matcher inside a vector selector's braces, e.g. metric{${MATCHERS_PLACEHOLDER}} (not in a string, a comment or glued to other text)`);
    }
  }
  if (selectors.length === 0) fail(0, `the template has no vector selector: it must read series through metric{${MATCHERS_PLACEHOLDER}}`);

  const isPlaceholder = (n: Node): boolean => spans.some((s) => s.from === n.from && n.to === s.to);
  const removals: { from: number; to: number }[] = []; // in `text`, for rendering without matchers
  let emptyProblem: string | undefined;
  for (const selector of selectors) {
    const braces = selector.getChild("LabelMatchers");
    // The items between the braces: matchers and a quoted metric name ({"metric", a="b"}).
    const items = braces ? ["UnquotedLabelMatcher", "QuotedLabelMatcher", "QuotedLabelName"].flatMap((kind) => braces.getChildren(kind)).sort((a, b) => a.from - b.from) : [];
    const mine = items.filter(isPlaceholder);
    const where = toOriginal(selector.from);
    const shown = text.slice(where, toOriginal(selector.to));
    if (mine.length === 0) fail(where, `vector selector ${shown} has no ${MATCHERS_PLACEHOLDER}: every selector must carry the HPA's matchers, or it reads series the selector did not choose`);
    if (mine.length > 1) fail(toOriginal(mine[1]!.from), `${MATCHERS_PLACEHOLDER} appears twice in the vector selector ${shown}`);
    const self = mine[0]!;
    const i = items.indexOf(self);
    const next = items[i + 1];
    const prev = items[i - 1];
    // Drop the placeholder with the comma after it (or before it when last); alone, everything inside the braces.
    if (next) removals.push({ from: toOriginal(self.from), to: toOriginal(next.from) });
    else if (prev) removals.push({ from: toOriginal(prev.to), to: toOriginal(self.to) });
    else {
      removals.push({ from: toOriginal(braces!.from) + 1, to: toOriginal(braces!.to) - 1 });
      if (selector.getChild("Identifier") === null) emptyProblem ??= `the vector selector ${shown} has nothing but ${MATCHERS_PLACEHOLDER}: Prometheus refuses it without matchers`;
    }
  }
  let empty: string | Error;
  if (emptyProblem !== undefined) empty = new Error(emptyProblem);
  else {
    let out = "";
    let at = 0;
    for (const r of removals.sort((a, b) => a.from - b.from)) {
      out += text.slice(at, r.from);
      at = r.to;
    }
    empty = out + text.slice(at);
  }
  const template: QueryTemplate = { text };
  compiled.set(template, { pieces, empty, ranges: ranges.sort((a, b) => a.line - b.line || a.column - b.column) });
  return template;
}

/**
 * The query of a template for one read: every {@link MATCHERS_PLACEHOLDER}
 * replaced by `matchers` (the output of {@link matchersText}). With no
 * matchers (`""`), each placeholder is removed with a comma next to it, so
 * `m{job="x", <<.LabelMatchers>>}` becomes `m{job="x"}`.
 *
 * @param template from {@link parseTemplate} (a plain `{ text }` is parsed now)
 * @throws TemplateError when a plain `{ text }` is not a valid template
 * @throws Error when `matchers` is empty and a selector would have no matcher at all (`{<<.LabelMatchers>>}`)
 */
export function renderTemplate(template: QueryTemplate, matchers: string): string {
  const c = compiled.get(template) ?? compiled.get(parseTemplate(template.text))!;
  if (matchers !== "") return c.pieces.join(matchers);
  if (c.empty instanceof Error) throw c.empty;
  return c.empty;
}
