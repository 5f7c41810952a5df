/**
 * The gRPC transport of `gcp-monitoring`: the official
 * `@google-cloud/monitoring` client (`MetricServiceClient.listTimeSeries`,
 * one page per call with `autoPaginate: false`), authenticated by
 * google-auth-library — Application Default Credentials for
 * `credentials.source: default`, the service-account key for `environment`,
 * Workload Identity Federation (`AwsClient`, `IdentityPoolClient`,
 * `PluggableAuthClient`) for `externalAccount`.
 *
 * Node and Lambda only: the client generates code at run time (protobufjs),
 * which workerd forbids, and weighs ≈ 525 KiB gzipped. Entry points that can
 * run it import this module and pass {@link grpcTransportFactory} in
 * `RuntimeEnv.transports["gcp-monitoring"]`; nothing under `shared/` that the
 * Worker imports refers to this file.
 */
import { MetricServiceClient, type protos } from "@google-cloud/monitoring";
import { GoogleAuth, googleAuthLibrary, grpc, routingHeader } from "google-gax";
import { GoogleBearer, MAX_GOOGLE_IDENTITIES } from "../gcp/bearer.ts";
import { readExternalAccount, readServiceAccountKey } from "../gcp/credentials.ts";
import { adcTokenSource } from "../gcp/default-credentials.ts";
import type { AccessTokenSource } from "../gcp/external-account.ts";
import { tokenSourceClient } from "../gcp/impersonation.ts";
import { RecentlyUsed } from "../identity-template.ts";
import { GoogleApiError, retryDelayOf, RPC_CODES } from "../gcp/errors.ts";
import {
  typedValue,
  TRANSPORT_KEY,
  type ListTimeSeriesPage,
  type ListTimeSeriesRequest,
  type MonitoringTransport,
  type MonitoringTransportFactory,
  type PointData,
  type TransportContext,
} from "./transport.ts";
import type { ProviderTransports } from "../types.ts";

/** Options of the gRPC transport. */
export interface GrpcTransportOptions {
  /**
   * PEM CA certificates trusted for the endpoint instead of the system's
   * (a private endpoint, a TLS-inspecting proxy, a local fake). Call
   * credentials are attached the way google-gax attaches them.
   */
  rootCertificates?: Buffer;
}

type Timestamp = { seconds?: unknown; nanos?: number | null } | null | undefined;

/** A protobuf `Timestamp` (seconds as Long, string or number) as ms since epoch. */
function timestampMs(t: Timestamp): number {
  if (t === null || t === undefined) return Number.NaN;
  return Number(String(t.seconds ?? 0)) * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

/** ms since epoch as a protobuf `Timestamp`. */
function toTimestamp(ms: number) {
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 };
}

const VALUE_FIELDS = ["boolValue", "int64Value", "doubleValue", "stringValue", "distributionValue"] as const;

/** The `TypedValue` oneof field that is set, and its raw value. */
function setField(value: Record<string, unknown> | null | undefined): [string, unknown] {
  if (value === null || value === undefined) return ["", undefined];
  const chosen = value["value"];
  if (typeof chosen === "string" && (VALUE_FIELDS as readonly string[]).includes(chosen)) return [chosen, normalizeLong(value[chosen])];
  for (const f of VALUE_FIELDS) {
    if (Object.hasOwn(value, f) && value[f] !== null && value[f] !== undefined) return [f, normalizeLong(value[f])];
  }
  return ["", undefined];
}

/** A protobufjs Long (`{low, high, unsigned}` with `toString`) as its decimal string. */
function normalizeLong(raw: unknown): unknown {
  if (raw !== null && typeof raw === "object" && "low" in raw && "high" in raw) return String(raw);
  return raw;
}

class GrpcTransport implements MonitoringTransport {
  readonly kind = "grpc";
  private readonly context: TransportContext;
  private readonly options: GrpcTransportOptions;
  private client: { keyText: string; client: MetricServiceClient } | undefined;
  /**
   * With `credentials.impersonate`: the source's tokens (`cloud-platform`)
   * and each service account's impersonated ones (`../gcp/bearer.ts`), and
   * a client per service account (at most `MAX_GOOGLE_IDENTITIES`, closed when dropped)
   */
  private readonly bearer: GoogleBearer | undefined;
  private readonly impersonated = new RecentlyUsed<{ source: AccessTokenSource; client: MetricServiceClient }>(MAX_GOOGLE_IDENTITIES, (dropped) => void dropped.client.close());
  /** With `credentials.impersonate`: the service account of `namespace` (`GoogleBearer.identity`). */
  readonly identity?: (namespace: string) => string;

  constructor(context: TransportContext, options: GrpcTransportOptions) {
    this.context = context;
    this.options = options;
    const { providerName, config, runtime } = context;
    if (config.credentials?.impersonate !== undefined) {
      const bearer = new GoogleBearer({ providerName, credentials: config.credentials, runtime, defaultSource: (scope) => adcTokenSource(providerName, scope) });
      this.bearer = bearer;
      this.identity = (namespace) => bearer.identity(namespace)!;
    }
  }

