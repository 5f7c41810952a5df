/**
 * Stand-in for `shared/providers/aws/default-chain.ts` in the Cloudflare
 * Worker (wrangler `[alias]` `../aws/default-chain.ts`). The SDK's default
 * chain reads files, runs processes and calls metadata endpoints, none of
 * which a Worker has, so `credentials.source: default` is refused there
 * before anything is sent: a `CredentialsMissingError`, which
 * `awsErrorToStatus` answers with the "no credentials" 500. Use
 * `credentials.source: environment` (Worker secrets) on the Worker.
 */
import { CredentialsMissingError } from "../../shared/providers/aws/common.ts";
import type { AwsIdentity } from "../../shared/providers/aws/default-chain.ts";

/** `defaultChain` of the Worker: every call refuses. */
export function defaultChain(): () => Promise<AwsIdentity> {
  return () =>
    Promise.reject(
      new CredentialsMissingError(
        'credentials.source "default" (the AWS SDK default chain) is not available on the Worker, which has no files or metadata endpoints; use credentials.source "environment" with the AWS_* secrets',
      ),
    );
}
