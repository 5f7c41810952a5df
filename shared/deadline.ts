/**
 * The bridge's time budget for one HPA read, and the helpers that carry it
 * to every outbound call.
 *
 * The budget agreed between the bridge and the in-cluster proxy (issue 10,
 * item 5; docs/proxy.md): backend call ≤ bridge deadline (3 s) < proxy →
 * bridge timeout (4 s by default, at most 4.5 s) < kube-aggregator's 5 s
 * (kube-aggregator `pkg/apiserver/handler_proxy.go`, and the discovery
 * availability check in `remote_available_controller.go`).
 *
 * - The app (`shared/app.ts`) gives every provider read an `AbortSignal`
 *   ({@link QueryRequest.signal}) that aborts at {@link REQUEST_DEADLINE_MS}
 *   or when the client goes away.
 * - Coalesced loads (`shared/cache/coalescing.ts`) get {@link BACKEND_LOAD_TIMEOUT_MS}
 *   as `loadTimeoutMs` and each caller's signal, so a load ends at the
 *   deadline and is cancelled as soon as nobody waits for it.
 * - Each backend call is bounded by the provider's `timeoutSeconds` AND the
 *   load's signal ({@link callSignal}, {@link withCallSignal}): the per-call
 *   limit never extends a call past the request deadline.
 *
 * Runtime-agnostic: `AbortController`, `setTimeout` and `DOMException`
 * exist on Node, workerd and Lambda's Node runtimes.
 *
 * @see ./providers/types.ts QueryRequest
 */

/** Whole-request deadline of the bridge, ms: under the proxy's backend timeout (4 s) and the aggregator's 5 s. */
export const REQUEST_DEADLINE_MS = 3000;

/**
 * Longest a coalesced backend load may run, ms (`CoalescingCache`
 * `loadTimeoutMs` of every provider cache): no longer than the request
 * deadline, so a load nobody can still use never keeps a backend call open.
 */
export const BACKEND_LOAD_TIMEOUT_MS = REQUEST_DEADLINE_MS;

/**
 * The signal of one outbound call: aborts with `signal`'s reason when it
 * aborts (deadline, client gone, nobody waits) or with a `TimeoutError`
 * DOMException after `timeoutMs` (the provider's per-call `timeoutSeconds`,
 * the proxy's 2 s TokenReview/SubjectAccessReview deadline, the proxy's
 * in-process backend timeout), whichever comes first: the per-call limit can
 * shorten a call, never extend it past `signal`. Made of one
 * `AbortController` and a timer that `dispose()` clears, leaving no listener
 * on `signal`, so nothing of the call outlives it. (`AbortSignal.any` +
 * `AbortSignal.timeout` did the same, but the timer lived for its whole
 * delay whatever became of the call, and with it what the signals
 * referenced: at 1,000 reads a second through the proxy's in-process bridge
 * (4 s deadline) that was ~2.5 MB promoted to V8's old space per scavenge
 * and a mark-compact every 2–3 s, `--trace-gc` in `npm run bench:latency`.)
 * Prefer {@link withCallSignal}, which disposes for you.
 *
 * @param signal the load's or request's signal; undefined: the per-call
 *   limit alone (a call made on nobody's behalf still has a deadline)
 * @param timeoutMs per-call limit, ms (> 0)
 * @returns the call's signal and `dispose()` (idempotent), to call when the call settles
 */
export function callSignal(signal: AbortSignal | undefined, timeoutMs: number): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  if (signal?.aborted) {
    controller.abort(signal.reason);
    return { signal: controller.signal, dispose: () => {} };
  }
  const onAbort = () => controller.abort(signal!.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")), timeoutMs);
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}

/**
 * Run `call` with its {@link callSignal} and release that signal (its timer,
 * its listener on `signal`) as soon as the call settles.
 *
 * @param signal the load's or request's signal; undefined: the per-call limit alone
 * @param timeoutMs per-call limit, ms (> 0)
 * @throws whatever `call` rejects with (a `TimeoutError` DOMException or
 *   `signal`'s reason when the call honours its signal and it aborts)
 */
export async function withCallSignal<T>(signal: AbortSignal | undefined, timeoutMs: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const bound = callSignal(signal, timeoutMs);
  try {
    return await call(bound.signal);
  } finally {
    bound.dispose();
  }
}

/**
 * Run `task(signal)` and settle as it does, or reject with `signal.reason`
 * as soon as `signal` aborts, even when the task ignores its signal (at once
 * when it has already aborted: the task is then not started). The abort
 * listener is removed when the race settles.
 *
 * @throws whatever `task` rejects with; `signal.reason` when it aborts first
 */
export async function untilAborted<T>(task: (signal: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) throw signal.reason;
  const aborted = abortedPromise(signal);
  try {
    return await Promise.race([task(signal), aborted.promise]);
  } finally {
    aborted.dispose();
  }
}

/**
 * A promise that rejects with `signal.reason` when `signal` aborts (at once
 * when it already has). For racing work that does not take a signal itself.
 * The listener is removed by `dispose()`.
 */
export function abortedPromise(signal: AbortSignal): { promise: Promise<never>; dispose: () => void } {
  let onAbort: (() => void) | undefined;
  const promise = new Promise<never>((_, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  promise.catch(() => {});
  return { promise, dispose: () => onAbort && signal.removeEventListener("abort", onAbort) };
}
