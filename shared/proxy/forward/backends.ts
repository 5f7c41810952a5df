/**
 * HTTP(S) clients for the proxy's backends, on Node's `http`/`https` with a
 * keep-alive agent per backend (its CA, client certificate, server name).
 *
 * - `bridge` backends (a Worker URL, a Lambda Function URL, an in-cluster
 *   Node service) get the caller's identity in headers signed with the first
 *   key of `BRIDGE_SIGNING_KEYS` (`shared/signing.ts`).
 * - `passthrough` backends (an existing adapter such as KEDA's metrics
 *   server) get the proxy's own credentials: a bearer token read from a file
 *   (the ServiceAccount token; re-read every 30 s so projected tokens rotate)
 *   and/or a client certificate. The adapter authorizes the proxy's
 *   ServiceAccount; the caller was already authorized by the proxy.
 *
 * A backend's `caFile` (cert-manager or a Secret volume rotates it) is
 * re-read when it changes, noticed before a call at most every
 * {@link CA_RECHECK_MS}; a changed file that cannot be read or holds no valid
 * certificate keeps the CA in use (logged once).
 *
 * Every call has the backend's timeout (default 4 s, ≤ 4.5 s: longer than the
 * bridge's 3 s deadline, under the aggregator's 5 s; see config.ts) for the
 * whole exchange, a 4 MiB response limit, and is cancelled (its connection
 * destroyed) when the request's `signal` aborts — nobody waits for it any
 * more. Failures are {@link BackendError}s with a kind the caller maps to a
 * Status.
 */
