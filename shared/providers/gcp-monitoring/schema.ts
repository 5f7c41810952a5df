/**
 * Config schemas of the `gcp-monitoring` provider: the provider instance
 * and a rule's `query:` section, checked as the Cloud Monitoring API checks
 * `projects.timeSeries.list` (API reference, `Aggregation`, `Aligner`,
 * `Reducer`; "Monitoring filters").
 */
import * as z from "../../config/zod.ts";
import { MAX_BACKEND_TIMEOUT_SECONDS } from "../aws/common.ts";
import { gcpCredentialsSchema, projectIdSchema as projectId } from "../gcp/credentials.ts";
import { FILTER_FIELD, filterValueProblem } from "../gcp/filter.ts";
import { labelKeySchema, labelValueSchema, onEmptySchema } from "../label-mapping.ts";

/** `Aggregation.perSeriesAligner` values (`google/monitoring/v3/common.proto`). */
export const ALIGNERS = [
  "ALIGN_NONE", "ALIGN_DELTA", "ALIGN_RATE", "ALIGN_INTERPOLATE", "ALIGN_NEXT_OLDER", "ALIGN_MIN", "ALIGN_MAX",
  "ALIGN_MEAN", "ALIGN_COUNT", "ALIGN_SUM", "ALIGN_STDDEV", "ALIGN_COUNT_TRUE", "ALIGN_COUNT_FALSE",
  "ALIGN_FRACTION_TRUE", "ALIGN_PERCENTILE_99", "ALIGN_PERCENTILE_95", "ALIGN_PERCENTILE_50",
  "ALIGN_PERCENTILE_05", "ALIGN_PERCENT_CHANGE",
] as const;

/** `Aggregation.crossSeriesReducer` values (`google/monitoring/v3/common.proto`). */
export const REDUCERS = [
  "REDUCE_NONE", "REDUCE_MEAN", "REDUCE_MIN", "REDUCE_MAX", "REDUCE_SUM", "REDUCE_STDDEV", "REDUCE_COUNT",
  "REDUCE_COUNT_TRUE", "REDUCE_COUNT_FALSE", "REDUCE_FRACTION_TRUE", "REDUCE_PERCENTILE_99",
  "REDUCE_PERCENTILE_95", "REDUCE_PERCENTILE_50", "REDUCE_PERCENTILE_05",
] as const;

/** Longest look-back window, seconds (one day). */
export const MAX_LOOKBACK_SECONDS = 86_400;

/** Most series one ListTimeSeries call may select (keeps the filter a few KiB). */
export const MAX_SERIES_PER_CALL = 100;

/** Any string a filter can quote. */
const filterValue = z.string().check(
  z.superRefine((value, ctx) => {
    const problem = filterValueProblem(value);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: `cannot be used in a filter: it ${problem}` });
  }),
);
/** A Cloud Monitoring label key (metric or resource label). */
const monitoringLabelKey = z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/, "must be a Cloud Monitoring label key (letters, digits, _)"));
/** `metric.labels.K` or `resource.labels.K`. */
const labelField = z.string().check(
  z.regex(FILTER_FIELD, "must be metric.labels.KEY or resource.labels.KEY"),
  z.refine((f) => f.includes(".labels."), "must be metric.labels.KEY or resource.labels.KEY"),
);

/**
 * How one selector label maps to a Cloud Monitoring label: the field
 * (`resource.labels.subscription_id`; the label value is the field value),
 * or `{field, values}` mapping each allowed label value to a field value.
 */
const selectorLabel = z.union([
  labelField,
  z.strictObject({ field: labelField, values: z.optional(z.record(labelValueSchema, filterValue)) }),
]);


/**
 * A rule's `query:` section for `gcp-monitoring`:
 * - `project`: the project whose time series are read (default: the provider's);
 * - `metricType`, e.g. `pubsub.googleapis.com/subscription/num_undelivered_messages`;
 * - `resourceType`, e.g. `pubsub_subscription`;
 * - `metricLabels` / `resourceLabels`: static label values every series has;
 * - `selectorLabels`: selector label → `metric.labels.K` / `resource.labels.K`;
 * - `aligner`, `alignmentPeriod` (seconds), `reducer`, `groupByFields`:
 *   `Aggregation`; with an aligner the reported `window` is the alignment period;
 * - `lookbackSeconds`: the interval searched for the newest point (default 300);
 * - `onEmpty`: `onEmptySchema` (`../label-mapping.ts`).
 */
