/**
 * Hand-written label selector cases with their expected outcomes, shared by
 * test/wire/selector.test.ts (which checks shared/k8s/selector.ts against them)
 * and test/wire/selector.oracle.test.ts (which checks them against the real
 * k8s.io/apimachinery, so every expectation here is proven, not guessed).
 *
 * Most cases re-express apimachinery's own tests (pkg/labels/selector_test.go,
 * pkg/api/validate/content/kube_test.go, pkg/apis/meta/v1/helpers_test.go);
 * `from` names the Go test.
 */
import type { LabelSelector } from "../../shared/k8s/selector.ts";

/** `labels.Parse(input)`: either the canonical `String()` or the exact error message. */
export type ParseCase =
  | { readonly input: string; readonly string: string; readonly from?: string }
  | { readonly input: string; readonly error: string; readonly from?: string };

/** `labels.Parse(selector).Matches(labels)`. */
export interface MatchCase {
  readonly selector: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly matches: boolean;
  readonly from?: string;
}

/** `metav1.LabelSelectorAsSelector(labelSelector)`: string (and nothing-ness) or error. */
export type LabelSelectorCase =
  | { readonly labelSelector: LabelSelector | null; readonly string: string; readonly nothing?: true; readonly from?: string }
  | { readonly labelSelector: LabelSelector | null; readonly error: string; readonly from?: string };

/** The regex explanations apimachinery appends to validation errors (content/kube.go, dns.go). */
export const NAME_REGEX_MSG =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
  "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
export const VALUE_REGEX_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
  "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
export const SUBDOMAIN_REGEX_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character " +
  "(e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
export const KEY_SLASHES_MSG = `a valid label key ${NAME_REGEX_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`;

const REQ = "unable to parse requirement: ";
const OPERATORS = "in, notin, =, ==, !=, gt, lt";
const NOT_INTEGER = "for 'Gt', 'Lt' operators, the value must be an integer";
const a63 = "a".repeat(63);
const a64 = "a".repeat(64);

