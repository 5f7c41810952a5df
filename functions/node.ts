/**
 * Plain Node entry point: the bridge on @hono/node-server.
 *
 *   node functions/node.ts --config bridge.yaml [--host 0.0.0.0] [--port 8080] [--insecure-allow-unsigned]
 *   npm run serve -- --help
 *
 * Config comes from `--config FILE` (relative to the directory `npm run`
 * was typed in, `./script-args.ts` callerPath), else `BRIDGE_CONFIG_FILE`,
 * else inline YAML in `BRIDGE_CONFIG`. Arguments are parsed by commander;
 * a taken port is one line naming it and `--port`/`PORT`, exit 1.
 *
 * Request signing (`shared/signing.ts`) is required: without
 * `BRIDGE_SIGNING_KEYS` the server refuses to start (exit 2, naming both
 * settings) unless the operator sets `BRIDGE_INSECURE_ALLOW_UNSIGNED=true`
 * or passes `--insecure-allow-unsigned`, which logs a warning on every
 * start. Behind a load balancer or TLS terminator set `BRIDGE_AUDIENCE` to
 * the origin the proxy addresses (e.g. `https://bridge.example.com`): the
 * URL Node sees is built from the `Host` header. Malformed keys, skew or
 * audience also stop the start (exit 2). AWS credentials follow each provider's
 * `credentials.source` (the SDK default chain unless set otherwise).
 * SIGTERM/SIGINT close the listener and let in-flight requests finish.
 *
 * custom.metrics.k8s.io: with custom rules in the config the server also
 * serves that group's discovery and its reads, a `POST` whose JSON body
 * (the pods or the object, at most 256 KiB, read before the signature is
 * checked so the `EMB-HMAC-SHA256-3` signature covers it) the in-cluster
 * proxy sends (shared/app.ts); a custom read's audit record is one line too.
 *
 * Observability (docs/deploy.md "Metrics" and "Logs"): the request log is
 * one JSON line per request on stdout — a values read's audit record
 * (caller, namespace, metric, selector, decision, provider, code, error
 * kind and text, latency) — at `--log-level`/`LOG_LEVEL` and above (default
 * info; probes are debug). Prometheus metrics (`emb_bridge_*`,
 * `shared/observability/prometheus.ts`) are served at `/metrics` on a
 * separate listener, `--metrics-port`/`METRICS_PORT` (off unless set) on
 * `--metrics-host`/`METRICS_HOST` (default 127.0.0.1): the API port never
 * answers `/metrics`, so a bridge reachable from outside does not publish
 * them; bind the metrics listener to the pod IP (`0.0.0.0` in a pod) for
 * Prometheus to scrape it.
 *
 * Server limits (`shared/http-limits.ts` `BRIDGE_LIMITS`, docs/deploy.md
 * "Node server limits"): headers within 10 s (also a new connection's
 * silence), a whole request within 30 s, keep-alive connections idle at most
 * 65 s, at most 1024 connections (more are closed at once), deadlines checked
 * every second; `--headers-timeout-seconds`, `--request-timeout-seconds`,
 * `--keep-alive-timeout-seconds`, `--max-connections` (or their environment
 * variables) change them.
 */
import { serve, type ServerType } from "@hono/node-server";
import { createServer, type Server } from "node:http";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import type { Bridge } from "../shared/bridge.ts";
import { bootstrap, StartRefusedError } from "../shared/bootstrap.ts";
import { officialTransports } from "../shared/providers/gcp-monitoring/official-transports.ts";
import { loadConfig, type BridgeConfig } from "../shared/config/config.ts";
import { ConfigError } from "../shared/config/yaml.ts";
import type { LogRecord } from "../shared/observability/log.ts";
import { batchedJsonLog } from "./node-log.ts";
import { BridgeMetrics } from "../shared/observability/metrics.ts";
import { nodeSharedTier } from "../shared/cache/runtime-tier.ts";
import type { RuntimeEnv } from "../shared/providers/types.ts";
import { LOG_LEVEL_ENV, parseLevel, type Level } from "../shared/observability/log.ts";
import { bridgeRegistry } from "../shared/observability/prometheus.ts";
import { callerPath, listenFailure, nodeTooOld, nodeTooOldMessage, parseOrExit, portParser } from "./script-args.ts";
import { applyServerLimits, BRIDGE_LIMITS, checkLimits, serverOptions, type ServerLimits } from "../shared/http-limits.ts";

export { StartRefusedError };

