/**
 * Stand-in for `shared/providers/gcp/default-credentials.ts` in the
 * Cloudflare Worker (wrangler `[alias]` `../gcp/default-credentials.ts`).
 * Application Default Credentials need google-auth-library, gcloud's files
 * and the GCE / GKE metadata server, none of which a Worker has, so
 * `credentials.source: default` of the `prometheus` provider's `gmp` flavour is
 * refused there before anything is sent: a 500 naming the provider and
 * the sources that work on the Worker (the same advice as `gcp-monitoring`'s
 * REST transport, `shared/providers/gcp-monitoring/rest.ts`).
 */
import { internalError } from "../../shared/k8s/status.ts";
import type { AccessTokenSource } from "../../shared/providers/gcp/external-account.ts";

/**
 * `adcTokenSource` of the Worker: refuses at once.
 * @throws StatusError 500 always
 */
export function adcTokenSource(providerName: string): AccessTokenSource {
  throw internalError(
    `provider ${providerName}: credentials.source "default" (Application Default Credentials) needs google-auth-library and ` +
      `the metadata server, which the Worker does not have; give a service-account key with ` +
      `credentials: { source: environment, variable: GOOGLE_SERVICE_ACCOUNT_JSON } or a Workload Identity Federation ` +
      `configuration with credentials: { source: externalAccount, variable: GOOGLE_EXTERNAL_ACCOUNT_JSON }`,
  );
}
