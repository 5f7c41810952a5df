/**
 * The HPA controller's real arrival pattern, in simulated time, for
 * `npm run bench:backend-calls`.
 *
 * The controller (k8s.io/kubernetes `pkg/controller/podautoscaler/horizontal.go`)
 * runs `--concurrent-horizontal-pod-autoscaler-syncs` workers (default 5)
 * over one work queue. Each worker takes the next autoscaler due, reads its
 * metrics one after another — each read blocks the worker until answered —
 * and puts the autoscaler back with the queue's fixed-interval rate limiter:
 * due again `--horizontal-pod-autoscaler-sync-period` (15 s) after its sync
 * ended. At start every autoscaler is due at once.
 *
 * Simulated time ({@link VirtualTime}): the bridge, the providers and the
 * cache run on an injected clock; the backend's answer is delayed by a
 * simulated latency (SDK middleware, or a `fetch` wrapper, sleeping in virtual time after the real
 * request to the fake returned), the batcher's window runs in virtual time,
 * and the clock jumps to the next timer only when nothing is running in real
 * time ({@link runUntil}). A 10-minute run takes seconds.
 */
import type { Bridge } from "../../shared/bridge.ts";

/** A virtual clock with timers; `now` is ms since epoch. */
export class VirtualTime {
  now: number;
  /** bumped on every event, so the driver can tell when real-time work has stopped */
  progress = 0;
  #timers: { at: number; seq: number; run: () => void }[] = [];
  #seq = 0;

  constructor(start: number) {
    this.now = start;
  }

  /** Run `run` at virtual time `at` (ms since epoch). */
  at(at: number, run: () => void): void {
    this.progress++;
    const t = { at: Math.max(at, this.now), seq: this.#seq++, run };
    // binary insertion: ordered by (at, seq)
    let lo = 0;
    let hi = this.#timers.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const m = this.#timers[mid]!;
      if (m.at < t.at || (m.at === t.at && m.seq < t.seq)) lo = mid + 1;
      else hi = mid;
    }
    this.#timers.splice(lo, 0, t);
  }

  /** A promise resolved after `ms` of virtual time. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.at(this.now + ms, resolve));
  }

  /** A batcher `schedule` in virtual time. */
  readonly schedule = (run: () => void, ms: number): void => this.at(this.now + ms, run);

  /** Advance to the earliest timer and run every timer due then; false when none is left or the next is past `end`. */
  step(end: number): boolean {
    const first = this.#timers[0];
    if (first === undefined || first.at > end) return false;
    this.now = first.at;
    while (this.#timers.length > 0 && this.#timers[0]!.at === this.now) this.#timers.shift()!.run();
    return true;
  }
}

const turn = () => new Promise<void>((r) => setImmediate(r));

/**
 * Drive `vt` until `end`: before each jump, let real-time work (HTTP to the
 * fakes, promise chains) finish — `busy()` false and no progress over two
 * event-loop turns.
 */
export async function runUntil(vt: VirtualTime, end: number, busy: () => boolean): Promise<void> {
  for (;;) {
    let quiet = 0;
    while (quiet < 2) {
      const before = vt.progress;
      await turn();
      quiet = !busy() && vt.progress === before ? quiet + 1 : 0;
    }
    if (!vt.step(end)) return;
  }
}

/** Latency of one backend call in virtual ms: 50–100 ms, from a fixed-seed generator (same run, same figures). */
export function latencyModel(seed = 12345): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return 50 + (s / 2 ** 32) * 50;
  };
}

/** Counters of {@link latencyMiddleware} and {@link latencyFetch}: calls by name, real requests in flight, answers held in virtual time. */
export interface LatencyState {
  http: number;
  sleeping: number;
  commands: Map<string, number>;
}

/** Count `name`, run the real `call` (`state.http` while it runs), then hold its result for `latency()` virtual ms (`state.sleeping`). */
async function held<T>(vt: VirtualTime, latency: () => number, state: LatencyState, name: string, call: () => Promise<T>): Promise<T> {
  state.commands.set(name, (state.commands.get(name) ?? 0) + 1);
  state.http++;
  vt.progress++;
  let out: T;
  try {
    out = await call();
  } finally {
    state.http--;
    vt.progress++;
  }
  state.sleeping++;
  await vt.sleep(latency());
  state.sleeping--;
  return out;
}

