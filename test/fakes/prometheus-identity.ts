/**
 * A Prometheus query API stand-in on 127.0.0.1 that answers each caller
 * with its own data, for the per-namespace identity suites (AMP behind
 * SigV4, Managed Prometheus behind Google tokens): `POST {path}` with a
 * form `query`, the caller named by `whoIs` (e.g. the role whose issued
 * keys signed it, the service account whose token it carries). A caller
 * `whoIs` does not know gets `refusal`; a known one one vector sample
 * `{queue="jobs"}` of value `valueOf(caller)` (a `timestamp(…)` query: 5 s ago).
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { closeServer } from "../helpers/http.ts";

/** A running stand-in. */
export interface PrometheusIdentityStandIn {
  /** `http://127.0.0.1:PORT` */
  endpoint: string;
  /** the caller of every query, in order (undefined: refused) */
  readonly callers: (string | undefined)[];
  close(): Promise<void>;
}

/**
 * @param path the query API path, e.g. `/workspaces/WS/api/v1/query`
 * @param whoIs the caller of a request (its body given), undefined when it is refused
 * @param refusal status, headers and JSON body of a refusal
 */
export async function startPrometheusIdentityStandIn(options: {
  path: string;
  whoIs: (req: IncomingMessage, body: string) => Promise<string | undefined> | string | undefined;
  valueOf: (caller: string) => string;
  refusal: { status: number; headers?: Record<string, string>; body: unknown };
}): Promise<PrometheusIdentityStandIn> {
  const callers: (string | undefined)[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const caller = await options.whoIs(req, body);
      callers.push(caller);
      if (caller === undefined || req.url !== options.path) {
        res.writeHead(options.refusal.status, { "content-type": "application/json", ...options.refusal.headers });
        return res.end(JSON.stringify(options.refusal.body));
      }
      const query = new URLSearchParams(body).get("query") ?? "";
      const now = Date.now() / 1000;
      const value = query.includes("timestamp(") ? String(now - 5) : options.valueOf(caller);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: "success", data: { resultType: "vector", result: [{ metric: { queue: "jobs" }, value: [now, value] }] } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, callers, close: () => closeServer(server) };
}
