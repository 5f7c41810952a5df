/**
 * The proxy's HTTPS server: Node's `https` with `requestCert: true,
 * rejectUnauthorized: false` (the handshake asks for a client certificate,
 * the authenticator decides what it proves), the Hono app through
 * `@hono/node-server`'s request listener, a readiness loop, optional
 * APIService self-registration, and graceful shutdown. With ProxyConfig
 * `admission`, the admission webhook runs on a second listener of its own
 * (admission/admission-server.ts); the API listener does not serve its paths.
 *
 * Limits of the API listener ({@link PROXY_LIMITS}, shared/http-limits.ts):
 * headers 10 s (also the TLS handshake and a new connection's silence), a
 * request 30 s, keep-alive 95 s (longer than the aggregator's 90 s idle
 * timeout), 512 connections, deadlines checked every second.
 *
 * Readiness (`/readyz`) is the proxy's own state: the authentication
 * ConfigMap loaded, a serving certificate present, not shutting down. It
 * never depends on a backend (discovery is served from held state, see
 * forward/forward.ts). The APIService is registered once the proxy is ready. The
 * readiness loop also refreshes the held discovery list.
 *
 * Shutdown (`close()`): `/readyz` turns 503 at once; after `shutdownDelayMs`
 * (time for the endpoints controller to take the pod out of the Service) the
 * listener stops accepting, idle keep-alive connections are closed, in-flight
 * requests finish, and connections still open after `drainTimeoutMs` are cut.
 */
import { getRequestListener } from "@hono/node-server";
import https from "node:https";
import type { AddressInfo } from "node:net";
import type { SigningKey } from "../signing.ts";
import { createProxyApp } from "./app.ts";
import type { AuthenticationConfigSource } from "./authn/authn-config.ts";
import { Authenticator, type AuthenticatorOptions, type TokenReviewer } from "./authn/authenticate.ts";
import { Authorizer, type AuthorizerOptions, type SubjectAccessReviewer } from "./authz/authorize.ts";
import { createBackend } from "./forward/backends.ts";
import { routeFor, type ProxyConfig } from "./config.ts";
import { AdmissionWebhook } from "./admission/admission.ts";
import { ADMISSION_LIMITS, readClientCA, startAdmissionServer, type AdmissionLimits, type AdmissionServer } from "./admission/admission-server.ts";
import { applyServerLimits, checkLimits, PROXY_LIMITS, serverOptions, type ServerLimits } from "../http-limits.ts";
import type { PolicySet } from "../policy/evaluate.ts";
import { Forwarder } from "./forward/forward.ts";
import type { KubeClient } from "./kube/client.ts";
import { ObjectReader } from "./custom/objects.ts";
import { PodIndex } from "./custom/pods.ts";
import type { Logger } from "./log.ts";
import { createMetrics, recordRegistration, registerCacheSizes, registerServingCertificate, type ProxyMetrics } from "./metrics.ts";
import { ClusterPolicies, type ClusterPoliciesOptions } from "./policy/policies.ts";
import { createOffThreadCompiler } from "./policy/policy-worker.ts";
import { apiServicesFor, registerAPIService, registerWebhookCABundle, WEBHOOK_CONFIGURATION_NAME, type RegistrationTarget } from "./tls/registration.ts";
import type { ServingMaterial } from "./tls/serving-material.ts";

