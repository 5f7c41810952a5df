/**
 * Kubernetes label selectors, written by hand to behave exactly like
 * k8s.io/apimachinery (checked against v0.37.2):
 *
 * - `pkg/labels/selector.go`: the lexer, the parser (`labels.Parse`),
 *   `NewRequirement`, `Requirement.String`, `Requirement.Matches`.
 * - `pkg/api/validate/content/kube.go`, `dns.go`, `errors.go` (re-exported by
 *   `pkg/util/validation/validation.go` as `IsQualifiedName` and
 *   `IsValidLabelValue`): label key and value validation and its messages.
 * - `pkg/apis/meta/v1/helpers.go`: `LabelSelectorAsSelector`.
 * - `pkg/util/validation/field/errors.go`, `path.go` and `pkg/util/errors`:
 *   how the error messages are put together.
 * - Go's `sort.Sort` (`src/sort/zsortinterface.go`): the order that
 *   requirements with equal keys end up in (the sort is not stable).
 *
 * Error messages are byte-for-byte apimachinery's, so a `SelectorError`'s
 * `message` can go straight into a `400 BadRequest` Status.
 * `test/selector.oracle.test.ts` checks all of this against the real Go code.
 *
 * The file is laid out as: types, validation, lexer, parser, requirement
 * construction, Go's sort, formatter, matcher, metav1.LabelSelector.
 */

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/**
 * A requirement operator, spelled like apimachinery's `selection.Operator`
 * (`pkg/selection/operator.go`): `"="`, `"=="`, `"!="`, `"in"`, `"notin"`,
 * `"exists"` (a bare `key`), `"!"` (`!key`), `"gt"` (`key>n`), `"lt"` (`key<n`).
 */
export type Operator = "=" | "==" | "!=" | "in" | "notin" | "exists" | "!" | "gt" | "lt";

/**
 * One condition on one label (`labels.Requirement`, `pkg/labels/selector.go`).
 *
 * `values`: sorted for `in`/`notin` (one or more; `parseSelector` removes
 * duplicates, `fromLabelSelector` keeps them, as apimachinery does); exactly
 * one for `=`, `==`, `!=`, `gt`, `lt` (an integer for `gt`/`lt`); none for
 * `exists` and `!`. Build one with `parseSelector`, `newRequirement` or
 * `fromLabelSelector`, which validate it.
 */
export interface Requirement {
  readonly key: string;
  readonly operator: Operator;
  readonly values: readonly string[];
}

/**
 * A conjunction of requirements (`labels.Selector`, `pkg/labels/selector.go`).
 *
 * `requirements` are sorted by key, as `labels.Parse` and `Selector.Add`
 * leave them. No requirements = `labels.Everything()`: matches every label
 * set. `nothing: true` = `labels.Nothing()` (what a nil `metav1.LabelSelector`
 * becomes): matches no label set, whatever `requirements` says; its string
 * form is `""` like Go's.
 */
export interface Selector {
  readonly requirements: readonly Requirement[];
  readonly nothing?: boolean;
}

/**
 * Thrown for an invalid selector, requirement or `metav1.LabelSelector`.
 *
 * `message` is apimachinery's error text exactly (e.g.
 * `unable to parse requirement: found '', expected: ',' or ')'`), except for
 * the length limit of `parseSelector`, which apimachinery does not have.
 * `position`, when present, is the UTF-16 offset in the parsed text of the
 * token the error is about. Callers answer it as `400 BadRequest`.
 */
export class SelectorError extends Error {
  readonly position?: number;

  constructor(message: string, position?: number) {
    super(message);
    this.name = "SelectorError";
    if (position !== undefined) this.position = position;
  }
}

/** `labels.Everything()`: the selector with no requirements; matches everything. */
export const EVERYTHING: Selector = Object.freeze({ requirements: Object.freeze([]) });

/** `labels.Nothing()`: matches no label set; `selectorToString` gives `""`. */
export const NOTHING: Selector = Object.freeze({ requirements: Object.freeze([]), nothing: true });

/** `parseSelector`'s default limit on the length of its input, in UTF-16 code units. */
export const DEFAULT_MAX_SELECTOR_LENGTH = 4096;

// ---------------------------------------------------------------------------
// Validation (pkg/api/validate/content/kube.go, dns.go, errors.go)
// ---------------------------------------------------------------------------

const LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR_MSG =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_MAX_LENGTH = 63;
const LABEL_VALUE_FMT = `(${LABEL_KEY_FMT})?`;
const LABEL_VALUE_ERR_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MAX_LENGTH = 63;
const DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1123_SUBDOMAIN_ERR_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MAX_LENGTH = 253;

// The same patterns Go compiles. Each alternative is decided by the next
// character, so backtracking stays linear in the input.
const LABEL_KEY_RE = new RegExp(`^${LABEL_KEY_FMT}$`);
const LABEL_VALUE_RE = new RegExp(`^${LABEL_VALUE_FMT}$`);
const DNS1123_SUBDOMAIN_RE = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);

/** `content.MaxLenError`. */
function maxLenError(length: number): string {
  return `must be no more than ${length} bytes`;
}

