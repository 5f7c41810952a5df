/**
 * Service-account impersonation per namespace (`credentials.impersonate`,
 * `./credentials.ts` `gcpImpersonateSchema`): the access tokens of one
 * target service account, from google-auth-library's `Impersonated` client
 * (IAM Service Account Credentials
 * `POST {endpoint}/v1/projects/-/serviceAccounts/{email}:generateAccessToken`
 * with `{delegates, scope, lifetime}`, authorized by the source's own
 * token, which must carry the `cloud-platform` scope). The library keeps
 * each token until shortly before it expires.
 *
 * The library is loaded on first use (a dynamic `import()`). Node and
 * Lambda: the Worker build replaces this module (wrangler.toml `[alias]`
 * for the specifier `../gcp/impersonation.ts`) with
 * `infra/worker/no-gcp-impersonation.ts`, which refuses a config with
 * `credentials.impersonate` at load.
 */
import type { gaxios } from "google-auth-library";
import { adcTokenSource } from "../gcp/default-credentials.ts";
import { IAM_CREDENTIALS_ENDPOINT, type GcpImpersonate } from "./credentials.ts";
import type { AccessTokenSource } from "./external-account.ts";

/**
 * Whether this runtime can impersonate. Here (Node, Lambda): always.
 * @throws Error on the Worker (its stand-in), naming the provider
 */
export function impersonationAvailable(_providerName: string): void {}

/**
 * A google-auth-library client whose tokens are those of `source`: what
 * authorizes the library's own calls (`Impersonated`'s generateAccessToken;
 * the official Cloud Monitoring client's gRPC calls) with tokens obtained by
 * the bridge's token sources.
 *
 * @param library the loaded `google-auth-library` module
 */
export function tokenSourceClient(library: typeof import("google-auth-library"), source: AccessTokenSource): import("google-auth-library").AuthClient {
  class SourceClient extends library.AuthClient {
    override async getAccessToken() {
      return { token: await source.token() };
    }
    override async getRequestHeaders() {
      return new Headers({ authorization: `Bearer ${await source.token()}` });
    }
    override async request<T>(opts: gaxios.GaxiosOptions) {
      const headers = new Headers(opts.headers);
      headers.set("authorization", `Bearer ${await source.token()}`);
      return this.transporter.request<T>({ ...opts, headers });
    }
  }
  return new SourceClient();
}

/**
 * The access tokens of `target` for `scope`, impersonated with the tokens
 * of `source` (which must carry `cloud-platform`). Builds nothing until the
 * first `token()`. Failures: IAM Credentials refusing (403
 * `PERMISSION_DENIED`: no Token Creator role; 404) is a 500 naming the
 * account; 429, 5xx, a timeout or an unreachable endpoint a 503
 * (`./default-credentials.ts` `adcErrorToStatus`).
 */
export function impersonatedTokenSource(options: {
  providerName: string;
  source: AccessTokenSource;
  target: string;
  scope: string;
  impersonate: GcpImpersonate;
}): AccessTokenSource {
  const { source, target, scope, impersonate } = options;
  const load = async () => {
    const library = await import("google-auth-library");
    const client = new library.Impersonated({
      sourceClient: tokenSourceClient(library, source),
      targetPrincipal: target,
      targetScopes: [scope],
      delegates: [],
      lifetime: impersonate.lifetimeSeconds,
      endpoint: (impersonate.endpoint ?? IAM_CREDENTIALS_ENDPOINT).replace(/\/+$/, ""),
    });
    // one generateAccessToken in flight: the library does not join concurrent first calls
    let pending: Promise<string | null | undefined> | undefined;
    const getAccessToken = () =>
      (pending ??= client.getAccessToken().then(
        (r) => r.token,
      ).finally(() => (pending = undefined)));
    return { getAccessToken };
  };
  return adcTokenSource(options.providerName, scope, load, `getting an access token of service account ${target} (impersonated)`);
}
