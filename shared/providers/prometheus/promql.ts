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
// (template parser: next commit)

/** A label name Prometheus accepts unquoted: `[a-zA-Z_][a-zA-Z0-9_]*` (prometheus/common model/labels.go, legacy validation). */
export const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Whether `name` is a label name in the legacy charset ({@link LABEL_NAME}). */
export function isLabelName(name: string): boolean {
  return LABEL_NAME.test(name);
}

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