/** `content.RegexError`, including its odd `'x',  or 'y', ` spacing. */
function regexError(msg: string, re: string, ...examples: string[]): string {
  if (examples.length === 0) return `${msg} (regex used for validation is '${re}')`;
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join(" or ")}regex used for validation is '${re}')`;
}

/** Go's `len(s)`: the length of `s` in UTF-8 bytes (a lone surrogate counts as U+FFFD). */
function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && isLowSurrogate(s.charCodeAt(i + 1))) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** `content.IsDNS1123Subdomain`: the list of problems, empty when valid. */
function dns1123SubdomainErrors(value: string): string[] {
  const errs: string[] = [];
  if (utf8Length(value) > DNS1123_SUBDOMAIN_MAX_LENGTH) errs.push(maxLenError(DNS1123_SUBDOMAIN_MAX_LENGTH));
  if (!DNS1123_SUBDOMAIN_RE.test(value)) {
    errs.push(regexError(DNS1123_SUBDOMAIN_ERR_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"));
  }
  return errs;
}

/** `content.IsLabelKey` (= `validation.IsQualifiedName`): the list of problems, empty when valid. */
function labelKeyErrors(value: string): string[] {
  const errs: string[] = [];
  const parts = value.split("/");
  let name: string;
  if (parts.length === 1) {
    name = parts[0] ?? "";
  } else if (parts.length === 2) {
    const prefix = parts[0] ?? "";
    name = parts[1] ?? "";
    if (prefix.length === 0) errs.push("prefix part must be non-empty");
    else errs.push(...dns1123SubdomainErrors(prefix).map((m) => `prefix part ${m}`));
  } else {
    return [
      `a valid label key ${regexError(LABEL_KEY_ERR_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")}` +
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  }
  if (name.length === 0) errs.push("name part must be non-empty");
  else if (utf8Length(name) > LABEL_KEY_MAX_LENGTH) errs.push(`name part ${maxLenError(LABEL_KEY_MAX_LENGTH)}`);
  if (!LABEL_KEY_RE.test(name)) {
    errs.push(`name part ${regexError(LABEL_KEY_ERR_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")}`);
  }
  return errs;
}

/** `content.IsLabelValue` (= `validation.IsValidLabelValue`): the list of problems, empty when valid. */
function labelValueErrors(value: string): string[] {
  const errs: string[] = [];
  if (utf8Length(value) > LABEL_VALUE_MAX_LENGTH) errs.push(maxLenError(LABEL_VALUE_MAX_LENGTH));
  if (!LABEL_VALUE_RE.test(value)) {
    errs.push(regexError(LABEL_VALUE_ERR_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"));
  }
  return errs;
}

/**
 * Checks a label key: an optional DNS-1123 subdomain prefix (at most 253
 * bytes) and `/`, then a name of at most 63 bytes matching
 * `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
 *
 * Returns `undefined` when valid, else apimachinery's messages joined by
 * `"; "` (e.g. `"prefix part must be non-empty"`). Never throws.
 * Source: `validation.IsQualifiedName` = `content.IsLabelKey`
 * (`pkg/api/validate/content/kube.go`).
 */
export function validateLabelKey(key: string): string | undefined {
  const errs = labelKeyErrors(key);
  return errs.length === 0 ? undefined : errs.join("; ");
}

/**
 * Checks a label value: empty, or at most 63 bytes matching
 * `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
 *
 * Returns `undefined` when valid, else apimachinery's messages joined by
 * `"; "` (e.g. `"must be no more than 63 bytes"`). Never throws.
 * Source: `validation.IsValidLabelValue` = `content.IsLabelValue`
 * (`pkg/api/validate/content/kube.go`).
 */
export function validateLabelValue(value: string): string | undefined {
  const errs = labelValueErrors(value);
  return errs.length === 0 ? undefined : errs.join("; ");
}

// ---------------------------------------------------------------------------
// Go formatting helpers for error messages
// ---------------------------------------------------------------------------

const GO_PRINTABLE_RE = /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u;

/** `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and ASCII space. */
function isGoPrint(cp: number, ch: string): boolean {
  if (cp <= 0xff) return (cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xff && cp !== 0xad);
  return GO_PRINTABLE_RE.test(ch);
}

/**
 * `fmt.Sprintf("%q", s)` (`strconv.Quote`). Lone surrogates are taken as
 * U+FFFD, which is what Go sees once the text has crossed into UTF-8.
 */
function goQuote(s: string): string {
  let out = '"';
  for (let ch of s) {
    let cp = ch.codePointAt(0) ?? 0;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      cp = 0xfffd;
      ch = "\ufffd";
    }
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (isGoPrint(cp, ch)) out += ch;
    else if (cp === 0x07) out += "\\a";
    else if (cp === 0x08) out += "\\b";
    else if (cp === 0x0c) out += "\\f";
    else if (cp === 0x0a) out += "\\n";
    else if (cp === 0x0d) out += "\\r";
    else if (cp === 0x09) out += "\\t";
    else if (cp === 0x0b) out += "\\v";
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${cp.toString(16).padStart(2, "0")}`;
    else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, "0")}`;
    else out += `\\U${cp.toString(16).padStart(8, "0")}`;
  }
  return `${out}"`;
}

/** `json.Marshal` of a Go string: like JSON.stringify, plus Go's HTML and U+2028/9 escapes. */
function goJSONString(s: string): string {
  return JSON.stringify(s.replace(/\p{Cs}/gu, "\ufffd")).replace(/[<>&\u2028\u2029]/g, (c) => {
    return `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`;
  });
}

/** `json.Marshal` of a Go `[]string`; `null` stands for a nil slice. */
function goJSONStrings(values: readonly string[] | null): string {
  return values === null ? "null" : `[${values.map(goJSONString).join(",")}]`;
}

/**
 * A `field.Error` of type Invalid (`pkg/util/validation/field/errors.go`):
 * `<field>: Invalid value: <bad value>: <detail>`. A string bad value is
 * `%q`-quoted; a string slice (or a named string type) is JSON.
 */
function invalidFieldError(field: string, badValue: string | { json: string }, detail: string): string {
  const shown = typeof badValue === "string" ? goQuote(badValue) : badValue.json;
  return `${field}: Invalid value: ${shown}: ${detail}`;
}

/**
 * `field.ErrorList.ToAggregate().Error()` (`pkg/util/errors/errors.go`):
 * duplicates dropped, one message alone, several as `[a, b]`.
 */
function aggregateMessage(messages: readonly string[]): string {
  const unique = [...new Set(messages)];
  return unique.length === 1 ? (unique[0] ?? "") : `[${unique.join(", ")}]`;
}

/**
 * `strconv.ParseInt(s, 10, 64)`: an optional sign and one or more ASCII
 * digits, within the int64 range. `undefined` when Go would return an error.
 * Linear in `s`: long inputs are rejected before any BigInt is built.
 */
function parseGoInt64(s: unknown): bigint | undefined {
  if (typeof s !== "string" || !/^[+-]?[0-9]+$/.test(s)) return undefined;
  const digits = s.replace(/^[+-]?0*/, "");
  if (digits.length > 19) return undefined;
  const n = BigInt(s);
  return n >= -(2n ** 63n) && n <= 2n ** 63n - 1n ? n : undefined;
}

/** Go's `a < b` on strings: UTF-8 byte order, which is code point order. */
function goStringLess(a: string, b: string): boolean {
  if (a === b) return false;
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const ca = a.codePointAt(i) ?? 0;
    const cb = b.codePointAt(j) ?? 0;
    if (ca !== cb) return ca < cb;
    i += ca > 0xffff ? 2 : 1;
    j += cb > 0xffff ? 2 : 1;
  }
  return a.length - i < b.length - j;
}

