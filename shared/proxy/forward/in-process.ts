/**
 * The bridge served inside the proxy's process: a ProxyConfig backend
 * `{ type: inProcess, bridgeConfig: /etc/external-metrics-bridge/bridge.yaml }`.
 *
 * The bridge is built exactly as the Node server builds it
 * (`functions/node.ts` `startNodeServer`: `loadConfig` of the file, then
 * `shared/bridge.ts` `loadBridge` with `officialTransports` for Cloud
 * Monitoring, loading the configured providers only). A values read calls
 * the bridge's values route directly (`shared/app.ts` `BridgeApp.readValues`:
 * no `Request`, no routing, the same handler, policies, cache, audit record
 * and answer); discovery calls its Hono app with a `Request` made in this
 * process. Either way: no socket, no TLS, no request signature. The caller
 * is the one the proxy already authenticated (front proxy, client
 * certificate, token), handed to the bridge (`readValues`' caller, or the
 * app's `authenticate` hook), so the bridge's own ExternalMetricPolicies
 * (and its default action) still decide per caller.
 * The answer then goes through the proxy's checks, cache, back-off and
 * Retry-After stripping like a network backend's (forward.ts).
 *
 * Metrics: with the proxy's registry (`CreateBackendOptions.registry`), the
 * bridge's `emb_bridge_*` families are served on the proxy's `/metrics`
 * beside its `emb_proxy_*` ones, registered once whatever the number of
 * inProcess backends ({@link exporterOf}); a proxy without such a backend
 * never loads this module, so adds none.
 *
 * Providers read cloud credentials from the proxy's environment, as the Node
 * bridge does (the SDK default chains: IRSA/EKS Pod Identity, GKE Workload
 * Identity, …). `BRIDGE_SIGNING_KEYS` is not needed and not read for this
 * backend.
 *
 * This module (and through it every provider and cloud SDK) is loaded by a
 * dynamic `import()` in backends.ts `createBackend`, only when such a
 * backend is configured; infra/proxy/build.ts keeps it out of the proxy's
 * main chunk.
 */
import { readFileSync } from "node:fs";
import type { Registry } from "prom-client";
import { readBounded } from "../../bounded-body.ts";
import { abortedPromise, callSignal } from "../../deadline.ts";
import type { DirectRead } from "../../app.ts";
import type { LogRecord } from "../../observability/log.ts";
import { loadBridge } from "../../bridge.ts";
import { loadConfig } from "../../config/config.ts";
import type { Caller } from "../../identity.ts";
import { BridgeMetrics } from "../../observability/metrics.ts";
import { registerBridgeMetrics, type ProviderCache } from "../../observability/prometheus.ts";
import { policyStartupNotices } from "../../policy/authorize.ts";
import { officialTransports } from "../../providers/gcp-monitoring/official-transports.ts";
import { BackendError, MAX_RESPONSE_BYTES, VALUES_PATH_PREFIX, type Backend, type BackendRequest, type BackendResponse, type CreateBackendOptions } from "./backend-contract.ts";
import type { BackendConfig } from "../config.ts";

/** The origin of the URLs the in-process bridge sees (never resolved: no socket is opened). */
export const IN_PROCESS_ORIGIN = "http://in-process.invalid";


/** The bridge called in this process. */
export class InProcessBackend implements Backend {
  readonly name: string;
  readonly config: BackendConfig;
  readonly #fetch: (request: Request) => Response | Promise<Response>;
  /** the bridge's values route called directly (`shared/app.ts` `BridgeApp.readValues`): no Request, no routing */
  readonly #readValues: (read: DirectRead) => Response | Promise<Response>;
  /** the caller of each request handed to the bridge through `#fetch` (read by its authenticate hook) */
  readonly #callers: WeakMap<Request, Caller>;
  readonly #providers: readonly unknown[];
  readonly #exported: BridgeExporter | undefined;

  private constructor(
    config: BackendConfig,
    fetch: (request: Request) => Response | Promise<Response>,
    readValues: (read: DirectRead) => Response | Promise<Response>,
    callers: WeakMap<Request, Caller>,
    providers: readonly unknown[],
    exported: BridgeExporter | undefined,
  ) {
    this.name = config.name;
    this.config = config;
    this.#fetch = fetch;
    this.#readValues = readValues;
    this.#callers = callers;
    this.#providers = providers;
    this.#exported = exported;
  }