/** The Node server's flag that serves unsigned requests on purpose (as `BRIDGE_INSECURE_ALLOW_UNSIGNED=true`). */
export const INSECURE_ALLOW_UNSIGNED_FLAG = "--insecure-allow-unsigned";

/** A running Node server. */
export interface NodeServer {
  /** base URL, e.g. `http://127.0.0.1:8080` */
  url: string;
  /** the metrics listener's base URL (`…/metrics`), when `metricsPort` was given */
  metricsUrl?: string;
  bridge: Bridge;
  server: ServerType;
  /** stop accepting connections and wait for in-flight requests */
  close(): Promise<void>;
}

/** Options of {@link startNodeServer}. */
export interface NodeServerOptions {
  config: BridgeConfig;
  host?: string;
  /** TCP port; 0 picks a free one */
  port?: number;
  /** request log and start-up notices; default: request log as JSON lines on stdout (batched, `./node-log.ts`), notices as JSON lines on stderr */
  log?: (record: LogRecord) => void;
  /** environment (`BRIDGE_SIGNING_KEYS`, `BRIDGE_AUDIENCE`, …); default `process.env` */
  env?: Record<string, string | undefined>;
  /** serve unsigned requests without keys (the `--insecure-allow-unsigned` flag); logs a warning */
  insecureAllowUnsigned?: boolean;
  /** serve Prometheus `/metrics` on this TCP port (0 picks a free one); absent: no metrics listener */
  metricsPort?: number;
  /** address of the metrics listener (default 127.0.0.1: reachable from the pod/host only) */
  metricsHost?: string;
  /** lowest level of the request log (default: `LOG_LEVEL` of `env`, else info); ignored when `log` is given */
  logLevel?: Level;
  /** overrides of the API listener's limits (`BRIDGE_LIMITS` of shared/http-limits.ts: ms and connections) */
  limits?: Partial<ServerLimits>;
}

/**
 * Start the bridge on Node (`shared/bootstrap.ts` {@link bootstrap}: the
 * signing check, then the build). Logs the start-up notices (insecure mode,
 * then the policy defaults) on every start.
 *
 * @throws StartRefusedError when `BRIDGE_SIGNING_KEYS` is empty or missing
 *   and neither `BRIDGE_INSECURE_ALLOW_UNSIGNED=true` nor
 *   `insecureAllowUnsigned` allows that, or a signing setting is malformed
 * @throws Error when the port cannot be bound; RangeError when a limit is not positive
 */
export async function startNodeServer(options: NodeServerOptions): Promise<NodeServer> {
  const env = options.env ?? process.env;
  const limits: ServerLimits = { ...BRIDGE_LIMITS, ...options.limits };
  checkLimits(limits);
  const metrics = new BridgeMetrics();
  const runtime: RuntimeEnv = { env, now: Date.now, metrics, longLived: true };
  // a provider's `sharedCache: {type: dynamodb}` (issue 28): its DynamoDB tier, loaded on its first read; `durableObject` is refused at load
  runtime.sharedTier = nodeSharedTier(runtime);
  // Only the configured providers' modules are loaded (shared/bootstrap.ts, shared/bridge.ts loadBridge);
  // Node reaches Cloud Monitoring with the official client (gRPC), loaded only when a gcp-monitoring
  // provider is configured; the Worker uses REST.
  const { bridge, notices } = await bootstrap({
    runtime,
    config: options.config,
    signing: { refuse: true, insecureAllowUnsigned: options.insecureAllowUnsigned, flag: INSECURE_ALLOW_UNSIGNED_FLAG },
    // The request log: the app's JSON lines on stdout, batched per event-loop turn (./node-log.ts).
    log: () => {
      const level = options.logLevel ?? parseLevel(env[LOG_LEVEL_ENV]);
      return options.log ?? batchedJsonLog(runtime.now, level);
    },
    transports: officialTransports,
  });
  const notice = options.log ?? ((r: LogRecord) => console.error(JSON.stringify({ time: new Date().toISOString(), ...r })));
  for (const record of notices) notice(record);
  const host = options.host ?? "127.0.0.1";
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve(
      { fetch: bridge.app.fetch, hostname: host, port: options.port ?? 8080, serverOptions: { maxHeaderSize: 64 * 1024, ...serverOptions(limits) } },
      () => resolve(s),
    );
    s.once("error", reject);
    applyServerLimits(s as Server, limits, (dropped) =>
      notice({ level: "warn", msg: `at its ${limits.maxConnections} connections: ${dropped} refused in the last 10 s (--max-connections)` }),
    );
  });
  let metricsServer: Server | undefined;
  if (options.metricsPort !== undefined) {
    const registry = bridgeRegistry(metrics, () => bridge.providers.values(), runtime.now);
    try {
      metricsServer = await listenMetrics(registry, options.metricsHost ?? "127.0.0.1", options.metricsPort);
    } catch (err) {
      server.close();
      throw err;
    }
  }
  const url = (s: { address(): unknown }) => {
    const address = s.address() as AddressInfo;
    return `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`;
  };
  return {
    url: url(server),
    ...(metricsServer !== undefined ? { metricsUrl: url(metricsServer) } : {}),
    bridge,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        // background work of providers (CloudWatch refresh-ahead: its timer and refreshes in flight)
        for (const provider of bridge.providers.values()) provider.close?.();
        metricsServer?.close();
        metricsServer?.closeIdleConnections();
        server.close((err) => (err ? reject(err) : resolve()));
        (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
      }),
  };
}

