/**
 * Certificate generation off the proxy's main thread. Making a CA or a
 * serving certificate needs @peculiar/x509 (`certs.ts`), which with
 * reflect-metadata, tsyringe and its ASN.1 schemas costs ~9 MB of resident
 * memory (issue 11 P5) — for something a proxy does once at start
 * (`generate` mode) or once in months (the Secret's writer renewing it). So
 * each generation runs in a short-lived `node:worker_threads` Worker
 * (`x509-worker.ts`) that imports the library, returns PEM strings and
 * exits: its memory goes with the worker's isolate, and the main isolate
 * never loads the library (inspection is `pem.ts`, node:crypto).
 *
 * The worker file is found next to this module: `x509-worker.ts` when run
 * from sources (Node's type stripping), `x509-worker.mjs` in the esbuild
 * image bundle (infra/proxy/build.ts builds it as a second entry point
 * beside `main.mjs`; this code may sit in `main.mjs` or in `chunks/`).
 *
 * Every generation has a deadline ({@link GENERATION_TIMEOUT_MS}); a worker
 * still running then is terminated. Failures reject with an `Error` carrying
 * the message the generation code threw (e.g. `caFromPem`'s "the CA key does
 * not belong to the CA certificate"), as when it ran in the main thread.
 */
import { existsSync } from "node:fs";
import { Worker } from "node:worker_threads";

/** Deadline of one generation in the worker, ms (key generation and signing take milliseconds; a start on a loaded node a few hundred). */
export const GENERATION_TIMEOUT_MS = 30_000;

/** A certificate and its private key, PEM (`CERTIFICATE`, PKCS #8 `PRIVATE KEY`). */
export interface PemPair {
  certPem: string;
  keyPem: string;
}

/** What the worker is asked to make (times in ms since the epoch, validities in seconds or days as named). */
export type GenerationRequest =
  /** `certs.ts` generateServingCertificate: a CA (3650 days) and a serving certificate (`validDays`) */
  | { op: "generate"; service: string; namespace: string; validDays: number; nowMs: number }
  /** a serving CA and a serving certificate from it (the Secret's first content) */
  | { op: "create-pair"; service: string; namespace: string; caValiditySeconds: number; certValiditySeconds: number; nowMs: number }
  /** a serving CA alone (step (a) of a CA rotation) */
  | { op: "create-ca"; service: string; namespace: string; validSeconds: number; nowMs: number }
  /** a serving certificate from an existing CA (renewal, step (b)) */
  | { op: "issue-serving"; ca: PemPair; service: string; namespace: string; validSeconds: number; nowMs: number };

/** What the worker made: the CA (when one was made) and the serving certificate (when one was made). */
export interface GenerationResult {
  ca?: PemPair;
  serving?: PemPair;
  /** the worker thread's `threadId` (never the main thread's 0) */
  threadId: number;
}

/** The worker's one message. */
export type GenerationReply = { ok: true; result: GenerationResult } | { ok: false; message: string };

/** Counters of generation workers (for logs and tests): started, failed, timed out, and alive now. */
export const generationStats = { workers: 0, failures: 0, timeouts: 0, running: 0 };

let workerFile: URL | undefined;

/**
 * The worker module's URL: from sources `./x509-worker.ts`; in the bundle
 * `x509-worker.mjs` beside `main.mjs` (this code in `main.mjs`) or one
 * directory up (this code in `chunks/`).
 *
 * @throws Error when none exists (a bundle shipped without its worker file)
 */
function workerUrl(): URL {
  if (workerFile !== undefined) return workerFile;
  for (const candidate of ["./x509-worker.ts", "./x509-worker.mjs", "../x509-worker.mjs"]) {
    const url = new URL(candidate, import.meta.url);
    if (existsSync(url)) return (workerFile = url);
  }
  throw new Error(`certificate generation: x509-worker.ts/.mjs not found beside ${import.meta.url}`);
}

/**
 * Run one generation in a new worker thread and wait for its answer.
 *
 * @param timeoutMs deadline, ms (default {@link GENERATION_TIMEOUT_MS}); the worker is terminated when it passes
 * @throws Error with the generation's own message when it fails, when the
 *   worker exits or crashes without an answer, or when the deadline passes
 */
