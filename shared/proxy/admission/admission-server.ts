/**
 * The admission webhook's own HTTPS listener (ProxyConfig `admission`,
 * `--admission-port`, default {@link DEFAULT_ADMISSION_PORT}): the two
 * AdmissionReview paths of shared/proxy/admission/admission.ts and nothing else. The
 * proxy's API listener (server.ts) does not serve them.
 *
 * | path | answer |
 * |---|---|
 * | `POST /admission/hpa`, `POST /admission/policies` | an AdmissionReview (admission.ts) |
 * | the same paths, another method | 405 Status |
 * | anything else | 404 Status |
 *
 * Why a listener of its own: the webhook is called by kube-apiserver, with
 * `failurePolicy: Ignore`, so anything that keeps it from answering switches
 * policy checks off. On the API listener any pod could hold its slots with
 * slow uploads, and its answers (which describe cluster policies) were served
 * before authentication. Here:
 *
 * - Limits of its own ({@link ADMISSION_LIMITS}, shared/http-limits.ts):
 *   connections (in all and per remote address), header and request
 *   deadlines checked every second, and a
 *   **body deadline**: a body not received within `bodyDeadlineMs` of its
 *   headers is answered 408 (a Status, `reason: Timeout`) and the connection
 *   closed. Bodies are read here, bounded by
 *   {@link MAX_ADMISSION_BODY_BYTES} each (413) and by `maxBufferedBytes`
 *   for all reads in progress together (429), so a slow upload holds no
 *   review slot: it holds a connection for at most the body deadline.
 * - Client-certificate authentication of kube-apiserver (ProxyConfig
 *   `admission.clientCA`, a PEM CA bundle file): the TLS handshake requests a
 *   client certificate and refuses one that does not verify against that
 *   bundle, or none (Node's TLS: `requestCert`, `rejectUnauthorized`, `ca`).
 *   kube-apiserver presents one only when its `--admission-control-config-file`
 *   names a kubeconfig for the webhook's service DNS name
 *   (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#authenticate-apiservers;
 *   docs/proxy.md "Admission webhook"). Without `clientCA` anyone who can
 *   reach the port gets reviews; the webhook is then told the caller is not
 *   authenticated and its answers name at most a policy and a rule index.
 *
 * Every request is logged (`msg: "admission request"`: path, code,
 * durationMs, authenticated, client certificate subject) and counted in
 * `emb_proxy_requests_total{kind="admission"}`.
 */
import https from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { readFileSync } from "node:fs";
import type { TLSSocket } from "node:tls";
import { StatusError, toStatusError, tooManyRequests, requestEntityTooLarge, notFound } from "../../k8s/status.ts";
import { applyServerLimits, GO_TRANSPORT_IDLE_TIMEOUT_MS, serverOptions, type ServerLimits } from "../../http-limits.ts";
import { requestIdFrom } from "../../request-id.ts";
import { ADMISSION_PATHS, MAX_ADMISSION_BODY_BYTES, type AdmissionAnswer, type AdmissionCaller, type AdmissionPath } from "./admission.ts";
import type { Logger } from "../log.ts";
import type { ProxyMetrics } from "../metrics.ts";
import { certificatesFromPem } from "../tls/pem.ts";
import type { ServingMaterial } from "../tls/serving-material.ts";

/** The webhook's port when `--admission-port` is not given. */
export const DEFAULT_ADMISSION_PORT = 8443;

/** The admission listener's limits: a listener's ({@link ServerLimits}) plus the body deadline and the bytes buffered at once. */
export interface AdmissionLimits extends ServerLimits {
  /** longest wait for a request's body once its headers are in, ms; past it: 408 and the connection closed */
  bodyDeadlineMs: number;
  /** most bytes of bodies being read at once, all requests together; a read that would pass it: 429 */
  maxBufferedBytes: number;
  /** most connections from one remote address; the next one from it is closed at once */
  maxConnectionsPerAddress: number;
}

