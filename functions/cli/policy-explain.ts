/**
 * `policy explain [FILE…] --namespace NS --metric NAME [--selector SEL]
 * [--resource RESOURCE] [--user U --group G… | --service-account NS/NAME]`:
 * the decision for one request and the policy and rule that made it.
 * `--resource` is `external` (the default) or a custom.metrics.k8s.io read's
 * group resource (`pods`, `namespaces`, `ingresses.networking.k8s.io`); for
 * a custom read `--selector` is its `metricLabelSelector` and the policies'
 * `resources:` decide (evaluate.ts). The caller defaults to the
 * HPA controller. With the bridge config, also the backend query the
 * bridge would send for the request (the rule's provider's `plan`, the
 * code that builds the query it sends — e.g. a `prometheus` rule's value
 * and timestamp queries — without any network call), or the provider's
 * refusal of the selector.
 */
import { SelectorError, parseSelector } from "../../shared/k8s/selector.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { metricKey } from "../../shared/metric-name.ts";
import { callerFrom, decisionJson, describeDecision, requestResource } from "../../shared/policy/explain.ts";
import { isCustomResource, type Action } from "../../shared/policy/schema.ts";
import { buildProviders } from "../../shared/providers/registry.ts";
import { EXIT, failOnIssues, printJson, type Io, type OutputFormat } from "./io.ts";
import { loadWorkspace, noteExcluded, policySetOf, type ExtraPolicies } from "./workspace.ts";

/** Options of {@link policyExplain}. */
export interface ExplainOptions {
  config?: string | undefined;
  namespace: string;
  metric: string;
  /** the labelSelector as sent; for a custom read the metricLabelSelector */
  selector: string;
  /** `external` (default) or a custom read's group resource */
  resource?: string | undefined;
  user?: string | undefined;
  group: string[];
  serviceAccount?: string | undefined;
  defaultAction?: Action | undefined;
  output: OutputFormat;
  /** policies read from the live cluster (`--kubeconfig`) */
  extra?: ExtraPolicies | undefined;
}

/**
 * Run `policy explain`; returns the exit code (0 Allow, 1 Deny, a metric
 * the config does not define or a selector its rule's provider refuses).
 * The implementations of the config's providers must be loaded
 * (`loadProviderModules`) for the query to be shown.
 */
export function policyExplain(files: readonly string[], options: ExplainOptions, io: Io): number {
  let caller;
  let selector;
  let resource;
  try {
    caller = callerFrom({ user: options.user, groups: options.group, serviceAccount: options.serviceAccount });
    selector = parseSelector(options.selector);
    resource = requestResource(options.resource);
  } catch (err) {
    const what = err instanceof SelectorError ? `invalid --selector: ${err.message}` : `${err instanceof Error && /^resource /.test(err.message) ? "--" : ""}${(err as Error).message}`;
    io.err(`policy explain: ${what}`);
    return EXIT.USAGE;
  }
  const ws = loadWorkspace(files, { config: options.config, extra: options.extra });
  if (ws.issues.length > 0) return failOnIssues(io, options.output, ws.issues);
  noteExcluded(ws, io.err);
  const custom = isCustomResource(resource);
  const request = { caller, namespace: options.namespace, metric: options.metric, selector, resource };
  const key = metricKey(options.metric);
  const notes: string[] = [];
  const undefinedMetric =
    ws.config !== undefined &&
    (custom ? !ws.config.customMetrics.some((m) => m.key === key && m.describes?.resource === resource) : !ws.config.metrics.some((m) => m.key === key));
  if (undefinedMetric) {
    notes.push(
      custom
        ? `the config defines no custom metric "${options.metric}" for ${resource} (describes.resource): the bridge answers 404 before any policy is evaluated`
        : `the config defines no metric "${options.metric}": the bridge answers 404 before any policy is evaluated`,
    );
  }
  if (custom) notes.push("a custom read's backend query depends on the objects the proxy resolves (pods, the described object), so none is shown");
  // the query the bridge would send (the app authorizes first, then plans: both are shown)
  let query: string | undefined;
  let refused: string | undefined;
  const rule = custom ? undefined : ws.config?.metrics.find((m) => m.key === key);
  if (ws.config !== undefined && rule !== undefined) {
    const provider = buildProviders(ws.config.providers, { env: {}, now: Date.now }).get(rule.provider);
    try {
      query = provider?.plan({ rule, selector, namespace: options.namespace });
    } catch (err) {
      if (!(err instanceof StatusError)) throw err;
      refused = `${err.code}: ${err.message}`;
      notes.push(`the provider refuses this selector, so the read fails whatever the policies decide: ${refused}`);
    }
  }
  const { policies, note } = policySetOf(ws, options.defaultAction);
  if (note !== undefined) notes.push(note);
  const decision =
    policies?.evaluate({ caller, namespace: options.namespace, metric: key, selector, resource }, { complete: true }) ??
    ({ decision: "Allow", verdicts: [], byDefault: true, message: note ?? "" } as const);
  if (options.output === "json") printJson(io, { ...decisionJson(request, decision), ...(query !== undefined ? { query } : {}), notes });
  else {
    for (const line of describeDecision(request, decision)) io.out(line);
    if (query !== undefined) io.out(`  query: ${query}`);
    for (const n of notes) io.out(`note: ${n}`);
  }
  return decision.decision === "Allow" && !undefinedMetric && refused === undefined ? EXIT.OK : EXIT.FINDINGS;
}