function goStringCompare(a: string, b: string): number {
  return goStringLess(a, b) ? -1 : goStringLess(b, a) ? 1 : 0;
}

// ---------------------------------------------------------------------------
// Lexer (labels.Lexer in pkg/labels/selector.go)
// ---------------------------------------------------------------------------

/**
 * The kinds of token `labels.Lexer` produces. `Error` is kept for parity
 * with Go; since every special symbol is a token by itself, it never occurs.
 */
export type TokenKind =
  | "Error"
  | "EndOfString"
  | "ClosedPar"
  | "Comma"
  | "DoesNotExist"
  | "DoubleEquals"
  | "Equals"
  | "GreaterThan"
  | "Identifier"
  | "In"
  | "LessThan"
  | "NotEquals"
  | "NotIn"
  | "OpenPar";

/** A lexed token: its kind, its text, and the UTF-16 offset where it starts. */
export interface Token {
  readonly kind: TokenKind;
  readonly literal: string;
  readonly position: number;
}

/** Go's `string2token`. A Map, so that `constructor` & co. stay identifiers. */
const STRING_TO_TOKEN: ReadonlyMap<string, TokenKind> = new Map<string, TokenKind>([
  [")", "ClosedPar"],
  [",", "Comma"],
  ["!", "DoesNotExist"],
  ["==", "DoubleEquals"],
  ["=", "Equals"],
  [">", "GreaterThan"],
  ["in", "In"],
  ["<", "LessThan"],
  ["!=", "NotEquals"],
  ["notin", "NotIn"],
  ["(", "OpenPar"],
]);

/** Space, tab, CR, LF. */
function isWhitespace(ch: number): boolean {
  return ch === 0x20 || ch === 0x09 || ch === 0x0d || ch === 0x0a;
}

/** `= ! ( ) , > <`: the characters that end an identifier and start an operator. */
function isSpecialSymbol(ch: number): boolean {
  return ch === 0x3d || ch === 0x21 || ch === 0x28 || ch === 0x29 || ch === 0x2c || ch === 0x3e || ch === 0x3c;
}

/**
 * Go's lexer works on bytes and uses byte 0 as its end marker, so a NUL in
 * the input is read as "end" too: it ends the selector when a token would
 * start there, and is silently swallowed right after a token. This lexer
 * keeps that. It reads UTF-16 code units: every byte Go tests for is ASCII,
 * and no UTF-8 multi-byte sequence contains one, so the tokens are the same.
 */
class Lexer {
  readonly #s: string;
  #pos = 0;
  /** Offset of the character the last read() returned, or the length at the end. */
  #lastAt = 0;

  constructor(s: string) {
    this.#s = s;
  }

  /** The next code unit, or 0 at the end (only a real character advances). */
  #read(): number {
    this.#lastAt = this.#pos;
    if (this.#pos < this.#s.length) return this.#s.charCodeAt(this.#pos++);
    return 0;
  }

  #unread(): void {
    this.#pos--;
  }

  /** `Lexer.Lex`: skips whitespace, then one token. */
  lex(): Token {
    let ch = this.#read();
    while (isWhitespace(ch)) ch = this.#read();
    const start = this.#lastAt;
    if (ch === 0) return { kind: "EndOfString", literal: "", position: start };
    this.#unread();
    return isSpecialSymbol(ch) ? this.#scanSpecialSymbol(start) : this.#scanIdOrKeyword(start);
  }

  /** `scanIDOrKeyword`: everything up to whitespace, a special symbol or end; `in`/`notin` are keywords. */
  #scanIdOrKeyword(start: number): Token {
    let end: number;
    for (;;) {
      const ch = this.#read();
      if (ch === 0) {
        end = this.#lastAt;
        break;
      }
      if (isSpecialSymbol(ch) || isWhitespace(ch)) {
        this.#unread();
        end = this.#pos;
        break;
      }
    }
    const literal = this.#s.slice(start, end);
    return { kind: STRING_TO_TOKEN.get(literal) ?? "Identifier", literal, position: start };
  }

  /** `scanSpecialSymbol`: the longest run of special symbols that is still a token (`!=`, `==`, ...). */
  #scanSpecialSymbol(start: number): Token {
    let buffer = "";
    let last: { kind: TokenKind; literal: string } | undefined;
    for (;;) {
      const ch = this.#read();
      if (ch === 0) break;
      if (!isSpecialSymbol(ch)) {
        this.#unread();
        break;
      }
      buffer += String.fromCharCode(ch);
      const kind = STRING_TO_TOKEN.get(buffer);
      if (kind !== undefined) {
        last = { kind, literal: buffer };
      } else if (last !== undefined) {
        this.#unread();
        break;
      }
    }
    if (last === undefined) {
      return { kind: "Error", literal: `error expected: keyword found '${buffer}'`, position: start };
    }
    return { kind: last.kind, literal: last.literal, position: start };
  }
}

