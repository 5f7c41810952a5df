/**
 * The proxy's Kubernetes API access through `@kubernetes/client-node`: the
 * client configuration (in-cluster ServiceAccount, or a kubeconfig file), one
 * keep-alive connection pool shared by every call made through it, and the
 * reviews delegated authentication and authorization send, each with a
 * deadline that cancels its HTTP request.
 *
 * Why a pool of our own: client-node 2.0.1's `KubeConfig.applySecurityAuthentication`
 * (run before every API call) builds a new undici `Agent` for every request
 * (`createDispatcher`; upstream kubernetes-client/javascript#2893), so each
 * call opened its own TLS connection: measured against the fake API, 30
 * sequential SubjectAccessReviews made 30 TLS handshakes and left 30
 * connections open (each ~7 ms of CPU; issue 11 measured 420–580 MB of native
 * memory for them under 10 000 series). {@link PooledKubeConfig} keeps the
 * library and its API classes and swaps that per-request agent for one shared
 * keep-alive agent per cluster, user and TLS material — 30 SARs → 1 connection.
 */
import { createHash } from "node:crypto";
import {
  AuthenticationV1Api,
  AuthorizationV1Api,
  bufferFromFileOrString,
  KubeConfig,
  Observable,
  type ConfigurationOptions,
  type RequestContext,
} from "@kubernetes/client-node";
// undici is @kubernetes/client-node's own HTTP client (its `fetch` sends every
// API call); the dispatcher handed to that fetch must be undici's.
import { Agent } from "undici";
import type { TokenReviewer } from "./authenticate.ts";
import type { SubjectAccessReviewer, SubjectAccessReviewSpec } from "./authorize.ts";

/**
 * Deadline of one TokenReview or SubjectAccessReview, ms: the agreed budget of
 * an HPA read (docs/proxy.md) gives each review 2 s, well inside the
 * aggregator's 5 s. Past it the HTTP request is aborted (its connection closed).
 */
export const KUBE_API_TIMEOUT_MS = 2_000;

/** How long an idle pooled connection to the API server is kept, ms (the HPA polls every 15 s, so it stays warm). */
const POOL_KEEP_ALIVE_MS = 60_000;
/** Most connections per API server: a hanging API server cannot make the proxy open thousands of sockets. */
const POOL_MAX_CONNECTIONS = 32;

/**
 * A `KubeConfig` whose API calls share one keep-alive connection pool.
 *
 * It overrides only the public `applySecurityAuthentication` hook (the one
 * every generated API class, `Watch`, `Metrics` and `Health` call before a
 * request): the library still computes headers, token and TLS material; the
 * undici `Agent` it built for this one request is replaced by the shared one
 * for the same TLS material (CA, client certificate and key, server name,
 * verification on/off). When that material changes (a rotated CA or client
 * certificate re-read from its file), a new pool is made and the previous one
 * closed once its requests finished. Clusters reached through an HTTP or SOCKS
 * proxy (`proxy-url`) keep the library's behaviour.
 *
 * Call {@link close} on shutdown (tests) to close pooled connections.
 */
export class PooledKubeConfig extends KubeConfig {
  readonly #pools = new Map<string, { fingerprint: string; agent: Agent }>();
  /** counters for tests: pools created */
  readonly poolStats = { pools: 0 };

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const cluster = this.getCurrentCluster();
    if (cluster === null || cluster.proxyUrl || context.getDispatcher() === undefined) return;
    const user = this.getCurrentUser();
    const ca = material(cluster.caFile, cluster.caData);
    const cert = user ? material(user.certFile, user.certData) : undefined;
    const key = user ? material(user.keyFile, user.keyData) : undefined;
    const tls = {
      ...(ca ? { ca } : {}),
      ...(cert ? { cert } : {}),
      ...(key ? { key } : {}),
      ...(cluster.skipTLSVerify ? { rejectUnauthorized: false } : {}),
      ...(cluster.tlsServerName ? { servername: cluster.tlsServerName } : {}),
    };
    const options = this.createDispatcherOptions(cluster, tls);
    if (options.type !== "agent") return;
    const slot = JSON.stringify([cluster.name, cluster.server, user?.name ?? ""]);
    const digest = createHash("sha256");
    for (const part of [ca, cert, key]) digest.update(part ?? "-").update("\0");
    digest.update(JSON.stringify([cluster.skipTLSVerify === true, cluster.tlsServerName ?? ""]));
    const fingerprint = digest.digest("hex");
    let pool = this.#pools.get(slot);
    if (pool === undefined || pool.fingerprint !== fingerprint) {
      const previous = pool?.agent;
      pool = {
        fingerprint,
        agent: new Agent({ connect: options.connect, keepAliveTimeout: POOL_KEEP_ALIVE_MS, keepAliveMaxTimeout: POOL_KEEP_ALIVE_MS, connections: POOL_MAX_CONNECTIONS }),
      };
      this.#pools.set(slot, pool);
      this.poolStats.pools++;
      previous?.close().catch(() => {});
    }
    context.setDispatcher(pool.agent);
  }

  /**
   * Close every pooled connection: requests in flight get `graceMs` to
   * finish, then whatever is left (e.g. a watch that was still connecting
   * when its informer stopped) is destroyed.
   */
  async close(graceMs = 1_000): Promise<void> {
    const agents = [...this.#pools.values()].map((p) => p.agent);
    this.#pools.clear();
    await Promise.all(
      agents.map(async (agent) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const grace = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), graceMs)));
        const outcome = await Promise.race([agent.close().then(() => "closed" as const, () => "closed" as const), grace]);
        clearTimeout(timer);
        if (outcome === "late") await agent.destroy().catch(() => {});
      }),
    );
  }
}

