/** The custom.metrics.k8s.io routes (test/runtimes/custom-contract.ts) against the plain Node server (functions/node.ts) over real HTTP on 127.0.0.1. */
import { startNodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { customMetricsContract } from "./custom-contract.ts";

customMetricsContract("Node (@hono/node-server)", async (text, env) => {
  const lines: string[] = [];
  const server = await startNodeServer({ config: loadConfig(text, "custom.yaml").config, port: 0, env, log: (record) => void lines.push(JSON.stringify(record)) });
  return {
    origin: server.url,
    request: (path, init) => fetch(`${server.url}${path}`, init),
    logs: () => lines.join("\n"),
    close: () => server.close(),
  };
});