export function generateInWorker(request: GenerationRequest, timeoutMs = GENERATION_TIMEOUT_MS): Promise<GenerationResult> {
  return new Promise<GenerationResult>((resolve, reject) => {
    let settled = false;
    let worker: Worker;
    try {
      worker = new Worker(workerUrl(), { workerData: request });
    } catch (err) {
      generationStats.failures++;
      reject(err as Error);
      return;
    }
    generationStats.workers++;
    generationStats.running++;
    worker.once("exit", () => void generationStats.running--);
    const finish = (outcome: { result: GenerationResult } | { error: Error }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // The answer is in hand: end the isolate now rather than when its loop drains.
      void worker.terminate();
      if ("error" in outcome) {
        generationStats.failures++;
        reject(outcome.error);
      } else resolve(outcome.result);
    };
    const timer = setTimeout(() => {
      generationStats.timeouts++;
      finish({ error: new Error(`certificate generation did not finish within ${timeoutMs / 1000} s; its worker thread was stopped`) });
    }, timeoutMs);
    worker.once("message", (reply: GenerationReply) => finish(reply.ok ? { result: reply.result } : { error: new Error(reply.message) }));
    worker.once("error", (err: Error) => finish({ error: err }));
    worker.once("exit", (code) => finish({ error: new Error(`certificate generation worker exited (code ${code}) without an answer`) }));
  });
}

/**
 * A fresh CA (3650 days) and a serving certificate for a Service, plus
 * `localhost` and 127.0.0.1 (`certs.ts` generateServingCertificate), made in a worker.
 *
 * @param validDays serving certificate validity, days
 * @throws Error as {@link generateInWorker}
 */
export async function generateServingPair(service: string, namespace: string, validDays = 365, nowMs = Date.now()): Promise<{ ca: PemPair; serving: PemPair; threadId: number }> {
  const r = await generateInWorker({ op: "generate", service, namespace, validDays, nowMs });
  return { ca: r.ca!, serving: r.serving!, threadId: r.threadId };
}

/**
 * A serving CA (`certs.ts` createServingCA) and a serving certificate from it
 * (issueServingCertificate), made in one worker.
 *
 * @param caValiditySeconds CA validity, seconds from `nowMs`
 * @param certValiditySeconds certificate validity, seconds from `nowMs` (cut back to the CA's notAfter)
 * @throws Error as {@link generateInWorker}
 */
export async function createServingPair(
  service: string,
  namespace: string,
  caValiditySeconds: number,
  certValiditySeconds: number,
  nowMs: number,
): Promise<{ ca: PemPair; serving: PemPair; threadId: number }> {
  const r = await generateInWorker({ op: "create-pair", service, namespace, caValiditySeconds, certValiditySeconds, nowMs });
  return { ca: r.ca!, serving: r.serving!, threadId: r.threadId };
}

/**
 * A serving CA (`certs.ts` createServingCA), made in a worker.
 *
 * @param validSeconds CA validity, seconds from `nowMs`
 * @throws Error as {@link generateInWorker}
 */
export async function createServingCAPem(service: string, namespace: string, validSeconds: number, nowMs: number): Promise<PemPair & { threadId: number }> {
  const r = await generateInWorker({ op: "create-ca", service, namespace, validSeconds, nowMs });
  return { ...r.ca!, threadId: r.threadId };
}

/**
 * A serving certificate signed by `ca` (`certs.ts` caFromPem +
 * issueServingCertificate), made in a worker.
 *
 * @param validSeconds validity, seconds from `nowMs` (cut back to the CA's notAfter)
 * @throws Error as {@link generateInWorker}; "the CA key does not belong to
 *   the CA certificate" when `ca.keyPem` is not the key of `ca.certPem`
 */
export async function issueServingPem(ca: PemPair, service: string, namespace: string, validSeconds: number, nowMs: number): Promise<PemPair & { threadId: number }> {
  const r = await generateInWorker({ op: "issue-serving", ca, service, namespace, validSeconds, nowMs });
  return { ...r.serving!, threadId: r.threadId };
}
