/**
 * shared/deadline.ts: `disposableCallSignal` has `callSignal`'s semantics
 * (the caller's abort reason, or a TimeoutError after the limit) and leaves
 * nothing behind once disposed — no pending timer, no listener on the
 * caller's signal — where `callSignal`'s `AbortSignal.timeout` keeps a timer
 * for its whole delay.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { disposableCallSignal } from "../shared/deadline.ts";

afterEach(() => {
  vi.useRealTimers();
});

describe("disposableCallSignal", () => {
  it("aborts with a TimeoutError after the limit", () => {
    vi.useFakeTimers();
    const call = disposableCallSignal(undefined, 4000);
    vi.advanceTimersByTime(3999);
    expect(call.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(call.signal.aborted).toBe(true);
    expect((call.signal.reason as DOMException).name).toBe("TimeoutError");
  });

  it("aborts with the caller's reason when the caller's signal aborts first, and at once when it already has", () => {
    vi.useFakeTimers();
    const caller = new AbortController();
    const call = disposableCallSignal(caller.signal, 4000);
    const reason = new Error("nobody waits");
    caller.abort(reason);
    expect(call.signal.aborted).toBe(true);
    expect(call.signal.reason).toBe(reason);
    const late = disposableCallSignal(caller.signal, 4000);
    expect(late.signal.reason).toBe(reason);
    expect(vi.getTimerCount()).toBe(1); // only the first call's timer, not yet disposed
    call.dispose();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("once disposed, leaves no timer and no listener: a later abort of the caller does not reach it", () => {
    vi.useFakeTimers();
    const caller = new AbortController();
    const add = vi.spyOn(caller.signal, "addEventListener");
    const remove = vi.spyOn(caller.signal, "removeEventListener");
    const call = disposableCallSignal(caller.signal, 4000);
    expect(vi.getTimerCount()).toBe(1);
    call.dispose();
    call.dispose(); // idempotent
    expect(vi.getTimerCount()).toBe(0);
    expect(remove).toHaveBeenCalledWith("abort", add.mock.calls[0]![1]);
    caller.abort(new Error("after the call"));
    vi.advanceTimersByTime(10_000);
    expect(call.signal.aborted).toBe(false);
  });
});
