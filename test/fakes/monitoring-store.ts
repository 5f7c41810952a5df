/**
 * The data and `ListTimeSeries` semantics shared by the Cloud Monitoring
 * fakes (gRPC and REST), so both answer the same fixtures identically:
 * filter evaluation (`monitoring-filter.ts`; exactly one metric type; an
 * unknown metric type is NOT_FOUND), the interval `(startTime, endTime]`,
 * per-series alignment (`ALIGN_NONE`, `MEAN`, `MAX`, `MIN`, `SUM`, `COUNT`,
 * `NEXT_OLDER`, `DELTA`, `RATE`, `PERCENTILE_*`; output points at
 * `endTime − k·period`), cross-series reduction (`SUM`, `MEAN`, `MAX`, `MIN`,
 * `COUNT`) over `groupByFields`, points newest first, series without points
 * omitted, pagination by `pageSize` time series with `nextPageToken`, and
 * injectable whole-call failures.
 */
import { FilterSyntaxError, matchesFilter, parseFilter, pinnedMetricTypes } from "./monitoring-filter.ts";

/** A `TypedValue` in its proto3 JSON form. */
export type TypedValueJson = { int64Value: string } | { doubleValue: number } | { boolValue: boolean } | { distributionValue: { count: string; mean: number } };

/** One stored point, times in ms since epoch. */
export interface StoredPoint {
  start?: number;
  end: number;
  /** `interval.endTime` as the REST fake sends it instead of `end` (a malformed or impossible time); the store still files the point at `end` */
  endText?: string;
  value: TypedValueJson;
}

/** One stored time series. */
export interface StoredSeries {
  project?: string;
  metricType: string;
  metricLabels?: Record<string, string>;
  resourceType: string;
  resourceLabels?: Record<string, string>;
  metricKind?: "GAUGE" | "DELTA" | "CUMULATIVE";
  valueType?: "INT64" | "DOUBLE" | "BOOL" | "DISTRIBUTION";
  points: StoredPoint[];
}

/** A request as both fakes decode it. */
export interface FakeListRequest {
  name: string;
  filter: string;
  startMs: number;
  endMs: number;
  aggregation?: { alignmentPeriodSeconds: number; perSeriesAligner: string; crossSeriesReducer?: string; groupByFields?: string[] };
  pageSize?: number;
  pageToken?: string;
  view: string;
}

/** A request as recorded, with the transport it came over and the caller the fake authenticated. */
export interface RecordedListRequest extends FakeListRequest {
  transport: "grpc" | "rest";
  caller: string;
}

/**
 * A canonical error (google.rpc.Code name and HTTP status), with the
 * `google.rpc.RetryInfo.retry_delay` Google attaches to quota errors when
 * `retryDelaySeconds` is set (REST: `error.details[]`; gRPC:
 * `grpc-status-details-bin`).
 */
export class FakeApiError extends Error {
  readonly code: string;
  readonly httpStatus: number;
  readonly grpcCode: number;
  retryDelaySeconds: number | undefined;
  constructor(code: string, httpStatus: number, grpcCode: number, message: string) {
    super(message);
    this.code = code;
    this.httpStatus = httpStatus;
    this.grpcCode = grpcCode;
  }
}

const ERRORS = {
  INVALID_ARGUMENT: [400, 3],
  NOT_FOUND: [404, 5],
  PERMISSION_DENIED: [403, 7],
  RESOURCE_EXHAUSTED: [429, 8],
  UNAVAILABLE: [503, 14],
  UNAUTHENTICATED: [401, 16],
} as const;

/** Build a canonical error. */
export function apiError(code: keyof typeof ERRORS, message: string): FakeApiError {
  const [http, grpc] = ERRORS[code];
  return new FakeApiError(code, http, grpc, message);
}

/** Whole-call behaviours for failure tests. */
export type MonitoringBehaviour = "normal" | "hang" | "quota" | "denied" | "unavailable" | "invalid";

function numeric(v: TypedValueJson): number | undefined {
  if ("int64Value" in v) return Number(v.int64Value);
  if ("doubleValue" in v) return v.doubleValue;
  if ("boolValue" in v) return v.boolValue ? 1 : 0;
  return undefined;
}

