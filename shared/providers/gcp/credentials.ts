/**
 * Google credentials shared by the Google providers.
 *
 * Sources (Google Cloud "How Application Default Credentials works";
 * "Create and delete service account keys" for the key file format):
 * - `default`: Application Default Credentials through google-auth-library
 *   (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud user credentials, the metadata
 *   server of GCE/GKE/Cloud Run, workload identity). Node and Lambda only:
 *   it needs the official client, which does not run on Workers.
 * - `environment`: a service-account key JSON held in an environment
 *   variable (a Kubernetes Secret, a Lambda environment variable, a
 *   Cloudflare Worker secret), default `GOOGLE_SERVICE_ACCOUNT_JSON`,
 *   read at request time.
 *
 * A missing or malformed key is a 500 naming the provider and the variable,
 * never a value and never the key's content.
 */
import * as z from "../../config/zod.ts";
import { internalError } from "../../k8s/status.ts";
import type { RuntimeEnv } from "../types.ts";

/** Default environment variable holding a service-account key JSON. */
export const DEFAULT_KEY_VARIABLE = "GOOGLE_SERVICE_ACCOUNT_JSON";

/** Google's OAuth 2.0 token endpoint, used when a key names none. */
export const GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token";

/** `credentials:` of a Google provider instance. */
export const gcpCredentialsSchema = z.discriminatedUnion("source", [
  z.strictObject({ source: z.literal("default") }),
  z.strictObject({
    source: z.literal("environment"),
    variable: z._default(z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name")), DEFAULT_KEY_VARIABLE),
  }),
]);

/** Validated Google credentials config. */
export type GcpCredentials = z.infer<typeof gcpCredentialsSchema>;

/** The fields of a service-account key JSON the bridge uses. */
export const serviceAccountKeySchema = z.looseObject({
  type: z.literal("service_account"),
  project_id: z.optional(z.string()),
  private_key_id: z.optional(z.string()),
  private_key: z.string().check(z.includes("PRIVATE KEY", { message: "must be a PEM private key" })),
  client_email: z.email(),
  token_uri: z._default(z.url({ protocol: /^https?$/ }), GOOGLE_TOKEN_URI),
});

/** A parsed service-account key. */
export type ServiceAccountKey = z.infer<typeof serviceAccountKeySchema>;

/**
 * Read and validate the service-account key of an `environment` source.
 *
 * @param providerName used in error messages
 * @throws StatusError 500 naming the provider and the variable when it is
 *   unset, not JSON, or not a service-account key (the message never
 *   contains the variable's content)
 */
export function readServiceAccountKey(
  providerName: string,
  credentials: Extract<GcpCredentials, { source: "environment" }>,
  runtime: RuntimeEnv,
): ServiceAccountKey {
  const variable = credentials.variable;
  const text = runtime.env[variable];
  const where = `provider ${providerName}: credentials.source is "environment" but ${variable}`;
  if (text === undefined || text.trim() === "") throw internalError(`${where} is not set`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw internalError(`${where} does not hold JSON (expected a service-account key file's content)`);
  }
  const parsed = serviceAccountKeySchema.safeParse(json);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    throw internalError(`${where} is not a service-account key (${fields})`);
  }
  return parsed.data;
}