/**
 * Splits a selector into the tokens `labels.Parser.scan` would see, ending
 * with (and including) the first `EndOfString` token. Exported for tests and
 * diagnostics; `parseSelector` is what callers want. Never throws; linear.
 */
export function tokenize(text: string): Token[] {
  const lexer = new Lexer(text);
  const tokens: Token[] = [];
  for (;;) {
    const token = lexer.lex();
    tokens.push(token);
    if (token.kind === "EndOfString") return tokens;
  }
}

// ---------------------------------------------------------------------------
// Parser (labels.Parser in pkg/labels/selector.go)
// ---------------------------------------------------------------------------

/**
 * Go's ParserContext: where values are expected (`Values`), the keywords
 * `in`/`notin` are plain identifiers, so `in in (in)` is valid.
 */
type ParserContext = "KeyAndOperator" | "Values";

/** `strings.Join(binaryOperators, ", ")`. */
const BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt";

/** The errors `parseRequirement` raises; `parse` adds "unable to parse requirement: ". */
class RequirementParseError extends Error {
  readonly position: number;

  constructor(message: string, position: number) {
    super(message);
    this.position = position;
  }
}

class Parser {
  readonly #tokens: readonly Token[];
  #position = 0;

  constructor(tokens: readonly Token[]) {
    this.#tokens = tokens;
  }

  #at(index: number, context: ParserContext): Token {
    // The grammar never reads past EndOfString; clamp anyway.
    const token = this.#tokens[Math.min(index, this.#tokens.length - 1)] ?? { kind: "EndOfString", literal: "", position: 0 };
    if (context === "Values" && (token.kind === "In" || token.kind === "NotIn")) {
      return { ...token, kind: "Identifier" };
    }
    return token;
  }

  #lookahead(context: ParserContext): Token {
    return this.#at(this.#position, context);
  }

  #consume(context: ParserContext): Token {
    return this.#at(this.#position++, context);
  }

  /** `Parser.parse`: requirements separated by commas, in input order. */
  parse(): Requirement[] {
    const requirements: Requirement[] = [];
    for (;;) {
      const next = this.#lookahead("Values");
      if (next.kind === "EndOfString") return requirements;
      if (next.kind !== "Identifier" && next.kind !== "DoesNotExist") {
        throw new SelectorError(`found '${next.literal}', expected: !, identifier, or 'end of string'`, next.position);
      }
      try {
        requirements.push(this.#parseRequirement());
      } catch (err) {
        if (err instanceof RequirementParseError) {
          throw new SelectorError(`unable to parse requirement: ${err.message}`, err.position);
        }
        throw err;
      }
      const after = this.#consume("Values");
      if (after.kind === "EndOfString") return requirements;
      if (after.kind !== "Comma") {
        throw new SelectorError(`found '${after.literal}', expected: ',' or 'end of string'`, after.position);
      }
      const afterComma = this.#lookahead("Values");
      if (afterComma.kind !== "Identifier" && afterComma.kind !== "DoesNotExist") {
        throw new SelectorError(`found '${afterComma.literal}', expected: identifier after ','`, afterComma.position);
      }
    }
  }

  #parseRequirement(): Requirement {
    const { key, operator: inferred, position } = this.#parseKeyAndInferOperator();
    if (inferred !== undefined) return makeRequirement(key, inferred, []);
    const operator = this.#parseOperator();
    const values = operator === "in" || operator === "notin" ? this.#parseValues() : this.#parseExactValue();
    // Go collects values in a sets.String and passes values.List(): sorted, unique.
    const list = [...values].sort(goStringCompare);
    const error = requirementError(key, operator, list);
    if (error !== undefined) throw new RequirementParseError(error, position);
    return makeRequirement(key, operator, list);
  }

  /** `[!] KEY`; the operator is `exists`/`!` when the key stands alone, else undefined. */
  #parseKeyAndInferOperator(): { key: string; operator: Operator | undefined; position: number } {
    let operator: Operator | undefined;
    let token = this.#consume("Values");
    if (token.kind === "DoesNotExist") {
      operator = "!";
      token = this.#consume("Values");
    }
    if (token.kind !== "Identifier") {
      throw new RequirementParseError(`found '${token.literal}', expected: identifier`, token.position);
    }
    const errs = labelKeyErrors(token.literal);
    if (errs.length > 0) {
      // Go validates here with the parser's nil *field.Path, which prints as "<nil>".
      throw new RequirementParseError(invalidFieldError("<nil>", token.literal, errs.join("; ")), token.position);
    }
    const next = this.#lookahead("Values").kind;
    if ((next === "EndOfString" || next === "Comma") && operator !== "!") operator = "exists";
    // A `!key` followed by anything else is still `!key`; the caller then
    // fails on the leftover token ("found '=', expected: ',' or 'end of string'").
    return { key: token.literal, operator, position: token.position };
  }

  #parseOperator(): Operator {
    const token = this.#consume("KeyAndOperator");
    switch (token.kind) {
      case "In":
        return "in";
      case "Equals":
        return "=";
      case "DoubleEquals":
        return "==";
      case "GreaterThan":
        return "gt";
      case "LessThan":
        return "lt";
      case "NotIn":
        return "notin";
      case "NotEquals":
        return "!=";
      default:
        throw new RequirementParseError(`found '${token.literal}', expected: ${BINARY_OPERATORS}`, token.position);
    }
  }

  /** `( VALUE, ... )`. `()` means the one value `""`, and so do empty slots: `(a,)`. */
  #parseValues(): Set<string> {
    const open = this.#consume("Values");
    if (open.kind !== "OpenPar") {
      throw new RequirementParseError(`found '${open.literal}' expected: '('`, open.position);
    }
    const first = this.#lookahead("Values");
    switch (first.kind) {
      case "Identifier":
      case "Comma": {
        const values = this.#parseIdentifiersList();
        const close = this.#consume("Values");
        if (close.kind !== "ClosedPar") {
          // Unreachable (the list only ends before ')'); Go names the first token here.
          throw new RequirementParseError(`found '${first.literal}', expected: ')'`, close.position);
        }
        return values;
      }
      case "ClosedPar":
        this.#consume("Values");
        return new Set([""]);
      default:
        throw new RequirementParseError(`found '${first.literal}', expected: ',', ')' or identifier`, first.position);
    }
  }

  /** `parseIdentifiersList`: values and empty slots up to (not including) `)`. */
  #parseIdentifiersList(): Set<string> {
    const values = new Set<string>();
    for (;;) {
      const token = this.#consume("Values");
      if (token.kind === "Identifier") {
        values.add(token.literal);
        const next = this.#lookahead("Values");
        if (next.kind === "Comma") continue;
        if (next.kind === "ClosedPar") return values;
        throw new RequirementParseError(`found '${next.literal}', expected: ',' or ')'`, next.position);
      } else if (token.kind === "Comma") {
        if (values.size === 0) values.add(""); // "(,"
        const next = this.#lookahead("Values").kind;
        if (next === "ClosedPar") {
          values.add(""); // ",)"
          return values;
        }
        if (next === "Comma") values.add(""); // ",,"
      } else {
        throw new RequirementParseError(`found '${token.literal}', expected: ',', or identifier`, token.position);
      }
    }
  }

  /** The value after `=`, `==`, `!=`, `>`, `<`; nothing before `,` or the end means `""`. */
  #parseExactValue(): Set<string> {
    const next = this.#lookahead("Values").kind;
    if (next === "EndOfString" || next === "Comma") return new Set([""]);
    const token = this.#consume("Values");
    if (token.kind === "Identifier") return new Set([token.literal]);
    throw new RequirementParseError(`found '${token.literal}', expected: identifier`, token.position);
  }
}

