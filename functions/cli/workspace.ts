/**
 * The CLI's inputs: the bridge config (`--config FILE`, or a FILE holding a
 * BridgeConfig document) with its policies, plus the policies, test tables
 * and HPA manifests in the FILEs given. Every problem is collected with its
 * file and line; nothing here prints or exits.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { loadConfigDocuments, type BridgeConfig } from "../../shared/config/config.ts";
import { ConfigError, parseYamlDocuments, type ConfigIssue, type SourceDocument } from "../../shared/config/yaml.ts";
import { PolicySet, type CompiledPolicy, type Decision, type PolicyRequest } from "../../shared/policy/evaluate.ts";
import { compilePolicies, IMPLICIT_DENY_NOTE, isPolicyDocument, isPolicyKind } from "../../shared/policy/load.ts";
import type { Action } from "../../shared/policy/schema.ts";

/** The FILE argument that means standard input. */
export const STDIN = "-";

let stdinText: string | undefined;

/**
 * Read a file as UTF-8 (the `readFile` every loader gets); `-` is standard
 * input, read once (a second `-` gets the same text).
 *
 * @throws Error (ENOENT, EISDIR, …) when the file cannot be read
 */
export const readText = (path: string): string => {
  if (path !== STDIN) return readFileSync(path, "utf8");
  stdinText ??= readFileSync(0, "utf8");
  return stdinText;
};

/** Policies read from somewhere else than files (the live cluster, `--kubeconfig`), already compiled. */
export interface ExtraPolicies {
  policies: readonly CompiledPolicy[];
  issues: readonly ConfigIssue[];
}

/** A document the command does not use. */
export interface Skipped {
  source: string;
  line: number;
  kind: string;
}

/** Everything loaded for one command. */
export interface Workspace {
  config?: BridgeConfig;
  configPath?: string;
  /** the config's documents as parsed (to locate a field of the config: `ruleWarnings`) */
  configDocuments?: SourceDocument[];
  /** the config's policies, then those of the FILEs, in order (the bridge's layer) */
  policies: CompiledPolicy[];
  /** the live cluster's policies (`--kubeconfig`): the proxy's layer, see {@link LayeredPolicySet} */
  clusterPolicies: CompiledPolicy[];
  /** problems in the inputs (schema, YAML, unreadable files, duplicates) */
  issues: ConfigIssue[];
  /** the subset of `issues` that are files that could not be read at all (exit 2 even for `policy lint`) */
  unreadable: ConfigIssue[];
  /**
   * problems of live-cluster objects (`--kubeconfig`), which are left out as
   * the proxy leaves them out (their `Accepted` condition is False): errors
   * for `policy lint`, notes for the other commands; not in `issues`
   */
  excluded: ConfigIssue[];
  /** documents of the kinds the command asked for, by kind */
  documents: Map<string, SourceDocument[]>;
  skipped: Skipped[];
}

/** Options of {@link loadWorkspace}. */
export interface WorkspaceOptions {
  /** `--config FILE` */
  config?: string | undefined;
  /** document kinds the command consumes besides policies (e.g. `HorizontalPodAutoscaler`) */
  kinds?: readonly string[];
  /** policies from the live cluster (`--kubeconfig`), added after the files' */
  extra?: ExtraPolicies | undefined;
}

function issueOf(source: string, message: string): ConfigIssue {
  return { source, line: 1, column: 1, path: "", message };
}

function kindOf(sd: SourceDocument): string {
  const kind = (sd.value as { kind?: unknown } | null)?.kind;
  return typeof kind === "string" ? kind : String(kind ?? "(none)");
}

/** The name of a FILE in messages: `<stdin>` for `-`. */
function sourceName(path: string): string {
  return path === STDIN ? "<stdin>" : path;
}

/** Parse a file's documents, or record why not. */
function readDocuments(path: string, ws: Pick<Workspace, "issues" | "unreadable">): { text: string; docs: SourceDocument[] } | undefined {
  let text: string;
  try {
    text = readText(path);
  } catch (err) {
    const issue = issueOf(sourceName(path), `cannot read: ${(err as Error).message}`);
    ws.issues.push(issue);
    ws.unreadable.push(issue);
    return undefined;
  }
  try {
    return { text, docs: parseYamlDocuments(text, sourceName(path)) };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    ws.issues.push(...err.issues);
    return undefined;
  }
}

/**
 * The policy objects of a file's documents as the loader compiles them:
 * documents of a policy kind, and the policy items of a `kind: List`
 * (`kubectl get emp,cemp -A -o yaml`), each item as a document of its own
 * (located in the same file, so messages keep their lines; paths are the
 * item's own, `spec.rules[0]`). An API object's `status` and server-set
 * metadata are accepted by the loader's schema.
 */
