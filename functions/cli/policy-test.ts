/**
 * `policy test FILE…`: run table-driven expectations
 * (`ExternalMetricPolicyTest`, see `shared/policy/table.ts`) and exit 1 when
 * one does not hold.
 */
import { ConfigError, parseYamlDocuments, type ConfigIssue } from "../../shared/config/yaml.ts";
import { resolveBeside } from "../../shared/policy/load.ts";
import type { Action } from "../../shared/policy/schema.ts";
import { compileTestTable, runTestCases, TEST_KIND, type CaseResult } from "../../shared/policy/table.ts";
import { EXIT, failOnIssues, plural, printJson, type Io, type OutputFormat } from "./io.ts";
import { loadWorkspace, noteExcluded, policySetOf, readText, STDIN, type ExtraPolicies } from "./workspace.ts";

/** Options of {@link policyTest}. */
export interface TestOptions {
  /** a BridgeConfig for tables that name none */
  config?: string | undefined;
  /** policy files added to every table */
  policies: string[];
  defaultAction?: Action | undefined;
  output: OutputFormat;
  /** policies read from the live cluster (`--kubeconfig`), added to every table */
  extra?: ExtraPolicies | undefined;
}

interface TableRun {
  source: string;
  name: string;
  results: CaseResult[];
}

/** Run `policy test`; returns the exit code. */
export function policyTest(files: readonly string[], options: TestOptions, io: Io): number {
  const issues: ConfigIssue[] = [];
  const runs: TableRun[] = [];
  for (const file of files) {
    let docs;
    try {
      docs = parseYamlDocuments(readText(file), file === STDIN ? "<stdin>" : file);
    } catch (err) {
      if (err instanceof ConfigError) issues.push(...err.issues);
      else issues.push({ source: file, line: 1, column: 1, path: "", message: `cannot read: ${(err as Error).message}` });
      continue;
    }
    const tables = docs.filter((d) => (d.value as { kind?: unknown } | null)?.kind === TEST_KIND);
    if (tables.length === 0) {
      issues.push({ source: file, line: 1, column: 1, path: "", message: `no ${TEST_KIND} document` });
      continue;
    }
    for (const sd of tables) {
      const compiled = compileTestTable(sd, issues);
      if (compiled === undefined) continue;
      const { table, cases } = compiled;
      const ws = loadWorkspace([file, ...table.policies.map((p) => resolveBeside(file, p)), ...options.policies], {
        config: table.config !== undefined ? resolveBeside(file, table.config) : options.config,
        extra: options.extra,
      });
      if (ws.issues.length > 0) {
        issues.push(...ws.issues);
        continue;
      }
      if (runs.length === 0) noteExcluded(ws, io.err); // once, not per table
      const { policies } = policySetOf(ws, options.defaultAction ?? table.defaultAction);
      if (policies === undefined) {
        issues.push({ source: file, line: 1, column: 1, path: "", message: "no policies to test: the config has no policy section and the table names no policies" });
        continue;
      }
      runs.push({ source: file, name: table.metadata?.name ?? file, results: runTestCases(cases, policies) });
    }
  }
  if (issues.length > 0) return failOnIssues(io, options.output, issues);
  const all = runs.flatMap((r) => r.results);
  const failed = all.filter((r) => !r.pass).length;
  if (options.output === "json") {
    printJson(io, {
      passed: all.length - failed,
      failed,
      tables: runs.map((r) => ({
        source: r.source,
        name: r.name,
        cases: r.results.map((x) => ({
          name: x.case.name,
          line: x.case.line,
          pass: x.pass,
          expected: x.case.expect,
          actual: x.decision.decision,
          message: x.decision.message,
          ...(x.mismatch !== undefined ? { mismatch: x.mismatch } : {}),
        })),
      })),
    });
  } else {
    for (const run of runs) {
      io.out(`${run.source}: ${run.name}`);
      for (const x of run.results) {
        io.out(`  ${x.pass ? "PASS" : "FAIL"}  ${x.case.name}${x.pass ? "" : ` (${run.source}:${x.case.line})`}`);
        if (x.mismatch !== undefined) io.out(`        ${x.mismatch}`);
      }
    }
    io.out(`${plural(all.length, "case")}, ${all.length - failed} passed, ${failed} failed`);
  }
  return failed > 0 ? EXIT.FINDINGS : EXIT.OK;
}