/**
 * Parses a selector string, like apimachinery's `labels.Parse`
 * (`pkg/labels/selector.go`).
 *
 * Grammar: requirements joined by `,`, each one of `key`, `!key`, `key=v`,
 * `key==v`, `key!=v`, `key in (v1,v2)`, `key notin (v1,v2)`, `key>n`,
 * `key<n`; spaces, tabs, CR and LF are skipped between tokens. `key=` and
 * `key in ()` mean the value `""`. The result's requirements are sorted by
 * key the way Go's (unstable) `sort.Sort` leaves them, with `in`/`notin`
 * values sorted and de-duplicated. `""` gives `EVERYTHING`'s shape (no
 * requirements).
 *
 * Throws `SelectorError` with apimachinery's message for invalid input, and
 * with `selector is longer than <maxLength> characters` when `text` has more
 * than `opts.maxLength` (default 4096) UTF-16 code units — a guard of this
 * bridge, not of apimachinery. Runs in time linear in `text`.
 */
export function parseSelector(text: string, opts?: { maxLength?: number }): Selector {
  if (typeof text !== "string") throw new SelectorError("selector must be a string");
  const maxLength = opts?.maxLength ?? DEFAULT_MAX_SELECTOR_LENGTH;
  if (text.length > maxLength) {
    throw new SelectorError(`selector is longer than ${maxLength} characters`, maxLength);
  }
  // Go receives text as UTF-8, where a lone surrogate has become U+FFFD.
  const wellFormed = text.replace(/\p{Cs}/gu, "\ufffd");
  const requirements = new Parser(tokenize(wellFormed)).parse();
  goSortByKey(requirements);
  return { requirements: Object.freeze(requirements) };
}

// ---------------------------------------------------------------------------
// Requirement construction (labels.NewRequirement in pkg/labels/selector.go)
// ---------------------------------------------------------------------------

const ALL_OPERATORS: readonly Operator[] = ["in", "notin", "=", "==", "!=", "gt", "lt", "exists", "!"];

/**
 * The checks of `labels.NewRequirement` with a nil field path: the key, the
 * number of values for the operator, that `gt`/`lt` values are integers, and
 * every value. Returns the aggregated message, or undefined when valid.
 * `values === null` stands for a Go nil slice (shown as `null`, not `[]`).
 */
function requirementError(key: string, operator: string, values: readonly string[] | null): string | undefined {
  const vals = values ?? [];
  const errs: string[] = [];
  const keyErrs = labelKeyErrors(key);
  if (keyErrs.length > 0) errs.push(invalidFieldError("key", key, keyErrs.join("; ")));
  const valuesJSON = { json: goJSONStrings(values) };
  switch (operator) {
    case "in":
    case "notin":
      if (vals.length === 0) {
        errs.push(invalidFieldError("values", valuesJSON, "for 'in', 'notin' operators, values set can't be empty"));
      }
      break;
    case "=":
    case "==":
    case "!=":
      if (vals.length !== 1) {
        errs.push(invalidFieldError("values", valuesJSON, "exact-match compatibility requires one single value"));
      }
      break;
    case "exists":
    case "!":
      if (vals.length !== 0) {
        errs.push(invalidFieldError("values", valuesJSON, "values set must be empty for exists and does not exist"));
      }
      break;
    case "gt":
    case "lt":
      if (vals.length !== 1) {
        errs.push(invalidFieldError("values", valuesJSON, "for 'Gt', 'Lt' operators, exactly one value is required"));
      }
      vals.forEach((v, i) => {
        if (parseGoInt64(v) === undefined) {
          errs.push(invalidFieldError(`values[${i}]`, v, "for 'Gt', 'Lt' operators, the value must be an integer"));
        }
      });
      break;
    default: {
      // field.NotSupported: the bad value is a selection.Operator, which Go prints as JSON.
      const supported = ALL_OPERATORS.map((op) => goQuote(op)).join(", ");
      errs.push(`operator: Unsupported value: ${goJSONString(operator)}: supported values: ${supported}`);
    }
  }
  vals.forEach((v, i) => {
    const valueErrs = labelValueErrors(v);
    if (valueErrs.length > 0) errs.push(invalidFieldError(`values[${i}][${key}]`, v, valueErrs.join("; ")));
  });
  return errs.length > 0 ? aggregateMessage(errs) : undefined;
}

