/**
 * `policy lint [FILE…] [--config FILE] [--kubeconfig FILE]`: schema errors,
 * bad patterns and selectors, bad or duplicate `resources` entries (errors),
 * shadowed rules, patterns that match no configured metric, `resources`
 * entries no metric rule of the config serves, selectors that match nothing, selectors that only
 * exclude values, selectors on labels the metric rule cannot map,
 * cluster-wide Allow defaults, and with `--config` the providers' advice
 * about its metric rules (`ruleWarnings`, as `config validate`) (warnings). See `shared/policy/lint.ts`.
 *
 * Exit codes (as `helm lint` and `promtool check`): 0 no errors (warnings
 * alone too, unless `--strict`), 1 errors (or warnings with `--strict`), 2
 * an input could not be read.
 */
import { formatIssue } from "../../shared/config/yaml.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { lintPolicies, type Finding, type LabelMappingCheck } from "../../shared/policy/lint.ts";
import { buildProviders } from "../../shared/providers/registry.ts";
import { ruleWarnings } from "./config-validate.ts";
import { EXIT, plural, printJson, type Io, type OutputFormat } from "./io.ts";
import { loadWorkspace, type ExtraPolicies } from "./workspace.ts";

/** Options of {@link policyLint}. */
export interface LintOptions {
  config?: string | undefined;
  output: OutputFormat;
  /** exit 1 when there are warnings but no errors */
  strict?: boolean | undefined;
  /** policies read from the live cluster (`--kubeconfig`) */
  extra?: ExtraPolicies | undefined;
  /** a name for `extra` in the "nothing to lint" check */
  extraSource?: string | undefined;
}

/** The message of a provider's 400 for a requirement on a label the rule cannot map (`shared/providers/label-mapping.ts`). */
const CANNOT_MAP = /cannot be mapped/;

/** Run `policy lint`; returns the exit code. */
export function policyLint(files: readonly string[], options: LintOptions, io: Io): number {
  if (files.length === 0 && options.config === undefined && options.extra === undefined) {
    io.err("policy lint: give policy files, --config FILE or --kubeconfig FILE");
    return EXIT.USAGE;
  }
  const ws = loadWorkspace(files, { config: options.config, extra: options.extra });
  if (ws.unreadable.length > 0) {
    if (options.output === "json") printJson(io, { error: "unreadable input", issues: ws.unreadable });
    else for (const issue of ws.unreadable) io.err(`${formatIssue(issue)}`);
    return EXIT.USAGE;
  }
  const unique = new Map<string, Finding>();
  for (const issue of ws.issues) unique.set(formatIssue(issue), { ...issue, severity: "error" });
  const findings = [...unique.values()];
  // live-cluster objects have no lines: line 0 marks them (printed without a position)
  for (const issue of ws.excluded) findings.push({ ...issue, line: 0, column: 0, severity: "error" });
  let unmappable: LabelMappingCheck | undefined;
  if (ws.config !== undefined) {
    const providers = buildProviders(ws.config.providers, { env: {}, now: Date.now });
    unmappable = (rule, selector) => {
      const provider = providers.get(rule.provider);
      if (provider === undefined) return undefined;
      try {
        provider.plan({ rule, selector, namespace: "default" });
        return undefined;
      } catch (err) {
        if (err instanceof StatusError && err.code === 400 && CANNOT_MAP.test(err.message)) return err.message;
        return undefined;
      }
    };
  }
  const policies = [...ws.policies, ...ws.clusterPolicies];
  findings.push(...lintPolicies(policies, ws.config?.metrics, ws.config?.policy?.defaultAction, unmappable, ws.config?.customMetrics));
  // the providers' advice about the config's metric rules (config validate prints the same)
  if (ws.config !== undefined && ws.configDocuments !== undefined) {
    for (const w of ruleWarnings(ws.config, ws.configDocuments)) findings.push({ ...w, severity: "warning" });
  }
  findings.sort((a, b) => a.source.localeCompare(b.source) || a.line - b.line || a.column - b.column);
  const errors = findings.filter((f) => f.severity === "error").length;
  const warnings = findings.length - errors;
  const notes: string[] = ws.skipped.map((s) => `${s.source}:${s.line}: skipped: kind ${s.kind} is not a policy`);
  if (ws.config === undefined) notes.push("no bridge config (--config FILE): metric names, label mapping and shadowing over them were not checked");
  if (options.output === "json") {
    printJson(io, { policies: policies.map((p) => p.id), findings, errors, warnings, notes });
  } else {
    for (const f of findings) {
      const at = f.line > 0 ? `${f.source}:${f.line}:${f.column}` : f.source;
      io.out(`${at}: ${f.severity}: ${f.path ? `${f.path}: ` : ""}${f.message}`);
    }
    for (const n of notes) io.out(`note: ${n}`);
    io.out(`${plural(policies.length, "policy", "policies")}, ${plural(errors, "error")}, ${plural(warnings, "warning")}`);
  }
  if (errors > 0) return EXIT.FINDINGS;
  if (warnings > 0 && options.strict === true) return EXIT.FINDINGS;
  return EXIT.OK;
}
