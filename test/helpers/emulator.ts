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

/** The `policy:` flow mapping of a test that is not about policy: every read allowed, explicitly. */
export const OPEN_POLICY = "{ defaultAction: Allow }";

/** A `policy:` section line for test configs written by hand (append to a BridgeConfig document). */
export const OPEN_POLICY_SECTION = `policy: ${OPEN_POLICY}\n`;

/**
 * The head of a BridgeConfig (apiVersion, kind, optional `defaults`,
 * `policy:` unless turned off, and `providers:`) whose one provider `sqs`
 * reads the emulator at `endpoint` with static test keys and one attempt per
 * call. Tests append `metrics:` and further documents.
 *
 * A BridgeConfig without a `policy:` section denies every read, so the head
 * states `policy: { defaultAction: Allow }` by default (what a test that is
 * not about policy needs); a test that writes its own `policy:` section
 * passes `policy: null`.
 *
 * @param options.timeoutSeconds per-call timeout (default 1)
 * @param options.defaults a flow mapping for `defaults:`, e.g. `{ maxAgeSeconds: 30, cacheTTLSeconds: 0 }`
 * @param options.policy a flow mapping for `policy:` (default `{ defaultAction: Allow }`), or null for none
 */
export function sqsConfigHead(endpoint: string, options: { timeoutSeconds?: number; defaults?: string; policy?: string | null } = {}): string {
  const policy = options.policy === undefined ? OPEN_POLICY : options.policy;
  return `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
${options.defaults !== undefined ? `defaults: ${options.defaults}\n` : ""}${policy !== null ? `policy: ${policy}\n` : ""}providers:
  sqs:
    type: aws-sqs
    region: us-east-1
    endpoint: ${endpoint}
    credentials: { source: static, accessKeyId: test, secretAccessKey: test }
    timeoutSeconds: ${options.timeoutSeconds ?? 1}
    maxAttempts: 1
`;
}
