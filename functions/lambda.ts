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
 *
 * This file only wires `process.env` to the handler built in
 * `shared/lambda/` (`handler.ts`: the cold-start load and answers;
 * `sources.ts`: config and key sources; `ssm.ts`: the SSM reads).
 */
import { createLambdaHandler } from "../shared/lambda/handler.ts";

// for the runtimes' tests and benches, which build handlers from their own environments
export { createLambdaHandler, lambdaTransports, type LambdaHandler, type LambdaHandlerOptions } from "../shared/lambda/handler.ts";
export type { LambdaEnv } from "../shared/lambda/sources.ts";

/** The function's handler (`functions/lambda.handler`), configured by the function's environment. */
export const handler = createLambdaHandler(process.env);
