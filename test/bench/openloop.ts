/**
 * A fixed-rate open-loop HTTP(S) load generator: request i is due at
 * t0 + i / rate whatever happened to the requests before it, sent over a
 * pool of keep-alive connections (`node:http`/`node:https` Agent, at most
 * `connections` sockets; a request due while every socket is busy waits in
 * the Agent's queue), and its latency is measured from its SCHEDULED send
 * time to the end of its response — so a stall of the server (or of the
 * generator) is charged to every request that should have been sent during
 * it, not only to the one that was in flight ("coordinated omission", Gil
 * Tene, "How NOT to Measure Latency"; the same correction as wrk2).
 *
 * Why not autocannon `-R`: it gives each connection its share of the rate
 * and sends it in bursts, and measures from the actual send, so queueing
 * behind a slow answer is not seen.
 *
 * {@link closedLoop} is the other kind, for runs that must complete rather
 * than measure latency: a fixed number of requests, a fixed number in flight.
 *
 * Units: rates in requests per second, durations in seconds, latencies in
 * milliseconds. Nothing here asserts a figure.
 */
import http from "node:http";
import https from "node:https";

/** Where and what to send. */
export interface OpenLoopTarget {
  /** base URL, `http://` or `https://` */
  url: string;
  /** path (with query) of request i */
  path(i: number): string;
  headers?: Record<string, string>;
  /** client certificate and key (PEM) presented on every connection */
  tls?: { cert: string; key: string };
  /** CA (PEM) trusted for the server's certificate; without it the certificate is not verified */
  ca?: string;
  /**
   * Checks the body of each 2xx answer (collected only when given); an
   * answer it refuses counts as `invalid`, not ok, and is not measured.
   * Runs after the answer's latency is taken; keep it cheap (it runs in the
   * generator's event loop).
   */
  check?: (body: Buffer) => boolean;
}

/** How to send. */
export interface OpenLoopOptions {
  /** requests per second, > 0 */
  rate: number;
  /** measured seconds, > 0 */
  seconds: number;
  /** seconds sent at the same rate before the measured part and left out of the figures (default 0) */
  warmupSeconds?: number;
  /** most keep-alive connections (default 64) */
  connections?: number;
  /** a request not answered within this many ms counts as a timeout (default 10,000) */
  timeoutMs?: number;
}

/** Latency figures, ms; NaN when there is no sample. */
export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/** What one open-loop run measured (the measured part only). */
export interface OpenLoopResult extends LatencySummary {
  /** requests scheduled in the measured part */
  scheduled: number;
  /** of those, answered 2xx */
  ok: number;
  /** answered with a status other than 2xx */
  non2xx: number;
  /** answered 2xx with a body the target's `check` refused (0 without a check) */
  invalid: number;
  /** connection or protocol errors */
  errors: number;
  /** not answered within `timeoutMs` */
  timeouts: number;
  /** requests answered (any status) per second of the measured part */
  achievedRate: number;
  /** how late the generator itself sent requests (send time − scheduled time), ms: p99 and max; large values mean the generator, not the server, was behind */
  sendLagP99: number;
  sendLagMax: number;
  /** the generator's CPU use over the run, fraction of one core */
  loadgenCpu: number;
  /** latencies of the 2xx answers of the measured part, ascending, ms */
  latencies: Float64Array;
  /** latency of each request of the measured part in scheduled order (request i due at i / rate s), ms; NaN when not answered 2xx */
  bySchedule: Float64Array;
}

/** Offset of request `i` from t0, ms, at `rate` requests per second. */
export function scheduledOffsetMs(i: number, rate: number): number {
  return (i * 1000) / rate;
}

/** How many requests are due at `elapsedMs` after t0 (request 0 is due at t0). */
export function dueCount(elapsedMs: number, rate: number): number {
  return elapsedMs < 0 ? 0 : Math.floor((elapsedMs * rate) / 1000 + 1e-9) + 1;
}

/**
 * The nearest-rank percentile of an ascending sample: the smallest value
 * with at least `q` of the sample at or below it (`q` in (0, 1]); NaN when
 * the sample is empty.
 */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  return sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!;
}

/** p50/p90/p99/p99.9/max of an ascending sample (see {@link percentile}). */
export function summarize(sorted: ArrayLike<number>): LatencySummary {
  return {
    count: sorted.length,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    p999: percentile(sorted, 0.999),
    max: sorted.length === 0 ? NaN : sorted[sorted.length - 1]!,
  };
}

