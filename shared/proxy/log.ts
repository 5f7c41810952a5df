/**
 * Structured JSON-lines logging for the proxy: the shared logger
 * (`../observability/log.ts`: levels, redaction) with one object per line —
 * `time` (RFC 3339), `level`, `msg` and fields such as `requestId`, `user`,
 * `metric`, `backend`, `code`, `durationMs`. The request id is the one the
 * proxy forwards to the function (`X-Request-Id`), so both sides' lines join.
 */
import type { LogRecord } from "../observability/log.ts";
import { createLogger, MAX_PENDING_LOG_CHARS, type Level } from "../observability/log.ts";
import { processSink } from "../observability/node-sink.ts";

export type { LogRecord };

/** A log sink. */
export type Logger = (record: LogRecord) => void;

/** Most bytes of log lines held before they are written at once (a burst does not grow memory past it). */
export const MAX_PENDING_LOG_BYTES = MAX_PENDING_LOG_CHARS;

/**
 * Write JSON lines at `level` and above (default info; `LOG_LEVEL` or
 * `--log-level`) to stdout (debug, info) and stderr (warn, error).
 *
 * Lines are written once per turn of the event loop (`setImmediate`), all
 * lines of that turn in one `write` per stream, instead of one write — one
 * system call, stdout and stderr being synchronous for files and pipes on
 * Linux — per request. Order within a stream is kept; lines pending past
 * {@link MAX_PENDING_LOG_BYTES} are written at once; pending lines are
 * written synchronously when the process exits (`process.exit`, an uncaught
 * exception), so none is lost except on SIGKILL.
 */
export function jsonLogger(now: () => number = Date.now, level: Level = "info"): Logger {
  return createLogger({ level, now, sink: processSink(true) });
}
