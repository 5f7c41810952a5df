/**
 * The proxy's Kubernetes API client: a thin typed client over `node:https`
 * for the handful of calls the proxy makes (TokenReview and
 * SubjectAccessReview create; ConfigMap and Secret get/list/watch; Secret
 * create/replace; Lease and APIService get/create/replace), with
 *
 * - the client configuration: in-cluster ServiceAccount, or a kubeconfig
 *   file (the subset of fields listed at {@link loadKubeConfig});
 * - one keep-alive `https.Agent` per client (at most
 *   {@link POOL_MAX_CONNECTIONS} sockets, idle ones closed after
 *   {@link POOL_KEEP_ALIVE_MS}) shared by every call made through it;
 * - a deadline on every call (an AbortSignal; abort destroys the request and
 *   closes its connection);
 * - errors as {@link ApiError} carrying the HTTP status and the
 *   `metav1.Status` body the API server answered;
 * - `list` (one page) and `stream` (a watch's event lines), on which
 *   list+watch (informer.ts: `Informer`, `listAllPages`) is built.
 *
 * Why not `@kubernetes/client-node` (issue 11, row P5: proxy ≤ 100 MB RSS
 * with 10 000 cached series). Measured on the 2-core dev machine, Node 24,
 * fresh process, RSS after GC: empty Node 41.8 MiB;
 * `import("@kubernetes/client-node")` 124.9 MiB (+83 MiB: its generated
 * models and API classes for every Kubernetes group, plus its own HTTP
 * stack); `import("undici")` (which client-node sends every call through)
 * 70.9 MiB (+29 MiB). The proxy bundle rested at ~131 MiB, mostly
 * client-node. client-node 2.0.1 also built a new undici `Agent` for every
 * call (`KubeConfig.applySecurityAuthentication` → `createDispatcher`,
 * upstream kubernetes-client/javascript#2893), so each call made its own TLS
 * handshake; we had to override that hook to pool connections. The library
 * cannot be loaded partially (its entry point imports every API group), so,
 * as issue 11 allows, it is replaced by this client for the calls we make.
 * Result, same machine: the bundle (`node --max-old-space-size=96
 * dist/proxy/main.mjs`, registered against the fake API, at rest) 122–127 MiB
 * → 84 MiB RSS; bundle 8 052 KiB → 2 100 KiB (gzip 961 → 404 KiB).
 * The token source, TLS options and watch semantics follow client-go
 * (files cited where they are implemented).
 */
import { readFileSync } from "node:fs";
import https from "node:https";
import type { IncomingMessage } from "node:http";
import { delimiter, dirname, isAbsolute, resolve } from "node:path";
import { parse as parseYaml } from "yaml";

/**
 * Deadline of one TokenReview or SubjectAccessReview, ms: the agreed budget of
 * an HPA read (docs/proxy.md) gives each review 2 s, well inside the
 * aggregator's 5 s. Past it the HTTP request is aborted (its connection closed).
 */
export const KUBE_API_TIMEOUT_MS = 2_000;

/** Deadline of a call made without a signal, ms (every call has one). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/** How long an idle pooled connection to the API server is kept, ms (the HPA polls every 15 s, so it stays warm). */
export const POOL_KEEP_ALIVE_MS = 60_000;
/** Most connections per API server: a hanging API server cannot make the proxy open thousands of sockets. */
export const POOL_MAX_CONNECTIONS = 32;
/**
 * How long a token read from a file is used before the file is read again,
 * ms: client-go `transport/token_source.go` (`NewCachedFileTokenSource`:
 * the file token source reports an expiry of one minute, the caching source
 * re-reads after it). Bound ServiceAccount tokens are rotated by the kubelet
 * (at 80 % of their lifetime, ≥ 1 h), so a minute is always soon enough.
 */
export const TOKEN_FILE_REREAD_MS = 60_000;
/** Largest response body (or one watch event line) read, bytes; past it the call fails ({@link ResponseTooLargeError}). */
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

const SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

// ---------------------------------------------------------------------------
// Object types: only the fields the proxy reads or writes. Objects read are
// sent back as read (spread), so fields not named here are preserved.

/** `metav1.ObjectMeta` (k8s.io/apimachinery/pkg/apis/meta/v1/types.go), the fields used. */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [field: string]: unknown;
}

/** Any object with `metadata` (a `runtime.Object` with `metav1.ObjectMeta`). */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

/** `metav1.ListMeta` + items (k8s.io/apimachinery/pkg/apis/meta/v1/types.go `List`). */
export interface KubeList<T> {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

/** `metav1.Status` (k8s.io/apimachinery/pkg/apis/meta/v1/types.go): the body of every API error. */
export interface KubeStatus {
  kind?: "Status";
  apiVersion?: string;
  status?: "Success" | "Failure";
  message?: string;
  reason?: string;
  code?: number;
  details?: unknown;
}

/** `core/v1.ConfigMap` (k8s.io/api/core/v1/types.go). */
export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

/** `core/v1.Secret` (k8s.io/api/core/v1/types.go); `data` values are base64 (Go `[]byte`). */
export interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

/**
 * `metav1.MicroTime` on the wire: RFC 3339 with exactly six fractional
 * digits, UTC (`2006-01-02T15:04:05.000000Z07:00`,
 * k8s.io/apimachinery/pkg/apis/meta/v1/micro_time.go `RFC3339Micro`).
 */
export type MicroTime = string;

/** Format a time (ms since the epoch) as a {@link MicroTime}. */
export function microTime(ms: number): MicroTime {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** `coordination/v1.LeaseSpec` (k8s.io/api/coordination/v1/types.go). */
export interface LeaseSpec {
  holderIdentity?: string;
  /** seconds */
  leaseDurationSeconds?: number;
  acquireTime?: MicroTime;
  renewTime?: MicroTime;
  leaseTransitions?: number;
}

/** `coordination/v1.Lease` (k8s.io/api/coordination/v1/types.go). */
export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

/** `apiregistration/v1.APIServiceSpec` (k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/types.go). */
export interface APIServiceSpec {
  group?: string;
  version?: string;
  service?: { namespace?: string; name?: string; port?: number };
  /** PEM bundle, base64 on the wire (Go `[]byte`) */
  caBundle?: string;
  insecureSkipTLSVerify?: boolean;
  groupPriorityMinimum?: number;
  versionPriority?: number;
}

/** `apiregistration/v1.APIService`. */
export interface APIService extends KubeObject {
  spec?: APIServiceSpec;
}

// ---------------------------------------------------------------------------
// Errors

/**
 * An error answer of the API server: `code` is the HTTP status, `status` the
 * `metav1.Status` it sent (or one made from the status line when the body was
 * not a Status).
 */
export class ApiError extends Error {
  override readonly name = "ApiError";
  /** HTTP status */
  readonly code: number;
  /** the `metav1.Status` answered */
  readonly status: KubeStatus;
  constructor(code: number, status: KubeStatus, what: string) {
    super(`${what}: ${status.message ?? status.reason ?? "error"} (HTTP ${code}${status.reason ? `, ${status.reason}` : ""})`);
    this.code = code;
    this.status = status;
  }
}

/**
 * An answer (or one watch event line) longer than the bytes allowed
 * ({@link MAX_RESPONSE_BYTES}): the call fails and its connection is closed.
 */
export class ResponseTooLargeError extends Error {
  override readonly name = "ResponseTooLargeError";
  /** the limit passed, bytes */
  readonly limit: number;
  constructor(message: string, limit: number) {
    super(message);
    this.limit = limit;
  }
}

/** The HTTP status of an {@link ApiError} (undefined for other errors: timeouts, network). */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof ApiError ? err.code : undefined;
}

// ---------------------------------------------------------------------------
// Configuration

/** Where and how to reach the API server. */
export interface KubeClientConfig {
  /** `https://host:port[/prefix]` */
  server: string;
  /** PEM CA bundle; undefined = the system's roots */
  ca?: Buffer | string;
  /** client certificate and key (PEM) */
  cert?: Buffer | string;
  key?: Buffer | string;
  /** skip verification of the server's certificate (kubeconfig `insecure-skip-tls-verify`) */
  insecureSkipTLSVerify?: boolean;
  /** name to verify the server's certificate against (kubeconfig `tls-server-name`) */
  tlsServerName?: string;
  /** a fixed bearer token */
  token?: string;
  /** a file holding the bearer token, re-read every {@link TOKEN_FILE_REREAD_MS} (wins over `token`, as in client-go) */
  tokenFile?: string;
}

/** Test seams. */
export interface KubeClientOptions {
  /** clock, ms (default Date.now) */
  now?: () => number;
  /** token file re-read period, ms (default {@link TOKEN_FILE_REREAD_MS}) */
  tokenRereadMs?: number;
}

/** Per-call options. */
export interface CallOptions {
  /** aborts the call (destroys the request); default: a deadline of {@link DEFAULT_REQUEST_TIMEOUT_MS} */
  signal?: AbortSignal;
  /**
   * the `Accept` header (default `application/json`), e.g.
   * `application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json`
   * for a metadata-only list (apiserver `pkg/endpoints/handlers/response.go`)
   */
  accept?: string;
  /** largest body (or watch event line) read, bytes (default and at most {@link MAX_RESPONSE_BYTES}) */
  maxBytes?: number;
}

/** Per-call options carrying `signal` (kept from the client-node era: every call site passes one). */
export function withSignal(signal: AbortSignal): CallOptions {
  return { signal };
}

/** Per-call options that abort the call after `ms` milliseconds: the deadline of a Lease, Secret or APIService call. */
export function apiDeadline(ms: number): CallOptions {
  return { signal: AbortSignal.timeout(ms) };
}

/**
 * A bearer token read from a file, cached for `periodMs` (client-go
 * `transport/token_source.go` `cachingTokenSource` over a
 * `fileTokenSource`): a read that fails while a token is cached keeps the
 * cached one (and is retried at the next call); a 401 answer makes the next
 * call re-read (`ResetTokenOlderThan`).
 */
class FileTokenSource {
  #token: string | undefined;
  #readAt = -Infinity;
  readonly file: string;
  readonly periodMs: number;
  readonly now: () => number;
  constructor(file: string, periodMs: number, now: () => number) {
    this.file = file;
    this.periodMs = periodMs;
    this.now = now;
  }