export const PARSE_CASES: readonly ParseCase[] = [
  // TestSelectorParse: good strings restring to themselves without spaces.
  { from: "TestSelectorParse", input: "x=a,y=b,z=c", string: "x=a,y=b,z=c" },
  { from: "TestSelectorParse", input: "", string: "" },
  { from: "TestSelectorParse", input: "x!=a,y=b", string: "x!=a,y=b" },
  { from: "TestSelectorParse", input: "x=", string: "x=" },
  { from: "TestSelectorParse", input: "x= ", string: "x=" },
  { from: "TestSelectorParse", input: "x=,z= ", string: "x=,z=" },
  { from: "TestSelectorParse", input: "x= ,z= ", string: "x=,z=" },
  { from: "TestSelectorParse", input: "!x", string: "!x" },
  { from: "TestSelectorParse", input: "x>1", string: "x>1" },
  { from: "TestSelectorParse", input: "x>1,z<5", string: "x>1,z<5" },
  { from: "TestSelectorParse", input: "x=a||y=b", error: `${REQ}values[0][x]: Invalid value: "a||y": ${VALUE_REGEX_MSG}` },
  { from: "TestSelectorParse", input: "x==a==b", error: "found '==', expected: ',' or 'end of string'" },
  { from: "TestSelectorParse", input: "!x=a", error: "found '=', expected: ',' or 'end of string'" },
  { from: "TestSelectorParse", input: "x<a", error: `${REQ}values[0]: Invalid value: "a": ${NOT_INTEGER}` },
  // TestDeterministicParse
  { from: "TestDeterministicParse", input: "x=a,a=x", string: "a=x,x=a" },
  { from: "TestDeterministicParse", input: "a=x,x=a", string: "a=x,x=a" },

  // TestSetSelectorParser
  { from: "TestSetSelectorParser", input: "\rx", string: "x" },
  { from: "TestSetSelectorParser", input: "this-is-a-dns.domain.com/key-with-dash", string: "this-is-a-dns.domain.com/key-with-dash" },
  {
    from: "TestSetSelectorParser",
    input: "this-is-another-dns.domain.com/key-with-dash in (so,what)",
    string: "this-is-another-dns.domain.com/key-with-dash in (so,what)",
  },
  {
    from: "TestSetSelectorParser",
    input: "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
    string: "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
  },
  { from: "TestSetSelectorParser", input: "foo  in\t (abc)", string: "foo in (abc)" },
  { from: "TestSetSelectorParser", input: "x notin\n (abc)", string: "x notin (abc)" },
  { from: "TestSetSelectorParser", input: "x  notin\t\t\t(abc,def)", string: "x notin (abc,def)" },
  { from: "TestSetSelectorParser", input: "x in (abc,def)", string: "x in (abc,def)" },
  { from: "TestSetSelectorParser", input: "x in (abc,)", string: "x in (,abc)" },
  { from: "TestSetSelectorParser", input: "x in (abc,abc)", string: "x in (abc)" },
  { from: "TestSetSelectorParser", input: "x in ()", string: "x in ()" },
  { from: "TestSetSelectorParser", input: "x in (a,,)", string: "x in (,a)" },
  { from: "TestSetSelectorParser", input: "x in (a,,,)", string: "x in (,a)" },
  { from: "TestSetSelectorParser", input: "x in (a,,,,,,)", string: "x in (,a)" },
  { from: "TestSetSelectorParser", input: "x in (a,,a,,a,,a,,)", string: "x in (,a)" },
  { from: "TestSetSelectorParser", input: "x notin (abc,,def),bar,z in (),w", string: "bar,w,x notin (,abc,def),z in ()" },
  { from: "TestSetSelectorParser", input: "x,y in (a)", string: "x,y in (a)" },
  { from: "TestSetSelectorParser", input: "x=a", string: "x=a" },
  { from: "TestSetSelectorParser", input: "x>1", string: "x>1" },
  { from: "TestSetSelectorParser", input: "x<7", string: "x<7" },
  { from: "TestSetSelectorParser", input: "x=a,y!=b", string: "x=a,y!=b" },
  { from: "TestSetSelectorParser", input: "x=a,y!=b,z in (h,i,j)", string: "x=a,y!=b,z in (h,i,j)" },
  { from: "TestSetSelectorParser", input: "x,,y", error: "found ',', expected: identifier after ','" },
  { from: "TestSetSelectorParser", input: ",x,y", error: "found ',', expected: !, identifier, or 'end of string'" },
  { from: "TestSetSelectorParser", input: "x nott in (y)", error: `${REQ}found 'nott', expected: ${OPERATORS}` },
  { from: "TestSetSelectorParser", input: "x notin ( )", string: "x notin ()" },
  { from: "TestSetSelectorParser", input: "x notin (, a)", string: "x notin (,a)" },
  { from: "TestSetSelectorParser", input: "a in (xyz),", error: "found '', expected: identifier after ','" },
  { from: "TestSetSelectorParser", input: "a in (xyz)b notin ()", error: "found 'b', expected: ',' or 'end of string'" },
  { from: "TestSetSelectorParser", input: "a ", string: "a" },
  { from: "TestSetSelectorParser", input: "a in (x,y,notin, z,in)", string: "a in (in,notin,x,y,z)" },
  { from: "TestSetSelectorParser", input: "a in (xyz abc)", error: `${REQ}found 'abc', expected: ',' or ')'` },
  { from: "TestSetSelectorParser", input: "a notin(", error: `${REQ}found '', expected: ',', ')' or identifier` },
  { from: "TestSetSelectorParser", input: "a (", error: `${REQ}found '(', expected: ${OPERATORS}` },
  { from: "TestSetSelectorParser", input: "(", error: "found '(', expected: !, identifier, or 'end of string'" },

  // TestParseOperator, through whole selectors.
  { from: "TestParseOperator", input: "x in (a)", string: "x in (a)" },
  { from: "TestParseOperator", input: "x==a", string: "x==a" },
  { from: "TestParseOperator", input: "x notin (a)", string: "x notin (a)" },
  { from: "TestParseOperator", input: "x != a", string: "x!=a" },
  { from: "TestParseOperator", input: "x ! a", error: `${REQ}found '!', expected: ${OPERATORS}` },
  { from: "TestParseOperator", input: "x exists", error: `${REQ}found 'exists', expected: ${OPERATORS}` },
  { from: "TestParseOperator", input: "x (", error: `${REQ}found '(', expected: ${OPERATORS}` },

  // TestRequirementConstructor's value checks, through the parser.
  { from: "TestRequirementConstructor", input: "x11>1", string: "x11>1" },
  { from: "TestRequirementConstructor", input: "x12<6", string: "x12<6" },
  { from: "TestRequirementConstructor", input: "x14>bar", error: `${REQ}values[0]: Invalid value: "bar": ${NOT_INTEGER}` },
  { from: "TestRequirementConstructor", input: "x15<bar", error: `${REQ}values[0]: Invalid value: "bar": ${NOT_INTEGER}` },
  {
    from: "TestRequirementConstructor",
    input: `${"a".repeat(254)}`,
    error: `${REQ}<nil>: Invalid value: "${"a".repeat(254)}": name part must be no more than 63 bytes`,
  },
  { from: "TestRequirementConstructor", input: `x16=${a64}`, error: `${REQ}values[0][x16]: Invalid value: "${a64}": must be no more than 63 bytes` },

  // Keywords are identifiers where a key or value is expected.
  { input: "notin=in", string: "notin=in" },
  { input: "in in (in)", string: "in in (in)" },
  { input: "x in (in,notin)", string: "x in (in,notin)" },
  { input: "x=in", string: "x=in" },
  { input: "x in in", error: `${REQ}found 'in' expected: '('` },
  { input: "!x in (a)", error: "found 'in', expected: ',' or 'end of string'" },

  // The empty value.
  { input: "x==,y", string: "x==,y" },
  { input: "x!=", string: "x!=" },
  { input: "x in (,)", string: "x in ()" },
  { input: "x in (,,b)", string: "x in (,b)" },

  // Lexer: operators are the longest run of special symbols that is a token.
  { input: "x!==a", error: `${REQ}found '=', expected: identifier` },
  { input: "x===a", error: `${REQ}found '=', expected: identifier` },
  { input: "!=a", error: "found '!=', expected: !, identifier, or 'end of string'" },
  { input: "x=(a)", error: `${REQ}found '(', expected: identifier` },
  { input: "x=a=b", error: "found '=', expected: ',' or 'end of string'" },
  { input: "x==>", error: `${REQ}found '>', expected: identifier` },
  { input: "x<=1", error: `${REQ}found '=', expected: identifier` },
  { input: "x=>1", error: `${REQ}found '>', expected: identifier` },
  { input: "a!", error: `${REQ}found '!', expected: ${OPERATORS}` },
  { input: "x)", error: `${REQ}found ')', expected: ${OPERATORS}` },
  { input: "!!x", error: `${REQ}found '!', expected: identifier` },
  { input: "!", error: `${REQ}found '', expected: identifier` },
  { input: "x in a", error: `${REQ}found 'a' expected: '('` },
  { input: "x in (a", error: `${REQ}found '', expected: ',' or ')'` },
  { input: "x in (a,", error: `${REQ}found '', expected: ',', or identifier` },
  { input: "x in (a,(", error: `${REQ}found '(', expected: ',', or identifier` },
  { input: "x in (=)", error: `${REQ}found '=', expected: ',', ')' or identifier` },
  { input: ",", error: "found ',', expected: !, identifier, or 'end of string'" },
  { input: "x,", error: "found '', expected: identifier after ','" },
  { input: "x=a b", error: "found 'b', expected: ',' or 'end of string'" },
  { input: "a=\tb", string: "a=b" },
  { input: " \t\r\n x \r\n = \t y \n", string: "x=y" },
  { input: "x notin(a),y in (b) ", string: "x notin (a),y in (b)" },
  { input: "x in(a)", string: "x in (a)" },
  { input: "xin(a)", error: `${REQ}found '(', expected: ${OPERATORS}` },
  { input: "~", error: `${REQ}<nil>: Invalid value: "~": name part ${NAME_REGEX_MSG}` },

  // NUL: Go's lexer uses byte 0 as its end marker.
  { input: "\x00x", string: "" },
  { input: "a\x00b", error: `${REQ}found 'b', expected: ${OPERATORS}` },
  { input: "a\x00\x00b", string: "a" },
  { input: "a=\x00b", string: "a=b" },
  { input: "a,\x00b", string: "a,b" },
  { input: "a, \x00b", error: "found '', expected: identifier after ','" },
  { input: "a=b\x00=c", error: "found '=', expected: ',' or 'end of string'" },

  // Keys.
  { input: "A_B.c-d=Z", string: "A_B.c-d=Z" },
  { input: "example.com/app=x", string: "example.com/app=x" },
  { input: `${"a".repeat(253)}/${"b".repeat(63)}`, string: `${"a".repeat(253)}/${"b".repeat(63)}` },
  { input: a63, string: a63 },
  { input: a64, error: `${REQ}<nil>: Invalid value: "${a64}": name part must be no more than 63 bytes` },
  { input: "-a", error: `${REQ}<nil>: Invalid value: "-a": name part ${NAME_REGEX_MSG}` },
  { input: "a/b/c", error: `${REQ}<nil>: Invalid value: "a/b/c": ${KEY_SLASHES_MSG}` },
  { input: "/a", error: `${REQ}<nil>: Invalid value: "/a": prefix part must be non-empty` },
  { input: "a/", error: `${REQ}<nil>: Invalid value: "a/": name part must be non-empty; name part ${NAME_REGEX_MSG}` },
  { input: "Example.com/a", error: `${REQ}<nil>: Invalid value: "Example.com/a": prefix part ${SUBDOMAIN_REGEX_MSG}` },
  {
    input: `${"a".repeat(254)}/${"b".repeat(64)}`,
    error:
      `${REQ}<nil>: Invalid value: "${"a".repeat(254)}/${"b".repeat(64)}": ` +
      "prefix part must be no more than 253 bytes; name part must be no more than 63 bytes",
  },
  { input: "Éx=1", error: `${REQ}<nil>: Invalid value: "Éx": name part ${NAME_REGEX_MSG}` },
  { input: "constructor", string: "constructor" },
  { input: "__proto__=a", error: `${REQ}<nil>: Invalid value: "__proto__": name part ${NAME_REGEX_MSG}` },

  // Values.
  { input: "x=-a", error: `${REQ}values[0][x]: Invalid value: "-a": ${VALUE_REGEX_MSG}` },
  { input: `x=${a63}`, string: `x=${a63}` },
  { input: "x=É", error: `${REQ}values[0][x]: Invalid value: "É": ${VALUE_REGEX_MSG}` },
  {
    input: `x=${"é".repeat(40)}`,
    error: `${REQ}values[0][x]: Invalid value: "${"é".repeat(40)}": must be no more than 63 bytes; ${VALUE_REGEX_MSG}`,
  },
  { input: "x=日本語", error: `${REQ}values[0][x]: Invalid value: "日本語": ${VALUE_REGEX_MSG}` },
  { input: "x=😀", error: `${REQ}values[0][x]: Invalid value: "😀": ${VALUE_REGEX_MSG}` },
  { input: "x=\x01", error: `${REQ}values[0][x]: Invalid value: "\\x01": ${VALUE_REGEX_MSG}` },
  { input: "x=\x7f", error: `${REQ}values[0][x]: Invalid value: "\\x7f": ${VALUE_REGEX_MSG}` },
  { input: "x=\u200b", error: `${REQ}values[0][x]: Invalid value: "\\u200b": ${VALUE_REGEX_MSG}` },
  { input: "x=\u00a0", error: `${REQ}values[0][x]: Invalid value: "\\u00a0": ${VALUE_REGEX_MSG}` },
  { input: 'x="\\', error: `${REQ}values[0][x]: Invalid value: "\\"\\\\": ${VALUE_REGEX_MSG}` },
  { input: "x=<>&", error: `${REQ}found '<', expected: identifier` },
  { input: "x=&a", error: `${REQ}values[0][x]: Invalid value: "&a": ${VALUE_REGEX_MSG}` },
  {
    input: "x in (-a,b,+c)",
    error: `${REQ}[values[0][x]: Invalid value: "+c": ${VALUE_REGEX_MSG}, values[1][x]: Invalid value: "-a": ${VALUE_REGEX_MSG}]`,
  },

  // gt / lt: strconv.ParseInt, then label value validation.
  { input: "x>9223372036854775807", string: "x>9223372036854775807" },
  { input: "x<007", string: "x<007" },
  { input: "x>9223372036854775808", error: `${REQ}values[0]: Invalid value: "9223372036854775808": ${NOT_INTEGER}` },
  { input: "x>+1", error: `${REQ}values[0][x]: Invalid value: "+1": ${VALUE_REGEX_MSG}` },
  { input: "x>-1", error: `${REQ}values[0][x]: Invalid value: "-1": ${VALUE_REGEX_MSG}` },
  {
    input: "x>-9223372036854775809",
    error:
      `${REQ}[values[0]: Invalid value: "-9223372036854775809": ${NOT_INTEGER}, ` +
      `values[0][x]: Invalid value: "-9223372036854775809": ${VALUE_REGEX_MSG}]`,
  },
  { input: "x>1a", error: `${REQ}values[0]: Invalid value: "1a": ${NOT_INTEGER}` },
  { input: "x<", error: `${REQ}values[0]: Invalid value: "": ${NOT_INTEGER}` },
  { input: "x>1_000", error: `${REQ}values[0]: Invalid value: "1_000": ${NOT_INTEGER}` },

  // Sorting: by key only, and Go's sort.Sort is not stable past 12 requirements.
  { input: "x=b,x=a", string: "x=b,x=a" },
  { input: "z,!y,x in (b,a),w notin (d,c),v!=1,u==2,t=3,s>4,r<5", string: "r<5,s>4,t=3,u==2,v!=1,w notin (c,d),x in (a,b),!y,z" },
  {
    input: "b=0,a=1,a=2,a=3,a=4,a=5,a=6,a=7,a=8,a=9,a=10,a=11,a=12",
    string: "a=6,a=1,a=2,a=3,a=4,a=5,a=7,a=8,a=9,a=10,a=11,a=12,b=0",
  },
];

