/**
 * `npm start`: the bridge with an embedded default backend, no cloud account
 * needed. Starts the fauxqs SQS emulator on 127.0.0.1 (port `SQS_PORT`,
 * default 4566) holding the queue `worker_tasks`, then the bridge on
 * 127.0.0.1:`PORT` (default 8080) with `infra/examples/demo.yaml`, and prints
 * ready-to-paste curl lines. `npm run queue -- add 25` moves the value.
 *
 * The demo is local and unsigned on purpose: it serves without
 * `BRIDGE_SIGNING_KEYS` by passing the insecure setting explicitly (the
 * "running insecure" warning is printed on start), and its config states
 * `policy: { defaultAction: Allow }` (the "running open" warning). A
 * deployed bridge sets neither (docs/deploy.md).
 */
import { CreateQueueCommand } from "@aws-sdk/client-sqs";
import { startFauxqs } from "fauxqs";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../shared/config/config.ts";
import type { AwsProviderConfig } from "../shared/providers/aws/common.ts";
import { addMessages, emulatorClient } from "./demo-queue.ts";
import { INSECURE_ALLOW_UNSIGNED_ENV, SIGNING_KEYS_ENV } from "../shared/signing.ts";
import { exitOnSignals, startNodeServer } from "./node.ts";

const QUEUE = "worker_tasks";
const SEED_MESSAGES = 25;

async function main(): Promise<void> {
  const sqsPort = Number(process.env["SQS_PORT"] ?? 4566);
  const port = Number(process.env["PORT"] ?? 8080);
  const emulator = await startFauxqs({ port: sqsPort, host: "localhost", logger: false });
  const endpoint = `http://127.0.0.1:${emulator.port}`;
  const client = emulatorClient(endpoint);
  const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: QUEUE }));
  await addMessages(client, QueueUrl!, SEED_MESSAGES);

  const configPath = fileURLToPath(new URL("../infra/examples/demo.yaml", import.meta.url));
  const { config } = loadConfig(readFileSync(configPath, "utf8"), configPath);
  for (const provider of Object.values(config.providers)) {
    if (provider.type === "aws-sqs") (provider.config as AwsProviderConfig).endpoint = endpoint;
  }
  // Local only (127.0.0.1), so unsigned on purpose; keys from the shell would make every curl line a 401.
  const env = { ...process.env, [SIGNING_KEYS_ENV]: undefined, [INSECURE_ALLOW_UNSIGNED_ENV]: "true" };
  const server = await startNodeServer({ config, host: "127.0.0.1", port, env });
  const base = `${server.url}/apis/external.metrics.k8s.io/v1beta1`;
  console.log(`
external-metrics-bridge demo
  SQS emulator (fauxqs): ${endpoint}  queue "${QUEUE}" holds ${SEED_MESSAGES} messages
  bridge:                ${server.url}  config ${configPath}

Try:
  curl -s '${base}' 
  curl -s '${base}/namespaces/default/queue_messages_ready?labelSelector=queue%3D${QUEUE}'
  curl -s '${base}/namespaces/default/queue_messages_backlog'
  curl -s '${base}/namespaces/default/queue_messages_ready?labelSelector=queue%3Dmissing'   # 404 Status

Move the value (in another terminal):
  npm run queue -- add 25
  npm run queue -- drain 10

Request log (JSON lines) follows. Ctrl-C stops.
`);
  exitOnSignals(async () => {
    await server.close();
    await emulator.stop();
  });
}

await main();
