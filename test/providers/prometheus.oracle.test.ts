/**
 * The PromQL the `prometheus` provider generates
 * (shared/providers/prometheus/promql.ts) against Prometheus's own Go parser:
 * test/promql-oracle/ is a Go program on github.com/prometheus/prometheus
 * v0.316.0 `promql/parser` (built and cached by infra/tools/go.ts) that
 * prints the vector selectors and matchers of each query, and whether each
 * regexp matcher — compiled as the server compiles it, anchored
 * `^(?s:…)$` — matches given probe strings.
 *
 * - over arbitrary hostile label values (any Unicode, quotes, backslashes,
 *   newlines, NUL, U+FFFD, regexp metacharacters, `"}`, `) or vector(1)`, …),
 *   `metric{` + {@link matchersText} + `}` parses to exactly one selector
 *   with exactly the intended matchers: `=` with the value itself for one
 *   value, one `=~` for several whose regexp matches each intended value and
 *   none of their near misses (`a.b` vs `aXb`, the prometheus-adapter bug);
 * - every template shape {@link parseTemplate} accepts, rendered with such
 *   matchers (and with none), parses to the selectors of the template, each
 *   with the template's own matchers plus exactly the intended ones;
 * - a string literal in a template is refused by {@link parseTemplate}
 *   exactly when Prometheus's lexer refuses it.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { goBinary } from "../../infra/tools/go.ts";
import { labelMatcher, matchersText, parseTemplate, promqlString, renderTemplate, TemplateError } from "../../shared/providers/prometheus/promql.ts";
import { fcRuns } from "../helpers/fc.ts";

const ORACLE_DIR = fileURLToPath(new URL("../promql-oracle/", import.meta.url));

interface Matcher {
  name: string;
  type: "=" | "!=" | "=~" | "!~";
  value: string;
  probes?: boolean[];
}
interface Answer {
  selectors?: { name: string; matchers: Matcher[] }[];
  error?: string;
}

let binary = "";

beforeAll(() => {
  const started = Date.now();
  binary = goBinary(ORACLE_DIR, "promql-oracle", { timeoutMs: 15 * 60_000 });
  console.log(`promql oracle ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}, 16 * 60_000);

function ask(queries: { query: string; probes?: string[] }[]): Answer[] {
  const input = queries.map((q) => JSON.stringify(q)).join("\n") + "\n";
  const run = spawnSync(binary, [], { input, encoding: "utf8", maxBuffer: 1 << 28, timeout: 60_000 });
  if (run.status !== 0) throw new Error(`oracle failed: ${run.stderr}`);
  const out = run.stdout.split("\n").filter((l) => l !== "");
  expect(out.length).toBe(queries.length);
  return out.map((l) => JSON.parse(l) as Answer);
}

/** Pieces that break naive quoting: string and regexp syntax, PromQL syntax, escapes, controls. */
const HOSTILE = [
  '"', "\\", "\n", "\r", "\t", "\u0000", "\u007f", "\ufffd", "\u2028", "'", "`", "|", ".", "*", ".*", "+", "?", "(", ")", "[", "]", "{", "}", "^", "$",
  '"}', '"} or vector(1) #', ") or vector(1)", "\\x41", "\\u0041", "\\", '\\"', "(?i)", "a|b", "é", "名", "😀", " ", ",", "=", "=~", "!~", "#",
];
const value: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.array(fc.oneof(fc.constantFrom(...HOSTILE), fc.string({ unit: "binary", maxLength: 3 })), { maxLength: 6 }).map((p) => p.join("")) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 12 }) },
  { weight: 1, arbitrary: fc.constantFrom("", "a.b", "a", "queue-1") },
);
const FIXED_NAMES = ["job", "env", "_x"];
const LISTED_NAMES = ["queue", "topic", "a_1"];

/** Strings about one character away from `v` that a sloppy regexp would also match (whole code points: valid Unicode). */
function nearMisses(v: string): string[] {
  const points = [...v];
  return [`${v}x`, `x${v}`, v.replace(/[\\.+*?()|[\]{}^$]/g, "X"), points.slice(1).join(""), points.slice(0, -1).join(""), `${v}\n`, v.toUpperCase(), ""];
}

type Expected = { name: string; values: string[] };

/**
 * Compare Go's matchers of one selector with the intended ones (besides
 * `extra`, the matchers expected anyway); undefined when they agree, else
 * what differs.
 */
