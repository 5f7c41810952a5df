/**
 * Bearer-token calls to Google APIs over `fetch`, shared by the Google
 * providers that speak REST (`gcp-monitoring`'s REST transport, the
 * `prometheus` provider's `gmp` flavour): the token source of the
 * credentials currently in the environment (a service-account key,
 * `./token.ts`, or a Workload Identity Federation configuration,
 * `./external-account.ts`), and a `fetch` that sends its token as
 * `Authorization: Bearer` (RFC 6750 §2.1) and, when the API answers 401 to
 * a cached token (revoked, clock skew), exchanges a new one and retries once.
 *
 * Runs on every runtime (Workers included): it imports nothing but `jose`,
 * `@smithy/signature-v4` (through the token sources) and `zod/mini`.
 */
import { internalError } from "../../k8s/status.ts";
import type { RuntimeEnv } from "../types.ts";
import { impersonationTarget, readExternalAccount, readServiceAccountKey, type GcpCredentials } from "./credentials.ts";
import { CLOUD_PLATFORM_SCOPE, ExternalAccountTokenSource, type AccessTokenSource } from "./external-account.ts";
import { impersonatedTokenSource, impersonationAvailable } from "../gcp/impersonation.ts";
import { RecentlyUsed } from "../identity-template.ts";
import { MONITORING_READ_SCOPE, ServiceAccountTokenSource } from "./token.ts";

/** Most impersonated service accounts a provider instance keeps tokens for. */
export const MAX_GOOGLE_IDENTITIES = 256;

/** What a {@link GoogleBearer} is built from. */
export type GoogleBearerOptions = GoogleBearerCommon &
  (
    | {
        /**
         * The token source of `source: default` on this runtime
         * (`./default-credentials.ts` `adcTokenSource`; built once, on the
         * first call), for `scope` (absent: Cloud Monitoring read;
         * `cloud-platform` when its tokens impersonate).
         */
        defaultSource: (scope?: string) => AccessTokenSource;
        defaultRefused?: never;
      }
    | {
        defaultSource?: never;
        /**
         * The message of the 500 raised when `credentials.source` is
         * `default` on a path without Application Default Credentials
         * (they need google-auth-library): what the admin should configure instead.
         */
        defaultRefused: string;
      }
  );

/** The options of a {@link GoogleBearer} whatever its `source: default` does. */
interface GoogleBearerCommon {
  /** the provider's name, for messages */
  providerName: string;
  credentials: GcpCredentials;
  runtime: RuntimeEnv;
  /** the `fetch` for token exchanges and API calls (default the global one) */
  fetch?: typeof fetch;
}

/**
 * One provider instance's Google credentials, as access tokens. The
 * credential variable is re-read at every call: a rotated secret builds a
 * new token source (and so a new token) at once; an unchanged one keeps its
 * cached token (`./token.ts` `RenewingToken`: renewed 60 s before expiry,
 * one exchange in flight).
 */
export class GoogleBearer {
  private readonly options: GoogleBearerOptions;
  private readonly baseFetch: typeof fetch;
  private tokens: { keyText: string; source: AccessTokenSource } | undefined;
  private adc: AccessTokenSource | undefined;
  /** with `credentials.impersonate`: the token sources of each service account, over the source they were built on */
  private impersonated: { base: AccessTokenSource; sources: RecentlyUsed<AccessTokenSource> } | undefined;
  /** the scope of the source's own tokens: `cloud-platform` when they only impersonate */
  private readonly sourceScope: string | undefined;

  /** @throws Error on the Worker when `credentials.impersonate` is set (`infra/worker/no-gcp-impersonation.ts`) */
  constructor(options: GoogleBearerOptions) {
    this.options = options;
    this.baseFetch = options.fetch ?? ((input, init) => fetch(input, init));
    // builds nothing and reads no credential (`credentials` is read at the first call; tests build transports over `{}`)
    const impersonate = options.credentials?.impersonate;
    if (impersonate !== undefined) impersonationAvailable(options.providerName); // the Worker refuses here, at load
    this.sourceScope = impersonate !== undefined ? CLOUD_PLATFORM_SCOPE : undefined;
  }