  /** @throws Error when the file cannot be read and no token is cached */
  token(): string {
    const now = this.now();
    if (this.#token === undefined || now - this.#readAt >= this.periodMs) {
      try {
        const text = readFileSync(this.file, "utf8").trim();
        if (text === "") throw new Error("the file is empty");
        this.#token = text;
        this.#readAt = now;
      } catch (err) {
        if (this.#token === undefined) throw new Error(`reading the bearer token file ${this.file}: ${(err as Error).message}`);
      }
    }
    return this.#token!;
  }

  /** Forget the cached token when it was read before `ms` (a 401 answer). */
  resetOlderThan(ms: number): void {
    if (this.#readAt < ms) this.#readAt = -Infinity;
  }
}

/**
 * A Kubernetes API client: one keep-alive connection pool, a deadline on
 * every call, JSON in and out.
 *
 * Call {@link close} on shutdown (tests) to close pooled connections.
 */
export class KubeClient {
  readonly server: URL;
  readonly #agent: https.Agent;
  readonly #token: string | undefined;
  readonly #tokenFile: FileTokenSource | undefined;
  readonly #now: () => number;

  /** @throws Error when `server` is not an https URL */
  constructor(config: KubeClientConfig, options: KubeClientOptions = {}) {
    this.server = new URL(config.server);
    if (this.server.protocol !== "https:") throw new Error(`Kubernetes API server ${config.server}: only https:// is supported`);
    this.#now = options.now ?? Date.now;
    this.#token = config.token;
    if (config.tokenFile !== undefined) this.#tokenFile = new FileTokenSource(config.tokenFile, options.tokenRereadMs ?? TOKEN_FILE_REREAD_MS, this.#now);
    this.#agent = new https.Agent({
      keepAlive: true,
      maxSockets: POOL_MAX_CONNECTIONS,
      timeout: POOL_KEEP_ALIVE_MS, // closes sockets idle this long (an active watch is not closed by it)
      scheduling: "lifo",
      ...(config.ca !== undefined ? { ca: config.ca } : {}),
      ...(config.cert !== undefined ? { cert: config.cert } : {}),
      ...(config.key !== undefined ? { key: config.key } : {}),
      ...(config.insecureSkipTLSVerify ? { rejectUnauthorized: false } : {}),
      ...(config.tlsServerName ? { servername: config.tlsServerName } : {}),
    });
  }