/** A frozen Requirement from checked parts; `in`/`notin` values sorted (duplicates kept). */
function makeRequirement(key: string, operator: Operator, values: readonly string[]): Requirement {
  const stored = operator === "in" || operator === "notin" ? [...values].sort(goStringCompare) : [...values];
  return Object.freeze({ key, operator, values: Object.freeze(stored) });
}

/**
 * Builds one validated requirement, like `labels.NewRequirement`
 * (`pkg/labels/selector.go`): `in`/`notin` need at least one value, `=`,
 * `==`, `!=` exactly one, `exists`/`!` none, `gt`/`lt` exactly one integer
 * (Go `strconv.ParseInt` base 10); the key must pass `validateLabelKey` and
 * every value `validateLabelValue`. `in`/`notin` values come back sorted
 * (duplicates kept, as Go keeps them).
 *
 * Throws `SelectorError` with apimachinery's aggregated message, e.g.
 * `values[0][x]: Invalid value: "a b": a valid label must be ...`.
 */
export function newRequirement(key: string, operator: Operator, values: readonly string[]): Requirement {
  const error = requirementError(key, operator, values);
  if (error !== undefined) throw new SelectorError(error);
  return makeRequirement(key, operator, values);
}

// ---------------------------------------------------------------------------
// Go's sort.Sort (src/sort/zsortinterface.go), used as sort.Sort(ByKey(...))
// ---------------------------------------------------------------------------

/**
 * Sorts requirements by key in place with the same swaps as Go's
 * `sort.Sort` (pattern-defeating quicksort). Go's sort is not stable, so
 * requirements sharing a key (`x=a,x=b,...`) end up in whatever order that
 * algorithm leaves them once there are more than 12 requirements; matching
 * it exactly keeps `selectorToString` equal to apimachinery's `String()`.
 */
function goSortByKey(items: Requirement[]): void {
  const n = items.length;
  if (n <= 1) return;
  const less = (i: number, j: number): boolean => goStringLess(items[i]?.key ?? "", items[j]?.key ?? "");
  const swap = (i: number, j: number): void => {
    const t = items[i] as Requirement;
    items[i] = items[j] as Requirement;
    items[j] = t;
  };
  new GoPdqsort(less, swap).sort(n);
}

/** bits.Len: the number of bits needed to represent n (n >= 0, < 2^32). */
function bitsLen(n: number): number {
  return 32 - Math.clz32(n);
}

/** Go's pdqsort over an index-based less/swap pair (sort.Interface). */
class GoPdqsort {
  readonly #less: (i: number, j: number) => boolean;
  readonly #swap: (i: number, j: number) => void;

  constructor(less: (i: number, j: number) => boolean, swap: (i: number, j: number) => void) {
    this.#less = less;
    this.#swap = swap;
  }

  sort(n: number): void {
    this.#pdqsort(0, n, bitsLen(n));
  }

  #insertionSort(a: number, b: number): void {
    for (let i = a + 1; i < b; i++) {
      for (let j = i; j > a && this.#less(j, j - 1); j--) this.#swap(j, j - 1);
    }
  }

  #siftDown(lo: number, hi: number, first: number): void {
    let root = lo;
    for (;;) {
      let child = 2 * root + 1;
      if (child >= hi) return;
      if (child + 1 < hi && this.#less(first + child, first + child + 1)) child++;
      if (!this.#less(first + root, first + child)) return;
      this.#swap(first + root, first + child);
      root = child;
    }
  }

  #heapSort(a: number, b: number): void {
    const first = a;
    const hi = b - a;
    for (let i = Math.floor((hi - 1) / 2); i >= 0; i--) this.#siftDown(i, hi, first);
    for (let i = hi - 1; i >= 0; i--) {
      this.#swap(first, first + i);
      this.#siftDown(0, i, first);
    }
  }

  #pdqsort(a: number, b: number, limit: number): void {
    const maxInsertion = 12;
    let wasBalanced = true;
    let wasPartitioned = true;
    for (;;) {
      const length = b - a;
      if (length <= maxInsertion) {
        this.#insertionSort(a, b);
        return;
      }
      if (limit === 0) {
        this.#heapSort(a, b);
        return;
      }
      if (!wasBalanced) {
        this.#breakPatterns(a, b);
        limit--;
      }
      let { pivot, hint } = this.#choosePivot(a, b);
      if (hint === "decreasing") {
        this.#reverseRange(a, b);
        pivot = b - 1 - (pivot - a);
        hint = "increasing";
      }
      if (wasBalanced && wasPartitioned && hint === "increasing" && this.#partialInsertionSort(a, b)) return;
      if (a > 0 && !this.#less(a - 1, pivot)) {
        a = this.#partitionEqual(a, b, pivot);
        continue;
      }
      const { mid, alreadyPartitioned } = this.#partition(a, b, pivot);
      wasPartitioned = alreadyPartitioned;
      const leftLen = mid - a;
      const rightLen = b - mid;
      const balanceThreshold = Math.floor(length / 8);
      if (leftLen < rightLen) {
        wasBalanced = leftLen >= balanceThreshold;
        this.#pdqsort(a, mid, limit);
        a = mid + 1;
      } else {
        wasBalanced = rightLen >= balanceThreshold;
        this.#pdqsort(mid + 1, b, limit);
        b = mid;
      }
    }
  }