export const MATCH_CASES: readonly MatchCase[] = [
  // TestSelectorMatches
  { from: "TestSelectorMatches", selector: "", labels: { x: "y" }, matches: true },
  { from: "TestSelectorMatches", selector: "x=y", labels: { x: "y" }, matches: true },
  { from: "TestSelectorMatches", selector: "x=y,z=w", labels: { x: "y", z: "w" }, matches: true },
  { from: "TestSelectorMatches", selector: "x!=y,z!=w", labels: { x: "z", z: "a" }, matches: true },
  { from: "TestSelectorMatches", selector: "notin=in", labels: { notin: "in" }, matches: true },
  { from: "TestSelectorMatches", selector: "x", labels: { x: "z" }, matches: true },
  { from: "TestSelectorMatches", selector: "!x", labels: { y: "z" }, matches: true },
  { from: "TestSelectorMatches", selector: "x>1", labels: { x: "2" }, matches: true },
  { from: "TestSelectorMatches", selector: "x<1", labels: { x: "0" }, matches: true },
  { from: "TestSelectorMatches", selector: "x=z", labels: {}, matches: false },
  { from: "TestSelectorMatches", selector: "x=y", labels: { x: "z" }, matches: false },
  { from: "TestSelectorMatches", selector: "x=y,z=w", labels: { x: "w", z: "w" }, matches: false },
  { from: "TestSelectorMatches", selector: "x!=y,z!=w", labels: { x: "z", z: "w" }, matches: false },
  { from: "TestSelectorMatches", selector: "x", labels: { y: "z" }, matches: false },
  { from: "TestSelectorMatches", selector: "!x", labels: { x: "z" }, matches: false },
  { from: "TestSelectorMatches", selector: "x>1", labels: { x: "0" }, matches: false },
  { from: "TestSelectorMatches", selector: "x<1", labels: { x: "2" }, matches: false },
  { from: "TestSelectorMatches", selector: "foo=bar", labels: { foo: "bar", baz: "blah" }, matches: true },
  { from: "TestSelectorMatches", selector: "baz=blah", labels: { foo: "bar", baz: "blah" }, matches: true },
  { from: "TestSelectorMatches", selector: "foo=bar,baz=blah", labels: { foo: "bar", baz: "blah" }, matches: true },
  { from: "TestSelectorMatches", selector: "foo=blah", labels: { foo: "bar", baz: "blah" }, matches: false },
  { from: "TestSelectorMatches", selector: "baz=bar", labels: { foo: "bar", baz: "blah" }, matches: false },
  { from: "TestSelectorMatches", selector: "foo=bar,foobar=bar,baz=blah", labels: { foo: "bar", baz: "blah" }, matches: false },
  // TestRequirementSelectorMatching
  { from: "TestRequirementSelectorMatching", selector: "x in (foo),y notin (alpha)", labels: { x: "foo", y: "baz" }, matches: true },
  { from: "TestRequirementSelectorMatching", selector: "x in (foo),y in (alpha)", labels: { x: "foo", y: "baz" }, matches: false },
  { from: "TestRequirementSelectorMatching", selector: "x notin (),y", labels: { y: "" }, matches: true },
  { from: "TestRequirementSelectorMatching", selector: "!x,y", labels: { y: "" }, matches: true },
  { from: "TestRequirementSelectorMatching", selector: "x notin (),!y", labels: { y: "" }, matches: false },
  { from: "TestRequirementSelectorMatching", selector: "x in ()", labels: { y: "baz" }, matches: false },
  { from: "TestRequirementSelectorMatching", selector: "z>1", labels: { z: "2" }, matches: true },
  { from: "TestRequirementSelectorMatching", selector: "z>1", labels: { z: "v2" }, matches: false },
  // `!=` and `notin` match objects without the key; `=` and `in` do not.
  { selector: "x!=a", labels: {}, matches: true },
  { selector: "x notin (a,b)", labels: { y: "a" }, matches: true },
  { selector: "x notin (a,b)", labels: { x: "b" }, matches: false },
  { selector: "x in (a,b)", labels: {}, matches: false },
  { selector: "x=", labels: { x: "" }, matches: true },
  { selector: "x=", labels: {}, matches: false },
  { selector: "x!=", labels: { x: "" }, matches: false },
  { selector: "x in (,a)", labels: { x: "" }, matches: true },
  // gt / lt parse the label value with strconv.ParseInt.
  { selector: "x>5", labels: { x: "+6" }, matches: true },
  { selector: "x<5", labels: { x: "-6" }, matches: true },
  { selector: "x>5", labels: { x: "006" }, matches: true },
  { selector: "x<5", labels: { x: "5" }, matches: false },
  { selector: "x<5", labels: { x: "" }, matches: false },
  { selector: "x<5", labels: { x: "4.0" }, matches: false },
  { selector: "x<5", labels: { x: " 4" }, matches: false },
  { selector: "x<5", labels: { x: "-9223372036854775809" }, matches: false },
  { selector: "x<9223372036854775807", labels: { x: "-9223372036854775808" }, matches: true },
  { selector: "x>9223372036854775806", labels: { x: "9223372036854775807" }, matches: true },
  { selector: "x>9223372036854775806", labels: { x: "9223372036854775808" }, matches: false },
  { selector: "x<5", labels: { y: "1" }, matches: false },
  // Keys are looked up as own properties only.
  { selector: "constructor", labels: {}, matches: false },
  { selector: "!toString", labels: {}, matches: true },
  { selector: "valueOf=a", labels: {}, matches: false },
  { selector: "valueOf=a", labels: { valueOf: "a" }, matches: true },
  { selector: "hasOwnProperty!=a", labels: {}, matches: true },
];

