/**
 * The one structured logger of the bridge (Node server, Worker, Lambda) and
 * the proxy: JSON lines — one object per line, `time` first (RFC 3339),
 * then `level`, `msg` and the record's fields — with
 *
 * - levels `debug` < `info` < `warn` < `error`, chosen by `LOG_LEVEL`
 *   (every runtime) or `--log-level` (the Node server and the proxy);
 *   default `info`. Readiness/liveness probe answers are `debug`.
 * - redaction: a field whose name says it holds a secret
 *   ({@link SECRET_FIELD}: authorization, signature, token, password,
 *   secret, credentials, private/access/session keys) is written as
 *   `"[REDACTED]"` at any depth, and bearer tokens, signatures and AWS
 *   secret-looking values inside error texts are cut ({@link redactText}).
 *   The bridge never puts a signature or credential in a record on purpose;
 *   this is the net under it.
 * - sinks per runtime: {@link batchedLines} (Node: one write per event-loop
 *   turn, the issue 11 P1 saving), `console` (Workers Logs, CloudWatch Logs).
 *
 * No dependency: the same code runs in workerd (no `node:` modules here) and
 * adds ~1 KiB to the Worker bundle, where pino's browser build adds ~5 KiB
 * gzip and drops redaction (docs/deploy.md "Logs").
 */

/** Log levels, lowest first. */
export const LEVELS = ["debug", "info", "warn", "error"] as const;
/** One log level. */
export type Level = (typeof LEVELS)[number];

/**
 * One structured log record: a JSON line of the bridge, the proxy and the
 * CLI (the one record type; shared/app.ts re-exports it for its callers).
 */
export type LogRecord = Record<string, unknown> & { level: Level; msg: string };

/** The environment variable naming the lowest level written. */
export const LOG_LEVEL_ENV = "LOG_LEVEL";

const RANK: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/**
 * The level named by `text` (case-insensitive; `warning` is `warn`),
 * default `info` when absent or empty.
 *
 * @throws Error naming the accepted values when `text` is not a level
 */
export function parseLevel(text: string | undefined): Level {
  if (text === undefined || text.trim() === "") return "info";
  const lower = text.trim().toLowerCase();
  const level = lower === "warning" ? "warn" : lower;
  if ((LEVELS as readonly string[]).includes(level)) return level as Level;
  throw new Error(`invalid log level ${JSON.stringify(text)}: use one of ${LEVELS.join(", ")}`);
}

/**
 * Field names whose values are never written (case-insensitive): request
 * signatures, bearer tokens, passwords, client secrets, credentials, AWS
 * access/secret/session keys, private keys, cookies.
 */
export const SECRET_FIELD =
  /^(authorization|proxy-authorization|cookie|set-cookie|signature|x-emb-signature|token|bearer|access_?token|id_?token|refresh_?token|password|passwd|secret|client_?secret|credentials?|private_?key|accesskeyid|secretaccesskey|sessiontoken|aws_?secret_?access_?key|aws_?session_?token|signing_?keys?|bridge_signing_keys)$/i;

/** {@link SECRET_FIELD} verdicts by field name: records reuse a few names, so the pattern runs once per name (at most 1,024 remembered). */
const secretFields = new Map<string, boolean>();

function isSecretField(key: string): boolean {
  let secret = secretFields.get(key);
  if (secret === undefined) {
    secret = SECRET_FIELD.test(key);
    if (secretFields.size >= 1024) secretFields.clear();
    secretFields.set(key, secret);
  }
  return secret;
}

/** What a redacted value is written as. */
export const REDACTED = "[REDACTED]";

const TEXT_SECRETS: [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi, `$1 ${REDACTED}`],
  [/\b(Signature|signature|sig)=[A-Za-z0-9+/_=-]{8,}/g, `$1=${REDACTED}`],
  // AWS secret access keys (40 characters of base64) and session tokens after their names
  [/\b(aws_secret_access_key|SecretAccessKey|aws_session_token|SessionToken|X-Amz-Security-Token)(["'\s:=]+)[A-Za-z0-9+/=]{16,}/gi, `$1$2${REDACTED}`],
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g, REDACTED],
];

/** `text` with bearer/basic credentials, signatures, AWS secrets and PEM private keys replaced by {@link REDACTED}. */
export function redactText(text: string): string {
  let out = text;
  for (const [pattern, replacement] of TEXT_SECRETS) out = out.replace(pattern, replacement);
  return out;
}

/**
 * `value` with every field named like a secret ({@link SECRET_FIELD})
 * replaced at any depth and every string field named `error`/`message`
 * passed through {@link redactText}. Returns `value` itself (no copy) when
 * nothing needed redacting — the common case costs one key test per field.
 */
export function redact<T>(value: T, depth = 0): T {
  if (value === null || typeof value !== "object" || depth > 6) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item = redact(value[i], depth + 1);
      if (item !== value[i]) (copy ??= [...value])[i] = item;
    }
    return (copy ?? value) as T;
  }
  let copy: Record<string, unknown> | undefined;
  for (const key in value as Record<string, unknown>) {
    const field = (value as Record<string, unknown>)[key];
    let next: unknown = field;
    if (isSecretField(key)) next = REDACTED;
    else if (typeof field === "string") {
      if (key === "error" || key === "message" || key === "reason") next = redactText(field);
    } else if (typeof field === "object" && field !== null) next = redact(field, depth + 1);
    if (next !== field) (copy ??= { ...(value as Record<string, unknown>) })[key] = next;
  }
  return (copy ?? value) as T;
}

