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
 * - `externalAccount`: Workload Identity Federation — an `external_account`
 *   credential configuration JSON (what `gcloud iam workload-identity-pools
 *   create-cred-config` writes; Google Cloud "Workload Identity Federation",
 *   AIP-4117 "External Account Credentials") held in an environment
 *   variable, default `GOOGLE_EXTERNAL_ACCOUNT_JSON`. The configuration holds
 *   no secret: an AWS identity (on Lambda the function's role) or an OIDC
 *   token is exchanged at Google STS for a federated token, optionally
 *   impersonating a service account. Node and Lambda use google-auth-library
 *   (`ExternalAccountClient`); the Worker the fetch implementation in
 *   `external-account.ts`. For organisations that block service-account keys.
 *
 * A missing or malformed key is a 500 naming the provider and the variable,
 * never a value and never the key's content.
 */
import * as z from "../../config/zod.ts";
import { forbidden, internalError } from "../../k8s/status.ts";
import { identityOf, namespaceMap, namespaceTemplate } from "../identity-template.ts";
import type { RuntimeEnv } from "../types.ts";

/** Default environment variable holding a service-account key JSON. */
export const DEFAULT_KEY_VARIABLE = "GOOGLE_SERVICE_ACCOUNT_JSON";

/** Default environment variable holding an `external_account` credential configuration JSON. */
export const DEFAULT_EXTERNAL_ACCOUNT_VARIABLE = "GOOGLE_EXTERNAL_ACCOUNT_JSON";

/** Google's OAuth 2.0 token endpoint, used when a key names none. */
export const GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token";

/**
 * A Google Cloud project id (6–30 characters: lowercase letters, digits,
 * hyphens; starts with a letter, does not end with a hyphen; Resource
 * Manager `Project.projectId`) or project number.
 */
export const projectIdSchema = z.string().check(z.regex(/^(?:[a-z][-a-z0-9]{4,28}[a-z0-9]|\d{1,20})$/, "must be a Google Cloud project id or number"));

/** A service account email: `NAME@PROJECT.iam.gserviceaccount.com` (name 6–30 characters) or another `*.gserviceaccount.com` domain. */
export const SERVICE_ACCOUNT_EMAIL = /^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com$/;

/** The IAM Service Account Credentials API origin. */
export const IAM_CREDENTIALS_ENDPOINT = "https://iamcredentials.googleapis.com";

/**
 * `credentials.impersonate`: each namespace's reads run as its own service
 * account (IAM Service Account Credentials `generateAccessToken`, called
 * with the source's token; `./impersonation.ts`):
 * - `serviceAccount`: template with `{namespace}`, e.g.
 *   `emb-{namespace}@my-project.iam.gserviceaccount.com`; or
 *   `serviceAccounts`: namespace → email (other namespaces are refused, 403);
 * - `lifetimeSeconds`: of each impersonated token (300–3600, default 3600);
 * - `endpoint`: IAM Credentials API origin (default {@link IAM_CREDENTIALS_ENDPOINT}).
 * The source's principal needs `roles/iam.serviceAccountTokenCreator` on each.
 */
export const gcpImpersonateSchema = z
  .strictObject({
    serviceAccount: z.optional(
      namespaceTemplate(SERVICE_ACCOUNT_EMAIL, "a service account email such as emb-{namespace}@my-project.iam.gserviceaccount.com", "serviceAccounts"),
    ),
    serviceAccounts: z.optional(namespaceMap(z.string().check(z.regex(SERVICE_ACCOUNT_EMAIL, "must be a service account email such as emb-team-a@my-project.iam.gserviceaccount.com")))),
    lifetimeSeconds: z._default(z.number().check(z.int(), z.minimum(300), z.maximum(3600)), 3600),
    endpoint: z.optional(z.url({ protocol: /^https?$/ })),
  })
  .check(
    z.refine((i) => (i.serviceAccount === undefined) !== (i.serviceAccounts === undefined), "set exactly one of serviceAccount (a template with {namespace}) and serviceAccounts (a map namespace → email)"),
  );

/** Validated `credentials.impersonate`. */
export type GcpImpersonate = z.infer<typeof gcpImpersonateSchema>;

/**
 * The service account whose token serves reads for `namespace`. No I/O.
 *
 * @throws StatusError 403 when `serviceAccounts` has no entry for it; 500
 *   when the template gives no valid email for it (a name over 30 characters)
 */
export function impersonationTarget(providerName: string, impersonate: GcpImpersonate, namespace: string): string {
  const email = identityOf(impersonate.serviceAccount, impersonate.serviceAccounts, namespace);
  if (email === undefined) {
    throw forbidden(`provider ${providerName}: credentials.impersonate.serviceAccounts names no service account for namespace "${namespace}", so nothing is read for it`);
  }
  if (!SERVICE_ACCOUNT_EMAIL.test(email)) {
    throw internalError(`provider ${providerName}: credentials.impersonate.serviceAccount gives "${email}" for namespace "${namespace}", not a valid service account email (names are 6–30 characters)`);
  }
  return email;
}

/** `credentials.impersonate` of every source: per-namespace service accounts; absent: every read as the source's principal. */
const impersonate = z.optional(gcpImpersonateSchema);

/** `credentials:` of a Google provider instance. */
export const gcpCredentialsSchema = z.discriminatedUnion("source", [
  z.strictObject({ source: z.literal("default"), impersonate }),
  z.strictObject({
    source: z.literal("environment"),
    variable: z._default(z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name")), DEFAULT_KEY_VARIABLE),
    impersonate,
  }),
  z.strictObject({
    source: z.literal("externalAccount"),
    variable: z._default(
      z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name")),
      DEFAULT_EXTERNAL_ACCOUNT_VARIABLE,
    ),
    impersonate,
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
  const where = `provider ${providerName}: credentials.source is "environment" but ${credentials.variable}`;
  return readJsonVariable(runtime.env[credentials.variable], where, serviceAccountKeySchema, {
    expected: "a service-account key file's content",
    kind: "a service-account key",
  }).data;
}

/**
 * Parse and validate the JSON of a credentials variable.
 *
 * @param text the variable's value (`undefined` when unset)
 * @param where the start of every message, naming the provider and the variable
 * @param what `expected`: what the JSON should be (said when it is not
 *   JSON); `kind`: what the schema describes (said when it does not match)
 * @returns the JSON as parsed and its validated form
 * @throws StatusError 500 when the variable is unset or blank, not JSON, or
 *   does not match `schema` (the message names the failing fields, never the content)
 */
function readJsonVariable<S extends z.ZodMiniType>(
  text: string | undefined,
  where: string,
  schema: S,
  what: { expected: string; kind: string },
): { json: unknown; data: z.infer<S> } {
  if (text === undefined || text.trim() === "") throw internalError(`${where} is not set`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw internalError(`${where} does not hold JSON (expected ${what.expected})`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    throw internalError(`${where} is not ${what.kind} (${fields})`);
  }
  return { json, data: parsed.data };
}

/** Google STS's token endpoint (`https://sts.googleapis.com/v1/token`), used when a configuration names none. */
export const GOOGLE_STS_TOKEN_URL = "https://sts.googleapis.com/v1/token";

const subjectTokenFormatSchema = z.optional(
  z.looseObject({
    type: z._default(z.enum(["text", "json"]), "text"),
    subject_token_field_name: z.optional(z.string()),
  }),
);

/**
 * The fields of an `external_account` credential configuration the bridge
 * uses (AIP-4117; google-auth-library `BaseExternalAccountClient` options).
 * `credential_source` is one of: `environment_id: aws1` (AWS; with
 * `regional_cred_verification_url`, and on EC2 the metadata `url`,
 * `region_url`), `file` or `url` (an OIDC/SAML token, `format` text or
 * json), `executable` or `certificate` (official client only).
 */
export const externalAccountSchema = z.looseObject({
  type: z.literal("external_account"),
  audience: z.string().check(z.minLength(1)),
  subject_token_type: z.string().check(z.minLength(1)),
  token_url: z._default(z.url({ protocol: /^https?$/ }), GOOGLE_STS_TOKEN_URL),
  service_account_impersonation_url: z.optional(z.url({ protocol: /^https?$/ })),
  service_account_impersonation: z.optional(z.looseObject({ token_lifetime_seconds: z.optional(z.number().check(z.gte(600), z.lte(43200))) })),
  workforce_pool_user_project: z.optional(z.string()),
  credential_source: z.looseObject({
    environment_id: z.optional(z.string()),
    regional_cred_verification_url: z.optional(z.string()),
    region_url: z.optional(z.string()),
    url: z.optional(z.url({ protocol: /^https?$/ })),
    headers: z.optional(z.record(z.string(), z.string())),
    file: z.optional(z.string()),
    format: subjectTokenFormatSchema,
  }),
});

/** A parsed `external_account` credential configuration. */
export type ExternalAccountConfig = z.infer<typeof externalAccountSchema>;

/**
 * Read and validate the credential configuration of an `externalAccount`
 * source: the JSON text and its parsed form (the official client is given
 * the JSON as is).
 *
 * @param providerName used in error messages
 * @throws StatusError 500 naming the provider and the variable when it is
 *   unset, not JSON, or not an `external_account` configuration (the
 *   message names the failing fields, never the content)
 */
export function readExternalAccount(
  providerName: string,
  credentials: Extract<GcpCredentials, { source: "externalAccount" }>,
  runtime: RuntimeEnv,
): { json: Record<string, unknown>; config: ExternalAccountConfig } {
  const where = `provider ${providerName}: credentials.source is "externalAccount" but ${credentials.variable}`;
  const { json, data } = readJsonVariable(runtime.env[credentials.variable], where, externalAccountSchema, {
    expected: "the credential configuration gcloud iam workload-identity-pools create-cred-config writes",
    kind: "an external_account credential configuration",
  });
  return { json: json as Record<string, unknown>, config: data };
}
