/**
 * The bridge served inside the proxy's process: a ProxyConfig backend
 * `{ type: inProcess, bridgeConfig: /etc/external-metrics-bridge/bridge.yaml }`.
 *
 * The bridge is built by the one start-up every entry point uses
 * (shared/bootstrap.ts `bootstrap`: the config file validated, then
 * `shared/bridge.ts` `loadBridge` with `officialTransports` for Cloud
 * Monitoring, loading the configured providers only; its policy notices
 * logged with the backend's name). A values read calls
 * the bridge's typed values read (shared/values/read.ts, `Bridge.readValues`)
 * with the parts the proxy parsed (`BackendRequest.values`): no `Request`,
 * no routing, no URL parsed again, the same policies, cache, audit record
 * and answer as over HTTP; its answer text is the body, serialized once.
 * Discovery is the bridge's `APIResourceList` (`Bridge.discovery`). No
 * socket, no TLS, no request signature. The caller is the one the proxy
 * already authenticated (front proxy, client certificate, token), so the
 * bridge's own ExternalMetricPolicies (and its default action) still decide
 * per caller.
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
import { abortedPromise, callSignal } from "../../deadline.ts";
import type { LogRecord } from "../../observability/log.ts";
import { bootstrap } from "../../bootstrap.ts";
import type { Bridge } from "../../bridge.ts";
import { notFound } from "../../k8s/status.ts";
import { BridgeMetrics } from "../../observability/metrics.ts";
import { registerBridgeMetrics, type ProviderCache } from "../../observability/prometheus.ts";
import type { Provider } from "../../providers/types.ts";
import { officialTransports } from "../../providers/gcp-monitoring/official-transports.ts";
import { statusHttpAnswer, valuesHttpAnswer, type ValuesHttpAnswer } from "../../values/answer.ts";
import { BackendError, CUSTOM_GROUP_PATH, DISCOVERY_PATH, MAX_RESPONSE_BYTES, type Backend, type BackendRequest, type BackendResponse, type CreateBackendOptions } from "./backend-contract.ts";
import { StatusError } from "../../k8s/status.ts";
import { isCustomVersion, type CustomVersion } from "../../k8s/custom-types.ts";
import type { APIResourceList } from "../../k8s/types.ts";
import type { CustomValuesOutcome, CustomValuesRead } from "../../values/custom-read.ts";

/**
 * What the in-process backend needs of the bridge for custom.metrics.k8s.io
 * (contract C2: `BridgeApp.readCustom` and `customDiscovery`, added to the
 * bridge by the bridge-routes work). Declared here, structurally, so this
 * backend compiles before they land: a bridge without them serves no custom
 * metrics (its custom paths answer 404 and it lists none).
 */
interface CustomBridge {
  /** a custom values read: never throws, every failure a Status */
  readCustom?: (read: CustomValuesRead) => Promise<CustomValuesOutcome>;
  /** the custom group's APIResourceList of a version */
  customDiscovery?: APIResourceList<string> | ((version: CustomVersion) => APIResourceList<string>) | Partial<Record<CustomVersion, APIResourceList<string>>>;
}
import type { BackendConfig } from "../config.ts";

/** The bridge called in this process. */
export class InProcessBackend implements Backend {
  readonly name: string;
  readonly config: BackendConfig;
  readonly #bridge: Bridge;
  readonly #now: () => number;
  /** the `APIResourceList` JSON, made once (the bridge's discovery never changes) */
  readonly #discovery: string;
  readonly #exported: BridgeExporter | undefined;

  private constructor(config: BackendConfig, bridge: Bridge, now: () => number, exported: BridgeExporter | undefined) {
    this.name = config.name;
    this.config = config;
    this.#bridge = bridge;
    this.#now = now;
    this.#discovery = JSON.stringify(bridge.discovery);
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
    const log = options.log ?? (() => {});
    const exported = options.registry !== undefined ? exporterOf(options.registry, options.now ?? Date.now) : undefined;
    const runtime = {
      env: options.env ?? process.env,
      now: options.now ?? Date.now,
      // the proxy is a long-running process: refresh-ahead may keep timers between requests, as the Node server's
      longLived: true,
      ...(exported !== undefined ? { metrics: exported.metrics } : {}),
    };
    // The bridge's one start-up (shared/bootstrap.ts), as the Node server's: only the configured providers' code is
    // loaded, with the official transports. No signing check: the proxy authenticated the caller and hands it to each read.
    const { bridge, notices } = await bootstrap({
      runtime,
      config: { text: readFileSync(path, "utf8"), source: path, readFile: (p) => readFileSync(p, "utf8") },
      // The proxy logs every request (same requestId); the bridge adds only its warnings and errors.
      log: () => (record: LogRecord) => {
        if (record.level !== "info") log({ ...record, backend: config.name });
      },
      transports: officialTransports,
    });
    for (const notice of notices) log({ ...notice, backend: config.name });
    for (const provider of bridge.providers.values()) exported?.providers.add(provider);
    return new InProcessBackend(config, bridge, runtime.now, exported);
  }

  /** The deadline of one call, ms (`timeoutSeconds`, default 4 s: longer than the bridge's own 3 s). */
  get timeoutMs(): number {
    return Math.round(this.config.timeoutSeconds * 1000);
  }

