/**
 * Unit tests for shared/k8s/selector.ts, mostly re-expressed from
 * k8s.io/apimachinery's own tests (pkg/labels/selector_test.go,
 * pkg/api/validate/content/kube_test.go, pkg/apis/meta/v1/helpers_test.go).
 * The shared case tables live in test/oracle/selector-cases.ts;
 * test/wire/selector.oracle.test.ts proves each expectation there against the
 * real Go code.
 */
import { describe, expect, it } from "vitest";
import { fcRuns } from "../helpers/fc.ts";
import fc from "fast-check";
import {
  DEFAULT_MAX_SELECTOR_LENGTH,
  EVERYTHING,
  NOTHING,
  SelectorError,
  fromLabelSelector,
  matchesLabels,
  newRequirement,
  parseSelector,
  requirementToString,
  selectorToString,
  tokenize,
  validateLabelKey,
  validateLabelValue,
  type LabelSelector,
  type Operator,
  type Selector,
  type TokenKind,
} from "../../shared/k8s/selector.ts";
import {
  hostileInputs,
  KEY_SLASHES_MSG,
  LABEL_SELECTOR_CASES,
  MATCH_CASES,
  NAME_REGEX_MSG,
  PARSE_CASES,
  SUBDOMAIN_REGEX_MSG,
  VALUE_REGEX_MSG,
} from "../oracle/selector-cases.ts";

/** The thrown SelectorError (fails the test when nothing is thrown). */
function errorOf(fn: () => unknown): SelectorError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SelectorError);
    return err as SelectorError;
  }
  throw new Error("expected a SelectorError, nothing was thrown");
}

function kinds(text: string): TokenKind[] {
  return tokenize(text).map((t) => t.kind);
}

describe("tokenize (labels.Lexer)", () => {
  // TestLexer: one token each; Lex returns the longest valid token.
  it.each<[string, TokenKind]>([
    ["", "EndOfString"],
    [",", "Comma"],
    ["notin", "NotIn"],
    ["in", "In"],
    ["=", "Equals"],
    ["==", "DoubleEquals"],
    [">", "GreaterThan"],
    ["<", "LessThan"],
    ["!", "DoesNotExist"],
    ["!=", "NotEquals"],
    ["(", "OpenPar"],
    [")", "ClosedPar"],
    ["~", "Identifier"],
    ["||", "Identifier"],
  ])("lexes %j as %s", (text, kind) => {
    const [first] = tokenize(text);
    expect(first?.kind).toBe(kind);
    expect(first?.literal).toBe(text);
  });

  // TestLexerSequence / TestParserLookahead (which include the final EndOfString).
  it.each<[string, TokenKind[]]>([
    ["key in ( value )", ["Identifier", "In", "OpenPar", "Identifier", "ClosedPar"]],
    ["key notin ( value )", ["Identifier", "NotIn", "OpenPar", "Identifier", "ClosedPar"]],
    ["key in ( value1, value2 )", ["Identifier", "In", "OpenPar", "Identifier", "Comma", "Identifier", "ClosedPar"]],
    ["key", ["Identifier"]],
    ["!key", ["DoesNotExist", "Identifier"]],
    ["()", ["OpenPar", "ClosedPar"]],
    ["", []],
    ["x in (),y", ["Identifier", "In", "OpenPar", "ClosedPar", "Comma", "Identifier"]],
    ["== != (), = notin", ["DoubleEquals", "NotEquals", "OpenPar", "ClosedPar", "Comma", "Equals", "NotIn"]],
    ["key>2", ["Identifier", "GreaterThan", "Identifier"]],
    ["key<1", ["Identifier", "LessThan", "Identifier"]],
  ])("lexes %j", (text, expected) => {
    expect(kinds(text)).toEqual([...expected, "EndOfString"]);
  });

  it("ends identifiers at whitespace and special symbols only", () => {
    expect(tokenize("a.b/c-d_e~f|g=h").map((t) => t.literal)).toEqual(["a.b/c-d_e~f|g", "=", "h", ""]);
    expect(tokenize("é日😀\u00a0\u3000x").map((t) => t.literal)).toEqual(["é日😀\u00a0\u3000x", ""]);
    expect(tokenize("inx notiny in notin").map((t) => t.kind)).toEqual(["Identifier", "Identifier", "In", "NotIn", "EndOfString"]);
  });

  it("takes the longest special-symbol token, then starts again", () => {
    expect(tokenize("!==").map((t) => t.literal)).toEqual(["!=", "=", ""]);
    expect(tokenize("===").map((t) => t.literal)).toEqual(["==", "=", ""]);
    expect(tokenize("<=>!").map((t) => t.literal)).toEqual(["<", "=", ">", "!", ""]);
    expect(tokenize("(,)").map((t) => t.kind)).toEqual(["OpenPar", "Comma", "ClosedPar", "EndOfString"]);
  });

  it("treats NUL as Go's end marker: ends the input where a token starts, swallowed right after one", () => {
    expect(kinds("\x00a")).toEqual(["EndOfString"]);
    expect(kinds(" \x00a")).toEqual(["EndOfString"]);
    expect(tokenize("a\x00b").map((t) => t.literal)).toEqual(["a", "b", ""]);
    expect(tokenize("a\x00\x00b").map((t) => t.literal)).toEqual(["a", ""]);
    expect(tokenize("=\x00b").map((t) => t.literal)).toEqual(["=", "b", ""]);
  });

  it("reports where each token starts", () => {
    expect(tokenize("  ab != (c)").map((t) => t.position)).toEqual([2, 5, 8, 9, 10, 11]);
  });
});

