/**
 * Node's sink for the shared logger (`./log.ts`): JSON lines batched per
 * event-loop turn ({@link batchedLines}), one buffer per process, written
 * synchronously (`writeSync`) when the process exits (`process.exit`, an
 * uncaught exception), so no line is lost but on SIGKILL. Used by the
 * bridge's Node server (`functions/node-log.ts`: every line on stdout) and
 * the proxy (`shared/proxy/log.ts`: warn and error on stderr). Node only.
 */
import { writeSync } from "node:fs";
import { batchedLines, type LineSink } from "./log.ts";

/** stdout or stderr, looked up at write time (tests replace `process.stdout.write`). */
interface Stream {
  fd: 1 | 2;
  write(text: string): void;
}

const STDOUT: Stream = { fd: 1, write: (text) => void process.stdout.write(text) };
const STDERR: Stream = { fd: 2, write: (text) => void process.stderr.write(text) };

let batched: ReturnType<typeof batchedLines<Stream>> | undefined;
let split: LineSink | undefined;
let single: LineSink | undefined;

function shared(): ReturnType<typeof batchedLines<Stream>> {
  if (batched === undefined) {
    // the level picks the stream through the wrappers below: "error" stands for stderr here
    const sink = batchedLines<Stream>((level) => (level === "error" ? STDERR : STDOUT));
    batched = sink;
    process.once("exit", () =>
      sink.flush((stream, text) => {
        try {
          writeSync(stream.fd, text);
        } catch {
          // the stream is gone: nothing else to do at exit
        }
      }),
    );
  }
  return batched;
}

/**
 * The process's batched sink. `splitStreams`: warn and error lines on
 * stderr, the rest on stdout (the proxy); else every line on stdout (the
 * bridge's request log, as before). Lines keep their order within a stream.
 */
export function processSink(splitStreams: boolean): LineSink {
  if (splitStreams) {
    return (split ??= (line, level) => shared()(line, level === "warn" || level === "error" ? "error" : "info"));
  }
  return (single ??= (line) => shared()(line, "info"));
}