  #partition(a: number, b: number, pivot: number): { mid: number; alreadyPartitioned: boolean } {
    this.#swap(a, pivot);
    let i = a + 1;
    let j = b - 1;
    while (i <= j && this.#less(i, a)) i++;
    while (i <= j && !this.#less(j, a)) j--;
    if (i > j) {
      this.#swap(j, a);
      return { mid: j, alreadyPartitioned: true };
    }
    this.#swap(i, j);
    i++;
    j--;
    for (;;) {
      while (i <= j && this.#less(i, a)) i++;
      while (i <= j && !this.#less(j, a)) j--;
      if (i > j) break;
      this.#swap(i, j);
      i++;
      j--;
    }
    this.#swap(j, a);
    return { mid: j, alreadyPartitioned: false };
  }

  #partitionEqual(a: number, b: number, pivot: number): number {
    this.#swap(a, pivot);
    let i = a + 1;
    let j = b - 1;
    for (;;) {
      while (i <= j && !this.#less(a, i)) i++;
      while (i <= j && this.#less(a, j)) j--;
      if (i > j) return i;
      this.#swap(i, j);
      i++;
      j--;
    }
  }

  #partialInsertionSort(a: number, b: number): boolean {
    const maxSteps = 5;
    const shortestShifting = 50;
    let i = a + 1;
    for (let step = 0; step < maxSteps; step++) {
      while (i < b && !this.#less(i, i - 1)) i++;
      if (i === b) return true;
      if (b - a < shortestShifting) return false;
      this.#swap(i, i - 1);
      if (i - a >= 2) {
        // Go's bound here is j >= 1, not j > a; kept as is.
        for (let j = i - 1; j >= 1; j--) {
          if (!this.#less(j, j - 1)) break;
          this.#swap(j, j - 1);
        }
      }
      if (b - i >= 2) {
        for (let j = i + 1; j < b; j++) {
          if (!this.#less(j, j - 1)) break;
          this.#swap(j, j - 1);
        }
      }
    }
    return false;
  }

  #breakPatterns(a: number, b: number): void {
    const length = b - a;
    if (length < 8) return;
    let random = BigInt(length); // xorshift over uint64
    const mask64 = (1n << 64n) - 1n;
    const modulus = BigInt(2 ** bitsLen(length));
    for (let idx = a + Math.floor(length / 4) * 2 - 1; idx <= a + Math.floor(length / 4) * 2 + 1; idx++) {
      random ^= (random << 13n) & mask64;
      random ^= random >> 7n;
      random ^= (random << 17n) & mask64;
      let other = Number(random & (modulus - 1n));
      if (other >= length) other -= length;
      this.#swap(idx, a + other);
    }
  }

  #choosePivot(a: number, b: number): { pivot: number; hint: "unknown" | "increasing" | "decreasing" } {
    const shortestNinther = 50;
    const maxSwaps = 4 * 3;
    const l = b - a;
    const swaps = { count: 0 };
    let i = a + Math.floor(l / 4) * 1;
    let j = a + Math.floor(l / 4) * 2;
    let k = a + Math.floor(l / 4) * 3;
    if (l >= 8) {
      if (l >= shortestNinther) {
        i = this.#median(i - 1, i, i + 1, swaps);
        j = this.#median(j - 1, j, j + 1, swaps);
        k = this.#median(k - 1, k, k + 1, swaps);
      }
      j = this.#median(i, j, k, swaps);
    }
    if (swaps.count === 0) return { pivot: j, hint: "increasing" };
    if (swaps.count === maxSwaps) return { pivot: j, hint: "decreasing" };
    return { pivot: j, hint: "unknown" };
  }

  /** The index (one of a, b, c) holding the median of the three. */
  #median(a: number, b: number, c: number, swaps: { count: number }): number {
    const order2 = (x: number, y: number): [number, number] => {
      if (this.#less(y, x)) {
        swaps.count++;
        return [y, x];
      }
      return [x, y];
    };
    [a, b] = order2(a, b);
    [b, c] = order2(b, c);
    [a, b] = order2(a, b);
    return b;
  }

  #reverseRange(a: number, b: number): void {
    for (let i = a, j = b - 1; i < j; i++, j--) this.#swap(i, j);
  }
}

// ---------------------------------------------------------------------------
// Formatter (Requirement.String / internalSelector.String)
// ---------------------------------------------------------------------------

const OPERATOR_TEXT: Readonly<Record<Operator, string>> = {
  "=": "=",
  "==": "==",
  "!=": "!=",
  in: " in ",
  notin: " notin ",
  gt: ">",
  lt: "<",
  exists: "",
  "!": "",
};

/**
 * One requirement in apimachinery's canonical form (`Requirement.String`,
 * `pkg/labels/selector.go`): `key`, `!key`, `key=v`, `key==v`, `key!=v`,
 * `key in (a,b)`, `key notin (a,b)`, `key>n`, `key<n`. Values of
 * `in`/`notin` are printed sorted; an empty value prints as nothing
 * (`key=`, `key in ()`). Never throws.
 */
export function requirementToString(r: Requirement): string {
  const head = `${r.operator === "!" ? "!" : ""}${r.key}${OPERATOR_TEXT[r.operator] ?? ""}`;
  if (r.operator === "exists" || r.operator === "!") return head;
  const values = r.values.length === 1 ? (r.values[0] ?? "") : [...r.values].sort(goStringCompare).join(",");
  return r.operator === "in" || r.operator === "notin" ? `${head}(${values})` : `${head}${values}`;
}

/**
 * The canonical string of a selector (`labels.Selector.String()`,
 * `pkg/labels/selector.go`): the requirements' strings joined by `,`, in the
 * selector's order (already sorted by key when it came from `parseSelector`
 * or `fromLabelSelector`). `EVERYTHING` and `NOTHING` both give `""`, as in
 * Go. Parsing the result gives back an equal selector. Never throws.
 */
export function selectorToString(sel: Selector): string {
  if (sel.nothing === true) return "";
  return sel.requirements.map(requirementToString).join(",");
}

// ---------------------------------------------------------------------------
// Matcher (Requirement.Matches / internalSelector.Matches)
// ---------------------------------------------------------------------------

function requirementMatches(r: Requirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case "in":
    case "=":
    case "==":
      return has && r.values.some((v) => v === value);
    case "notin":
    case "!=":
      return !has || !r.values.some((v) => v === value);
    case "exists":
      return has;
    case "!":
      return !has;
    case "gt":
    case "lt": {
      if (!has || r.values.length !== 1) return false;
      const actual = parseGoInt64(value);
      const bound = parseGoInt64(r.values[0]);
      if (actual === undefined || bound === undefined) return false;
      return r.operator === "gt" ? actual > bound : actual < bound;
    }
    default:
      return false;
  }
}

/**
 * Whether a label set satisfies every requirement (`Selector.Matches`,
 * `pkg/labels/selector.go`). `in`/`=`/`==` need the key with one of the
 * values; `notin`/`!=` also match when the key is absent; `gt`/`lt` need the
 * key with a value Go's `strconv.ParseInt` accepts (else no match).
 * `EVERYTHING` matches anything, `NOTHING` nothing. Only own properties of
 * `labels` count. Never throws.
 */
export function matchesLabels(sel: Selector, labels: Readonly<Record<string, string>>): boolean {
  if (sel.nothing === true) return false;
  return sel.requirements.every((r) => requirementMatches(r, labels));
}

// ---------------------------------------------------------------------------
// metav1.LabelSelector (pkg/apis/meta/v1/helpers.go)
// ---------------------------------------------------------------------------

/**
 * `metav1.LabelSelector` (`pkg/apis/meta/v1/types.go`), e.g. an HPA's
 * `metricSelector`: `matchLabels` entries are `key=value` requirements,
 * `matchExpressions` use `In`, `NotIn`, `Exists`, `DoesNotExist`; all ANDed.
 */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: "In" | "NotIn" | "Exists" | "DoesNotExist"; values?: string[] }[];
}