describe("parseSelector (labels.Parse)", () => {
  const good = PARSE_CASES.filter((c): c is Extract<typeof c, { string: string }> => "string" in c);
  const bad = PARSE_CASES.filter((c): c is Extract<typeof c, { error: string }> => "error" in c);

  it.each(good.map((c) => [JSON.stringify(c.input).slice(0, 80), c] as const))("accepts %s", (_, c) => {
    expect(selectorToString(parseSelector(c.input))).toBe(c.string);
  });

  it.each(bad.map((c) => [JSON.stringify(c.input).slice(0, 80), c] as const))("rejects %s", (_, c) => {
    expect(errorOf(() => parseSelector(c.input)).message).toBe(c.error);
  });

  it("restrings TestSelectorParse's good strings to themselves without spaces", () => {
    for (const text of ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"]) {
      expect(selectorToString(parseSelector(text))).toBe(text.replaceAll(" ", ""));
    }
  });

  it("is deterministic whatever the input order (TestDeterministicParse)", () => {
    expect(selectorToString(parseSelector("x=a,a=x"))).toBe(selectorToString(parseSelector("a=x,x=a")));
  });

  it("builds the requirements TestSetSelectorParser expects", () => {
    const req = (key: string, operator: Operator, values: string[]) => ({ key, operator, values });
    expect(parseSelector("").requirements).toEqual([]);
    expect(parseSelector("\rx").requirements).toEqual([req("x", "exists", [])]);
    expect(parseSelector("x in (abc,)").requirements).toEqual([req("x", "in", ["", "abc"])]);
    expect(parseSelector("x in (a,,a,,a,,a,,)").requirements).toEqual([req("x", "in", ["", "a"])]);
    expect(parseSelector("x notin (abc,,def),bar,z in (),w").requirements).toEqual([
      req("bar", "exists", []),
      req("w", "exists", []),
      req("x", "notin", ["", "abc", "def"]),
      req("z", "in", [""]),
    ]);
    expect(parseSelector("a in (x,y,notin, z,in)").requirements).toEqual([req("a", "in", ["in", "notin", "x", "y", "z"])]);
    expect(parseSelector("x=a,y!=b,z==c,!w,v>1,u<2").requirements).toEqual([
      req("u", "lt", ["2"]),
      req("v", "gt", ["1"]),
      req("w", "!", []),
      req("x", "=", ["a"]),
      req("y", "!=", ["b"]),
      req("z", "==", ["c"]),
    ]);
    expect(parseSelector("x=").requirements).toEqual([req("x", "=", [""])]);
  });

  it("sorts by key with Go's unstable sort.Sort, not a stable sort", () => {
    const text = "b=0,a=1,a=2,a=3,a=4,a=5,a=6,a=7,a=8,a=9,a=10,a=11,a=12";
    const stable = "a=1,a=2,a=3,a=4,a=5,a=6,a=7,a=8,a=9,a=10,a=11,a=12,b=0";
    expect(selectorToString(parseSelector(text))).toBe("a=6,a=1,a=2,a=3,a=4,a=5,a=7,a=8,a=9,a=10,a=11,a=12,b=0");
    expect(selectorToString(parseSelector(text))).not.toBe(stable);
    // Up to 12 requirements Go uses insertion sort, which is stable.
    expect(selectorToString(parseSelector("b=0,a=3,a=1,a=2"))).toBe("a=3,a=1,a=2,b=0");
  });

  it("gives errors a position pointing at the offending token", () => {
    expect(errorOf(() => parseSelector("x=a b")).position).toBe(4);
    expect(errorOf(() => parseSelector("x in (a")).position).toBe(7);
    expect(errorOf(() => parseSelector("a, -b=c")).position).toBe(3);
    expect(errorOf(() => parseSelector("a,b=-c")).position).toBe(2);
    expect(errorOf(() => parseSelector(",")).position).toBe(0);
  });

  it("limits the input length (a guard of the bridge, not of apimachinery)", () => {
    expect(DEFAULT_MAX_SELECTOR_LENGTH).toBe(4096);
    const atLimit = `${Array.from({ length: 32 }, (_, i) => `${String(i).padStart(2, "0")}${"a".repeat(61)}=${"b".repeat(63)}`).join(",")} `;
    expect(atLimit).toHaveLength(4096);
    expect(parseSelector(atLimit).requirements).toHaveLength(32);
    const long = errorOf(() => parseSelector("a".repeat(4097)));
    expect(long.message).toBe("selector is longer than 4096 characters");
    expect(long.position).toBe(4096);
    expect(errorOf(() => parseSelector("a=b,c=d", { maxLength: 5 })).message).toBe("selector is longer than 5 characters");
    expect(selectorToString(parseSelector("a".repeat(63), { maxLength: 63 }))).toBe("a".repeat(63));
  });

  it("returns frozen requirements", () => {
    const sel = parseSelector("x in (b,a)");
    expect(Object.isFrozen(sel.requirements[0])).toBe(true);
    expect(Object.isFrozen(sel.requirements[0]?.values)).toBe(true);
  });
});

