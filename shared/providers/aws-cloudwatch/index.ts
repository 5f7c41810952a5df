/**
 * The `aws-cloudwatch` provider: any CloudWatch metric, or a metric-math
 * expression over several, read with `GetMetricData` (Amazon CloudWatch API
 * Reference, https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html).
 *
 * A request's selector is mapped exactly onto dimension sets (one series per
 * set, see `../label-mapping.ts`). Each series is one read; reads of all rules
 * of this provider that arrive together are sent as one `GetMetricData` call
 * of up to 500 queries (`shared/batch.ts`), identical reads share one
 * in-flight load and are re-used for the rule's `cacheTTLSeconds`
 * (`shared/cache/coalescing.ts`). A query CloudWatch answers with an error status fails
 * only the reads that need it; a call CloudWatch rejects as invalid is split
 * until the invalid query stands alone.
 *
 * Datapoints arrive late, so the newest datapoint inside the rule's look-back
 * window is reported. CloudWatch stamps a datapoint with the start of its
 * period; the External Metrics API stamps a value with the end of the window
 * it aggregates (`[timestamp − window, timestamp]`, k8s.io/metrics
 * `pkg/apis/external_metrics/v1beta1/types.go`), so the value carries
 * `timestamp = start + period` (never later than the read) and
 * `window = period`. No datapoint is the rule's `onEmpty`: an error unless
 * the rule's author wrote a value.
 *
 * Deadlines and back-off: each `GetMetricData` page gets `{ abortSignal }` =
 * the batch's signal (aborted when every read of the batch has gone: the
 * request deadline, a client that left) combined with `timeoutSeconds`. A
 * failed read (503) is re-used for CloudWatch's own back-off hint
 * (`../backoff.ts`), so a throttled metric is not asked again by every read.
 * An answer cut at {@link MAX_PAGES} pages is never turned into `onEmpty`:
 * a series without a datapoint in it is a 503 naming the limit.
 */
import {
  CloudWatchClient,
  GetMetricDataCommand,
  type Dimension,
  type MetricDataQuery,
  type MetricStat,
} from "@aws-sdk/client-cloudwatch";
import { callSignal } from "../../deadline.ts";
import { decimalFromNumber } from "../../k8s/quantity.ts";
import { internalError, serviceUnavailable, type StatusError } from "../../k8s/status.ts";
import { AwsClients } from "../aws/clients.ts";
import { awsErrorToStatus } from "../aws/common.ts";
import { mappedLabels, mappedValue, onEmptyValueFindings } from "../label-mapping.ts";
import { emptyOutcome, SeriesProvider, type Outcome, type Reading, type SeriesBackend, type SeriesBatching, type SeriesItem } from "../series.ts";
import type { MetricRule, ProviderModule, RuntimeEnv } from "../types.ts";
import { providerRefreshAhead } from "../refresh-ahead.ts";
import {
  cloudWatchProviderSchema,
  cloudWatchQuerySchema,
  lookbackOf,
  renameExpressionIds,
  type CloudWatchMetric,
  type CloudWatchProviderConfig,
  type CloudWatchQuery,
} from "./schema.ts";

/** Most `NextToken` pages followed for one call (newest datapoints come first). */
export const MAX_PAGES = 20;

/** AWS error names that mean "this request is invalid": possibly one query's fault, so the batch is split. */
const INVALID_REQUEST_ERRORS = new Set([
  "ValidationError",
  "ValidationException",
  "InvalidParameterValue",
  "InvalidParameterValueException",
  "InvalidParameterCombination",
  "InvalidParameterCombinationException",
  "MissingParameter",
  "MissingRequiredParameterException",
]);

/**
 * One value read from CloudWatch for one series: `timestamp` is the end of
 * the datapoint's period (or the read time for an `onEmpty` value), ms since
 * epoch; `windowSeconds` the period (absent for an `onEmpty` value).
 */
export type { Reading } from "../series.ts";