export const LABEL_SELECTOR_CASES: readonly LabelSelectorCase[] = [
  // TestLabelSelectorAsSelector
  { from: "TestLabelSelectorAsSelector", labelSelector: null, string: "", nothing: true },
  { from: "TestLabelSelectorAsSelector", labelSelector: {}, string: "" },
  { from: "TestLabelSelectorAsSelector", labelSelector: { matchLabels: { foo: "bar" } }, string: "foo=bar" },
  {
    from: "TestLabelSelectorAsSelector",
    labelSelector: { matchExpressions: [{ key: "baz", operator: "In", values: ["qux", "norf"] }] },
    string: "baz in (norf,qux)",
  },
  {
    from: "TestLabelSelectorAsSelector",
    labelSelector: { matchLabels: { foo: "bar" }, matchExpressions: [{ key: "baz", operator: "In", values: ["qux", "norf"] }] },
    string: "baz in (norf,qux),foo=bar",
  },
  {
    from: "TestLabelSelectorAsSelector",
    labelSelector: { matchExpressions: [{ key: "baz", operator: "Exists", values: ["qux", "norf"] }] },
    error: 'values: Invalid value: ["qux","norf"]: values set must be empty for exists and does not exist',
  },
  // Empty lists are "empty", not nil.
  { labelSelector: { matchLabels: {}, matchExpressions: [] }, string: "" },
  {
    labelSelector: {
      matchLabels: { b: "1", a: "" },
      matchExpressions: [
        { key: "a", operator: "NotIn", values: ["z", "y", "z"] },
        { key: "c", operator: "Exists" },
        { key: "d", operator: "DoesNotExist", values: [] },
      ],
    },
    string: "a=,a notin (y,z,z),b=1,c,!d",
  },
  { labelSelector: { matchExpressions: [{ key: "a", operator: "In" }] }, error: "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty" },
  {
    labelSelector: { matchExpressions: [{ key: "a", operator: "NotIn", values: [] }] },
    error: "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
  },
  {
    labelSelector: { matchExpressions: [{ key: "a", operator: "DoesNotExist", values: ["<b>"] }] },
    error:
      '[values: Invalid value: ["\\u003cb\\u003e"]: values set must be empty for exists and does not exist, ' +
      `values[0][a]: Invalid value: "<b>": ${VALUE_REGEX_MSG}]`,
  },
  {
    labelSelector: { matchExpressions: [{ key: "a", operator: "Gt" as "In", values: ["1"] }] },
    error: '"Gt" is not a valid label selector operator',
  },
  { labelSelector: { matchLabels: { "a b": "c" } }, error: `key: Invalid value: "a b": name part ${NAME_REGEX_MSG}` },
  { labelSelector: { matchLabels: { a: "b c" } }, error: `values[0][a]: Invalid value: "b c": ${VALUE_REGEX_MSG}` },
  {
    labelSelector: { matchExpressions: [{ key: "-k", operator: "In", values: ["ok", "-v"] }] },
    error: `[key: Invalid value: "-k": name part ${NAME_REGEX_MSG}, values[1][-k]: Invalid value: "-v": ${VALUE_REGEX_MSG}]`,
  },
];