/**
 * The metrics listener: `GET /metrics` answers the registry in Prometheus
 * text format (version 0.0.4), anything else 404.
 *
 * @throws Error when the port cannot be bound
 */
function listenMetrics(registry: ReturnType<typeof bridgeRegistry>, host: string, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not found; metrics are at /metrics\n");
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "Content-Type": registry.contentType }).end(req.method === "HEAD" ? undefined : text),
      (err: unknown) => res.writeHead(500, { "Content-Type": "text/plain" }).end(`metrics failed: ${(err as Error).message}\n`),
    );
  });
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}

/** Read the config named by flags or environment. @throws ConfigError, or Error when none is given */
export function readConfigFromEnvironment(file: string | undefined): BridgeConfig {
  const path = file ?? process.env["BRIDGE_CONFIG_FILE"];
  if (path) return loadConfig(readFileSync(path, "utf8"), path, { readFile: (p) => readFileSync(p, "utf8") }).config;
  const inline = process.env["BRIDGE_CONFIG"];
  if (inline) return loadConfig(inline, "<env:BRIDGE_CONFIG>", { readFile: (p) => readFileSync(p, "utf8") }).config;
  throw new Error("no config: pass --config FILE, or set BRIDGE_CONFIG_FILE or BRIDGE_CONFIG");
}

/** A commander argument parser of a positive number (an integer with `integer`). */
function positive(InvalidArgumentError: new (message: string) => Error, integer = false): (text: string) => number {
  return (text) => {
    const n = Number(text);
    if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) throw new InvalidArgumentError(`not a positive ${integer ? "integer" : "number"}: ${text}`);
    return n;
  };
}

/** Close `server` on SIGTERM/SIGINT, then exit. */
export function exitOnSignals(close: () => Promise<void>): void {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  }
}

