/**
 * Plain Node entry point: the bridge on @hono/node-server.
 *
 *   node functions/node.ts --config bridge.yaml [--host 0.0.0.0] [--port 8080]
 *
 * Config comes from `--config FILE`, else `BRIDGE_CONFIG_FILE`, else inline
 * YAML in `BRIDGE_CONFIG`. AWS credentials follow each provider's
 * `credentials.source` (the SDK default chain unless set otherwise).
 * SIGTERM/SIGINT close the listener and let in-flight requests finish.
 */
import { serve, type ServerType } from "@hono/node-server";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { fromConfig, type Bridge } from "../shared/bridge.ts";
import { officialTransports } from "../shared/providers/gcp-monitoring/official-transports.ts";
import { loadConfig, type BridgeConfig } from "../shared/config/config.ts";
import { ConfigError } from "../shared/config/yaml.ts";
import type { LogRecord } from "../shared/app.ts";

/** A running Node server. */
export interface NodeServer {
  /** base URL, e.g. `http://127.0.0.1:8080` */
  url: string;
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
  log?: (record: LogRecord) => void;
  env?: Record<string, string | undefined>;
}

/**
 * Start the bridge on Node.
 *
 * @throws Error when the port cannot be bound
 */
export async function startNodeServer(options: NodeServerOptions): Promise<NodeServer> {
  // Node reaches Cloud Monitoring with the official client (gRPC), loaded only
  // when a gcp-monitoring provider is configured; the Worker uses REST.
  const transports = await officialTransports(options.config);
  const runtime = { env: options.env ?? process.env, now: Date.now, ...(transports !== undefined ? { transports } : {}) };
  const bridge = fromConfig(options.config, runtime, options.log ? { log: options.log } : {});
  const host = options.host ?? "127.0.0.1";
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve(
      { fetch: bridge.app.fetch, hostname: host, port: options.port ?? 8080, serverOptions: { maxHeaderSize: 64 * 1024 } },
      () => resolve(s),
    );
    s.once("error", reject);
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}`,
    bridge,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
      }),
  };
}

/** Read the config named by flags or environment. @throws ConfigError, or Error when none is given */
export function readConfigFromEnvironment(file: string | undefined): BridgeConfig {
  const path = file ?? process.env["BRIDGE_CONFIG_FILE"];
  if (path) return loadConfig(readFileSync(path, "utf8"), path, { readFile: (p) => readFileSync(p, "utf8") }).config;
  const inline = process.env["BRIDGE_CONFIG"];
  if (inline) return loadConfig(inline, "<env:BRIDGE_CONFIG>", { readFile: (p) => readFileSync(p, "utf8") }).config;
  throw new Error("no config: pass --config FILE, or set BRIDGE_CONFIG_FILE or BRIDGE_CONFIG");
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
  const { values } = parseArgs({
    options: {
      config: { type: "string", short: "c" },
      host: { type: "string", default: process.env["HOST"] ?? "127.0.0.1" },
      port: { type: "string", default: process.env["PORT"] ?? "8080" },
    },
  });
  let config: BridgeConfig;
  try {
    config = readConfigFromEnvironment(values.config);
  } catch (err) {
    console.error(err instanceof ConfigError ? `invalid config:\n${err.message}` : (err as Error).message);
    process.exit(2);
  }
  const server = await startNodeServer({ config, host: values.host, port: Number(values.port) });
  console.error(`external-metrics-bridge listening on ${server.url} (${config.metrics.length} metric rules from ${config.source})`);
  exitOnSignals(server.close);
}

if (import.meta.main) await main();