  /**
   * The client of `identity`'s reads: its impersonated tokens (from the
   * source's tokens, `../gcp/impersonation.ts`) as the client's auth; built
   * again when the source's credentials change.
   */
  private impersonatedClient(identity: string): MetricServiceClient {
    const source = this.bearer!.sourceOf(identity);
    let entry = this.impersonated.get(identity, () => ({ source, client: this.build(new GoogleAuth({ projectId: this.context.config.project, scopes: MetricServiceClient.scopes, authClient: tokenSourceClient(googleAuthLibrary, source) })) }));
    if (entry.source !== source) {
      void entry.client.close(); // the source's credentials changed: so did the impersonated token source
      entry.source = source;
      entry.client = this.build(new GoogleAuth({ projectId: this.context.config.project, scopes: MetricServiceClient.scopes, authClient: tokenSourceClient(googleAuthLibrary, source) }));
    }
    return entry.client;
  }

  /** The client for the credentials currently configured (built on first use: no I/O at build time). */
  private clientFor(identity?: string): MetricServiceClient {
    if (identity !== undefined && this.bearer !== undefined) return this.impersonatedClient(identity);
    const { providerName, config, runtime } = this.context;
    const creds = config.credentials;
    const keyText = creds.source !== "default" ? (runtime.env[creds.variable] ?? "") : "";
    if (this.client?.keyText === keyText) return this.client.client;
    // The client's GoogleAuth, built here so that it carries the key as a JWT client (the
    // `credentials` option is deprecated) and so that custom TLS can reuse it. Without a key
    // it resolves Application Default Credentials.
    const scopes = MetricServiceClient.scopes;
    let auth: GoogleAuth;
    if (creds.source === "environment") {
      const key = readServiceAccountKey(providerName, creds, runtime);
      const jwt = new googleAuthLibrary.JWT({ email: key.client_email, key: key.private_key, scopes, ...(key.private_key_id ? { keyId: key.private_key_id } : {}) });
      auth = new GoogleAuth({ projectId: config.project, scopes, authClient: jwt });
    } else if (creds.source === "externalAccount") {
      // The configuration is validated first (readExternalAccount); the client for its
      // credential_source is chosen as ExternalAccountClient.fromJSON chooses it, without
      // fromJSON's console warning about unvalidated configurations.
      const { json, config: external } = readExternalAccount(providerName, creds, runtime);
      const options = { ...json, scopes } as ConstructorParameters<typeof googleAuthLibrary.IdentityPoolClient>[0];
      const source = external.credential_source as Record<string, unknown>;
      const authClient =
        source["environment_id"] !== undefined
          ? new googleAuthLibrary.AwsClient(options as ConstructorParameters<typeof googleAuthLibrary.AwsClient>[0])
          : source["executable"] !== undefined
            ? new googleAuthLibrary.PluggableAuthClient(options as ConstructorParameters<typeof googleAuthLibrary.PluggableAuthClient>[0])
            : new googleAuthLibrary.IdentityPoolClient(options);
      auth = new GoogleAuth({ projectId: config.project, scopes, authClient });
    } else {
      auth = new GoogleAuth({ projectId: config.project, scopes });
    }
    const client = this.build(auth);
    if (this.client !== undefined) void this.client.client.close(); // the key was rotated
    this.client = { keyText, client };
    return client;
  }

  /** A client reading with `auth` (the endpoint and TLS of the config). */
  private build(auth: GoogleAuth): MetricServiceClient {
    const { config } = this.context;
    const options: Record<string, unknown> = { projectId: config.project };
    if (config.endpoint !== undefined) {
      const url = new URL(config.endpoint);
      options["apiEndpoint"] = url.hostname.replace(/^\[|\]$/g, "");
      options["port"] = Number(url.port || (url.protocol === "http:" ? 80 : 443));
    }
    options["auth"] = auth;
    if (this.options.rootCertificates !== undefined) {
      // What google-gax does for default TLS (GrpcClient._getCredentials), with our CA.
      options["sslCreds"] = grpc.credentials.combineChannelCredentials(
        grpc.credentials.createSsl(this.options.rootCertificates),
        grpc.credentials.createFromGoogleCredential({
          getRequestHeaders: async (url?: string) => {
            const authClient = await auth.getClient();
            const headers = await authClient.getRequestHeaders(url);
            const plain: Record<string, string> = {};
            headers.forEach((value, key) => (plain[key] = value));
            return plain;
          },
        }),
      );
    }
    return new MetricServiceClient(options as ConstructorParameters<typeof MetricServiceClient>[0]);
  }

