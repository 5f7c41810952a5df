/**
 * Workload Identity Federation over `fetch` — the path used where Google's
 * official client (google-auth-library's `ExternalAccountClient`) cannot run:
 * Cloudflare Workers. Node and Lambda use the official client (`grpc.ts`).
 *
 * The documented exchange (AIP-4117 "External Account Credentials"; Google
 * Cloud "Workload Identity Federation with other clouds › REST"; Security
 * Token Service API `v1/token`, RFC 8693 token exchange; IAM Service Account
 * Credentials API `generateAccessToken`):
 *
 * 1. a subject token from `credential_source`:
 *    - `environment_id: aws1`: a GetCallerIdentity request to
 *      `regional_cred_verification_url` (`{region}` filled in), signed with
 *      AWS Signature Version 4 (`../aws/sigv4.ts`) by the AWS
 *      credentials of the runtime's environment (`AWS_ACCESS_KEY_ID`,
 *      `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`; region `AWS_REGION` or
 *      `AWS_DEFAULT_REGION` — there is no EC2 metadata server on Workers),
 *      serialized as the URL-encoded JSON `{url, method: "POST", headers:
 *      [{key, value}…]}` with `x-goog-cloud-target-resource` = `audience`
 *      among the signed headers;
 *    - `url`: a GET of the URL with its `headers`, the body as the token
 *      (`format.type: text`) or its `format.subject_token_field_name`
 *      (`json`) — an OIDC or SAML token;
 *    - `file`, `executable`, `certificate`: refused (500) — no file system
 *      or processes on this path;
 * 2. `POST token_url` (form): `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`,
 *    `audience`, `scope`, `requested_token_type=urn:ietf:params:oauth:token-type:access_token`,
 *    `subject_token`, `subject_token_type` (and `options` with the
 *    workforce pool's `userProject`) → `{access_token, expires_in}`; the
 *    scope is `cloud-platform` when impersonating (iamcredentials needs it),
 *    else the caller's scope;
 * 3. with `service_account_impersonation_url`: `POST` it with the federated
 *    token as Bearer and `{scope: [scope], lifetime: "<n>s"}` →
 *    `{accessToken, expireTime}`.
 *
 * Tokens are re-used until one minute before they expire; concurrent
 * requests share one exchange. Failures are `metav1.Status`: 500 when an
 * endpoint refuses the identity (4xx: no retry fixes it) or the runtime
 * lacks what the configuration needs; 503 (with the endpoint's Retry-After)
 * when an endpoint is unreachable, times out or answers 5xx/429.
 */
import { sigv4Headers } from "../aws/sigv4.ts";
import { readBounded } from "../../bounded-body.ts";
import * as z from "../../config/zod.ts";
import { internalError, serviceUnavailable } from "../../k8s/status.ts";
import { parseRfc3339 } from "../../k8s/time.ts";
import { parseRetryAfter } from "../backoff.ts";
import type { ExternalAccountConfig } from "./credentials.ts";
import { jsonOrUndefined } from "./errors.ts";
import { MONITORING_READ_SCOPE, RenewingToken } from "./token.ts";

/** What the REST transport needs of a token source (also met by `ServiceAccountTokenSource`). */
export interface AccessTokenSource {
  /** token exchanges started (for tests and the transport's one-retry-on-401 rule) */
  readonly exchanges: number;
  /** a valid access token; `signal` is the caller's deadline */
  token(signal?: AbortSignal): Promise<string>;
  /** forget the cached token (after the API answered 401 to it); with `token`, only when that is still the cached one */
  invalidate(token?: string): void;
}

/** The scope iamcredentials requires of the token that calls it. */
export const CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
/** Lifetime asked of an impersonated token when the configuration names none, seconds (Google's default). */
const DEFAULT_IMPERSONATION_LIFETIME_SECONDS = 3600;
/** Largest subject token read from a `url` source, bytes. */
const MAX_SUBJECT_TOKEN_BYTES = 64 * 1024;

const stsResponseSchema = z.looseObject({
  access_token: z.string().check(z.minLength(1)),
  expires_in: z._default(z.coerce.number().check(z.positive()), 3600),
});
const impersonationResponseSchema = z.looseObject({ accessToken: z.string().check(z.minLength(1)), expireTime: z.string() });
const oauthErrorSchema = z.looseObject({ error: z.string(), error_description: z.optional(z.string()) });
const googleErrorSchema = z.looseObject({ error: z.looseObject({ message: z.optional(z.string()), status: z.optional(z.string()) }) });

