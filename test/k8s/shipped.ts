/**
 * The shipped plain manifests (infra/manifests/external-metrics-bridge.yaml)
 * as end-to-end tests apply them to the local control plane, and the proxy
 * Deployment's arguments for a local proxy process; used by
 * the end-to-end suites (test/e2e/k8s*.e2e.test.ts).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments, stringify } from "yaml";
import { helmTemplate } from "../../infra/tools/validate.ts";
import { freePorts, startProcess, waitFor, type ControlPlane, type LoggedProcess } from "./cluster.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
/** The shipped plain manifests, relative to the repository root. */
export const MANIFESTS = "infra/manifests/external-metrics-bridge.yaml";
/** The proxy's namespace, Deployment and Service in the shipped manifests. */
export const PROXY_NS = "external-metrics-bridge";
export const PROXY_SERVICE = "external-metrics-bridge-proxy";

interface ManifestObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: { template?: { spec?: { containers?: { name: string; args?: string[] }[] } } };
}

/**
 * The shipped manifests, as a cluster admin would apply them, minus what
 * cannot run here: the Deployment (its `proxy` container's arguments are
 * returned for local proxy processes), the PodDisruptionBudget, the ConfigMap
 * and the APIService (the proxy registers it itself). The ClusterIP Service
 * becomes an ExternalName Service of the same name resolving to 127.0.0.1,
 * since Endpoints may not be loopback: the aggregator then dials
 * `127.0.0.1:<APIService spec.service.port>`.
 *
 * @param chartArgs when given, the chart rendered with these `helm template`
 *   arguments (`--set customMetrics.enabled=true`, …; infra/tools/validate.ts
 *   `helmTemplate`, the same render the plain manifests are) instead of the
 *   plain manifests: what a user who sets those values installs
 * @throws Error when the Deployment (with a `proxy` container and args) or the Service is missing
 */
export function shippedManifests(chartArgs?: readonly string[]): { install: object[]; proxyArgs: string[] } {
  const text = chartArgs === undefined ? readFileSync(join(ROOT, MANIFESTS), "utf8") : helmTemplate([...chartArgs]);
  const docs = parseAllDocuments(text)
    .map((d) => d.toJS() as ManifestObject | null)
    .filter((d): d is ManifestObject => d !== null);
  const deployment = docs.find((d) => d.kind === "Deployment" && d.metadata.name === PROXY_SERVICE);
  const args = deployment?.spec?.template?.spec?.containers?.find((c) => c.name === "proxy")?.args;
  if (args === undefined) throw new Error(`${MANIFESTS}: no Deployment ${PROXY_SERVICE} with a "proxy" container and args`);
  const install: object[] = [];
  for (const d of docs) {
    if (["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"].includes(d.kind)) install.push(d);
    else if (d.kind === "Service" && d.metadata.name === PROXY_SERVICE) {
      install.push({ apiVersion: "v1", kind: "Service", metadata: d.metadata, spec: { type: "ExternalName", externalName: "127.0.0.1" } });
    }
  }
  if (!install.some((d) => (d as ManifestObject).kind === "Service")) throw new Error(`${MANIFESTS}: no Service ${PROXY_SERVICE}`);
  return { install, proxyArgs: args };
}

/**
 * Every object of the shipped plain manifests whose `kind` is one of
 * `kinds` (e.g. `CustomResourceDefinition`, `ValidatingWebhookConfiguration`),
 * as parsed from {@link MANIFESTS}, in file order; for suites that install
 * more of the manifests than {@link shippedManifests} does.
 */
export function shippedObjects(kinds: readonly string[]): (Record<string, unknown> & ManifestObject)[] {
  return parseAllDocuments(readFileSync(join(ROOT, MANIFESTS), "utf8"))
    .map((d) => d.toJS() as (Record<string, unknown> & ManifestObject) | null)
    .filter((d): d is Record<string, unknown> & ManifestObject => d !== null && kinds.includes(d.kind));
}