describe("selectorToString / requirementToString (Requirement.String)", () => {
  // TestToString
  it.each<[Selector, string]>([
    [{ requirements: [newRequirement("x", "in", ["abc", "def"]), newRequirement("y", "notin", ["jkl"]), newRequirement("z", "exists", [])] }, "x in (abc,def),y notin (jkl),z"],
    [{ requirements: [newRequirement("x", "notin", ["abc", "def"]), newRequirement("y", "!=", ["jkl"]), newRequirement("z", "!", [])] }, "x notin (abc,def),y!=jkl,!z"],
    [{ requirements: [newRequirement("x", "notin", ["abc"]), newRequirement("y", "in", ["jkl", "mno"]), newRequirement("z", "notin", [""])] }, "x notin (abc),y in (jkl,mno),z notin ()"],
    [{ requirements: [newRequirement("x", "=", ["abc"]), newRequirement("y", "==", ["jkl"]), newRequirement("z", "!=", ["a"]), newRequirement("z", "exists", [])] }, "x=abc,y==jkl,z!=a,z"],
    [{ requirements: [newRequirement("x", "gt", ["2"]), newRequirement("y", "lt", ["8"]), newRequirement("z", "exists", [])] }, "x>2,y<8,z"],
  ])("formats %j", (sel, text) => {
    expect(selectorToString(sel)).toBe(text);
  });

  it("sorts in/notin values on output without touching the requirement (TestSafeSort)", () => {
    const values = ["foo", "bar", "foo", "bar"];
    const r = { key: "k", operator: "in" as const, values };
    expect(requirementToString(r)).toBe("k in (bar,bar,foo,foo)");
    expect(values).toEqual(["foo", "bar", "foo", "bar"]);
  });

  it("prints EVERYTHING and NOTHING as the empty string, like Go", () => {
    expect(selectorToString(EVERYTHING)).toBe("");
    expect(selectorToString(NOTHING)).toBe("");
  });

  it("round-trips: parsing a canonical string gives it back", () => {
    const token = fc.constantFrom("a", "b", "x", "example.com/app", "in", "A_B.c-d");
    const value = fc.constantFrom("", "a", "b", "1", "007", "in", "a.b");
    const req = fc.oneof(
      token,
      token.map((k) => `!${k}`),
      fc.tuple(token, fc.constantFrom("=", "==", "!="), value).map(([k, op, v]) => `${k}${op}${v}`),
      fc.tuple(token, fc.constantFrom(" in ", " notin "), fc.array(value, { maxLength: 4 })).map(([k, op, vs]) => `${k}${op}(${vs.join(",")})`),
      fc.tuple(token, fc.constantFrom(">", "<"), fc.nat()).map(([k, op, n]) => `${k}${op}${n}`),
    );
    fc.assert(
      fc.property(fc.array(req, { maxLength: 20 }), (reqs) => {
        const canonical = selectorToString(parseSelector(reqs.join(",")));
        expect(selectorToString(parseSelector(canonical))).toBe(canonical);
        expect(parseSelector(canonical).requirements).toEqual(parseSelector(reqs.join(",")).requirements);
      }),
      fcRuns(500, 11),
    );
  });
});

