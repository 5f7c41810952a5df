/**
 * A CloudWatch fake on 127.0.0.1 that speaks the protocol the AWS SDK v3
 * really sends: AWS JSON 1.0 (`POST /`, `Content-Type:
 * application/x-amz-json-1.0`, `X-Amz-Target:
 * GraniteServiceVersion20100801.GetMetricData`, timestamps as epoch seconds),
 * errors with `__type` and the query-compatible `x-amzn-query-error` header.
 *
 * It stores raw samples per metric (namespace, name, dimension set) and
 * computes the requested statistic per period like CloudWatch does, with
 * period-start timestamps; evaluates `+ - * /` metric math; validates the
 * request as the API reference states (≤ 500 queries, unique ids matching
 * `^[a-z][a-zA-Z0-9_]*$`, known functions, ids referenced); paginates with
 * `NextToken`; and records every call so tests can count backend calls.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One recorded GetMetricData (or other) call. */
export interface RecordedCall {
  target: string;
  body: any;
  /** the access key id of the SigV4 `Authorization` header */
  accessKeyId: string | undefined;
}

/** A metric's identity as `MetricStat.Metric` carries it. */
export interface MetricId {
  namespace: string;
  metricName: string;
  dimensions?: Record<string, string>;
}

/** Whole-call behaviours for failure tests. */
export type CallBehaviour = "normal" | "hang" | "throttle" | "denied" | "garbage" | "internal";

/** Functions the fake's metric math understands (a subset of CloudWatch's). */
const KNOWN_FUNCTIONS = new Set(["ABS", "FILL", "SUM", "AVG", "MAX", "MIN", "IF", "RATE", "DIFF"]);