/**
 * The ProxyConfig the shipped manifests mount (ConfigMap
 * `external-metrics-bridge-proxy-config`, key `proxy.yaml`), parsed: the
 * chart's defaults (cluster policies, admission, cache, discovery) for suites
 * that run the proxy as shipped, overriding only what must point at local
 * processes.
 *
 * @throws Error when the ConfigMap or its key is missing
 */
export function shippedProxyConfig(): Record<string, unknown> {
  const cm = shippedObjects(["ConfigMap"]).find((c) => c.metadata.name === `${PROXY_SERVICE}-config`) as { data?: Record<string, string> } | undefined;
  const text = cm?.data?.["proxy.yaml"];
  if (text === undefined) throw new Error(`${MANIFESTS}: no ConfigMap ${PROXY_SERVICE}-config with proxy.yaml`);
  return parse(text) as Record<string, unknown>;
}

/**
 * `--flag=value` / `--flag value` arguments with `overrides` replacing
 * (or adding, at the end as `--flag=value`) flags.
 */
export function withFlags(args: readonly string[], overrides: Record<string, string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const flag = arg.split("=")[0]!;
    if (flag in overrides) {
      if (!arg.includes("=") && !(args[i + 1] ?? "--").startsWith("--")) i++;
      continue;
    }
    out.push(arg);
  }
  for (const [flag, value] of Object.entries(overrides)) out.push(`${flag}=${value}`);
  return out;
}

/**
 * The flags that run the shipped proxy as a local process next to the test
 * control plane: `kubeconfig` (a path) as its identity, HTTPS on 127.0.0.1:`port`
 * (also the Service port the aggregator dials through the ExternalName
 * Service, in a cluster Service port 443 → targetPort 6443), the admission
 * webhook's own listener on a free port (`--admission-port 0`; a suite that
 * calls the webhook overrides it), readiness checked every 1 second, no
 * shutdown delay and a 2-second drain so suites stop fast.
 * Spread into `withFlags` overrides, before or after suite-specific flags.
 */
export function localProxyFlags(kubeconfig: string, port: number): Record<string, string> {
  return {
    "--kubeconfig": kubeconfig,
    "--bind-address": "127.0.0.1",
    "--secure-port": String(port),
    "--admission-port": "0",
    "--service-port": String(port),
    "--readiness-interval-seconds": "1",
    "--shutdown-delay-seconds": "0",
    "--drain-timeout-seconds": "2",
  };
}

/**
 * An apps/v1 Deployment `name` in namespace `ns` with `replicas` (default 1)
 * of a placeholder image: the HPA's scale target in the e2e suites. No
 * kubelet runs there, so its pods stay Pending, which an External
 * AverageValue target does not mind (the HPA reads only the scale subresource).
 */
export function placeholderDeployment(name: string, ns: string, replicas = 1): Record<string, unknown> {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: ns },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name, image: "registry.invalid/worker:1" }] } },
    },
  };
}

/** The APIService the proxy registers. */
export const API_SERVICE = "v1beta1.external.metrics.k8s.io";

/** A Kubernetes status condition. */
export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/**
 * The `Available` condition of an APIService (default {@link API_SERVICE}).
 *
 * @throws Error with kubectl's message when it cannot be read
 */
export async function apiServiceAvailability(cp: Pick<ControlPlane, "kubectl">, name: string = API_SERVICE): Promise<Condition | undefined> {
  const r = await cp.kubectl(["get", "apiservice", name, "-o", "json"]);
  if (r.status !== 0) throw new Error(`kubectl get apiservice: ${r.stderr.trim()}`);
  return (JSON.parse(r.stdout) as { status?: { conditions?: Condition[] } }).status?.conditions?.find((c) => c.type === "Available");
}

/**
 * Wait until an APIService (default {@link API_SERVICE}) is `Available=True`, failing at
 * once when one of `processes` (the proxies) has exited.
 *
 * @throws Error from {@link waitFor} after `timeoutMs` (ms), with `context()`
 */
