/**
 * `policy explain [FILE…] --namespace NS --metric NAME [--selector SEL]
 * [--user U --group G… | --service-account NS/NAME]`: the decision for one
 * request and the policy and rule that made it. The caller defaults to the
 * HPA controller.
 */
import { SelectorError, parseSelector } from "../../shared/k8s/selector.ts";
import { metricKey } from "../../shared/metric-name.ts";
import { callerFrom, decisionJson, describeDecision } from "../../shared/policy/explain.ts";
import type { Action } from "../../shared/policy/schema.ts";
import { EXIT, failOnIssues, printJson, type Io, type OutputFormat } from "./io.ts";
import { loadWorkspace, noteExcluded, policySetOf, type ExtraPolicies } from "./workspace.ts";

/** Options of {@link policyExplain}. */
export interface ExplainOptions {
  config?: string | undefined;
  namespace: string;
  metric: string;
  selector: string;
  user?: string | undefined;
  group: string[];
  serviceAccount?: string | undefined;
  defaultAction?: Action | undefined;
  output: OutputFormat;
  /** policies read from the live cluster (`--kubeconfig`) */
  extra?: ExtraPolicies | undefined;
}

/** Run `policy explain`; returns the exit code (0 Allow, 1 Deny or a metric the config does not define). */
export function policyExplain(files: readonly string[], options: ExplainOptions, io: Io): number {
  let caller;
  let selector;
  try {
    caller = callerFrom({ user: options.user, groups: options.group, serviceAccount: options.serviceAccount });
    selector = parseSelector(options.selector);
  } catch (err) {
    const what = err instanceof SelectorError ? `invalid --selector: ${err.message}` : (err as Error).message;
    io.err(`policy explain: ${what}`);
    return EXIT.USAGE;
  }
  const ws = loadWorkspace(files, { config: options.config, extra: options.extra });
  if (ws.issues.length > 0) return failOnIssues(io, options.output, ws.issues);
  noteExcluded(ws, io.err);
  const request = { caller, namespace: options.namespace, metric: options.metric, selector };
  const key = metricKey(options.metric);
  const notes: string[] = [];
  const undefinedMetric = ws.config !== undefined && !ws.config.metrics.some((m) => m.key === key);
  if (undefinedMetric) {
    notes.push(`the config defines no metric "${options.metric}": the bridge answers 404 before any policy is evaluated`);
  }
  const { policies, note } = policySetOf(ws, options.defaultAction);
  if (note !== undefined) notes.push(note);
  const decision =
    policies?.evaluate({ caller, namespace: options.namespace, metric: key, selector }, { complete: true }) ??
    ({ decision: "Allow", verdicts: [], byDefault: true, message: note ?? "" } as const);
  if (options.output === "json") printJson(io, { ...decisionJson(request, decision), notes });
  else {
    for (const line of describeDecision(request, decision)) io.out(line);
    for (const n of notes) io.out(`note: ${n}`);
  }
  return decision.decision === "Allow" && !undefinedMetric ? EXIT.OK : EXIT.FINDINGS;
}