function metricKey(m: MetricId): string {
  const dims = Object.entries(m.dimensions ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([m.namespace, m.metricName, dims]);
}

function statistic(stat: string, values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  switch (stat) {
    case "Sum":
      return values.reduce((a, b) => a + b, 0);
    case "Average":
      return values.reduce((a, b) => a + b, 0) / values.length;
    case "Minimum":
      return sorted[0];
    case "Maximum":
      return sorted.at(-1);
    case "SampleCount":
      return values.length;
  }
  const p = /^p(\d+(?:\.\d+)?)$/.exec(stat);
  if (p) {
    // nearest-rank percentile
    const rank = Math.max(1, Math.ceil((Number(p[1]) / 100) * sorted.length));
    return sorted[rank - 1];
  }
  throw new Error(`the fake does not compute stat ${stat}`);
}

/** Evaluate `+ - * /`, parentheses, numbers and ids over per-timestamp maps. */
function evaluate(expression: string, series: Map<string, Map<number, number>>): Map<number, number> {
  const tokens = expression.match(/[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[-+*/()]/g) ?? [];
  let i = 0;
  type V = Map<number, number> | number;
  const combine = (a: V, b: V, op: string): V => {
    const f = (x: number, y: number) => (op === "+" ? x + y : op === "-" ? x - y : op === "*" ? x * y : x / y);
    if (typeof a === "number" && typeof b === "number") return f(a, b);
    const out = new Map<number, number>();
    const times = typeof a === "number" ? [...(b as Map<number, number>).keys()] : [...a.keys()];
    for (const t of times) {
      const x = typeof a === "number" ? a : a.get(t);
      const y = typeof b === "number" ? b : b.get(t);
      if (x !== undefined && y !== undefined) out.set(t, f(x, y));
    }
    return out;
  };
  const primary = (): V => {
    const t = tokens[i++];
    if (t === "(") {
      const v = sum();
      i++; // ")"
      return v;
    }
    if (t === "-") return combine(0, primary(), "-");
    if (t !== undefined && /^\d/.test(t)) return Number(t);
    const s = series.get(t ?? "");
    if (s === undefined) throw new Error(`unknown id ${t}`);
    return s;
  };
  const product = (): V => {
    let v = primary();
    while (tokens[i] === "*" || tokens[i] === "/") {
      const op = tokens[i++]!;
      v = combine(v, primary(), op);
    }
    return v;
  };
  const sum = (): V => {
    let v = product();
    while (tokens[i] === "+" || tokens[i] === "-") {
      const op = tokens[i++]!;
      v = combine(v, product(), op);
    }
    return v;
  };
  const result = sum();
  if (typeof result === "number") return new Map();
  return result;
}

/** A running CloudWatch fake. */
export interface CloudWatchFake {
  /** `http://127.0.0.1:PORT` for the provider's `endpoint` */
  endpoint: string;
  /** every call received, in order */
  calls: RecordedCall[];
  /** GetMetricData calls only */
  readonly getMetricDataCalls: RecordedCall[];
  /** add raw samples (value at time, ms since epoch) to a metric */
  put(metric: MetricId, samples: { at: number; value: number }[]): void;
  /** drop every sample */
  clear(): void;
  /** answer queries of this metric name with this per-query StatusCode and no datapoints */
  failMetric(metricName: string, status: "InternalError" | "Forbidden"): void;
  /** whole-call behaviour for the next calls */
  behaviour: CallBehaviour;
  /** most datapoints per page (default: unlimited) */
  pageSize: number;
  /** `Retry-After` header sent with the `throttle` behaviour (none when undefined) */
  throttleRetryAfter: string | undefined;
  /** requests the `hang` behaviour left unanswered, and whether the client has closed the connection since */
  readonly hung: { closed: boolean }[];
  /** answer every page with a NextToken, forever (pagination that never ends) */
  endlessPages: boolean;
  close(): Promise<void>;
}

/** Start a CloudWatch fake on 127.0.0.1 (random port). */
export async function startCloudWatchFake(): Promise<CloudWatchFake> {
  const samples = new Map<string, { at: number; value: number }[]>();
  const failing = new Map<string, "InternalError" | "Forbidden">();
  const calls: RecordedCall[] = [];
  const pages = new Map<string, { results: any[]; offset: number }>();
  let nextTokenId = 0;

  const fake: CloudWatchFake = {
    endpoint: "",
    calls,
    get getMetricDataCalls() {
      return calls.filter((c) => c.target.endsWith(".GetMetricData") && c.body.NextToken === undefined);
    },
    put(metric, points) {
      const key = metricKey(metric);
      samples.set(key, [...(samples.get(key) ?? []), ...points]);
    },
    clear() {
      samples.clear();
      failing.clear();
    },
    failMetric(metricName, status) {
      failing.set(metricName, status);
    },
    behaviour: "normal",
    pageSize: Number.POSITIVE_INFINITY,
    throttleRetryAfter: undefined,
    hung: [],
    endlessPages: false,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };

  const reply = (res: ServerResponse, status: number, body: unknown, queryError?: string) => {
    res.writeHead(status, {
      "content-type": "application/x-amz-json-1.0",
      "x-amzn-requestid": `req-${calls.length}`,
      ...(queryError !== undefined ? { "x-amzn-query-error": queryError } : {}),
    });
    res.end(JSON.stringify(body));
  };
  const error = (res: ServerResponse, status: number, code: string, message: string) =>
    reply(res, status, { __type: `com.amazonaws.cloudwatch#${code}`, message }, `${code};Sender`);

  const getMetricData = (body: any, res: ServerResponse) => {
    if (fake.endlessPages) return reply(res, 200, { MetricDataResults: [], Messages: [], NextToken: `endless-${calls.length}` });
    if (typeof body.NextToken === "string") {
      const page = pages.get(body.NextToken);
      if (page === undefined) return error(res, 400, "InvalidNextToken", "The service couldn't process the NextToken");
      pages.delete(body.NextToken);
      return sendPage(page.results, page.offset, res);
    }
    const queries: any[] = body.MetricDataQueries ?? [];
    if (queries.length === 0 || queries.length > 500) {
      return error(res, 400, "ValidationError", `MetricDataQueries must hold 1 to 500 queries, got ${queries.length}`);
    }
    const ids = new Set<string>();
    for (const q of queries) {
      if (typeof q.Id !== "string" || !/^[a-z][a-zA-Z0-9_]*$/.test(q.Id)) return error(res, 400, "ValidationError", `Invalid Id ${q.Id}`);
      if (ids.has(q.Id)) return error(res, 400, "ValidationError", `Duplicate Id ${q.Id}`);
      ids.add(q.Id);
      if ((q.MetricStat === undefined) === (q.Expression === undefined)) {
        return error(res, 400, "ValidationError", `Query ${q.Id} must have exactly one of MetricStat and Expression`);
      }
    }
    const start = Number(body.StartTime) * 1000;
    const end = Number(body.EndTime) * 1000;
    if (!(start < end)) return error(res, 400, "ValidationError", "The parameter StartTime must be less than the parameter EndTime.");
    const computed = new Map<string, Map<number, number>>();
    const results: any[] = [];
    for (const q of queries.filter((q) => q.MetricStat !== undefined)) {
      const ms = q.MetricStat;
      const metric: MetricId = {
        namespace: ms.Metric.Namespace,
        metricName: ms.Metric.MetricName,
        dimensions: Object.fromEntries((ms.Metric.Dimensions ?? []).map((d: any) => [d.Name, d.Value])),
      };
      const status = failing.get(metric.metricName);
      if (status !== undefined) {
        computed.set(q.Id, new Map());
        if (q.ReturnData !== false) results.push({ Id: q.Id, Label: metric.metricName, StatusCode: status, Timestamps: [], Values: [], Messages: [{ Code: status, Value: `fake ${status}` }] });
        continue;
      }
      const period = Number(ms.Period) * 1000;
      const buckets = new Map<number, number[]>();
      for (const s of samples.get(metricKey(metric)) ?? []) {
        const bucket = Math.floor(s.at / period) * period;
        if (bucket < start || bucket >= end) continue;
        buckets.set(bucket, [...(buckets.get(bucket) ?? []), s.value]);
      }
      const points = new Map<number, number>();
      for (const [t, vs] of buckets) points.set(t, statistic(ms.Stat, vs)!);
      computed.set(q.Id, points);
      if (q.ReturnData !== false) results.push(resultOf(q.Id, metric.metricName, points, body.ScanBy));
    }
    for (const q of queries.filter((q) => q.Expression !== undefined)) {
      const expression: string = q.Expression;
      for (const m of expression.matchAll(/([A-Z][A-Z_]*)\s*\(/g)) {
        if (!KNOWN_FUNCTIONS.has(m[1]!)) return error(res, 400, "ValidationError", `Error in expression '${q.Id}': Unrecognized function ${m[1]}`);
      }
      for (const m of expression.matchAll(/\b[a-z][a-zA-Z0-9_]*\b/g)) {
        if (!ids.has(m[0])) return error(res, 400, "ValidationError", `Error in expression '${q.Id}': Unknown id ${m[0]}`);
      }
      let points: Map<number, number>;
      try {
        points = evaluate(expression, computed);
      } catch (err) {
        return error(res, 400, "ValidationError", `Error in expression '${q.Id}': ${(err as Error).message}`);
      }
      computed.set(q.Id, points);
      if (q.ReturnData !== false) results.push(resultOf(q.Id, q.Label ?? q.Id, points, body.ScanBy));
    }
    sendPage(results, 0, res);
  };

  const resultOf = (id: string, label: string, points: Map<number, number>, scanBy: string | undefined) => {
    const sorted = [...points].sort(([a], [b]) => (scanBy === "TimestampAscending" ? a - b : b - a));
    return { Id: id, Label: label, StatusCode: "Complete", Timestamps: sorted.map(([t]) => t / 1000), Values: sorted.map(([, v]) => v) };
  };

  /** Send datapoints from `offset` (counted over all results) up to `pageSize`, with a NextToken for the rest. */
  const sendPage = (results: any[], offset: number, res: ServerResponse) => {
    const out: any[] = [];
    let skipped = 0;
    let sent = 0;
    let more = false;
    for (const r of results) {
      const n = r.Timestamps.length;
      if (n === 0) {
        if (offset === 0) out.push(r); // results without datapoints travel on the first page
        continue;
      }
      const from = Math.max(0, offset - skipped);
      skipped += n;
      if (from >= n) continue;
      const room = fake.pageSize - sent;
      if (room <= 0) {
        more = true;
        break;
      }
      const take = Math.min(room, n - from);
      sent += take;
      const partial = from + take < n;
      if (partial) more = true;
      out.push({ ...r, Timestamps: r.Timestamps.slice(from, from + take), Values: r.Values.slice(from, from + take), StatusCode: partial ? "PartialData" : r.StatusCode });
      if (partial) break;
    }
    const body: any = { MetricDataResults: out, Messages: [] };
    if (more) {
      const token = `page-${++nextTokenId}`;
      pages.set(token, { results, offset: offset + sent });
      body.NextToken = token;
    }
    reply(res, 200, body);
  };

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const target = String(req.headers["x-amz-target"] ?? "");
      const auth = String(req.headers["authorization"] ?? "");
      const accessKeyId = /Credential=([^/]+)\//.exec(auth)?.[1];
      let body: any;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      } catch {
        return error(res, 400, "SerializationException", "body is not JSON");
      }
      calls.push({ target, body, accessKeyId });
      if (req.method !== "POST" || req.headers["content-type"] !== "application/x-amz-json-1.0") {
        return error(res, 400, "UnknownOperationException", "expected POST with application/x-amz-json-1.0");
      }
      if (accessKeyId === undefined) return error(res, 400, "MissingAuthenticationToken", "Request is missing Authentication Token");
      switch (fake.behaviour) {
        case "hang": {
          const hung = { closed: false };
          fake.hung.push(hung);
          res.on("close", () => (hung.closed = true)); // the client gave up: the connection closed
          return; // never answers
        }
        case "throttle":
          if (fake.throttleRetryAfter !== undefined) res.setHeader("retry-after", fake.throttleRetryAfter);
          return error(res, 400, "Throttling", "Rate exceeded");
        case "denied":
          return reply(res, 403, { __type: "com.amazonaws.cloudwatch#AccessDeniedException", message: "User is not authorized to perform: cloudwatch:GetMetricData" }, "AccessDenied;Sender");
        case "internal":
          return reply(res, 500, { __type: "com.amazonaws.cloudwatch#InternalServiceFault", message: "Internal failure" }, "InternalServiceError;Receiver");
        case "garbage":
          res.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
          return res.end("<html>not json</html>");
      }
      if (target !== "GraniteServiceVersion20100801.GetMetricData") {
        return error(res, 400, "UnknownOperationException", `unknown target ${target}`);
      }
      getMetricData(body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
