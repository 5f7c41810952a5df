/**
 * A stand-in for Google Cloud Managed Service for Prometheus' query front
 * end: it accepts only requests under
 * `/v1/projects/{project}/location/{location}/prometheus/api/v1/` that carry
 * `Authorization: Bearer <token>` with a token the OAuth or STS fake issued
 * (`OAuthFake.issued`), and forwards them unchanged to a REAL Prometheus run
 * with `--web.route-prefix=/v1/projects/{project}/location/{location}/prometheus`
 * (`test/helpers/prometheus.ts`), so the answers are Prometheus' own.
 * Refusals are Google's error JSON (`{"error": {"code", "message",
 * "status"}}`): 401 `UNAUTHENTICATED` without a valid token, 403
 * `PERMISSION_DENIED` while {@link GmpFront.denied} is set, 404 `NOT_FOUND`
 * for another path.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** The route prefix of project `project` at `location` (what Prometheus is started with). */
export function gmpRoutePrefix(project: string, location = "global"): string {
  return `/v1/projects/${project}/location/${location}/prometheus`;
}

/** One request the front received. */
export interface GmpFrontRequest {
  method: string;
  path: string;
  /** the bearer token sent, if any */
  token: string | undefined;
  /** the principal the token was issued to, when it is valid */
  caller: string | undefined;
  /** the status answered */
  status: number;
}

/** A running front. */
export interface GmpFront {
  /** `http://127.0.0.1:PORT`: the provider's `endpoint` */
  endpoint: string;
  readonly requests: GmpFrontRequest[];
  /** when true, valid tokens are refused with 403 PERMISSION_DENIED (the principal lacks `roles/monitoring.viewer`) */
  denied: boolean;
  close(): Promise<void>;
}

/**
 * Start the front on 127.0.0.1 forwarding `prefix` (e.g.
 * `gmpRoutePrefix("test-project")`) to the Prometheus listening on
 * `prometheusOrigin` (`http://127.0.0.1:PORT`), accepting the tokens of `issued`.
 */
export async function startGmpFront(prometheusOrigin: string, prefix: string, issued: ReadonlyMap<string, string>): Promise<GmpFront> {
  const requests: GmpFrontRequest[] = [];
  const front: GmpFront = {
    endpoint: "",
    requests,
    denied: false,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const path = req.url ?? "";
      const bearer = /^Bearer (.+)$/.exec(String(req.headers["authorization"] ?? ""));
      const token = bearer?.[1];
      const caller = token !== undefined ? issued.get(token) : undefined;
      const record: GmpFrontRequest = { method: req.method ?? "", path, token, caller, status: 0 };
      requests.push(record);
      const refuse = (code: number, status: string, message: string) => {
        record.status = code;
        res.writeHead(code, { "content-type": "application/json; charset=UTF-8" });
        res.end(JSON.stringify({ error: { code, message, status } }));
      };
      if (caller === undefined) return refuse(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.");
      if (front.denied) return refuse(403, "PERMISSION_DENIED", "Permission monitoring.timeSeries.list denied (or the resource may not exist).");
      if (!path.startsWith(`${prefix}/api/v1/`)) return refuse(404, "NOT_FOUND", `no such API: ${path}`);
      try {
        const upstream = await fetch(`${prometheusOrigin}${path}`, {
          method: req.method ?? "GET",
          headers: req.headers["content-type"] ? { "content-type": String(req.headers["content-type"]) } : {},
          ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
          signal: AbortSignal.timeout(10_000),
        });
        const body = Buffer.from(await upstream.arrayBuffer());
        record.status = upstream.status;
        res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" });
        res.end(body);
      } catch (err) {
        refuse(503, "UNAVAILABLE", `upstream: ${(err as Error).message}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  front.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return front;
}