/**
 * Defaults of the admission listener. kube-apiserver sends a review at once
 * and waits at most the webhook's `timeoutSeconds` (3 s in the chart), so:
 * headers within 3 s, the body within 2 s of them, the whole request within
 * 5 s (Node's own deadline, behind the body deadline), checked every second.
 * Keep-alive 95 s: longer than kube-apiserver's 90 s idle timeout
 * ({@link GO_TRANSPORT_IDLE_TIMEOUT_MS}): Go does not retry a POST on a
 * connection the server closed while it was sending, so the webhook must
 * never be the one to close first. 128 connections, at most 32 from one
 * address (one pod cannot take every slot; a kube-apiserver opens a few);
 * 16 MiB of bodies at once (five reviews of the largest size kube-apiserver
 * sends).
 */
export const ADMISSION_LIMITS: Readonly<AdmissionLimits> = {
  headersTimeoutMs: 3_000,
  requestTimeoutMs: 5_000,
  keepAliveTimeoutMs: GO_TRANSPORT_IDLE_TIMEOUT_MS + 5_000,
  maxConnections: 128,
  connectionsCheckingIntervalMs: 1_000,
  bodyDeadlineMs: 2_000,
  maxBufferedBytes: 16 * 1024 * 1024,
  maxConnectionsPerAddress: 32,
};

/** What the listener calls: the webhook of admission.ts. */
export interface AdmissionService {
  serve(path: AdmissionPath, request: Request, caller: AdmissionCaller): Promise<AdmissionAnswer>;
}

/** Options of {@link startAdmissionServer}. */
export interface AdmissionServerOptions {
  webhook: AdmissionService;
  /** the serving certificate (the proxy's: the webhook configuration's caBundle is the APIService's) */
  serving: ServingMaterial;
  /** PEM CA bundle that kube-apiserver's client certificate must verify against ({@link readClientCA}); undefined: no client authentication */
  clientCAPem?: string;
  host?: string;
  /** TCP port (default {@link DEFAULT_ADMISSION_PORT}; 0 picks a free one) */
  port?: number;
  /** overrides of {@link ADMISSION_LIMITS} */
  limits?: Partial<AdmissionLimits>;
  log: Logger;
  metrics?: Pick<ProxyMetrics, "requests" | "requestDuration">;
}

/** A running admission listener. */
export interface AdmissionServer {
  /** `https://127.0.0.1:PORT` */
  url: string;
  port: number;
  /** whether callers must present a client certificate that verifies against the client CA */
  authenticating: boolean;
  /** serve a new certificate (rotation); the client CA stays */
  setServing(serving: ServingMaterial): void;
  /** stop accepting, close idle connections, cut the others after `drainMs` (default 5 000) */
  close(drainMs?: number): Promise<void>;
}

/**
 * Read and check the client CA bundle of ProxyConfig `admission.clientCA`.
 *
 * @returns the PEM text (every certificate block of the file)
 * @throws Error naming the file when it cannot be read, holds no
 *   certificate, a certificate does not parse, or none is a CA
 *   (basicConstraints cA, Node's X509Certificate `ca`)
 */
export function readClientCA(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new Error(`admission.clientCA ${file} cannot be read: ${(err as Error).message}`);
  }
  let certs;
  try {
    certs = certificatesFromPem(text);
  } catch (err) {
    throw new Error(`admission.clientCA ${file}: a certificate does not parse: ${(err as Error).message}`);
  }
  if (certs.length === 0) throw new Error(`admission.clientCA ${file} holds no PEM certificate (expected the CA that signs kube-apiserver's client certificate)`);
  if (!certs.some((c) => c.ca)) throw new Error(`admission.clientCA ${file} holds no CA certificate (basicConstraints cA); give the CA that signs kube-apiserver's client certificate`);
  return certs.map((c) => c.toString().trim()).join("\n") + "\n";
}

/**
 * Start the admission listener.
 *
 * @throws RangeError when a limit is not positive; Error when the port cannot be bound
 */
