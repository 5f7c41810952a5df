/**
 * The `gcp-monitoring` provider: any Google Cloud Monitoring time series —
 * most often a Pub/Sub subscription's backlog — read with `ListTimeSeries`
 * (Cloud Monitoring API, `projects.timeSeries.list`,
 * https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list).
 *
 * A request's selector is mapped exactly onto label sets (one series per
 * set, `../label-mapping.ts`), each becoming `metric.labels.*` /
 * `resource.labels.*` comparisons in a filter whose values are always quoted
 * (`../gcp/filter.ts`). Reads of series that differ only in those values and
 * arrive together share one `ListTimeSeries` call (`shared/batch.ts`): the
 * filter ORs their comparisons and the answer is split back by label value.
 * Identical reads share one in-flight load and are re-used for the rule's
 * `cacheTTLSeconds` (`shared/cache/coalescing.ts`). Pages are followed
 * (`nextPageToken`).
 *
 * The newest point inside the look-back window is reported with its own
 * `interval.endTime`; `window` is the alignment period when the rule aligns,
 * else the point's own interval (DELTA metrics). No point is the rule's
 * `onEmpty`; several time series for one selector series is an error asking
 * for a reducer or more labels, never a guess.
 *
 * The transport is the entry point's choice (`transport.ts`): REST over fetch
 * by default, the official gRPC client where the entry point injects it.
 *
 * Deadlines and back-off: each page gets the batch's signal (aborted when
 * every read of the batch has gone: the request deadline, a client that
 * left) combined with `timeoutSeconds`, and the budget left in ms. A failed
 * read (503) is re-used for Google's own delay (`RetryInfo`, `Retry-After`;
 * `../backoff.ts`), so a series over quota is not asked again by every read.
 * An answer cut at {@link MAX_PAGES} pages is a 503 naming the limit for
 * every series of the call — never `onEmpty`, never a guess from part of
 * the answer.
 */
import { BACKEND_LOAD_TIMEOUT_MS, callSignal } from "../../deadline.ts";
import { badRequest, serviceUnavailable, type StatusError } from "../../k8s/status.ts";
import { GoogleApiError, googleErrorToStatus } from "../gcp/errors.ts";
import { FilterError, timeSeriesFilter } from "../gcp/filter.ts";
import { mappedLabels, mappedValue, onEmptyValueFindings } from "../label-mapping.ts";
import { emptyOutcome, SeriesProvider, type Outcome, type Reading, type SeriesBackend, type SeriesBatching, type SeriesItem } from "../series.ts";
import type { MetricRule, ProviderModule, RuntimeEnv } from "../types.ts";
import { restTransportFactory } from "./rest.ts";
import {
  alignmentPeriodOf,
  monitoringProviderSchema,
  monitoringQuerySchema,
  type MonitoringProviderConfig,
  type MonitoringQuery,
} from "./schema.ts";
import {
  TRANSPORT_KEY,
  type AggregationSpec,
  type MonitoringTransport,
  type MonitoringTransportFactory,
  type TimeSeriesData,
} from "./transport.ts";

/** Most `nextPageToken` pages followed for one call; an answer with more is refused (503), never read in part. */
export const MAX_PAGES = 20;

/**
 * One value read from Cloud Monitoring for one series: `timestamp` is the
 * point's `interval.endTime` (or the read time for an `onEmpty` value), ms
 * since epoch.
 */
export type { Reading } from "../series.ts";

/** What one ListTimeSeries call shares: everything but the selector-mapped label values. */
interface CallShape {
  project: string;
  metricType: string;
  resourceType?: string;
  fixed: [string, string][];
  /** the fields the selector maps, in rule order */
  fields: string[];
  aggregation?: AggregationSpec;
  lookbackSeconds: number;
}

/** One series to read: what the batcher collects. */
interface ReadItem extends SeriesItem {
  key: string;
  group: string;
  shape: CallShape;
  /** `[field, value]` of each mapped field for this series */
  alternative: [string, string][];
  what: string;
  alignmentPeriod: number | undefined;
  onEmpty: MonitoringQuery["onEmpty"];
}

