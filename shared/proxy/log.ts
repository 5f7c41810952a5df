/**
 * Structured JSON-lines logging for the proxy: one object per line with
 * `time` (RFC 3339), `level`, `msg` and fields such as `requestId`, `user`,
 * `metric`, `backend`, `code`, `durationMs`. The request id is the one the
 * proxy forwards to the function (`X-Request-Id`), so both sides' lines join.
 */
import type { LogRecord } from "../app.ts";

export type { LogRecord };

/** A log sink. */
export type Logger = (record: LogRecord) => void;

/** Write JSON lines to stdout (info) and stderr (warn, error). */
export function jsonLogger(now: () => number = Date.now): Logger {
  return (record) => {
    const line = JSON.stringify({ time: new Date(now()).toISOString(), ...record });
    if (record.level === "info") process.stdout.write(`${line}\n`);
    else process.stderr.write(`${line}\n`);
  };
}