  /** The bearer token for the next call (undefined: client certificate only). */
  #bearer(): string | undefined {
    return this.#tokenFile?.token() ?? this.#token;
  }

  /**
   * Send one request and parse its JSON answer.
   *
   * @param path API path with query, e.g. `/api/v1/namespaces/ns/secrets/name`
   * @param body sent as JSON
   * @returns the parsed body of a 2xx answer
   * @throws ApiError on a non-2xx answer; the signal's reason (a `TimeoutError`
   *   DOMException for a deadline) when it aborts; a network Error otherwise
   */
  async request<T>(method: "GET" | "POST" | "PUT" | "DELETE", path: string, body?: unknown, options: CallOptions = {}): Promise<T> {
    const signal = options.signal ?? AbortSignal.timeout(DEFAULT_REQUEST_TIMEOUT_MS);
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    // A keep-alive socket the server closed just as it was reused fails with
    // ECONNRESET before anything was sent back: the request never reached the
    // server, so it is sent once more on a new socket (as Node's documentation advises).
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#send<T>(method, path, payload, signal, undefined, options);
      } catch (err) {
        if (attempt === 0 && (err as { reusedSocket?: boolean }).reusedSocket === true && !signal.aborted) continue;
        throw err;
      }
    }
  }

  /**
   * Open a streaming GET (a watch) and hand every newline-delimited line of
   * a 2xx answer to `onLine`. Resolves when the server ends the stream.
   *
   * @throws ApiError when the answer is not 2xx; the signal's reason when it aborts
   */
  stream(path: string, onLine: (line: string) => void, options: { signal: AbortSignal } & Omit<CallOptions, "signal">): Promise<void> {
    return this.#send<void>("GET", path, undefined, options.signal, onLine, options);
  }

  #send<T>(method: string, path: string, payload: Buffer | undefined, signal: AbortSignal, onLine: ((line: string) => void) | undefined, options: CallOptions = {}): Promise<T> {
    const maxBytes = Math.min(options.maxBytes ?? MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES);
    if (signal.aborted) return Promise.reject(signal.reason);
    const what = `${method} ${path.split("?")[0]}`;
    let bearer: string | undefined;
    try {
      bearer = this.#bearer();
    } catch (err) {
      return Promise.reject(err);
    }
    const startedAt = this.#now();
    const prefix = this.server.pathname.replace(/\/$/, "");
    return new Promise<T>((resolvePromise, rejectPromise) => {
      let settled = false;
      const finish = (err: unknown, value?: T) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener("abort", onAbort);
        if (err !== undefined) rejectPromise(err);
        else resolvePromise(value as T);
      };
      const req = https.request({
        agent: this.#agent,
        protocol: "https:",
        hostname: this.server.hostname.replace(/^\[|\]$/g, ""),
        port: this.server.port || 443,
        method,
        path: prefix + path,
        headers: {
          Accept: options.accept ?? "application/json",
          "User-Agent": "external-metrics-bridge-proxy",
          ...(bearer !== undefined ? { Authorization: `Bearer ${bearer}` } : {}),
          ...(payload !== undefined ? { "Content-Type": "application/json", "Content-Length": payload.length } : {}),
        },
      });
      const onAbort = () => {
        req.destroy();
        finish(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      req.on("error", (err: Error & { reusedSocket?: boolean }) => {
        if (req.reusedSocket && (err as NodeJS.ErrnoException).code === "ECONNRESET") err.reusedSocket = true;
        finish(err);
      });
      req.on("response", (res: IncomingMessage) => {
        const code = res.statusCode ?? 0;
        if (code === 401) this.#tokenFile?.resetOlderThan(startedAt + 1);
        res.on("error", (err) => finish(err));
        if (onLine !== undefined && code >= 200 && code < 300) {
          readLines(res, onLine, maxBytes, (err) => {
            if (err !== undefined) req.destroy();
            finish(err);
          });
          return;
        }
        readBody(res, maxBytes, (err, text) => {
          if (err !== undefined) {
            req.destroy();
            return finish(err);
          }
          let parsed: unknown;
          try {
            parsed = text === "" ? undefined : JSON.parse(text!);
          } catch {
            parsed = undefined;
          }
          if (code >= 200 && code < 300) {
            if (parsed === undefined && text !== "") return finish(new Error(`${what}: the answer is not JSON`));
            return finish(undefined, parsed as T);
          }
          const status: KubeStatus =
            (parsed as KubeStatus | undefined)?.kind === "Status"
              ? (parsed as KubeStatus)
              : { kind: "Status", status: "Failure", code, message: text ? text.slice(0, 500) : (res.statusMessage ?? "") };
          finish(new ApiError(code, status, what));
        });
      });
      req.end(payload);
    });
  }

  /**
   * Close every pooled connection (requests in flight are cut). Idle
   * connections also close by themselves after {@link POOL_KEEP_ALIVE_MS}.
   */
  async close(): Promise<void> {
    this.#agent.destroy();
  }

  // -- typed helpers ---------------------------------------------------------

  /** GET one object. @throws ApiError (404 when absent) */
  get<T extends KubeObject>(path: string, options?: CallOptions): Promise<T> {
    return this.request<T>("GET", path, undefined, options);
  }

  /**
   * GET a collection, optionally with a field selector and one page of it
   * (`limit`, items; `continue`, the token of the previous page's
   * `metadata.continue`: k8s.io/apimachinery/pkg/apis/meta/v1/types.go
   * `ListOptions`).
   *
   * @throws ApiError (410 Expired when a `continue` token is too old);
   *   {@link ResponseTooLargeError} when the page is over {@link MAX_RESPONSE_BYTES}
   */
  list<T extends KubeObject>(path: string, query: { fieldSelector?: string; limit?: number; continue?: string } = {}, options?: CallOptions): Promise<KubeList<T>> {
    const q = new URLSearchParams();
    if (query.fieldSelector) q.set("fieldSelector", query.fieldSelector);
    if (query.limit !== undefined && query.limit > 0) q.set("limit", String(query.limit));
    if (query.continue) q.set("continue", query.continue);
    const qs = q.toString();
    return this.request<KubeList<T>>("GET", qs ? `${path}?${qs}` : path, undefined, options);
  }

  /** POST an object to its collection. @throws ApiError (409 when it exists) */
  create<T extends KubeObject>(collectionPath: string, body: T, options?: CallOptions): Promise<T> {
    return this.request<T>("POST", collectionPath, body, options);
  }

  /** PUT an object (optimistic concurrency through `metadata.resourceVersion`). @throws ApiError (409 on a stale resourceVersion) */
  replace<T extends KubeObject>(path: string, body: T, options?: CallOptions): Promise<T> {
    return this.request<T>("PUT", path, body, options);
  }
}

