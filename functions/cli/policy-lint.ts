/**
 * `policy lint [FILE…] [--config FILE]`: schema errors, bad patterns and
 * selectors (errors), shadowed rules, patterns that match no configured
 * metric, selectors that match nothing, cluster-wide Allow defaults
 * (warnings). See `shared/policy/lint.ts`.
 */
import { formatIssue } from "../../shared/config/yaml.ts";
import { lintPolicies, type Finding } from "../../shared/policy/lint.ts";
import { EXIT, printJson, type Io, type OutputFormat } from "./io.ts";
import { loadWorkspace } from "./workspace.ts";

/** Options of {@link policyLint}. */
export interface LintOptions {
  config?: string | undefined;
  output: OutputFormat;
  /** exit 0 when there are warnings but no errors */
  allowWarnings?: boolean | undefined;
}

/** Run `policy lint`; returns the exit code. */
export function policyLint(files: readonly string[], options: LintOptions, io: Io): number {
  if (files.length === 0 && options.config === undefined) {
    io.err("policy lint: give policy files, or --config FILE");
    return EXIT.USAGE;
  }
  const ws = loadWorkspace(files, { config: options.config });
  const unique = new Map<string, Finding>();
  for (const issue of ws.issues) unique.set(formatIssue(issue), { ...issue, severity: "error" });
  const findings = [...unique.values()];
  findings.push(...lintPolicies(ws.policies, ws.config?.metrics, ws.config?.policy?.defaultAction));
  findings.sort((a, b) => a.source.localeCompare(b.source) || a.line - b.line || a.column - b.column);
  const errors = findings.filter((f) => f.severity === "error").length;
  const warnings = findings.length - errors;
  const notes: string[] = ws.skipped.map((s) => `${s.source}:${s.line}: skipped: kind ${s.kind} is not ExternalMetricPolicy`);
  if (ws.config === undefined) notes.push("no bridge config (--config FILE): metric names and shadowing over them were not checked");
  if (options.output === "json") {
    printJson(io, { policies: ws.policies.map((p) => p.id), findings, errors, warnings, notes });
  } else {
    for (const f of findings) {
      io.out(`${f.source}:${f.line}:${f.column}: ${f.severity}: ${f.path ? `${f.path}: ` : ""}${f.message}`);
    }
    for (const n of notes) io.out(`note: ${n}`);
    io.out(`${ws.policies.length} policies, ${errors} errors, ${warnings} warnings`);
  }
  if (errors > 0) return EXIT.FINDINGS;
  if (warnings > 0 && options.allowWarnings !== true) return EXIT.FINDINGS;
  return EXIT.OK;
}
