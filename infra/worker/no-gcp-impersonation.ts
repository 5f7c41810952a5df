/**
 * Stand-in for `shared/providers/gcp/impersonation.ts` in the Cloudflare
 * Worker (wrangler `[alias]` `../gcp/impersonation.ts`). Per-namespace
 * service accounts (`credentials.impersonate`) need google-auth-library,
 * which does not run in workerd: the provider refuses to build, so the
 * Worker refuses the config when it loads it, with this message.
 */
import type { AccessTokenSource } from "../../shared/providers/gcp/external-account.ts";

/** Refuses: the Worker does not impersonate. @throws Error naming the provider */
export function impersonationAvailable(providerName: string): void {
  throw new Error(
    `provider ${providerName}: credentials.impersonate (a service account per namespace) is not available on the Worker; ` +
      `run the bridge on Node or Lambda for per-namespace identities, or remove impersonate`,
  );
}

/** Never called (the provider refused to build). @throws Error */
export function impersonatedTokenSource(): AccessTokenSource {
  throw new Error("credentials.impersonate is not available on the Worker");
}
