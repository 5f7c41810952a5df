/**
 * The shared read tier on DynamoDB through the **built Lambda artifact**
 * (issue 28): `infra/lambda/build.ts` bundles the handler once into a temp
 * directory, and each execution environment is one process of the Function
 * URL stand-in (`test/k8s/function-url.ts`) running that `index.mjs`, its
 * config in `BRIDGE_CONFIG` as on Lambda: an `sqs` provider with
 * `sharedCache: { type: dynamodb, endpoint: <dynalite> }` (dynalite in a
 * process of its own, one table per fleet) reading fauxqs through a front
 * that counts every process's `GetQueueAttributes` calls and can hold them
 * unanswered (`./sqs-front.ts`).
 *
 * - N = 1, 10 and 50 processes (each fleet started concurrently) reading one
 *   series (1 s TTL) repeatedly for about ten TTLs: the backend calls of 10
 *   and of 50 processes are at most 1.1× those of the one process in the
 *   same run. The tier's `timeoutMs` is 1000 here, so a loaded machine does
 *   not turn slow tier calls into direct reads. Each process reads every
 *   `max(50, 5·N)` ms: the fleet's reads together come at least as often as
 *   the single process's (so the fleet notices an expired reading no later
 *   than it does), and 50 processes on this 2-core machine are not flooded.
 *   Each fleet is warmed up first (one read of another series per process:
 *   50 cold starts at once exceed the 3 s read budget here). Measured on
 *   the shared 2-core machine at a load average of about 15: 50 processes
 *   start in 5–10 s and warm up in 5–11 s; the suite takes 55–60 s; the
 *   backend calls were 10 for one process, 10 for ten, 9–10 for fifty.
 * - a lease holder SIGKILLed while its backend call hangs stalls the other
 *   processes by at most one lease (`leaseMs` 1000) plus 1 s of slack, and
 *   one of them loads the series once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildLambda } from "../../infra/lambda/build.ts";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { freePorts } from "../k8s/cluster.ts";
import { sharedCacheYaml, startDynalite, tierConfig, type Dynalite } from "./dynalite.ts";
import { startSqsFront, type SqsFront } from "./sqs-front.ts";
import { FLEET_PATH, readFor, sleep, stopProcess } from "./fleet.ts";

const stopEnv = (e: { child: ChildProcess }) => stopProcess(e.child);

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PATH = FLEET_PATH;
/** Another series (queue `warm`) each environment reads once before it is measured: its cold start (config, provider chunk, clients) is not part of the measure. */
const WARM_PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/depth?labelSelector=queue%3Dwarm";
/** Characters of a process's output kept for failure messages (the stand-in logs one line per invocation). */
const OUTPUT_TAIL = 16_384;
/** The tier's options in the fleet runs: a 1 s deadline per tier call, robust on a loaded machine. */
const FLEET_TIER = ", timeoutMs: 1000";

/** One execution environment: a Function URL stand-in process running the built `index.mjs`. */
interface Environment {
  child: ChildProcess;
  url: string;
  /** the last {@link OUTPUT_TAIL} characters of its stdout and stderr */
  output: () => string;
}

/** Start the stand-in on `port` for the artifact in `artifact` with `config` as `BRIDGE_CONFIG`; resolved when it listens. */
function startEnvironment(artifact: string, port: number, config: string): Promise<Environment> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("AWS_") && !k.startsWith("BRIDGE_") && k !== "LOG_LEVEL" && !k.startsWith("METRICS_")) env[k] = v;
  Object.assign(env, { AWS_REGION: "us-east-1", BRIDGE_CONFIG: config, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" });
  const child = spawn(process.execPath, [join(ROOT, "test/k8s/function-url.ts"), "--artifact", artifact, "--port", String(port)], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (c: Buffer) => {
    output += c.toString();
    if (output.length > 2 * OUTPUT_TAIL) output = output.slice(-OUTPUT_TAIL);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`stand-in exited ${code}: ${output}`));
    child.once("exit", onExit);
    const onData = () => {
      if (!/"msg":"listening"/.test(output)) return;
      child.off("exit", onExit);
      child.stdout!.off("data", onData);
      resolve({ child, url: `http://127.0.0.1:${port}`, output: () => output.slice(-OUTPUT_TAIL) });
    };
    child.stdout!.on("data", onData);
  });
}

/** Each environment reads {@link WARM_PATH} until it answers 200 (a cold start under load may exceed the 3 s read budget once), within 60 s. */
async function warmUp(envs: Environment[]): Promise<void> {
  const end = Date.now() + 60_000;
  await Promise.all(
    envs.map(async (e) => {
      for (;;) {
        const res = await fetch(`${e.url}${WARM_PATH}`);
        await res.arrayBuffer();
        if (res.status === 200) return;
        if (Date.now() > end) throw new Error(`${e.url} still answers ${res.status} after 60 s: ${e.output()}`);
        await sleep(200);
      }
    }),
  );
}

