/**
 * Where the Lambda function finds its config text and its request signing
 * keys: its environment variables, a file shipped in the artifact, or SSM
 * Parameter Store (`ssm.ts`). Node only; never imported by the Worker.
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { internalError } from "../k8s/status.ts";
import { SIGNING_KEYS_ENV } from "../signing.ts";
import { ssmReader, type SsmReader } from "./ssm.ts";

/** Environment of the function (`process.env` in Lambda). */
export type LambdaEnv = Readonly<Record<string, string | undefined>>;

/** Environment variable naming the SSM parameter that holds `BRIDGE_SIGNING_KEYS`. */
export const SIGNING_KEYS_SSM_ENV = "BRIDGE_SIGNING_KEYS_SSM_PARAMETER";

/**
 * Read the config text named by the environment, from the first of these set:
 * 1. `BRIDGE_CONFIG` — the YAML inline;
 * 2. `BRIDGE_CONFIG_FILE` — a file, relative to `LAMBDA_TASK_ROOT` (else the
 *    working directory);
 * 3. `BRIDGE_CONFIG_SSM_PARAMETER` — the name or ARN of an SSM parameter.
 *
 * @param ssm reader for `BRIDGE_CONFIG_SSM_PARAMETER` (default: a new one, closed after use)
 * @returns the YAML text and a source name for error messages
 *   (`<env:BRIDGE_CONFIG>`, the file as named, `ssm:<parameter>`)
 * @throws StatusError 500 when no source is set or the file is unreadable;
 *   the reader's 500/503 for the SSM parameter (a 503 is retried on the next invocation)
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
 * `BRIDGE_SIGNING_KEYS_SSM_PARAMETER` when only the latter is set (inline
 * keys win; `env` itself is returned unchanged when no parameter is read).
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
