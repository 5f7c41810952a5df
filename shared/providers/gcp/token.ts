/**
 * OAuth 2.0 access tokens for a service account, over `fetch` — the path
 * used where Google's official client cannot run (Cloudflare Workers).
 *
 * The JWT bearer grant (RFC 7523; Google "Using OAuth 2.0 for Server to
 * Server Applications"): a JWT signed RS256 with the key's private key,
 * `iss` = the service account's email, `scope`, `aud` = the key's
 * `token_uri`, `iat`, `exp` = `iat` + 1 h, `kid` = the key id, is posted to
 * `token_uri` as `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`
 * and exchanged for an access token. Signing uses `jose` (WebCrypto, runs
 * in workerd and Node alike).
 *
 * Tokens are re-used until one minute before they expire; concurrent
 * requests for a token share one exchange.
 */
import { importPKCS8, SignJWT } from "jose";
import * as z from "../../config/zod.ts";
import { internalError, serviceUnavailable } from "../../k8s/status.ts";
import type { ServiceAccountKey } from "./credentials.ts";
import { parseRetryAfter } from "../backoff.ts";
import { jsonOrUndefined } from "./errors.ts";

/** Scope of a read-only Cloud Monitoring token. */
export const MONITORING_READ_SCOPE = "https://www.googleapis.com/auth/monitoring.read";

/** Lifetime asked for an assertion, seconds (Google's maximum). */
const ASSERTION_LIFETIME_SECONDS = 3600;

/** A token is renewed when less than this is left, ms. */
const RENEW_BEFORE_MS = 60_000;

/**
 * One cached access token, renewed when less than 60 s of it is left, with
 * at most one exchange in flight: callers arriving while it runs share it
 * (and so the first caller's deadline). A failed exchange is not cached.
 * Used by every GCP token source (service-account key, Workload Identity
 * Federation).
 */
export class RenewingToken {
  private current: { token: string; expiresAt: number } | undefined;
  private inflight: Promise<string> | undefined;
  private readonly now: () => number;

  /** @param now clock, ms since epoch */
  constructor(now: () => number) {
    this.now = now;
  }

  /**
   * The cached token while it has more than 60 s left, else the result of
   * the exchange in flight, else of a new `exchange()` (`expiresAt` in ms
   * since epoch).
   *
   * @throws whatever `exchange` throws
   */
  get(exchange: () => Promise<{ token: string; expiresAt: number }>): Promise<string> {
    if (this.current !== undefined && this.current.expiresAt - RENEW_BEFORE_MS > this.now()) return Promise.resolve(this.current.token);
    this.inflight ??= exchange()
      .then((fresh) => {
        this.current = fresh;
        return fresh.token;
      })
      .finally(() => {
        this.inflight = undefined;
      });
    return this.inflight;
  }

  /**
   * Forget the cached token (after the API answered 401 to it); with
   * `token`, only when that is still the cached one (a concurrent call may
   * already have exchanged a new token, which is kept).
   */
  invalidate(token?: string): void {
    if (token === undefined || this.current?.token === token) this.current = undefined;
  }
}

const tokenResponseSchema = z.looseObject({
  access_token: z.string().check(z.minLength(1)),
  expires_in: z._default(z.coerce.number().check(z.positive()), 3600),
  token_type: z.optional(z.string()),
});

const tokenErrorSchema = z.looseObject({ error: z.string(), error_description: z.optional(z.string()) });

/** Options of a {@link ServiceAccountTokenSource}. */
export interface TokenSourceOptions {
  providerName: string;
  key: ServiceAccountKey;
  scope?: string;
  /** clock, ms since epoch */
  now: () => number;
  /** `fetch` to use (default the global one) */
  fetch?: typeof fetch;
}

/** Access tokens for one service account, cached and coalesced. */
export class ServiceAccountTokenSource {
  /** token exchanges made (for tests) */
  exchanges = 0;
  private readonly options: TokenSourceOptions;
  private readonly cached: RenewingToken;

  constructor(options: TokenSourceOptions) {
    this.options = options;
    this.cached = new RenewingToken(() => options.now());
  }

  /**
   * A valid access token. `signal` is passed to the token endpoint's
   * `fetch` (the caller's deadline; an exchange already in flight is shared).
   *
   * @throws StatusError 500 when the key cannot sign or the token endpoint
   *   refuses the service account (`invalid_grant`, `invalid_client`, …);
   *   503 when the endpoint is unreachable, times out or fails with 5xx
   */
  async token(signal?: AbortSignal): Promise<string> {
    return this.cached.get(() => this.exchange(signal));
  }

  /** Forget the cached token (after the API answered 401 to it); with `token`, only when that is still the cached one. */
  invalidate(token?: string): void {
    this.cached.invalidate(token);
  }

  private async exchange(signal?: AbortSignal): Promise<{ token: string; expiresAt: number }> {
    const { key, providerName } = this.options;
    const where = `provider ${providerName}: getting an access token for ${key.client_email} from ${key.token_uri}`;
    this.exchanges++;
    let assertion: string;
    try {
      const privateKey = await importPKCS8(key.private_key, "RS256");
      const iat = Math.floor(this.options.now() / 1000);
      assertion = await new SignJWT({ scope: this.options.scope ?? MONITORING_READ_SCOPE })
        .setProtectedHeader({ alg: "RS256", typ: "JWT", ...(key.private_key_id ? { kid: key.private_key_id } : {}) })
        .setIssuer(key.client_email)
        .setAudience(key.token_uri)
        .setIssuedAt(iat)
        .setExpirationTime(iat + ASSERTION_LIFETIME_SECONDS)
        .sign(privateKey);
    } catch (err) {
      throw internalError(`${where} failed: the service-account private key cannot sign (${(err as Error).message})`, undefined, err);
    }
    let response: Response;
    try {
      response = await (this.options.fetch ?? fetch)(key.token_uri, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion }).toString(),
        ...(signal !== undefined ? { signal } : {}),
      });
    } catch (err) {
      const name = (err as Error)?.name;
      if (name === "TimeoutError" || name === "AbortError") throw serviceUnavailable(`${where} timed out`, undefined, undefined, err);
      throw serviceUnavailable(`${where} failed: token endpoint unreachable (${(err as Error).message})`, undefined, undefined, err);
    }
    const text = await response.text();
    const body = jsonOrUndefined(text);
    if (!response.ok) {
      const parsed = tokenErrorSchema.safeParse(body);
      const reason = parsed.success ? `${parsed.data.error}${parsed.data.error_description ? `: ${parsed.data.error_description}` : ""}` : `HTTP ${response.status}`;
      if (response.status >= 500 || response.status === 429) {
        const hint = parseRetryAfter(response.headers.get("retry-after"), Date.now());
        throw serviceUnavailable(`${where} failed: token endpoint answered HTTP ${response.status} (${reason})`, hint);
      }
      throw internalError(`${where} failed: the token endpoint refused the service account (${reason})`);
    }
    const parsed = tokenResponseSchema.safeParse(body);
    if (!parsed.success) throw serviceUnavailable(`${where} failed: the token endpoint's answer has no access_token`);
    return { token: parsed.data.access_token, expiresAt: this.options.now() + parsed.data.expires_in * 1000 };
  }
}
