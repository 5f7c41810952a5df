/**
 * Entry point of the in-cluster proxy (`node functions/proxy/main.ts --help`).
 *
 * Reads the ProxyConfig file, the signing keys (`BRIDGE_SIGNING_KEYS`), the
 * Kubernetes client configuration (in-cluster ServiceAccount or
 * `--kubeconfig`), the serving certificate (files, a shared Secret, or
 * generated), follows `kube-system/extension-apiserver-authentication`, and
 * serves the External Metrics API over HTTPS (`--secure-port`, with the
 * limits of shared/http-limits.ts `PROXY_LIMITS`: `--max-connections`,
 * `--headers-timeout-seconds`, `--request-timeout-seconds`,
 * `--keep-alive-timeout-seconds`) and, with an `admission` section in the
 * ProxyConfig, the admission webhook on a listener of its own
 * (`--admission-port`, shared/proxy/admission/admission-server.ts) until SIGTERM/SIGINT,
 * which drain them gracefully. A start that fails (a port taken, an unusable
 * `admission.clientCA`) is one line on stderr and exit 2.
 */
import { readFileSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import { ConfigError } from "../../shared/config/yaml.ts";
import { parseSigningKeys, SIGNING_KEYS_ENV, SigningKeyError, type SigningKey } from "../../shared/signing.ts";
import { AUTHENTICATION_CONFIGMAP, watchAuthenticationConfig } from "../../shared/proxy/authn/authn-config.ts";
import { readProxyConfig, type ProxyConfig } from "../../shared/proxy/config.ts";
import { loadKubeConfig } from "../../shared/proxy/kube/client.ts";
import { jsonLogger } from "../../shared/proxy/log.ts";
import { subjectAccessReviewer } from "../../shared/proxy/authz/subject-access-review.ts";
import { tokenReviewer } from "../../shared/proxy/authn/token-review.ts";
import { parseLevel, type Level } from "../../shared/observability/log.ts";

/** `--log-level`: a level of the shared logger (`shared/observability/log.ts`). */
function logLevel(value: string): Level {
  try {
    return parseLevel(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}
import { startProxy } from "../../shared/proxy/server.ts";
import { DEFAULT_ROTATION } from "../../shared/proxy/tls/rotation.ts";
import { startServing, type Serving } from "../../shared/proxy/tls/serving.ts";
import { DEFAULT_ADMISSION_PORT } from "../../shared/proxy/admission/admission-server.ts";
import { PROXY_LIMITS } from "../../shared/http-limits.ts";
import type { ServingSource } from "../../shared/proxy/tls/tls.ts";

const SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/** The command line. */
export function proxyCommand(): Command {
  return new Command()
    .name("external-metrics-bridge-proxy")
    .description(
      "In-cluster proxy for external.metrics.k8s.io: authenticates (front proxy, client certificates, TokenReview), " +
        "authorizes (SubjectAccessReview), routes metrics to bridge functions, an existing adapter or the bridge in this " +
        `process (type inProcess), signs requests forwarded to bridge functions with ${SIGNING_KEYS_ENV}, and registers the APIService.`,
    )
    .addOption(new Option("--config <file>", "ProxyConfig YAML (backends, routes, passthrough, cache)").env("PROXY_CONFIG_FILE").makeOptionMandatory())
    .addOption(new Option("--bind-address <address>", "address to listen on").default("0.0.0.0"))
    .addOption(new Option("--secure-port <port>", "HTTPS port").default(6443).argParser(port))
    .addOption(
      new Option("--admission-port <port>", "HTTPS port of the admission webhook, a listener of its own (only with an admission section in the ProxyConfig; 0 picks a free one)")
        .default(DEFAULT_ADMISSION_PORT)
        .argParser(port),
    )
    .addOption(new Option("--max-connections <n>", "most open connections on the HTTPS port; more are closed at once").default(PROXY_LIMITS.maxConnections).argParser(positiveInteger))
    .addOption(
      new Option("--headers-timeout-seconds <s>", "HTTPS port: longest wait for a request's headers (also the TLS handshake and a new connection's silence)")
        .default(PROXY_LIMITS.headersTimeoutMs / 1000)
        .argParser(positiveSeconds),
    )
    .addOption(new Option("--request-timeout-seconds <s>", "HTTPS port: longest wait for a whole request").default(PROXY_LIMITS.requestTimeoutMs / 1000).argParser(positiveSeconds))
    .addOption(
      new Option("--keep-alive-timeout-seconds <s>", "HTTPS port: how long an idle keep-alive connection is kept (longer than the aggregator's 90 s)")
        .default(PROXY_LIMITS.keepAliveTimeoutMs / 1000)
        .argParser(positiveSeconds),
    )
    .addOption(new Option("--kubeconfig <file>", "kubeconfig for the Kubernetes API (default: in-cluster ServiceAccount)").env("KUBECONFIG"))
    .addOption(new Option("--tls-cert-file <file>", "serving certificate (PEM); with --tls-private-key-file"))
    .addOption(new Option("--tls-private-key-file <file>", "serving key (PEM)"))
    .addOption(new Option("--tls-ca-file <file>", "CA bundle of the serving certificate, published as the APIService caBundle"))
    .addOption(
      new Option(
        "--tls-secret <namespace/name>",
        "Secret holding the serving certificate; created with a generated CA and certificate when absent (shared by all replicas)",
      ),
    )
    .addOption(
      new Option("--tls-cert-validity-seconds <s>", "with --tls-secret: validity of serving certificates the proxy issues (renewed with 1/3 left)")
        .default(DEFAULT_ROTATION.certValiditySeconds)
        .argParser(seconds),
    )
    .addOption(
      new Option("--tls-ca-validity-seconds <s>", "with --tls-secret: validity of the CA (rotated with overlap with 1/3 left); >= 3 x the certificate validity")
        .default(DEFAULT_ROTATION.caValiditySeconds)
        .argParser(seconds),
    )
    .addOption(
      new Option("--tls-rotation-overlap-seconds <s>", "with --tls-secret: time between the steps of a CA rotation (both CAs in caBundle meanwhile)")
        .default(DEFAULT_ROTATION.overlapSeconds)
        .argParser(seconds),
    )
    .addOption(new Option("--leader-elect-lease <namespace/name>", "Lease electing the one replica that renews the Secret and writes the APIService (default: the Secret's namespace/name)"))
    .addOption(new Option("--leader-elect-identity <id>", "this replica's identity in the Lease (default: POD_NAME, else hostname_uuid)").env("POD_NAME"))
    .addOption(new Option("--leader-elect-lease-duration-seconds <s>", "how long a Lease holds after its last renewal").default(15).argParser(seconds))
    .addOption(new Option("--leader-elect-renew-deadline-seconds <s>", "the holder stops acting after failing to renew this long").default(10).argParser(seconds))
    .addOption(new Option("--leader-elect-retry-period-seconds <s>", "how often candidates try and the holder renews").default(2).argParser(seconds))
    .addOption(new Option("--service-name <name>", "the proxy's Service (certificate names, APIService)").default("external-metrics-bridge-proxy"))
    .addOption(new Option("--service-namespace <namespace>", "the Service's namespace (default: the pod's namespace)").env("POD_NAMESPACE"))
    .addOption(new Option("--service-port <port>", "the Service's port").default(443).argParser(port))
    .addOption(new Option("--no-register", "do not create/update APIService v1beta1.external.metrics.k8s.io"))
    .addOption(
      new Option("--authentication-configmap <namespace/name>", "where kube-apiserver publishes front-proxy and client CA settings").default(
        `${AUTHENTICATION_CONFIGMAP.namespace}/${AUTHENTICATION_CONFIGMAP.name}`,
      ),
    )
    .addOption(new Option("--no-token-review", "do not authenticate bearer tokens with TokenReview"))
    .addOption(
      new Option("--authorization-webhook-cache-authorized-ttl <duration>", "how long an allowed SubjectAccessReview answer is re-used (e.g. 20s)").default(20_000, "20s").argParser(durationMs),
    )
    .addOption(
      new Option("--authorization-webhook-cache-unauthorized-ttl <duration>", "how long a denied SubjectAccessReview answer is re-used (e.g. 10s)").default(10_000, "10s").argParser(durationMs),
    )
    .addOption(new Option("--authentication-token-webhook-cache-ttl <duration>", "how long TokenReview answers are re-used (e.g. 10s)").default(10_000, "10s").argParser(durationMs))
    .addOption(
      new Option("--kube-api-timeout-seconds <s>", "deadline of each TokenReview and SubjectAccessReview; the request is cancelled past it").default(2).argParser(positiveSeconds),
    )
    .addOption(new Option("--readiness-interval-seconds <s>", "period of the readiness loop, which also refreshes the discovery list held from backends").default(10).argParser(seconds))
    .addOption(new Option("--shutdown-delay-seconds <s>", "on SIGTERM, stay up unready this long before closing the listener").default(5).argParser(seconds))
    .addOption(new Option("--drain-timeout-seconds <s>", "longest wait for in-flight requests on shutdown").default(20).argParser(seconds))
    .addOption(new Option("--log-level <level>", "lowest level logged: debug, info, warn, error").env("LOG_LEVEL").default("info").argParser(logLevel))
    .addHelpText(
      "after",
      `
Environment:
  ${SIGNING_KEYS_ENV}    id:secret[,id:secret] — HMAC keys (base64, >= 32 bytes); the first signs requests to bridge backends
                         (not needed for inProcess backends). Mount from a Secret; never put keys in the config file.
  AWS_*, GOOGLE_*        cloud credentials of inProcess backends' providers (the SDK default chains, as the Node bridge).
  PROXY_CONFIG_FILE      same as --config
  POD_NAMESPACE          same as --service-namespace

Serving certificate: --tls-cert-file/--tls-private-key-file[/--tls-ca-file] (re-read when they change),
else --tls-secret (every replica follows the Secret and reloads it; the holder of a Lease alone renews it,
rotating the CA with overlap, and writes the APIService), else generated in memory (one replica, local runs).

Example (in a cluster):
  node functions/proxy/main.ts --config /etc/external-metrics-bridge/proxy.yaml \\
    --tls-secret external-metrics-bridge/external-metrics-bridge-proxy-tls`,
    );
}

function port(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`not a TCP port: ${text}`);
  return n;
}

function seconds(text: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new Error(`not a number of seconds: ${text}`);
  return n;
}

function positiveInteger(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`not a positive integer: ${text}`);
  return n;
}

function positiveSeconds(text: string): number {
  const n = seconds(text);
  if (n <= 0) throw new Error(`must be more than 0 seconds: ${text}`);
  return n;
}

/** A Go-style duration as apiserver's flags take it (`20s`, `1m`, `1m30s`, `500ms`), or bare seconds; in ms. */
function durationMs(text: string): number {
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) throw new Error(`not a duration (e.g. 10s, 1m): ${text}`);
  return parts.reduce((sum, p) => sum + Number(p[1]) * units[p[2]!]!, 0);
}

