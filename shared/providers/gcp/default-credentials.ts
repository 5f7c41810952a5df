/**
 * Application Default Credentials (`credentials.source: default`) as an
 * access-token source for code that calls Google's REST APIs over `fetch`
 * (`./bearer.ts`; the `prometheus` provider's `gmp` flavour): the official
 * `google-auth-library` `GoogleAuth({ scopes })` `getAccessToken()`, the
 * same search the official Cloud Monitoring client does for
 * `gcp-monitoring` (`../gcp-monitoring/grpc.ts`): the file named by
 * `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's well-known file, then the GCE /
 * GKE metadata server (Workload Identity on GKE:
 * `GET {GCE_METADATA_HOST or 169.254.169.254}/computeMetadata/v1/instance/service-accounts/default/token`
 * with `Metadata-Flavor: Google`; google-auth-library `ComputeClient`,
 * gcp-metadata `isAvailable`). The library reads the PROCESS environment
 * (not the bridge's `RuntimeEnv`) and caches the token until shortly before
 * it expires.
 *
 * The library is loaded by a dynamic `import()` on the first token, so a
 * process whose config uses no such provider never loads it. The Worker has
 * no files or metadata server: its build (wrangler.toml `[alias]` for the
 * specifier `../gcp/default-credentials.ts`) replaces this module with
 * `infra/worker/no-gcp-default-credentials.ts`, which refuses with a 500.
 */
import { untilAborted } from "../../deadline.ts";
import { internalError, serviceUnavailable, type StatusError } from "../../k8s/status.ts";
import type { AccessTokenSource } from "./external-account.ts";
import { MONITORING_READ_SCOPE } from "./token.ts";

/** The part of google-auth-library's `GoogleAuth` this module uses. */
export interface TokenClient {
  getAccessToken(): Promise<string | null | undefined>;
}

/**
 * The Status of a failed ADC token request (google-auth-library / gaxios
 * errors): no credentials found, or an HTTP 4xx other than 429 from the
 * token or metadata endpoint, is a 500 (a fault no retry fixes); a 429, a
 * 5xx, a timeout or an unreachable endpoint is a 503.
 *
 * @param where `provider NAME: getting an access token with Application Default Credentials`
 */
export function adcErrorToStatus(where: string, err: unknown): StatusError {
  const e = err as { message?: unknown; status?: unknown; response?: { status?: unknown } } | undefined;
  const message = typeof e?.message === "string" ? e.message : String(err);
  if (/Could not load the default credentials/.test(message)) {
    return internalError(`${where} failed: no credentials were found (no GOOGLE_APPLICATION_CREDENTIALS file, no gcloud credentials, no metadata server): ${message}`, undefined, err);
  }
  const status = typeof e?.response?.status === "number" ? e.response.status : typeof e?.status === "number" ? e.status : undefined;
  if (status !== undefined && status >= 400 && status < 500 && status !== 429) {
    return internalError(`${where} failed: the credentials were refused (HTTP ${status}): ${message}`, undefined, err);
  }
  return serviceUnavailable(`${where} failed${status !== undefined ? ` (HTTP ${status})` : ""}: ${message}`, undefined, undefined, err);
}

/**
 * The access tokens of Application Default Credentials for `scope`
 * (default `monitoring.read`). Builds nothing until the first `token()`.
 *
 * @param providerName for messages
 * @param load the library (tests; default `import("google-auth-library")`), or
 *   another google-auth-library client (`./impersonation.ts`)
 * @param what the failure messages' account of the call (default: with Application Default Credentials)
 */
export function adcTokenSource(
  providerName: string,
  scope: string = MONITORING_READ_SCOPE,
  load: () => Promise<TokenClient> = defaultClient(scope),
  what = "getting an access token with Application Default Credentials",
): AccessTokenSource {
  const where = `provider ${providerName}: ${what}`;
  let client: Promise<TokenClient> | undefined;
  let last: string | undefined;
  let exchanges = 0;
  return {
    get exchanges() {
      return exchanges;
    },
    /**
     * A valid token (the library's cached one while it is not near expiry).
     * @throws StatusError {@link adcErrorToStatus}; `signal.reason` when the deadline passes first
     */
    async token(signal?: AbortSignal): Promise<string> {
      const task = async () => {
        client ??= load();
        let token: string | null | undefined;
        try {
          token = await (await client).getAccessToken();
        } catch (err) {
          throw adcErrorToStatus(where, err);
        }
        if (!token) throw serviceUnavailable(`${where} failed: the library returned no access token`);
        if (token !== last) exchanges++;
        last = token;
        return token;
      };
      return signal === undefined ? task() : untilAborted(task, signal);
    },
    /** Forget the client (and so its cached token) when `token` is still the last one returned (or always without `token`). */
    invalidate(token?: string): void {
      if (token === undefined || token === last) {
        client = undefined;
        last = undefined;
      }
    },
  };
}

/** `new GoogleAuth({ scopes: [scope] })`, the library loaded on first use. */
function defaultClient(scope: string): () => Promise<TokenClient> {
  return async () => {
    const { GoogleAuth } = await import("google-auth-library");
    return new GoogleAuth({ scopes: [scope] });
  };
}
