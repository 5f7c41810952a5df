/**
 * Cloudflare Workers entry point: the bridge's Hono app in workerd.
 *
 * Config is YAML text, from (first found):
 * 1. the `BRIDGE_CONFIG` binding — a secret (`wrangler secret put BRIDGE_CONFIG`)
 *    or a `[vars]` entry in `wrangler.toml`;
 * 2. text bundled at build time — `infra/worker/bridge.yaml`, imported as a
 *    Text module (wrangler.toml `[[rules]] type = "Text"`). The shipped file
 *    is a placeholder holding no YAML document, which counts as "nothing
 *    bundled"; put a BridgeConfig there before `wrangler deploy` to bundle it.
 *    `infra/worker/build.ts --json` bundles a config as JSON text here
 *    instead and replaces `yaml` with a JSON-only reader; both sources are
 *    then read as JSON.
 *
 * Providers: only the configured ones are loaded and built (`shared/bootstrap.ts`, `loadBridge`);
 * which ones the script holds is chosen at build time (every provider with
 * `npm run build:worker`, a chosen set with `infra/worker/build.ts`,
 * docs/deploy.md "Bundle size").
 *
 * The app is built lazily on the first request and cached in module scope
 * for the life of the isolate (provider caches live as long as it); it is
 * rebuilt when the config text changes. Every string binding (vars,
 * secrets) becomes `RuntimeEnv.env`, so an AWS provider with
 * `credentials: { source: environment }` reads the `AWS_ACCESS_KEY_ID`,
 * `AWS_SECRET_ACCESS_KEY` and optional `AWS_SESSION_TOKEN` secrets. Workers
 * have no filesystem: `BRIDGE_CONFIG_FILE` and the SDK's default credential
 * chain do not apply here.
 *
 * A missing or invalid config is answered with a `metav1.Status` 500 naming
 * every problem (source:line:column), never an opaque isolate crash.
 *
 * Request signing is required: without the `BRIDGE_SIGNING_KEYS` secret
 * every `/apis` request is answered with a 500 Status naming it (health
 * probes stay `ok`), unless the `BRIDGE_INSECURE_ALLOW_UNSIGNED` var is
 * `true`, which logs a warning on the first request of every isolate.
 * Signatures are verified against the Worker's own URL (the host Cloudflare
 * routed the request by), or `BRIDGE_AUDIENCE` when set. The policy
 * start-up notices (no `policy:` section: every read denied; explicit Allow
 * without policies: "running open") are logged whenever the bridge is built.
 *
 * Logs and metrics (docs/deploy.md "Logs" and "Metrics"): one JSON line
 * per request on the console — Workers Logs (`[observability]` in
 * wrangler.toml) and `wrangler tail` read it — a values read's line being
 * its audit record (caller, namespace, metric, selector, decision,
 * provider, cache, code, error kind and text, latency, value served); at
 * `LOG_LEVEL` (a var, default info; read when the bridge is built) and
 * above, probes at debug. When a Workers Analytics Engine dataset is bound
 * as `BRIDGE_ANALYTICS`, each values read is also written there as a data
 * point ({@link analyticsPoint}) for SQL queries and Grafana.
 *
 * Shared read tier (issue 28): a provider with `sharedCache: { type:
 * durableObject }` reads a local cache miss through the Durable Object
 * namespace bound as its `binding` (`shared/cache/durable-object-tier.ts`);
 * this module exports that object's class, {@link SeriesTier}
 * (wrangler.toml `[[durable_objects.bindings]]` and `[[migrations]]`).
 * `sharedCache: { type: dynamodb }` is refused when the config loads (a
 * Worker reaches no DynamoDB endpoint with the Lambda's IAM role).
 *
 * Only the default export and {@link SeriesTier} may be exported: workerd
 * treats every export of the main module as an entrypoint (a class: a
 * Durable Object class).
 */
import type { Hono } from "hono";
import { parseAllDocuments } from "yaml";
import bundledText from "../infra/worker/bridge.yaml";
import { bootstrap } from "../shared/bootstrap.ts";
import { configTextDigest, DurableObjectTier, SeriesTierObject, type DurableObjectStateLike } from "../shared/cache/durable-object-tier.ts";
import type { SharedCacheConfig, SharedTier } from "../shared/cache/shared-tier.ts";
import { ConfigError } from "../shared/config/yaml.ts";
import { internalError, type StatusError } from "../shared/k8s/status.ts";
import { isApisPath } from "../shared/k8s/request-path.ts";
import type { LogRecord } from "../shared/observability/log.ts";
import type { RuntimeEnv } from "../shared/providers/types.ts";
import { signingMode, signingNotice, type SigningMode } from "../shared/signing.ts";
import { consoleSink, createLogger, LOG_LEVEL_ENV, parseLevel } from "../shared/observability/log.ts";