export function policyDocuments(docs: readonly SourceDocument[]): SourceDocument[] {
  const out: SourceDocument[] = [];
  for (const sd of docs) {
    const kind = kindOf(sd);
    if (kind === "List") {
      const items = (sd.value as { items?: unknown }).items;
      const seq = (sd.doc.contents as { get?: (k: string) => unknown } | null)?.get?.("items") as { items?: unknown[] } | undefined;
      if (!Array.isArray(items)) continue;
      items.forEach((item, i) => {
        const ik = (item as { kind?: unknown } | null)?.kind;
        if (!isPolicyKind(ik)) return;
        const node = seq?.items?.[i];
        const doc = node !== undefined ? ({ contents: node } as unknown as SourceDocument["doc"]) : sd.doc;
        out.push({ ...sd, doc, value: item });
      });
    } else out.push(sd); // policies; other kinds: compilePolicies reports near-misses
  }
  return out;
}

/** Whether a `kind: List` document holds only policy objects (then it is not "skipped"). */
function isPolicyList(sd: SourceDocument): boolean {
  const items = (sd.value as { items?: unknown } | null)?.items;
  return Array.isArray(items) && items.length > 0 && items.every((i) => isPolicyKind((i as { kind?: unknown } | null)?.kind));
}

/**
 * Load the config (with its policies and `policy.files`) and the FILEs.
 * A FILE already listed in the config's `policy.files`, or the config file
 * itself, is not read twice. Policy ids must be unique across everything.
 */
export function loadWorkspace(files: readonly string[], options: WorkspaceOptions = {}): Workspace {
  const ws: Workspace = { policies: [], clusterPolicies: [], issues: [], unreadable: [], excluded: [], documents: new Map(), skipped: [] };
  const kinds = new Set(options.kinds ?? []);
  const parsed = new Map<string, SourceDocument[]>();
  let configPath = options.config;
  if (configPath === undefined) {
    for (const file of files) {
      const read = readDocuments(file, ws);
      if (read === undefined) continue;
      parsed.set(file, read.docs);
      if (read.docs.some((d) => kindOf(d) === "BridgeConfig")) {
        configPath = file;
        break;
      }
    }
  }
  const seen = new Set<string>();
  if (configPath !== undefined) {
    ws.configPath = configPath;
    seen.add(resolve(configPath));
    let text: string | undefined;
    try {
      text = readText(configPath);
    } catch (err) {
      const issue = issueOf(sourceName(configPath), `cannot read: ${(err as Error).message}`);
      ws.issues.push(issue);
      ws.unreadable.push(issue);
    }
    if (text !== undefined) try {
      const documents = parseYamlDocuments(text, sourceName(configPath));
      const { config, others } = loadConfigDocuments(documents, sourceName(configPath), { readFile: readText });
      ws.config = config;
      ws.configDocuments = documents;
      for (const f of config.policy?.files ?? []) seen.add(resolve(f));
      ws.policies.push(...(config.policy?.policies.policies ?? []));
      collect(ws, others, kinds, false);
    } catch (err) {
      if (err instanceof ConfigError) ws.issues.push(...err.issues);
      else ws.issues.push(issueOf(configPath, `cannot read: ${(err as Error).message}`));
    }
  }
  for (const file of files) {
    const abs = resolve(file);
    if (seen.has(abs)) continue;
    seen.add(abs);
    const docs = parsed.get(file) ?? readDocuments(file, ws)?.docs;
    if (docs === undefined) continue;
    const bridge = docs.find((d) => kindOf(d) === "BridgeConfig");
    if (bridge !== undefined) ws.issues.push(issueOf(file, `a second BridgeConfig (the config is ${configPath}); give one with --config`));
    const compiled = compilePolicies(policyDocuments(docs));
    ws.issues.push(...compiled.issues);
    addPolicies(ws, compiled.policies);
    collect(ws, docs, kinds, true);
  }
  if (options.extra !== undefined) {
    // another layer (the proxy's), so the same namespace/name as a file's policy is no conflict;
    // the API server keeps ids unique within it
    ws.excluded.push(...options.extra.issues);
    ws.clusterPolicies.push(...options.extra.policies);
  }
  return ws;
}

/**
 * Print on stderr the live-cluster objects left out (see
 * {@link Workspace.excluded}), one line each: `<kind>/<namespace>/<name>:
 * left out (not Accepted): <path>: <problem>`.
 */
export function noteExcluded(ws: Workspace, err: (text: string) => void): void {
  for (const i of ws.excluded) err(`note: ${i.source}: left out, as the proxy does (not Accepted): ${i.path ? `${i.path}: ` : ""}${i.message}`);
}

