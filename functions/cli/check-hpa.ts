/**
 * `check-hpa FILE… --config FILE`: for each External, Pods and Object metric
 * of each autoscaling/v2 HPA, the metric rule, the backend query (External
 * metrics: provider `plan`, no network) and the policy decision for the HPA
 * controller (Pods and Object metrics with their resource). See
 * `shared/policy/check-hpa.ts`.
 */
import { parseYamlDocuments } from "../../shared/config/yaml.ts";
import { HPA_CONTROLLER } from "../../shared/identity.ts";
import { showSelector } from "../../shared/policy/evaluate.ts";
import { checkHpaDocuments, type HpaMetricCheck } from "../../shared/policy/check-hpa.ts";
import { buildProviders } from "../../shared/providers/registry.ts";
import { EXIT, failOnIssues, plural, printJson, type Io, type OutputFormat } from "./io.ts";
import { loadWorkspace, noteExcluded, policySetOf, type ExtraPolicies } from "./workspace.ts";

/** Options of {@link checkHpa}. */
export interface CheckHpaOptions {
  config?: string | undefined;
  /** overrides the HPAs' namespace */
  namespace?: string | undefined;
  output: OutputFormat;
  /** policies read from the live cluster (`--kubeconfig`) */
  extra?: ExtraPolicies | undefined;
  /** HPAs read from the live cluster (`--kubeconfig` without FILEs), checked besides the files' */
  clusterHpas?: readonly unknown[] | undefined;
}

/** The name of a cluster HPA in messages: `HorizontalPodAutoscaler/<namespace>/<name>`. */
function hpaRef(obj: unknown): string {
  const m = (obj as { metadata?: { name?: unknown; namespace?: unknown } } | null)?.metadata;
  return `HorizontalPodAutoscaler/${String(m?.namespace ?? "")}/${String(m?.name ?? "?")}`;
}

/** Run `check-hpa`; returns the exit code. */
export function checkHpa(files: readonly string[], options: CheckHpaOptions, io: Io): number {
  const ws = loadWorkspace(files, { config: options.config, kinds: ["HorizontalPodAutoscaler", "List"], extra: options.extra });
  if (ws.issues.length === 0 && ws.config === undefined) {
    ws.issues.push({ source: files[0] ?? "", line: 1, column: 1, path: "", message: "check-hpa needs the bridge config: --config FILE" });
  }
  if (ws.issues.length > 0 || ws.config === undefined) return failOnIssues(io, options.output, ws.issues);
  const config = ws.config;
  noteExcluded(ws, io.err);
  const providers = buildProviders(config.providers, { env: {}, now: Date.now });
  const { policies, note } = policySetOf(ws);
  const docs = [...(ws.documents.get("HorizontalPodAutoscaler") ?? []), ...(ws.documents.get("List") ?? [])];
  // cluster objects: one document each, named by the object (JSON has no useful lines: line 0 below)
  const clusterSources = new Set<string>();
  for (const obj of options.clusterHpas ?? []) {
    const source = hpaRef(obj);
    clusterSources.add(source);
    docs.push(...parseYamlDocuments(JSON.stringify(obj), source));
  }
  const { checks, issues, skipped } = checkHpaDocuments(docs, { config, providers, policies }, options.namespace);
  for (const c of [...checks, ...skipped]) if (clusterSources.has(c.source)) c.line = 0;
  const at = (source: string, line: number) => (line > 0 ? `${source}:${line}` : source);
  if (issues.length > 0) return failOnIssues(io, options.output, issues);
  const failed = checks.filter((c) => !c.ok).length;
  if (options.output === "json") {
    printJson(io, { caller: HPA_CONTROLLER.user, checks, failed, skipped, ...(note !== undefined ? { note } : {}) });
  } else {
    for (const s of skipped) io.out(`note: ${s.hpa} (${at(s.source, s.line)}): ${s.note}`);
    if (checks.length === 0) io.out("no External, Pods or Object metrics in autoscaling/v2 HorizontalPodAutoscalers");
    for (const c of checks) {
      io.out(`${c.hpa} ${c.path} (${at(c.source, c.line)})`);
      io.out(`  request: ${requestLine(c)}`);
      io.out(`  rule:    ${c.rule !== undefined ? `${c.rule.name} (provider ${c.rule.provider})` : "none"}`);
      if (c.query !== undefined) io.out(`  query:   ${c.query}`);
      if (c.decision !== undefined) io.out(`  policy:  ${c.decision.decision}: ${c.decision.message}`);
      else if (note !== undefined) io.out(`  policy:  ${note}`);
      for (const p of c.problems) io.out(`  problem: ${p}`);
      io.out(`  ${c.ok ? "OK" : "FAIL"}`);
    }
    const what = checks.every((c) => c.type === "External") ? "external metric" : "metric";
    io.out(`${plural(checks.length, what)}, ${checks.length - failed} ok, ${failed} failing (caller ${HPA_CONTROLLER.user})`);
  }
  return failed > 0 ? EXIT.FINDINGS : EXIT.OK;
}

/** The HPA controller's request for one metric, for people: the External or custom.metrics.k8s.io path and its selector. */
function requestLine(c: HpaMetricCheck): string {
  if (c.type === "External") return `GET …/namespaces/${c.namespace}/${c.metric} labelSelector ${showSelector(c.selector)}`;
  const path =
    c.type === "Pods"
      ? `…/namespaces/${c.namespace}/pods/*/${c.metric}`
      : c.resource === "namespaces"
        ? `…/namespaces/${c.namespace}/metrics/${c.metric}`
        : `…/namespaces/${c.namespace}/${c.resource}/${c.describedObject?.name ?? ""}/${c.metric}`;
  return `GET custom.metrics.k8s.io ${path} (resource ${c.resource}) metricLabelSelector ${showSelector(c.selector)}`;
}