/** How one request ended. */
type Outcome = "ok" | "non2xx" | "invalid" | "error" | "timeout";

/** A keep-alive client for `target`: at most `connections` sockets; each GET ends in exactly one {@link Outcome}. */
function keepAliveClient(target: OpenLoopTarget, connections: number) {
  const base = new URL(target.url);
  const secure = base.protocol === "https:";
  const agentOptions = { keepAlive: true, maxSockets: connections, scheduling: "fifo" as const };
  const agent = secure
    ? new https.Agent({ ...agentOptions, ...(target.tls ?? {}), ...(target.ca ? { ca: target.ca } : { rejectUnauthorized: false }) })
    : new http.Agent(agentOptions);
  const request = secure ? https.request : http.request;
  return {
    /**
     * GET `path`; `done` is called once, with the outcome and the time the
     * answer ended (performance.now()); a request unanswered `timeoutMs`
     * after `since` (a performance.now() time) times out.
     */
    get(path: string, since: number, timeoutMs: number, done: (outcome: Outcome, at: number) => void): void {
      let finished = false;
      const finish = (outcome: Outcome, at = performance.now()) => {
        if (finished) return;
        finished = true;
        done(outcome, at);
      };
      const req = request(
        { agent, host: base.hostname, port: base.port, path, method: "GET", headers: { accept: "application/json", ...target.headers } },
        (res) => {
          const chunks: Buffer[] | undefined = target.check ? [] : undefined;
          res.on("data", chunks ? (c: Buffer) => void chunks.push(c) : () => {});
          res.on("end", () => {
            const at = performance.now();
            if (!(res.statusCode! >= 200 && res.statusCode! < 300)) return finish("non2xx", at);
            finish(chunks && !target.check!(Buffer.concat(chunks)) ? "invalid" : "ok", at);
          });
          res.on("error", () => finish("error"));
        },
      );
      // From `since`, as the latency: a request stuck in the Agent's queue times out too.
      const timer = setTimeout(() => {
        finish("timeout");
        req.destroy();
      }, Math.max(1, since + timeoutMs - performance.now()));
      req.on("close", () => clearTimeout(timer));
      req.on("error", () => finish("error"));
      req.end();
    },
    close: () => agent.destroy(),
  };
}

/** Outcome counters of a run. */
interface Counts {
  ok: number;
  non2xx: number;
  invalid: number;
  errors: number;
  timeouts: number;
}

/** Count `outcome`; returns whether it was ok. */
function count(counts: Counts, outcome: Outcome): boolean {
  if (outcome === "ok") counts.ok++;
  else if (outcome === "non2xx") counts.non2xx++;
  else if (outcome === "invalid") counts.invalid++;
  else if (outcome === "error") counts.errors++;
  else counts.timeouts++;
  return outcome === "ok";
}

/**
 * Send `rate × (warmupSeconds + seconds)` GET requests to `target` at a fixed
 * rate (request i due at t0 + i / rate) and measure each from its scheduled
 * time; resolves when every request has been answered, failed or timed out.
 *
 * @throws Error on invalid options (a non-positive rate or duration)
 */
