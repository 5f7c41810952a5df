/**
 * What the multi-process tier suites share (dynamodb-tier.runtimes.test.ts:
 * Node server processes; dynamodb-tier.artifact.test.ts: processes running
 * the built Lambda artifact): the series they read, stopping a process, and
 * a fleet reading that series for a while.
 */
import type { ChildProcess } from "node:child_process";
import { expect } from "vitest";

/** The series every process of a fleet reads: `depth` of queue `jobs`. */
export const FLEET_PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/depth?labelSelector=queue%3Djobs";

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** SIGTERM `child` and wait for its exit (at once when it has exited already). */
export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await exited;
}

/**
 * Each process (by its base URL) reads {@link FLEET_PATH} every `stepMs` for
 * `durationMs`, all at once; every answer must be 200 with `value` (the first
 * that is not stops every loop). `spread`: the processes' first reads are
 * spread over one step instead of starting together.
 */
export async function readFor(urls: readonly string[], durationMs: number, stepMs: number, value: string, spread = false): Promise<void> {
  const end = Date.now() + durationMs;
  let failed = false;
  await Promise.all(
    urls.map(async (url, i) => {
      if (spread) await sleep((i * stepMs) / urls.length);
      try {
        while (Date.now() < end && !failed) {
          const res = await fetch(`${url}${FLEET_PATH}`);
          const body = (await res.json()) as any;
          expect(res.status, JSON.stringify(body)).toBe(200);
          expect(body.items[0].value).toBe(value);
          await sleep(stepMs);
        }
      } catch (err) {
        failed = true;
        throw err;
      }
    }),
  );
}