export async function startAdmissionServer(options: AdmissionServerOptions): Promise<AdmissionServer> {
  const limits: AdmissionLimits = { ...ADMISSION_LIMITS, ...options.limits };
  const { log, metrics, webhook } = options;
  const clientCA = options.clientCAPem;
  const paths = new Map<string, AdmissionPath>(Object.entries(ADMISSION_PATHS).map(([name, path]) => [path, name as AdmissionPath]));
  let buffered = 0; // bytes of bodies being read, all requests together

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const started = performance.now();
    const requestId = requestIdFrom(headerText(req.headers["x-request-id"] ?? req.headers["audit-id"]));
    const socket = req.socket as TLSSocket;
    // With a client CA the handshake refused every other caller (rejectUnauthorized): this one verified.
    const authenticated = clientCA !== undefined && socket.authorized === true;
    const path = (req.url ?? "").split("?")[0] ?? "";
    let code = 500;
    let error: string | undefined;
    let bytes = 0;
    let reserved = 0; // bytes of this request counted in `buffered`, given back once it is answered
    try {
      const name = paths.get(path);
      if (name === undefined) throw notFound(`the admission webhook serves only POST ${Object.values(ADMISSION_PATHS).join(" and ")} (${req.method} ${path})`);
      if (req.method !== "POST") throw new StatusError(405, `method ${req.method} is not allowed; the admission webhook takes POST`);
      const body = await readBody(req, limits.bodyDeadlineMs, (n) => {
        if (buffered + n > limits.maxBufferedBytes) return false;
        buffered += n;
        reserved += n;
        return true;
      });
      bytes = body.byteLength;
      const request = new Request(`https://admission.invalid${path}`, {
        method: "POST",
        headers: { "Content-Type": headerText(req.headers["content-type"]) ?? "application/json" },
        body: new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset, body.byteLength),
      });
      // Unauthenticated callers learn at most a policy's name and rule index (admission.ts, disclosure).
      const answer = await webhook.serve(name, request, { authenticated });
      code = answer.status;
      write(res, answer.status, answer.body, requestId);
    } catch (err) {
      if (err instanceof BodyTimeout) {
        code = 408;
        error = err.message;
        // metav1.Status has no reason for 408; `Timeout` is the apimachinery reason for a request that took too long.
        const body = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: err.message, reason: "Timeout", code: 408 };
        write(res, 408, JSON.stringify(body), requestId, true);
      } else if (err instanceof ClientClosed) {
        code = 499; // nobody to answer (the "client closed request" code of the logs and metrics only)
        error = err.message;
      } else {
        const status = toStatusError(err);
        code = status.code;
        error = status.message;
        if (!(err instanceof StatusError)) log({ level: "error", msg: "admission request failed", requestId, error: String(err) });
        // A body not read to its end (413, 429, a refused path) leaves the connection unusable: close it.
        write(res, status.code, JSON.stringify(status.toStatus()), requestId, !req.complete, status.headers());
      }
    } finally {
      buffered -= reserved;
    }
    const seconds = (performance.now() - started) / 1000;
    metrics?.requests.labels({ code: String(code), kind: "admission", metric: "" }).inc();
    metrics?.requestDuration.labels({ kind: "admission" }).observe(seconds);
    const subject = authenticated ? socket.getPeerCertificate()?.subject?.CN : undefined;
    log({
      level: code >= 500 ? "error" : code >= 400 ? "warn" : "info",
      msg: "admission request",
      requestId,
      method: req.method,
      path,
      code,
      durationMs: Math.round(seconds * 1000 * 10) / 10,
      authenticated,
      ...(subject ? { user: subject } : {}),
      ...(bytes > 0 ? { bytes } : {}),
      ...(error !== undefined ? { error } : {}),
    });
  };

  const server = https.createServer(
    {
      cert: options.serving.certPem,
      key: options.serving.keyPem,
      minVersion: "TLSv1.2",
      ...(clientCA !== undefined ? { requestCert: true, rejectUnauthorized: true, ca: clientCA } : {}),
      handshakeTimeout: limits.headersTimeoutMs,
      maxHeaderSize: 16 * 1024,
      ...serverOptions(limits),
    },
    (req, res) => void handle(req, res),
  );
  applyServerLimits(server, limits, (dropped) =>
    log({ level: "warn", msg: `admission listener at its ${limits.maxConnections} connections: ${dropped} refused in the last 10 s` }),
  );
  // Connections per remote address (TCP, before the handshake); at most maxConnections entries.
  const perAddress = new Map<string, number>();
  let overAddress = 0;
  let overAddressReportedAt = 0;
  server.prependListener("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    const open = perAddress.get(address) ?? 0;
    if (open >= limits.maxConnectionsPerAddress) {
      socket.destroy();
      overAddress++;
      const now = Date.now();
      if (now - overAddressReportedAt >= 10_000) {
        overAddressReportedAt = now;
        log({ level: "warn", msg: `admission listener: ${overAddress} connections refused in the last 10 s, their address already holding ${limits.maxConnectionsPerAddress}`, address });
        overAddress = 0;
      }
      return;
    }
    perAddress.set(address, open + 1);
    socket.once("close", () => {
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left <= 0) perAddress.delete(address);
      else perAddress.set(address, left);
    });
  });
  // A refused handshake (no or an unverified client certificate) is logged, at most once per 10 s.
  let refused = 0;
  let refusedSince = 0;
  server.on("tlsClientError", (err: Error) => {
    refused++;
    const now = Date.now();
    if (now - refusedSince < 10_000) return;
    refusedSince = now;
    log({ level: "warn", msg: "admission listener refused a TLS connection", error: err.message, refusedSinceLastReport: refused });
    refused = 0;
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? DEFAULT_ADMISSION_PORT, options.host ?? "0.0.0.0", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    authenticating: clientCA !== undefined,
    setServing: (next) => server.setSecureContext({ cert: next.certPem, key: next.keyPem, ...(clientCA !== undefined ? { ca: clientCA } : {}) }),
    close: (drainMs = 5_000) =>
      (closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), drainMs);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      })),
  };
}