/** Everything {@link startProxy} needs. */
export interface ProxyOptions {
  config: ProxyConfig;
  serving: ServingMaterial;
  authentication: AuthenticationConfigSource;
  /** bearer-token authentication; undefined turns it off */
  tokenReview?: TokenReviewer;
  subjectAccessReview: SubjectAccessReviewer;
  /** SubjectAccessReview cache TTLs and deadline (authz/authorize.ts defaults: allowed 20 s, denied 10 s, deadline 2 s) */
  authorization?: Pick<AuthorizerOptions, "allowedTtlMs" | "deniedTtlMs" | "timeoutMs">;
  /** TokenReview cache TTL and deadline (authn/authenticate.ts defaults: 10 s, 2 s) */
  tokenAuthentication?: Pick<AuthenticatorOptions, "tokenCacheTtlMs" | "tokenReviewTimeoutMs">;
  /** the keys of BRIDGE_SIGNING_KEYS (first signs); required when a backend has type bridge */
  signingKeys?: readonly SigningKey[];
  /**
   * APIService self-registration; undefined turns it off. `isLeader`: with
   * several replicas, only the one it answers true for writes (the holder of
   * the serving-certificate Lease, see `tls/lease.ts`); the others never do.
   */
  registration?: { kc: KubeClient; target: Omit<RegistrationTarget, "caPem">; intervalMs?: number; isLeader?: () => boolean };
  /**
   * How the cluster policy layer reaches the API (policy/policies.ts), used when the
   * ProxyConfig has `clusterPolicies.enabled`; `isLeader`: the replica that
   * writes the objects' status (the Lease holder). Required then.
   */
  clusterPolicies?: Omit<ClusterPoliciesOptions, "whenNoneApply" | "log" | "metrics">;
  /**
   * How custom.metrics.k8s.io reads reach the API (the pod metadata
   * informer, the described objects' GETs: custom/pods.ts, custom/objects.ts),
   * with the proxy's own ServiceAccount. Required when the ProxyConfig has
   * `customMetrics.enabled`.
   */
  kube?: KubeClient;
  host?: string;
  /** TCP port; 0 picks a free one */
  port?: number;
  log: Logger;
  now?: () => number;
  /** period of the readiness loop (readiness, registration trigger, discovery refresh), ms (default 10 000) */
  readinessIntervalMs?: number;
  /** wait after turning unready before closing the listener, ms (default 0; the chart sets 5 000) */
  shutdownDelayMs?: number;
  /** longest wait for in-flight requests, ms (default 20 000) */
  drainTimeoutMs?: number;
  /** add Node process metrics to /metrics (default true) */
  processMetrics?: boolean;
  /**
   * the cluster policies the admission webhook evaluates (ClusterPolicies.current);
   * the webhook is served when `config.admission` is set (without this, it checks no policy)
   */
  admissionPolicies?: () => PolicySet | undefined;
  /** the admission listener's TCP port (default 8443, `DEFAULT_ADMISSION_PORT`; 0 picks a free one); on `host` */
  admissionPort?: number;
  /** overrides of the admission listener's limits (admission/admission-server.ts `ADMISSION_LIMITS`) */
  admissionLimits?: Partial<AdmissionLimits>;
  /** overrides of the API listener's limits ({@link PROXY_LIMITS}: ms and connections) */
  limits?: Partial<ServerLimits>;
}

/** A running proxy. */
export interface RunningProxy {
  /** `https://127.0.0.1:PORT` */
  url: string;
  port: number;
  /** the admission webhook's listener when ProxyConfig `admission` is set: its URL, port and whether it authenticates callers */
  admission?: Pick<AdmissionServer, "url" | "port" | "authenticating">;
  metrics: ProxyMetrics;
  authenticator: Authenticator;
  authorizer: Authorizer;
  forwarder: Forwarder;
  /** the cluster policy layer when `clusterPolicies.enabled` (its `current()` policy set and readiness) */
  clusterPolicies?: ClusterPolicies;
  /** reasons it is not ready (empty = ready) */
  notReady(): string[];
  /**
   * Run a readiness round now: register the APIService when the proxy is
   * ready and not yet registered, refresh the held discovery list; resolves
   * to whether the proxy is ready (its own state, never a backend's).
   */
  checkReadiness(): Promise<boolean>;
  /** replace the serving certificate (e.g. rotated files) */
  setServing(serving: ServingMaterial): void;
  /** graceful shutdown */
  close(): Promise<void>;
}

/**
 * Start the proxy.
 *
 * @throws Error when a bridge backend is configured without signing keys,
 *   ProxyConfig `admission.clientCA` cannot be read or holds no CA
 *   certificate, or a port cannot be bound; RangeError when a limit is not positive
 */
