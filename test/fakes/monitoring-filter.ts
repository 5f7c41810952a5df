/**
 * An independent parser and evaluator of Cloud Monitoring filters, for the
 * fakes and for the injection tests: it reads filters the way the
 * "Monitoring filters" reference describes them — comparisons
 * `selector = "string"`, `selector != "string"`, `selector = one_of("a", …)`,
 * combined with `AND`, `OR`, `NOT` and parentheses; strings in double quotes
 * where a backslash escapes the next character — and refuses anything else.
 * Written separately from `shared/providers/gcp/filter.ts` so that a test
 * comparing the two can catch an escaping mistake.
 */

/** A parsed filter. */
export type FilterNode =
  | { kind: "and" | "or"; items: FilterNode[] }
  | { kind: "not"; item: FilterNode }
  | { kind: "cmp"; field: string; op: "=" | "!="; values: string[] };

/** Thrown for a filter the grammar does not accept (the API answers INVALID_ARGUMENT). */
export class FilterSyntaxError extends Error {
  override name = "FilterSyntaxError";
}

type Token = { t: "str"; v: string } | { t: "word"; v: string } | { t: "op"; v: string };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === " " || c === "\t" || c === "\n") {
      i++;
    } else if (c === '"') {
      let v = "";
      i++;
      for (;;) {
        if (i >= text.length) throw new FilterSyntaxError("unterminated string");
        const d = text[i]!;
        if (d === "\\") {
          if (i + 1 >= text.length) throw new FilterSyntaxError("dangling backslash");
          v += text[i + 1];
          i += 2;
        } else if (d === '"') {
          i++;
          break;
        } else {
          v += d;
          i++;
        }
      }
      tokens.push({ t: "str", v });
    } else if (c === "!" && text[i + 1] === "=") {
      tokens.push({ t: "op", v: "!=" });
      i += 2;
    } else if ("=(),".includes(c)) {
      tokens.push({ t: "op", v: c });
      i++;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_.]*/.exec(text.slice(i))!;
      tokens.push({ t: "word", v: m[0] });
      i += m[0].length;
    } else {
      throw new FilterSyntaxError(`unexpected character ${JSON.stringify(c)} at ${i}`);
    }
  }
  return tokens;
}

/** Parse a filter. @throws FilterSyntaxError */
export function parseFilter(text: string): FilterNode {
  const tokens = tokenize(text);
  let i = 0;
  const peek = () => tokens[i];
  const isWord = (v: string) => peek()?.t === "word" && peek()!.v === v;
  const expect = (v: string) => {
    const tok = tokens[i++];
    if (tok?.t !== "op" || tok.v !== v) throw new FilterSyntaxError(`expected ${v}`);
  };
  const str = (): string => {
    const tok = tokens[i++];
    if (tok?.t !== "str") throw new FilterSyntaxError("expected a string");
    return tok.v;
  };
  const or = (): FilterNode => {
    const items = [and()];
    while (isWord("OR")) {
      i++;
      items.push(and());
    }
    return items.length === 1 ? items[0]! : { kind: "or", items };
  };
  const and = (): FilterNode => {
    const items = [unary()];
    while (isWord("AND")) {
      i++;
      items.push(unary());
    }
    return items.length === 1 ? items[0]! : { kind: "and", items };
  };
  const unary = (): FilterNode => {
    if (isWord("NOT")) {
      i++;
      return { kind: "not", item: unary() };
    }
    const tok = peek();
    if (tok?.t === "op" && tok.v === "(") {
      i++;
      const inner = or();
      expect(")");
      return inner;
    }
    if (tok?.t !== "word" || ["AND", "OR", "NOT"].includes(tok.v)) throw new FilterSyntaxError("expected a selector");
    i++;
    const field = tok.v;
    if (!/^(?:metric\.type|resource\.type|project|(?:metric|resource)\.labels\.[A-Za-z_][A-Za-z0-9_]*)$/.test(field)) {
      throw new FilterSyntaxError(`unknown selector ${field}`);
    }
    const op = tokens[i++];
    if (op?.t !== "op" || (op.v !== "=" && op.v !== "!=")) throw new FilterSyntaxError(`expected = or != after ${field}`);
    if (isWord("one_of")) {
      i++;
      expect("(");
      const values = [str()];
      while (peek()?.t === "op" && peek()!.v === ",") {
        i++;
        values.push(str());
      }
      expect(")");
      return { kind: "cmp", field, op: op.v, values };
    }
    return { kind: "cmp", field, op: op.v, values: [str()] };
  };
  const node = or();
  if (i !== tokens.length) throw new FilterSyntaxError(`unexpected ${JSON.stringify(tokens[i]?.v)} after the filter`);
  return node;
}

/** The labels a filter is evaluated against. */
export interface FilterSubject {
  metricType: string;
  resourceType: string;
  metricLabels: Record<string, string>;
  resourceLabels: Record<string, string>;
  project?: string;
}

function valueOf(subject: FilterSubject, field: string): string | undefined {
  if (field === "metric.type") return subject.metricType;
  if (field === "resource.type") return subject.resourceType;
  if (field === "project") return subject.project;
  const [scope, , key] = field.split(".", 3) as [string, string, string];
  return scope === "metric" ? subject.metricLabels[key] : subject.resourceLabels[key];
}

/** Whether `subject` satisfies `node`. */
export function matchesFilter(node: FilterNode, subject: FilterSubject): boolean {
  switch (node.kind) {
    case "and":
      return node.items.every((n) => matchesFilter(n, subject));
    case "or":
      return node.items.some((n) => matchesFilter(n, subject));
    case "not":
      return !matchesFilter(node.item, subject);
    case "cmp": {
      const actual = valueOf(subject, node.field);
      const hit = actual !== undefined && node.values.includes(actual);
      return node.op === "=" ? hit : !hit;
    }
  }
}

/** The metric types a filter pins with top-level `metric.type = "…"` comparisons. */
export function pinnedMetricTypes(node: FilterNode): string[] {
  const top = node.kind === "and" ? node.items : [node];
  return top.flatMap((n) => (n.kind === "cmp" && n.field === "metric.type" && n.op === "=" ? n.values : []));
}
