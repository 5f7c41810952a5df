/**
 * The `amp` flavour of the `prometheus` provider: Amazon Managed Service for
 * Prometheus. The query API of a workspace is the Prometheus HTTP API under
 * `{endpoint}/workspaces/{workspaceId}` (default endpoint
 * `https://aps-workspaces.{region}.amazonaws.com`), and every request is
 * signed with AWS Signature Version 4 for the service `aps` in the
 * workspace's region (AMP User Guide, "Query your Prometheus metrics" and
 * "Using Amazon Managed Service for Prometheus with AWS SigV4"; the IAM
 * action is `aps:QueryMetrics`).
 *
 * Signing: `@smithy/signature-v4` (`../aws/sigv4.ts`) over the exact request
 * `./api.ts` sends — method POST, URL, `host`, `content-type`, `accept`,
 * `content-length` and the form body (its SHA-256 in `x-amz-content-sha256`
 * and in the signature) — with SHA-256 over WebCrypto, so it runs on Node,
 * Lambda and workerd.
 *
 * Credentials: the sources of the other AWS providers (`../aws/common.ts`
 * `awsClientOptions`): `default` is the SDK's default chain
 * (`../aws/default-chain.ts`: IRSA, EKS Pod Identity, …; not on the
 * Worker), `environment` the `AWS_*` variables at every call, `static` the
 * config's keys. Failures are the AWS providers' Statuses
 * (`awsErrorToStatus`): no credentials → 500 "no AWS credentials were
 * found, so nothing was sent", credentials AWS refused (HTTP 401/403,
 * `x-amzn-ErrorType` e.g. `InvalidSignatureException`,
 * `AccessDeniedException`) → 500 "AWS refused the bridge's credentials".
 */
import { untilAborted } from "../../deadline.ts";
import type { StatusError } from "../../k8s/status.ts";
import { AwsClients, type AwsClientOptions } from "../aws/clients.ts";
import { awsErrorToStatus } from "../aws/common.ts";
import { defaultChain, type AwsIdentity } from "../aws/default-chain.ts";
import { sigv4Headers } from "../aws/sigv4.ts";
import type { RuntimeEnv } from "../types.ts";
import { PrometheusApiError } from "./api.ts";
import type { PrometheusProviderConfig } from "./schema.ts";
import type { FlavourAccess, FlavourFactory } from "./flavour.ts";

/** A validated `amp` provider instance config. */
export type AmpConfig = Extract<PrometheusProviderConfig, { flavour: "amp" }>;

/** The signing name of Amazon Managed Service for Prometheus. */
export const AMP_SIGNING_SERVICE = "aps";

/** Headers `fetch` sets itself and refuses to take, but which are signed. */
const SET_BY_FETCH = new Set(["host", "content-length"]);

/** The Prometheus HTTP API base URL of a workspace: `{endpoint}/workspaces/{workspaceId}`. */
export function ampBaseUrl(config: AmpConfig): string {
  const endpoint = (config.endpoint ?? `https://aps-workspaces.${config.region}.amazonaws.com`).replace(/\/+$/, "");
  return `${endpoint}/workspaces/${config.workspaceId}`;
}

/** The credentials function of client options: the configured source's, else the SDK's default chain. */
function credentialsOf(options: AwsClientOptions): () => Promise<AwsIdentity> {
  const configured = options.credentials;
  return configured === undefined ? defaultChain() : typeof configured === "function" ? configured : () => Promise.resolve(configured);
}

/** Signs the queries of one `amp` provider instance and names its failures. */
export class AmpSigner {
  /** the base URL queries go to ({@link ampBaseUrl}) */
  readonly url: string;
  /**
   * the credentials of each identity (`../aws/clients.ts`): the source's, or
   * with `credentials.assumeRole` each namespace's role
   */
  readonly identities: AwsClients<() => Promise<AwsIdentity>>;
  private readonly name: string;
  private readonly region: string;

  constructor(name: string, config: AmpConfig, runtime: RuntimeEnv) {
    this.name = name;
    this.region = config.region;
    this.url = ampBaseUrl(config);
    this.identities = new AwsClients(name, { ...config, maxAttempts: 1 }, runtime, credentialsOf);
  }

  /**
   * The SigV4 headers of one request (`authorization`, `x-amz-date`,
   * `x-amz-content-sha256`, `x-amz-security-token` for temporary
   * credentials), to be sent with `headers` and `body` unchanged.
   *
   * @param identity the identity key of the read (`AwsClients.identity`), undefined: the source's own credentials
   * @throws `CredentialsMissingError`, the SDK's `CredentialsProviderError`
   *   (no credentials: nothing is sent), an STS error (the role could not be
   *   assumed: nothing is sent), or `signal.reason` when the call's
   *   deadline passes while credentials are resolved
   */
  async sign(request: { url: string; headers: Readonly<Record<string, string>>; body: string }, signal: AbortSignal, identity?: string): Promise<Record<string, string>> {
    const credentials = await untilAborted(() => this.identities.get(identity)(), signal);
    const signed = await sigv4Headers({
      service: AMP_SIGNING_SERVICE,
      region: this.region,
      credentials,
      method: "POST",
      url: new URL(request.url),
      headers: { ...request.headers, "content-length": String(new TextEncoder().encode(request.body).length) },
      body: request.body,
    });
    return Object.fromEntries(Object.entries(signed).filter(([k]) => !SET_BY_FETCH.has(k.toLowerCase()) && !Object.hasOwn(request.headers, k)));
  }

  /**
   * The Status of a failure that is AWS's rather than Prometheus': no
   * credentials, or a 401/403 from the front door; undefined for any other
   * (the Prometheus API's errors, `./api.ts` `prometheusErrorToStatus`).
   */
  error(what: string, err: unknown): StatusError | undefined {
    if (err instanceof PrometheusApiError) {
      if (err.httpStatus !== 401 && err.httpStatus !== 403) return undefined;
      const name = err.errorType === "http" ? "AccessDeniedException" : err.errorType;
      return awsErrorToStatus(this.name, what, { name, message: err.message, $metadata: { httpStatusCode: err.httpStatus } });
    }
    const e = err as { name?: unknown; $metadata?: unknown } | undefined;
    // no credentials, or an AWS error from STS AssumeRole (it carries the SDK's `$metadata`)
    if (e?.name === "CredentialsMissingError" || e?.name === "CredentialsProviderError" || e?.$metadata !== undefined) return awsErrorToStatus(this.name, what, err);
    return undefined;
  }
}

/**
 * The `amp` flavour's access for one provider instance: the workspace's base
 * URL, every query SigV4-signed ({@link AmpSigner}), AWS's refusals as the
 * AWS providers' Statuses.
 */
export function ampAccess(name: string, config: AmpConfig, runtime: RuntimeEnv): FlavourAccess {
  const signer = new AmpSigner(name, config, runtime);
  const access = (identity: string | undefined): FlavourAccess => ({
    url: signer.url,
    headers: () => ({}),
    sign: (request, signal) => signer.sign(request, signal, identity),
    error: (what, err) => signer.error(what, err),
  });
  const own = access(undefined);
  if (!signer.identities.perNamespace) return own;
  return { ...own, identity: (namespace) => signer.identities.identity(namespace)!, as: access };
}

/** The `amp` entry of the flavour table (`./flavours.ts`). */
export const flavour: FlavourFactory = (name, config, runtime) => ampAccess(name, config as AmpConfig, runtime);
