/**
 * Config schemas of the `aws-cloudwatch` provider: the provider instance
 * and a rule's `query:` section, with the validation CloudWatch itself
 * applies to `GetMetricData` inputs (Amazon CloudWatch API Reference,
 * `GetMetricData`, `MetricDataQuery`, `MetricStat`, `Dimension`;
 * "CloudWatch statistics definitions"; "Using metric math").
 */
import * as z from "../../config/zod.ts";
import { awsProviderSchema } from "../aws/common.ts";
import { labelKeySchema, labelValueSchema, onEmptySchema } from "../label-mapping.ts";

/** Most queries one `GetMetricData` call may carry (API reference: MetricDataQueries, max 500). */
export const MAX_QUERIES_PER_CALL = 500;

/** Most metrics a metric-math rule may declare. */
export const MAX_MATH_METRICS = 10;

/** Longest look-back window, seconds (one day). */
export const MAX_LOOKBACK_SECONDS = 86_400;

/**
 * Statistics `MetricStat.Stat` accepts ("CloudWatch statistics
 * definitions"): the five standard ones, `IQM`, percentiles `p0`–`p100`
 * (`p99`, `p99.9`), trimmed/winsorized forms `tm`/`tc`/`ts`/`wm` with a
 * percentage, and the range forms `PR(a:b)`, `TM(a:b)`, `TC(a:b)`,
 * `TS(a:b)`, `WM(a:b)` with percentages or absolute bounds (either may be empty).
 */
export const STAT_PATTERN =
  /^(?:SampleCount|Average|Sum|Minimum|Maximum|IQM|(?:p|tm|tc|ts|wm)(?:100|\d{1,2}(?:\.\d{1,10})?)|(?:PR|TM|TC|TS|WM)\((?:\d+(?:\.\d+)?%?)?:(?:\d+(?:\.\d+)?%?)?\))$/;

/** `StandardUnit` values (CloudWatch API Reference, `MetricStat.Unit`). */
export const STANDARD_UNITS = [
  "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
  "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second",
  "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second",
  "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None",
] as const;

/** Metric-math ids: a lowercase letter, then letters, digits, `_` (MetricDataQuery.Id). */
const MATH_ID = /^[a-z][a-zA-Z0-9_]{0,200}$/;

/** Functions that read every query of the request; they cannot be batched with other rules' queries. */
const REQUEST_WIDE_FUNCTIONS = new Set(["METRICS", "SEARCH", "SELECT"]);


/** `Dimension.Name`: 1–255 characters. */
const dimensionName = z.string().check(z.minLength(1), z.maxLength(255));
/** `Dimension.Value`: 1–1024 characters. */
const dimensionValue = z.string().check(z.minLength(1), z.maxLength(1024));

/** `MetricStat.Period`: 1, 5, 10, 20, 30 (high resolution) or a multiple of 60 seconds. */
const period = z
  .number()
  .check(
    z.int(),
    z.positive(),
    z.maximum(MAX_LOOKBACK_SECONDS),
    z.refine((p) => [1, 5, 10, 20, 30].includes(p) || p % 60 === 0, "must be 1, 5, 10, 20, 30 or a multiple of 60 (seconds)"),
  );

const stat = z.string().check(z.regex(STAT_PATTERN, "must be a CloudWatch statistic: SampleCount, Average, Sum, Minimum, Maximum, IQM, pNN, tmNN, PR(a:b), …"));

/** One metric as `MetricStat` names it (namespace, name, statistic, unit, static dimensions). */
const metricSchema = z.strictObject({
  namespace: z.string().check(z.minLength(1), z.maxLength(255)),
  metricName: z.string().check(z.minLength(1), z.maxLength(255)),
  stat,
  unit: z.optional(z.enum(STANDARD_UNITS)),
  dimensions: z._default(z.record(dimensionName, dimensionValue), {}),
});

/** A metric read by a metric-math rule. */
export type CloudWatchMetric = z.infer<typeof metricSchema>;

/**
 * How one selector label becomes a dimension: the dimension name (the label
 * value is the dimension value), or `{dimension, values}` where `values`
 * maps each allowed label value to its dimension value — for dimension
 * values a label value cannot hold, e.g. an ALB's
 * `targetgroup/web/6d0ecf831eec9f09`.
 */
const dimensionLabel = z.union([
  dimensionName,
  z.strictObject({
    dimension: dimensionName,
    values: z.optional(z.record(labelValueSchema, dimensionValue)),
  }),
]);


