/**
 * AWS Lambda entry point: the bridge's Hono app through `hono/aws-lambda`,
 * answering Lambda Function URL and API Gateway HTTP API (payload format
 * 2.0) events.
 *
 * Config is YAML text, from the first of these environment variables set:
 * 1. `BRIDGE_CONFIG` — the YAML inline;
 * 2. `BRIDGE_CONFIG_FILE` — a file shipped in the artifact, relative to
 *    `LAMBDA_TASK_ROOT` (e.g. `bridge.yaml`, copied there by
 *    `infra/lambda/build.ts --config`);
 * 3. `BRIDGE_CONFIG_SSM_PARAMETER` — the name or ARN of an SSM parameter
 *    (String or SecureString, read `WithDecryption`) fetched with
 *    `GetParameter` on the first invocation of each execution environment.
 *
 * The app is built once per execution environment (cold start) and its
 * provider caches live as long as it. AWS credentials come from the
 * function's execution role through the SDK's default chain (Lambda sets
 * `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), so
 * providers use `credentials: { source: default }` or `environment`.
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
import { buildBridge } from "../shared/bridge.ts";
import { ConfigError } from "../shared/config/yaml.ts";
import { internalError, serviceUnavailable, StatusError } from "../shared/k8s/status.ts";

/** Environment of the function (`process.env` in Lambda). */
export type LambdaEnv = Readonly<Record<string, string | undefined>>;

/** A Lambda handler for v2 HTTP events, as `hono/aws-lambda` builds it. */
export type LambdaHandler = ReturnType<typeof handle>;

/** Longest wait for the SSM parameter, ms (inside the function timeout, with the request's own 4.5 s). */
const SSM_TIMEOUT_MS = 3000;

/**
 * Read the config text named by the environment.
 *
 * @returns the YAML text and a source name for error messages
 * @throws StatusError 500 when no source is set or the file is unreadable;
 *   503 when SSM could not be read (retried on the next invocation)
 */
export async function readConfigText(env: LambdaEnv): Promise<{ text: string; source: string }> {
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
  if (parameter) return { text: await readSsmParameter(parameter), source: `ssm:${parameter}` };
  throw internalError("no config: set BRIDGE_CONFIG (inline YAML), BRIDGE_CONFIG_FILE or BRIDGE_CONFIG_SSM_PARAMETER");
}

/**
 * `GetParameter` with decryption (AWS Systems Manager API Reference,
 * https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_GetParameter.html).
 * Region and credentials come from the Lambda environment; the endpoint
 * honours `AWS_ENDPOINT_URL_SSM` (SDK service-specific endpoints). The
 * client is loaded only when this source is used.
 */
async function readSsmParameter(name: string): Promise<string> {
  const { GetParameterCommand, SSMClient } = await import("@aws-sdk/client-ssm");
  const client = new SSMClient({ maxAttempts: 2 });
  try {
    const out = await client.send(new GetParameterCommand({ Name: name, WithDecryption: true }), {
      abortSignal: AbortSignal.timeout(SSM_TIMEOUT_MS),
    });
    const value = out.Parameter?.Value;
    if (value === undefined) throw internalError(`SSM parameter ${name} has no value`);
    return value;
  } catch (err) {
    if (err instanceof StatusError) throw err;
    const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
    const what = `SSM parameter ${name} (BRIDGE_CONFIG_SSM_PARAMETER) cannot be read (${e.name ?? "Error"}): ${e.message ?? String(err)}`;
    // a missing parameter or a denied read is a deployment fault; anything else may pass
    if (e.name === "ParameterNotFound" || e.name === "AccessDeniedException" || e.$metadata?.httpStatusCode === 400) {
      throw internalError(what, undefined, err);
    }
    throw serviceUnavailable(what, 5, undefined, err);
  } finally {
    client.destroy();
  }
}

/** A handler answering every request with the Status of `err`. */
function failing(err: StatusError): LambdaHandler {
  const app = new Hono();
  app.all("*", (c) => {
    for (const [k, v] of Object.entries(err.headers())) c.header(k, v);
    return c.body(JSON.stringify(err.toStatus()), err.code as 500, { "Content-Type": "application/json", "Cache-Control": "no-store" });
  });
  return handle(app);
}

/** Options of {@link createLambdaHandler}. */
export interface LambdaHandlerOptions {
  /** structured log sink; default: JSON lines on stdout (CloudWatch Logs) */
  log?: (record: LogRecord) => void;
}

/**
 * Build a Lambda handler that loads its config from `env` on first use.
 * A config fault (500) is kept for the environment's life; a transient
 * SSM failure (503) is answered once and retried on the next event.
 */
export function createLambdaHandler(env: LambdaEnv = process.env, options: LambdaHandlerOptions = {}): LambdaHandler {
  let ready: Promise<LambdaHandler> | undefined;
  const load = async (): Promise<LambdaHandler> => {
    try {
      const { text, source } = await readConfigText(env);
      // Cloud Monitoring over REST here too: the official client does not
      // survive esbuild bundling (google-gax loads protos from disk).
      const runtime = { env, now: () => Date.now() };
      const bridge = buildBridge(text, source, runtime, options.log ? { log: options.log } : {});
      return handle(bridge.app);
    } catch (err) {
      if (err instanceof StatusError && err.code === 503) {
        ready = undefined;
        return failing(err);
      }
      const detail = err instanceof ConfigError ? `the bridge's config is invalid:\n${err.message}` : (err as Error).message;
      const record: LogRecord = { level: "error", msg: "config", error: detail };
      if (options.log) options.log(record);
      else console.error(JSON.stringify(record));
      return failing(err instanceof StatusError ? err : internalError(detail, undefined, err));
    }
  };
  return (async (event: LambdaEvent, context?: LambdaContext) => {
    const current = (ready ??= load());
    return (await current)(event, context);
  }) as LambdaHandler;
}

/** The function's handler (`functions/lambda.handler`). */
export const handler = createLambdaHandler();
