/**
 * CLI plumbing shared by the commands: output format, exit codes, printing
 * of input problems.
 */
import { formatIssue, type ConfigIssue } from "../../shared/config/yaml.ts";

/**
 * Exit codes of every command:
 * - 0: success — lint clean, decision Allow, every test case and HPA check passed;
 * - 1: the answer is "no" — lint findings, decision Deny, a test case failed, an HPA read would fail;
 * - 2: the command could not run — bad arguments, unreadable or invalid input files.
 */
export const EXIT = { OK: 0, FINDINGS: 1, USAGE: 2 } as const;

/** `--output` values. */
export type OutputFormat = "human" | "json";

/** Where a command writes. */
export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** The process's stdout/stderr. */
export const processIo: Io = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
};

/** `1 error`, `2 errors` (`plural(1, "policy", "policies")`). */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** Print JSON on stdout. */
export function printJson(io: Io, value: unknown): void {
  io.out(JSON.stringify(value, null, 2));
}

/**
 * Report input problems (on stderr for people, as JSON on stdout for
 * machines) and return the usage exit code.
 */
export function failOnIssues(io: Io, format: OutputFormat, issues: readonly ConfigIssue[]): number {
  if (format === "json") printJson(io, { error: "invalid input", issues });
  else for (const issue of issues) io.err(`${formatIssue(issue)}`);
  return EXIT.USAGE;
}
