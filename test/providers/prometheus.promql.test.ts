/**
 * The PromQL text the `prometheus` provider generates
 * (shared/providers/prometheus/promql.ts), exact outputs for known inputs.
 * test/providers/prometheus.oracle.test.ts proves the same functions against
 * Prometheus's Go parser over arbitrary strings.
 */
import { describe, expect, it } from "vitest";
import {
  durationSeconds,
  isLabelName,
  labelMatcher,
  matchersText,
  MATCHERS_PLACEHOLDER,
  parseTemplate,
  promqlString,
  quoteRegex,
  renderTemplate,
  templateRanges,
  TemplateError,
} from "../../shared/providers/prometheus/promql.ts";

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

/** The TemplateError of `text`, as `line:column message`. */
function refusal(text: string): string {
  try {
    parseTemplate(text);
  } catch (err) {
    if (!(err instanceof TemplateError)) throw err;
    expect(err.message).toBe(`line ${err.line}, column ${err.column}: ${err.reason}`);
    return `${err.line}:${err.column} ${err.reason}`;
  }
  throw new Error(`accepted: ${text}`);
}

describe("query templates", () => {
  it("uses prometheus-adapter's placeholder", () => {
    expect(MATCHERS_PLACEHOLDER).toBe("<<.LabelMatchers>>");
  });

  it("renders the matchers in every placeholder, and without matchers drops each placeholder with a comma next to it", () => {
    const cases: [string, string, string][] = [
      ["sum by (queue) (rate(m{<<.LabelMatchers>>}[5m]))", 'sum by (queue) (rate(m{q="x"}[5m]))', "sum by (queue) (rate(m{}[5m]))"],
      ['m{a="b", <<.LabelMatchers>>}', 'm{a="b", q="x"}', 'm{a="b"}'],
      ['m{<<.LabelMatchers>>, a="b"}', 'm{q="x", a="b"}', 'm{a="b"}'],
      ['m{a="b", <<.LabelMatchers>>, }', 'm{a="b", q="x", }', 'm{a="b", }'],
      ['{"m.x", <<.LabelMatchers>>}', '{"m.x", q="x"}', '{"m.x"}'],
      ["m{ <<.LabelMatchers>> ,}\n/ on() n{<<.LabelMatchers>>}", 'm{ q="x" ,}\n/ on() n{q="x"}', "m{}\n/ on() n{}"],
      ["max_over_time(m{<<.LabelMatchers>>}[5m:1m]) offset 1m", 'max_over_time(m{q="x"}[5m:1m]) offset 1m', "max_over_time(m{}[5m:1m]) offset 1m"],
    ];
    for (const [text, rendered, empty] of cases) {
      const t = parseTemplate(text);
      expect(t.text).toBe(text);
      expect(renderTemplate(t, 'q="x"')).toBe(rendered);
      expect(renderTemplate(t, "")).toBe(empty);
    }
  });

  it("a selector with nothing but the placeholder cannot be rendered without matchers", () => {
    const t = parseTemplate("{<<.LabelMatchers>>}");
    expect(renderTemplate(t, 'q="x"')).toBe('{q="x"}');
    expect(() => renderTemplate(t, "")).toThrow(/Prometheus refuses it without matchers/);
  });

  it("a plain { text } is checked when rendered", () => {
    expect(renderTemplate({ text: "m{<<.LabelMatchers>>}" }, 'q="x"')).toBe('m{q="x"}');
    expect(() => renderTemplate({ text: "m" }, 'q="x"')).toThrow(TemplateError);
  });

  it("refuses a selector without the placeholder, anywhere, with its line and column", () => {
    expect(refusal("m{<<.LabelMatchers>>}\n  / on(q) group_left\n  n")).toBe(
      "3:3 vector selector n has no <<.LabelMatchers>>: every selector must carry the HPA's matchers, or it reads series the selector did not choose",
    );
    expect(refusal("rate(m[5m])")).toMatch(/^1:6 vector selector m has no/);
    expect(refusal('max_over_time(m{<<.LabelMatchers>>}[5m]) + max_over_time(n{a="b"}[5m:1m])')).toMatch(/^1:58 vector selector n\{a="b"\} has no/);
    expect(refusal("absent(m{<<.LabelMatchers>>}) or\n\tlabel_replace(x, \"a\", \"b\", \"c\", \"d\")")).toMatch(/^2:16 vector selector x has no/);
    expect(refusal("é名 + m")).toMatch(/^1:1 PromQL syntax error/);
    expect(refusal("1 + 😀m")).toMatch(/^1:5 PromQL syntax error/);
    expect(refusal("sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)")).toMatch(/^1:5 unknown placeholder <<.Series>>: the only one is <<.LabelMatchers>>/);
    expect(refusal("sum(m{<<.LabelMatchers>>}) by (<<.GroupBy>>)")).toMatch(/^1:32 unknown placeholder <<.GroupBy>>/);
    expect(refusal("vector(1) + 2")).toBe("1:1 the template has no vector selector: it must read series through metric{<<.LabelMatchers>>}");
  });

  it("refuses a placeholder that is not a whole matcher in a selector's braces", () => {
    const misplaced = /must be a whole label matcher inside a vector selector's braces/;
    expect(refusal("m{<<.LabelMatchers>>} # <<.LabelMatchers>>")).toMatch(/^1:25 /);
    expect(refusal("m{<<.LabelMatchers>>} # <<.LabelMatchers>>")).toMatch(misplaced);
    expect(refusal("m{a<<.LabelMatchers>>}")).toMatch(/^1:4 /);
    expect(refusal("m{<<.LabelMatchers>>}\n+ `<<.LabelMatchers>>`")).toMatch(/^2:4 /);
    expect(refusal("m{<<.LabelMatchers>>, <<.LabelMatchers>>}")).toBe("1:23 <<.LabelMatchers>> appears twice in the vector selector m{<<.LabelMatchers>>, <<.LabelMatchers>>}");
    expect(refusal('label_replace(m{<<.LabelMatchers>>}, "a", "<<.LabelMatchers>>", "b", "c")')).toMatch(/^1:44 PromQL syntax error/);
  });

  it("refuses syntax errors and string literals Prometheus's lexer refuses", () => {
    expect(refusal("")).toBe("1:1 PromQL syntax error: the template ends too early");
    expect(refusal("sum(m{<<.LabelMatchers>>}")).toBe("1:26 PromQL syntax error: the template ends too early");
    expect(refusal('m{<<.LabelMatchers>>} + on() group_left\nlabel_replace(n{<<.LabelMatchers>>}, "a", "b, "c")')).toMatch(/^2:/);
    expect(refusal('m{<<.LabelMatchers>>, a="unterminated}')).toBe("1:25 unterminated string");
    expect(refusal('m{<<.LabelMatchers>>, a="\\q"}')).toBe("1:26 unknown escape sequence \\q in a string");
    expect(refusal("m{<<.LabelMatchers>>, a='\\\"'}")).toBe('1:26 unknown escape sequence \\" in a string');
    expect(refusal('m{<<.LabelMatchers>>, a="\\x4"}')).toBe("1:26 malformed escape sequence in a string");
    expect(refusal('m{<<.LabelMatchers>>, a="\\ud800"}')).toBe("1:26 escape sequence is an invalid Unicode code point");
    expect(refusal('m{<<.LabelMatchers>>, a="\\777"}')).toBe("1:26 escape sequence is an invalid Unicode code point");
    expect(refusal('m{<<.LabelMatchers>>, a="\ufffd"}')).toMatch(/^1:26 U\+FFFD in a string/);
    expect(refusal("m{<<.LabelMatchers>>}\n\ud800")).toBe("2:1 the template is not valid Unicode (a lone surrogate)");
    for (const ok of ['m{<<.LabelMatchers>>, a="\\x41\\u00e9\\U0001F600\\101\\a\\"\\\\"}', "m{<<.LabelMatchers>>, a='\\''}", "m{<<.LabelMatchers>>, a=`\\q`}"]) {
      expect(() => parseTemplate(ok)).not.toThrow();
    }
  });
});