  /**
   * The identity of reads for `namespace`: with `credentials.impersonate`
   * its service account's email, else undefined (the source's principal). No I/O.
   * @throws StatusError 403/500 as `./credentials.ts` `impersonationTarget`
   */
  identity(namespace: string): string | undefined {
    const impersonate = this.options.credentials.impersonate;
    return impersonate === undefined ? undefined : impersonationTarget(this.options.providerName, impersonate, namespace);
  }

  /**
   * The token source of `identity` ({@link identity}): the source's own, or
   * the impersonated tokens of that service account (at most
   * {@link MAX_GOOGLE_IDENTITIES} kept, built again when the source's
   * credentials change).
   */
  sourceOf(identity: string | undefined): AccessTokenSource {
    const base = this.source();
    const impersonate = this.options.credentials.impersonate;
    if (identity === undefined || impersonate === undefined) return base;
    if (this.impersonated?.base !== base) this.impersonated = { base, sources: new RecentlyUsed(MAX_GOOGLE_IDENTITIES) };
    const { providerName } = this.options;
    return this.impersonated.sources.get(identity, () =>
      impersonatedTokenSource({ providerName, source: base, target: identity, scope: MONITORING_READ_SCOPE, impersonate }),
    );
  }

  /**
   * The token source of the credentials now in the environment.
   * @throws StatusError 500 `defaultRefused` for `source: default` without
   *   `defaultSource` (or what `defaultSource` throws); 500
   *   naming the provider and the variable when it is unset or not a key /
   *   `external_account` configuration (`./credentials.ts`)
   */
  source(): AccessTokenSource {
    const { providerName, credentials: creds, runtime } = this.options;
    if (creds.source === "default") {
      if (this.options.defaultSource === undefined) throw internalError(this.options.defaultRefused);
      return (this.adc ??= this.options.defaultSource(this.sourceScope));
    }
    const keyText = runtime.env[creds.variable] ?? "";
    if (this.tokens?.keyText !== keyText) {
      const fetch = this.baseFetch;
      const scope = this.sourceScope !== undefined ? { scope: this.sourceScope } : {};
      const source =
        creds.source === "environment"
          ? new ServiceAccountTokenSource({ providerName, key: readServiceAccountKey(providerName, creds, runtime), now: runtime.now, fetch, ...scope })
          : new ExternalAccountTokenSource({ providerName, config: readExternalAccount(providerName, creds, runtime).config, env: runtime.env, now: runtime.now, fetch, ...scope });
      this.tokens = { keyText, source };
    }
    return this.tokens.source;
  }

  /**
   * `fetch(url, init)` with `Authorization: Bearer <token>` added: the
   * token of `identity` ({@link sourceOf}; absent: the source's own). When the
   * API answers 401 to a token that was cached (no exchange ran while this
   * call got it), that token is forgotten and the call made once more with
   * a new one (concurrent calls refused the same token share one new
   * exchange); a 401 to a token just exchanged is returned as is (and the
   * token forgotten). The token exchange gets `init.signal` (the caller's deadline).
   *
   * @throws StatusError from {@link source} and the token exchange (500: the
   *   credentials are refused or broken; 503: the token endpoint is
   *   unreachable, times out or fails), or `fetch`'s own error
   */
  async fetch(url: string, init: RequestInit, identity?: string): Promise<Response> {
    const source = this.sourceOf(identity);
    const signal = init.signal ?? undefined;
    for (let attempt = 0; ; attempt++) {
      const exchanges = source.exchanges;
      const token = await source.token(signal);
      const cached = source.exchanges === exchanges;
      const headers = new Headers(init.headers);
      headers.set("authorization", `Bearer ${token}`);
      const response = await this.baseFetch(url, { ...init, headers });
      if (response.status !== 401) return response;
      source.invalidate(token);
      // A cached token the API no longer accepts (revoked, clock skew): exchange a new one, once.
      if (!cached || attempt > 0) return response;
      await response.body?.cancel();
    }
  }
}