/** The Workers `ExecutionContext` as the handler sees it. */
interface WorkerContext {
  waitUntil(promise: Promise<unknown>): void;
  passThroughOnException(): void;
}

/** Worker bindings: vars and secrets are strings; other bindings are not used. */
type WorkerEnv = Record<string, unknown>;

/** The Worker's bindings of the current request (a Durable Object namespace is an object binding). */
let bindings: WorkerEnv = {};

/** The binding holding the config YAML. */
const CONFIG_BINDING = "BRIDGE_CONFIG";
const BUNDLED_SOURCE = "infra/worker/bridge.yaml (bundled)";

/** The bundled text, or undefined when it holds no YAML document (the placeholder). */
const bundledConfig = parseAllDocuments(bundledText).some((d) => d.contents !== null) ? bundledText : undefined;

/**
 * One isolate's runtime bag: `env` is refreshed from the bindings on every
 * request. Workers-specific choices (e.g. a provider's fetch-based REST
 * transport where a Node-only client cannot run) belong here or in the
 * facts passed to `bootstrap` below.
 */
const runtime: { env: Record<string, string | undefined>; now: () => number; longLived: false } = { env: {}, now: () => Date.now(), longLived: false };

/** The bridge built (or being built) for one config text: its app, or the Status its config failed with. */
let built: { text: string; result: Promise<{ app?: Hono; error?: StatusError }> } | undefined;

/** The signing mode last logged in this isolate (logged again only when it changes). */
let loggedMode: string | undefined;

/** One JSON log line (Workers Logs / `wrangler tail` read the console): the shared logger at `LOG_LEVEL`, set when the bridge is built. */
let log = createLogger({ sink: consoleSink });

/** The binding of a Workers Analytics Engine dataset (`[[analytics_engine_datasets]] binding = "BRIDGE_ANALYTICS"`). */
const ANALYTICS_BINDING = "BRIDGE_ANALYTICS";

/** What the bridge uses of an Analytics Engine dataset binding. */
interface AnalyticsDataset {
  writeDataPoint(point: { indexes?: string[]; blobs?: (string | null)[]; doubles?: number[] }): void;
}

/** The dataset bound for this request, if any. */
let analytics: AnalyticsDataset | undefined;

/**
 * The Analytics Engine data point of a values read's audit record (other
 * records: none). `index1` the metric rule; blobs 1–8: metric, provider,
 * namespace, decision, cache, errorKind, user, selector (cut to 256
 * characters); doubles 1–4: HTTP code, duration ms, value served (NaN when
 * none), its age in seconds (NaN when none). Names follow the Prometheus
 * labels (`shared/observability/metrics.ts`).
 */
function analyticsPoint(record: LogRecord): { indexes: string[]; blobs: (string | null)[]; doubles: number[] } | undefined {
  if (typeof record["metric"] !== "string" || typeof record["provider"] !== "string") return undefined;
  const text = (k: string) => (typeof record[k] === "string" ? (record[k] as string).slice(0, 256) : null);
  const num = (k: string) => (typeof record[k] === "number" ? (record[k] as number) : Number.NaN);
  return {
    indexes: [record["metric"] as string],
    blobs: ["metric", "provider", "namespace", "decision", "cache", "errorKind", "user", "selector"].map(text),
    doubles: [num("code"), num("durationMs"), num("value"), num("ageSeconds")],
  };
}

/** The app's request log: the console line, and the Analytics Engine point when a dataset is bound. */
function requestLog(record: LogRecord): void {
  log(record);
  if (analytics === undefined) return;
  const point = analyticsPoint(record);
  if (point !== undefined) analytics.writeDataPoint(point);
}

/** Log the signing mode on the first request of the isolate (and when it changes). */
function logSigningMode(mode: SigningMode): void {
  const key = mode.mode === "refused" ? `refused:${mode.message}` : mode.mode;
  if (loggedMode === key) return;
  loggedMode = key;
  const notice = signingNotice(mode);
  if (notice !== undefined) log(notice);
}


/** The string-valued bindings (vars and secrets) of a Worker `env`. */
function stringBindings(env: WorkerEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env ?? {})) if (typeof value === "string") out[key] = value;
  return out;
}

/**
 * Build (or re-use) the bridge for `text` (`shared/bootstrap.ts`): validate
 * it, load the configured providers' modules (only those:
 * `shared/providers/registry.ts`), build, log the policy notices.
 * Concurrent first requests share one build; a failure is remembered for
 * that text.
 */