export async function startProxy(options: ProxyOptions): Promise<RunningProxy> {
  const { config, log } = options;
  const now = options.now ?? Date.now;
  if (config.backends.some((b) => b.type === "bridge") && (options.signingKeys === undefined || options.signingKeys.length === 0)) {
    throw new Error("a backend has type bridge but no signing key is configured: set BRIDGE_SIGNING_KEYS (id:secret[,id:secret])");
  }
  // The listener's limits and the admission listener's client CA, checked before anything starts.
  const limits: ServerLimits = { ...PROXY_LIMITS, ...options.limits };
  checkLimits(limits);
  checkLimits({ ...ADMISSION_LIMITS, ...options.admissionLimits });
  const clientCAPem = config.admission?.clientCA !== undefined ? readClientCA(config.admission.clientCA) : undefined;
  const metrics = createMetrics(options.processMetrics ?? true);
  const clients = new Map(await Promise.all(config.backends.map(async (b) => [b.name, await createBackend(b, { signingKeys: () => options.signingKeys, now, log, registry: metrics.registry })] as const)));
  const authenticator = new Authenticator({
    config: options.authentication,
    ...(options.tokenReview ? { tokenReview: options.tokenReview } : {}),
    ...options.tokenAuthentication,
    now,
  });
  const authorizer = new Authorizer({
    review: options.subjectAccessReview,
    ...options.authorization,
    now,
    onReview: (trigger) => metrics.subjectAccessReviews.inc({ trigger }),
  });
  const forwarder = new Forwarder({ config, clients, metrics, log, now });
  registerCacheSizes(metrics, () => {
    const { authenticated, anonymous } = authorizer.cacheStats();
    const values = forwarder.valuesCache;
    return {
      values: { entries: values.size, bytes: values.bytes },
      authorization: authenticated,
      "authorization-anonymous": anonymous,
      "request-memo": authorizer.requestMemoStats(),
      "token-review": authenticator.tokenCacheStats(),
      "route-memo": forwarder.routeMemo,
      // custom.metrics.k8s.io (customMetrics.enabled): the pod index and the group resource → URL cache
      ...(pods !== undefined ? { "custom-pods": pods.stats } : {}),
      ...(objects !== undefined ? { "custom-resources": objects.cacheStats } : {}),
    };
  });
  if (config.customMetrics?.enabled === true && options.kube === undefined) {
    throw new Error("the ProxyConfig sets customMetrics.enabled but the proxy has no Kubernetes client to list pods and read objects");
  }
  const customSettings = config.customMetrics?.enabled === true ? config.customMetrics : undefined;
  const pods = customSettings !== undefined ? new PodIndex({ kc: options.kube!, ...customSettings.pods, log, now }) : undefined;
  const objects = customSettings !== undefined ? new ObjectReader({ kc: options.kube!, ...customSettings.objects, now }) : undefined;
  if (config.clusterPolicies?.enabled === true && options.clusterPolicies === undefined) {
    throw new Error("the ProxyConfig sets clusterPolicies.enabled but the proxy has no Kubernetes client to watch the policy objects");
  }
  // Policy objects are compiled in a worker thread of their own (policy/policy-worker.ts: a
  // CPU budget per object, fail closed past it), so no object, and no queue of hostile
  // admission reviews in the webhook's worker, holds the request loop or delays a rebuild.
  const watched = config.clusterPolicies?.enabled === true ? options.clusterPolicies : undefined;
  const policyCompiler = watched !== undefined && watched.compile === undefined ? createOffThreadCompiler() : undefined;
  const clusterPolicies =
    watched !== undefined && config.clusterPolicies !== undefined
      ? new ClusterPolicies({
          ...(policyCompiler !== undefined ? { compile: policyCompiler.compile } : {}),
          ...clusterPolicySettings(config.clusterPolicies, watched),
          whenNoneApply: config.clusterPolicies.whenNoneApply,
          log,
          metrics,
        })
      : undefined;
  clusterPolicies?.start();

  let shuttingDown = false;
  let registered = false;
  let serving = options.serving;
  let servingSince = now(); // since when serving.caPem is current (tls/registration.ts: a replica with newer material is not overwritten)
  registerServingCertificate(metrics, () => serving.certPem);
  // Readiness is the proxy's own state only. A remote backend being down
  // must not make it unready: an unready pod leaves the Service without
  // endpoints, the aggregator marks the APIService FailedDiscoveryCheck, and
  // namespace deletion and discovery break for the whole cluster
  // (kube-aggregator remote_available_controller.go).
  const notReady = (): string[] => {
    const reasons: string[] = [];
    if (shuttingDown) reasons.push("shutting down");
    if (options.authentication.current() === undefined) reasons.push("the authentication ConfigMap is not loaded");
    if (!serving.certPem || !serving.keyPem) reasons.push("no serving certificate");
    return reasons;
  };

  const admission =
    config.admission !== undefined
      ? new AdmissionWebhook({
          policies: options.admissionPolicies ?? (clusterPolicies ? () => (clusterPolicies.ready() ? clusterPolicies.current() : undefined) : () => undefined),
          mode: config.admission.mode,
          ...(config.clusterPolicies ? { whenNoneApply: config.clusterPolicies.whenNoneApply } : {}),
          serves: (key) => routeFor(config, key) !== undefined,
        })
      : undefined;
  const app = createProxyApp({
    authenticator,
    authorizer,
    forwarder,
    metrics,
    log,
    notReady,
    ...(clusterPolicies ? { clusterPolicies } : {}),
    ...(pods !== undefined && objects !== undefined ? { custom: { pods, objects, timeoutMs: customSettings!.objects.timeoutMs } } : {}),
  });
  const listener = getRequestListener(app.fetch);
  const server = https.createServer(
    {
      cert: options.serving.certPem,
      key: options.serving.keyPem,
      requestCert: true,
      rejectUnauthorized: false,
      minVersion: "TLSv1.2",
      handshakeTimeout: limits.headersTimeoutMs,
      // Request line + headers; Node answers 431 past it (the app refuses long targets and selectors itself, see app.ts).
      maxHeaderSize: 32 * 1024,
      ...serverOptions(limits),
    },
    (req, res) => void listener(req, res),
  );
  applyServerLimits(server, limits, (dropped) => log({ level: "warn", msg: `API listener at its ${limits.maxConnections} connections: ${dropped} refused in the last 10 s` }));

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 6443, options.host ?? "0.0.0.0", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  let admissionServer: AdmissionServer | undefined;
  if (admission !== undefined) {
    try {
      admissionServer = await startAdmissionServer({
        webhook: admission,
        serving: options.serving,
        ...(clientCAPem !== undefined ? { clientCAPem } : {}),
        host: options.host ?? "0.0.0.0",
        ...(options.admissionPort !== undefined ? { port: options.admissionPort } : {}),
        ...(options.admissionLimits !== undefined ? { limits: options.admissionLimits } : {}),
        log,
        metrics,
      });
    } catch (err) {
      server.close();
      await clusterPolicies?.stop();
      await admission.close();
      await policyCompiler?.close();
      throw err;
    }
    log({ level: "info", msg: "admission webhook listening", url: `https://${options.host ?? "0.0.0.0"}:${admissionServer.port}`, clientCertificates: admissionServer.authenticating ? "required" : "not checked" });
  }

  const register = async () => {
    const reg = options.registration;
    if (reg === undefined || serving.caPem === undefined || shuttingDown) return;
    if (reg.isLeader !== undefined && !reg.isLeader()) return; // one writer: the Lease holder
    // v1beta1.external.metrics.k8s.io, and with customMetrics.enabled v1beta2 and v1beta1 of custom.metrics.k8s.io.
    let all = true;
    for (const apiService of apiServicesFor(customSettings !== undefined)) {
      try {
        const outcome = await registerAPIService(reg.kc, { ...reg.target, ...apiService, caPem: serving.caPem, since: servingSince }, { now });
        log({ level: outcome === "unchanged" ? "info" : "warn", msg: "APIService registration", apiService: `${apiService.version}.${apiService.group}`, outcome });
      } catch (err) {
        all = false;
        log({ level: "error", msg: "APIService registration failed", apiService: `${apiService.version}.${apiService.group}`, error: (err as Error).message });
      }
    }
    registered = all;
    recordRegistration(metrics, all, now());
    if (config.admission === undefined) return;
    // The admission webhook is served with the same certificate: the same CA bundle (an absent configuration stays absent).
    try {
      const outcome = await registerWebhookCABundle(reg.kc, { service: reg.target.service, caPem: serving.caPem, since: servingSince }, undefined, { now });
      if (outcome !== "absent") log({ level: outcome === "unchanged" ? "info" : "warn", msg: "webhook caBundle", webhookConfiguration: WEBHOOK_CONFIGURATION_NAME, outcome });
    } catch (err) {
      log({ level: "error", msg: "webhook caBundle update failed", webhookConfiguration: WEBHOOK_CONFIGURATION_NAME, error: (err as Error).message });
    }
  };
  if (options.registration !== undefined && options.serving.caPem === undefined) {
    log({ level: "error", msg: "APIService registration is on but the CA of the serving certificate is unknown (pass --tls-ca-file); not registering" });
  }

  let wasReady: boolean | undefined;
  let registering: Promise<void> | undefined;
  /**
   * One readiness round: publish readiness (the proxy's own state), register
   * the APIService once ready (never waiting on a backend), and refresh the
   * held discovery list (backends' answers only change what discovery lists).
   * Resolves, after the refresh, to whether the proxy is ready.
   */
  const checkReadiness = async (): Promise<boolean> => {
    const reasons = notReady();
    const ready = reasons.length === 0;
    metrics.ready.set(ready ? 1 : 0);
    if (ready !== wasReady) log({ level: ready ? "info" : "warn", msg: ready ? "ready" : "not ready", ...(ready ? {} : { reasons }) });
    wasReady = ready;
    const refresh = forwarder.probe(`readiness-${crypto.randomUUID()}`);
    if (ready && !registered) {
      registering ??= register().finally(() => {
        registering = undefined;
      });
      await registering;
    }
    await refresh;
    return notReady().length === 0;
  };
  await checkReadiness();
  const readinessTimer = setInterval(() => void checkReadiness(), options.readinessIntervalMs ?? 10_000);
  readinessTimer.unref();
  const registrationTimer =
    options.registration !== undefined
      ? setInterval(() => {
          if (registered) void register(); // re-assert caBundle/service if someone changed them
        }, options.registration.intervalMs ?? 60_000)
      : undefined;
  registrationTimer?.unref();

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      shuttingDown = true;
      metrics.ready.set(0);
      clearInterval(readinessTimer);
      clearInterval(registrationTimer);
      log({ level: "info", msg: "shutting down: readiness off, draining" });
      if ((options.shutdownDelayMs ?? 0) > 0) await new Promise((r) => setTimeout(r, options.shutdownDelayMs));
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const admissionClosed = admissionServer?.close(options.drainTimeoutMs ?? 20_000);
      server.closeIdleConnections();
      const drain = options.drainTimeoutMs ?? 20_000;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timedOut = new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), drain);
      });
      // Keep-alive connections that become idle after their last answer are closed as they go.
      const idle = setInterval(() => server.closeIdleConnections(), 100);
      const outcome = await Promise.race([closed.then(() => "drained" as const), timedOut]);
      clearInterval(idle);
      clearTimeout(timer);
      if (outcome === "timeout") {
        log({ level: "warn", msg: `in-flight requests still open after ${drain} ms; closing their connections` });
        server.closeAllConnections();
        await closed;
      }
      await admissionClosed;
      forwarder.close();
      await pods?.stop();
      await clusterPolicies?.stop();
      await admission?.close();
      await policyCompiler?.close();
      await options.authentication.stop();
      log({ level: "info", msg: "shut down" });
    })();
    return closing;
  };

  return {
    url: `https://127.0.0.1:${port}`,
    port,
    ...(admissionServer !== undefined ? { admission: { url: admissionServer.url, port: admissionServer.port, authenticating: admissionServer.authenticating } } : {}),
    metrics,
    authenticator,
    authorizer,
    forwarder,
    ...(clusterPolicies ? { clusterPolicies } : {}),
    notReady,
    checkReadiness,
    setServing: (next) => {
      server.setSecureContext({ cert: next.certPem, key: next.keyPem });
      admissionServer?.setServing(next);
      const caChanged = next.caPem !== serving.caPem;
      serving = next;
      if (caChanged) servingSince = now();
      log({ level: "info", msg: "serving certificate reloaded" });
      if (caChanged && registered) void register();
    },
    close,
  };
}

/**
 * The cluster policy layer's settings from the ProxyConfig
 * (`clusterPolicies.limits`, `clusterPolicies.resyncTimeoutSeconds`, seconds
 * → `resyncTimeoutMs`, ms) under those a caller of {@link startProxy} gave
 * (`options.clusterPolicies`, which win field by field, limits included).
 * Absent everywhere: the defaults of policy/policies.ts.
 *
 * @param config the ProxyConfig's `clusterPolicies` section (config.ts)
 * @param given the caller's options (how the layer reaches the API, and test settings)
 */
export function clusterPolicySettings(
  config: ProxyConfig["clusterPolicies"],
  given: NonNullable<ProxyOptions["clusterPolicies"]>,
): NonNullable<ProxyOptions["clusterPolicies"]> {
  const limits = config?.limits !== undefined || given.limits !== undefined ? { ...config?.limits, ...given.limits } : undefined;
  return {
    ...(config?.resyncTimeoutSeconds !== undefined ? { resyncTimeoutMs: config.resyncTimeoutSeconds * 1000 } : {}),
    ...given,
    ...(limits !== undefined ? { limits } : {}),
  };
}