  /**
   * Read `config.bridgeConfig` and build the bridge. Logs the bridge's
   * start-up notices (policy defaults) to `options.log`.
   *
   * @throws ConfigError when the bridge config is invalid (file:line:column);
   *   Error when it cannot be read
   */
  static async load(config: BackendConfig, options: CreateBackendOptions): Promise<InProcessBackend> {
    const path = config.bridgeConfig;
    if (path === undefined) throw new Error(`backend ${config.name}: an inProcess backend needs bridgeConfig`);
    const bridgeConfig = loadConfig(readFileSync(path, "utf8"), path, { readFile: (p) => readFileSync(p, "utf8") }).config;
    const log = options.log ?? (() => {});
    for (const notice of policyStartupNotices(bridgeConfig)) log({ ...notice, backend: config.name });
    const exported = options.registry !== undefined ? exporterOf(options.registry, options.now ?? Date.now) : undefined;
    const runtime = {
      env: options.env ?? process.env,
      now: options.now ?? Date.now,
      // the proxy is a long-running process: refresh-ahead may keep timers between requests, as the Node server's
      longLived: true,
      ...(exported !== undefined ? { metrics: exported.metrics } : {}),
    };
    const callers = new WeakMap<Request, Caller>();
    // As startNodeServer (shared/bridge.ts loadBridge): only the configured providers' code is loaded, with the official transports.
    const bridge = await loadBridge(bridgeConfig, runtime, {
      // The proxy authenticated the caller; no signature to verify. A request
      // not made by this class has no caller and is refused.
      authenticate: (request) => {
        const caller = callers.get(request);
        if (caller === undefined) throw new Error("in-process bridge: a request without the proxy's caller");
        return caller;
      },
      // The proxy logs every request (same requestId); the bridge adds only its warnings and errors.
      log: (record: LogRecord) => {
        if (record.level !== "info") log({ ...record, backend: config.name });
      },
    }, officialTransports);
    const providers = [...bridge.providers.values()];
    for (const provider of providers) exported?.providers.add(provider as ProviderCache);
    return new InProcessBackend(config, bridge.app.fetch, bridge.readValues, callers, providers, exported);
  }

  /** The deadline of one call, ms (`timeoutSeconds`, default 4 s: longer than the bridge's own 3 s). */
  get timeoutMs(): number {
    return Math.round(this.config.timeoutSeconds * 1000);
  }