/** One series to read: what the batcher collects. */
interface ReadItem extends SeriesItem {
  /** cache key: everything that determines the answer */
  key: string;
  /** the series, for messages, e.g. `metric sqs_depth (AWS/SQS ApproximateNumberOfMessagesVisible QueueName=jobs)` */
  what: string;
  /** the queries of this series, the answer's query having `Id = id` */
  build: (id: string) => MetricDataQuery[];
  /** number of queries `build` returns */
  size: number;
  period: number;
  lookbackSeconds: number;
  onEmpty: CloudWatchQuery["onEmpty"];
}

/** Datapoints and status CloudWatch returned for one query id, merged over pages. */
interface QueryResult {
  labels: Set<string>;
  points: { t: number; v: number }[];
  status: string | undefined;
  messages: string[];
}

/** The dimensions a label set adds: `{name, value}` per mapped label. */
function labelDimensions(query: CloudWatchQuery, labels: Record<string, string>): Dimension[] {
  return Object.entries(query.dimensionLabels).map(([label, d]) => ({
    Name: typeof d === "string" ? d : d.dimension,
    Value: mappedValue(d, labels[label]!),
  }));
}

function sortDimensions(dims: Dimension[]): Dimension[] {
  return [...dims].sort((a, b) => (a.Name! < b.Name! ? -1 : a.Name! > b.Name! ? 1 : 0));
}

function metricStat(metric: CloudWatchMetric, extra: Dimension[], period: number): MetricStat {
  const dims = sortDimensions([...Object.entries(metric.dimensions).map(([Name, Value]) => ({ Name, Value })), ...extra]);
  return {
    Metric: { Namespace: metric.namespace, MetricName: metric.metricName, Dimensions: dims },
    Period: period,
    Stat: metric.stat,
    ...(metric.unit !== undefined ? { Unit: metric.unit } : {}),
  };
}

function describeDimensions(dims: Dimension[] | undefined): string {
  return (dims ?? []).map((d) => `${d.Name}=${d.Value}`).join(",");
}

/**
 * Build the read of one series (one label set) of a rule.
 */
function readItem(rule: MetricRule<CloudWatchQuery>, labels: Readonly<Record<string, string>>): ReadItem {
  const q = rule.query;
  const extra = labelDimensions(q, labels);
  const accountId = q.accountId !== undefined ? { AccountId: q.accountId } : {};
  let build: (id: string) => MetricDataQuery[];
  let what: string;
  if (q.expression === undefined) {
    const stat = metricStat(
      { namespace: q.namespace!, metricName: q.metricName!, stat: q.stat!, dimensions: q.dimensions ?? {}, ...(q.unit ? { unit: q.unit } : {}) },
      extra,
      q.period,
    );
    build = (id) => [{ Id: id, MetricStat: stat, ReturnData: true, ...accountId }];
    what = `${q.namespace} ${q.metricName} ${q.stat}/${q.period}s ${describeDimensions(stat.Metric?.Dimensions)}`.trim();
  } else {
    const metrics = q.metrics ?? {};
    const ids = new Set(Object.keys(metrics));
    const stats = Object.entries(metrics).map(([mid, metric]) => [mid, metricStat(metric, extra, q.period)] as const);
    const expression = q.expression;
    build = (id) => [
      ...stats.map(([mid, stat]) => ({ Id: `${id}_${mid}`, MetricStat: stat, ReturnData: false, ...accountId })),
      { Id: id, Expression: renameExpressionIds(expression, (mid) => `${id}_${mid}`, ids), Period: q.period, ReturnData: true, ...accountId },
    ];
    what = `${expression} ${describeDimensions(extra)}`.trim();
  }
  const lookbackSeconds = lookbackOf(q);
  const queries = build("q");
  return {
    key: JSON.stringify({ queries, lookbackSeconds, onEmpty: q.onEmpty }),
    what: `metric ${rule.name} (${what})`,
    build,
    size: queries.length,
    period: q.period,
    lookbackSeconds,
    onEmpty: q.onEmpty,
  };
}

/**
 * The CloudWatch part of an `aws-cloudwatch` provider (`../series.ts` does
 * label resolution, cache, coalescing and batching): one series is one
 * `GetMetricData` query (or a metric-math group of them), a batch one call.
 */
