/**
 * Connection and time limits of the project's Node HTTP(S) listeners: the
 * bridge's Node server (functions/node.ts), the proxy's API listener
 * (shared/proxy/server.ts) and its admission webhook listener
 * (shared/proxy/admission/admission-server.ts).
 *
 * Node's own settings (https://nodejs.org/api/http.html#class-httpserver):
 * `headersTimeout` (request line and headers), `requestTimeout` (the whole
 * request, body included), `keepAliveTimeout` (idle between requests on a
 * kept-alive connection), `maxConnections` (net.Server: connections past it
 * are closed at once, the server emits `drop`), and
 * `connectionsCheckingInterval` (how often the header and request deadlines
 * are checked; Node's default is 30 s, so a 10 s deadline could hold for
 * 40 s — here 1 s), plus TLS's `handshakeTimeout` (default 120 s).
 *
 * What Node does not bound: a connection that sends no byte at all. Its
 * parser never starts a message, so the header deadline never applies
 * (measured on Node 24: a silent TCP connection to a server with
 * `headersTimeout: 2000` and a 500 ms check interval was still open after
 * 8 s). {@link applyServerLimits} closes a connection that has not completed
 * a request's headers within `headersTimeoutMs` of being accepted (after the
 * TLS handshake for HTTPS), and keeps a socket inactivity bound of
 * `requestTimeoutMs` while a request is served (Node's `server.timeout`,
 * which Node restores after each keep-alive wait).
 */
import type { Server as HttpServer, ServerOptions } from "node:http";
import type { Server as HttpsServer } from "node:https";
import type { Socket } from "node:net";

/** The limits of one listener; every field is required (see the defaults below). */
export interface ServerLimits {
  /** longest wait for a request's line and headers, ms (also a new connection's silence, and the TLS handshake) */
  headersTimeoutMs: number;
  /** longest wait for a whole request, body included, ms; also the socket inactivity bound while a request is served */
  requestTimeoutMs: number;
  /** how long a kept-alive connection may stay idle between requests, ms (Node waits 1 s more than it advertises in `Keep-Alive: timeout=`) */
  keepAliveTimeoutMs: number;
  /** most open connections; the next one is closed at once */
  maxConnections: number;
  /** how often Node checks the header and request deadlines, ms */
  connectionsCheckingIntervalMs: number;
}

/**
 * Idle timeout of Go's `http.DefaultTransport` (`IdleConnTimeout: 90 *
 * time.Second`, net/http transport.go), which client-go and kube-aggregator's
 * proxy transport inherit (k8s.io/apimachinery `pkg/util/net/http.go`
 * `SetOldTransportDefaults`); kube-apiserver's own listener uses the same
 * (`IdleTimeout: 90 * time.Second`, k8s.io/apiserver
 * `pkg/server/secure_serving.go`).
 */
export const GO_TRANSPORT_IDLE_TIMEOUT_MS = 90_000;

/**
 * The proxy's API listener: the aggregator (kube-apiserver), kubelet probes,
 * Prometheus and direct readers. Keep-alive 95 s: longer than the aggregator's
 * 90 s idle timeout ({@link GO_TRANSPORT_IDLE_TIMEOUT_MS}), so the client
 * always drops an idle connection first and never sends a request on one the
 * proxy is closing. Headers 10 s; a request 30 s (a read takes at most
 * TokenReview 2 s + SubjectAccessReview 2 s + backend 4.5 s); 512
 * connections (several kube-apiservers with client-go's 25 idle connections
 * per host each, probes and scrapes, with room; each idle TLS connection costs
 * tens of KiB of the pod's 256 MiB).
 */
export const PROXY_LIMITS: Readonly<ServerLimits> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 95_000,
  maxConnections: 512,
  connectionsCheckingIntervalMs: 1_000,
};

/**
 * The bridge's Node server (plain HTTP; its client is the proxy, whose Node
 * agent honours the `Keep-Alive: timeout=` the server advertises, or a load
 * balancer). Keep-alive 65 s: longer than the common load balancers' 60 s
 * idle timeout (AWS ALB's default), so the balancer closes first. Headers
 * 10 s; a request 30 s (the bridge answers within its 3 s deadline); 1024
 * connections.
 */
export const BRIDGE_LIMITS: Readonly<ServerLimits> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 65_000,
  maxConnections: 1024,
  connectionsCheckingIntervalMs: 1_000,
};

/**
 * The `http.createServer`/`https.createServer` options of `limits`
 * (`connectionsCheckingInterval` can only be given at creation).
 *
 * @throws RangeError from {@link checkLimits}
 */
export function serverOptions(limits: ServerLimits): Pick<ServerOptions, "headersTimeout" | "requestTimeout" | "keepAliveTimeout" | "connectionsCheckingInterval"> {
  checkLimits(limits);
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
  };
}

/**
 * Apply `limits` to a created server: the timeouts (again, for a server
 * created without {@link serverOptions}), `maxConnections`, and the bound on
 * a connection that sends nothing (see the module comment).
 *
 * @param reportDrops called at most once per 10 s while connections are
 *   refused for `maxConnections`, with how many were refused since the last call
 * @throws RangeError when a limit is not a positive number (an integer for `maxConnections`)
 */
export function applyServerLimits(server: HttpServer | HttpsServer, limits: ServerLimits, reportDrops?: (dropped: number) => void): void {
  checkLimits(limits);
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxConnections = limits.maxConnections;
  // Socket inactivity while a request is served; Node sets it on each new
  // connection and restores it after each keep-alive wait (node:_http_server).
  server.timeout = limits.requestTimeoutMs;
  // The HTTP parser is attached on `connection` (HTTP) or `secureConnection`
  // (HTTPS, after the handshake): until the first request's headers are in,
  // the socket may stay silent at most headersTimeoutMs.
  const event = "setSecureContext" in server ? "secureConnection" : "connection";
  server.on(event, (socket: Socket) => {
    socket.setTimeout(limits.headersTimeoutMs);
  });
  server.on("request", (req: { socket: Socket }) => {
    req.socket.setTimeout(limits.requestTimeoutMs);
  });
  if (reportDrops !== undefined) {
    let dropped = 0;
    let reportedAt = 0;
    server.on("drop", () => {
      dropped++;
      const now = Date.now();
      if (now - reportedAt < 10_000) return;
      reportedAt = now;
      reportDrops(dropped);
      dropped = 0;
    });
  }
}

/**
 * Check limits before a server is made with them.
 *
 * @throws RangeError naming the first limit that is not a positive number
 *   (an integer for `maxConnections`), or when `headersTimeoutMs` is longer
 *   than `requestTimeoutMs` (Node refuses that: node:_http_server)
 */
export function checkLimits(limits: ServerLimits): void {
  for (const [name, value] of Object.entries(limits) as [keyof ServerLimits, number][]) {
    if (!Number.isFinite(value) || value <= 0 || (name === "maxConnections" && !Number.isInteger(value))) {
      throw new RangeError(`server limit ${name} must be a positive ${name === "maxConnections" ? "integer" : "number of ms"}, got ${value}`);
    }
  }
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new RangeError(`the headers timeout (${limits.headersTimeoutMs} ms) must not be longer than the request timeout (${limits.requestTimeoutMs} ms)`);
  }
}