/** Direct reads the environments logged (the tier failed or was too slow): the first suspect when counts scale. */
const fallbacks = (envs: Environment[]) => envs.reduce((n, e) => n + (e.output().match(/shared read tier failed/g)?.length ?? 0), 0);

describe("shared read tier on DynamoDB through the built Lambda artifact, one process per execution environment", () => {
  let sqs: Emulator;
  let front: SqsFront;
  let ddb: Dynalite;
  let artifact: string;
  const dir = mkdtempSync(join(tmpdir(), "emb-tier-artifact-"));
  const running: Environment[] = [];

  /** Start `n` environments at once on table `table` (created first) with tier options `extra`, and warm each up ({@link warmUp}). */
  async function fleet(n: number, table: string, extra: string): Promise<{ envs: Environment[]; startMs: number; warmMs: number }> {
    await ddb.createTable(table);
    const config = tierConfig(front.endpoint, sharedCacheYaml(ddb.endpoint, table, extra));
    const ports = await freePorts(n);
    const started = performance.now();
    const settled = await Promise.allSettled(ports.map((port) => startEnvironment(artifact, port, config)));
    for (const s of settled) if (s.status === "fulfilled") running.push(s.value);
    const failed = settled.find((s) => s.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const envs = settled.map((s) => (s as PromiseFulfilledResult<Environment>).value);
    const startMs = performance.now() - started;
    await warmUp(envs);
    return { envs, startMs, warmMs: performance.now() - started - startMs };
  }

  /** Backend calls while `envs` read for ten TTLs (10.2 s) every `max(50, 5·N)` ms. */
  async function callsOver(envs: Environment[]): Promise<number> {
    const before = front.reads;
    await readFor(envs.map((e) => e.url), 10_200, Math.max(50, 5 * envs.length), "4", true);
    return front.reads - before;
  }

  beforeAll(async () => {
    let build: Awaited<ReturnType<typeof buildLambda>>;
    [sqs, ddb, build] = await Promise.all([startEmulator(), startDynalite({ process: true }), buildLambda({ outdir: join(dir, "lambda") })]);
    artifact = build.outdir;
    await Promise.all([sqs.add("jobs", 4), sqs.add("warm", 1)]);
    front = await startSqsFront(sqs.endpoint);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(running.map(stopEnv));
    await front?.stop();
    await Promise.all([sqs?.stop(), ddb?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("1, 10 and 50 processes reading one series for ten TTLs: the fleets' backend calls are within 1.1× of one process's", async () => {
    const { envs: single } = await fleet(1, "fleet-1", FLEET_TIER);
    const one = await callsOver(single);
    await Promise.all(single.map(stopEnv));
    expect(one).toBeGreaterThanOrEqual(8);

    for (const n of [10, 50]) {
      const { envs, startMs, warmMs } = await fleet(n, `fleet-${n}`, FLEET_TIER);
      console.log(`${n} artifact processes started in ${(startMs / 1000).toFixed(1)} s, warmed up in ${(warmMs / 1000).toFixed(1)} s`);
      const many = await callsOver(envs);
      console.log(`backend calls over ten TTLs: 1 process ${one}, ${n} processes ${many}`);
      expect(many, `${n} processes: ${many} backend calls vs ${one} of one process; ${fallbacks(envs)} direct reads logged`).toBeLessThanOrEqual(one * 1.1);
      await Promise.all(envs.map(stopEnv));
    }
  }, 150_000);

  it("a lease holder SIGKILLed while its backend call hangs stalls the others by at most one lease", async () => {
    const { envs } = await fleet(3, "killed", ", leaseMs: 1000, timeoutMs: 1000");
    const [holder, ...others] = envs;
    const before = front.reads;
    front.mode = "hang";
    try {
      const stuck = fetch(`${holder!.url}${PATH}`).catch(() => undefined);
      for (let i = 0; i < 300 && front.held === 0; i++) await sleep(10);
      expect(front.held).toBe(1);
      expect(front.reads - before).toBe(1);
      holder!.child.kill("SIGKILL");
      await stuck;
    } finally {
      front.mode = "forward";
    }
    // the lease (1 s) is still on the item: the others wait for it to end, then one of them loads
    const started = performance.now();
    const answers = await Promise.all(others.map(async (e) => ({ status: (await fetch(`${e.url}${PATH}`)).status, ms: performance.now() - started })));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.ms).toBeLessThan(2000);
    }
    expect(front.reads - before, `${fallbacks(others)} direct reads logged`).toBe(2);
    // two items: the warm-up series and this one, stored by the new loader with the dead holder's lease gone
    const items = await ddb.scan("killed");
    expect(items).toHaveLength(2);
    const jobs = items.filter((i) => /"v":"4"/.test(i["r"]?.S ?? ""));
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!["leaseUntil"]).toBeUndefined();
  }, 60_000);
});
