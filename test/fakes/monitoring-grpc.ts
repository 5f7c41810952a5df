/**
 * A gRPC fake of `google.monitoring.v3.MetricService`, built from the protos
 * `@google-cloud/monitoring` ships (its `google/api`, `google/rpc` and
 * `google/protobuf` imports come from google-gax's proto folder) and served
 * with @grpc/grpc-js over TLS (a self-signed certificate) so that the official client sends
 * its call credentials. `ListTimeSeries` is answered from the shared
 * {@link MonitoringStore}; every call must carry `authorization: Bearer JWT`
 * where the JWT is the self-signed token google-auth-library makes from the
 * service-account key, verified here with the account's public key.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { KeyObject } from "node:crypto";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { decodeJwt, jwtVerify } from "jose";
import { selfSignedLocalhost } from "./tls.ts";
import { apiError, FakeApiError, type FakeListRequest, type MonitoringStore, type StoredSeries } from "./monitoring-store.ts";

const require = createRequire(import.meta.url);
const MONITORING_PROTOS = join(dirname(require.resolve("@google-cloud/monitoring/package.json")), "build", "protos");
// google-gax exports no package.json; its main file lives in build/src/
const GAX_PROTOS = join(dirname(require.resolve("google-gax")), "..", "protos");

/** A running gRPC fake. */
export interface MonitoringGrpcFake {
  /** `https://127.0.0.1:PORT`, the provider's `endpoint` */
  endpoint: string;
  /** the self-signed serving certificate (PEM), for the transport's `rootCertificates` */
  caCert: Buffer;
  /** the `authorization` claims seen, one per call */
  readonly callers: Record<string, unknown>[];
  close(): Promise<void>;
}

type Ts = { seconds?: string | number; nanos?: number } | null | undefined;

function ms(t: Ts): number {
  return t ? Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6) : Number.NaN;
}

function ts(msValue: number) {
  return { seconds: String(Math.floor(msValue / 1000)), nanos: (msValue % 1000) * 1e6 };
}

/** A stored series as a `google.monitoring.v3.TimeSeries` object. */
function seriesToProto(s: StoredSeries) {
  return {
    metric: { type: s.metricType, labels: s.metricLabels ?? {} },
    resource: { type: s.resourceType, labels: s.resourceLabels ?? {} },
    metricKind: s.metricKind ?? "GAUGE",
    valueType: s.valueType ?? "INT64",
    points: s.points.map((p) => ({ interval: { startTime: ts(p.start ?? p.end), endTime: ts(p.end) }, value: p.value })),
  };
}

/**
 * Start the gRPC fake over `store`. `accounts` maps the service-account
 * emails it accepts to their public keys.
 */