describe("matchesLabels (Selector.Matches)", () => {
  it.each(MATCH_CASES.map((c) => [c.selector, JSON.stringify(c.labels), c.matches, c] as const))(
    "%j on %s is %s",
    (_s, _l, _m, c) => {
      expect(matchesLabels(parseSelector(c.selector), c.labels)).toBe(c.matches);
    },
  );

  it("EVERYTHING matches anything, NOTHING nothing (TestEverything)", () => {
    expect(matchesLabels(EVERYTHING, { x: "y" })).toBe(true);
    expect(matchesLabels(EVERYTHING, {})).toBe(true);
    expect(matchesLabels(NOTHING, { x: "y" })).toBe(false);
    expect(matchesLabels(NOTHING, {})).toBe(false);
    expect(matchesLabels({ requirements: [], nothing: true }, {})).toBe(false);
  });

  it("matches requirements built by hand (TestRequirementSelectorMatching)", () => {
    const sel = (...requirements: Selector["requirements"][number][]): Selector => ({ requirements });
    expect(matchesLabels(sel(newRequirement("x", "in", ["foo"]), newRequirement("y", "notin", ["alpha"])), { x: "foo", y: "baz" })).toBe(true);
    expect(matchesLabels(sel(newRequirement("x", "notin", [""]), newRequirement("y", "exists", [])), { y: "" })).toBe(true);
    expect(matchesLabels(sel(newRequirement("x", "!", []), newRequirement("y", "exists", [])), { y: "" })).toBe(true);
    expect(matchesLabels(sel(newRequirement("z", "gt", ["1"])), { z: "v2" })).toBe(false);
  });

  it("never throws on odd label sets", () => {
    const sel = parseSelector("x>1,y in (a),z!=b,!w");
    expect(matchesLabels(sel, { x: "9".repeat(100_000), y: "a" })).toBe(false);
    expect(matchesLabels(sel, Object.create(null) as Record<string, string>)).toBe(false);
    expect(matchesLabels(sel, { x: 5 as unknown as string, y: "a" })).toBe(false);
  });
});

