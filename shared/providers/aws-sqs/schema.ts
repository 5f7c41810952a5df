/**
 * The `aws-sqs` provider's config schemas, apart from its implementation
 * (`index.ts`): config validation (`shared/config/config.ts`, through
 * `../registry.ts`) reads them without loading the SQS client, so a build or
 * process that never reads SQS never loads `@aws-sdk/client-sqs`.
 */
import * as z from "../../config/zod.ts";
import { labelKeySchema, labelValueSchema } from "../label-mapping.ts";

/** The queue attributes a rule may read (and sum). */
export const SQS_ATTRIBUTES = [
  "ApproximateNumberOfMessages",
  "ApproximateNumberOfMessagesNotVisible",
  "ApproximateNumberOfMessagesDelayed",
] as const;

/**
 * A rule's `query:` section for `aws-sqs`:
 * - `queueLabel`: the selector label naming the queue (default `queue`);
 * - `queues`: optional allow-list of label values; when set, other queues are
 *   404 and a selector that does not name queues reads all of them;
 * - `queueNameTemplate`: SQS queue name built from the label value,
 *   `{queue}` standing for it (default `{queue}`), e.g. `prod-{queue}`;
 * - `queueOwnerAWSAccountId`: for queues of another account;
 * - `attribute`: one attribute, or a list whose values are summed;
 * - `queueIdentifier`: `name` (default: the label value is the queue's
 *   name, through `queueNameTemplate`) or `url` (the label value is the
 *   queue's URL, `https://sqs.{region}.amazonaws.com/{account}/{name}`, as
 *   an ACK `Queue` publishes it in `status.queueURL`: a custom metric rule's
 *   `describes.objectLabel`); with `url`, `queues`, `queueNameTemplate` and
 *   `queueOwnerAWSAccountId` are refused (the URL names the queue and its
 *   account; `describes.allow` is the allow-list).
 */
export const sqsQuerySchema = z
  .strictObject({
  queueLabel: z._default(labelKeySchema, "queue"),
  queues: z.optional(z.array(labelValueSchema).check(z.minLength(1))),
  queueNameTemplate: z._default(
    z.string().check(z.refine((t) => t.includes("{queue}"), "must contain {queue}")),
    "{queue}",
  ),
  queueOwnerAWSAccountId: z.optional(z.string().check(z.regex(/^\d{12}$/, "must be a 12-digit AWS account id"))),
  attribute: z._default(
    z.union([z.enum(SQS_ATTRIBUTES), z.array(z.enum(SQS_ATTRIBUTES)).check(z.minLength(1))]),
    "ApproximateNumberOfMessages",
  ),
  queueIdentifier: z._default(z.enum(["name", "url"]), "name"),
})
  .check(
    z.superRefine((q, ctx) => {
      if (q.queueIdentifier !== "url") return;
      for (const [field, set] of [
        ["queues", q.queues !== undefined],
        ["queueNameTemplate", q.queueNameTemplate !== "{queue}"],
        ["queueOwnerAWSAccountId", q.queueOwnerAWSAccountId !== undefined],
      ] as const) {
        if (set) ctx.addIssue({ code: "custom", path: [field], message: `${field} does not apply with queueIdentifier: url (the URL names the queue and its account; use describes.allow to limit the URLs)` });
      }
    }),
  );

/** Validated `query:` section of an SQS rule. */
export type SqsQuery = z.infer<typeof sqsQuerySchema>;

/** This provider's schemas under the names every provider folder's `schema.ts` exports them (the provider tables import them by these names: `../provider-list.ts`). */
export { awsProviderSchema as providerSchema } from "../aws/common.ts";
export { sqsQuerySchema as querySchema };