function fieldOf(mapping: MonitoringQuery["selectorLabels"][string]): string {
  return typeof mapping === "string" ? mapping : mapping.field;
}

/** The value of `field` (`metric.labels.K` / `resource.labels.K`) in a returned series. */
function fieldValue(series: TimeSeriesData, field: string): string | undefined {
  const [scope, , key] = field.split(".", 3) as [string, string, string];
  return scope === "metric" ? series.metricLabels[key] : series.resourceLabels[key];
}

/**
 * Build the read of one series (one label set) of a rule.
 * @throws StatusError 400 when a value cannot be written into a filter
 */
function readItem(rule: MetricRule<MonitoringQuery>, labels: Readonly<Record<string, string>>, defaultProject: string): ReadItem {
  const q = rule.query;
  const fields = Object.values(q.selectorLabels).map(fieldOf);
  const alternative = Object.entries(q.selectorLabels).map(([label, m]): [string, string] => [fieldOf(m), mappedValue(m, labels[label]!)]);
  const fixed: [string, string][] = [
    ...Object.entries(q.metricLabels).map(([k, v]): [string, string] => [`metric.labels.${k}`, v]),
    ...Object.entries(q.resourceLabels).map(([k, v]): [string, string] => [`resource.labels.${k}`, v]),
  ];
  const alignmentPeriod = alignmentPeriodOf(q);
  let aggregation: AggregationSpec | undefined;
  if (alignmentPeriod !== undefined) {
    aggregation = { alignmentPeriodSeconds: alignmentPeriod, perSeriesAligner: q.aligner! };
    if (q.reducer !== undefined && q.reducer !== "REDUCE_NONE") {
      aggregation.crossSeriesReducer = q.reducer;
      // the mapped fields must survive the reduction so the answer can be split per series
      aggregation.groupByFields = [...new Set([...(q.groupByFields ?? []), ...fields])];
    }
  }
  const shape: CallShape = {
    project: q.project ?? defaultProject,
    metricType: q.metricType,
    ...(q.resourceType !== undefined ? { resourceType: q.resourceType } : {}),
    fixed,
    fields,
    ...(aggregation !== undefined ? { aggregation } : {}),
    lookbackSeconds: q.lookbackSeconds,
  };
  let filter: string;
  try {
    filter = timeSeriesFilter({ metricType: shape.metricType, resourceType: shape.resourceType, fixed, alternatives: [alternative] });
  } catch (err) {
    if (err instanceof FilterError) throw badRequest(`metric ${rule.name}: ${err.message}`);
    throw err;
  }
  const group = JSON.stringify(shape);
  return {
    key: JSON.stringify([group, alternative]),
    group,
    shape,
    alternative,
    what: `metric ${rule.name} (projects/${shape.project} ${filter})`,
    alignmentPeriod,
    onEmpty: q.onEmpty,
  };
}

/**
 * The Cloud Monitoring part of a `gcp-monitoring` provider (`../series.ts`
 * does label resolution, cache, coalescing and batching): reads of one call
 * shape are grouped and sent as one `ListTimeSeries` filter.
 */
class MonitoringBackend implements SeriesBackend<MonitoringQuery, ReadItem> {
  readonly transport: MonitoringTransport;
  readonly identity?: (namespace: string) => string;
  readonly batching: SeriesBatching;
  private readonly name: string;
  private readonly config: MonitoringProviderConfig;
  private readonly runtime: RuntimeEnv;

  constructor(name: string, config: MonitoringProviderConfig, runtime: RuntimeEnv, factory: MonitoringTransportFactory) {
    this.name = name;
    this.config = config;
    this.runtime = runtime;
    this.transport = factory({ providerName: name, config, runtime });
    if (this.transport.identity !== undefined) this.identity = this.transport.identity.bind(this.transport);
    this.batching = {
      maxBatchSize: config.maxSeriesPerCall,
      windowMs: config.batchWindowSeconds * 1000,
      splitOnError: (err) => err instanceof GoogleApiError && err.code === "INVALID_ARGUMENT",
    };
  }