/** A kubeconfig `*-data` (base64) or `*-file` value as bytes, read as client-node reads it (`bufferFromFileOrString`). */
function material(file: string | undefined, data: string | undefined): Buffer | undefined {
  return bufferFromFileOrString(file, data) ?? undefined;
}

/**
 * The client configuration: `kubeconfig` when given, else the in-cluster
 * ServiceAccount (`/var/run/secrets/kubernetes.io/serviceaccount`, with
 * `KUBERNETES_SERVICE_HOST`/`_PORT`). Every API class made from it shares
 * one keep-alive connection pool ({@link PooledKubeConfig}).
 *
 * @throws Error when neither is available
 */
export function loadKubeConfig(kubeconfig: string | undefined): PooledKubeConfig {
  const kc = new PooledKubeConfig();
  if (kubeconfig !== undefined && kubeconfig !== "") kc.loadFromFile(kubeconfig);
  else {
    if (process.env["KUBERNETES_SERVICE_HOST"] === undefined) {
      throw new Error("not running in a cluster (KUBERNETES_SERVICE_HOST is unset): pass --kubeconfig FILE");
    }
    kc.loadFromCluster();
  }
  return kc;
}

/** A pooled KubeConfig for one API server URL with a CA and a bearer token (tests, tools). */
export function kubeConfigFor(server: string, caPem: string, token: string): PooledKubeConfig {
  const kc = new PooledKubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "cluster", server, caData: Buffer.from(caPem).toString("base64"), skipTLSVerify: false }],
    users: [{ name: "proxy", token }],
    contexts: [{ name: "ctx", cluster: "cluster", user: "proxy" }],
    currentContext: "ctx",
  });
  return kc;
}

/** Options of the reviewers. */
export interface ReviewOptions {
  /** deadline of each review, ms (default {@link KUBE_API_TIMEOUT_MS}) */
  timeoutMs?: number;
}

/**
 * Per-call client-node options (the last argument of every object-API
 * method) that hand `signal` to the HTTP request (the
 * generated `RequestContext.setSignal`, passed to undici's `fetch`), so an
 * abort cancels the request and closes its connection. The object API passes
 * call-time middleware to the Observable API as is, so it returns the
 * library's own `Observable`.
 */
export function withSignal(signal: AbortSignal): ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (context) => {
          context.setSignal(signal);
          return new Observable(Promise.resolve(context));
        },
        post: (context) => new Observable(Promise.resolve(context)),
      },
    ],
    middlewareMergeStrategy: "append",
  };
}

/**
 * Per-call client-node options that abort the request after `ms`
 * milliseconds ({@link withSignal} with `AbortSignal.timeout(ms)`): the
 * deadline of a Lease, Secret or APIService call.
 */
export function apiDeadline(ms: number): ConfigurationOptions {
  return withSignal(AbortSignal.timeout(ms));
}

/** The caller's signal (if any) combined with a deadline of `timeoutMs`. */
function deadline(timeoutMs: number, signal: AbortSignal | undefined): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal === undefined ? timeout : AbortSignal.any([timeout, signal]);
}

/**
 * Settle with `promise`, or reject with `signal.reason` as soon as it aborts
 * (the HTTP request is cancelled through the same signal; this only makes sure
 * no caller waits past the deadline for the library's error path).
 */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/**
 * TokenReview (`authentication.k8s.io/v1`) with the server's default audiences.
 *
 * @returns a reviewer; it rejects with a `TimeoutError` DOMException past
 *   `timeoutMs` (the request is aborted), with the caller's `signal.reason`
 *   when that aborts first, or with client-node's `ApiException` on an error answer
 */
export function tokenReviewer(kc: KubeConfig, options: ReviewOptions = {}): TokenReviewer {
  const api = kc.makeApiClient(AuthenticationV1Api);
  const timeoutMs = options.timeoutMs ?? KUBE_API_TIMEOUT_MS;
  return async (token, signal) => {
    const abort = deadline(timeoutMs, signal);
    const review = await untilAborted(
      api.createTokenReview({ body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } } }, withSignal(abort)),
      abort,
    );
    const status = review.status ?? { authenticated: false };
    return {
      authenticated: status.authenticated === true,
      ...(status.user ? { user: status.user } : {}),
      ...(status.error ? { error: status.error } : {}),
    };
  };
}

/**
 * SubjectAccessReview (`authorization.k8s.io/v1`).
 *
 * @returns a reviewer; it rejects with a `TimeoutError` DOMException past
 *   `timeoutMs` (the request is aborted), with the caller's `signal.reason`
 *   when that aborts first, or with client-node's `ApiException` on an error answer
 */
export function subjectAccessReviewer(kc: KubeConfig, options: ReviewOptions = {}): SubjectAccessReviewer {
  const api = kc.makeApiClient(AuthorizationV1Api);
  const timeoutMs = options.timeoutMs ?? KUBE_API_TIMEOUT_MS;
  return async (spec: SubjectAccessReviewSpec, signal) => {
    const abort = deadline(timeoutMs, signal);
    const review = await untilAborted(
      api.createSubjectAccessReview(
        { body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: spec as never } },
        withSignal(abort),
      ),
      abort,
    );
    const status = review.status;
    return {
      allowed: status?.allowed === true,
      ...(status?.denied !== undefined ? { denied: status.denied } : {}),
      ...(status?.reason ? { reason: status.reason } : {}),
      ...(status?.evaluationError ? { evaluationError: status.evaluationError } : {}),
    };
  };
}

/** The HTTP status of a client-node `ApiException` (undefined for other errors). */
export function apiStatus(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}