function mismatch(got: Matcher[], intended: Expected[], probes: string[], extra: Matcher[]): string | undefined {
  const rest = [...got];
  for (const e of extra) {
    const i = rest.findIndex((m) => m.name === e.name && m.type === e.type && m.value === e.value);
    if (i < 0) return `missing the template's own matcher ${JSON.stringify(e)}`;
    rest.splice(i, 1);
  }
  if (rest.length !== intended.length) return `${rest.length} matchers, expected ${intended.length}: ${JSON.stringify(rest)}`;
  for (const e of intended) {
    const unique = [...new Set(e.values)];
    const i = rest.findIndex((m) => m.name === e.name);
    if (i < 0) return `no matcher for ${e.name}`;
    const m = rest.splice(i, 1)[0]!;
    if (unique.length === 1) {
      if (m.type !== "=" || m.value !== unique[0]) return `${e.name}: ${JSON.stringify(m)}, expected = ${JSON.stringify(unique[0])}`;
      continue;
    }
    if (m.type !== "=~") return `${e.name}: ${JSON.stringify(m)}, expected =~`;
    const wrong = probes.filter((p, k) => m.probes?.[k] !== unique.includes(p));
    if (wrong.length > 0) return `${e.name}=~${JSON.stringify(m.value)} is wrong on ${JSON.stringify(wrong)} (intended ${JSON.stringify(unique)})`;
  }
  return undefined;
}

const labelSets = fc.record({
  fixed: fc.dictionary(fc.constantFrom(...FIXED_NAMES), value, { maxKeys: 2 }),
  byLabel: fc.dictionary(fc.constantFrom(...LISTED_NAMES), fc.array(value, { minLength: 1, maxLength: 4 }), { maxKeys: 3 }),
});

function intendedOf(c: { fixed: Record<string, string>; byLabel: Record<string, string[]> }): { intended: Expected[]; probes: string[] } {
  const intended = [
    ...Object.entries(c.fixed).map(([name, v]) => ({ name, values: [v] })),
    ...Object.entries(c.byLabel).map(([name, values]) => ({ name, values })),
  ];
  const probes = [...new Set(intended.flatMap((e) => e.values.flatMap((v) => [v, ...nearMisses(v)])))];
  return { intended, probes };
}

describe("generated matchers against Prometheus's parser", () => {
  it("metric{matchersText(…)} is one selector with exactly the intended matchers; =~ matches the values and no near miss", () => {
    fc.assert(
      fc.property(fc.array(labelSets, { minLength: 1, maxLength: 40 }), (cases) => {
        const built = cases.map((c) => ({ ...intendedOf(c), query: `queue_depth{${matchersText(c.fixed, c.byLabel)}}` }));
        const answers = ask(built.map(({ query, probes }) => ({ query, probes })));
        const problems: string[] = [];
        built.forEach((b, i) => {
          const a = answers[i]!;
          if (a.error !== undefined) return void problems.push(`${b.query}: ${a.error}`);
          if (a.selectors?.length !== 1) return void problems.push(`${b.query}: ${a.selectors?.length} selectors`);
          const name: Matcher = { name: "__name__", type: "=", value: "queue_depth" };
          const why = mismatch(a.selectors[0]!.matchers, b.intended, b.probes, [name]);
          if (why !== undefined) problems.push(`${b.query}: ${why}`);
        });
        expect(problems).toEqual([]);
      }),
      fcRuns(60),
    );
  });

  it("the a.b / aXb case: an escaped alternation matches the listed values only", () => {
    const [a] = ask([{ query: `m{${labelMatcher("queue", ["a.b", "c"])}}`, probes: ["a.b", "c", "aXb", "a.bc", "ca.b", "a.b|c"] }]);
    const m = a!.selectors![0]!.matchers.find((x) => x.name === "queue")!;
    expect({ type: m.type, probes: m.probes }).toEqual({ type: "=~", probes: [true, true, false, false, false, false] });
  });

  it("a value that is not valid Unicode is refused, never sent", () => {
    fc.assert(
      fc.property(value, value, fc.integer({ min: 0xd800, max: 0xdfff }), (before, after, unit) => {
        const bad = `${before}${String.fromCharCode(unit)}${after}`;
        if (/\p{Cs}/u.test(bad)) expect(() => labelMatcher("q", [bad, "ok"])).toThrow(/not valid Unicode/);
      }),
      fcRuns(200),
    );
  });
});