export const monitoringQuerySchema = z
  .strictObject({
    project: z.optional(projectId),
    metricType: z
      .string()
      .check(z.regex(/^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,511}$/, "must be a metric type such as pubsub.googleapis.com/subscription/num_undelivered_messages")),
    resourceType: z.optional(z.string().check(z.regex(/^[a-z0-9_]{1,128}$/, "must be a monitored resource type such as pubsub_subscription"))),
    metricLabels: z._default(z.record(monitoringLabelKey, filterValue), {}),
    resourceLabels: z._default(z.record(monitoringLabelKey, filterValue), {}),
    selectorLabels: z._default(z.record(labelKeySchema, selectorLabel), {}),
    aligner: z.optional(z.enum(ALIGNERS)),
    alignmentPeriod: z.optional(z.number().check(z.int(), z.minimum(1), z.maximum(MAX_LOOKBACK_SECONDS))),
    reducer: z.optional(z.enum(REDUCERS)),
    groupByFields: z.optional(z.array(labelField)),
    lookbackSeconds: z._default(z.number().check(z.int(), z.positive(), z.maximum(MAX_LOOKBACK_SECONDS)), 300),
    onEmpty: onEmptySchema,
  })
  .check(z.superRefine((q, ctx) => {
    const fields = Object.values(q.selectorLabels).map((s) => (typeof s === "string" ? s : s.field));
    const seen = new Set<string>();
    for (const f of fields) {
      if (seen.has(f)) ctx.addIssue({ code: "custom", path: ["selectorLabels"], message: `${f} is mapped from two labels` });
      seen.add(f);
    }
    for (const k of Object.keys(q.metricLabels)) {
      if (seen.has(`metric.labels.${k}`)) ctx.addIssue({ code: "custom", path: ["metricLabels", k], message: `metric.labels.${k} is also mapped from a selector label` });
    }
    for (const k of Object.keys(q.resourceLabels)) {
      if (seen.has(`resource.labels.${k}`)) ctx.addIssue({ code: "custom", path: ["resourceLabels", k], message: `resource.labels.${k} is also mapped from a selector label` });
    }
    const aligned = q.aligner !== undefined && q.aligner !== "ALIGN_NONE";
    if (q.alignmentPeriod !== undefined && !aligned) {
      ctx.addIssue({ code: "custom", path: ["alignmentPeriod"], message: "needs an aligner other than ALIGN_NONE" });
    }
    if (q.reducer !== undefined && q.reducer !== "REDUCE_NONE" && !aligned) {
      ctx.addIssue({ code: "custom", path: ["reducer"], message: "a cross-series reducer needs an aligner other than ALIGN_NONE (Aggregation reference)" });
    }
    if (q.groupByFields !== undefined && (q.reducer === undefined || q.reducer === "REDUCE_NONE")) {
      ctx.addIssue({ code: "custom", path: ["groupByFields"], message: "only meaningful with a reducer" });
    }
    if (aligned && (q.alignmentPeriod ?? 60) > q.lookbackSeconds) {
      ctx.addIssue({ code: "custom", path: ["lookbackSeconds"], message: "must be at least the alignment period" });
    }
  }));

/** Validated `query:` section of a Cloud Monitoring rule. */
export type MonitoringQuery = z.infer<typeof monitoringQuerySchema>;

/** Config of one `gcp-monitoring` provider instance. */
export const monitoringProviderSchema = z.strictObject({
  /** default project of the rules */
  project: projectId,
  credentials: z._default(gcpCredentialsSchema, { source: "default" }),
  /** API endpoint override, e.g. `http://127.0.0.1:8085` (REST) or `https://127.0.0.1:8443` (gRPC) */
  endpoint: z.optional(z.url({ protocol: /^https?$/ })),
  /** per-call timeout, seconds (default 2, at most 4) */
  timeoutSeconds: z._default(z.number().check(z.positive(), z.maximum(MAX_BACKEND_TIMEOUT_SECONDS)), 2),
  /** how long a read waits for others to share its ListTimeSeries call, seconds (default 0.01) */
  batchWindowSeconds: z._default(z.number().check(z.minimum(0), z.maximum(1)), 0.01),
  /** most series one ListTimeSeries call selects (default 50, at most 100) */
  maxSeriesPerCall: z._default(z.number().check(z.int(), z.minimum(1), z.maximum(MAX_SERIES_PER_CALL)), 50),
  /** `pageSize` of ListTimeSeries (default: the API's) */
  pageSize: z.optional(z.number().check(z.int(), z.minimum(1), z.maximum(100_000))),
});

/** Validated `gcp-monitoring` provider instance config. */
export type MonitoringProviderConfig = z.infer<typeof monitoringProviderSchema>;

/** The alignment period of an aligned rule, seconds (default 60), or undefined when not aligned. */
export function alignmentPeriodOf(query: MonitoringQuery): number | undefined {
  return query.aligner !== undefined && query.aligner !== "ALIGN_NONE" ? (query.alignmentPeriod ?? 60) : undefined;
}

/** This provider's schemas under the names every provider folder's `schema.ts` exports them (the provider tables import them by these names: `../provider-list.ts`). */
export { monitoringProviderSchema as providerSchema, monitoringQuerySchema as querySchema };