export async function startMonitoringGrpcFake(
  store: MonitoringStore,
  accounts: Map<string, KeyObject>,
  /** opaque access tokens also accepted (token → caller), e.g. issued by a token endpoint fake */
  issued?: ReadonlyMap<string, string>,
): Promise<MonitoringGrpcFake> {
  const definition = protoLoader.loadSync("google/monitoring/v3/metric_service.proto", {
    includeDirs: [MONITORING_PROTOS, GAX_PROTOS],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as any;
  const service = pkg.google.monitoring.v3.MetricService.service as grpc.ServiceDefinition;
  const callers: Record<string, unknown>[] = [];
  const unimplemented = (_call: unknown, callback: grpc.sendUnaryData<unknown>) =>
    callback({ code: grpc.status.UNIMPLEMENTED, details: "not faked" } as grpc.ServiceError, null);
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const name of Object.keys(service)) handlers[name] = unimplemented;

  handlers["ListTimeSeries"] = async (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
    const fail = (e: FakeApiError) => {
      const metadata = new grpc.Metadata();
      if (e.retryDelaySeconds !== undefined) metadata.set("grpc-status-details-bin", statusWithRetryInfo(e.grpcCode, e.message, e.retryDelaySeconds));
      callback({ code: e.grpcCode, details: e.message, metadata } as grpc.ServiceError, null);
    };
    const auth = String(call.metadata.get("authorization")[0] ?? "");
    const jwt = /^Bearer (.+)$/.exec(auth)?.[1];
    let caller: string;
    try {
      if (jwt === undefined) throw new Error("no bearer token");
      const opaque = issued?.get(jwt);
      if (opaque !== undefined) {
        callers.push({ iss: opaque, opaque: true });
        caller = opaque;
      } else {
        const claims = decodeJwt(jwt);
        const key = accounts.get(String(claims.iss));
        if (key === undefined) throw new Error(`unknown service account ${String(claims.iss)}`);
        const { payload } = await jwtVerify(jwt, key, { issuer: String(claims.iss), algorithms: ["RS256"] });
        if (payload.sub !== payload.iss) throw new Error("sub must equal iss");
        callers.push(payload);
        caller = String(payload.iss);
      }
    } catch (err) {
      return fail(apiError("UNAUTHENTICATED", `Request had invalid authentication credentials: ${(err as Error).message}`));
    }
    if (store.behaviour === "hang") {
      const entry = { transport: "grpc" as const, closed: false };
      store.hung.push(entry);
      call.on("cancelled", () => (entry.closed = true)); // the client cancelled the call
      return; // never answers
    }
    const r = call.request;
    const request: FakeListRequest = {
      name: r.name,
      filter: r.filter,
      startMs: ms(r.interval?.startTime),
      endMs: ms(r.interval?.endTime),
      view: r.view,
      ...(r.pageSize ? { pageSize: r.pageSize } : {}),
      ...(r.pageToken ? { pageToken: r.pageToken } : {}),
    };
    const a = r.aggregation;
    if (a && a.perSeriesAligner && a.perSeriesAligner !== "ALIGN_NONE") {
      request.aggregation = {
        alignmentPeriodSeconds: Number(a.alignmentPeriod?.seconds ?? 0),
        perSeriesAligner: a.perSeriesAligner,
        ...(a.crossSeriesReducer && a.crossSeriesReducer !== "REDUCE_NONE" ? { crossSeriesReducer: a.crossSeriesReducer } : {}),
        ...(a.groupByFields?.length ? { groupByFields: a.groupByFields } : {}),
      };
    }
    store.requests.push({ ...request, transport: "grpc", caller });
    try {
      const page = store.list(request);
      callback(null, { timeSeries: page.timeSeries.map(seriesToProto), nextPageToken: page.nextPageToken, executionErrors: [], unit: "1" });
    } catch (err) {
      if (err instanceof FakeApiError) return fail(err);
      callback({ code: grpc.status.INTERNAL, details: String(err) } as grpc.ServiceError, null);
    }
  };

  const leaf = selfSignedLocalhost();
  const server = new grpc.Server();
  server.addService(service, handlers);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      "127.0.0.1:0",
      grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(leaf.key), cert_chain: Buffer.from(leaf.cert) }], false),
      (err, p) => (err ? reject(err) : resolve(p)),
    ),
  );
  return {
    endpoint: `https://127.0.0.1:${port}`,
    caCert: Buffer.from(leaf.cert),
    callers,
    close: () => new Promise((resolve) => server.tryShutdown(() => resolve())),
  };
}

/** Protobuf varint. */
function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/** A length-delimited field. */
function lengthDelimited(field: number, bytes: readonly number[]): number[] {
  return [(field << 3) | 2, ...varint(bytes.length), ...bytes];
}

/**
 * `google.rpc.Status{code, message, details: [Any(google.rpc.RetryInfo{retry_delay: Duration{seconds}})]}`
 * in protobuf binary, as Google sends it in `grpc-status-details-bin`
 * (`google/rpc/status.proto`, `google/rpc/error_details.proto`).
 */
function statusWithRetryInfo(code: number, message: string, seconds: number): Buffer {
  const duration = [0x08, ...varint(seconds)];
  const retryInfo = lengthDelimited(1, duration);
  const any = [...lengthDelimited(1, [...Buffer.from("type.googleapis.com/google.rpc.RetryInfo")]), ...lengthDelimited(2, retryInfo)];
  return Buffer.from([0x08, ...varint(code), ...lengthDelimited(2, [...Buffer.from(message)]), ...lengthDelimited(3, any)]);
}
