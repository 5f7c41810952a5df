/**
 * The AWS SDK clients (or credentials) of one provider instance, one per
 * identity its reads run under: the source's own credentials, or with
 * `credentials.assumeRole` (`./identity.ts`) the role of each namespace,
 * assumed with `@aws-sdk/credential-providers` `fromTemporaryCredentials`
 * (STS `AssumeRole`, signed with the source's credentials).
 *
 * An identity is named by a key, {@link AwsClients.identity}: `undefined`
 * for the source's own credentials, else the JSON of the `AssumeRole`
 * parameters. The series skeleton puts that key into every cache key and
 * batch group (`../series.ts` `SeriesItem.identity`), so two namespaces
 * never share an answer read under the other's identity.
 */
import type { RuntimeEnv } from "../types.ts";
// these two by the specifiers the Worker build replaces (wrangler.toml [alias])
import { assumeRoleAvailable, assumeRoleCredentials } from "../aws/assume-role.ts";
import { defaultChain, type AwsIdentity } from "../aws/default-chain.ts";
import { RecentlyUsed } from "../identity-template.ts";
import { awsClientOptions, type AwsProviderConfig } from "./common.ts";
import { assumeRoleParams, MAX_AWS_IDENTITIES, type AssumeRoleParams } from "./identity.ts";

/** Assumed credentials are renewed this long before they expire, ms (the SDK's own margin for temporary credentials: 5 min). */
export const REFRESH_BEFORE_EXPIRY_MS = 5 * 60_000;

/** What {@link awsClientOptions} builds: the options of an SDK client. */
export type AwsClientOptions = ReturnType<typeof awsClientOptions>;

/** A credentials function: resolves the credentials to sign with (memoized where temporary). */
export type AwsCredentialsFunction = () => Promise<AwsIdentity>;

/**
 * One provider instance's clients by identity.
 *
 * @typeParam C what `make` builds from client options: an SDK client (its
 *   `destroy()` is called when it is dropped), or anything else
 */
export class AwsClients<C> {
  readonly #name: string;
  readonly #config: AwsProviderConfig;
  readonly #base: AwsClientOptions;
  readonly #make: (options: AwsClientOptions) => C;
  /** the client of the source's own credentials, built on first use */
  #own: C | undefined;
  /** clients of assumed roles by identity key, at most {@link MAX_AWS_IDENTITIES} (an SDK client pushed out is destroyed) */
  readonly #assumed = new RecentlyUsed<C>(MAX_AWS_IDENTITIES, (client) => (client as { destroy?: () => void }).destroy?.());
  /** identity keys by namespace (as many as {@link #assumed} at most) */
  readonly #keys = new RecentlyUsed<string>(MAX_AWS_IDENTITIES);

  /**
   * @param name the provider instance name (error messages)
   * @param make builds the client of one identity from its options; no I/O
   * @throws Error on the Worker when `credentials.assumeRole` is set (`infra/worker/no-aws-assume-role.ts`)
   */
  constructor(name: string, config: AwsProviderConfig, runtime: RuntimeEnv, make: (options: AwsClientOptions) => C) {
    this.#name = name;
    this.#config = config;
    this.#base = awsClientOptions(name, config, runtime);
    this.#make = make;
    if (config.credentials.assumeRole !== undefined) assumeRoleAvailable(name); // the Worker refuses here, at load
  }

  /** Whether reads run under a role per namespace (`credentials.assumeRole` is set). */
  get perNamespace(): boolean {
    return this.#config.credentials.assumeRole !== undefined;
  }

  /**
   * The identity key of reads for `namespace`: undefined without
   * `assumeRole`, else the JSON of its `AssumeRole` parameters. No I/O.
   *
   * @throws StatusError 403/500 as `assumeRoleParams` (`./identity.ts`)
   */
  identity(namespace: string): string | undefined {
    const assumeRole = this.#config.credentials.assumeRole;
    if (assumeRole === undefined) return undefined;
    return this.#keys.get(namespace, () => JSON.stringify(assumeRoleParams(this.#name, assumeRole, namespace)));
  }

  /**
   * The client of identity `key` ({@link identity}): built on first use,
   * kept while among the {@link MAX_AWS_IDENTITIES} last used. Its
   * credentials: the role's, assumed through STS when first needed and
   * again five minutes before they expire.
   */
  get(key: string | undefined): C {
    if (key === undefined) return (this.#own ??= this.#make(this.#base));
    return this.#assumed.get(key, () => this.#make({ ...this.#base, credentials: this.#assumedCredentials(JSON.parse(key) as AssumeRoleParams) }));
  }

  /** Credentials of one role: STS `AssumeRole` signed with the source's credentials, kept until {@link REFRESH_BEFORE_EXPIRY_MS} before they expire. */
  #assumedCredentials(params: AssumeRoleParams): AwsCredentialsFunction {
    const config = this.#config;
    const source = this.#base.credentials;
    const masterCredentials: AwsCredentialsFunction = source === undefined ? defaultChain() : typeof source === "function" ? source : () => Promise.resolve(source);
    const endpoint = config.credentials.assumeRole?.stsEndpoint;
    const assume = assumeRoleCredentials({
      params,
      masterCredentials,
      region: config.region,
      maxAttempts: config.maxAttempts,
      requestTimeoutMs: config.timeoutSeconds * 1000,
      ...(endpoint !== undefined ? { endpoint } : {}),
    });
    const named = async (): Promise<AwsIdentity> => {
      try {
        return await assume();
      } catch (err) {
        // keep the SDK's name, code and $metadata (the Status mapping reads them); say which role
        if (err instanceof Error) err.message = `STS AssumeRole of ${params.RoleArn} (ExternalId ${params.ExternalId}) failed: ${err.message}`;
        throw err;
      }
    };
    // one AssumeRole in flight per role; a failure is not kept (the series cache keeps the failed read for its back-off)
    let current: Promise<AwsIdentity> | undefined;
    let renewAt = 0;
    return () => {
      if (current === undefined || Date.now() >= renewAt) {
        const pending: Promise<AwsIdentity> = named().then(
          (credentials) => {
            const expiration = (credentials as { expiration?: Date }).expiration;
            renewAt = expiration === undefined ? Infinity : expiration.getTime() - REFRESH_BEFORE_EXPIRY_MS;
            return credentials;
          },
          (err: unknown) => {
            if (current === pending) current = undefined;
            throw err;
          },
        );
        current = pending;
        renewAt = Infinity; // until it settles, later calls join it
      }
      return current;
    };
  }
}
