/**
 * The AWS SDK's default credential chain for code that signs its own
 * requests (no SDK client): `@aws-sdk/credential-provider-node`
 * `defaultProvider` — environment, SSO and the shared files, a web identity
 * token (EKS IRSA), the container credentials endpoint (ECS, EKS Pod
 * Identity), EC2 instance metadata — the chain every SDK client of the other
 * AWS providers resolves on Node and Lambda (see `./common.ts`
 * `DEFAULT_CHAIN_PLACES`). Loaded on first use, so a process whose config
 * names no such provider never loads it.
 *
 * The Worker has no such chain (no files, no metadata endpoints): its build
 * (wrangler.toml `[alias]` for the specifier `../aws/default-chain.ts`) replaces this module with `infra/worker/no-aws-default-chain.ts`
 * which refuses with a `CredentialsMissingError`.
 */

/** Credentials of one signature. */
export interface AwsIdentity {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/**
 * A function resolving the default chain's credentials (memoized by the
 * SDK: refreshed before temporary credentials expire).
 *
 * @throws the SDK's `CredentialsProviderError` ("Could not load credentials
 *   from any providers") when the chain finds nothing; `./common.ts`
 *   `awsErrorToStatus` turns it into the "no credentials" Status
 */
export function defaultChain(): () => Promise<AwsIdentity> {
  let provider: Promise<() => Promise<AwsIdentity>> | undefined;
  return async () => {
    provider ??= import("@aws-sdk/credential-provider-node").then((m) => m.defaultProvider());
    return (await provider)();
  };
}

