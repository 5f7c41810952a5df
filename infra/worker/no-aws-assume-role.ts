/**
 * Stand-in for `shared/providers/aws/assume-role.ts` in the Cloudflare
 * Worker (wrangler `[alias]` `../aws/assume-role.ts`). Per-namespace AWS
 * roles (`credentials.assumeRole`) are not offered on the Worker: the
 * provider refuses to build, so the Worker refuses the config when it loads
 * it, with this message, and no read runs under the wrong identity.
 */
import type { AssumeRoleOptions } from "../../shared/providers/aws/assume-role.ts";
import type { AwsIdentity } from "../../shared/providers/aws/default-chain.ts";

/** Refuses: the Worker does not assume roles. @throws Error naming the provider */
export function assumeRoleAvailable(providerName: string): void {
  throw new Error(
    `provider ${providerName}: credentials.assumeRole (a role per namespace) is not available on the Worker; ` +
      `run the bridge on Node or Lambda for per-namespace identities, or remove assumeRole`,
  );
}

/** Never called (the provider refused to build). @throws Error */
export function assumeRoleCredentials(_options: AssumeRoleOptions): () => Promise<AwsIdentity> {
  throw new Error("credentials.assumeRole is not available on the Worker");
}