  /**
   * Answer one request with the bridge: a values read (`request.values`) by
   * its typed values read with `request.caller` as the caller, discovery
   * (`/apis/external.metrics.k8s.io/v1beta1`) by its `APIResourceList`,
   * anything else 404 (the forwarder asks nothing else). The read sees the
   * call's signal — `callSignal(request.signal, timeoutMs)`
   * (shared/deadline.ts): aborted at the deadline or when nobody waits any
   * more — and cancels its provider calls; the answer does not wait for a
   * read that ignores it (`abortedPromise`).
   *
   * @throws BackendError `timeout` (no answer within `timeoutSeconds`),
   *   `aborted` (`request.signal` aborted), `too-large` (over
   *   {@link MAX_RESPONSE_BYTES}), `protocol` (the bridge threw instead of answering)
   */
  async get(request: BackendRequest): Promise<BackendResponse> {
    const timeoutMs = this.timeoutMs;
    const caller = request.signal;
    if (caller?.aborted) throw this.#aborted();
    const parts = request.values;
    const custom = request.custom;
    if (parts === undefined && custom === undefined) {
      const path = request.pathAndQuery.split("?", 1)[0]!;
      if (path === DISCOVERY_PATH || path === `${DISCOVERY_PATH}/`) {
        return this.#response({ status: 200, body: this.#discovery, headers: { "content-type": "application/json", "cache-control": "no-store" } });
      }
      const list = path.startsWith(`${CUSTOM_GROUP_PATH}/`) ? this.#customDiscovery(path.slice(CUSTOM_GROUP_PATH.length + 1).replace(/\/$/, "")) : undefined;
      return this.#response(
        list !== undefined
          ? { status: 200, body: JSON.stringify(list), headers: { "content-type": "application/json", "cache-control": "no-store" } }
          : statusHttpAnswer(notFound(`the server could not find the requested resource (GET ${request.pathAndQuery.slice(0, 1024)})`)),
      );
    }
    const readCustom = (this.#bridge as Bridge & CustomBridge).readCustom;
    if (custom !== undefined && readCustom === undefined) {
      return this.#response(statusHttpAnswer(notFound(`backend ${this.name}: this bridge serves no custom metrics (GET ${request.pathAndQuery.slice(0, 1024)})`)));
    }
    // One signal (shared/deadline.ts): aborted at the deadline or when the caller's signal aborts; the read sees it as its signal.
    const call = callSignal(caller, timeoutMs);
    const signal = call.signal;
    const stopped = abortedPromise(signal);
    try {
      if (custom !== undefined) {
        // Typed parts, no JSON round trip (contract C2 `BridgeApp.readCustom`).
        let outcome: CustomValuesOutcome;
        try {
          outcome = await Promise.race([readCustom!({ ...custom, caller: request.caller, requestId: request.requestId, signal }), stopped.promise]);
        } catch (err) {
          if (signal.aborted) throw err;
          throw new BackendError(this.name, "protocol", `backend ${this.name} failed in process: ${(err as Error).message}`, { cause: err });
        }
        return this.#response(
          outcome instanceof StatusError ? statusHttpAnswer(outcome) : { status: 200, body: outcome.text, headers: { "content-type": "application/json", "cache-control": "no-store" } },
        );
      }
      let outcome;
      try {
        outcome = this.#bridge.readValues({ ...parts!, caller: request.caller, requestId: request.requestId, signal });
        if (outcome instanceof Promise) outcome = await Promise.race([outcome, stopped.promise]);
      } catch (err) {
        if (signal.aborted) throw err;
        throw new BackendError(this.name, "protocol", `backend ${this.name} failed in process: ${(err as Error).message}`, { cause: err });
      }
      return this.#response(valuesHttpAnswer(outcome, this.#now()));
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

  /** The bridge's custom APIResourceList of `version` (undefined: not a served version, or the bridge serves no custom metrics). */
  #customDiscovery(version: string): APIResourceList<string> | undefined {
    if (!isCustomVersion(version)) return undefined;
    const discovery = (this.#bridge as Bridge & CustomBridge).customDiscovery;
    if (discovery === undefined) return undefined;
    if (typeof discovery === "function") return discovery(version);
    if ("kind" in discovery && discovery.kind === "APIResourceList") return discovery as APIResourceList<string>;
    return (discovery as Partial<Record<CustomVersion, APIResourceList<string>>>)[version];
  }

  /** An answer as a {@link BackendResponse} (header names lowercased). @throws BackendError `too-large` */
  #response(answer: ValuesHttpAnswer): BackendResponse {
    const body = Buffer.from(answer.body, "utf8");
    if (body.length > MAX_RESPONSE_BYTES) throw new BackendError(this.name, "too-large", `backend ${this.name} answered more than ${MAX_RESPONSE_BYTES} bytes`);
    const headers: Record<string, string> = {};
    for (const key in answer.headers) headers[key.toLowerCase()] = answer.headers[key]!;
    return { status: answer.status, headers, body };
  }

  #aborted(): BackendError {
    return new BackendError(this.name, "aborted", `the call to backend ${this.name} was cancelled: nobody waits for it`);
  }

  /** The bridge's provider instances (for tests and tools). */
  get providers(): readonly Provider[] {
    return [...this.#bridge.providers.values()];
  }

  /** Close the bridge's providers (their refresh-ahead timers and refreshes in flight), as the Node server's close() does. */
  close(): void {
    for (const provider of this.#bridge.providers.values()) {
      provider.close?.();
      this.#exported?.providers.delete(provider);
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
