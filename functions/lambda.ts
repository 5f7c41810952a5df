/**
 * AWS Lambda entry point: the bridge's Hono app through `hono/aws-lambda`,
 * answering Lambda Function URL and API Gateway HTTP API (payload format
 * 2.0) events.
 *
 * Config is YAML text, from the first of these environment variables set:
 * 1. `BRIDGE_CONFIG` — the YAML inline;
 * 2. `BRIDGE_CONFIG_FILE` — a file shipped in the artifact, relative to
 *    `LAMBDA_TASK_ROOT` (with serverless.yml's packaging
 *    `dist/lambda/bridge.yaml`, copied there by `infra/lambda/build.ts --config`);
 * 3. `BRIDGE_CONFIG_SSM_PARAMETER` — the name or ARN of an SSM parameter
 *    (String or SecureString, read `WithDecryption`) fetched with
 *    `GetParameter` on the first invocation of each execution environment.
 *
 * Request signing keys (`shared/signing.ts`): `BRIDGE_SIGNING_KEYS` inline,
 * else `BRIDGE_SIGNING_KEYS_SSM_PARAMETER` — an SSM parameter (SecureString)
 * read with `GetParameter` `WithDecryption` at cold start, beside the config,
 * so the key never appears in the function's configuration. With keys, every
 * `/apis` request must carry the in-cluster proxy's valid signature, made for
 * the Function URL's (or API's) domain — `https://` plus
 * `requestContext.domainName` — or for an origin of `BRIDGE_AUDIENCE` when
 * set (else 401). A keys parameter that is named but missing, empty or
 * unreadable never means "no keys": it fails the function closed (500, or
 * 503 while SSM is unavailable). Without keys at all, every `/apis` request
 * is answered 500 naming `BRIDGE_SIGNING_KEYS` (health probes stay `ok`),
 * unless `BRIDGE_INSECURE_ALLOW_UNSIGNED=true`, which logs a warning on
 * every cold start. The policy start-up notices (`shared/policy/authorize.ts`)
 * are logged on every cold start too.
 *
 * The app is built once per execution environment (cold start) and its
 * provider caches live as long as it. AWS credentials come from the
 * function's execution role through the SDK's default chain (Lambda sets
 * `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), so
 * providers use `credentials: { source: default }` or `environment`.
 *
 * Cloud Monitoring is read through the official `@google-cloud/monitoring`
 * client (gRPC), as on the Node server (`nodeTransports`,
 * `shared/providers/gcp-monitoring/grpc.ts`). It is imported only when the
 * config has a `gcp-monitoring` provider, so other configs do not pay its
 * start-up on a cold start (≈ 0.1–0.2 s and ≈ 10 MiB, measured on the built
 * artifact on the 2-core development machine).
 *
 * Failures answer a `metav1.Status`: an invalid or missing config is a 500
 * naming every problem (kept for the environment's life: the environment
 * variables cannot change under it); a failed SSM read is a 503 with
 * `Retry-After` and is retried on the next invocation.
 */
import { Hono } from "hono";
import { handle, type LambdaContext, type LambdaEvent } from "hono/aws-lambda";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import type { LogRecord } from "../shared/app.ts";
import { fromConfig } from "../shared/bridge.ts";
import { officialTransports } from "../shared/providers/gcp-monitoring/official-transports.ts";
import { loadConfig, type BridgeConfig } from "../shared/config/config.ts";
import { ConfigError } from "../shared/config/yaml.ts";
import { internalError, serviceUnavailable, StatusError } from "../shared/k8s/status.ts";
import type { RuntimeEnv } from "../shared/providers/types.ts";
import { policyStartupNotices } from "../shared/policy/authorize.ts";
import { SIGNING_KEYS_ENV, signingMode } from "../shared/signing.ts";

/** Environment of the function (`process.env` in Lambda). */
export type LambdaEnv = Readonly<Record<string, string | undefined>>;

/** A Lambda handler for v2 HTTP events, as `hono/aws-lambda` builds it. */
export type LambdaHandler = ReturnType<typeof handle>;

/** Environment variable naming the SSM parameter that holds `BRIDGE_SIGNING_KEYS`. */
export const SIGNING_KEYS_SSM_ENV = "BRIDGE_SIGNING_KEYS_SSM_PARAMETER";

/** Longest wait for the SSM parameters, ms (inside the function timeout, with the request's own 4.5 s). */
const SSM_TIMEOUT_MS = 3000;

/** Reads SSM parameters with one client; the client is loaded only when a parameter is named. */
export interface SsmReader {
  /** the value of `name`, for the environment variable `variable` that named it */
  read(name: string, variable: string): Promise<string>;
  close(): void;
}

/**
 * `GetParameter` with decryption (AWS Systems Manager API Reference,
 * https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_GetParameter.html).
 * Region and credentials come from the Lambda environment; the endpoint
 * honours `AWS_ENDPOINT_URL_SSM` (SDK service-specific endpoints).
 *
 * `read` throws StatusError 500 for a deployment fault (missing parameter,
 * access denied, any other 400) and 503 with `Retry-After` for anything that
 * may pass (throttling, 5xx, network, the 3 s timeout).
 */
