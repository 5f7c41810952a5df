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

/** The Node.js major the entry points and their bundles are built and tested for (the `node` devDependency; esbuild target `node24`, infra/build-common.ts). */
export const REQUIRED_NODE_MAJOR = 24;

/**
 * Whether the running Node.js is too old to run an entry point: older than
 * {@link REQUIRED_NODE_MAJOR}. Such a Node also lacks `import.meta.main`
 * (added in v24.2.0 and v22.18.0), which an entry point tests to decide
 * whether to start: there it is `undefined`, so without this check
 * `node dist/node/node.mjs` on Node 20 printed nothing and exited 0.
 *
 * @param version `process.versions.node` form, e.g. `20.20.2`
 */
export function nodeTooOld(version: string = process.versions.node): boolean {
  return Number(version.split(".")[0]) < REQUIRED_NODE_MAJOR;
}

/**
 * The one-line refusal an entry point prints on a Node.js older than
 * {@link REQUIRED_NODE_MAJOR} (see {@link nodeTooOld}), naming the version
 * it runs on and the one it needs.
 *
 * @param what the program, e.g. `external-metrics-bridge`
 */
export function nodeTooOldMessage(what: string, version: string = process.versions.node): string {
  return `${what} cannot run on Node.js v${version}: it needs Node.js ${REQUIRED_NODE_MAJOR} or later (check with node --version; in a checkout, npm run … and npx node … use the Node ${REQUIRED_NODE_MAJOR} that npm ci installs)`;
}
