/**
 * dynalite (an offline DynamoDB-compatible server, `dynalite` npm) on
 * 127.0.0.1 for the shared read tier's tests and benchmark: started on a
 * free port, tables made through the real AWS SDK (partition key `k`, as
 * shared/cache/dynamodb-tier.ts expects), stopped with its connections.
 */
import { CreateTableCommand, DynamoDBClient, ScanCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { spawn } from "node:child_process";
import type { Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { sqsConfigHead } from "../helpers/emulator.ts";
import { freePort } from "../helpers/ports.ts";
// @ts-expect-error dynalite ships no types
import dynalite from "dynalite";

/** A running dynalite. */
export interface Dynalite {
  /** `http://127.0.0.1:PORT` */
  endpoint: string;
  client: DynamoDBClient;
  /** create table `name` (key `k`, string) and wait until it is active */
  createTable(name: string): Promise<void>;
  /** every item of `table` */
  scan(table: string): Promise<Record<string, AttributeValue>[]>;
  /** stop listening and drop every connection (the port then refuses) */
  stop(): Promise<void>;
}

/** The `sharedCache:` flow mapping of a tier on `table` of `endpoint` (static test keys, one region). */
export function sharedCacheYaml(endpoint: string, table: string, extra = ""): string {
  return `{ type: dynamodb, table: ${table}, region: us-east-1, endpoint: ${endpoint}, credentials: { source: static, accessKeyId: test, secretAccessKey: test }${extra} }`;
}

/** A config whose `sqs` provider reads `sqsEndpoint` through the tier `sharedCache` (a flow mapping), one rule `depth` with a 1 s TTL. */
export function tierConfig(sqsEndpoint: string, sharedCache: string, options: { maxAgeSeconds?: number; timeoutSeconds?: number } = {}): string {
  return `${sqsConfigHead(sqsEndpoint, { timeoutSeconds: options.timeoutSeconds ?? 2 })}    sharedCache: ${sharedCache}
metrics:
  - name: depth
    provider: sqs
    maxAgeSeconds: ${options.maxAgeSeconds ?? 30}
    cacheTTLSeconds: 1
    query: { queueLabel: queue }
`;
}

/**
 * Start dynalite on 127.0.0.1 (a free port). Tables are in memory.
 *
 * @param options.process run it in a child process of its own (`dynalite`'s
 *   CLI), as a real DynamoDB is: its work and garbage collection then do not
 *   share the bridge's event loop (the benchmark's latency figures)
 */
export async function startDynalite(options: { process?: boolean } = {}): Promise<Dynalite> {
  let close: () => Promise<void>;
  let endpoint: string;
  if (options.process) {
    const port = await freePort();
    const cli = createRequire(import.meta.url).resolve("dynalite/cli.js");
    const child = spawn(process.execPath, [cli, "--host", "127.0.0.1", "--port", String(port), "--createTableMs", "0"], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise<void>((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`dynalite exited ${code}`)));
      child.stdout!.on("data", (c: Buffer) => /listening/.test(c.toString()) && resolve());
    });
    endpoint = `http://127.0.0.1:${port}`;
    close = async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    };
  } else {
    const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }) as Server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
  }
  const client = new DynamoDBClient({ region: "us-east-1", endpoint, credentials: { accessKeyId: "test", secretAccessKey: "test" }, maxAttempts: 1 });
  let stopped = false;
  return {
    endpoint,
    client,
    createTable: async (name) => {
      await client.send(
        new CreateTableCommand({
          TableName: name,
          AttributeDefinitions: [{ AttributeName: "k", AttributeType: "S" }],
          KeySchema: [{ AttributeName: "k", KeyType: "HASH" }],
          BillingMode: "PAY_PER_REQUEST",
        }),
      );
    },
    scan: async (table) => (await client.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? [],
    stop: async () => {
      if (stopped) return;
      stopped = true;
      client.destroy();
      await close();
    },
  };
}