/** Template shapes the parser accepts: every kind of place a vector selector can be. */
const TEMPLATES = [
  "queue_depth{<<.LabelMatchers>>}",
  'sum by (queue) (rate(http_requests_total{code=~"5..", <<.LabelMatchers>>}[5m]))',
  "max_over_time(queue_depth{<<.LabelMatchers>>}[10m:1m] offset 1m)",
  'queue_depth{<<.LabelMatchers>>, env!="dev"}\n  / on (queue) group_left\n  sum by (queue) (consumers{<<.LabelMatchers>>,})',
  '{"queue.depth", <<.LabelMatchers>>}',
  '{__name__="queue_depth", <<.LabelMatchers>>} # a comment with "quotes" and {braces}',
  'label_replace(lag{<<.LabelMatchers>>}, "dst", "$1", "src", "(.*)") > bool 3',
  "histogram_quantile(0.9, sum by (le) (rate(latency_bucket{<<.LabelMatchers>>}[5m]))) or vector(0) * on() group_left absent(up{<<.LabelMatchers>>})",
  "timestamp(queue_depth{<<.LabelMatchers>>} @ end())",
];

describe("rendered templates against Prometheus's parser", () => {
  it("each accepted template, rendered with hostile matchers and with none, has the template's selectors plus exactly the intended matchers", () => {
    const templates = TEMPLATES.map((t) => parseTemplate(t));
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(TEMPLATES.length - 1), labelSets), { minLength: 1, maxLength: 30 }), (cases) => {
        const built = cases.map(([t, c]) => {
          const matchers = matchersText(c.fixed, c.byLabel);
          const template = templates[t]!;
          let baseline: string | undefined;
          try {
            baseline = renderTemplate(template, "");
          } catch {
            baseline = undefined; // {<<.LabelMatchers>>} alone: Prometheus needs a matcher
          }
          return { ...intendedOf(c), matchers, query: renderTemplate(template, matchers), baseline };
        });
        const asked = built.flatMap((b) => [{ query: b.query, probes: b.probes }, { query: b.baseline ?? "vector(1)" }]);
        const answers = ask(asked);
        const problems: string[] = [];
        built.forEach((b, i) => {
          const a = answers[2 * i]!;
          const base = answers[2 * i + 1]!;
          if (a.error !== undefined) return void problems.push(`${b.query}: ${a.error}`);
          if (base.error !== undefined) return void problems.push(`without matchers ${b.baseline}: ${base.error}`);
          if (b.matchers === "") return void expect(a.selectors).toEqual(base.selectors);
          if (a.selectors!.length !== base.selectors!.length) return void problems.push(`${b.query}: ${a.selectors!.length} selectors, expected ${base.selectors!.length}`);
          a.selectors!.forEach((s, k) => {
            const why = mismatch(s.matchers, b.intended, b.probes, base.selectors![k]!.matchers);
            if (why !== undefined) problems.push(`${b.query} selector ${k}: ${why}`);
          });
        });
        expect(problems).toEqual([]);
      }),
      fcRuns(40),
    );
  });

  it("a template string literal is refused exactly when Prometheus's lexer refuses it", () => {
    const piece = fc.constantFrom("\\", '"', "'", "a", "x", "u", "U", "0", "7", "8", "f", "F", "q", "n", "\n", "\ufffd", "D", "1", "é", "`");
    const literal = fc.tuple(fc.constantFrom('"', "'", "`"), fc.array(piece, { maxLength: 12 }), fc.boolean()).map(([q, body, close]) => q + body.join("") + (close ? q : ""));
    fc.assert(
      fc.property(fc.array(literal, { minLength: 1, maxLength: 50 }), (literals) => {
        const texts = literals.map((l) => `label_replace(m{<<.LabelMatchers>>}, "dst", ${l}, "src", "(.*)")`);
        const ours = texts.map((t) => {
          try {
            return renderTemplate(parseTemplate(t), 'q="x"');
          } catch (err) {
            if (err instanceof TemplateError) return err;
            throw err;
          }
        });
        const theirs = ask(texts.map((t) => ({ query: t.replace("<<.LabelMatchers>>", 'q="x"') })));
        const problems = texts.flatMap((t, i) => {
          const accepted = typeof ours[i] === "string";
          const goAccepted = theirs[i]!.error === undefined;
          return accepted === goAccepted ? [] : [`${JSON.stringify(t)}: ours ${accepted ? "accepts" : (ours[i] as TemplateError).message}, Go ${goAccepted ? "accepts" : theirs[i]!.error}`];
        });
        expect(problems).toEqual([]);
      }),
      fcRuns(40),
    );
  });

  it("promqlString reads back to the string itself in Go", () => {
    fc.assert(
      fc.property(fc.array(value, { minLength: 1, maxLength: 50 }), (values) => {
        const answers = ask(values.map((v) => ({ query: `m{q=${promqlString(v)}}` })));
        const back = answers.map((a) => a.error ?? a.selectors?.[0]?.matchers.find((m) => m.name === "q")?.value);
        expect(back).toEqual(values);
      }),
      fcRuns(20),
    );
  });
});
