/**
 * Move the demo queue so the metric value moves:
 *
 *   npm run queue -- add 25        # send 25 messages to worker_tasks
 *   npm run queue -- drain 10      # receive and delete up to 10 messages
 *   npm run queue -- purge         # delete every message
 *   npm run queue -- depth         # print ApproximateNumberOfMessages
 *
 * Options: --queue NAME (default worker_tasks), --endpoint URL (default
 * `SQS_ENDPOINT`, else http://127.0.0.1:`SQS_PORT` with SQS_PORT defaulting
 * to 4566 — the emulator `npm start` runs, on the same variable), --region.
 * `npm run queue -- --help` lists them (commander, as the admin CLI).
 */
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { parseOrExit } from "./script-args.ts";

/** An SQS client for the local emulator (any static key works there). */
export function emulatorClient(endpoint: string, region = "us-east-1"): SQSClient {
  return new SQSClient({ region, endpoint, credentials: { accessKeyId: "demo", secretAccessKey: "demo" } });
}

/** Send `count` messages to `queueUrl`, 10 per SendMessageBatch call. */
export async function addMessages(client: SQSClient, queueUrl: string, count: number): Promise<void> {
  for (let sent = 0; sent < count; sent += 10) {
    const n = Math.min(10, count - sent);
    const entries = Array.from({ length: n }, (_, i) => ({ Id: `m${i}`, MessageBody: `task ${sent + i + 1}` }));
    const out = await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
    if (out.Failed && out.Failed.length > 0) throw new Error(`SendMessageBatch failed: ${JSON.stringify(out.Failed)}`);
  }
}

/** Receive and delete up to `count` messages; returns how many were deleted. */
export async function drainMessages(client: SQSClient, queueUrl: string, count: number): Promise<number> {
  let deleted = 0;
  while (deleted < count) {
    const out = await client.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: Math.min(10, count - deleted), WaitTimeSeconds: 0 }),
    );
    const messages = out.Messages ?? [];
    if (messages.length === 0) break;
    await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: messages.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
    deleted += messages.length;
  }
  return deleted;
}

/** ApproximateNumberOfMessages of a queue, as SQS reports it. */
export async function queueDepth(client: SQSClient, queueUrl: string): Promise<number> {
  const out = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["ApproximateNumberOfMessages"] }),
  );
  return Number(out.Attributes?.["ApproximateNumberOfMessages"]);
}

/** The emulator's URL when `--endpoint` is not given: `SQS_ENDPOINT`, else 127.0.0.1:`SQS_PORT` (default 4566), as `npm start` listens. */
export function defaultQueueEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  return env["SQS_ENDPOINT"] || `http://127.0.0.1:${env["SQS_PORT"] || "4566"}`;
}

async function main(): Promise<void> {
  const { Argument, Command, Option } = await import("commander");
  const program = new Command("npm run queue --")
    .description("Move the demo queue of `npm start` so the metric value moves.")
    .addArgument(new Argument("<command>", "add N | drain N | purge | depth").choices(["add", "drain", "purge", "depth"]))
    .argument("[count]", "how many messages to add or drain (default 10)")
    .option("--queue <name>", "the queue", "worker_tasks")
    .addOption(new Option("--endpoint <url>", "the SQS endpoint (default: SQS_ENDPOINT, else http://127.0.0.1:$SQS_PORT, SQS_PORT default 4566)").default(defaultQueueEndpoint(), "from SQS_ENDPOINT / SQS_PORT"))
    .option("--region <region>", "the region the client signs for", "us-east-1");
  parseOrExit(program);
  const values = program.opts<{ queue: string; endpoint: string; region: string }>();
  const [command, countText] = program.args as [string, string | undefined];
  const count = countText === undefined ? 10 : Number(countText);
  if (!Number.isInteger(count) || count < 0 || count > 100_000) {
    console.error(`count must be a whole number from 0 to 100000, got ${countText}`);
    process.exit(2);
  }
  const client = emulatorClient(values.endpoint, values.region);
  let queueUrl: string;
  try {
    queueUrl = (await client.send(new GetQueueUrlCommand({ QueueName: values.queue }))).QueueUrl!;
  } catch (err) {
    console.error(`cannot reach queue ${values.queue} at ${values.endpoint}: ${(err as Error).message}\nIs \`npm start\` running${values.endpoint === defaultQueueEndpoint() ? " (on SQS_PORT, default 4566)" : ""}?`);
    process.exit(1);
  }
  switch (command) {
    case "add":
      await addMessages(client, queueUrl, count);
      console.log(`added ${count} messages to ${values.queue}`);
      break;
    case "drain":
      console.log(`deleted ${await drainMessages(client, queueUrl, count)} messages from ${values.queue}`);
      break;
    case "purge":
      await client.send(new PurgeQueueCommand({ QueueUrl: queueUrl }));
      console.log(`purged ${values.queue}`);
      break;
    default: // depth
      break;
  }
  console.log(`${values.queue}: ApproximateNumberOfMessages = ${await queueDepth(client, queueUrl)}`);
}

if (import.meta.main) await main();