function ssmReader(): SsmReader {
  let client: Promise<{ send: (name: string) => Promise<string | undefined>; destroy: () => void }> | undefined;
  const load = async () => {
    const { GetParameterCommand, SSMClient } = await import("@aws-sdk/client-ssm");
    const ssm = new SSMClient({ maxAttempts: 2 });
    return {
      send: async (name: string) =>
        (await ssm.send(new GetParameterCommand({ Name: name, WithDecryption: true }), { abortSignal: AbortSignal.timeout(SSM_TIMEOUT_MS) })).Parameter?.Value,
      destroy: () => ssm.destroy(),
    };
  };
  return {
    async read(name, variable) {
      try {
        const value = await (await (client ??= load())).send(name);
        if (value === undefined) throw internalError(`SSM parameter ${name} (${variable}) has no value`);
        return value;
      } catch (err) {
        if (err instanceof StatusError) throw err;
        const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
        const what = `SSM parameter ${name} (${variable}) cannot be read (${e.name ?? "Error"}): ${e.message ?? String(err)}`;
        // a missing parameter or a denied read is a deployment fault; anything else may pass
        if (e.name === "ParameterNotFound" || e.name === "AccessDeniedException" || e.$metadata?.httpStatusCode === 400) {
          throw internalError(what, undefined, err);
        }
        throw serviceUnavailable(what, 5, undefined, err);
      }
    },
    close() {
      void client?.then((c) => c.destroy(), () => {});
    },
  };
}

/**
 * Read the config text named by the environment.
 *
 * @param ssm reader for `BRIDGE_CONFIG_SSM_PARAMETER` (default: a new one, closed after use)
 * @returns the YAML text and a source name for error messages
 * @throws StatusError 500 when no source is set or the file is unreadable;
 *   503 when SSM could not be read (retried on the next invocation)
 */
export async function readConfigText(env: LambdaEnv, ssm?: SsmReader): Promise<{ text: string; source: string }> {
  if (env["BRIDGE_CONFIG"]?.trim()) return { text: env["BRIDGE_CONFIG"], source: "<env:BRIDGE_CONFIG>" };
  const file = env["BRIDGE_CONFIG_FILE"];
  if (file) {
    const path = resolve(env["LAMBDA_TASK_ROOT"] ?? process.cwd(), file);
    try {
      return { text: await readFile(path, "utf8"), source: file };
    } catch (err) {
      throw internalError(`BRIDGE_CONFIG_FILE ${JSON.stringify(file)} cannot be read: ${(err as Error).message}`, undefined, err);
    }
  }
  const parameter = env["BRIDGE_CONFIG_SSM_PARAMETER"];
  if (parameter) {
    const reader = ssm ?? ssmReader();
    try {
      return { text: await reader.read(parameter, "BRIDGE_CONFIG_SSM_PARAMETER"), source: `ssm:${parameter}` };
    } finally {
      if (ssm === undefined) reader.close();
    }
  }
  throw internalError("no config: set BRIDGE_CONFIG (inline YAML), BRIDGE_CONFIG_FILE or BRIDGE_CONFIG_SSM_PARAMETER");
}

/**
 * The function's environment with `BRIDGE_SIGNING_KEYS` filled in from
 * `BRIDGE_SIGNING_KEYS_SSM_PARAMETER` when only the latter is set.
 *
 * @throws StatusError 500 when the parameter is missing, denied or holds no
 *   key text (fail closed: never "unsigned requests allowed"); 503 when SSM
 *   could not be read
 */
export async function readSigningKeys(env: LambdaEnv, ssm: SsmReader): Promise<LambdaEnv> {
  const parameter = env[SIGNING_KEYS_SSM_ENV];
  if (env[SIGNING_KEYS_ENV]?.trim() || !parameter) return env;
  const keys = await ssm.read(parameter, SIGNING_KEYS_SSM_ENV);
  if (keys.trim() === "") throw internalError(`SSM parameter ${parameter} (${SIGNING_KEYS_SSM_ENV}) is empty; it must hold ${SIGNING_KEYS_ENV} (id:secret[,id:secret])`);
  return { ...env, [SIGNING_KEYS_ENV]: keys };
}

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
  // `/apis/*` also matches `/apis` itself (Hono wildcard semantics).
  outer.all("/apis/*", () => err.toResponse());
  outer.all("*", (c) => app.fetch(c.req.raw));
  return handle(outer);
}

/** Options of {@link createLambdaHandler}. */
export interface LambdaHandlerOptions {
  /** structured log sink; default: JSON lines on stdout (CloudWatch Logs) */
  log?: (record: LogRecord) => void;
  /**
   * Provider transports (`RuntimeEnv.transports`), for tests that point the
   * official client at a private CA; default {@link lambdaTransports}.
   */
  transports?: RuntimeEnv["transports"];
}

/**
 * Build a Lambda handler that loads its config (and signing keys) from
 * `env` on first use. A config fault (500) is kept for the environment's
 * life; a transient SSM failure (503) is answered once and retried on the
 * next event.
 */
export function createLambdaHandler(env: LambdaEnv = process.env, options: LambdaHandlerOptions = {}): LambdaHandler {
  let ready: Promise<LambdaHandler> | undefined;
  const emit = (record: LogRecord) => (options.log ? options.log(record) : console.error(JSON.stringify(record)));
  const load = async (): Promise<LambdaHandler> => {
    const ssm = ssmReader();
    try {
      const [{ text, source }, runtimeEnv] = await Promise.all([readConfigText(env, ssm), readSigningKeys(env, ssm)]);
      const { config } = loadConfig(text, source);
      const transports = options.transports ?? (await lambdaTransports(config));
      const runtime: RuntimeEnv = { env: runtimeEnv, now: () => Date.now(), ...(transports ? { transports } : {}) };
      const bridge = fromConfig(config, runtime, options.log ? { log: options.log } : {});
      const mode = signingMode(runtimeEnv);
      for (const record of policyStartupNotices(config)) emit(record);
      if (mode.mode === "insecure") emit({ level: "warn", msg: mode.warning });
      if (mode.mode === "refused") {
        emit({ level: "error", msg: mode.message });
        return refusingApis(bridge.app, internalError(mode.message));
      }
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

/** The function's handler (`functions/lambda.handler`). */
export const handler = createLambdaHandler();
