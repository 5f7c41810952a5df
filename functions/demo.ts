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
import { buildApp } from "fauxqs";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../shared/config/config.ts";
import type { AwsProviderConfig } from "../shared/providers/aws/common.ts";
import { addMessages, emulatorClient } from "./demo-queue.ts";
import { INSECURE_ALLOW_UNSIGNED_ENV, SIGNING_KEYS_ENV } from "../shared/signing.ts";
import { exitOnSignals, startNodeServer, type NodeServer } from "./node.ts";
import { listenFailure, parseOrExit, portParser } from "./script-args.ts";

const QUEUE = "worker_tasks";
const SEED_MESSAGES = 25;

/** A running SQS emulator of the demo. */
export interface DemoEmulator {
  /** the TCP port it listens on (127.0.0.1) */
  port: number;
  stop(): Promise<void>;
}

/**
 * Start the fauxqs SQS emulator on 127.0.0.1:`port` (0 picks a free port).
 * Queue URLs it hands out name `localhost`, as `startFauxqs({ host: "localhost" })` does.
 *
 * @throws the listen error (`code` EADDRINUSE when the port is taken)
 */
export async function startDemoEmulator(port: number): Promise<DemoEmulator> {
  const app = buildApp({ logger: false, host: "localhost" });
  const address = await app.listen({ port, host: "127.0.0.1" });
  return { port: Number(new URL(address).port), stop: () => app.close() };
}

/** The ports `npm start` listens on by default (`SQS_PORT`, `PORT`). */
export const DEMO_DEFAULT_PORTS = { sqsPort: 4566, port: 8080 } as const;

/**
 * The `npm start` command line that starts the demo on `ports`: `SQS_PORT=…`
 * and `PORT=…` written only when not the default, so a hint built from the
 * ports in use keeps the one the user had already moved
 * (`SQS_PORT=4567 PORT=8081 npm start`, not `PORT=8081 npm start`).
 */
export function startCommand(ports: { sqsPort: number; port: number }): string {
  const settings = [
    ...(ports.sqsPort !== DEMO_DEFAULT_PORTS.sqsPort ? [`SQS_PORT=${ports.sqsPort}`] : []),
    ...(ports.port !== DEMO_DEFAULT_PORTS.port ? [`PORT=${ports.port}`] : []),
  ];
  return [...settings, "npm start"].join(" ");
}

async function main(): Promise<void> {
  const { Command, InvalidArgumentError, Option } = await import("commander");
  const program = new Command("npm start --")
    .description("The bridge with an embedded SQS emulator (fauxqs) holding the queue worker_tasks: no cloud account needed. Both listen on 127.0.0.1.")
    .addOption(new Option("--sqs-port <port>", "the SQS emulator's port (4566 is LocalStack's default too)").env("SQS_PORT").default(DEMO_DEFAULT_PORTS.sqsPort).argParser(portParser(InvalidArgumentError)))
    .addOption(new Option("--port <port>", "the bridge's port").env("PORT").default(DEMO_DEFAULT_PORTS.port).argParser(portParser(InvalidArgumentError)))
    .addHelpText("after", "\nMove the value from another terminal: npm run queue -- add 25 (same SQS_PORT).");
  parseOrExit(program);
  const { sqsPort, port } = program.opts<{ sqsPort: number; port: number }>();
  let emulator: DemoEmulator;
  try {
    emulator = await startDemoEmulator(sqsPort);
  } catch (err) {
    const busy = listenFailure(err, sqsPort, "the SQS emulator", `${startCommand({ sqsPort: sqsPort + 1, port })} (LocalStack uses 4566 too)`);
    if (busy === undefined) throw err;
    console.error(`npm start: ${busy}`);
    process.exit(1);
  }
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
  let server: NodeServer;
  try {
    server = await startNodeServer({ config, host: "127.0.0.1", port, env });
  } catch (err) {
    const busy = listenFailure(err, port, "the bridge", startCommand({ sqsPort, port: port + 1 }));
    if (busy === undefined) throw err;
    client.destroy();
    await emulator.stop();
    console.error(`npm start: ${busy}`);
    process.exit(1);
  }
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
  ${sqsPort === DEMO_DEFAULT_PORTS.sqsPort ? "" : `SQS_PORT=${emulator.port} `}npm run queue -- add 25
  ${sqsPort === DEMO_DEFAULT_PORTS.sqsPort ? "" : `SQS_PORT=${emulator.port} `}npm run queue -- drain 10

Request log (JSON lines) follows. Ctrl-C stops.
`);
  exitOnSignals(async () => {
    await server.close();
    await emulator.stop();
  });
}

if (import.meta.main) await main();
