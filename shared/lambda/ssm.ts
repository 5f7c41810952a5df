/**
 * AWS Systems Manager Parameter Store reads for the Lambda function: its
 * config (`BRIDGE_CONFIG_SSM_PARAMETER`) and its request signing keys
 * (`BRIDGE_SIGNING_KEYS_SSM_PARAMETER`) at cold start (`sources.ts`).
 *
 * Node only (the AWS SDK's SSM client); never imported by the Worker.
 */
import { internalError, serviceUnavailable, StatusError } from "../k8s/status.ts";

/** Longest wait for one SSM `GetParameter`, ms (inside the function timeout, with the request's own 4.5 s). */
export const SSM_TIMEOUT_MS = 3000;

/** Reads SSM parameters with one client; the client is loaded only when a parameter is named. */
export interface SsmReader {
  /**
   * The value of parameter `name` (a name or ARN), for the environment
   * variable `variable` that named it (used in error messages).
   *
   * @throws StatusError 500 for a deployment fault (missing parameter,
   *   access denied, any other 400, a parameter without a value); 503 with
   *   `Retry-After: 5` for anything that may pass (throttling, 5xx, network,
   *   the {@link SSM_TIMEOUT_MS} timeout)
   */
  read(name: string, variable: string): Promise<string>;
  /** destroy the client (if one was loaded); in-flight reads are not awaited */
  close(): void;
}

/**
 * An {@link SsmReader} calling `GetParameter` with `WithDecryption: true`
 * (String and SecureString parameters; AWS Systems Manager API Reference,
 * https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_GetParameter.html),
 * at most 2 attempts (SDK `maxAttempts`) under one {@link SSM_TIMEOUT_MS}
 * deadline per read. `@aws-sdk/client-ssm` is imported on the first read.
 * Region and credentials come from the Lambda environment (the SDK's
 * default chain); the endpoint honours `AWS_ENDPOINT_URL_SSM` (SDK
 * service-specific endpoints).
 */
export function ssmReader(): SsmReader {
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