describe("newRequirement (labels.NewRequirement, TestRequirementConstructor)", () => {
  it.each<[string, Operator, string[]]>([
    ["x3", "in", ["foo"]],
    ["x4", "notin", ["foo"]],
    ["x6", "exists", []],
    ["x7", "!", []],
    ["x9", "in", ["bar"]],
    ["x11", "gt", ["1"]],
    ["x12", "lt", ["6"]],
    ["x", "=", [""]],
  ])("accepts %s %s %j", (key, op, values) => {
    expect(newRequirement(key, op, values)).toEqual({ key, operator: op, values });
  });

  it.each<[string, Operator, string[], string]>([
    ["x1", "in", [], "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"],
    ["x2", "notin", [], "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"],
    ["x5", "=", ["bar", "foo"], 'values: Invalid value: ["bar","foo"]: exact-match compatibility requires one single value'],
    ["x8", "exists", ["foo"], 'values: Invalid value: ["foo"]: values set must be empty for exists and does not exist'],
    ["x13", "gt", [], "values: Invalid value: []: for 'Gt', 'Lt' operators, exactly one value is required"],
    ["x14", "gt", ["bar"], `values[0]: Invalid value: "bar": for 'Gt', 'Lt' operators, the value must be an integer`],
    ["x15", "lt", ["bar"], `values[0]: Invalid value: "bar": for 'Gt', 'Lt' operators, the value must be an integer`],
    ["a".repeat(254), "exists", [], `key: Invalid value: "${"a".repeat(254)}": name part must be no more than 63 bytes`],
    ["x16", "=", ["a".repeat(254)], `values[0][x16]: Invalid value: "${"a".repeat(254)}": must be no more than 63 bytes`],
    ["x17", "=", ["a b"], `values[0][x17]: Invalid value: "a b": ${VALUE_REGEX_MSG}`],
    [
      "x18",
      "unsupportedOp" as Operator,
      [],
      'operator: Unsupported value: "unsupportedOp": supported values: "in", "notin", "=", "==", "!=", "gt", "lt", "exists", "!"',
    ],
    [
      "-k",
      "in",
      ["ok", "-v"],
      `[key: Invalid value: "-k": name part ${NAME_REGEX_MSG}, values[1][-k]: Invalid value: "-v": ${VALUE_REGEX_MSG}]`,
    ],
  ])("rejects %s %s %j", (key, op, values, message) => {
    const err = errorOf(() => newRequirement(key, op, values));
    expect(err.message).toBe(message);
    expect(err.position).toBeUndefined();
  });

  it("sorts in/notin values and keeps duplicates", () => {
    expect(newRequirement("k", "notin", ["b", "a", "b"]).values).toEqual(["a", "b", "b"]);
  });
});

