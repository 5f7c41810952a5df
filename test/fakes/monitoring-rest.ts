/**
 * A REST fake of Cloud Monitoring's `projects.timeSeries.list`:
 * `GET /v3/projects/{project}/timeSeries?filter=…&interval.startTime=…&
 * interval.endTime=…&aggregation.alignmentPeriod=60s&…&view=FULL&pageSize=&pageToken=`
 * answering the proto3 JSON form of `ListTimeSeriesResponse`, errors as
 * `{"error": {"code", "message", "status"}}`. Requests must carry a bearer
 * token issued by the OAuth fake. Data and semantics come from the shared
 * {@link MonitoringStore}.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { OAuthFake } from "./google-oauth.ts";
import { apiError, FakeApiError, type FakeListRequest, type MonitoringStore, type StoredSeries } from "./monitoring-store.ts";

/** A running REST fake. */
export interface MonitoringRestFake {
  /** `http://127.0.0.1:PORT`, the provider's `endpoint` */
  endpoint: string;
  /** raw request URLs received */
  readonly urls: string[];
  close(): Promise<void>;
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

/** A stored series in its proto3 JSON form. */
export function seriesToJson(s: StoredSeries) {
  return {
    metric: { type: s.metricType, labels: s.metricLabels ?? {} },
    resource: { type: s.resourceType, labels: s.resourceLabels ?? {} },
    metricKind: s.metricKind ?? "GAUGE",
    valueType: s.valueType ?? "INT64",
    points: s.points.map((p) => ({ interval: { startTime: p.endText ?? rfc3339(p.start ?? p.end), endTime: p.endText ?? rfc3339(p.end) }, value: p.value })),
  };
}

function seconds(duration: string | null): number | undefined {
  if (duration === null) return undefined;
  const m = /^(\d+)s$/.exec(duration);
  if (!m) throw apiError("INVALID_ARGUMENT", `Invalid duration ${duration}`);
  return Number(m[1]);
}

/** Start the REST fake over `store`, accepting tokens `oauth` issued. */
export async function startMonitoringRestFake(store: MonitoringStore, oauth: OAuthFake): Promise<MonitoringRestFake> {
  const urls: string[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json; charset=UTF-8" });
        res.end(JSON.stringify(body));
      };
      const fail = (e: FakeApiError) =>
        answer(e.httpStatus, {
          error: {
            code: e.httpStatus,
            message: e.message,
            status: e.code,
            ...(e.retryDelaySeconds !== undefined
              ? { details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${e.retryDelaySeconds}s` }] }
              : {}),
          },
        });
      urls.push(req.url ?? "");
      const url = new URL(req.url ?? "/", "http://fake");
      const m = /^\/v3\/(projects\/[^/]+)\/timeSeries$/.exec(url.pathname);
      if (req.method !== "GET" || m === null) return fail(apiError("NOT_FOUND", `no route ${req.method} ${url.pathname}`));
      const auth = String(req.headers["authorization"] ?? "");
      const token = /^Bearer (.+)$/.exec(auth)?.[1];
      const caller = token !== undefined ? oauth.issued.get(token) : undefined;
      if (caller === undefined) {
        return fail(apiError("UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token."));
      }
      if (store.behaviour === "hang") {
        const entry = { transport: "rest" as const, closed: false };
        store.hung.push(entry);
        res.on("close", () => (entry.closed = true)); // the client gave up: the connection closed
        return; // never answers
      }
      try {
        const q = url.searchParams;
        const aligner = q.get("aggregation.perSeriesAligner");
        const request: FakeListRequest = {
          name: decodeURIComponent(m[1]!),
          filter: q.get("filter") ?? "",
          startMs: Date.parse(q.get("interval.startTime") ?? ""),
          endMs: Date.parse(q.get("interval.endTime") ?? ""),
          view: q.get("view") ?? "FULL",
          ...(q.get("pageSize") !== null ? { pageSize: Number(q.get("pageSize")) } : {}),
          ...(q.get("pageToken") !== null ? { pageToken: q.get("pageToken")! } : {}),
        };
        if (aligner !== null) {
          request.aggregation = {
            alignmentPeriodSeconds: seconds(q.get("aggregation.alignmentPeriod")) ?? 60,
            perSeriesAligner: aligner,
            ...(q.get("aggregation.crossSeriesReducer") !== null ? { crossSeriesReducer: q.get("aggregation.crossSeriesReducer")! } : {}),
            ...(q.getAll("aggregation.groupByFields").length > 0 ? { groupByFields: q.getAll("aggregation.groupByFields") } : {}),
          };
        }
        store.requests.push({ ...request, transport: "rest", caller });
        const page = store.list(request);
        answer(200, {
          timeSeries: page.timeSeries.map(seriesToJson),
          ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}),
          unit: "1",
        });
      } catch (err) {
        if (err instanceof FakeApiError) return fail(err);
        answer(500, { error: { code: 500, message: String(err), status: "INTERNAL" } });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    urls,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