function typed(n: number, asInt: boolean): TypedValueJson {
  return asInt ? { int64Value: String(Math.round(n)) } : { doubleValue: n };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** The shared store behind both fakes. */
export class MonitoringStore {
  series: StoredSeries[] = [];
  readonly requests: RecordedListRequest[] = [];
  behaviour: MonitoringBehaviour = "normal";
  /** calls the `hang` behaviour left unanswered, and whether the client cancelled or closed them since */
  readonly hung: { transport: "grpc" | "rest"; closed: boolean }[] = [];
  /** answer every page empty with a nextPageToken, forever (pagination that never ends) */
  endlessPages = false;
  /** RetryInfo delay, seconds, sent with the `quota` behaviour's RESOURCE_EXHAUSTED (none when undefined) */
  quotaRetryDelaySeconds: number | undefined = undefined;

  /** ListTimeSeries. @throws FakeApiError */
  list(request: FakeListRequest): { timeSeries: StoredSeries[]; nextPageToken: string } {
    switch (this.behaviour) {
      case "quota": {
        const error = apiError("RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Time series queries' and limit 'per minute'");
        error.retryDelaySeconds = this.quotaRetryDelaySeconds;
        throw error;
      }
      case "denied":
        throw apiError("PERMISSION_DENIED", "Permission monitoring.timeSeries.list denied (or the resource may not exist).");
      case "unavailable":
        throw apiError("UNAVAILABLE", "The service is currently unavailable.");
      case "invalid":
        throw apiError("INVALID_ARGUMENT", "Field aggregation.alignmentPeriod had an invalid value");
    }
    const project = /^projects\/([^/]+)$/.exec(request.name)?.[1];
    if (project === undefined) throw apiError("INVALID_ARGUMENT", `Invalid resource name ${request.name}`);
    if (request.view !== "FULL") throw apiError("INVALID_ARGUMENT", "only view FULL is faked");
    let filter;
    try {
      filter = parseFilter(request.filter);
    } catch (err) {
      if (err instanceof FilterSyntaxError) throw apiError("INVALID_ARGUMENT", `Invalid filter: ${err.message}`);
      throw err;
    }
    const types = pinnedMetricTypes(filter);
    if (types.length !== 1) throw apiError("INVALID_ARGUMENT", "A filter must specify exactly one metric type");
    const inProject = this.series.filter((s) => (s.project ?? "test-project") === project);
    if (!inProject.some((s) => s.metricType === types[0])) {
      throw apiError("NOT_FOUND", `Cannot find metric(s) that match type = "${types[0]}".`);
    }
    if (!(request.startMs <= request.endMs)) throw apiError("INVALID_ARGUMENT", "The start time must be before the end time");
    let out: StoredSeries[] = inProject
      .filter((s) =>
        matchesFilter(filter, {
          metricType: s.metricType,
          resourceType: s.resourceType,
          metricLabels: s.metricLabels ?? {},
          resourceLabels: s.resourceLabels ?? {},
          project,
        }),
      )
      .map((s) => ({ ...s, points: s.points.filter((p) => p.end > request.startMs && p.end <= request.endMs) }));
    const a = request.aggregation;
    if (a !== undefined && a.perSeriesAligner !== "ALIGN_NONE") out = out.map((s) => this.align(s, a, request));
    if (a?.crossSeriesReducer !== undefined && a.crossSeriesReducer !== "REDUCE_NONE") out = this.reduce(out, a.crossSeriesReducer, a.groupByFields ?? []);
    out = out
      .filter((s) => s.points.length > 0)
      .map((s) => ({ ...s, points: [...s.points].sort((x, y) => y.end - x.end) }))
      .sort((x, y) => (JSON.stringify([x.metricLabels, x.resourceLabels]) < JSON.stringify([y.metricLabels, y.resourceLabels]) ? -1 : 1));
    if (this.endlessPages) return { timeSeries: [], nextPageToken: `offset-${out.length}` };
    const offset = request.pageToken ? Number(/^offset-(\d+)$/.exec(request.pageToken)?.[1] ?? Number.NaN) : 0;
    if (Number.isNaN(offset)) throw apiError("INVALID_ARGUMENT", "Invalid page token");
    const size = request.pageSize ?? 100_000;
    const page = out.slice(offset, offset + size);
    return { timeSeries: page, nextPageToken: offset + size < out.length ? `offset-${offset + size}` : "" };
  }

  private align(s: StoredSeries, a: NonNullable<FakeListRequest["aggregation"]>, request: FakeListRequest): StoredSeries {
    const period = a.alignmentPeriodSeconds * 1000;
    const asInt = s.valueType !== "DOUBLE";
    const points: StoredPoint[] = [];
    for (let t = request.endMs; t > request.startMs; t -= period) {
      const bucket = s.points.filter((p) => p.end > t - period && p.end <= t);
      const values = bucket.map((p) => numeric(p.value)).filter((v): v is number => v !== undefined);
      if (values.length === 0) continue;
      let value: TypedValueJson;
      switch (a.perSeriesAligner) {
        case "ALIGN_MEAN":
          value = typed(values.reduce((x, y) => x + y, 0) / values.length, false);
          break;
        case "ALIGN_MAX":
          value = typed(Math.max(...values), asInt);
          break;
        case "ALIGN_MIN":
          value = typed(Math.min(...values), asInt);
          break;
        case "ALIGN_SUM":
        case "ALIGN_DELTA":
          value = typed(values.reduce((x, y) => x + y, 0), asInt);
          break;
        case "ALIGN_COUNT":
          value = typed(values.length, true);
          break;
        case "ALIGN_RATE":
          value = typed(values.reduce((x, y) => x + y, 0) / a.alignmentPeriodSeconds, false);
          break;
        case "ALIGN_NEXT_OLDER": {
          const newest = [...bucket].sort((x, y) => y.end - x.end)[0]!;
          value = newest.value;
          break;
        }
        default: {
          const p = /^ALIGN_PERCENTILE_(\d\d)$/.exec(a.perSeriesAligner);
          if (!p) throw apiError("INVALID_ARGUMENT", `the fake does not align with ${a.perSeriesAligner}`);
          value = typed(percentile(values, Number(p[1])), false);
        }
      }
      points.push({ start: s.metricKind === "GAUGE" || s.metricKind === undefined ? t : t - period, end: t, value });
    }
    const mean = ["ALIGN_MEAN", "ALIGN_RATE"].includes(a.perSeriesAligner) || a.perSeriesAligner.startsWith("ALIGN_PERCENTILE");
    return { ...s, points, valueType: mean ? "DOUBLE" : a.perSeriesAligner === "ALIGN_COUNT" ? "INT64" : s.valueType };
  }

  private reduce(series: StoredSeries[], reducer: string, groupBy: string[]): StoredSeries[] {
    const groups = new Map<string, StoredSeries[]>();
    const pick = (s: StoredSeries, field: string) => {
      const [scope, , key] = field.split(".", 3) as [string, string, string];
      return scope === "metric" ? s.metricLabels?.[key] : s.resourceLabels?.[key];
    };
    for (const s of series) {
      const key = JSON.stringify(groupBy.map((f) => pick(s, f) ?? null));
      groups.set(key, [...(groups.get(key) ?? []), s]);
    }
    return [...groups.values()].map((members) => {
      const first = members[0]!;
      const metricLabels: Record<string, string> = {};
      const resourceLabels: Record<string, string> = {};
      for (const f of groupBy) {
        const v = pick(first, f);
        if (v === undefined) continue;
        if (f.startsWith("metric.")) metricLabels[f.split(".")[2]!] = v;
        else resourceLabels[f.split(".")[2]!] = v;
      }
      const times = [...new Set(members.flatMap((m) => m.points.map((p) => p.end)))];
      const asInt = members.every((m) => m.valueType !== "DOUBLE") && reducer !== "REDUCE_MEAN";
      const points = times.map((t): StoredPoint => {
        const values = members.flatMap((m) => m.points.filter((p) => p.end === t).map((p) => numeric(p.value) ?? 0));
        const sum = values.reduce((x, y) => x + y, 0);
        const v =
          reducer === "REDUCE_SUM" ? sum : reducer === "REDUCE_MEAN" ? sum / values.length : reducer === "REDUCE_MAX" ? Math.max(...values) : reducer === "REDUCE_MIN" ? Math.min(...values) : values.length;
        if (!["REDUCE_SUM", "REDUCE_MEAN", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_COUNT"].includes(reducer)) {
          throw apiError("INVALID_ARGUMENT", `the fake does not reduce with ${reducer}`);
        }
        const sample = members.flatMap((m) => m.points.filter((p) => p.end === t))[0]!;
        return { start: sample.start ?? t, end: t, value: typed(v, asInt) };
      });
      return { ...first, metricLabels, resourceLabels, points, valueType: asInt ? "INT64" : "DOUBLE" };
    });
  }
}
