/**
 * Multi-document YAML with source positions, and validation issues that
 * name the file, line, column and field path.
 *
 * YAML parsing is the `yaml` package's (eemeli/yaml); this module only maps
 * a field path back to the line it was written on.
 */
import { isMap, isPair, isScalar, isSeq, LineCounter, parseAllDocuments, type Document } from "yaml";
import type { core } from "zod/mini";

/** One problem in a config or policy file. `line`/`column` are 1-based. */
export interface ConfigIssue {
  source: string;
  line: number;
  column: number;
  /** field path, e.g. `metrics[0].query.queueLabel` */
  path: string;
  message: string;
}

/** Raised when a config or policy source is invalid; `issues` lists every problem found. */
export class ConfigError extends Error {
  readonly issues: ConfigIssue[];
  constructor(issues: ConfigIssue[]) {
    super(issues.map(formatIssue).join("\n"));
    this.name = "ConfigError";
    this.issues = issues;
  }
}

/** `file:line:column: path: message` — the form editors and CI annotate. */
export function formatIssue(issue: ConfigIssue): string {
  return `${issue.source}:${issue.line}:${issue.column}: ${issue.path ? `${issue.path}: ` : ""}${issue.message}`;
}

/** Render a field path as `a.b[0].c`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out;
}

/** One parsed YAML document with what is needed to locate its fields. */
export interface SourceDocument {
  source: string;
  /** index of the document in its file, 0-based */
  index: number;
  doc: Document.Parsed;
  /** the plain JavaScript value of the document */
  value: unknown;
  lineCounter: LineCounter;
}

/**
 * Parse every document of a YAML text.
 *
 * @param source the name used in messages (a file path, `<env:BRIDGE_CONFIG>`, …)
 * @throws ConfigError listing YAML syntax errors with their lines
 */
export function parseYamlDocuments(text: string, source: string): SourceDocument[] {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  const list = Array.isArray(docs) ? docs : [];
  const issues: ConfigIssue[] = [];
  for (const doc of list) {
    for (const err of doc.errors) {
      const pos = lineCounter.linePos(err.pos[0]);
      issues.push({ source, line: pos.line, column: pos.col, path: "", message: `YAML: ${err.message.split("\n")[0]}` });
    }
  }
  if (issues.length > 0) throw new ConfigError(issues);
  const out: SourceDocument[] = [];
  list.forEach((doc, index) => {
    if (doc.contents === null) return; // an empty document (e.g. a trailing `---`)
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      throw new ConfigError([{ source, line: 1, column: 1, path: "", message: `YAML: ${(err as Error).message}` }]);
    }
    out.push({ source, index, doc, value, lineCounter });
  });
  return out;
}

/**
 * The 1-based line and column where `path` is written in `doc`: the value's
 * node, or for a missing field its nearest existing parent. With `keyOf`, the
 * position of that key inside the map at `path` (for unknown-key errors).
 */
export function locate(sd: SourceDocument, path: readonly PropertyKey[], keyOf?: string): { line: number; column: number } {
  let node: unknown = sd.doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const part of path) {
    let next: unknown;
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(part));
      next = pair?.value ?? pair?.key;
    } else if (isSeq(node) && typeof part === "number") {
      next = node.items[part];
    }
    if (next === undefined || next === null) break;
    node = next;
    offset = rangeStart(node) ?? offset;
  }
  if (keyOf !== undefined && isMap(node)) {
    const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === keyOf);
    offset = rangeStart(pair?.key) ?? offset;
  }
  const pos = sd.lineCounter.linePos(offset);
  return { line: pos.line, column: pos.col };
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
  return range?.[0];
}

/**
 * Turn zod issues into located ConfigIssues. Takes the error of any zod
 * schema (`zod/mini`'s or the classic API's: both are `core.$ZodError`).
 *
 * A value that matches no branch of a union (zod's `invalid_union`, whose
 * own message is only "Invalid input") is reported with the issues of the
 * branch it came closest to ({@link closestBranch}): a misspelt
 * `attribute: ApproximateNumberOfMessage` (one name or a list of names)
 * reads `Invalid option: expected one of "ApproximateNumberOfMessages"|…`,
 * and a value of a type no branch takes lists the types the branches
 * expect (`Invalid input: expected string or array, received number`).
 *
 * @param prefix the path of the validated value inside the document
 */
export function zodIssues(sd: SourceDocument, error: core.$ZodError, prefix: readonly PropertyKey[] = []): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    const path = [...prefix, ...(issue.path as PropertyKey[])];
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const pos = locate(sd, path, key);
        out.push({ source: sd.source, ...pos, path: formatPath([...path, key]), message: "unknown field" });
      }
      continue;
    }
    if (issue.code === "invalid_union" && issue.errors.length > 0) {
      const branch = closestBranch(issue.errors);
      if (branch !== undefined) {
        out.push(...zodIssues(sd, { issues: branch } as core.$ZodError, path));
        continue;
      }
      // every branch refused the value's type (wrongType): name the types they take
      const types = issue.errors.flat().filter((i) => i.code === "invalid_type");
      const expected = [...new Set(types.map((i) => String(i.expected)))];
      const received = types[0]?.message.match(/received \S+$/)?.[0];
      const message = `Invalid input: expected ${expected.join(" or ")}${received !== undefined ? `, ${received}` : ""}`;
      out.push({ source: sd.source, ...locate(sd, path), path: formatPath(path), message });
      continue;
    }
    const pos = locate(sd, path);
    out.push({ source: sd.source, ...pos, path: formatPath(path), message: issue.message });
  }
  return out;
}

/** Whether a union branch's issues say only "this branch takes another type" (an `invalid_type` at the union's own value). */
function wrongType(branch: readonly core.$ZodIssue[]): boolean {
  return branch.every((i) => i.code === "invalid_type" && i.path.length === 0);
}

/**
 * The branch of a failed union the value came closest to: among the
 * branches that took the value's type (not {@link wrongType}), the one
 * whose issues reach deepest into the value (an array branch complaining
 * about item 0 beats a string enum refusing the array), the first of them
 * on a tie; undefined when every branch refused the value's type.
 */
function closestBranch(branches: readonly (readonly core.$ZodIssue[])[]): core.$ZodIssue[] | undefined {
  const depth = (b: readonly core.$ZodIssue[]) => Math.max(...b.map((i) => i.path.length));
  let best: readonly core.$ZodIssue[] | undefined;
  for (const branch of branches) {
    if (branch.length === 0 || wrongType(branch)) continue;
    if (best === undefined || depth(branch) > depth(best)) best = branch;
  }
  return best === undefined ? undefined : [...best];
}

/** A ConfigIssue at `path` of a document. */
export function issueAt(sd: SourceDocument, path: readonly PropertyKey[], message: string): ConfigIssue {
  return { source: sd.source, ...locate(sd, path), path: formatPath(path), message };
}