describe("validateLabelKey / validateLabelValue (IsQualifiedName / IsValidLabelValue)", () => {
  it.each([
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a".repeat(63),
    `${"a".repeat(253)}/${"b".repeat(63)}`,
  ])("key %j is valid", (key) => {
    expect(validateLabelKey(key)).toBeUndefined();
  });

  it.each<[string, string]>([
    ["nospecialchars%^=@", `name part ${NAME_REGEX_MSG}`],
    ["cantendwithadash-", `name part ${NAME_REGEX_MSG}`],
    ["-cantstartwithadash-", `name part ${NAME_REGEX_MSG}`],
    ["only/one/slash", KEY_SLASHES_MSG],
    ["Example.com/abc", `prefix part ${SUBDOMAIN_REGEX_MSG}`],
    ["example_com/abc", `prefix part ${SUBDOMAIN_REGEX_MSG}`],
    ["example.com/", `name part must be non-empty; name part ${NAME_REGEX_MSG}`],
    ["/simple", "prefix part must be non-empty"],
    ["a".repeat(64), "name part must be no more than 63 bytes"],
    [`${"a".repeat(254)}/abc`, "prefix part must be no more than 253 bytes"],
    ["", `name part must be non-empty; name part ${NAME_REGEX_MSG}`],
    ["é".repeat(32), `name part must be no more than 63 bytes; name part ${NAME_REGEX_MSG}`],
  ])("key %j is invalid", (key, message) => {
    expect(validateLabelKey(key)).toBe(message);
  });

  it.each(["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a".repeat(63), ""])("value %j is valid", (value) => {
    expect(validateLabelValue(value)).toBeUndefined();
  });

  it.each<[string, string]>([
    ["nospecialchars%^=@", VALUE_REGEX_MSG],
    ["Tama-nui-te-rā.is.Māori.sun", VALUE_REGEX_MSG],
    ["\\backslashes\\are\\bad", VALUE_REGEX_MSG],
    ["-starts-with-dash", VALUE_REGEX_MSG],
    ["ends-with-dash-", VALUE_REGEX_MSG],
    [".starts.with.dot", VALUE_REGEX_MSG],
    ["ends.with.dot.", VALUE_REGEX_MSG],
    ["a".repeat(64), "must be no more than 63 bytes"],
    ["😀".repeat(16), `must be no more than 63 bytes; ${VALUE_REGEX_MSG}`],
  ])("value %j is invalid", (value, message) => {
    expect(validateLabelValue(value)).toBe(message);
  });
});

describe("fromLabelSelector (metav1.LabelSelectorAsSelector)", () => {
  const good = LABEL_SELECTOR_CASES.filter((c): c is Extract<typeof c, { string: string }> => "string" in c);
  const bad = LABEL_SELECTOR_CASES.filter((c): c is Extract<typeof c, { error: string }> => "error" in c);

  it.each(good.map((c) => [JSON.stringify(c.labelSelector), c] as const))("converts %s", (_, c) => {
    const sel = fromLabelSelector(c.labelSelector);
    expect(selectorToString(sel)).toBe(c.string);
    expect(sel.nothing === true).toBe(c.nothing === true);
  });

  it.each(bad.map((c) => [JSON.stringify(c.labelSelector), c] as const))("rejects %s", (_, c) => {
    expect(errorOf(() => fromLabelSelector(c.labelSelector)).message).toBe(c.error);
  });

  it("maps nil to NOTHING and empty to EVERYTHING", () => {
    expect(fromLabelSelector(null)).toBe(NOTHING);
    expect(fromLabelSelector(undefined)).toBe(NOTHING);
    expect(fromLabelSelector({})).toBe(EVERYTHING);
    expect(fromLabelSelector({ matchLabels: {}, matchExpressions: [] })).toBe(EVERYTHING);
    expect(matchesLabels(fromLabelSelector(null), {})).toBe(false);
    expect(matchesLabels(fromLabelSelector({}), {})).toBe(true);
  });

  it("matches like the equivalent parsed selector", () => {
    const ls: LabelSelector = {
      matchLabels: { app: "web" },
      matchExpressions: [
        { key: "tier", operator: "In", values: ["front", "edge"] },
        { key: "env", operator: "NotIn", values: ["dev"] },
        { key: "team", operator: "Exists" },
        { key: "legacy", operator: "DoesNotExist" },
      ],
    };
    const sel = fromLabelSelector(ls);
    expect(selectorToString(sel)).toBe("app=web,env notin (dev),!legacy,team,tier in (edge,front)");
    expect(sel.requirements).toEqual(parseSelector(selectorToString(sel)).requirements);
    expect(matchesLabels(sel, { app: "web", tier: "edge", team: "a" })).toBe(true);
    expect(matchesLabels(sel, { app: "web", tier: "edge", team: "a", env: "dev" })).toBe(false);
    expect(matchesLabels(sel, { app: "web", tier: "edge", team: "a", legacy: "" })).toBe(false);
  });

  it("does not modify its input", () => {
    const ls: LabelSelector = { matchLabels: { b: "1", a: "2" }, matchExpressions: [{ key: "k", operator: "In", values: ["z", "a"] }] };
    const copy = structuredClone(ls);
    fromLabelSelector(ls);
    expect(ls).toEqual(copy);
  });

  it("rejects non-string pieces of untyped input", () => {
    expect(errorOf(() => fromLabelSelector({ matchLabels: { a: 1 as unknown as string } })).message).toBe("matchLabels[a]: value must be a string");
    expect(
      errorOf(() => fromLabelSelector({ matchExpressions: [{ key: "a", operator: "In", values: [1 as unknown as string] }] })).message,
    ).toBe("matchExpressions[0]: key and values must be strings");
  });
});