function namespacedName(text: string, flag: string): { namespace: string; name: string } {
  const [namespace, name, ...rest] = text.split("/");
  if (!namespace || !name || rest.length > 0) throw new Error(`${flag} must be namespace/name, got ${JSON.stringify(text)}`);
  return { namespace, name };
}

function podNamespace(flag: string | undefined): string {
  if (flag) return flag;
  try {
    return readFileSync(SA_NAMESPACE_FILE, "utf8").trim();
  } catch {
    return "external-metrics-bridge";
  }
}

async function main(argv: string[]): Promise<void> {
  const opts = proxyCommand().parse(argv).opts<{
    config: string;
    bindAddress: string;
    securePort: number;
    admissionPort: number;
    maxConnections: number;
    headersTimeoutSeconds: number;
    requestTimeoutSeconds: number;
    keepAliveTimeoutSeconds: number;
    kubeconfig?: string;
    tlsCertFile?: string;
    tlsPrivateKeyFile?: string;
    tlsCaFile?: string;
    tlsSecret?: string;
    tlsCertValiditySeconds: number;
    tlsCaValiditySeconds: number;
    tlsRotationOverlapSeconds: number;
    leaderElectLease?: string;
    leaderElectIdentity?: string;
    leaderElectLeaseDurationSeconds: number;
    leaderElectRenewDeadlineSeconds: number;
    leaderElectRetryPeriodSeconds: number;
    serviceName: string;
    serviceNamespace?: string;
    servicePort: number;
    register: boolean;
    authenticationConfigmap: string;
    tokenReview: boolean;
    authorizationWebhookCacheAuthorizedTtl: number;
    authorizationWebhookCacheUnauthorizedTtl: number;
    authenticationTokenWebhookCacheTtl: number;
    kubeApiTimeoutSeconds: number;
    readinessIntervalSeconds: number;
    shutdownDelaySeconds: number;
    drainTimeoutSeconds: number;
    logLevel: Level;
  }>();
  const log = jsonLogger(Date.now, opts.logLevel);
  const fail = (message: string): never => {
    console.error(message);
    process.exit(2);
  };

  let config: ProxyConfig;
  try {
    config = readProxyConfig(opts.config);
  } catch (err) {
    return fail(err instanceof ConfigError ? `invalid config:\n${err.message}` : (err as Error).message);
  }
  let signingKeys: SigningKey[] | undefined;
  const keysText = process.env[SIGNING_KEYS_ENV];
  if (keysText !== undefined && keysText.trim() !== "") {
    try {
      signingKeys = parseSigningKeys(keysText);
    } catch (err) {
      return fail((err as SigningKeyError).message);
    }
  }
  if ((opts.tlsCertFile === undefined) !== (opts.tlsPrivateKeyFile === undefined)) fail("--tls-cert-file and --tls-private-key-file go together");

  const service = { namespace: podNamespace(opts.serviceNamespace), name: opts.serviceName };
  const kc = loadKubeConfig(opts.kubeconfig);
  const source: ServingSource = opts.tlsCertFile
    ? { kind: "files", certFile: opts.tlsCertFile, keyFile: opts.tlsPrivateKeyFile!, ...(opts.tlsCaFile ? { caFile: opts.tlsCaFile } : {}) }
    : opts.tlsSecret
      ? { kind: "secret", ...namespacedName(opts.tlsSecret, "--tls-secret") }
      : { kind: "generate" };
  let serving: Serving;
  try {
    serving = await startServing({
      source,
      service,
      kc,
      log,
      rotation: {
        certValiditySeconds: opts.tlsCertValiditySeconds,
        caValiditySeconds: opts.tlsCaValiditySeconds,
        overlapSeconds: opts.tlsRotationOverlapSeconds,
      },
      leaderElection: {
        ...(opts.leaderElectLease ? { lease: namespacedName(opts.leaderElectLease, "--leader-elect-lease") } : {}),
        ...(opts.leaderElectIdentity ? { identity: opts.leaderElectIdentity } : {}),
        leaseDurationSeconds: opts.leaderElectLeaseDurationSeconds,
        renewDeadlineSeconds: opts.leaderElectRenewDeadlineSeconds,
        retryPeriodSeconds: opts.leaderElectRetryPeriodSeconds,
      },
    });
  } catch (err) {
    return fail((err as Error).message);
  }
  const cm = namespacedName(opts.authenticationConfigmap, "--authentication-configmap");
  const authentication = watchAuthenticationConfig(kc, log, cm);

  let proxy: Awaited<ReturnType<typeof startProxy>>;
  try {
    proxy = await startProxy({
      config,
      serving: serving.material,
      authentication,
      ...(opts.tokenReview ? { tokenReview: tokenReviewer(kc, { timeoutMs: opts.kubeApiTimeoutSeconds * 1000 }) } : {}),
      subjectAccessReview: subjectAccessReviewer(kc, { timeoutMs: opts.kubeApiTimeoutSeconds * 1000 }),
      authorization: {
        allowedTtlMs: opts.authorizationWebhookCacheAuthorizedTtl,
        deniedTtlMs: opts.authorizationWebhookCacheUnauthorizedTtl,
        timeoutMs: opts.kubeApiTimeoutSeconds * 1000,
      },
      tokenAuthentication: { tokenCacheTtlMs: opts.authenticationTokenWebhookCacheTtl, tokenReviewTimeoutMs: opts.kubeApiTimeoutSeconds * 1000 },
      ...(signingKeys ? { signingKeys } : {}),
      // The cluster policy layer (ProxyConfig clusterPolicies.enabled): status written by the Lease holder when there is a Lease.
      ...(config.clusterPolicies?.enabled ? { clusterPolicies: { kc, ...(serving.isLeader ? { isLeader: serving.isLeader } : {}) } } : {}),
      // custom.metrics.k8s.io (ProxyConfig customMetrics.enabled): the pod informer and object reads use the proxy's own client.
      ...(config.customMetrics?.enabled ? { kube: kc } : {}),
      ...(opts.register
        ? { registration: { kc, target: { service: { ...service, port: opts.servicePort } }, ...(serving.isLeader ? { isLeader: serving.isLeader } : {}) } }
        : {}),
      host: opts.bindAddress,
      port: opts.securePort,
      admissionPort: opts.admissionPort,
      limits: {
        maxConnections: opts.maxConnections,
        headersTimeoutMs: opts.headersTimeoutSeconds * 1000,
        requestTimeoutMs: opts.requestTimeoutSeconds * 1000,
        keepAliveTimeoutMs: opts.keepAliveTimeoutSeconds * 1000,
      },
      log,
      readinessIntervalMs: opts.readinessIntervalSeconds * 1000,
      shutdownDelayMs: opts.shutdownDelaySeconds * 1000,
      drainTimeoutMs: opts.drainTimeoutSeconds * 1000,
    });
  } catch (err) {
    // a port taken, an unreadable admission.clientCA, …: one line, exit 2
    await serving.stop().catch(() => {});
    return fail((err as Error).message);
  }
  log({
    level: "info",
    msg: "proxy listening",
    url: `https://${opts.bindAddress}:${proxy.port}`,
    backends: config.backends.map((b) => `${b.name}(${b.type})`),
    routes: config.routes.length,
    passthrough: config.passthrough ?? null,
    registration: opts.register,
    clusterPolicies: config.clusterPolicies?.enabled ? config.clusterPolicies.whenNoneApply : "off",
    admission: proxy.admission ? { url: `https://${opts.bindAddress}:${proxy.admission.port}`, clientCertificates: proxy.admission.authenticating ? "required" : "not checked" } : "off",
  });

  serving.onChange((next) => proxy.setServing(next));

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      log({ level: "info", msg: `received ${signal}` });
      // Hand the Lease over at once (another replica takes over at its next retry), then drain.
      Promise.all([proxy.close(), serving.stop()]).then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  }
}

if (import.meta.main) await main(process.argv);
