/**
 * Structured JSON-lines logging for the proxy: one object per line with
 * `time` (RFC 3339), `level`, `msg` and fields such as `requestId`, `user`,
 * `metric`, `backend`, `code`, `durationMs`. The request id is the one the
 * proxy forwards to the function (`X-Request-Id`), so both sides' lines join.
 */
import { writeSync } from "node:fs";
import type { LogRecord } from "../app.ts";

export type { LogRecord };

/** A log sink. */
export type Logger = (record: LogRecord) => void;

/** Most bytes of log lines held before they are written at once (a burst does not grow memory past it). */
export const MAX_PENDING_LOG_BYTES = 256 * 1024;

/**
 * Write JSON lines to stdout (info) and stderr (warn, error).
 *
 * Lines are written once per turn of the event loop (`setImmediate`), all
 * lines of that turn in one `write` per stream, instead of one write — one
 * system call, stdout and stderr being synchronous for files and pipes on
 * Linux — per request. Order within a stream is kept; lines pending past
 * {@link MAX_PENDING_LOG_BYTES} are written at once; pending lines are
 * written synchronously when the process exits (`process.exit`, an uncaught
 * exception), so none is lost except on SIGKILL.
 */
export function jsonLogger(now: () => number = Date.now): Logger {
  const pending = { out: "", err: "" };
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.out !== "") {
      process.stdout.write(pending.out);
      pending.out = "";
    }
    if (pending.err !== "") {
      process.stderr.write(pending.err);
      pending.err = "";
    }
  };
  process.once("exit", () => {
    for (const [fd, key] of [[1, "out"], [2, "err"]] as const) {
      if (pending[key] === "") continue;
      try {
        writeSync(fd, pending[key]);
      } catch {
        // the stream is gone: nothing else to do at exit
      }
      pending[key] = "";
    }
  });
  return (record) => {
    const line = `${JSON.stringify({ time: new Date(now()).toISOString(), ...record })}\n`;
    if (record.level === "info") pending.out += line;
    else pending.err += line;
    if (pending.out.length + pending.err.length > MAX_PENDING_LOG_BYTES) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
}
