/**
 * The REST transport of `gcp-monitoring`: `projects.timeSeries.list`
 * (`GET https://monitoring.googleapis.com/v3/projects/{project}/timeSeries`,
 * Cloud Monitoring API reference) over `fetch`, authorized with a
 * service-account access token (`../gcp/token.ts`). Query parameters use the
 * REST mapping of `ListTimeSeriesRequest` (`filter`, `interval.startTime`,
 * `aggregation.alignmentPeriod=60s`, `aggregation.groupByFields` repeated,
 * `view`, `pageSize`, `pageToken`); the answer is the proto3 JSON form of
 * `ListTimeSeriesResponse`.
 *
 * Runs on every runtime (Workers included) and imports nothing but `jose`
 * and `zod` (`zod/mini`, through `shared/config/zod.ts`).
 */
import * as z from "../../config/zod.ts";
import { GoogleBearer } from "../gcp/bearer.ts";
import { parseRetryAfter } from "../backoff.ts";
import { codeForHttpStatus, GoogleApiError, jsonOrUndefined, retryDelayOf } from "../gcp/errors.ts";
import {
  formatRfc3339,
  parseRfc3339,
  typedValue,
  type ListTimeSeriesPage,
  type ListTimeSeriesRequest,
  type MonitoringTransport,
  type MonitoringTransportFactory,
  type PointData,
  type TransportContext,
} from "./transport.ts";

/** The public Cloud Monitoring endpoint. */
export const MONITORING_REST_ENDPOINT = "https://monitoring.googleapis.com";

const labels = z._default(z.record(z.string(), z.string()), {});
const pointSchema = z.looseObject({
  interval: z.looseObject({ startTime: z.optional(z.string()), endTime: z.string() }),
  value: z.record(z.string(), z.unknown()),
});
const timeSeriesSchema = z.looseObject({
  metric: z.looseObject({ type: z.string(), labels }),
  resource: z._default(z.looseObject({ type: z.string(), labels }), { type: "", labels: {} }),
  points: z._default(z.array(pointSchema), []),
});
/** `ListTimeSeriesResponse` in proto3 JSON (fields the bridge reads). */
const responseSchema = z.looseObject({
  timeSeries: z._default(z.array(timeSeriesSchema), []),
  nextPageToken: z._default(z.string(), ""),
});
const errorSchema = z.looseObject({
  error: z.looseObject({
    code: z.optional(z.number()),
    message: z._default(z.string(), ""),
    status: z.optional(z.string()),
    details: z.optional(z.array(z.unknown())),
  }),
});

/** The REST query string of a request. */
export function restQuery(request: ListTimeSeriesRequest): URLSearchParams {
  const q = new URLSearchParams();
  q.set("filter", request.filter);
  q.set("interval.startTime", formatRfc3339(request.startTime));
  q.set("interval.endTime", formatRfc3339(request.endTime));
  const a = request.aggregation;
  if (a !== undefined) {
    q.set("aggregation.alignmentPeriod", `${a.alignmentPeriodSeconds}s`);
    q.set("aggregation.perSeriesAligner", a.perSeriesAligner);
    if (a.crossSeriesReducer !== undefined) q.set("aggregation.crossSeriesReducer", a.crossSeriesReducer);
    for (const f of a.groupByFields ?? []) q.append("aggregation.groupByFields", f);
  }
  q.set("view", "FULL");
  if (request.pageSize !== undefined) q.set("pageSize", String(request.pageSize));
  if (request.pageToken) q.set("pageToken", request.pageToken);
  return q;
}

/** Options of the REST transport. */
export interface RestTransportOptions {
  /** `fetch` to use (default the global one) */
  fetch?: typeof fetch;
}

class RestTransport implements MonitoringTransport {
  readonly kind = "rest";
  private readonly context: TransportContext;
  private readonly bearer: GoogleBearer;

  constructor(context: TransportContext, options: RestTransportOptions) {
    this.context = context;
    const { providerName, config, runtime } = context;
    // The token source of the credentials currently in the environment (re-read per call, so a rotated
    // secret is picked up): a service-account key, or a Workload Identity Federation configuration.
    this.bearer = new GoogleBearer({
      providerName,
      credentials: config.credentials,
      runtime,
      ...(options.fetch !== undefined ? { fetch: options.fetch } : {}),
      defaultRefused:
        `provider ${providerName}: credentials.source "default" (Application Default Credentials) needs the official ` +
        `Cloud Monitoring client, which this runtime does not use; give a service-account key with ` +
        `credentials: { source: environment, variable: GOOGLE_SERVICE_ACCOUNT_JSON } or a Workload Identity Federation ` +
        `configuration with credentials: { source: externalAccount, variable: GOOGLE_EXTERNAL_ACCOUNT_JSON }`,
    });
    if (config.credentials?.impersonate !== undefined) this.identity = (namespace) => this.bearer.identity(namespace)!;
  }

  /** With `credentials.impersonate`: the service account of `namespace` (`GoogleBearer.identity`). */
  identity?: (namespace: string) => string;

  async listTimeSeries(request: ListTimeSeriesRequest, signal: AbortSignal, _timeoutMs?: number, identity?: string): Promise<ListTimeSeriesPage> {
    const base = (this.context.config.endpoint ?? MONITORING_REST_ENDPOINT).replace(/\/+$/, "");
    const url = `${base}/v3/projects/${encodeURIComponent(request.project)}/timeSeries?${restQuery(request).toString()}`;
    const response = await this.bearer.fetch(url, { headers: { accept: "application/json" }, signal }, identity);
    const text = await response.text();
    const body = jsonOrUndefined(text);
    if (!response.ok) {
      const parsed = errorSchema.safeParse(body);
      const headerDelay = parseRetryAfter(response.headers.get("retry-after"), Date.now());
      if (parsed.success) {
        const retryDelaySeconds = retryDelayOf(parsed.data.error.details) ?? headerDelay;
        throw new GoogleApiError(parsed.data.error.status ?? codeForHttpStatus(response.status), parsed.data.error.message, response.status, { retryDelaySeconds });
      }
      throw new GoogleApiError(codeForHttpStatus(response.status), text.slice(0, 200), response.status, { retryDelaySeconds: headerDelay });
    }
    const parsed = responseSchema.safeParse(body);
    if (!parsed.success) {
      throw new GoogleApiError("UNKNOWN", `the ListTimeSeries answer is not a ListTimeSeriesResponse (${parsed.error.issues[0]?.message ?? "unreadable"})`, response.status);
    }
    return {
      nextPageToken: parsed.data.nextPageToken,
      timeSeries: parsed.data.timeSeries.map((ts) => ({
        metricType: ts.metric.type,
        metricLabels: ts.metric.labels,
        resourceType: ts.resource.type,
        resourceLabels: ts.resource.labels,
        points: ts.points.map((p): PointData => {
          const endTime = parseRfc3339(p.interval.endTime);
          const field = Object.keys(p.value)[0] ?? "";
          const value = typedValue(field, p.value[field]);
          return {
            endTime,
            startTime: p.interval.startTime !== undefined ? parseRfc3339(p.interval.startTime) : endTime,
            valueField: field,
            ...(value !== undefined ? { value } : {}),
          };
        }),
      })),
    };
  }
}

/** A factory of REST transports (the `gcp-monitoring` default). */
export function restTransportFactory(options: RestTransportOptions = {}): MonitoringTransportFactory {
  return (context) => new RestTransport(context, options);
}