/** The body deadline passed. */
class BodyTimeout extends Error {}

/** The client went away before its body ended. */
class ClientClosed extends Error {}

/**
 * Read a request body: at most {@link MAX_ADMISSION_BODY_BYTES}, within
 * `deadlineMs`, each chunk reserved against the listener's shared budget
 * first (`reserve` answers false when it is spent; the caller gives the
 * reserved bytes back once the request is answered).
 *
 * @throws StatusError 413 (declared or read length over the bound), 429 (the
 *   shared budget is spent); BodyTimeout past the deadline; ClientClosed when
 *   the client goes away first
 */
function readBody(req: IncomingMessage, deadlineMs: number, reserve: (bytes: number) => boolean): Promise<Buffer> {
  const limit = MAX_ADMISSION_BODY_BYTES;
  const declared = Number(req.headers["content-length"] ?? "NaN");
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(requestEntityTooLarge(`the AdmissionReview is ${declared} bytes long; at most ${limit} are accepted`));
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (err: Error | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
      if (err === undefined) return resolve(Buffer.concat(chunks, size));
      req.pause();
      reject(err);
    };
    const timer = setTimeout(
      () => finish(new BodyTimeout(`the AdmissionReview body was not received within ${deadlineMs} ms of its headers (${size} bytes arrived)`)),
      deadlineMs,
    );
    const onData = (chunk: Buffer) => {
      if (size + chunk.byteLength > limit) return finish(requestEntityTooLarge(`the AdmissionReview is longer than ${limit} bytes, the most accepted`));
      if (!reserve(chunk.byteLength)) return finish(tooManyRequests("the admission webhook is reading too many large reviews at once; try again", 1));
      size += chunk.byteLength;
      chunks.push(chunk);
    };
    const onEnd = () => finish(undefined);
    const onError = (err: Error) => finish(new ClientClosed(`the connection failed before the body ended: ${err.message}`));
    const onClose = () => finish(new ClientClosed("the client closed the connection before the body ended"));
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    req.on("close", onClose);
  });
}

/** Write a JSON answer (the request id, `Cache-Control: no-store`); `close` ends the connection after it. */
function write(res: ServerResponse, status: number, body: string, requestId: string, close = false, extra: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Cache-Control": "no-store",
    "X-Request-Id": requestId,
    ...extra,
    ...(close ? { Connection: "close" } : {}),
  });
  res.end(body);
  if (close) res.once("finish", () => res.socket?.destroySoon?.());
}

/** A Node header value as one string (repeated values joined with ", "). */
function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}