/** Options of an {@link ExternalAccountTokenSource}. */
export interface ExternalAccountOptions {
  providerName: string;
  config: ExternalAccountConfig;
  /** the runtime's environment (AWS credentials and region for `aws1`) */
  env: Readonly<Record<string, string | undefined>>;
  /** scope of the final token (default Cloud Monitoring read) */
  scope?: string;
  /** clock, ms since epoch */
  now: () => number;
  /** `fetch` to use (default the global one) */
  fetch?: typeof fetch;
}

/** Access tokens through Workload Identity Federation, cached and coalesced. */
export class ExternalAccountTokenSource implements AccessTokenSource {
  exchanges = 0;
  private readonly options: ExternalAccountOptions;
  private readonly cached: RenewingToken;

  constructor(options: ExternalAccountOptions) {
    this.options = options;
    this.cached = new RenewingToken(() => options.now());
  }

  /**
   * A valid access token (federated, or the impersonated service account's).
   *
   * @throws StatusError 500 when the configuration cannot run here or an
   *   endpoint refuses the identity; 503 when an endpoint is unreachable,
   *   times out, or answers 5xx/429
   */
  async token(signal?: AbortSignal): Promise<string> {
    return this.cached.get(() => this.exchange(signal));
  }

  invalidate(token?: string): void {
    this.cached.invalidate(token);
  }

  private get where(): string {
    return `provider ${this.options.providerName}: Workload Identity Federation (${this.options.config.audience})`;
  }

  private async exchange(signal?: AbortSignal): Promise<{ token: string; expiresAt: number }> {
    this.exchanges++;
    const { config } = this.options;
    const scope = this.options.scope ?? MONITORING_READ_SCOPE;
    const impersonate = config.service_account_impersonation_url;
    const subjectToken = await this.subjectToken(signal);
    const form = new URLSearchParams({
      grant_type: TOKEN_EXCHANGE_GRANT,
      audience: config.audience,
      scope: impersonate !== undefined ? CLOUD_PLATFORM_SCOPE : scope,
      requested_token_type: ACCESS_TOKEN_TYPE,
      subject_token: subjectToken,
      subject_token_type: config.subject_token_type,
    });
    if (config.workforce_pool_user_project !== undefined && impersonate === undefined) {
      form.set("options", JSON.stringify({ userProject: config.workforce_pool_user_project }));
    }
    const sts = await this.call("Google STS", config.token_url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
      body: form.toString(),
      signal,
    });
    const federated = stsResponseSchema.safeParse(sts.body);
    if (!federated.success) throw serviceUnavailable(`${this.where}: Google STS's answer has no access_token`);
    if (impersonate === undefined) {
      return { token: federated.data.access_token, expiresAt: this.options.now() + federated.data.expires_in * 1000 };
    }
    const lifetime = config.service_account_impersonation?.token_lifetime_seconds ?? DEFAULT_IMPERSONATION_LIFETIME_SECONDS;
    const answer = await this.call("generateAccessToken", impersonate, {
      method: "POST",
      headers: { authorization: `Bearer ${federated.data.access_token}`, "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ scope: [scope], lifetime: `${lifetime}s` }),
      signal,
    });
    const impersonated = impersonationResponseSchema.safeParse(answer.body);
    const expiresAt = impersonated.success ? parseRfc3339(impersonated.data.expireTime) : undefined;
    if (!impersonated.success || expiresAt === undefined) {
      throw serviceUnavailable(`${this.where}: generateAccessToken's answer has no accessToken or no RFC 3339 expireTime`);
    }
    return { token: impersonated.data.accessToken, expiresAt };
  }

  /** The subject token of `credential_source`. */
  private async subjectToken(signal?: AbortSignal): Promise<string> {
    const source = this.options.config.credential_source;
    if (source.environment_id !== undefined) {
      if (!/^aws1$/i.test(source.environment_id)) {
        throw internalError(`${this.where}: credential_source.environment_id ${JSON.stringify(source.environment_id)} is not supported (aws1 is)`);
      }
      return this.awsSubjectToken();
    }
    if (source.url !== undefined) {
      const { text } = await this.call("the subject token URL", source.url, { method: "GET", headers: source.headers ?? {}, signal }, true);
      return pickToken(text, source.format, this.where);
    }
    throw internalError(
      `${this.where}: credential_source needs a file system or a process (file, executable or certificate), which this runtime does not have; ` +
        `use an AWS identity (environment_id aws1) or a token URL here, or run the bridge on Node or Lambda (google-auth-library)`,
    );
  }

