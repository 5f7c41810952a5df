/**
 * The PromQL text the `prometheus` provider generates
 * (shared/providers/prometheus/promql.ts), exact outputs for known inputs.
 * test/providers/prometheus.oracle.test.ts proves the same functions against
 * Prometheus's Go parser over arbitrary strings.
 */
import { describe, expect, it } from "vitest";
import { isLabelName, labelMatcher, matchersText, promqlString, quoteRegex } from "../../shared/providers/prometheus/promql.ts";

describe("label names", () => {
  it("accepts the legacy charset only", () => {
    for (const ok of ["a", "_", "__name__", "queue_2", "A9"]) expect(isLabelName(ok)).toBe(true);
    for (const bad of ["", "9a", "a-b", "a.b", "a b", "é", "a\n", "a}"]) expect(isLabelName(bad)).toBe(false);
  });
});

describe("quoting", () => {
  it("quoteRegex escapes exactly Go's QuoteMeta set", () => {
    expect(quoteRegex("\\.+*?()|[]{}^$")).toBe("\\\\\\.\\+\\*\\?\\(\\)\\|\\[\\]\\{\\}\\^\\$");
    expect(quoteRegex("a-b_c/d:e,f=g\"h'k é")).toBe("a-b_c/d:e,f=g\"h'k é");
    expect(quoteRegex("a.b")).toBe("a\\.b");
  });

  it("promqlString escapes backslash, quote, controls and U+FFFD, and keeps the rest", () => {
    expect(promqlString("")).toBe('""');
    expect(promqlString('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(promqlString("l1\nl2\r\t")).toBe('"l1\\nl2\\r\\t"');
    expect(promqlString("\u0000\u0007\u001f\u007f")).toBe('"\\x00\\x07\\x1f\\x7f"');
    expect(promqlString("\ufffd")).toBe('"\\uFFFD"');
    expect(promqlString("é名😀'`")).toBe('"é名😀\'`"');
  });

  it("refuses a string that is not valid Unicode", () => {
    expect(() => promqlString("a\ud800b")).toThrow(/lone surrogate U\+D800 at index 1/);
    expect(() => promqlString("\udfff")).toThrow(/not valid Unicode/);
  });
});

describe("matchers", () => {
  it("one value is an equality matcher, several an anchored alternation of escaped literals", () => {
    expect(labelMatcher("queue", ["a.b"])).toBe('queue="a.b"');
    expect(labelMatcher("queue", ["b", "a.b", "b"])).toBe('queue=~"a\\\\.b|b"');
    expect(labelMatcher("queue", ["x", "x"])).toBe('queue="x"');
    expect(labelMatcher("q", ['"}) or vector(1) #', "|"])).toBe('q=~"\\"\\\\}\\\\) or vector\\\\(1\\\\) #|\\\\|"');
  });

  it("refuses bad names, no values and invalid Unicode", () => {
    expect(() => labelMatcher("a-b", ["x"])).toThrow(/not a Prometheus label name/);
    expect(() => labelMatcher("q", [])).toThrow(/no values/);
    expect(() => labelMatcher("q", ["ok", "\ud800"])).toThrow(/lone surrogate/);
  });

  it("matchersText: fixed labels, then listed labels, each by name", () => {
    expect(matchersText({ z: "1", job: "api" }, { queue: ["b", "a"], env: ["prod"] })).toBe('job="api",z="1",env="prod",queue=~"a|b"');
    expect(matchersText({}, {})).toBe("");
    expect(() => matchersText({ "bad name": "x" }, {})).toThrow(/not a Prometheus label name/);
  });
});
