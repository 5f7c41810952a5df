/**
 * What the npm-script entry points (`npm start`, `npm run serve|queue`,
 * `npm run build:lambda`) share: argument parsing with commander (as the
 * admin CLI, `functions/cli.ts`), file arguments resolved against the
 * caller's directory, and a one-line message instead of a stack trace when
 * a port is taken.
 *
 * commander is imported by the callers inside their `main()` only
 * (`await import("commander")`), so modules that import these entry points
 * as libraries (tests, the demo, the Node bundle's start path) do not load it.
 */
import { isAbsolute, resolve } from "node:path";
import type { Command } from "commander";

/**
 * Parse `argv` with `program`; `--help` prints the help and exits 0, a
 * usage error (unknown option, missing value) prints commander's message
 * and the help hint and exits 2, as the admin CLI does.
 *
 * @param argv process-style argv (`[node, script, ...args]`), default `process.argv`
 */
export function parseOrExit(program: Command, argv: readonly string[] = process.argv): void {
  program.exitOverride().showHelpAfterError("(add --help for the options)");
  try {
    program.parse([...argv]);
  } catch (err) {
    const code = (err as { code?: string; exitCode?: number }).code;
    if (code === "commander.helpDisplayed" || code === "commander.help" || code === "commander.version") process.exit(0);
    if (typeof code === "string" && code.startsWith("commander.")) process.exit(2);
    throw err;
  }
}

/**
 * A file argument as the user meant it: an npm script runs in the package
 * root, not where `npm run` was typed, so a relative path is resolved
 * against `INIT_CWD` (the directory npm was started in; npm sets it for
 * every script, https://docs.npmjs.com/cli/v11/using-npm/scripts#current-working-directory)
 * when the process runs under an npm script (`npm_lifecycle_event` set),
 * else against the process's working directory.
 */
export function callerPath(path: string, env: NodeJS.ProcessEnv = process.env): string {
  if (isAbsolute(path)) return path;
  const base = env["npm_lifecycle_event"] !== undefined && env["INIT_CWD"] ? env["INIT_CWD"] : process.cwd();
  return resolve(base, path);
}

/**
 * The one-line message for a listen that failed because the port is taken
 * (`EADDRINUSE`) or not allowed (`EACCES`), naming the port and the setting
 * that moves it; undefined for any other error.
 *
 * @param what what was listening, e.g. `the bridge`
 * @param setting how to pick another port, e.g. `PORT=8081 npm start`
 */
export function listenFailure(err: unknown, port: number, what: string, setting: string): string | undefined {
  const code = (err as { code?: string } | undefined)?.code;
  if (code === "EADDRINUSE") return `port ${port} is already in use, so ${what} cannot listen on it: pick another port, e.g. ${setting}`;
  if (code === "EACCES") return `port ${port} is not allowed for this user, so ${what} cannot listen on it: pick another port, e.g. ${setting}`;
  return undefined;
}

/**
 * A commander argument parser for a TCP port (0 picks a free one).
 *
 * @param InvalidArgumentError commander's class (passed in, see the module note)
 */
export function portParser(InvalidArgumentError: new (message: string) => Error): (text: string) => number {
  return (text) => {
    const port = Number(text);
    if (!/^\d+$/.test(text.trim()) || port > 65535) throw new InvalidArgumentError(`a port is a whole number from 0 to 65535, got "${text}"`);
    return port;
  };
}