function bridgeFor(text: string, source: string): Promise<{ app?: Hono; error?: StatusError }> {
  if (built?.text === text) return built.result;
  const build = async (): Promise<{ app?: Hono; error?: StatusError }> => {
    try {
      // The signing mode is checked on every request (fetch below), not here.
      // the object checks that it runs the same config text as this isolate
      const digest = await configTextDigest(text);
      // the runtime with this config's tier factory (`RuntimeEnv.sharedTier`; `env` stays the shared, per-request one)
      const withTier: RuntimeEnv = Object.assign(Object.create(runtime) as RuntimeEnv, {
        sharedTier: (provider: string, cache: SharedCacheConfig): SharedTier => durableObjectTier(provider, cache, digest),
      });
      const { bridge, notices } = await bootstrap({
        runtime: withTier,
        config: { text, source },
        log: () => {
          log = createLogger({ sink: consoleSink, level: parseLevel(runtime.env[LOG_LEVEL_ENV]) });
          return requestLog;
        },
      });
      for (const record of notices) log(record);
      return { app: bridge.app };
    } catch (err) {
      const detail = err instanceof ConfigError ? err.message : String((err as Error)?.message ?? err);
      log({ level: "error", msg: "invalid config", source, error: detail });
      return { error: internalError(`the bridge's config is invalid:\n${detail}`, undefined, err) };
    }
  };
  built = { text, result: build() };
  return built.result;
}

/**
 * The isolate's Durable Object tier of a provider instance
 * (`RuntimeEnv.sharedTier`, called by `buildProviders` when the config
 * loads); `configDigest`: the config text's, which the object checks.
 *
 * @throws Error for `type: dynamodb` (the DynamoDB tier is Lambda's and
 *   Node's; a Worker would need the Lambda's IAM role): the config is refused at load
 */
function durableObjectTier(provider: string, cache: SharedCacheConfig, configDigest: string): SharedTier {
  if (cache.type !== "durableObject") {
    throw new Error(
      `providers.${provider}.sharedCache: type ${cache.type} is for Lambda and the Node server; on a Worker use { type: durableObject } (a Durable Object namespace bound in wrangler.toml, docs/shared-cache.md)`,
    );
  }
  return new DurableObjectTier({ provider, config: cache, configDigest, bindings: () => bindings });
}

/** The config text of the Worker's bindings: `BRIDGE_CONFIG`, else the bundled text. */
function configSource(env: WorkerEnv): { text: string; source: string } | undefined {
  const bound = env?.[CONFIG_BINDING];
  if (typeof bound === "string" && bound.trim() !== "") return { text: bound, source: `<binding:${CONFIG_BINDING}>` };
  return bundledConfig !== undefined ? { text: bundledConfig, source: BUNDLED_SOURCE } : undefined;
}

/**
 * The shared read tier's Durable Object (`shared/cache/durable-object-tier.ts`
 * `SeriesTierObject`), built from the same config as the Worker: bind it in
 * wrangler.toml as `[[durable_objects.bindings]] name = "SERIES_TIER"
 * class_name = "SeriesTier"` (the `binding` of `sharedCache`).
 */
export class SeriesTier extends SeriesTierObject {
  constructor(state: DurableObjectStateLike, env: WorkerEnv) {
    super(state, env, configSource);
  }
}

export default {
  async fetch(request: Request, env: WorkerEnv, ctx: WorkerContext): Promise<Response> {
    bindings = env ?? {};
    runtime.env = stringBindings(env);
    const dataset = env?.[ANALYTICS_BINDING] as Partial<AnalyticsDataset> | undefined;
    analytics = typeof dataset?.writeDataPoint === "function" ? (dataset as AnalyticsDataset) : undefined;
    const mode = signingMode(runtime.env);
    logSigningMode(mode);
    const bound = runtime.env[CONFIG_BINDING];
    let found: { app?: Hono; error?: StatusError };
    if (bound !== undefined && bound.trim() !== "") found = await bridgeFor(bound, `<binding:${CONFIG_BINDING}>`);
    else if (bundledConfig !== undefined) found = await bridgeFor(bundledConfig, BUNDLED_SOURCE);
    else {
      found = {
        error: internalError(
          `no config: set the ${CONFIG_BINDING} secret or var to the bridge's YAML config, or bundle one at build time (infra/worker/bridge.yaml)`,
        ),
      };
    }
    if (found.app === undefined) return found.error!.toResponse();
    if (mode.mode === "refused" && isApisPath(new URL(request.url).pathname)) return internalError(mode.message).toResponse();
    return found.app.fetch(request, env, ctx as never);
  },
};