/**
 * A rule's `query:` section for `aws-cloudwatch`. Either one metric
 * (`namespace`, `metricName`, `stat`, optional `unit`, `dimensions`) or a
 * metric-math `expression` over the `metrics` it declares (ids → metric).
 * - `dimensionLabels`: selector label → dimension, added to the metric (or
 *   to every metric of an expression);
 * - `period`: seconds, the datapoint granularity and the reported `window`;
 * - `lookbackSeconds`: how far back the newest datapoint is searched
 *   (default max(300, 5 × period));
 * - `accountId`: read another account's metric (cross-account observability);
 * - `onEmpty`: `onEmptySchema` (`../label-mapping.ts`).
 */
export const cloudWatchQuerySchema = z
  .strictObject({
    namespace: z.optional(z.string().check(z.minLength(1), z.maxLength(255))),
    metricName: z.optional(z.string().check(z.minLength(1), z.maxLength(255))),
    stat: z.optional(stat),
    unit: z.optional(z.enum(STANDARD_UNITS)),
    dimensions: z.optional(z.record(dimensionName, dimensionValue)),
    expression: z.optional(z.string().check(z.minLength(1), z.maxLength(2048))),
    metrics: z.optional(
      z.record(z.string().check(z.regex(MATH_ID, "metric ids start with a lowercase letter, then letters, digits or _")), metricSchema),
    ),
    dimensionLabels: z._default(z.record(labelKeySchema, dimensionLabel), {}),
    period,
    lookbackSeconds: z.optional(z.number().check(z.int(), z.positive(), z.maximum(MAX_LOOKBACK_SECONDS))),
    accountId: z.optional(z.string().check(z.regex(/^\d{12}$/, "must be a 12-digit AWS account id"))),
    onEmpty: onEmptySchema,
  })
  .check(z.superRefine((q, ctx) => {
    const single = q.namespace !== undefined || q.metricName !== undefined || q.stat !== undefined;
    const math = q.expression !== undefined || q.metrics !== undefined;
    if (single === math) {
      ctx.addIssue({
        code: "custom",
        message: "give either one metric (namespace, metricName, stat) or a metric-math expression with its metrics, not both",
      });
      return;
    }
    const mappedDimensions = Object.values(q.dimensionLabels).map((d) => (typeof d === "string" ? d : d.dimension));
    const seen = new Set<string>();
    for (const d of mappedDimensions) {
      if (seen.has(d)) ctx.addIssue({ code: "custom", path: ["dimensionLabels"], message: `dimension "${d}" is mapped from two labels` });
      seen.add(d);
    }
    const checkStatic = (dims: Record<string, string> | undefined, path: (string | number)[]) => {
      const names = Object.keys(dims ?? {});
      for (const d of names) {
        if (seen.has(d)) ctx.addIssue({ code: "custom", path, message: `dimension "${d}" is both static and mapped from a selector label` });
      }
      if (names.length + seen.size > 30) ctx.addIssue({ code: "custom", path, message: "a metric has at most 30 dimensions" });
    };
    if (single) {
      for (const field of ["namespace", "metricName", "stat"] as const) {
        if (q[field] === undefined) ctx.addIssue({ code: "custom", path: [field], message: `required for a single-metric rule` });
      }
      checkStatic(q.dimensions, ["dimensions"]);
      return;
    }
    if (q.expression === undefined) ctx.addIssue({ code: "custom", path: ["expression"], message: "required with metrics" });
    if (q.unit !== undefined || q.dimensions !== undefined) {
      ctx.addIssue({ code: "custom", path: ["dimensions"], message: "with an expression, put unit and dimensions on each of its metrics" });
    }
    const metrics = q.metrics ?? {};
    const ids = Object.keys(metrics);
    if (ids.length === 0) ctx.addIssue({ code: "custom", path: ["metrics"], message: "declare the metrics the expression reads" });
    if (ids.length > MAX_MATH_METRICS) ctx.addIssue({ code: "custom", path: ["metrics"], message: `at most ${MAX_MATH_METRICS} metrics` });
    for (const id of ids) checkStatic(metrics[id]!.dimensions, ["metrics", id, "dimensions"]);
    if (q.expression !== undefined) {
      const problem = checkExpression(q.expression, new Set(ids));
      if (problem !== undefined) ctx.addIssue({ code: "custom", path: ["expression"], message: problem });
    }
  }));

/** Validated `query:` section of a CloudWatch rule. */
export type CloudWatchQuery = z.infer<typeof cloudWatchQuerySchema>;

