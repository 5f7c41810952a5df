/**
 * The Node server's request log sink: the same JSON lines the app writes by
 * default (`shared/app.ts`: one object per line, `time` first as RFC 3339,
 * then the record), all on stdout, written once per turn of the event loop
 * instead of one `console.log` — one synchronous `write(2)` for a file or
 * pipe on Linux — per request (issue 11 P1: about a seventh of a cached
 * read's CPU was that write).
 */
import { writeSync } from "node:fs";
import type { LogRecord } from "../shared/app.ts";

/** Most characters of log lines held before they are written at once (a burst does not grow memory past it). */
export const MAX_PENDING_LOG_CHARS = 256 * 1024;

/**
 * A log sink writing JSON lines to `process.stdout`, batched per event-loop
 * turn (`setImmediate`). Order is kept; lines pending past
 * {@link MAX_PENDING_LOG_CHARS} are written at once; pending lines are
 * written synchronously (`writeSync(1)`) when the process exits
 * (`process.exit`, e.g. on SIGTERM in `exitOnSignals`), so none is lost but
 * on SIGKILL.
 *
 * @param now clock, ms since the epoch, for the `time` field
 */
export function batchedJsonLog(now: () => number = Date.now): (record: LogRecord) => void {
  return (record) => {
    if (!exitHooked) {
      exitHooked = true;
      process.once("exit", flushAtExit);
    }
    pending += line(now(), record);
    if (pending.length > MAX_PENDING_LOG_CHARS) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
}

let lastMs = Number.NaN;
let lastTime = "";

/**
 * `JSON.stringify({ time, ...record }) + "\n"` — the same text — without
 * copying the record, and with the time's text made once per millisecond.
 */
function line(ms: number, record: LogRecord): string {
  if (ms !== lastMs) {
    lastMs = ms;
    lastTime = JSON.stringify(new Date(ms).toISOString());
  }
  const text = JSON.stringify(record);
  if ("time" in record || text === "{}") return `${JSON.stringify({ time: JSON.parse(lastTime) as string, ...record })}\n`;
  return `{"time":${lastTime},${text.slice(1)}\n`;
}

// One buffer for every sink of the process (they all write to stdout, in order) and one exit hook.
let pending = "";
let scheduled = false;
let exitHooked = false;

function flush(): void {
  scheduled = false;
  if (pending === "") return;
  const text = pending;
  pending = "";
  process.stdout.write(text);
}

function flushAtExit(): void {
  if (pending === "") return;
  try {
    writeSync(1, pending);
  } catch {
    // stdout is gone: nothing else to do at exit
  }
  pending = "";
}
