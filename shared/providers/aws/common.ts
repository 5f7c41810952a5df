/**
 * Plumbing shared by the AWS providers: provider-instance schema,
 * credentials, client options and the mapping of AWS SDK v3 errors to
 * `metav1.Status` failures.
 *
 * Sources: AWS SDK for JavaScript v3 developer guide ("Setting credentials
 * in Node.js", "Abort requests", "Retry strategy"); AWS common errors
 * (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/CommonErrors.html).
 */
import * as z from "../../config/zod.ts";
import { internalError, serviceUnavailable, type StatusError } from "../../k8s/status.ts";
import { awsRetryAfterSeconds, THROTTLED_RETRY_AFTER_SECONDS } from "../backoff.ts";
import type { RuntimeEnv } from "../types.ts";
import { awsAssumeRoleSchema } from "./identity.ts";

/** `credentials.assumeRole`: per-namespace roles (`./identity.ts`); absent: every read under the source's credentials. */
const assumeRole = z.optional(awsAssumeRoleSchema);

/**
 * Longest per-call limit a config may set, seconds. Every call is also
 * bounded by the bridge's request deadline (3 s, `shared/deadline.ts`
 * `callSignal`), so `timeoutSeconds` can shorten a call, never extend it.
 */
export const MAX_BACKEND_TIMEOUT_SECONDS = 4;

/**
 * Where an AWS provider gets credentials:
 * - `default`: the SDK's default chain (environment, shared files, IRSA web
 *   identity, ECS/EC2 metadata). Node and Lambda only.
 * - `environment`: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and optional
 *   `AWS_SESSION_TOKEN` from the runtime's environment bag (process.env, or
 *   Worker secrets on Cloudflare), read at request time.
 * - `static`: keys written in the config. Meant for local emulators only.
 *
 * With `assumeRole` (`./identity.ts`), the source's credentials only sign
 * STS `AssumeRole`: each namespace's reads run under its own role.
 */
export const awsCredentialsSchema = z.discriminatedUnion("source", [
  z.strictObject({ source: z.literal("default"), assumeRole }),
  z.strictObject({ source: z.literal("environment"), assumeRole }),
  z.strictObject({
    source: z.literal("static"),
    accessKeyId: z.string().check(z.minLength(1)),
    secretAccessKey: z.string().check(z.minLength(1)),
    sessionToken: z.optional(z.string().check(z.minLength(1))),
    assumeRole,
  }),
]);

/** Config of one AWS provider instance (the fields besides `type`). */
export const awsProviderSchema = z.strictObject({
  /** AWS region, e.g. `us-east-1` */
  region: z.string().check(z.regex(/^[a-z]{2}(-[a-z0-9]+)+-\d+$/, "must be an AWS region such as us-east-1")),
  /** endpoint override, e.g. `http://127.0.0.1:4566` for an emulator */
  endpoint: z.optional(z.url({ protocol: /^https?$/ })),
  credentials: z._default(awsCredentialsSchema, { source: "default" }),
  /** per-call timeout, seconds (default 2, at most 4; never past the bridge's 3 s request deadline) */
  timeoutSeconds: z._default(z.number().check(z.positive(), z.maximum(MAX_BACKEND_TIMEOUT_SECONDS)), 2),
  /** SDK attempts per call, including the first (default 2) */
  maxAttempts: z._default(z.number().check(z.int(), z.minimum(1), z.maximum(5)), 2),
});

/** Validated AWS provider instance config. */
export type AwsProviderConfig = z.infer<typeof awsProviderSchema>;

/** Credentials object the SDK accepts, or a provider function. */
type AwsCredentials = { accessKeyId: string; secretAccessKey: string; sessionToken?: string };

/**
 * Options for an AWS SDK v3 client built from a provider config.
 *
 * @param providerName used in error messages
 * @throws never at build time; a missing environment credential surfaces as a
 *   500 StatusError on the first call (credential provider rejects)
 */
export function awsClientOptions(providerName: string, config: AwsProviderConfig, runtime: RuntimeEnv) {
  const options: {
    region: string;
    endpoint?: string;
    maxAttempts: number;
    credentials?: AwsCredentials | (() => Promise<AwsCredentials>);
  } = { region: config.region, maxAttempts: config.maxAttempts };
  if (config.endpoint !== undefined) options.endpoint = config.endpoint;
  const creds = config.credentials;
  if (creds.source === "static") {
    options.credentials = {
      accessKeyId: creds.accessKeyId,
      secretAccessKey: creds.secretAccessKey,
      ...(creds.sessionToken !== undefined ? { sessionToken: creds.sessionToken } : {}),
    };
  } else if (creds.source === "environment") {
    options.credentials = async () => {
      const accessKeyId = runtime.env["AWS_ACCESS_KEY_ID"];
      const secretAccessKey = runtime.env["AWS_SECRET_ACCESS_KEY"];
      const sessionToken = runtime.env["AWS_SESSION_TOKEN"];
      if (!accessKeyId || !secretAccessKey) {
        throw new CredentialsMissingError(
          `provider ${providerName}: credentials.source is "environment" but AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY is not set`,
        );
      }
      return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
    };
  }
  return options;
}