describe("templateRanges: how far back a template's ranges read (the tools' warning about ranges longer than maxAgeSeconds)", () => {
  it("reads Prometheus duration literals: units in order, each once, or plain seconds", () => {
    expect([durationSeconds("5m"), durationSeconds("1h30m"), durationSeconds("90s"), durationSeconds("500ms"), durationSeconds("1d"), durationSeconds("300"), durationSeconds("1.5")]).toEqual([
      300, 5400, 90, 0.5, 86_400, 300, 1.5,
    ]);
    for (const bad of ["", "5x", "m5", "1m1h", "5m+1m"]) expect(durationSeconds(bad), bad).toBeUndefined();
  });

  it("lists every range selector's range and every subquery's range (not its step, not an offset), with line and column in the template", () => {
    const t = parseTemplate(`sum by (q) (\n  max_over_time(rate(m{${MATCHERS_PLACEHOLDER}}[1m])[10m:30s])\n) + m{${MATCHERS_PLACEHOLDER}}[1h30m] offset 5m`);
    expect(templateRanges(t)).toEqual([
      { text: "1m", seconds: 60, line: 2, column: 44 },
      { text: "10m", seconds: 600, line: 2, column: 49 },
      { text: "1h30m", seconds: 5400, line: 3, column: 27 },
    ]);
    expect(templateRanges(parseTemplate(`sum(m{${MATCHERS_PLACEHOLDER}})`))).toEqual([]);
  });
});
