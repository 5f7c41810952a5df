/**
 * shared/deadline.ts: `callSignal` aborts with the caller's reason, or a
 * TimeoutError after the limit, and leaves nothing behind once disposed —
 * no pending timer, no listener on the caller's signal (where
 * `AbortSignal.timeout` keeps a timer for its whole delay); `withCallSignal`
 * disposes it when the call settles, resolved or rejected.
 */
import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it, vi } from "vitest";
import { callSignal, withCallSignal } from "../../shared/deadline.ts";

afterEach(() => {
  vi.useRealTimers();
});

describe("callSignal", () => {
  it("aborts with a TimeoutError after the limit", () => {
    vi.useFakeTimers();
    const call = callSignal(undefined, 4000);
    vi.advanceTimersByTime(3999);
    expect(call.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(call.signal.aborted).toBe(true);
    expect((call.signal.reason as DOMException).name).toBe("TimeoutError");
  });

  it("aborts with the caller's reason when the caller's signal aborts first, and at once when it already has", () => {
    vi.useFakeTimers();
    const caller = new AbortController();
    const call = callSignal(caller.signal, 4000);
    const reason = new Error("nobody waits");
    caller.abort(reason);
    expect(call.signal.aborted).toBe(true);
    expect(call.signal.reason).toBe(reason);
    const late = callSignal(caller.signal, 4000);
    expect(late.signal.reason).toBe(reason);
    expect(vi.getTimerCount()).toBe(1); // only the first call's timer, not yet disposed
    call.dispose();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("once disposed, leaves no timer and no listener: a later abort of the caller does not reach it", () => {
    vi.useFakeTimers();
    const caller = new AbortController();
    const call = callSignal(caller.signal, 4000);
    expect(vi.getTimerCount()).toBe(1);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
    call.dispose();
    call.dispose(); // idempotent
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    caller.abort(new Error("after the call"));
    vi.advanceTimersByTime(10_000);
    expect(call.signal.aborted).toBe(false);
  });
});

describe("withCallSignal", () => {
  it("hands the call its signal and releases it when the call settles, resolved or rejected", async () => {
    vi.useFakeTimers();
    const caller = new AbortController();
    let seen: AbortSignal | undefined;
    const value = await withCallSignal(caller.signal, 4000, async (signal) => {
      seen = signal;
      expect(vi.getTimerCount()).toBe(1);
      return 7;
    });
    expect(value).toBe(7);
    expect(vi.getTimerCount()).toBe(0);
    await expect(withCallSignal(undefined, 4000, async () => Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    expect(vi.getTimerCount()).toBe(0);
    caller.abort(new Error("later"));
    expect(seen!.aborted).toBe(false);
  });

  it("aborts the call's signal at the limit while it runs", async () => {
    vi.useFakeTimers();
    const pending = withCallSignal(undefined, 4000, (signal) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))));
    const outcome = expect(pending).rejects.toMatchObject({ name: "TimeoutError" });
    vi.advanceTimersByTime(4000);
    await outcome;
    expect(vi.getTimerCount()).toBe(0);
  });
});