  labels(rule: MetricRule<MonitoringQuery>) {
    return mappedLabels(rule.query.selectorLabels);
  }

  item(rule: MetricRule<MonitoringQuery>, labels: Readonly<Record<string, string>>): ReadItem {
    return readItem(rule, labels, this.config.project);
  }

  describe(rule: MetricRule<MonitoringQuery>, items: readonly ReadItem[]): string {
    return `Cloud Monitoring ListTimeSeries, newest point in the last ${rule.query.lookbackSeconds} s, for ${items.map((i) => i.what).join("; ")}`;
  }

  read(items: readonly ReadItem[], signal: AbortSignal): Promise<Outcome<Reading>[]> {
    return this.listTimeSeries(items, signal);
  }

  error(err: unknown, item: ReadItem): StatusError {
    return googleErrorToStatus(this.name, `ListTimeSeries for ${item.what}`, err);
  }

  /** One ListTimeSeries call (all pages) for a batch of one shape; one outcome per item. `batchSignal`: see the class doc. */
  private async listTimeSeries(items: readonly ReadItem[], batchSignal: AbortSignal): Promise<Outcome<Reading>[]> {
    const shape = items[0]!.shape;
    const now = this.runtime.now();
    const filter = timeSeriesFilter({
      metricType: shape.metricType,
      resourceType: shape.resourceType,
      fixed: shape.fixed,
      alternatives: items.map((i) => i.alternative),
    });
    const byKey = new Map<string, TimeSeriesData[]>();
    const keyOf = (values: (string | undefined)[]) => JSON.stringify(values);
    for (const item of items) byKey.set(keyOf(item.alternative.map(([, v]) => v)), []);
    const limitMs = Math.min(this.config.timeoutSeconds * 1000, BACKEND_LOAD_TIMEOUT_MS);
    const startedAt = Date.now();
    const call = callSignal(batchSignal, limitMs); // one deadline for every page, released when the pages are read
    const signal = call.signal;
    let pageToken = "";
    let pages = 0;
    try {
      do {
        const page = await this.transport.listTimeSeries(
          {
            project: shape.project,
            filter,
            startTime: now - shape.lookbackSeconds * 1000,
            endTime: now,
            ...(shape.aggregation !== undefined ? { aggregation: shape.aggregation } : {}),
            ...(this.config.pageSize !== undefined ? { pageSize: this.config.pageSize } : {}),
            ...(pageToken ? { pageToken } : {}),
          },
          signal,
          Math.max(1, startedAt + limitMs - Date.now()),
          items[0]!.identity, // a batch is one identity's (its group)
        );
        for (const series of page.timeSeries) {
          byKey.get(keyOf(shape.fields.map((f) => fieldValue(series, f))))?.push(series);
        }
        pageToken = page.nextPageToken;
        pages++;
      } while (pageToken !== "" && pages < MAX_PAGES);
    } finally {
      call.dispose();
    }
    if (pageToken !== "") {
      const error = serviceUnavailable(
        `provider ${this.name}: ListTimeSeries for ${items.length === 1 ? items[0]!.what : `${items.length} series of ${items[0]!.what}`} ` +
          `was cut at the page limit (${MAX_PAGES} pages); no value is reported from part of an answer — ` +
          `narrow the rule (a reducer, a shorter lookbackSeconds) or raise pageSize`,
      );
      return items.map(() => ({ ok: false, error }));
    }
    return items.map((item) => this.outcome(item, byKey.get(keyOf(item.alternative.map(([, v]) => v))) ?? [], now));
  }