/** Read a whole body, at most `maxBytes` ({@link MAX_RESPONSE_BYTES} unless a call asks for less). */
function readBody(res: IncomingMessage, maxBytes: number, done: (err: Error | undefined, text?: string) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  res.on("data", (chunk: Buffer) => {
    if (over) return;
    size += chunk.length;
    if (size > maxBytes) {
      over = true;
      return done(new ResponseTooLargeError(`the answer is larger than ${maxBytes} bytes`, maxBytes));
    }
    chunks.push(chunk);
  });
  res.on("end", () => {
    if (!over) done(undefined, Buffer.concat(chunks).toString("utf8"));
  });
  res.on("aborted", () => done(new Error("the connection closed before the answer ended")));
}

/** Split a streamed body into lines; a line longer than {@link MAX_RESPONSE_BYTES} fails the stream. */
function readLines(res: IncomingMessage, onLine: (line: string) => void, maxBytes: number, done: (err?: Error) => void): void {
  res.setEncoding("utf8");
  let pending = "";
  let failed = false;
  res.on("data", (chunk: string) => {
    if (failed) return;
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, nl).trim();
      pending = pending.slice(nl + 1);
      if (line !== "") onLine(line);
    }
    if (pending.length > maxBytes) {
      failed = true;
      done(new ResponseTooLargeError(`a watch event is larger than ${maxBytes} bytes`, maxBytes));
    }
  });
  res.on("end", () => {
    if (failed) return;
    if (pending.trim() !== "") onLine(pending.trim());
    done();
  });
  res.on("aborted", () => done(new Error("the watch connection closed")));
}