const LABEL_SELECTOR_OPERATORS: ReadonlyMap<string, Operator> = new Map<string, Operator>([
  ["In", "in"],
  ["NotIn", "notin"],
  ["Exists", "exists"],
  ["DoesNotExist", "!"],
]);

/** `labels.NewRequirement` as `LabelSelectorAsSelector` calls it; throws SelectorError. */
function checkedRequirement(key: string, operator: Operator, values: readonly string[] | null): Requirement {
  const error = requirementError(key, operator, values);
  if (error !== undefined) throw new SelectorError(error);
  return makeRequirement(key, operator, values ?? []);
}

/**
 * Converts a `metav1.LabelSelector` like `metav1.LabelSelectorAsSelector`
 * (`pkg/apis/meta/v1/helpers.go`):
 *
 * - `null`/`undefined` (Go: nil) → `NOTHING` (matches no labels);
 * - no matchLabels and no matchExpressions (Go: empty) → `EVERYTHING`;
 * - otherwise one `=` requirement per matchLabels entry, then one per
 *   expression, sorted by key. `In`/`NotIn` values are sorted but keep
 *   duplicates, as Go keeps them (`k in (a,a)`).
 *
 * Throws `SelectorError` with apimachinery's message: for an unknown
 * operator (`"Foo" is not a valid label selector operator`), or from
 * `NewRequirement` (invalid key or value, `In`/`NotIn` without values,
 * `Exists`/`DoesNotExist` with values). Go checks matchLabels in random map
 * order; here they go in key order, so the first invalid entry by key is the
 * one reported. Non-string keys, values or operators (possible in untyped
 * input) are rejected too.
 */
export function fromLabelSelector(ls: LabelSelector | null | undefined): Selector {
  if (ls === null || ls === undefined) return NOTHING;
  const matchLabels = ls.matchLabels ?? {};
  const matchExpressions = ls.matchExpressions ?? [];
  const labelKeys = Object.keys(matchLabels).sort(goStringCompare);
  if (labelKeys.length + matchExpressions.length === 0) return EVERYTHING;

  const requirements: Requirement[] = [];
  for (const key of labelKeys) {
    const value: unknown = matchLabels[key];
    if (typeof value !== "string") throw new SelectorError(`matchLabels[${key}]: value must be a string`);
    requirements.push(checkedRequirement(key, "=", [value]));
  }
  matchExpressions.forEach((expr, i) => {
    const operator = LABEL_SELECTOR_OPERATORS.get(expr.operator);
    if (operator === undefined) {
      throw new SelectorError(`${goQuote(String(expr.operator))} is not a valid label selector operator`);
    }
    const values: unknown = expr.values ?? [];
    if (typeof expr.key !== "string" || !Array.isArray(values) || !values.every((v) => typeof v === "string")) {
      throw new SelectorError(`matchExpressions[${i}]: key and values must be strings`);
    }
    // Go copies with append([]string(nil), values...): no values is a nil slice.
    requirements.push(checkedRequirement(expr.key, operator, values.length === 0 ? null : values));
  });
  goSortByKey(requirements);
  return { requirements: Object.freeze(requirements) };
}
