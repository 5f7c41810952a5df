/**
 * Per-namespace AWS identities: a provider's reads for a namespace run under
 * a role assumed for that namespace (STS `AssumeRole` with an `ExternalId`
 * derived from the cluster and the namespace), so a namespace's reads can
 * only see what its role may see, whatever the policy says.
 *
 * The config (`credentials.assumeRole`, {@link awsAssumeRoleSchema}) names
 * the role by a template (`roleArn: arn:aws:iam::123456789012:role/emb-{namespace}`)
 * or a map (`roleArns: { team-a: arn:… }`), and a `clusterId`. The
 * ExternalId of namespace N is `emb:{clusterId}:{N}` ({@link externalIdOf}):
 * a role's trust policy that requires it accepts this cluster's bridge
 * reading for N only, never another cluster's bridge (a different
 * clusterId) nor another namespace (AWS IAM User Guide, "Access to AWS
 * accounts owned by third parties": the confused deputy problem).
 *
 * The assumed credentials come from `@aws-sdk/credential-providers`
 * `fromTemporaryCredentials` (an STS client signing with the provider's
 * `source` credentials), memoized per (role, ExternalId, session name) until
 * five minutes before they expire (`@smithy/core` `memoizeIdentityProvider`),
 * in a map of at most {@link MAX_AWS_IDENTITIES} identities (least recently
 * used dropped first).
 *
 * Sources: STS API Reference, "AssumeRole" (RoleArn, ExternalId 2–1224 of
 * `[\w+=,.@:\/-]`, RoleSessionName 2–64 of `[\w+=,.@-]`, DurationSeconds
 * 900–43200); IAM identifiers (role ARN `arn:PARTITION:iam::ACCOUNT:role/PATH/NAME`,
 * names ≤ 64 characters).
 */
import * as z from "../../config/zod.ts";
import { forbidden, internalError } from "../../k8s/status.ts";
import { identityOf, NAMESPACE_PLACEHOLDER, namespaceMap, namespaceTemplate, noUnknownPlaceholder } from "../identity-template.ts";

/** Most identities (role, ExternalId) a provider instance keeps credentials and clients for. */
export const MAX_AWS_IDENTITIES = 256;

/** An IAM role ARN: `arn:PARTITION:iam::ACCOUNT:role/[PATH/]NAME`, name ≤ 64 characters. */
const ROLE_ARN = /^arn:aws(?:-[a-z]+)*:iam::\d{12}:role\/(?:[\w+=,.@-]+\/)*[\w+=,.@-]{1,64}$/;

/** A role ARN with `{namespace}` standing for the request namespace. */
const roleArnTemplate = namespaceTemplate(ROLE_ARN, "an IAM role ARN such as arn:aws:iam::123456789012:role/emb-{namespace}", "roleArns");

/** A role ARN written out. */
const roleArn = z.string().check(z.regex(ROLE_ARN, "must be an IAM role ARN such as arn:aws:iam::123456789012:role/emb-team-a"));

/**
 * `credentials.assumeRole` of an AWS provider:
 * - `roleArn`: template of the role of a namespace, containing `{namespace}`;
 *   or `roleArns`: namespace → role ARN (other namespaces are refused, 403);
 * - `clusterId`: this cluster's id in every ExternalId (16–256 of
 *   `[\w+=,.@/-]`; e.g. the UID of the cluster's `kube-system` namespace):
 *   unique to the cluster and not published, so no other party's bridge can
 *   present the same ExternalId;
 * - `sessionName`: template of the RoleSessionName (default `emb-{namespace}`,
 *   cut to 64 characters), seen in CloudTrail;
 * - `durationSeconds`: lifetime of the assumed credentials (900–43200, default 3600);
 * - `stsEndpoint`: STS endpoint override (default: the regional endpoint of
 *   the provider's `region`).
 */
export const awsAssumeRoleSchema = z
  .strictObject({
    roleArn: z.optional(roleArnTemplate),
    roleArns: z.optional(namespaceMap(roleArn)),
    clusterId: z.string().check(
      z.regex(/^[\w+=,.@/-]{16,256}$/, "must be 16–256 of A-Z a-z 0-9 _+=,.@/- and unique to this cluster, e.g. the UID of its kube-system namespace"),
    ),
    sessionName: z._default(
      z.string().check(noUnknownPlaceholder, z.regex(/^(?:[\w+=,.@-]|\{namespace\})+$/, "must be made of A-Z a-z 0-9 _+=,.@- and {namespace}")),
      "emb-{namespace}",
    ),
    durationSeconds: z._default(z.number().check(z.int(), z.minimum(900), z.maximum(43200)), 3600),
    stsEndpoint: z.optional(z.url({ protocol: /^https?$/ })),
  })
  .check(
    z.refine((a) => (a.roleArn === undefined) !== (a.roleArns === undefined), "set exactly one of roleArn (a template with {namespace}) and roleArns (a map namespace → role ARN)"),
  );

/** Validated `credentials.assumeRole`. */
export type AwsAssumeRole = z.infer<typeof awsAssumeRoleSchema>;

/** The STS `AssumeRole` parameters of one namespace. */
export interface AssumeRoleParams {
  RoleArn: string;
  ExternalId: string;
  RoleSessionName: string;
  DurationSeconds: number;
}

/** The ExternalId of `namespace`: `emb:{clusterId}:{namespace}` (≤ 1224 characters by the schema's bounds). */
export function externalIdOf(assumeRole: Pick<AwsAssumeRole, "clusterId">, namespace: string): string {
  return `emb:${assumeRole.clusterId}:${namespace}`;
}

/**
 * The `AssumeRole` parameters of a read for `namespace`. No I/O.
 *
 * @param providerName used in error messages
 * @throws StatusError 403 when `roleArns` has no entry for the namespace;
 *   500 when the template gives no valid role ARN for it (a role name over 64 characters)
 */
export function assumeRoleParams(providerName: string, assumeRole: AwsAssumeRole, namespace: string): AssumeRoleParams {
  const arn = identityOf(assumeRole.roleArn, assumeRole.roleArns, namespace);
  if (arn === undefined) {
    throw forbidden(`provider ${providerName}: credentials.assumeRole.roleArns names no AWS role for namespace "${namespace}", so nothing is read for it`);
  }
  if (!ROLE_ARN.test(arn)) {
    throw internalError(`provider ${providerName}: credentials.assumeRole.roleArn gives "${arn}" for namespace "${namespace}", not a valid IAM role ARN (role names are at most 64 characters)`);
  }
  return {
    RoleArn: arn,
    ExternalId: externalIdOf(assumeRole, namespace),
    RoleSessionName: assumeRole.sessionName.replaceAll(NAMESPACE_PLACEHOLDER, namespace).slice(0, 64).padEnd(2, "-"),
    DurationSeconds: assumeRole.durationSeconds,
  };
}