  /** A signed GetCallerIdentity request, serialized as Google STS expects it (AIP-4117). */
  private async awsSubjectToken(): Promise<string> {
    const { env, config } = this.options;
    const accessKeyId = env["AWS_ACCESS_KEY_ID"];
    const secretAccessKey = env["AWS_SECRET_ACCESS_KEY"];
    const region = env["AWS_REGION"] ?? env["AWS_DEFAULT_REGION"];
    if (!accessKeyId || !secretAccessKey || !region) {
      throw internalError(
        `${this.where}: an AWS identity needs AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials) ` +
          `and AWS_REGION in the environment; missing: ${[!accessKeyId && "AWS_ACCESS_KEY_ID", !secretAccessKey && "AWS_SECRET_ACCESS_KEY", !region && "AWS_REGION"].filter(Boolean).join(", ")}`,
      );
    }
    const template = config.credential_source.regional_cred_verification_url ?? "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15";
    const url = new URL(template.replace("{region}", region));
    const sessionToken = env["AWS_SESSION_TOKEN"];
    const signed = await sigv4Headers({
      service: "sts",
      region,
      credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) },
      method: "POST",
      url,
      headers: { "x-goog-cloud-target-resource": config.audience },
    });
    const headers = Object.entries(signed).map(([key, value]) => ({ key, value }));
    return encodeURIComponent(JSON.stringify({ url: url.toString(), method: "POST", headers }));
  }

  /**
   * One call to an endpoint of the exchange, its answer parsed as JSON
   * (`raw`: as text).
   *
   * @throws StatusError 503 when unreachable, timed out, 5xx or 429 (with
   *   the endpoint's Retry-After); 500 on any other non-2xx (the endpoint's
   *   OAuth or Google error text in the message)
   */
  private async call(what: string, url: string, init: RequestInit, raw = false): Promise<{ body: unknown; text: string }> {
    const where = `${this.where}: ${what} (${url})`;
    let response: Response;
    try {
      response = await (this.options.fetch ?? fetch)(url, init);
    } catch (err) {
      const name = (err as Error)?.name;
      if (name === "TimeoutError" || name === "AbortError") throw serviceUnavailable(`${where} timed out`, undefined, undefined, err);
      throw serviceUnavailable(`${where} is unreachable (${(err as Error).message})`, undefined, undefined, err);
    }
    const text = raw ? await boundedText(response, MAX_SUBJECT_TOKEN_BYTES, where) : await response.text();
    const body = jsonOrUndefined(text);
    if (!response.ok) {
      const oauth = oauthErrorSchema.safeParse(body);
      const google = googleErrorSchema.safeParse(body);
      const reason = oauth.success
        ? `${oauth.data.error}${oauth.data.error_description ? `: ${oauth.data.error_description}` : ""}`
        : google.success
          ? `${google.data.error.status ?? ""}${google.data.error.message ? `: ${google.data.error.message}` : ""}`
          : `HTTP ${response.status}`;
      if (response.status >= 500 || response.status === 429) {
        throw serviceUnavailable(`${where} answered HTTP ${response.status} (${reason})`, parseRetryAfter(response.headers.get("retry-after"), Date.now()));
      }
      throw internalError(`${where} refused the identity: HTTP ${response.status} (${reason})`);
    }
    return { body, text };
  }
}

/**
 * A response body as text, read up to `limit` bytes; the rest is cancelled.
 *
 * @throws StatusError 500 when the body is longer than `limit` bytes
 */
async function boundedText(response: Response, limit: number, where: string): Promise<string> {
  const bytes = await readBounded(response.body, limit, () => internalError(`${where} answered more than ${limit} bytes`));
  return new TextDecoder().decode(bytes);
}

/** The subject token in a `url` source's answer (`format` text or json). */
function pickToken(text: string, format: ExternalAccountConfig["credential_source"]["format"], where: string): string {
  if (format?.type !== "json") {
    if (text.trim() === "") throw internalError(`${where}: the subject token URL answered an empty token`);
    return text.trim();
  }
  const field = format.subject_token_field_name;
  const value = field !== undefined ? (jsonOrUndefined(text) as Record<string, unknown> | undefined)?.[field] : undefined;
  if (typeof value !== "string" || value === "") {
    throw internalError(`${where}: the subject token URL's JSON has no string field ${JSON.stringify(field ?? "(subject_token_field_name unset)")}`);
  }
  return value;
}