// ---------------------------------------------------------------------------
// Loading the configuration

/**
 * The client configuration: the kubeconfig file `kubeconfig` when given, else
 * the in-cluster ServiceAccount (client-go `rest.InClusterConfig`:
 * `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, CA
 * `/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`, token file
 * `…/token` re-read every minute — bound tokens rotate).
 *
 * Kubeconfig fields read (client-go `tools/clientcmd/api/v1/types.go`):
 * `current-context`; the context's `cluster` and `user`; cluster `server`,
 * `certificate-authority`, `certificate-authority-data`,
 * `insecure-skip-tls-verify`, `tls-server-name`; user `token`, `tokenFile`,
 * `client-certificate`, `client-certificate-data`, `client-key`,
 * `client-key-data`. Relative file paths are resolved against the
 * kubeconfig's directory (as clientcmd does).
 *
 * @throws Error when neither is available, a file cannot be read, or the
 *   kubeconfig uses a field this client does not support (`exec`,
 *   `auth-provider`, `username`/`password`, `as`/impersonation, `proxy-url`)
 *   — the message names the field
 */
export function loadKubeConfig(kubeconfig: string | undefined, options: KubeClientOptions = {}): KubeClient {
  if (kubeconfig !== undefined && kubeconfig !== "") return new KubeClient(kubeConfigFromFile(kubeconfig), options);
  const host = process.env["KUBERNETES_SERVICE_HOST"];
  const port = process.env["KUBERNETES_SERVICE_PORT"];
  if (host === undefined || host === "" || port === undefined || port === "") {
    throw new Error("not running in a cluster (KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is unset): pass --kubeconfig FILE");
  }
  const tokenFile = `${SA_DIR}/token`;
  const ca = readFileSync(`${SA_DIR}/ca.crt`);
  const config: KubeClientConfig = { server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`, ca, tokenFile };
  const client = new KubeClient(config, options);
  // Fail at start, not at the first call, when the token is not there (client-go does too).
  readFileSync(tokenFile);
  return client;
}

/**
 * Parse a kubeconfig file into a {@link KubeClientConfig} (see {@link loadKubeConfig}),
 * for its current-context or the context `contextName` (kubectl `--context`).
 *
 * @throws Error naming the file and the field that is missing or unsupported
 */
export function kubeConfigFromFile(file: string, contextName?: string): KubeClientConfig {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, "utf8"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" && file.includes(delimiter)) {
      throw new Error(`kubeconfig ${file}: a list of kubeconfig files (KUBECONFIG=a${delimiter}b) is not supported; pass one file`);
    }
    throw new Error(`kubeconfig ${file}: ${(err as Error).message}`);
  }
  const fail = (msg: string): never => {
    throw new Error(`kubeconfig ${file}: ${msg}`);
  };
  const root = (doc ?? {}) as Record<string, unknown>;
  const named = (list: unknown, key: string, name: string): Record<string, unknown> => {
    const entry = (Array.isArray(list) ? list : []).find((e) => (e as { name?: unknown })?.name === name) as Record<string, unknown> | undefined;
    if (entry === undefined) return fail(`${key} "${name}" is not defined`);
    return (entry[key.replace(/s$/, "")] ?? {}) as Record<string, unknown>;
  };
  const current = contextName ?? root["current-context"]; // kubectl --context
  if (typeof current !== "string" || current === "") return fail("current-context is not set");
  const context = named(root["contexts"], "contexts", current);
  const cluster = named(root["clusters"], "clusters", String(context["cluster"] ?? ""));
  const user = context["user"] ? named(root["users"], "users", String(context["user"])) : {};
  for (const field of ["exec", "auth-provider", "username", "password", "as", "as-uid", "as-groups", "as-user-extra"]) {
    if (user[field] !== undefined) fail(`users[].user.${field} is not supported by the proxy's Kubernetes client; use a token, tokenFile or client certificate`);
  }
  if (cluster["proxy-url"] !== undefined) fail("clusters[].cluster.proxy-url is not supported by the proxy's Kubernetes client; reach the API server directly");
  const base = dirname(resolve(file));
  const path = (p: unknown) => (isAbsolute(String(p)) ? String(p) : resolve(base, String(p)));
  const bytes = (dataKey: string, fileKey: string, from: Record<string, unknown>): Buffer | undefined => {
    const data = from[dataKey];
    if (typeof data === "string" && data !== "") return Buffer.from(data, "base64");
    const f = from[fileKey];
    if (typeof f === "string" && f !== "") {
      try {
        return readFileSync(path(f));
      } catch (err) {
        return fail(`${fileKey} ${f}: ${(err as Error).message}`);
      }
    }
    return undefined;
  };
  const server = cluster["server"];
  if (typeof server !== "string" || server === "") return fail(`clusters[].cluster.server is not set for cluster "${String(context["cluster"])}"`);
  const config: KubeClientConfig = { server };
  const ca = bytes("certificate-authority-data", "certificate-authority", cluster);
  if (ca !== undefined) config.ca = ca;
  if (cluster["insecure-skip-tls-verify"] === true) config.insecureSkipTLSVerify = true;
  if (typeof cluster["tls-server-name"] === "string" && cluster["tls-server-name"] !== "") config.tlsServerName = cluster["tls-server-name"];
  const cert = bytes("client-certificate-data", "client-certificate", user);
  const key = bytes("client-key-data", "client-key", user);
  if ((cert === undefined) !== (key === undefined)) fail("a client certificate needs both client-certificate(-data) and client-key(-data)");
  if (cert !== undefined) config.cert = cert;
  if (key !== undefined) config.key = key;
  if (typeof user["token"] === "string" && user["token"] !== "") config.token = user["token"];
  if (typeof user["tokenFile"] === "string" && user["tokenFile"] !== "") config.tokenFile = path(user["tokenFile"]);
  return config;
}

/** A client for one API server URL with a CA and a bearer token (tests, tools). */
export function kubeConfigFor(server: string, caPem: string, token: string, options: KubeClientOptions = {}): KubeClient {
  return new KubeClient({ server, ca: caPem, token }, options);
}

// ---------------------------------------------------------------------------
// Reviews

/** Options of the reviewers (`authn/token-review.ts`, `authz/subject-access-review.ts`). */
export interface ReviewOptions {
  /** deadline of each review, ms (default {@link KUBE_API_TIMEOUT_MS}) */
  timeoutMs?: number;
}
