/**
 * The selector lexer, after `labels.Lexer` in k8s.io/apimachinery (v0.37.2)
 * `pkg/labels/selector.go` (`Lex`, `scanIDOrKeyword`, `scanSpecialSymbol`,
 * `string2token`), including its treatment of a NUL byte as the end marker.
 */

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
