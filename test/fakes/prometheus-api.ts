/**
 * A fake Prometheus HTTP API on 127.0.0.1 (node:http) for the `prometheus`
 * provider's tests: `POST /api/v1/query` with a form body, answered in the
 * API's envelope (https://prometheus.io/docs/prometheus/latest/querying/api/,
 * `web/api/v1/api.go`): `{"status":"success","data":{"resultType":"vector",
 * "result":[{"metric":{…},"value":[<unix s>,"<v>"]}]}}` or
 * `{"status":"error","errorType":"…","error":"…"}`.
 *
 * It records every request (form fields and headers) and evaluates the two
 * query shapes the provider sends for `series` rules over its stored series,
 * with Prometheus' semantics for the parts used: `sum by (…) (m{…})` and
 * `min by (…) (timestamp(m{…}))`, matchers `=`, `!=`, `=~`, `!~` (regexps
 * anchored `^(?:…)$`; an absent label reads as ""), samples older than
 * `lookback_delta` (default 5 m) not selected. Anything else is a 400
 * `bad_data`, unless a test's `respond` answers it.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { closeServer } from "../helpers/http.ts";

/** A stored series: its labels (`__name__` included), one sample. */
export interface FakeSeries {
  labels: Record<string, string>;
  value: string;
  /** the sample's time, ms since epoch */
  timeMs: number;
}

/** One request as the fake received it. */
export interface RecordedQuery {
  method: string;
  path: string;
  query: string;
  timeout: string | undefined;
  lookbackDelta: string | undefined;
  /** `max_lookback` (VictoriaMetrics' name for the same bound), seconds as sent */
  maxLookback: string | undefined;
  time: string | undefined;
  headers: IncomingHttpHeaders;
}

/** A canned answer: HTTP status, JSON body (or text), headers. */
export interface FakeAnswer {
  status?: number;
  body: unknown;
  headers?: Record<string, string>;
  /** wait this long before answering, ms */
  delayMs?: number;
}

export interface FakePrometheus {
  /** base URL, e.g. `http://127.0.0.1:41234` */
  url: string;
  series: FakeSeries[];
  requests: RecordedQuery[];
  /** answers a request itself when it returns an answer (checked first) */
  respond: ((q: RecordedQuery) => FakeAnswer | undefined) | undefined;
  close(): Promise<void>;
}

/** The success envelope of an instant vector. */
export function vector(result: { metric: Record<string, string>; value: [number, string] }[], extra: Record<string, unknown> = {}): unknown {
  return { status: "success", data: { resultType: "vector", result }, ...extra };
}

/** Read a PromQL double-quoted string (the escapes the provider writes). */
function unquote(text: string): string {
  return JSON.parse(text.replace(/\\x([0-9a-fA-F]{2})/g, "\\u00$1")) as string;
}

type Matcher = { name: string; op: string; value: string };

function parseMatchers(text: string): Matcher[] | undefined {
  const out: Matcher[] = [];
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)("(?:[^"\\]|\\.)*")(,|$)/gy;
  let m: RegExpExecArray | null;
  while (re.lastIndex < text.length && (m = re.exec(text)) !== null) out.push({ name: m[1]!, op: m[2]!, value: unquote(m[3]!) });
  return re.lastIndex === text.length || text === "" ? out : undefined;
}

/** Compiled `=~`/`!~` patterns by source, so a query is compiled once and not once per stored series (bounded: cleared past 256). */
const compiled = new Map<string, RegExp>();

function anchored(value: string): RegExp {
  let re = compiled.get(value);
  if (re === undefined) {
    if (compiled.size >= 256) compiled.clear();
    re = new RegExp(`^(?:${value})$`, "s");
    compiled.set(value, re);
  }
  return re;
}

function matches(labels: Record<string, string>, m: Matcher): boolean {
  const v = labels[m.name] ?? "";
  switch (m.op) {
    case "=":
      return v === m.value;
    case "!=":
      return v !== m.value;
    case "=~":
      return anchored(m.value).test(v);
    default:
      return !anchored(m.value).test(v);
  }
}

function seconds(duration: string | undefined, fallback: number): number {
  if (duration === undefined) return fallback;
  const m = /^(\d+(?:\.\d+)?)$/.exec(duration); // plain seconds, as the provider sends them
  return m ? Number(m[1]) : fallback;
}

/** Evaluate the provider's series-rule queries; undefined for anything else. */
function evaluate(series: readonly FakeSeries[], q: RecordedQuery, nowMs: number): FakeAnswer | undefined {
  const m = /^(sum|min)(?: by \(([^)]*)\))? \((timestamp\()?([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}\)?\)$/s.exec(q.query);
  if (m === null) return undefined;
  const [, op, by, ts, name, matcherText] = m;
  if ((op === "min") !== (ts !== undefined)) return undefined;
  const matchers = parseMatchers(matcherText!);
  if (matchers === undefined) return undefined;
  const lookbackMs = seconds(q.lookbackDelta, 300) * 1000;
  const groupBy = by === undefined ? [] : by.split(", ").filter((s) => s !== "");
  const groups = new Map<string, { metric: Record<string, string>; acc: number }>();
  for (const s of series) {
    if (s.labels["__name__"] !== name || !matchers.every((x) => matches(s.labels, x))) continue;
    if (s.timeMs > nowMs || s.timeMs <= nowMs - lookbackMs) continue;
    const metric = Object.fromEntries(groupBy.filter((l) => (s.labels[l] ?? "") !== "").map((l) => [l, s.labels[l]!]));
    const key = JSON.stringify(groupBy.map((l) => s.labels[l] ?? ""));
    const x = op === "sum" ? Number(s.value) : s.timeMs / 1000;
    const g = groups.get(key);
    if (g === undefined) groups.set(key, { metric, acc: x });
    else g.acc = op === "sum" ? g.acc + x : Math.min(g.acc, x);
  }
  return { body: vector([...groups.values()].map((g) => ({ metric: g.metric, value: [nowMs / 1000, String(g.acc)] }))) };
}

/**
 * Start the fake.
 * @param now the evaluation time, ms since epoch (the tests' clock)
 */
export async function startFakePrometheus(now: () => number): Promise<FakePrometheus> {
  const fake: FakePrometheus = { url: "", series: [], requests: [], respond: undefined, close: async () => {} };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
      const recorded: RecordedQuery = {
        method: req.method ?? "",
        path: req.url ?? "",
        query: form.get("query") ?? "",
        timeout: form.get("timeout") ?? undefined,
        lookbackDelta: form.get("lookback_delta") ?? undefined,
        maxLookback: form.get("max_lookback") ?? undefined,
        time: form.get("time") ?? undefined,
        headers: req.headers,
      };
      fake.requests.push(recorded);
      const answer: FakeAnswer =
        req.method !== "POST" || req.url !== "/api/v1/query"
          ? { status: 404, body: "404 page not found\n" }
          : (fake.respond?.(recorded) ??
            evaluate(fake.series, recorded, now()) ?? { status: 400, body: { status: "error", errorType: "bad_data", error: `fake cannot evaluate ${recorded.query}` } });
      const send = () => {
        if (res.destroyed) return;
        const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
        res.writeHead(answer.status ?? 200, { "content-type": typeof answer.body === "string" ? "text/plain" : "application/json", ...answer.headers });
        res.end(text);
      };
      if (answer.delayMs !== undefined) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () => closeServer(server);
  return fake;
}