class CloudWatchBackend implements SeriesBackend<CloudWatchQuery, ReadItem> {
  /** the clients by identity (`../aws/clients.ts`): one per namespace role with `credentials.assumeRole` */
  readonly clients: AwsClients<CloudWatchClient>;
  readonly identity?: (namespace: string) => string;
  readonly batching: SeriesBatching;
  readonly refreshAhead;
  private readonly name: string;
  private readonly runtime: RuntimeEnv;
  private readonly timeoutMs: number;

  constructor(name: string, config: CloudWatchProviderConfig, runtime: RuntimeEnv) {
    this.name = name;
    this.runtime = runtime;
    this.timeoutMs = config.timeoutSeconds * 1000;
    this.clients = new AwsClients(name, config, runtime, (options) => new CloudWatchClient(options));
    if (this.clients.perNamespace) this.identity = (namespace) => this.clients.identity(namespace)!;
    this.batching = {
      maxBatchSize: config.maxQueriesPerCall,
      windowMs: config.batchWindowSeconds * 1000,
      splitOnError: (err) => INVALID_REQUEST_ERRORS.has((err as { name?: string })?.name ?? ""),
    };
    this.refreshAhead = providerRefreshAhead(config, runtime);
  }

  labels(rule: MetricRule<CloudWatchQuery>) {
    return mappedLabels(rule.query.dimensionLabels);
  }

  item(rule: MetricRule<CloudWatchQuery>, labels: Readonly<Record<string, string>>): ReadItem {
    return readItem(rule, labels);
  }

  describe(_rule: MetricRule<CloudWatchQuery>, items: readonly ReadItem[]): string {
    return `CloudWatch GetMetricData, newest datapoint in the last ${items[0]!.lookbackSeconds} s, for ${items.map((i) => i.what).join("; ")}`;
  }

  read(items: readonly ReadItem[], signal: AbortSignal): Promise<Outcome<Reading>[]> {
    return this.getMetricData(items, signal);
  }

  error(err: unknown, item: ReadItem): StatusError {
    const name = (err as { name?: string })?.name ?? "";
    if (INVALID_REQUEST_ERRORS.has(name)) {
      // After splitting, this query alone was refused: the rule is wrong, no retry helps.
      return internalError(
        `provider ${this.name}: GetMetricData for ${item.what} failed: CloudWatch says the query is invalid (${name}): ${(err as Error).message}`,
        undefined,
        err,
      );
    }
    return awsErrorToStatus(this.name, `GetMetricData for ${item.what}`, err);
  }

  /** One GetMetricData call (all pages) for a batch; one outcome per item. `signal`: the batch's (see the class doc). */
  private async getMetricData(items: readonly ReadItem[], batchSignal: AbortSignal): Promise<Outcome<Reading>[]> {
    const now = this.runtime.now();
    const queries = items.flatMap((item, i) => item.build(`q${i}`));
    const lookbackMs = Math.max(...items.map((i) => i.lookbackSeconds)) * 1000;
    const results = new Map<string, QueryResult>();
    const requestMessages: string[] = [];
    const call = callSignal(batchSignal, this.timeoutMs); // one deadline for every page, released when the pages are read
    const signal = call.signal;
    let nextToken: string | undefined;
    let pages = 0;
    const client = this.clients.get(items[0]!.identity); // a batch is one identity's (its group)
    try {
      do {
        const out = await client.send(
          new GetMetricDataCommand({
            MetricDataQueries: queries,
            StartTime: new Date(now - lookbackMs),
            EndTime: new Date(now),
            ScanBy: "TimestampDescending",
            ...(nextToken !== undefined ? { NextToken: nextToken } : {}),
          }),
          { abortSignal: signal },
        );
        for (const r of out.MetricDataResults ?? []) {
          if (r.Id === undefined) continue;
          let result = results.get(r.Id);
          if (result === undefined) {
            result = { labels: new Set(), points: [], status: undefined, messages: [] };
            results.set(r.Id, result);
          }
          if (r.Label !== undefined) result.labels.add(r.Label);
          const ts = r.Timestamps ?? [];
          const vs = r.Values ?? [];
          for (let j = 0; j < Math.min(ts.length, vs.length); j++) result.points.push({ t: ts[j]!.getTime(), v: vs[j]! });
          result.status = r.StatusCode ?? result.status;
          for (const m of r.Messages ?? []) result.messages.push(`${m.Code ?? "Message"}: ${m.Value ?? ""}`);
        }
        for (const m of out.Messages ?? []) requestMessages.push(`${m.Code ?? "Message"}: ${m.Value ?? ""}`);
        nextToken = out.NextToken || undefined;
        pages++;
      } while (nextToken !== undefined && pages < MAX_PAGES);
    } finally {
      call.dispose();
    }
    const truncated = nextToken !== undefined;
    return items.map((item, i) => this.outcome(item, results.get(`q${i}`), requestMessages, now, truncated));
  }