describe("SelectorError", () => {
  it("is an Error named SelectorError carrying apimachinery's message", () => {
    const err = errorOf(() => parseSelector("x=a b"));
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe("SelectorError");
    expect(err.message).toBe("found 'b', expected: ',' or 'end of string'");
  });
});

describe("hostile input", () => {
  it.each(hostileInputs().map(({ name, input }) => [name, input] as const))("handles %s without hanging, with a SelectorError or a selector (timings: npm run bench:selector)", (_, input) => {
    let outcome: string;
    try {
      outcome = selectorToString(parseSelector(input, { maxLength: Infinity }));
    } catch (err) {
      expect(err).toBeInstanceOf(SelectorError);
      outcome = (err as Error).message;
    }
    expect(typeof outcome).toBe("string");
    // With the default limit the same input is refused up front.
    expect(errorOf(() => parseSelector(input)).message).toBe("selector is longer than 4096 characters");
  });

  it("never throws anything but SelectorError, on arbitrary strings", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 64 }), (text) => {
        try {
          const sel = parseSelector(text);
          expect(selectorToString(parseSelector(selectorToString(sel)))).toBe(selectorToString(sel));
          matchesLabels(sel, { a: "1" });
        } catch (err) {
          expect(err).toBeInstanceOf(SelectorError);
        }
      }),
      fcRuns(2000, 5),
    );
  });

  it("quotes unprintable characters in messages the way Go's %q does", () => {
    expect(errorOf(() => parseSelector("x=\x01\x7f\u200b\ud800😀é")).message).toBe(
      `unable to parse requirement: values[0][x]: Invalid value: "\\x01\\x7f\\u200b\ufffd😀é": ${VALUE_REGEX_MSG}`,
    );
    expect(errorOf(() => parseSelector("x=\x07\b\f\v")).message).toContain('"\\a\\b\\f\\v"');
    expect(errorOf(() => parseSelector("x=\u{e0001}")).message).toContain('"\\U000e0001"');
  });
});

describe("matchesLabels with long in/notin lists (a custom.metrics Pods read: pod in (<1,000 pods>))", () => {
  it("answers as a scan of the values would, for lists on both sides of the Set lookup's threshold", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.stringMatching(/^[a-z]{1,3}$/), { minLength: 1, maxLength: 40 }),
        fc.option(fc.stringMatching(/^[a-z]{1,3}$/), { nil: undefined }),
        fc.constantFrom("in", "notin"),
        (values, value, op) => {
          const sel = parseSelector(`k ${op} (${values.join(",")})`);
          const labels: Record<string, string> = value === undefined ? {} : { k: value };
          const listed = value !== undefined && values.includes(value);
          const expected = op === "in" ? listed : !listed;
          // twice: the second answer comes from the requirement's remembered Set
          return matchesLabels(sel, labels) === expected && matchesLabels(sel, labels) === expected;
        },
      ),
      fcRuns(500),
    );
  });
});
