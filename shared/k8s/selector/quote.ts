/**
 * How Go prints a string inside apimachinery's error messages, so that a
 * `SelectorError`'s message is byte-for-byte Go's:
 *
 * - `goQuote`: `fmt.Sprintf("%q", s)`, i.e. Go's `strconv.Quote`
 *   (`src/strconv/quote.go`, with `strconv.IsPrint` from `isprint.go`);
 * - `goJSONString` / `goJSONStrings`: `encoding/json`'s `Marshal` of a string
 *   and a `[]string` (`src/encoding/json/encode.go`), as `field.Error` shows
 *   a slice or a named string type (`pkg/util/validation/field/errors.go`).
 *
 * Lone UTF-16 surrogates are taken as U+FFFD, which is what Go sees once
 * the text has crossed into UTF-8. Pure functions; nothing here throws.
 */

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
export function goQuote(s: string): string {
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
export function goJSONString(s: string): string {
  return JSON.stringify(s.replace(/\p{Cs}/gu, "\ufffd")).replace(/[<>&\u2028\u2029]/g, (c) => {
    return `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`;
  });
}

/** `json.Marshal` of a Go `[]string`; `null` stands for a nil slice. */
export function goJSONStrings(values: readonly string[] | null): string {
  return values === null ? "null" : `[${values.map(goJSONString).join(",")}]`;
}