export async function openLoop(target: OpenLoopTarget, options: OpenLoopOptions): Promise<OpenLoopResult> {
  const { rate, seconds } = options;
  const warmup = options.warmupSeconds ?? 0;
  if (!(rate > 0) || !(seconds > 0) || !(warmup >= 0)) throw new Error(`openLoop: rate and seconds must be > 0, warmupSeconds ≥ 0 (got ${rate}, ${seconds}, ${warmup})`);
  const timeoutMs = options.timeoutMs ?? 10_000;
  const client = keepAliveClient(target, options.connections ?? 64);

  const firstMeasured = Math.round(rate * warmup);
  const total = firstMeasured + Math.round(rate * seconds);
  const measured = total - firstMeasured;
  const latencies = new Float64Array(measured);
  const sendLags = new Float64Array(measured);
  const bySchedule = new Float64Array(measured).fill(NaN);
  const counts: Counts = { ok: 0, non2xx: 0, invalid: 0, errors: 0, timeouts: 0 };
  let settled = 0;
  let allSettled!: () => void;
  const done = new Promise<void>((r) => (allSettled = r));

  const t0 = performance.now() + 5;
  const send = (i: number) => {
    const scheduled = t0 + scheduledOffsetMs(i, rate);
    const counted = i >= firstMeasured;
    if (counted) sendLags[i - firstMeasured] = performance.now() - scheduled;
    client.get(target.path(i), scheduled, timeoutMs, (outcome, ended) => {
      if (counted) {
        const at = counts.ok;
        if (count(counts, outcome)) latencies[at] = bySchedule[i - firstMeasured] = ended - scheduled;
      }
      if (++settled === total) allSettled();
    });
  };

  const cpu = process.cpuUsage();
  let i = 0;
  while (i < total) {
    const due = Math.min(total, dueCount(performance.now() - t0, rate));
    while (i < due) send(i++);
    if (i < total) {
      const wait = t0 + scheduledOffsetMs(i, rate) - performance.now();
      await new Promise((r) => setTimeout(r, Math.max(0, wait)));
    }
  }
  const sentAll = performance.now();
  await done;
  const used = process.cpuUsage(cpu);
  client.close();
  const measuredSeconds = (Math.max(sentAll, t0 + scheduledOffsetMs(total, rate)) - (t0 + scheduledOffsetMs(firstMeasured, rate))) / 1000;
  const sorted = latencies.subarray(0, counts.ok).sort();
  const lags = sendLags.sort();
  return {
    ...summarize(sorted),
    scheduled: measured,
    ...counts,
    achievedRate: (counts.ok + counts.non2xx + counts.invalid) / measuredSeconds,
    sendLagP99: percentile(lags, 0.99),
    sendLagMax: percentile(lags, 1),
    loadgenCpu: (used.user + used.system) / 1e6 / ((performance.now() - t0) / 1000),
    latencies: sorted,
    bySchedule,
  };
}

/**
 * Where the slow answers of an open-loop run fall in time: the requests
 * slower than `thresholdMs`, grouped into `windowMs` windows of their
 * scheduled send time. Few windows holding many slow answers mean stalls
 * (a pause every request due during it waited for); slow answers spread
 * over many windows mean queueing.
 *
 * @returns the number of slow answers, of distinct windows holding them,
 *   and the windows holding the most (start in seconds from the first
 *   measured request, count), most first
 */
export function slowWindows(bySchedule: Float64Array, rate: number, thresholdMs: number, windowMs = 100): { slow: number; windows: number; worst: [number, number][] } {
  const perWindow = new Map<number, number>();
  let slow = 0;
  for (let i = 0; i < bySchedule.length; i++) {
    if (!(bySchedule[i]! > thresholdMs)) continue;
    slow++;
    const w = Math.floor(scheduledOffsetMs(i, rate) / windowMs);
    perWindow.set(w, (perWindow.get(w) ?? 0) + 1);
  }
  const worst = [...perWindow].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([w, n]) => [(w * windowMs) / 1000, n] as [number, number]);
  return { slow, windows: perWindow.size, worst };
}

/** What a {@link closedLoop} run did. */
export interface ClosedLoopResult extends LatencySummary, Counts {
  requests: number;
  seconds: number;
}

/**
 * Send requests 0…requests-1 to `target`, `concurrency` at a time (each
 * worker sends its next request when the previous one ended): every request
 * is sent however slow the server is, so it suits a run that must complete
 * (a memory measurement), not a latency one. Latency runs from each send.
 */
export async function closedLoop(target: OpenLoopTarget, options: { requests: number; concurrency: number; timeoutMs?: number }): Promise<ClosedLoopResult> {
  const client = keepAliveClient(target, options.concurrency);
  const latencies = new Float64Array(options.requests);
  const counts: Counts = { ok: 0, non2xx: 0, invalid: 0, errors: 0, timeouts: 0 };
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < options.requests) {
      const path = target.path(next++);
      const sent = performance.now();
      const [outcome, ended] = await new Promise<[Outcome, number]>((resolve) => client.get(path, sent, options.timeoutMs ?? 30_000, (o, t) => resolve([o, t])));
      const at = counts.ok;
      if (count(counts, outcome)) latencies[at] = ended - sent;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, worker));
  client.close();
  return { ...summarize(latencies.subarray(0, counts.ok).sort()), ...counts, requests: options.requests, seconds: (performance.now() - started) / 1000 };
}