async function main(): Promise<void> {
  const { Command, InvalidArgumentError, Option } = await import("commander");
  const program = new Command("npm run serve --")
    .description("The bridge on Node: the External Metrics API over plain HTTP (the in-cluster proxy signs and forwards to it).")
    .option("-c, --config <file>", "the bridge config (YAML); else BRIDGE_CONFIG_FILE, else inline YAML in BRIDGE_CONFIG. A relative path is resolved against the directory npm was run from")
    .addOption(new Option("--host <address>", "address to listen on").env("HOST").default("127.0.0.1"))
    .addOption(new Option("--port <port>", "TCP port (0 picks a free one)").env("PORT").default(8080).argParser(portParser(InvalidArgumentError)))
    .option(INSECURE_ALLOW_UNSIGNED_FLAG, "serve unsigned requests without BRIDGE_SIGNING_KEYS (as BRIDGE_INSECURE_ALLOW_UNSIGNED=true); warns on every start")
    .addOption(new Option("--metrics-port <port>", "serve Prometheus /metrics on this port, a listener of its own (off unless set)").env("METRICS_PORT").argParser(portParser(InvalidArgumentError)))
    .addOption(new Option("--metrics-host <address>", "address of the metrics listener (0.0.0.0 or the pod IP for Prometheus in a cluster)").env("METRICS_HOST").default("127.0.0.1"))
    .addOption(
      new Option("--max-connections <n>", "most open connections on --port; more are closed at once").env("MAX_CONNECTIONS").default(BRIDGE_LIMITS.maxConnections).argParser(positive(InvalidArgumentError, true)),
    )
    .addOption(
      new Option("--headers-timeout-seconds <s>", "longest wait for a request's headers (also a new connection's silence)")
        .env("HEADERS_TIMEOUT_SECONDS")
        .default(BRIDGE_LIMITS.headersTimeoutMs / 1000)
        .argParser(positive(InvalidArgumentError)),
    )
    .addOption(
      new Option("--request-timeout-seconds <s>", "longest wait for a whole request").env("REQUEST_TIMEOUT_SECONDS").default(BRIDGE_LIMITS.requestTimeoutMs / 1000).argParser(positive(InvalidArgumentError)),
    )
    .addOption(
      new Option("--keep-alive-timeout-seconds <s>", "how long an idle keep-alive connection is kept (longer than a load balancer's idle timeout in front)")
        .env("KEEP_ALIVE_TIMEOUT_SECONDS")
        .default(BRIDGE_LIMITS.keepAliveTimeoutMs / 1000)
        .argParser(positive(InvalidArgumentError)),
    )
    .addOption(
      new Option("--log-level <level>", "lowest level logged: debug, info, warn, error (probes are debug)")
        .env(LOG_LEVEL_ENV)
        .default("info")
        .argParser((v: string) => {
          try {
            return parseLevel(v);
          } catch (err) {
            throw new InvalidArgumentError((err as Error).message);
          }
        }),
    )
    .addHelpText(
      "after",
      `
Environment: BRIDGE_SIGNING_KEYS (required unless insecure), BRIDGE_AUDIENCE, BRIDGE_SIGNING_MAX_SKEW_SECONDS,
BRIDGE_CONFIG_FILE / BRIDGE_CONFIG, and each provider's credentials (docs/deploy.md).
Exit codes: 2 the config or the signing settings are invalid, or bad arguments; 1 the port cannot be bound.`,
    );
  parseOrExit(program);
  const values = program.opts<{
    config?: string;
    host: string;
    port: number;
    insecureAllowUnsigned?: boolean;
    metricsPort?: number;
    metricsHost: string;
    logLevel: Level;
    maxConnections: number;
    headersTimeoutSeconds: number;
    requestTimeoutSeconds: number;
    keepAliveTimeoutSeconds: number;
  }>();
  let config: BridgeConfig;
  try {
    config = readConfigFromEnvironment(values.config === undefined ? undefined : callerPath(values.config));
  } catch (err) {
    console.error(err instanceof ConfigError ? `invalid config:\n${err.message}` : (err as Error).message);
    process.exit(2);
  }
  let server: NodeServer;
  try {
    server = await startNodeServer({
      config,
      host: values.host,
      port: values.port,
      insecureAllowUnsigned: values.insecureAllowUnsigned === true,
      metricsHost: values.metricsHost,
      logLevel: parseLevel(values.logLevel),
      limits: {
        maxConnections: Number(values.maxConnections),
        headersTimeoutMs: Number(values.headersTimeoutSeconds) * 1000,
        requestTimeoutMs: Number(values.requestTimeoutSeconds) * 1000,
        keepAliveTimeoutMs: Number(values.keepAliveTimeoutSeconds) * 1000,
      },
      ...(values.metricsPort !== undefined ? { metricsPort: values.metricsPort } : {}),
    });
  } catch (err) {
    const busy = listenFailure(err, values.port, "the bridge", `--port ${values.port === 8080 ? 8081 : values.port + 1} or PORT=${values.port === 8080 ? 8081 : values.port + 1}`);
    if (busy !== undefined) {
      console.error(`external-metrics-bridge cannot start: ${busy}`);
      process.exit(1);
    }
    if (err instanceof RangeError) {
      console.error(`external-metrics-bridge cannot start: ${err.message}`);
      process.exit(2);
    }
    if (!(err instanceof StartRefusedError)) throw err;
    console.error(`external-metrics-bridge refuses to start: ${err.message}`);
    process.exit(2);
  }
  console.error(
    `external-metrics-bridge listening on ${server.url} (${config.metrics.length + config.customMetrics.length} metric rules from ${config.source})` +
      (server.metricsUrl !== undefined ? `; metrics at ${server.metricsUrl}/metrics` : ""),
  );
  exitOnSignals(server.close);
}

// On a Node without import.meta.main (older than 24.2/22.18) it is undefined, not false: refuse there rather than exit 0 silently.
if (import.meta.main) await main();
else if (import.meta.main === undefined && nodeTooOld()) {
  console.error(nodeTooOldMessage("external-metrics-bridge"));
  process.exit(2);
}
