/**
 * The selector parser, after `labels.Parser` and `labels.Parse` in
 * k8s.io/apimachinery (v0.37.2) `pkg/labels/selector.go`: the grammar, the
 * `Values` parser context in which `in`/`notin` are identifiers, the
 * messages of every syntax error, and the final `sort.Sort(ByKey(...))`.
 */

import { tokenize, type Token } from "./lexer.ts";
import { makeRequirement, requirementError } from "./requirement.ts";
import { goSortByKey, goStringCompare } from "./sort.ts";
import { DEFAULT_MAX_SELECTOR_LENGTH, SelectorError, type Operator, type Requirement, type Selector } from "./types.ts";
import { invalidFieldError, labelKeyErrors } from "./validation.ts";

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
