/**
 * Config fields of the `amp` flavour of the `prometheus` provider: Amazon
 * Managed Service for Prometheus, addressed by `region` and `workspaceId`
 * (AMP User Guide, "Query your Prometheus metrics": the query API is
 * `https://aps-workspaces.<region>.amazonaws.com/workspaces/<workspaceId>/api/v1/query`,
 * signed with AWS Signature Version 4 for the service `aps`).
 *
 * Small on purpose (imported by `./schema.ts`, which every deployment
 * loads): the signer lives in `./amp.ts`.
 */
import * as z from "../../config/zod.ts";
import { awsCredentialsSchema, awsProviderSchema } from "../aws/common.ts";

/** An AMP workspace id: `ws-` and a UUID, as `CreateWorkspace` returns it (e.g. `ws-6b1f3c2e-0a4d-4e8f-9c1b-2d3e4f5a6b7c`). */
export const AMP_WORKSPACE_ID = /^ws-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The fields of an `amp` provider instance besides the ones every flavour
 * has (`timeoutSeconds`, `batchWindowSeconds`, `maxBatchSize`):
 * - `region`: the workspace's AWS region, also the signing region;
 * - `workspaceId`: {@link AMP_WORKSPACE_ID};
 * - `endpoint`: override of `https://aps-workspaces.{region}.amazonaws.com`
 *   (a VPC endpoint's DNS name; a local stand-in in tests), without the
 *   `/workspaces/…` path;
 * - `credentials`: the AWS providers' sources (`../aws/common.ts`
 *   `awsCredentialsSchema`), default the SDK's default chain.
 */
export const ampFields = {
  flavour: z.literal("amp"),
  region: awsProviderSchema.shape.region,
  workspaceId: z.string().check(z.regex(AMP_WORKSPACE_ID, "must be an AMP workspace id: ws- and a UUID (ws-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lower-case hex)")),
  endpoint: awsProviderSchema.shape.endpoint,
  credentials: z._default(awsCredentialsSchema, { source: "default" }),
};
