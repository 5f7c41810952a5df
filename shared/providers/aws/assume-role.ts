/**
 * The STS half of per-namespace AWS identities (`./identity.ts`,
 * `./clients.ts`): the credentials of one role, assumed with
 * `@aws-sdk/credential-providers` `fromTemporaryCredentials` (an STS
 * `AssumeRole` call signed with the provider's source credentials, over the
 * SDK's own STS client). Node and Lambda.
 *
 * The Worker build replaces this module (wrangler.toml `[alias]` for the
 * specifier `../aws/assume-role.ts`) with
 * `infra/worker/no-aws-assume-role.ts`, whose
 * {@link assumeRoleAvailable} refuses: a config with
 * `credentials.assumeRole` is refused when the Worker builds its providers.
 */
import { fromTemporaryCredentials } from "@aws-sdk/credential-providers";
import type { AwsIdentity } from "./default-chain.ts";
import type { AssumeRoleParams } from "./identity.ts";

/** What the STS client of one role is built with. */
export interface AssumeRoleOptions {
  params: AssumeRoleParams;
  /** the credentials that sign `AssumeRole` (the provider's source) */
  masterCredentials: () => Promise<AwsIdentity>;
  /** STS client region (the provider's) */
  region: string;
  /** STS endpoint override (`credentials.assumeRole.stsEndpoint`) */
  endpoint?: string;
  /** SDK attempts per STS call */
  maxAttempts: number;
  /** per-call limit of an STS call, ms */
  requestTimeoutMs: number;
}

/**
 * Whether this runtime can assume roles. Here (Node, Lambda): always.
 *
 * @throws Error on the Worker (its stand-in), naming the provider
 */
export function assumeRoleAvailable(_providerName: string): void {}

/**
 * A function resolving the role's temporary credentials: one STS
 * `AssumeRole` per call (the caller keeps them until they expire).
 *
 * @throws (from the function) the STS client's errors: `AccessDenied` and
 *   friends (the role's trust policy refused), throttling, 5xx, timeouts;
 *   the source credentials' own errors
 */
export function assumeRoleCredentials(options: AssumeRoleOptions): () => Promise<AwsIdentity & { expiration?: Date }> {
  return fromTemporaryCredentials({
    params: options.params,
    masterCredentials: options.masterCredentials,
    clientConfig: {
      region: options.region,
      maxAttempts: options.maxAttempts,
      requestHandler: { requestTimeout: options.requestTimeoutMs },
      ...(options.endpoint !== undefined ? { endpoint: options.endpoint } : {}),
    },
  });
}