  /**
   * One page. gax call options: `timeout` = the smaller of `timeoutSeconds`
   * and `timeoutMs` (the remaining budget of the bridge's request deadline),
   * no gax retries, no auto-pagination; when `signal` aborts, the call is
   * cancelled (gax `CancellablePromise.cancel()`, which cancels the gRPC
   * stream: the server sees the call cancelled).
   *
   * The generated `MetricServiceClient.listTimeSeries` wraps the call in a
   * `.then` that drops `cancel()`, so the page is read through the client's
   * own `innerApiCalls.listTimeSeries` after `initialize()`, with the
   * routing header the generated method would add (`x-goog-request-params`).
   */
  async listTimeSeries(request: ListTimeSeriesRequest, signal: AbortSignal, timeoutMs?: number, identity?: string): Promise<ListTimeSeriesPage> {
    if (signal.aborted) throw signal.reason;
    const client = this.clientFor(identity);
    await client.initialize();
    if (signal.aborted) throw signal.reason;
    const a = request.aggregation;
    const name = `projects/${request.project}`;
    const limit = Math.max(1, Math.min(this.context.config.timeoutSeconds * 1000, timeoutMs ?? Number.POSITIVE_INFINITY));
    const call = (client.innerApiCalls["listTimeSeries"] as unknown as (
      req: unknown,
      options: unknown,
    ) => Promise<[unknown[], unknown, unknown]> & { cancel?: () => void })(
      {
        name,
        filter: request.filter,
        interval: { startTime: toTimestamp(request.startTime), endTime: toTimestamp(request.endTime) },
        ...(a !== undefined
          ? {
              aggregation: {
                alignmentPeriod: { seconds: a.alignmentPeriodSeconds },
                perSeriesAligner: a.perSeriesAligner as never,
                ...(a.crossSeriesReducer !== undefined ? { crossSeriesReducer: a.crossSeriesReducer as never } : {}),
                ...(a.groupByFields !== undefined ? { groupByFields: a.groupByFields } : {}),
              },
            }
          : {}),
        view: "FULL",
        ...(request.pageSize !== undefined ? { pageSize: request.pageSize } : {}),
        ...(request.pageToken ? { pageToken: request.pageToken } : {}),
      },
      {
        autoPaginate: false,
        timeout: limit,
        retry: null,
        otherArgs: { headers: { "x-goog-request-params": routingHeader.fromParams({ name }) } },
      },
    );
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => {
        call.cancel?.();
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
    });
    let result: Awaited<typeof call>;
    try {
      result = await Promise.race([call, aborted]);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      const e = err as { code?: unknown; details?: string; message?: string; name?: string; statusDetails?: unknown };
      if (typeof e?.code === "number" && RPC_CODES[e.code] !== undefined) {
        const details = e.details || e.message || "";
        // google-auth-library failing inside the call credentials reaches us as a gRPC status
        // (UNKNOWN/UNAVAILABLE); no credentials at all is a fault no retry fixes.
        const code = /Could not load the default credentials/.test(details) ? "UNAUTHENTICATED" : RPC_CODES[e.code]!;
        throw new GoogleApiError(code, details, undefined, { cause: err, retryDelaySeconds: retryDelayOf(e.statusDetails) });
      }
      // A token endpoint's HTTP error inside the call credentials (Workload Identity Federation:
      // Google STS, IAM Credentials) reaches us with its HTTP status as the code: a 4xx refusal
      // (invalid_grant, PERMISSION_DENIED) is a fault no retry fixes; 429/5xx is an outage.
      const details = e?.details || e?.message || "";
      if (typeof e?.code === "number" && e.code >= 400 && e.code < 600 && /Getting metadata from plugin failed/.test(details)) {
        const code = e.code === 429 || e.code >= 500 ? "UNAVAILABLE" : e.code === 403 ? "PERMISSION_DENIED" : "UNAUTHENTICATED";
        throw new GoogleApiError(code, details, undefined, { cause: err });
      }
      throw err;
    } finally {
      if (onAbort) signal.removeEventListener("abort", onAbort);
    }
    const [series, , response] = result as unknown as [protos.google.monitoring.v3.ITimeSeries[] | undefined, unknown, unknown];
    return {
      nextPageToken: (response as { nextPageToken?: string } | undefined)?.nextPageToken ?? "",
      timeSeries: (series ?? []).map((ts) => ({
        metricType: ts.metric?.type ?? "",
        metricLabels: { ...(ts.metric?.labels ?? {}) },
        resourceType: ts.resource?.type ?? "",
        resourceLabels: { ...(ts.resource?.labels ?? {}) },
        points: (ts.points ?? []).map((p): PointData => {
          const endTime = timestampMs(p.interval?.endTime as Timestamp);
          const start = p.interval?.startTime as Timestamp;
          const [field, raw] = setField(p.value as Record<string, unknown> | null | undefined);
          const value = typedValue(field, raw);
          return {
            endTime,
            startTime: start === null || start === undefined ? endTime : timestampMs(start),
            valueField: field,
            ...(value !== undefined ? { value } : {}),
          };
        }),
      })),
    };
  }
}

/** A factory of gRPC transports over the official client. */
export function createGrpcTransportFactory(options: GrpcTransportOptions = {}): MonitoringTransportFactory {
  return (context) => new GrpcTransport(context, options);
}

/** The official-client transport with default TLS: what Node and Lambda entry points inject. */
export const grpcTransportFactory: MonitoringTransportFactory = createGrpcTransportFactory();

/**
 * `RuntimeEnv.transports` for Node and Lambda entry points:
 * `{ env: process.env, now: Date.now, transports: nodeTransports }`.
 */
export const nodeTransports: Readonly<ProviderTransports> = { [TRANSPORT_KEY]: grpcTransportFactory };