  /**
   * Call the bridge (its values route directly for a values read, its app
   * otherwise) with `request.caller` as the caller. The bridge
   * sees the request's signal — `callSignal(request.signal, timeoutMs)`
   * (shared/deadline.ts): aborted at the deadline or when nobody waits any
   * more — and cancels its provider calls; the answer does not wait for an
   * app that ignores it (`abortedPromise`).
   *
   * @throws BackendError `timeout` (no answer within `timeoutSeconds`),
   *   `aborted` (`request.signal` aborted), `too-large` (over
   *   {@link MAX_RESPONSE_BYTES}), `protocol` (the app threw instead of answering)
   */
  async get(request: BackendRequest): Promise<BackendResponse> {
    const timeoutMs = this.timeoutMs;
    const caller = request.signal;
    if (caller?.aborted) throw this.#aborted();
    // One signal (shared/deadline.ts): aborted at the deadline or when the caller's signal aborts; the bridge sees it as its request's signal.
    const call = callSignal(caller, timeoutMs);
    const signal = call.signal;
    const stopped = abortedPromise(signal);
    try {
      // A values read goes straight to the bridge's values route; discovery (and anything else) through its app.
      if (request.pathAndQuery.startsWith(VALUES_PATH_PREFIX)) {
        const read: DirectRead = { pathAndQuery: request.pathAndQuery, caller: request.caller, requestId: request.requestId, signal };
        return await Promise.race([this.#answer(() => this.#readValues(read)), stopped.promise]);
      }
      const req = new Request(IN_PROCESS_ORIGIN + request.pathAndQuery, {
        headers: { accept: "application/json", "x-request-id": request.requestId },
        signal,
      });
      this.#callers.set(req, request.caller);
      return await Promise.race([this.#answer(() => this.#fetch(req)), stopped.promise]);
    } catch (err) {
      if (!signal.aborted) throw err;
      // The caller's abort wins over the deadline when both happened.
      if (caller?.aborted) throw this.#aborted();
      throw new BackendError(this.name, "timeout", `backend ${this.name} did not answer within ${timeoutMs} ms`, { cause: err });
    } finally {
      stopped.dispose();
      call.dispose();
    }
  }

  /** The bridge's answer (`call()`) as a {@link BackendResponse}. @throws BackendError `protocol`, `too-large` */
  async #answer(call: () => Response | Promise<Response>): Promise<BackendResponse> {
    let response: Response;
    try {
      response = await call();
    } catch (err) {
      throw new BackendError(this.name, "protocol", `backend ${this.name} failed in process: ${(err as Error).message}`, { cause: err });
    }
    const tooLarge = () => new BackendError(this.name, "too-large", `backend ${this.name} answered more than ${MAX_RESPONSE_BYTES} bytes`);
    const light = lightweight(response);
    let body: Buffer;
    if (light !== undefined) {
      body = Buffer.from(light.body, "utf8");
      if (body.length > MAX_RESPONSE_BYTES) throw tooLarge();
    } else {
      // A streamed answer is read only up to the bound, as every other body the proxy reads.
      const bytes = await readBounded(response.body, MAX_RESPONSE_BYTES, tooLarge);
      body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    const headers: Record<string, string> = {};
    const source = light?.headers ?? response.headers;
    if (source instanceof Headers) source.forEach((value, key) => (headers[key] = value));
    else for (const key in source) headers[key.toLowerCase()] = String(source[key]);
    return { status: response.status, headers, body };
  }

  #aborted(): BackendError {
    return new BackendError(this.name, "aborted", `the call to backend ${this.name} was cancelled: nobody waits for it`);
  }

  /** The bridge's provider instances (for tests and tools). */
  get providers(): readonly unknown[] {
    return this.#providers;
  }

  /** Close the bridge's providers (their refresh-ahead timers and refreshes in flight), as the Node server's close() does. */
  close(): void {
    for (const provider of this.#providers) {
      (provider as { close?: () => void }).close?.();
      this.#exported?.providers.delete(provider as ProviderCache);
    }
  }
}

/**
 * The in-process bridges' metrics in one proxy registry: one
 * {@link BridgeMetrics} shared by every inProcess backend of that proxy (the
 * counters add up, as one Node bridge's would; `metric` and `provider`
 * labels tell the rules and providers apart) and the providers whose cache
 * outcomes `emb_bridge_cache_requests_total` reads.
 */
interface BridgeExporter {
  metrics: BridgeMetrics;
  providers: Set<ProviderCache>;
}

/** The exporter of each proxy registry, made (and its families registered) on the first inProcess backend. */
const exporters = new WeakMap<Registry, BridgeExporter>();

/**
 * The exporter of `registry`: on first use, the bridge's `emb_bridge_*`
 * families (same names and labels as the Node bridge's `--metrics-port`,
 * `shared/observability/prometheus.ts` `registerBridgeMetrics`; without
 * Node's process metrics, which the proxy already exports as
 * `emb_proxy_process_*`) are registered there, once.
 */
function exporterOf(registry: Registry, now: () => number): BridgeExporter {
  let exporter = exporters.get(registry);
  if (exporter === undefined) {
    const created: BridgeExporter = { metrics: new BridgeMetrics(), providers: new Set() };
    registerBridgeMetrics(registry, created.metrics, () => created.providers, now);
    exporters.set(registry, (exporter = created));
  }
  return exporter;
}

/**
 * The string body and headers of a Response made by @hono/node-server's
 * lightweight `Response` (the global `Response` once `getRequestListener`
 * ran, as in the proxy), read from where that class keeps them —
 * `[status, body, headers]` under its `Symbol("cache")`, what its listener
 * writes to a socket without building a WHATWG Response — or undefined for
 * any other Response (then read the standard way). Reading the body the
 * standard way makes the lightweight Response build a full one and stream
 * the string through it: about a sixth of an in-process read.
 */
function lightweight(response: Response): { body: string; headers: Headers | Record<string, string> | undefined } | undefined {
  cacheSymbol ??= Object.getOwnPropertySymbols(response).find((s) => s.description === "cache");
  if (cacheSymbol === undefined) return undefined;
  const cached = (response as unknown as Record<symbol, unknown>)[cacheSymbol];
  if (!Array.isArray(cached) || typeof cached[1] !== "string") return undefined;
  const headers = cached[2];
  if (headers !== undefined && !(headers instanceof Headers) && (typeof headers !== "object" || headers === null || Array.isArray(headers))) return undefined;
  return { body: cached[1], headers: headers as Headers | Record<string, string> | undefined };
}

/** The lightweight Response's cache symbol once seen. */
let cacheSymbol: symbol | undefined;