/**
 * Large and strange inputs (about 200k characters each). apimachinery has
 * no length limit, so both sides must handle them, and in linear time.
 */
export function hostileInputs(): { readonly name: string; readonly input: string }[] {
  const n = 200_000;
  const list = (count: number, item: (i: number) => string): string => Array.from({ length: count }, (_, i) => item(i)).join(",");
  return [
    { name: "long identifier", input: "a".repeat(n) },
    { name: "long value", input: `x=${"a".repeat(n)}` },
    { name: "many requirements, few keys", input: list(20_000, (i) => `k${i % 50}=v${i}`) },
    { name: "many values", input: `x in (${list(30_000, (i) => `v${i}`)})` },
    { name: "many empty slots", input: `x in (${",".repeat(n)})` },
    { name: "open parentheses", input: `x in ${"(".repeat(n)}` },
    { name: "bangs", input: "!".repeat(n) },
    { name: "equals signs", input: `x${"=".repeat(n)}` },
    { name: "commas", input: ",".repeat(n) },
    { name: "whitespace", input: `${" \t\r\n".repeat(n / 4)}x` },
    { name: "NULs", input: "a\x00".repeat(n / 2) },
    { name: "unicode", input: "é日😀".repeat(n / 4) },
    { name: "lone surrogates", input: "\ud800x".repeat(n / 2) },
    { name: "dotted prefix", input: `${"a.".repeat(n / 2)}/b` },
    { name: "dashed prefix", input: `${"a-".repeat(n / 2)}/b` },
    { name: "dashed value", input: `x=${"a-".repeat(n / 2)}-` },
    { name: "slashes", input: "a/".repeat(n / 2) },
    { name: "long integer", input: `x>${"9".repeat(n)}` },
    { name: "control characters", input: Array.from({ length: n }, (_, i) => String.fromCharCode(1 + (i % 31))).join("") },
  ];
}