let lastMs = Number.NaN;
let lastTime = "";

/**
 * One JSON line, `time` first: `JSON.stringify({ time, ...record }) + "\n"`,
 * the time's text made once per millisecond and the record not copied.
 *
 * @param ms the record's time, ms since the epoch
 */
export function jsonLine(ms: number, record: Record<string, unknown>): string {
  if (ms !== lastMs) {
    lastMs = ms;
    lastTime = JSON.stringify(new Date(ms).toISOString());
  }
  const text = JSON.stringify(record);
  if ("time" in record || text === "{}") return `${JSON.stringify({ time: JSON.parse(lastTime) as string, ...record })}\n`;
  return `{"time":${lastTime},${text.slice(1)}\n`;
}

/** Where formatted lines go: `line` ends with `\n`; `level` lets a sink pick a stream. */
export type LineSink = (line: string, level: Level) => void;

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** lowest level written (default `info`) */
  level?: Level;
  /** where lines go (default {@link consoleSink}) */
  sink?: LineSink;
  /** clock, ms since the epoch, for `time` */
  now?: () => number;
}

/** A logger: call it with a record; `enabled(level)` says whether a record of that level would be written (to skip building one). */
export interface Logger {
  (record: LogRecord): void;
  enabled(level: Level): boolean;
  readonly level: Level;
}

/**
 * A logger writing {@link redact}ed records below `level` nowhere and the
 * rest as {@link jsonLine}s to `sink`.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? "info";
  const min = RANK[level];
  const sink = options.sink ?? consoleSink;
  const now = options.now ?? Date.now;
  const logger = ((record: LogRecord) => {
    if ((RANK[record.level] ?? 1) < min) return;
    sink(jsonLine(now(), redact(record)), record.level);
  }) as Logger;
  logger.enabled = (l: Level) => RANK[l] >= min;
  (logger as { level: Level }).level = level;
  return logger;
}

/** A sink writing info/debug lines with `console.log` and warn/error with `console.error` (Workers Logs, Lambda's CloudWatch Logs). */
export const consoleSink: LineSink = (line, level) => {
  const text = line.endsWith("\n") ? line.slice(0, -1) : line;
  if (level === "warn" || level === "error") console.error(text);
  else console.log(text);
};

/** Most characters of log lines held before they are written at once (a burst does not grow memory past it). */
export const MAX_PENDING_LOG_CHARS = 256 * 1024;

/** A writable stream as {@link batchedLines} needs it (Node's `process.stdout`/`stderr`). */
export interface LineStream {
  write(text: string): unknown;
}

/**
 * A sink that holds lines and writes each stream's lines of one event-loop
 * turn (`setImmediate`) with one `write` — one system call for a file or
 * pipe on Linux — instead of one per line (issue 11 P1). Order within a
 * stream is kept; past {@link MAX_PENDING_LOG_CHARS} pending characters
 * lines are written at once; `flush(write)` writes what is pending now,
 * through `write` when given (e.g. `writeSync` at process exit). Node only
 * (setImmediate).
 *
 * @param streamOf the stream of a level (e.g. all to stdout, or warn/error to stderr)
 */
export function batchedLines<S extends LineStream>(streamOf: (level: Level) => S): LineSink & { flush(write?: (stream: S, text: string) => void): void } {
  const pending = new Map<S, string>();
  let total = 0;
  let scheduled = false;
  const flush = (write?: (stream: S, text: string) => void) => {
    scheduled = false;
    total = 0;
    for (const [stream, text] of pending) {
      pending.delete(stream);
      if (text === "") continue;
      if (write !== undefined) write(stream, text);
      else stream.write(text);
    }
  };
  const sink = ((line: string, level: Level) => {
    const stream = streamOf(level);
    pending.set(stream, (pending.get(stream) ?? "") + line);
    total += line.length;
    if (total > MAX_PENDING_LOG_CHARS) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(() => flush());
    }
  }) as LineSink & { flush(write?: (stream: S, text: string) => void): void };
  sink.flush = flush;
  return sink;
}
