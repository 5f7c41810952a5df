/**
 * The fauxqs SQS emulator for tests: started on 127.0.0.1 with a free port,
 * queues created and filled through the real AWS SDK.
 */
import { CreateQueueCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { startFauxqs } from "fauxqs";
import { addMessages, drainMessages, emulatorClient } from "../../functions/demo-queue.ts";

/** A running emulator with helpers to move its queues. */
export interface Emulator {
  endpoint: string;
  port: number;
  client: SQSClient;
  /** create `name` if needed and return its URL */
  createQueue(name: string): Promise<string>;
  add(name: string, count: number): Promise<void>;
  drain(name: string, count: number): Promise<number>;
  /** stop the emulator (the port then refuses connections) */
  stop(): Promise<void>;
}

/** Start fauxqs on 127.0.0.1 (a free port unless `port` is given). */
export async function startEmulator(port = 0): Promise<Emulator> {
  const server = await startFauxqs({ port, host: "localhost", logger: false });
  const endpoint = `http://127.0.0.1:${server.port}`;
  const client = emulatorClient(endpoint);
  const urls = new Map<string, string>();
  const createQueue = async (name: string) => {
    let url = urls.get(name);
    if (url === undefined) {
      url = (await client.send(new CreateQueueCommand({ QueueName: name }))).QueueUrl!;
      urls.set(name, url);
    }
    return url;
  };
  let stopped = false;
  return {
    endpoint,
    port: server.port,
    client,
    createQueue,
    add: async (name, count) => addMessages(client, await createQueue(name), count),
    drain: async (name, count) => drainMessages(client, await createQueue(name), count),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      client.destroy();
      await server.stop();
    },
  };
}