/** Raised by the `environment` credential source when a variable is missing. */
export class CredentialsMissingError extends Error {
  override name = "CredentialsMissingError";
}

/** Error codes that mean "the bridge's identity is wrong or not allowed": no retry helps. */
const CREDENTIAL_CODES = new Set([
  "AccessDenied",
  "AccessDeniedException",
  "InvalidClientTokenId",
  "UnrecognizedClientException",
  "SignatureDoesNotMatch",
  "InvalidSignatureException",
  "ExpiredToken",
  "ExpiredTokenException",
  "InvalidAccessKeyId",
  "MissingAuthenticationToken",
  "IncompleteSignature",
  "CredentialsProviderError",
  "CredentialsMissingError",
  "KMS.AccessDeniedException",
]);

/**
 * Errors raised before any request leaves: the SDK's credential chain found
 * nothing (`CredentialsProviderError`, "Could not load credentials from any
 * providers"), or the `environment` source lacks a variable.
 */
const NO_CREDENTIALS_CODES = new Set(["CredentialsProviderError", "CredentialsMissingError"]);

/**
 * Where the SDK's default chain looks, in order (`@aws-sdk/credential-provider-node`
 * defaultProvider: fromEnv, fromSSO, fromIni, fromProcess, fromTokenFile,
 * remoteProvider), for the "no credentials" message.
 */
export const DEFAULT_CHAIN_PLACES =
  "The SDK's default chain (credentials.source: default) looked in: the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), " +
  "SSO and the shared files ~/.aws/config and ~/.aws/credentials (profile AWS_PROFILE, else default; credential_process), " +
  "a web identity token (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN: EKS IRSA), " +
  "the container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI: ECS, EKS Pod Identity) " +
  "and EC2 instance metadata (unless AWS_EC2_METADATA_DISABLED=true)";

/** Error codes that mean "slow down". */
const THROTTLING_CODES = new Set([
  "Throttling",
  "ThrottlingException",
  "RequestThrottled",
  "RequestThrottledException",
  "TooManyRequestsException",
  "LimitExceededException",
  "OverLimit",
]);

/**
 * Classify an AWS SDK v3 error as a Status failure.
 * - throttling (`Throttling`, `ThrottlingException`, `RequestThrottled`, …,
 *   HTTP 429, or the SDK's `$retryable.throttling`; AWS common errors
 *   "ThrottlingException", SDK developer guide "Retry strategy") → 503 with
 *   the answer's own `Retry-After`/`x-amz-retry-after` as back-off, clamped to
 *   [1 s, 30 s], else {@link THROTTLED_RETRY_AFTER_SECONDS};
 * - timeout/abort, network errors, 5xx, anything else → 503 with the AWS
 *   code and message, back-off the answer's hint or 1 s;
 * - no credentials found (nothing sent) → 500 saying so and, for the
 *   default chain, where the SDK looked;
 * - credentials AWS refused, or permission errors → 500 naming the provider and code.
 *
 * @param what a short description of the call, e.g. `GetQueueAttributes for queue "a"`
 */
export function awsErrorToStatus(providerName: string, what: string, err: unknown): StatusError {
  const e = (err ?? {}) as {
    name?: string;
    code?: string;
    message?: string;
    $metadata?: { httpStatusCode?: number; requestId?: string };
    $retryable?: { throttling?: boolean };
  };
  const name = e.name ?? "Error";
  const message = e.message ?? String(err);
  const status = e.$metadata?.httpStatusCode;
  const where = `provider ${providerName}: ${what}`;
  if (name === "TimeoutError" || name === "AbortError") {
    return serviceUnavailable(`${where} timed out`, undefined, undefined, err);
  }
  if (NO_CREDENTIALS_CODES.has(name)) {
    // nothing was sent to AWS: the SDK found no credentials (or the environment source lacked them)
    const looked = name === "CredentialsProviderError" ? ` ${DEFAULT_CHAIN_PLACES}.` : "";
    return internalError(`${where} failed: no AWS credentials were found, so nothing was sent to AWS (${name}): ${message.replace(/\.$/, "")}.${looked}`, undefined, err);
  }
  if (CREDENTIAL_CODES.has(name) || CREDENTIAL_CODES.has(e.code ?? "")) {
    return internalError(`${where} failed: AWS refused the bridge's credentials (${name}): ${message}`, undefined, err);
  }
  const hint = awsRetryAfterSeconds(err, Date.now());
  if (THROTTLING_CODES.has(name) || e.$retryable?.throttling === true || status === 429) {
    return serviceUnavailable(`${where} was throttled by AWS (${name}): ${message}`, hint ?? THROTTLED_RETRY_AFTER_SECONDS, undefined, err);
  }
  if (status === undefined) {
    const code = e.code !== undefined ? ` ${e.code}` : "";
    return serviceUnavailable(`${where} failed: backend unreachable (${name}${code}): ${message}`, undefined, undefined, err);
  }
  return serviceUnavailable(`${where} failed with HTTP ${status} (${name}): ${message}`, hint, undefined, err);
}