/** Config of one `aws-cloudwatch` provider instance: the AWS fields plus batching. */
export const cloudWatchProviderSchema = z.extend(awsProviderSchema, {
  /** how long a read waits for others to share its GetMetricData call, seconds (default 0.01) */
  batchWindowSeconds: z._default(z.number().check(z.minimum(0), z.maximum(1)), 0.01),
  /** most queries per GetMetricData call (default and maximum 500) */
  maxQueriesPerCall: z._default(z.number().check(z.int(), z.minimum(1), z.maximum(MAX_QUERIES_PER_CALL)), MAX_QUERIES_PER_CALL),
  /**
   * Refresh-ahead (`../refresh-ahead.ts`): reload every series read since its last
   * load shortly before its cached value expires, in ⌈series/500⌉ calls per
   * TTL, so the HPA controller's blocking reads hit the cache. Absent: on in
   * a long-lived process (the Node server), off on Cloudflare Workers and
   * AWS Lambda, which cancel or freeze work between requests.
   */
  refreshAhead: z.optional(z.boolean()),
});

/** Validated `aws-cloudwatch` provider instance config. */
export type CloudWatchProviderConfig = z.infer<typeof cloudWatchProviderSchema>;

/** The look-back window of a rule, seconds: as configured, else max(300, 5 × period). */
export function lookbackOf(query: CloudWatchQuery): number {
  return query.lookbackSeconds ?? Math.max(300, 5 * query.period);
}

// ---------------------------------------------------------------------------
// Metric-math expressions
// ---------------------------------------------------------------------------

/** A lexical piece of a metric-math expression. */
interface ExpressionToken {
  kind: "identifier" | "string" | "other";
  text: string;
}

/**
 * Split a metric-math expression into identifiers, quoted strings (`'…'` or
 * `"…"`, backslash escapes kept verbatim) and everything else, so that ids
 * can be renamed without touching function names, keywords or strings.
 *
 * @throws Error on an unterminated string
 */
export function tokenizeExpression(expression: string): ExpressionToken[] {
  const tokens: ExpressionToken[] = [];
  let i = 0;
  while (i < expression.length) {
    const ch = expression[i]!;
    if (ch === "'" || ch === '"') {
      let j = i + 1;
      while (j < expression.length && expression[j] !== ch) j += expression[j] === "\\" ? 2 : 1;
      if (j >= expression.length) throw new Error("unterminated string in expression");
      tokens.push({ kind: "string", text: expression.slice(i, j + 1) });
      i = j + 1;
    } else if (/[A-Za-z_]/.test(ch)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(expression.slice(i))!;
      tokens.push({ kind: "identifier", text: m[0] });
      i += m[0].length;
    } else {
      const m = /^[^A-Za-z_'"]+/.exec(expression.slice(i))!;
      tokens.push({ kind: "other", text: m[0] });
      i += m[0].length;
    }
  }
  return tokens;
}

/**
 * Why an expression cannot be used, or `undefined`. Identifiers starting with
 * a lowercase letter are metric ids and must be declared; functions and
 * keywords are uppercase ("Metric math syntax and functions"). `METRICS()`,
 * `SEARCH()` and Metrics Insights `SELECT` read other queries of the request,
 * so they cannot share a batched call and are refused.
 */
export function checkExpression(expression: string, ids: ReadonlySet<string>): string | undefined {
  let tokens: ExpressionToken[];
  try {
    tokens = tokenizeExpression(expression);
  } catch (err) {
    return (err as Error).message;
  }
  for (const t of tokens) {
    if (t.kind !== "identifier") continue;
    if (REQUEST_WIDE_FUNCTIONS.has(t.text.toUpperCase())) {
      return `${t.text.toUpperCase()} reads every query of the request and cannot be batched; reference declared metrics instead`;
    }
    if (/^[a-z]/.test(t.text) && !ids.has(t.text)) return `"${t.text}" is not one of the declared metrics (${[...ids].join(", ")})`;
  }
  if (!tokens.some((t) => t.kind === "identifier" && ids.has(t.text))) return "the expression reads none of the declared metrics";
  return undefined;
}

/** The expression with each declared id renamed by `rename` (strings, functions and keywords untouched). */
export function renameExpressionIds(expression: string, rename: (id: string) => string, ids: ReadonlySet<string>): string {
  return tokenizeExpression(expression)
    .map((t) => (t.kind === "identifier" && ids.has(t.text) ? rename(t.text) : t.text))
    .join("");
}

/** This provider's schemas under the names every provider folder's `schema.ts` exports them (the provider tables import them by these names: `../provider-list.ts`). */
export { cloudWatchProviderSchema as providerSchema, cloudWatchQuerySchema as querySchema };
