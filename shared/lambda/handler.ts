/**
 * The bridge as an AWS Lambda handler: the Hono app through
 * `hono/aws-lambda`'s `handle` (Lambda Function URL and API Gateway HTTP
 * API, payload format 2.0), built once per execution environment from the
 * config and signing keys its environment names (`sources.ts`, `ssm.ts`).
 * `functions/lambda.ts` wires it to `process.env`.
 *
 * A custom.metrics.k8s.io read is a `POST` with a JSON body: `hono/aws-lambda`
 * hands the event's body to the app as the request's body (decoded first
 * when the event says `isBase64Encoded`, as Function URLs and API Gateway do
 * for a body they take for binary), and the app reads it bounded
 * (`MAX_SIGNED_BODY_BYTES`, 413 past it) before verifying the signature
 * over those bytes (shared/app.ts); the event itself is bounded by Lambda's
 * 6 MB invocation payload.
 *
 * Node only (file and SSM reads, the official Cloud Monitoring client);
 * never imported by the Worker.
 */
import { isApisPath } from "../k8s/request-path.ts";
import { Hono } from "hono";
import { handle, type LambdaContext, type LambdaEvent } from "hono/aws-lambda";
import type { LogRecord } from "../observability/log.ts";
import { bootstrap } from "../bootstrap.ts";
import { nodeSharedTier } from "../cache/runtime-tier.ts";
import { ConfigError } from "../config/yaml.ts";
import { internalError, StatusError } from "../k8s/status.ts";
import { officialTransports } from "../providers/gcp-monitoring/official-transports.ts";
import type { RuntimeEnv } from "../providers/types.ts";
import { createLogger, LOG_LEVEL_ENV, parseLevel } from "../observability/log.ts";
import { DEFAULT_EMF_NAMESPACE, withEmf } from "../observability/emf.ts";
import { readConfigText, readSigningKeys, type LambdaEnv } from "./sources.ts";
import { ssmReader } from "./ssm.ts";

/** A Lambda handler for v2 HTTP events, as `hono/aws-lambda` builds it. */
export type LambdaHandler = ReturnType<typeof handle>;

/**
 * The `RuntimeEnv.transports` for `config` on Lambda: the official Cloud
 * Monitoring client when a `gcp-monitoring` provider is configured, else none
 * (`shared/providers/gcp-monitoring/official-transports.ts`).
 */
export const lambdaTransports = officialTransports;

/** A handler answering every request with the Status of `err`. */
function failing(err: StatusError): LambdaHandler {
  const app = new Hono();
  app.all("*", () => err.toResponse());
  return handle(app);
}

/** A handler answering `/apis` and everything under it with the Status of `err`, and the rest (health probes) with `app`. */
function refusingApis(app: Hono, err: StatusError): LambdaHandler {
  const outer = new Hono();
  outer.all("*", (c) => (isApisPath(c.req.path) ? err.toResponse() : app.fetch(c.req.raw)));
  return handle(outer);
}

/** The environment variable naming the CloudWatch namespace of the EMF metrics (default {@link DEFAULT_EMF_NAMESPACE}). */
export const METRICS_NAMESPACE_ENV = "BRIDGE_METRICS_NAMESPACE";

/**
 * A sink writing each line with `process.stdout.write`: Lambda's patched
 * `console` would prefix it with a timestamp, request id and level, and
 * CloudWatch extracts EMF only from a log event that is one JSON object.
 */
const stdoutLine = (line: string) => void process.stdout.write(line);

/** Options of {@link createLambdaHandler}. */
export interface LambdaHandlerOptions {
  /**
   * structured log sink, given every record (no level filter); default: the
   * shared logger (`shared/observability/log.ts`) at `LOG_LEVEL` (default
   * info), one JSON object per line on stdout. Either way a values read's
   * audit record carries its CloudWatch EMF metrics (`withEmf`,
   * `shared/observability/emf.ts`; namespace `BRIDGE_METRICS_NAMESPACE`).
   */
  log?: (record: LogRecord) => void;
  /**
   * Provider transports (`RuntimeEnv.transports`), for tests that point the
   * official client at a private CA; default {@link lambdaTransports}.
   */
  transports?: RuntimeEnv["transports"];
}

/**
 * Build a Lambda handler that loads its config (`readConfigText`) and
 * signing keys (`readSigningKeys`) from `env` on the first event, with one
 * SSM client closed after the load, and builds the bridge (`shared/bootstrap.ts`
 * `bootstrap`, `loadBridge`: only the configured providers are loaded).
 *
 * Answers (each a `metav1.Status`): a config fault — no source, unreadable
 * file, missing/denied SSM parameter, invalid YAML (500 "the bridge's config
 * is invalid:" naming every problem) — is kept for the environment's life;
 * a transient SSM failure (503 with `Retry-After`) is answered once and the
 * load retried on the next event. Without signing keys and without
 * `BRIDGE_INSECURE_ALLOW_UNSIGNED=true`, `/apis` is answered 500 naming
 * `BRIDGE_SIGNING_KEYS` and health probes still answer. Logs the
 * signing-mode warning/error and the policy start-up notices at every load, and
 * one audit record per values read with its EMF metrics (an invalid
 * `LOG_LEVEL` is a config fault: 500 naming it).
 */
export function createLambdaHandler(env: LambdaEnv = process.env, options: LambdaHandlerOptions = {}): LambdaHandler {
  let ready: Promise<LambdaHandler> | undefined;
  let logger: ((record: LogRecord) => void) | undefined;
  const emit = (record: LogRecord) => (options.log ? options.log(record) : (logger ?? ((r: LogRecord) => console.error(JSON.stringify(r))))(record));
  const load = async (): Promise<LambdaHandler> => {
    const ssm = ssmReader();
    try {
      if (options.log === undefined) logger ??= createLogger({ level: parseLevel(env[LOG_LEVEL_ENV]), sink: stdoutLine });
      const namespace = env[METRICS_NAMESPACE_ENV] || DEFAULT_EMF_NAMESPACE;
      const [config, runtimeEnv] = await Promise.all([readConfigText(env, ssm), readSigningKeys(env, ssm)]);
      const runtime: RuntimeEnv = { env: runtimeEnv, now: () => Date.now(), longLived: false };
      // a provider's `sharedCache: {type: dynamodb}` (issue 28): its DynamoDB tier, a chunk loaded on its first read; `durableObject` is refused at load
      runtime.sharedTier = nodeSharedTier(runtime);
      const transports = options.transports !== undefined ? async () => options.transports : lambdaTransports;
      // only the configured providers' chunks are loaded (shared/bootstrap.ts, shared/bridge.ts loadBridge)
      const { bridge, signing, notices } = await bootstrap({
        runtime,
        config,
        signing: { refuse: false },
        log: () => {
          const sink = options.log ?? logger!;
          return (record) => sink(withEmf(record, namespace));
        },
        transports,
      });
      for (const record of notices) emit(record);
      if (signing?.mode === "refused") return refusingApis(bridge.app, internalError(signing.message));
      return handle(bridge.app);
    } catch (err) {
      if (err instanceof StatusError && err.code === 503) {
        ready = undefined;
        return failing(err);
      }
      const detail = err instanceof ConfigError ? `the bridge's config is invalid:\n${err.message}` : (err as Error).message;
      emit({ level: "error", msg: "config", error: detail });
      return failing(err instanceof StatusError ? err : internalError(detail, undefined, err));
    } finally {
      ssm.close();
    }
  };
  return (async (event: LambdaEvent, context?: LambdaContext) => {
    const current = (ready ??= load());
    return (await current)(event, context);
  }) as LambdaHandler;
}