/** Add policies, refusing duplicate ids. */
function addPolicies(ws: Workspace, policies: readonly CompiledPolicy[]): void {
  const ids = new Map(ws.policies.map((p) => [p.id, p]));
  for (const p of policies) {
    const earlier = ids.get(p.id);
    if (earlier !== undefined) {
      ws.issues.push({ source: p.source, line: p.line, column: 1, path: "metadata.name", message: `policy ${p.id} is already defined at ${earlier.source}:${earlier.line}` });
      continue;
    }
    ids.set(p.id, p);
    ws.policies.push(p);
  }
}

/** File documents of the wanted kinds; note the others (policies and BridgeConfigs are handled elsewhere). */
function collect(ws: Workspace, docs: readonly SourceDocument[], kinds: ReadonlySet<string>, noteSkipped: boolean): void {
  for (const sd of docs) {
    const kind = kindOf(sd);
    if (kinds.has(kind)) {
      const list = ws.documents.get(kind) ?? [];
      list.push(sd);
      ws.documents.set(kind, list);
    } else if (noteSkipped && !isPolicyDocument(sd) && !(kind === "List" && isPolicyList(sd)) && kind !== "BridgeConfig") {
      ws.skipped.push({ source: sd.source, line: sd.doc.contents?.range?.[0] !== undefined ? sd.lineCounter.linePos(sd.doc.contents.range[0]).line : 1, kind });
    }
  }
}

/**
 * The policy set the bridge (and, with `--kubeconfig`, the proxy) would
 * enforce with these inputs, and a note when the config has no policy
 * section (every read denied) or only the cluster's policies are known.
 *
 * @param override `--default-action`
 */
export function policySetOf(ws: Workspace, override?: Action): { policies: PolicySet | undefined; note?: string } {
  const configured = ws.config?.policy?.defaultAction;
  if (ws.config === undefined && ws.policies.length === 0 && ws.clusterPolicies.length > 0) {
    // only the cluster's policies are known: they decide alone (--default-action, else Deny, when none applies)
    return {
      policies: new PolicySet(ws.clusterPolicies, override ?? "Deny"),
      note: "only the cluster's policies were evaluated: the bridge's own layer (--config FILE) also has to allow a read",
    };
  }
  const layered = (bridge: PolicySet) => (ws.clusterPolicies.length > 0 ? new LayeredPolicySet(bridge, ws.clusterPolicies) : bridge);
  if (override === undefined && ws.config !== undefined && (ws.config.policy === undefined || ws.config.policy.implicit === true) && ws.policies.length === 0) {
    return { policies: layered(new PolicySet([], "Deny", IMPLICIT_DENY_NOTE)), note: "the config has no policy section: the bridge denies every read (fail closed)" };
  }
  return { policies: layered(new PolicySet(ws.policies, override ?? configured ?? "Deny")) };
}

/**
 * The two policy layers of a cluster, evaluated as they are enforced: the
 * in-cluster proxy's cluster policies first (`shared/proxy/policy/policies.ts`,
 * `whenNoneApply: Defer`, the default: when none applies the read is left
 * to the bridge), then the bridge's own policies and `policy.defaultAction`
 * (this set's). A read is allowed only if both layers allow it; a cluster
 * Deny is answered by the proxy, so the bridge layer is not consulted.
 */
export class LayeredPolicySet extends PolicySet {
  /** the proxy's layer */
  readonly clusterLayer: PolicySet;

  constructor(bridge: PolicySet, cluster: readonly CompiledPolicy[]) {
    super(bridge.policies, bridge.defaultAction, bridge.defaultNote);
    this.clusterLayer = new PolicySet(cluster, "Allow"); // the default is never used: byDefault means Defer
  }

  /** Both layers' decision; verdicts of the cluster layer first. */
  override evaluate(request: PolicyRequest, options: { complete?: boolean } = {}): Decision {
    const cluster = this.clusterLayer.evaluate(request, options);
    if (cluster.byDefault) return super.evaluate(request, options); // Defer
    if (cluster.decision === "Deny") return { ...cluster, message: `cluster policy: ${cluster.message}` };
    const bridge = super.evaluate(request, options);
    const by = (d: Decision) => d.verdicts.map((v) => (v.rule !== undefined ? `${v.policy} rules[${v.rule}]` : `${v.policy} (defaultAction)`)).join(", ");
    const message = bridge.byDefault
      ? `the cluster policies allow it (${by(cluster)}), then ${bridge.message}`
      : bridge.decision === "Deny"
        ? bridge.message
        : `allowed by every applicable policy: cluster ${by(cluster)}; bridge ${by(bridge)}`;
    return { ...bridge, verdicts: [...cluster.verdicts, ...bridge.verdicts], message };
  }
}
