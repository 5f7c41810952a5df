/**
 * How the `gcp-monitoring` provider reaches `ListTimeSeries`: one contract,
 * two transports.
 *
 * - `rest.ts`: the REST API (`GET /v3/projects/{p}/timeSeries`) over
 *   `fetch`, with a service-account token from `../gcp/token.ts`. Runs
 *   everywhere, including Cloudflare Workers; the module's default.
 * - `grpc.ts`: the official `@google-cloud/monitoring` client (gRPC,
 *   Application Default Credentials). Node and Lambda only — it does not run
 *   in workerd — so only those entry points import it and hand it to the
 *   provider through `RuntimeEnv.transports["gcp-monitoring"]`. The Worker
 *   never imports it, so its bundle never contains it.
 *
 * Both turn their wire format into the normalized shapes below, so the
 * provider behaves identically over either (the contract suite
 * `test/providers/gcp.transports.test.ts` proves it on the same fixtures).
 */
import { decimalFromNumber, parseDecimal, type Decimal } from "../../k8s/quantity.ts";
import { parseRfc3339 as parseStrictRfc3339 } from "../../k8s/time.ts";
import type { ProviderTransports, RuntimeEnv } from "../types.ts";
import type { MonitoringProviderConfig } from "./schema.ts";

/** `Aggregation` of a request (seconds, enum names as in the API). */
export interface AggregationSpec {
  alignmentPeriodSeconds: number;
  perSeriesAligner: string;
  crossSeriesReducer?: string;
  groupByFields?: string[];
}

/** One `ListTimeSeries` page request (`view` is always `FULL`). */
export interface ListTimeSeriesRequest {
  /** project id or number; the request's `name` is `projects/{project}` */
  project: string;
  filter: string;
  /** `interval.startTime`, ms since epoch (exclusive) */
  startTime: number;
  /** `interval.endTime`, ms since epoch (inclusive) */
  endTime: number;
  aggregation?: AggregationSpec;
  pageSize?: number;
  pageToken?: string;
}

/** One point: its interval and its value as an exact decimal (or why it has none). */
export interface PointData {
  /** `interval.startTime`, ms since epoch (equals `endTime` for a GAUGE point) */
  startTime: number;
  /** `interval.endTime`, ms since epoch */
  endTime: number;
  /** the value; absent for a value the bridge cannot report (distribution, string, non-finite) */
  value?: Decimal;
  /** the `TypedValue` field that was set, e.g. `int64Value` */
  valueField: string;
}

/** One time series, labels flattened. */
export interface TimeSeriesData {
  metricType: string;
  metricLabels: Record<string, string>;
  resourceType: string;
  resourceLabels: Record<string, string>;
  points: PointData[];
}

/** One page of results. */
export interface ListTimeSeriesPage {
  timeSeries: TimeSeriesData[];
  /** empty when this was the last page */
  nextPageToken: string;
}

/**
 * A way to call `ListTimeSeries`. Failures reject with `GoogleApiError`
 * (`../gcp/errors.ts`, carrying Google's `RetryInfo` delay when given) or a
 * `StatusError` (credentials), or the fetch/gRPC abort error when `signal`
 * fired.
 */
export interface MonitoringTransport {
  /** short name for messages and tests, e.g. `rest` or `grpc` */
  readonly kind: string;
  /**
   * One page. `signal` aborts the call (the batch's signal combined with
   * `timeoutSeconds`: request deadline, nobody waiting, per-call limit);
   * `timeoutMs` is the budget left for this page, ms, for transports that
   * take a timeout rather than a signal (gax call options).
   */
  listTimeSeries(request: ListTimeSeriesRequest, signal: AbortSignal, timeoutMs?: number, identity?: string): Promise<ListTimeSeriesPage>;
  /**
   * With `credentials.impersonate`: the identity (service account email) of
   * reads for `namespace`, which `listTimeSeries` then gets as `identity`
   * (`../gcp/credentials.ts` `impersonationTarget`; 403/500). Absent: one identity.
   */
  identity?(namespace: string): string;
}

/** What a transport is built from. Building must not do network I/O. */
export interface TransportContext {
  providerName: string;
  config: MonitoringProviderConfig;
  runtime: RuntimeEnv;
}

/** Builds a transport for one provider instance. */
export type MonitoringTransportFactory = (context: TransportContext) => MonitoringTransport;

declare module "../types.ts" {
  /**
   * The `gcp-monitoring` entry of the entry point's transports
   * (`RuntimeEnv.transports`): a {@link MonitoringTransportFactory}; default
   * REST over fetch. Node and Lambda pass the official gRPC client
   * (`grpc.ts` `nodeTransports`); the Worker passes nothing, so its bundle
   * never contains a client that cannot run there. Read by
   * `index.ts` `transportFactoryOf`.
   */
  interface ProviderTransports {
    "gcp-monitoring"?: MonitoringTransportFactory;
  }
}

/** Key of the transport override in `RuntimeEnv.transports`. */
export const TRANSPORT_KEY = "gcp-monitoring" satisfies keyof ProviderTransports;

/**
 * Parse an RFC 3339 timestamp (`2024-05-01T10:00:00.123456789Z`) to ms since
 * epoch, strictly (`shared/k8s/time.ts`: the §5.6 grammar and real calendar
 * dates); NaN when invalid — the provider fails the series of such a point
 * (`index.ts`), it never reports a value from it.
 */
export function parseRfc3339(text: string): number {
  return parseStrictRfc3339(text) ?? Number.NaN;
}

/** ms since epoch as RFC 3339 with millisecond precision. */
export function formatRfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * The exact decimal of a `TypedValue` field, the same for both wire forms:
 * `int64Value` (a decimal string in JSON and in the gRPC client's `longs:
 * String` objects) exactly; `doubleValue` from its shortest round-trip text;
 * `boolValue` as 1 or 0. Distributions, strings and non-finite doubles have
 * no value the HPA could use: `undefined`.
 */
export function typedValue(field: string, raw: unknown): Decimal | undefined {
  try {
    if (field === "int64Value" && (typeof raw === "string" || typeof raw === "number")) {
      const text = String(raw);
      return /^-?\d+$/.test(text) ? parseDecimal(text) : undefined;
    }
    if (field === "doubleValue" && typeof raw === "number") return Number.isFinite(raw) ? decimalFromNumber(raw) : undefined;
    if (field === "boolValue" && typeof raw === "boolean") return parseDecimal(raw ? "1" : "0");
  } catch {
    return undefined;
  }
  return undefined;
}
