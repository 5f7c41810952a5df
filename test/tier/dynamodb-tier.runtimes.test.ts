/**
 * The shared read tier on DynamoDB across real processes (issue 28): Node
 * server processes (`node functions/node.ts`) with one config, a
 * `sharedCache:` on one dynalite table (in this process, 127.0.0.1), and
 * their SQS provider reading fauxqs through a front that counts every
 * process's `GetQueueAttributes` calls and can hold them unanswered
 * (`./sqs-front.ts`).
 *
 * - 6 processes reading one series concurrently and repeatedly for three
 *   TTLs make the backend calls of one process in the same run (≤ 1.1×);
 * - a lease holder SIGKILLed while its backend call hangs stalls the
 *   others by at most one lease (`leaseMs` 1000 here), under the 3 s deadline.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { sharedCacheYaml, startDynalite, tierConfig, type Dynalite } from "./dynalite.ts";
import { startSqsFront, type SqsFront } from "./sqs-front.ts";
import { FLEET_PATH, readFor, sleep, stopProcess } from "./fleet.ts";

const stopServer = (server: { child: ChildProcess }) => stopProcess(server.child);

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PATH = FLEET_PATH;

/** A Node server process. */
interface Server {
  child: ChildProcess;
  url: string;
  output: () => string;
}

/** Start `node functions/node.ts` on config file `file`, resolved when it listens. */
function startServer(file: string): Promise<Server> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("AWS_") || k.startsWith("BRIDGE_") || k === "LOG_LEVEL" || k.startsWith("METRICS_")) delete env[k];
  const child = spawn(process.execPath, [join(ROOT, "functions/node.ts"), "--port", "0", "--insecure-allow-unsigned", "--config", file], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`exited ${code}: ${output}`));
    child.once("exit", onExit);
    child.stderr!.on("data", () => {
      const m = /listening on (http:\/\/\S+)/.exec(output);
      if (m) {
        child.off("exit", onExit);
        resolve({ child, url: m[1]!, output: () => output });
      }
    });
  });
}

describe("shared read tier on DynamoDB across Node server processes", () => {
  let sqs: Emulator;
  let front: SqsFront;
  let ddb: Dynalite;
  const dir = mkdtempSync(join(tmpdir(), "emb-tier-"));
  const servers: Server[] = [];

  /** Start `n` servers of one config on `table` (written once: every process computes the same config digest). */
  async function fleet(n: number, table: string, extra = ""): Promise<Server[]> {
    await ddb.createTable(table);
    const file = join(dir, `${table}.yaml`);
    writeFileSync(file, tierConfig(front.endpoint, sharedCacheYaml(ddb.endpoint, table, extra)));
    const started = await Promise.all(Array.from({ length: n }, () => startServer(file)));
    servers.push(...started);
    return started;
  }

  beforeAll(async () => {
    [sqs, ddb] = await Promise.all([startEmulator(), startDynalite()]);
    await sqs.add("jobs", 4);
    front = await startSqsFront(sqs.endpoint);
  }, 30_000);
  afterAll(async () => {
    await Promise.all(servers.map(stopServer));
    await front?.stop();
    await Promise.all([sqs?.stop(), ddb?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("6 processes reading one series for ten TTLs make the backend calls of one process (≤ 1.1×)", async () => {
    const [single] = await fleet(1, "procs-1");
    let before = front.reads;
    await readFor([single!.url], 10_200, 50, "4");
    const one = front.reads - before;
    await stopServer(single!);

    const six = await fleet(6, "procs-6");
    before = front.reads;
    await readFor(six.map((s) => s.url), 10_200, 50, "4");
    const many = front.reads - before;
    expect(one).toBeGreaterThanOrEqual(10);
    expect(many).toBeLessThanOrEqual(one * 1.1);
  }, 120_000);

  it("a lease holder killed while its backend call hangs stalls the others by at most one lease", async () => {
    const [holder, ...others] = await fleet(3, "killed", ", leaseMs: 1000");
    front.mode = "hang";
    try {
      const before = front.reads;
      const stuck = fetch(`${holder!.url}${PATH}`).catch(() => undefined);
      for (let i = 0; i < 200 && front.held === 0; i++) await sleep(10);
      expect(front.held).toBe(1);
      expect(front.reads - before).toBe(1);
      holder!.child.kill("SIGKILL");
      await stuck;
    } finally {
      front.mode = "forward";
    }
    // the lease (1 s) is still on the item: the others wait for it to end, then one of them loads
    const started = performance.now();
    const answers = await Promise.all(others.map(async (s) => ({ status: (await fetch(`${s.url}${PATH}`)).status, ms: performance.now() - started })));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.ms).toBeLessThan(2000);
    }
    const items = await ddb.scan("killed");
    expect(items).toHaveLength(1);
    expect(items[0]!["r"]?.S).toMatch(/"v":"4"/);
  }, 60_000);
});