  /** The reading of one item from the time series that matched it, or the error its reads fail with. */
  private outcome(item: ReadItem, matched: TimeSeriesData[], now: number): Outcome<Reading> {
    const where = `provider ${this.name}: ListTimeSeries for ${item.what}`;
    const fail = (error: StatusError): Outcome<Reading> => ({ ok: false, error });
    const from = now - item.shape.lookbackSeconds * 1000;
    // A point whose interval is not a real RFC 3339 time (transport.ts parseRfc3339: NaN)
    // makes the series a failed read: never skipped, never a value.
    if (matched.some((s) => s.points.some((p) => !Number.isFinite(p.endTime) || !Number.isFinite(p.startTime)))) {
      return fail(serviceUnavailable(`${where}: the answer holds a point whose interval is not a valid RFC 3339 time; no value is reported`));
    }
    const withPoints = matched.filter((s) => s.points.some((p) => p.endTime > from && p.endTime <= now));
    if (withPoints.length > 1) {
      return fail(
        serviceUnavailable(
          `${where}: ${withPoints.length} time series match one series of the selector; ` +
            `map more labels in selectorLabels or set a reducer so that exactly one remains`,
        ),
      );
    }
    const series = withPoints[0];
    if (series !== undefined) {
      const inWindow = series.points.filter((p) => p.endTime > from && p.endTime <= now);
      let newest = inWindow[0]!;
      for (const p of inWindow) if (p.endTime > newest.endTime) newest = p;
      if (newest.value === undefined) {
        return fail(
          serviceUnavailable(
            `${where}: the newest point holds a ${newest.valueField || "missing"} value, not a number; use an aligner that yields one (e.g. ALIGN_PERCENTILE_99 or ALIGN_MEAN)`,
          ),
        );
      }
      const span = (newest.endTime - newest.startTime) / 1000;
      const windowSeconds = item.alignmentPeriod ?? (span > 0 ? span : undefined);
      return { ok: true, value: { value: newest.value, timestamp: newest.endTime, ...(windowSeconds !== undefined ? { windowSeconds } : {}) } };
    }
    const empty = `${where}: no point in the last ${item.shape.lookbackSeconds} s; no value is reported`;
    return emptyOutcome(item.onEmpty, empty, "timeseries", now);
  }
}

/**
 * A `gcp-monitoring` provider instance: the series skeleton (`../series.ts`)
 * over one transport (`transport.ts`).
 */
export class MonitoringProvider extends SeriesProvider<MonitoringQuery, ReadItem> {
  readonly transport: MonitoringTransport;

  constructor(name: string, config: MonitoringProviderConfig, runtime: RuntimeEnv, factory: MonitoringTransportFactory) {
    const backend = new MonitoringBackend(name, config, runtime, factory);
    super("gcp-monitoring", name, runtime, backend);
    this.transport = backend.transport;
  }
}

/**
 * The transport the entry point chose (`RuntimeEnv.transports["gcp-monitoring"]`,
 * a {@link MonitoringTransportFactory}), else REST over fetch.
 *
 * @throws Error when an untyped caller passed something that is not a factory (a wiring bug)
 */
export function transportFactoryOf(runtime: RuntimeEnv): MonitoringTransportFactory {
  const chosen: unknown = runtime.transports?.[TRANSPORT_KEY];
  if (chosen === undefined) return restTransportFactory();
  if (typeof chosen !== "function") throw new Error(`RuntimeEnv.transports["${TRANSPORT_KEY}"] must be a transport factory`);
  return chosen as MonitoringTransportFactory;
}

/** The `gcp-monitoring` provider module. */
export const monitoringModule: ProviderModule<MonitoringProviderConfig, MonitoringQuery> = {
  type: "gcp-monitoring",
  providerSchema: monitoringProviderSchema,
  querySchema: monitoringQuerySchema,
  create: (name, config, runtime) => new MonitoringProvider(name, config, runtime, transportFactoryOf(runtime)),
  // an onEmpty value is also served for a label value no time series has (Cloud Monitoring returns none for it either)
  lintRule: (rule) =>
    onEmptyValueFindings(rule.query.onEmpty, rule.query.selectorLabels, {
      backend: "Cloud Monitoring",
      field: "selectorLabels",
      allowList: "subscription: { field: resource.labels.subscription_id, values: { orders: orders } }",
    }),
};

/** This module under the name every provider folder's `index.ts` exports it (the provider tables import it by this name: `../provider-list.ts`). */
export { monitoringModule as providerModule };