import { readFileSync, statSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { signRequest } from "../../signing.ts";
import { BackendError, MAX_RESPONSE_BYTES, type Backend, type BackendClientOptions, type BackendRequest, type BackendResponse, type CreateBackendOptions } from "./backend-contract.ts";
import type { BackendConfig } from "../config.ts";
import { certificatesFromPem } from "../tls/pem.ts";

const TOKEN_REREAD_MS = 30_000;
/**
 * Longest time a rotated `caFile` goes unnoticed, ms: before a call, at most
 * this often, the file's identity (mtime, size, inode: a Secret volume
 * update swaps a symlink, changing all three) is compared with the one read.
 */
export const CA_RECHECK_MS = 5_000;

/**
 * The backend for one configured entry: a {@link BackendClient} for `bridge`
 * and `passthrough`; for `inProcess`, the bridge built in this process
 * (in-process.ts), whose code — the bridge's providers and cloud SDKs — is
 * loaded with a dynamic `import()` only then, so a proxy without such a
 * backend never loads it (infra/proxy/build.ts puts it in its own chunk).
 *
 * @throws Error when an in-process bridge's config cannot be read or is
 *   invalid (`ConfigError` naming file:line:column)
 */
export async function createBackend(config: BackendConfig, options: CreateBackendOptions): Promise<Backend> {
  if (config.type !== "inProcess") return new BackendClient(config, options);
  const { InProcessBackend } = await import("./in-process.ts");
  return InProcessBackend.load(config, options);
}

/** One backend's network client. */
export class BackendClient implements Backend {
  readonly name: string;
  readonly config: BackendConfig;
  readonly #base: URL;
  /** the base URL's path without trailing slashes; request paths are appended to it */
  readonly #prefix: string;
  #agent: http.Agent;
  readonly #options: BackendClientOptions;
  /** the `caFile` in use: its identity, when to look again (ms), the identity of a version that could not be used */
  #ca: { version: string; checkAt: number; failed: string | undefined } | undefined;
  #token: { value: string; readAt: number } | undefined;

  constructor(config: BackendConfig, options: BackendClientOptions) {
    this.name = config.name;
    this.config = config;
    this.#options = options;
    if (config.url === undefined) throw new Error(`backend ${config.name}: a ${config.type} backend needs url`);
    this.#base = new URL(config.url);
    this.#prefix = this.#base.pathname.replace(/\/+$/, "");
    if (this.#base.protocol === "https:") {
      if (config.caFile !== undefined && config.caFile !== "") {
        // Read at start (an unreadable file refuses to start, as before); re-read when it changes (#recheckCa).
        this.#ca = { version: fileIdentity(config.caFile), checkAt: this.#now() + CA_RECHECK_MS, failed: undefined };
        this.#agent = this.#httpsAgent(readFileSync(config.caFile, "utf8"));
      } else {
        this.#agent = this.#httpsAgent(undefined);
      }
    } else {
      this.#agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    }
  }

  /** A keep-alive agent trusting `caPem` (undefined: Node's default roots), with the configured client certificate and server name. */
  #httpsAgent(caPem: string | undefined): https.Agent {
    const config = this.config;
    return new https.Agent({
      keepAlive: true,
      maxSockets: 64,
      rejectUnauthorized: !config.insecureSkipTLSVerify,
      ...(caPem !== undefined ? { ca: caPem } : {}),
      ...(config.clientCertFile ? { cert: readFileSync(config.clientCertFile, "utf8") } : {}),
      ...(config.clientKeyFile ? { key: readFileSync(config.clientKeyFile, "utf8") } : {}),
      ...(config.serverName ? { servername: config.serverName } : {}),
    });
  }

  #now(): number {
    return (this.#options.now ?? Date.now)();
  }

  /**
   * When {@link CA_RECHECK_MS} has passed since the last look, compare the
   * `caFile`'s identity with the one in use; when it changed, read it and,
   * if it holds at least one certificate and every certificate block parses,
   * make a new agent trusting it (new connections verify with the new CA;
   * calls in flight finish on the old agent, destroyed once they are past
   * their timeout). An unreadable or invalid file keeps the CA in use and is
   * logged once per version of the file; the next change is read again.
   * Not per request: one clock read per call, a `stat` at most every
   * {@link CA_RECHECK_MS}.
   */
  #recheckCa(now: number): void {
    const ca = this.#ca!;
    ca.checkAt = now + CA_RECHECK_MS;
    const file = this.config.caFile!;
    const version = fileIdentity(file);
    if (version === ca.version || version === ca.failed) return;
    let agent: https.Agent;
    try {
      const pem = readFileSync(file, "utf8");
      if (certificatesFromPem(pem).length === 0) throw new Error("it holds no PEM certificate");
      agent = this.#httpsAgent(pem);
    } catch (err) {
      ca.failed = version;
      this.#options.log?.({
        level: "error",
        msg: "backend caFile changed but cannot be used; keeping the CA read before",
        backend: this.name,
        caFile: file,
        error: (err as Error).message,
      });
      return;
    }
    const old = this.#agent;
    this.#agent = agent;
    ca.version = version;
    ca.failed = undefined;
    // Calls in flight on the old agent end within their timeout; then its keep-alive sockets go.
    setTimeout(() => old.destroy(), this.timeoutMs + 1000).unref();
    this.#options.log?.({ level: "info", msg: "backend caFile reloaded", backend: this.name, caFile: file });
  }

  /** The timeout of one call, ms. */
  get timeoutMs(): number {
    return Math.round(this.config.timeoutSeconds * 1000);
  }

  /**
   * GET `request.pathAndQuery` from the backend, or POST it with
   * `request.body` (`Content-Type: application/json`; a custom read to a
   * bridge, signed over the body with `EMB-HMAC-SHA256-3`).
   *
   * @throws BackendError `timeout` (no full answer within the timeout),
   *   `connect` (refused, reset, DNS, TLS), `too-large`, `protocol`,
   *   `unsigned` (a bridge backend but no signing key configured), or
   *   `aborted` (`request.signal` aborted)
   */
  async get(request: BackendRequest): Promise<BackendResponse> {
    if (this.#ca !== undefined) {
      const now = this.#now();
      if (now >= this.#ca.checkAt) this.#recheckCa(now);
    }
    const url = new URL(this.#prefix + request.pathAndQuery, this.#base);
    const headers: Record<string, string> = { accept: "application/json", "x-request-id": request.requestId, "user-agent": "external-metrics-bridge-proxy" };
    const method = request.body !== undefined ? "POST" : "GET";
    if (request.body !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(request.body.length);
    }
    if (this.config.type === "bridge") {
      const key = this.#options.signingKeys()?.[0];
      if (key === undefined) throw new BackendError(this.name, "unsigned", `backend ${this.name} is a bridge backend but BRIDGE_SIGNING_KEYS is not set`);
      Object.assign(
        headers,
        await signRequest(
          { method, url: url.href, caller: request.caller, requestId: request.requestId, ...(request.body !== undefined ? { body: request.body } : {}) },
          key,
          (this.#options.now ?? Date.now)(),
        ),
      );
    } else {
      const token = this.#bearerToken();
      if (token !== undefined) headers["authorization"] = `Bearer ${token}`;
    }
    return this.#send(url, method, headers, request.body, request.signal);
  }

  #bearerToken(): string | undefined {
    const file = this.config.bearerTokenFile;
    if (file === undefined) return undefined;
    const now = Date.now();
    if (this.#token === undefined || now - this.#token.readAt > TOKEN_REREAD_MS) {
      this.#token = { value: readFileSync(file, "utf8").trim(), readAt: now };
    }
    return this.#token.value;
  }

  #send(url: URL, method: "GET" | "POST", headers: Record<string, string>, body: Uint8Array | undefined, signal: AbortSignal | undefined): Promise<BackendResponse> {
    const transport = url.protocol === "https:" ? https : http;
    const timeoutMs = this.timeoutMs;
    if (signal?.aborted) return Promise.reject(new BackendError(this.name, "aborted", `the call to backend ${this.name} was cancelled: nobody waits for it`));
    return new Promise<BackendResponse>((resolve, reject) => {
      let settled = false;
      const onAbort = () => fail(new BackendError(this.name, "aborted", `the call to backend ${this.name} was cancelled: nobody waits for it`));
      const fail = (err: BackendError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        req.destroy();
        reject(err);
      };
      const req = transport.request(url, { method, headers, agent: this.#agent }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) fail(new BackendError(this.name, "too-large", `backend ${this.name} answered more than ${MAX_RESPONSE_BYTES} bytes`));
          else chunks.push(chunk);
        });
        res.on("end", () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          const out: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v;
          resolve({ status: res.statusCode ?? 0, headers: out, body: Buffer.concat(chunks) });
        });
        res.on("error", (err) => fail(new BackendError(this.name, "connect", `backend ${this.name}: ${err.message}`, { cause: err })));
      });
      const timer = setTimeout(
        () => fail(new BackendError(this.name, "timeout", `backend ${this.name} did not answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      req.on("error", (err) => fail(new BackendError(this.name, "connect", `backend ${this.name} is unreachable: ${err.message}`, { cause: err })));
      signal?.addEventListener("abort", onAbort, { once: true });
      req.end(body);
    });
  }

  /** Close idle keep-alive connections. */
  close(): void {
    this.#agent.destroy();
  }
}

/**
 * A file's identity for noticing a change: mtime, size and inode (a Secret
 * volume update swaps the `..data` symlink: the path then names another
 * file); `missing` when it cannot be stat'ed.
 */
function fileIdentity(path: string): string {
  try {
    const st = statSync(path);
    return `${st.mtimeMs}:${st.size}:${st.ino}`;
  } catch {
    return "missing";
  }
}
