/**
 * Label key and value validation, and how apimachinery assembles the
 * messages, after k8s.io/apimachinery (v0.37.2):
 *
 * - `pkg/api/validate/content/kube.go`, `dns.go`, `errors.go`, re-exported
 *   by `pkg/util/validation/validation.go` as `IsQualifiedName` and
 *   `IsValidLabelValue`: the checks and their messages;
 * - `pkg/util/validation/field/errors.go`, `path.go`: a `field.Error` of type
 *   Invalid; `pkg/util/errors/errors.go`: an aggregate's message;
 * - Go's `strconv.ParseInt(s, 10, 64)` (`src/strconv/atoi.go`): the integer
 *   check of the `gt`/`lt` operators.
 */

import { goQuote } from "./quote.ts";

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

/** Whether `value` is a DNS-1123 subdomain (`content.IsDNS1123Subdomain` finds no problem): object names such as pods'. */
export function isDNS1123Subdomain(value: string): boolean {
  return dns1123SubdomainErrors(value).length === 0;
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
export function labelKeyErrors(value: string): string[] {
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
export function labelValueErrors(value: string): string[] {
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

/**
 * A `field.Error` of type Invalid (`pkg/util/validation/field/errors.go`):
 * `<field>: Invalid value: <bad value>: <detail>`. A string bad value is
 * `%q`-quoted; a string slice (or a named string type) is JSON.
 */
export function invalidFieldError(field: string, badValue: string | { json: string }, detail: string): string {
  const shown = typeof badValue === "string" ? goQuote(badValue) : badValue.json;
  return `${field}: Invalid value: ${shown}: ${detail}`;
}

/**
 * `field.ErrorList.ToAggregate().Error()` (`pkg/util/errors/errors.go`):
 * duplicates dropped, one message alone, several as `[a, b]`.
 */
export function aggregateMessage(messages: readonly string[]): string {
  const unique = [...new Set(messages)];
  return unique.length === 1 ? (unique[0] ?? "") : `[${unique.join(", ")}]`;
}

/**
 * `strconv.ParseInt(s, 10, 64)`: an optional sign and one or more ASCII
 * digits, within the int64 range. `undefined` when Go would return an error.
 * Linear in `s`: long inputs are rejected before any BigInt is built.
 */
export function parseGoInt64(s: unknown): bigint | undefined {
  if (typeof s !== "string" || !/^[+-]?[0-9]+$/.test(s)) return undefined;
  const digits = s.replace(/^[+-]?0*/, "");
  if (digits.length > 19) return undefined;
  const n = BigInt(s);
  return n >= -(2n ** 63n) && n <= 2n ** 63n - 1n ? n : undefined;
}
