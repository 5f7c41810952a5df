/**
 * The `Queue` kind of the AWS Controllers for Kubernetes SQS controller
 * (`queues.sqs.services.k8s.aws`, v1alpha1; aws-controllers-k8s/sqs-controller
 * `config/crd/bases/sqs.services.k8s.aws_queues.yaml`), reduced to what an
 * Object metric reads: `spec.queueName` and the `status` the controller
 * writes through the status subresource (`queueURL`,
 * `ackResourceMetadata`). No ACK controller runs in the end-to-end suites:
 * the test writes the status the controller would, for a queue it created
 * in the SQS emulator.
 */
import type { ImpersonatingClient } from "./impersonate.ts";

/** The Queue kind's group, version and plural. */
export const QUEUE_GROUP = "sqs.services.k8s.aws";
export const QUEUE_VERSION = "v1alpha1";
/** The group resource as a custom metrics path names it (shared/k8s/request-path.ts `isGroupResource`). */
export const QUEUE_RESOURCE = `queues.${QUEUE_GROUP}`;

/** The CustomResourceDefinition of {@link QUEUE_RESOURCE}: namespaced, with a status subresource. */
export function queueCrd(): Record<string, unknown> {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: QUEUE_RESOURCE },
    spec: {
      group: QUEUE_GROUP,
      names: { kind: "Queue", listKind: "QueueList", plural: "queues", singular: "queue" },
      scope: "Namespaced",
      versions: [
        {
          name: QUEUE_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [{ name: "URL", type: "string", jsonPath: ".status.queueURL" }],
          schema: {
            openAPIV3Schema: {
              type: "object",
              properties: {
                spec: { type: "object", required: ["queueName"], properties: { queueName: { type: "string" }, delaySeconds: { type: "string" } } },
                status: {
                  type: "object",
                  properties: {
                    queueURL: { type: "string" },
                    ackResourceMetadata: {
                      type: "object",
                      properties: { arn: { type: "string" }, ownerAccountID: { type: "string" }, region: { type: "string" } },
                    },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

/** A Queue object `name` in `ns` for the SQS queue `queueName` (no status: the controller writes it). */
export function queueObject(name: string, ns: string, queueName: string): Record<string, unknown> {
  return { apiVersion: `${QUEUE_GROUP}/${QUEUE_VERSION}`, kind: "Queue", metadata: { name, namespace: ns }, spec: { queueName } };
}

/**
 * Write what ACK's controller writes once the queue exists: `status.queueURL`
 * and `status.ackResourceMetadata` (the ARN from the URL's account and the
 * queue name), through the `status` subresource.
 *
 * @throws Error with the API server's answer when the write fails
 */
export async function setQueueStatus(client: ImpersonatingClient, ns: string, name: string, queueURL: string, region = "us-east-1"): Promise<void> {
  const [account, queueName] = new URL(queueURL).pathname.split("/").filter((s) => s !== "");
  const status = { queueURL, ackResourceMetadata: { arn: `arn:aws:sqs:${region}:${account}:${queueName}`, ownerAccountID: account, region } };
  const r = await client.request("PATCH", `/apis/${QUEUE_GROUP}/${QUEUE_VERSION}/namespaces/${ns}/queues/${name}/status`, {
    body: { status },
    contentType: "application/merge-patch+json",
  });
  if (r.status !== 200) throw new Error(`status of queue ${ns}/${name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
}
