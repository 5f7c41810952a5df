/**
 * The CLI's inputs: the bridge config (`--config FILE`, or a FILE holding a
 * BridgeConfig document) with its policies, plus the policies, test tables
 * and HPA manifests in the FILEs given. Every problem is collected with its
 * file and line; nothing here prints or exits.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { loadConfig, type BridgeConfig } from "../../shared/config/config.ts";
import { ConfigError, parseYamlDocuments, type ConfigIssue, type SourceDocument } from "../../shared/config/yaml.ts";
import { PolicySet, type CompiledPolicy } from "../../shared/policy/evaluate.ts";
import { compilePolicies, IMPLICIT_DENY_NOTE, isPolicyDocument } from "../../shared/policy/load.ts";
import type { Action } from "../../shared/policy/schema.ts";

/** Read a file as UTF-8 (the `readFile` every loader gets). */
export const readText = (path: string): string => readFileSync(path, "utf8");

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
  /** the config's policies, then those of the FILEs, in order */
  policies: CompiledPolicy[];
  /** problems in the inputs (schema, YAML, unreadable files, duplicates) */
  issues: ConfigIssue[];
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
}

function issueOf(source: string, message: string): ConfigIssue {
  return { source, line: 1, column: 1, path: "", message };
}

function kindOf(sd: SourceDocument): string {
  const kind = (sd.value as { kind?: unknown } | null)?.kind;
  return typeof kind === "string" ? kind : String(kind ?? "(none)");
}

/** Parse a file's documents, or record why not. */
function readDocuments(path: string, issues: ConfigIssue[]): { text: string; docs: SourceDocument[] } | undefined {
  let text: string;
  try {
    text = readText(path);
  } catch (err) {
    issues.push(issueOf(path, `cannot read: ${(err as Error).message}`));
    return undefined;
  }
  try {
    return { text, docs: parseYamlDocuments(text, path) };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    issues.push(...err.issues);
    return undefined;
  }
}

/**
 * Load the config (with its policies and `policy.files`) and the FILEs.
 * A FILE already listed in the config's `policy.files`, or the config file
 * itself, is not read twice. Policy ids must be unique across everything.
 */
export function loadWorkspace(files: readonly string[], options: WorkspaceOptions = {}): Workspace {
  const ws: Workspace = { policies: [], issues: [], documents: new Map(), skipped: [] };
  const kinds = new Set(options.kinds ?? []);
  const parsed = new Map<string, SourceDocument[]>();
  let configPath = options.config;
  if (configPath === undefined) {
    for (const file of files) {
      const read = readDocuments(file, ws.issues);
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
    try {
      const { config, others } = loadConfig(readText(configPath), configPath, { readFile: readText });
      ws.config = config;
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
    const docs = parsed.get(file) ?? readDocuments(file, ws.issues)?.docs;
    if (docs === undefined) continue;
    const bridge = docs.find((d) => kindOf(d) === "BridgeConfig");
    if (bridge !== undefined) ws.issues.push(issueOf(file, `a second BridgeConfig (the config is ${configPath}); give one with --config`));
    const compiled = compilePolicies(docs);
    ws.issues.push(...compiled.issues);
    addPolicies(ws, compiled.policies);
    collect(ws, docs, kinds, true);
  }
  return ws;
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
    } else if (noteSkipped && !isPolicyDocument(sd) && kind !== "BridgeConfig") {
      ws.skipped.push({ source: sd.source, line: sd.doc.contents?.range?.[0] !== undefined ? sd.lineCounter.linePos(sd.doc.contents.range[0]).line : 1, kind });
    }
  }
}

/**
 * The policy set the bridge would enforce with these inputs, and a note
 * when the config has no policy section (every read denied).
 *
 * @param override `--default-action`
 */
export function policySetOf(ws: Workspace, override?: Action): { policies: PolicySet | undefined; note?: string } {
  const configured = ws.config?.policy?.defaultAction;
  if (override === undefined && ws.config !== undefined && (ws.config.policy === undefined || ws.config.policy.implicit === true) && ws.policies.length === 0) {
    return { policies: new PolicySet([], "Deny", IMPLICIT_DENY_NOTE), note: "the config has no policy section: the bridge denies every read (fail closed)" };
  }
  return { policies: new PolicySet(ws.policies, override ?? configured ?? "Deny") };
}