export async function waitForAPIServiceAvailable(
  cp: Pick<ControlPlane, "kubectl">,
  processes: readonly LoggedProcess[],
  options: { timeoutMs: number; context?: () => string; name?: string },
): Promise<void> {
  const name = options.name ?? API_SERVICE;
  await waitFor(
    `APIService ${name} Available=True`,
    async () => {
      for (const p of processes) if (p.exitCode !== undefined) throw new Error(`${p.name} exited with ${p.exitCode}`);
      const available = await apiServiceAvailability(cp, name);
      if (available?.status !== "True") throw new Error(`Available=${available?.status} ${available?.reason ?? ""}: ${available?.message ?? ""}`);
      return true;
    },
    { timeoutMs: options.timeoutMs, intervalMs: 1000, ...(options.context ? { context: options.context } : {}) },
  );
}

/**
 * Start the bridge (`functions/node.ts --config FILE`) as a logged process
 * on 127.0.0.1:`port` and wait (30 s at most) until it answers /healthz.
 *
 * @throws Error when it exits or does not answer in time (with `context()`);
 *   the process is stopped then
 */
export async function startBridgeProcess(options: {
  config: string;
  port: number;
  env: NodeJS.ProcessEnv;
  logFile: string;
  context?: () => string;
}): Promise<LoggedProcess> {
  const bridge = startProcess(
    "bridge",
    process.execPath,
    [join(ROOT, "functions/node.ts"), "--config", options.config, "--host", "127.0.0.1", "--port", String(options.port)],
    { logFile: options.logFile, env: options.env },
  );
  try {
    await waitFor(
      "bridge /healthz",
      async () => {
        if (bridge.exitCode !== undefined) throw new Error(`bridge exited with ${bridge.exitCode}`);
        return (await fetch(`http://127.0.0.1:${options.port}/healthz`)).ok;
      },
      { timeoutMs: 30_000, ...(options.context ? { context: options.context } : {}) },
    );
  } catch (err) {
    await bridge.stop(5_000); // nobody else holds it yet
    throw err;
  }
  return bridge;
}

/**
 * The bridge's config in the end-to-end suites: the SQS emulator at
 * `endpoint` as provider `sqs` (static test credentials, 2 s per call),
 * values at most 30 s old and re-read every second, the given metric rules,
 * and `defaultAction: Deny` (reads are granted by ExternalMetricPolicy
 * objects, as in a cluster).
 */
export function e2eBridgeConfig(endpoint: string, metrics: readonly { name: string; attribute: string | readonly string[] }[]): object {
  return {
    apiVersion: "external-metrics-bridge.io/v1alpha1",
    kind: "BridgeConfig",
    defaults: { maxAgeSeconds: 30, cacheTTLSeconds: 1 },
    providers: {
      sqs: {
        type: "aws-sqs",
        region: "us-east-1",
        endpoint,
        credentials: { source: "static", accessKeyId: "e2e", secretAccessKey: "e2e" },
        timeoutSeconds: 2,
      },
    },
    metrics: metrics.map((m) => ({ name: m.name, provider: "sqs", query: { queueLabel: "queue", attribute: m.attribute } })),
    policy: { defaultAction: "Deny" },
  };
}

/**
 * Install the shipped manifests ({@link shippedManifests}) on `cp` and start
 * the proxy as a local process with the shipped Deployment's arguments
 * ({@link localProxyFlags} on 127.0.0.1:`port`, its identity a token of the
 * shipped ServiceAccount), a ProxyConfig of `backends` and `routes` (cache
 * TTL 1 s) plus the sections of `proxyConfig` (e.g. `customMetrics`) written
 * to `<work>/proxy.yaml`, its log in `<work>/proxy.log`.
 * The proxy registers the APIService itself; wait for it with
 * {@link waitForAPIServiceAvailable}.
 *
 * @param env the proxy's environment (`BRIDGE_SIGNING_KEYS`, …); `POD_NAMESPACE` is set here
 * @throws Error with kubectl's message when the manifests or the token cannot be created
 */