/**
 * An SDK v3 middleware (`initialize` step: around the whole send) that
 * counts the command, lets the real request reach the fake, then holds the
 * answer for the simulated latency. `state.http` counts real requests in
 * flight, `state.sleeping` answers held in virtual time.
 */
export function latencyMiddleware(vt: VirtualTime, latency: () => number, state: LatencyState) {
  return (next: (args: any) => Promise<any>, context: { commandName?: string }) => async (args: any) => held(vt, latency, state, context.commandName ?? "?", () => next(args));
}

/**
 * The same for providers that call `fetch` (prometheus): a `fetch` that
 * counts the request (as `fetch`), sends it with `inner` and reads the whole
 * body while `state.http` is up, then holds the answer for the simulated
 * latency. The caller installs it as `globalThis.fetch` and restores `inner`.
 */
export function latencyFetch(vt: VirtualTime, latency: () => number, state: LatencyState, inner: typeof fetch): typeof fetch {
  return (input, init) =>
    held(vt, latency, state, "fetch", async () => {
      const res = await inner(input, init);
      const body = await res.arrayBuffer();
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    });
}

/** What one simulated run of the controller's workers saw. */
export interface WorkersResult {
  reads: number;
  failures: number;
  /** reads after the warm-up minute */
  steadyReads: number;
  /** mean time a worker was blocked by one read, virtual ms */
  meanReadMs: number;
  /** longest an autoscaler waited past its due time, virtual ms (the workers keeping up) */
  maxLagMs: number;
}

/**
 * Simulate `workers` sync workers over `hpas` autoscalers for `minutes`:
 * autoscaler h reads `url(h)` once per sync. `onSteady` is called once when
 * the warm-up minute ends (to snapshot backend counters).
 */
export async function simulateWorkers(options: {
  bridge: Bridge;
  vt: VirtualTime;
  hpas: number;
  workers: number;
  minutes: number;
  syncPeriodMs: number;
  url: (h: number) => string;
  busy: () => boolean;
  onSteady: () => void;
}): Promise<WorkersResult> {
  const { bridge, vt } = options;
  const start = vt.now;
  const end = start + options.minutes * 60_000;
  const warm = start + 60_000;
  // the work queue: autoscalers ordered by due time (all due at start)
  const queue: { at: number; h: number }[] = Array.from({ length: options.hpas }, (_, h) => ({ at: start, h }));
  const push = (item: { at: number; h: number }) => {
    let lo = 0;
    let hi = queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (queue[mid]!.at <= item.at) lo = mid + 1;
      else hi = mid;
    }
    queue.splice(lo, 0, item);
  };
  const result: WorkersResult = { reads: 0, failures: 0, steadyReads: 0, meanReadMs: 0, maxLagMs: 0 };
  let blocked = 0;
  let steady = false;
  vt.at(warm, () => {
    steady = true;
    options.onSteady();
  });
  const worker = async () => {
    for (;;) {
      const next = queue.shift();
      if (next === undefined || next.at >= end) return;
      if (next.at > vt.now) await new Promise<void>((r) => vt.at(next.at, r));
      result.maxLagMs = Math.max(result.maxLagMs, vt.now - next.at);
      const t0 = vt.now;
      const res = await bridge.app.request(options.url(next.h));
      vt.progress++;
      blocked += vt.now - t0;
      result.reads++;
      if (steady) result.steadyReads++;
      if (res.status !== 200) result.failures++;
      push({ at: vt.now + options.syncPeriodMs, h: next.h });
    }
  };
  const running = Array.from({ length: options.workers }, () => worker());
  await runUntil(vt, end, options.busy);
  // reads still blocked at the end finish; then every worker finds the queue empty
  queue.length = 0;
  await runUntil(vt, Number.POSITIVE_INFINITY, options.busy);
  await Promise.all(running);
  result.meanReadMs = blocked / Math.max(1, result.reads);
  return result;
}
