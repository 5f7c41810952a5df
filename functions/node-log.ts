/**
 * The Node server's log: the shared logger (`shared/observability/log.ts`:
 * levels, redaction, JSON lines with `time` first) writing every line on
 * stdout, all lines of one event-loop turn in one write
 * (`shared/observability/node-sink.ts`; issue 11 P1: about a seventh of a
 * cached read's CPU was one `console.log` per request), flushed
 * synchronously at process exit.
 */
import type { LogRecord } from "../shared/observability/log.ts";
import { createLogger, MAX_PENDING_LOG_CHARS, type Level } from "../shared/observability/log.ts";
import { processSink } from "../shared/observability/node-sink.ts";

export { MAX_PENDING_LOG_CHARS };

/**
 * A log sink writing JSON lines at `level` and above to `process.stdout`,
 * batched per event-loop turn.
 *
 * @param now clock, ms since the epoch, for the `time` field
 * @param level lowest level written (default info; `LOG_LEVEL`/`--log-level` in `functions/node.ts`)
 */
export function batchedJsonLog(now: () => number = Date.now, level: Level = "info"): (record: LogRecord) => void {
  return createLogger({ level, now, sink: processSink(false) });
}