export async function startShippedProxy(
  cp: Pick<ControlPlane, "kubectlOk" | "tokenKubeconfig">,
  options: {
    work: string;
    port: number;
    backends: Record<string, { url: string; timeoutSeconds: number }>;
    routes: readonly { metric: string; backend: string }[];
    env: NodeJS.ProcessEnv;
    /** more top-level ProxyConfig sections */
    proxyConfig?: Record<string, unknown>;
    /** install the chart rendered with these `helm template` arguments instead of the plain manifests ({@link shippedManifests}) */
    chartArgs?: readonly string[];
  },
): Promise<LoggedProcess> {
  const shipped = shippedManifests(options.chartArgs);
  await cp.kubectlOk(["apply", "-f", "-"], { input: shipped.install.map((d) => stringify(d)).join("---\n") });
  const token = (await cp.kubectlOk(["-n", PROXY_NS, "create", "token", PROXY_SERVICE, "--duration=2h"])).trim();
  const proxyConfig = join(options.work, "proxy.yaml");
  writeFileSync(
    proxyConfig,
    stringify({
      apiVersion: "external-metrics-bridge.io/v1alpha1",
      kind: "ProxyConfig",
      backends: options.backends,
      routes: options.routes,
      cache: { ttlSeconds: 1 },
      ...options.proxyConfig,
    }),
  );
  const args = withFlags(shipped.proxyArgs, { "--config": proxyConfig, ...localProxyFlags(cp.tokenKubeconfig("proxy", token), options.port) });
  return startProcess("proxy", process.execPath, [join(ROOT, "functions/proxy/main.ts"), ...args], {
    logFile: join(options.work, "proxy.log"),
    env: { ...options.env, POD_NAMESPACE: PROXY_NS },
  });
}

/**
 * The usual end-to-end deployment: the bridge as a process with
 * `bridgeConfig` on a free port, behind the shipped proxy
 * ({@link startShippedProxy}) on another, one backend `bridge` for every
 * metric, both signing with `signingKeys`, `proxyConfig` added to the
 * proxy's config, the chart rendered with `chartArgs` installed instead of
 * the plain manifests when given; resolves when the APIServices `apiServices` (default
 * {@link API_SERVICE}) are Available (90 s at most).
 *
 * @returns the started processes, bridge first (stop them in reverse)
 * @throws Error as {@link startBridgeProcess}, {@link startShippedProxy} and {@link waitForAPIServiceAvailable}
 */
export async function startBridgeBehindShippedProxy(
  cp: Pick<ControlPlane, "kubectlOk" | "tokenKubeconfig" | "kubectl">,
  options: {
    work: string;
    bridgeConfig: string;
    signingKeys: string;
    backendTimeoutSeconds: number;
    context: () => string;
    proxyConfig?: Record<string, unknown>;
    chartArgs?: readonly string[];
    apiServices?: readonly string[];
  },
): Promise<LoggedProcess[]> {
  const { work, context } = options;
  const [bridgePort, proxyPort] = (await freePorts(2)) as [number, number];
  const env = { ...process.env, BRIDGE_SIGNING_KEYS: options.signingKeys };
  const bridge = await startBridgeProcess({ config: options.bridgeConfig, port: bridgePort, env, logFile: join(work, "bridge.log"), context });
  const started = [bridge];
  try {
    const proxy = await startShippedProxy(cp, {
      work,
      port: proxyPort,
      backends: { bridge: { url: `http://127.0.0.1:${bridgePort}`, timeoutSeconds: options.backendTimeoutSeconds } },
      routes: [{ metric: ".*", backend: "bridge" }],
      env,
      ...(options.proxyConfig ? { proxyConfig: options.proxyConfig } : {}),
      ...(options.chartArgs ? { chartArgs: options.chartArgs } : {}),
    });
    started.push(proxy);
    for (const name of options.apiServices ?? [API_SERVICE]) await waitForAPIServiceAvailable(cp, [proxy], { timeoutMs: 90_000, context, name });
    return started;
  } catch (err) {
    for (const p of started.reverse()) await p.stop(5_000);
    throw err;
  }
}