  /** The reading of one item from its query result, or the error its reads fail with. */
  private outcome(item: ReadItem, result: QueryResult | undefined, requestMessages: string[], now: number, truncated: boolean): Outcome<Reading> {
    const where = `provider ${this.name}: GetMetricData for ${item.what}`;
    const fail = (error: StatusError): Outcome<Reading> => ({ ok: false, error });
    const cut = () =>
      // With ScanBy TimestampDescending a series' newest datapoint may still be on a page not read: never onEmpty.
      fail(
        serviceUnavailable(
          `${where}: CloudWatch's answer was cut at the page limit (${MAX_PAGES} pages) before a datapoint of this series; no value is reported`,
        ),
      );
    if (result === undefined) return truncated ? cut() : fail(serviceUnavailable(`${where} returned no result for the query`));
    const notes = [...result.messages, ...requestMessages];
    const noteText = notes.length > 0 ? ` (CloudWatch says: ${notes.join("; ")})` : "";
    if (result.status === "Forbidden") {
      return fail(internalError(`${where} failed: CloudWatch refused access to the metric (Forbidden)${noteText}`));
    }
    if (result.status === "InternalError") {
      return fail(serviceUnavailable(`${where} failed: CloudWatch answered InternalError for the query${noteText}`));
    }
    if (result.labels.size > 1) {
      return fail(serviceUnavailable(`${where}: the expression yields ${result.labels.size} time series; a rule must yield exactly one`));
    }
    const from = now - item.lookbackSeconds * 1000;
    let newest: { t: number; v: number } | undefined;
    for (const p of result.points) {
      if (p.t < from || p.t > now || !Number.isFinite(p.v)) continue;
      if (newest === undefined || p.t > newest.t) newest = p;
    }
    if (newest !== undefined) {
      return {
        ok: true,
        value: { value: decimalFromNumber(newest.v), timestamp: Math.min(newest.t + item.period * 1000, now), windowSeconds: item.period },
      };
    }
    if (truncated) return cut();
    const empty = `${where}: no datapoint in the last ${item.lookbackSeconds} s${noteText}; no value is reported`;
    return emptyOutcome(item.onEmpty, empty, "cloudwatch-metric", now);
  }
}

/**
 * An `aws-cloudwatch` provider instance: the series skeleton
 * (`../series.ts`) over one CloudWatch client (one region and credentials).
 */
export class CloudWatchProvider extends SeriesProvider<CloudWatchQuery, ReadItem> {
  readonly client: CloudWatchClient;

  constructor(name: string, config: CloudWatchProviderConfig, runtime: RuntimeEnv) {
    const backend = new CloudWatchBackend(name, config, runtime);
    super("aws-cloudwatch", name, runtime, backend);
    this.client = backend.clients.get(undefined);
  }
}

/** The `aws-cloudwatch` provider module. */
export const cloudWatchModule: ProviderModule<CloudWatchProviderConfig, CloudWatchQuery> = {
  type: "aws-cloudwatch",
  providerSchema: cloudWatchProviderSchema,
  querySchema: cloudWatchQuerySchema,
  create: (name, config, runtime) => new CloudWatchProvider(name, config, runtime),
  // an onEmpty value is also served for a dimension value that does not exist (CloudWatch has no datapoint for it either)
  lintRule: (rule) =>
    onEmptyValueFindings(rule.query.onEmpty, rule.query.dimensionLabels, {
      backend: "CloudWatch",
      field: "dimensionLabels",
      allowList: "queue: { dimension: QueueName, values: { orders: orders } }",
    }),
};

/** This module under the name every provider folder's `index.ts` exports it (the provider tables import it by this name: `../provider-list.ts`). */
export { cloudWatchModule as providerModule };
