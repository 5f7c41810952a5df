/** The HTTP contract against the plain Node server (functions/node.ts) over real HTTP on 127.0.0.1. */
import { startNodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { externalMetricsContract } from "../helpers/contract.ts";

externalMetricsContract("Node (@hono/node-server)", async (text) => {
  const server = await startNodeServer({ config: loadConfig(text, "contract.yaml").config, port: 0, log: () => {}, insecureAllowUnsigned: true });
  return {
    request: (path, init) => fetch(`${server.url}${path}`, init),
    close: () => server.close(),
  };
});
