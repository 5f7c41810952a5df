/**
 * Loading ExternalMetricPolicy and ClusterExternalMetricPolicy objects:
 * validate (zod), compile patterns and selectors once, and report every
 * problem with its file, line and field.
 *
 * Sources: the documents of either kind in the config source
 * (`loadConfig(...).others`), plus the files the BridgeConfig lists in
 * `policy.files` (read only where the entry point grants file access). API
 * objects read from a cluster go through the same {@link compilePolicy}
 * (`objects.ts`).
 */
import { ConfigError, issueAt, locate, parseYamlDocuments, zodIssues, type ConfigIssue, type SourceDocument } from "../config/yaml.ts";
import { ANONYMOUS, type Caller } from "../identity.ts";
import { fromLabelSelector, parseSelector, SelectorError, selectorToString, type Selector } from "../k8s/selector.ts";
import { PolicySet, serviceAccountUser, type CompiledPolicy, type CompiledRule } from "./evaluate.ts";
import { checkPolicyPatterns, compileMetricPattern, PatternError } from "./regex.ts";
import { CLUSTER_POLICY_KIND, clusterPolicySchema, EXTERNAL_RESOURCE, POLICY_KIND, policySchema, policySettingsSchema, type Action, type SelectorInput } from "./schema.ts";

/** The bridge's compiled policy configuration (`BridgeConfig.policy`). */
export interface PolicyConfig {
  /** the decision when no policy applies */
  defaultAction: Action;
  /** the caller of requests no proxy authenticated */
  localIdentity: Caller;
  /** policy files read besides the config source, resolved paths */
  files: string[];
  /** every policy, compiled */
  policies: PolicySet;
  /**
   * true when the BridgeConfig has no `policy:` section (and no policies):
   * the bridge then denies every read, fail closed (`defaultAction` Deny)
   */
  implicit?: boolean;
}

/** Why a read is denied when the BridgeConfig has no `policy:` section, and how to open it. */
export const IMPLICIT_DENY_NOTE =
  "the BridgeConfig has no policy section, so every read is denied (defaultAction Deny); " +
  "to grant reads add ExternalMetricPolicy objects with policy: { defaultAction: Deny }, or run open with policy: { defaultAction: Allow } (docs/policy.md)";

/** How policy files are reached. */
export interface PolicyLoadOptions {
  /**
   * Read a file as UTF-8 (Node: `(p) => readFileSync(p, "utf8")`). Without
   * it, a config listing `policy.files` is refused: the policies would not
   * be enforced.
   */
  readFile?: (path: string) => string;
}

/** Whether `kind` is ExternalMetricPolicy or ClusterExternalMetricPolicy. */
export function isPolicyKind(kind: unknown): kind is typeof POLICY_KIND | typeof CLUSTER_POLICY_KIND {
  return kind === POLICY_KIND || kind === CLUSTER_POLICY_KIND;
}

/** Whether a document's kind is ExternalMetricPolicy or ClusterExternalMetricPolicy. */
export function isPolicyDocument(sd: SourceDocument): boolean {
  return isPolicyKind(kindOf(sd));
}

function kindOf(sd: SourceDocument): unknown {
  return (sd.value as { kind?: unknown } | null)?.kind;
}

/** Kinds that look like a misspelt policy kind (silently ignoring one would drop a policy); group 1: the cluster prefix. */
const NEAR_MISS = /^(cluster[-_]?)?external[-_]?metrics?[-_]?polic(y|ies)$/i;

/**
 * Turn a rule's selector as written into a Selector.
 *
 * @throws SelectorError with apimachinery's message
 */
export function compileSelectorInput(input: SelectorInput): Selector {
  if (typeof input === "string") return parseSelector(input);
  return fromLabelSelector(input);
}

/**
 * Validate and compile one ExternalMetricPolicy or ClusterExternalMetricPolicy
 * document (chosen by its `kind`; any other kind is validated as an
 * ExternalMetricPolicy, so the message names the expected kind). A
 * ClusterExternalMetricPolicy, and in files an ExternalMetricPolicy without
 * `metadata.namespace`, is cluster-scoped (`namespace` undefined, id = name).
 *
 * @returns the policy, or undefined with the problems appended to `issues`
 *   (paths like `spec.rules[1].metric`; pattern problems are RE2's messages
 *   from `regex.ts`, selector problems apimachinery's from `shared/k8s/selector.ts`)
 */
export function compilePolicy(sd: SourceDocument, issues: ConfigIssue[]): CompiledPolicy | undefined {
  const parsed = kindOf(sd) === CLUSTER_POLICY_KIND ? clusterPolicySchema.safeParse(sd.value) : policySchema.safeParse(sd.value);
  if (!parsed.success) {
    issues.push(...zodIssues(sd, parsed.error));
    // Still report the patterns that do not compile, so one run shows all.
    const rules = (sd.value as { spec?: { rules?: unknown } } | null)?.spec?.rules;
    const over = Array.isArray(rules) ? checkPolicyPatterns(rules.map((r: unknown) => (r as { metric?: unknown } | null)?.metric)) : undefined;
    if (over !== undefined) issues.push(issueAt(sd, ["spec", "rules", over.index, "metric"], over.message));
    else if (Array.isArray(rules)) {
      rules.forEach((rule: unknown, index) => {
        const metric = (rule as { metric?: unknown } | null)?.metric;
        if (typeof metric !== "string") return;
        try {
          compileMetricPattern(metric);
        } catch (err) {
          if (!(err instanceof PatternError)) throw err;
          issues.push(issueAt(sd, ["spec", "rules", index, "metric"], err.message));
        }
      });
    }
    return undefined;
  }
  const { metadata, spec } = parsed.data;
  const namespace = parsed.data.kind === CLUSTER_POLICY_KIND || metadata.namespace === "" ? undefined : metadata.namespace;
  // The patterns' cost together, before compiling any (regex.ts): one policy never costs more than this to compile or to look up.
  const over = checkPolicyPatterns(spec.rules.map((r) => r.metric));
  if (over !== undefined) {
    issues.push(issueAt(sd, ["spec", "rules", over.index, "metric"], over.message));
    return undefined;
  }
  const before = issues.length;
  const rules: CompiledRule[] = [];
  spec.rules.forEach((rule, index) => {
    const path = ["spec", "rules", index];
    let pattern;
    try {
      pattern = compileMetricPattern(rule.metric);
    } catch (err) {
      if (!(err instanceof PatternError)) throw err;
      issues.push(issueAt(sd, [...path, "metric"], err.message));
    }
    let selector: Selector | undefined;
    if (rule.selector !== undefined) {
      try {
        selector = compileSelectorInput(rule.selector);
      } catch (err) {
        if (!(err instanceof SelectorError)) throw err;
        issues.push(issueAt(sd, [...path, "selector"], `invalid selector: ${err.message}`));
        return;
      }
    }
    if (pattern !== undefined) {
      rules.push({
        index,
        pattern,
        resources: rule.resources ?? [EXTERNAL_RESOURCE],
        selector,
        selectorText: selector === undefined ? "" : selectorToString(selector),
        line: locate(sd, path).line,
      });
    }
  });
  if (issues.length > before) return undefined;
  const s = spec.subjects;
  const subjects =
    s === undefined
      ? undefined
      : {
          users: new Set([
            ...(s.users ?? []),
            ...(s.serviceAccounts ?? []).map((ref) => {
              const [ns, name] = ref.split("/") as [string, string];
              return serviceAccountUser(ns, name);
            }),
          ]),
          groups: new Set(s.groups ?? []),
        };
  return {
    name: metadata.name,
    namespace,
    id: namespace === undefined ? metadata.name : `${namespace}/${metadata.name}`,
    subjects,
    rules,
    defaultAction: spec.defaultAction,
    source: sd.source,
    line: locate(sd, []).line,
  };
}

/**
 * Compile the ExternalMetricPolicy and ClusterExternalMetricPolicy documents among `docs`.
 *
 * @param options.policiesOnly every document must be a policy (a policy
 *   file); otherwise other kinds are left alone (the config source), except
 *   near-misses such as `ExternalMetricsPolicy`, which are reported
 * @returns compiled policies (those without problems) and every problem;
 *   policy ids (`namespace/name`) must be unique across `docs`
 */
export function compilePolicies(
  docs: readonly SourceDocument[],
  options: { policiesOnly?: boolean } = {},
): { policies: CompiledPolicy[]; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const policies: CompiledPolicy[] = [];
  const seen = new Map<string, CompiledPolicy>();
  for (const sd of docs) {
    const kind = kindOf(sd);
    if (!isPolicyKind(kind)) {
      const near = typeof kind === "string" ? NEAR_MISS.exec(kind) : null;
      if (options.policiesOnly === true || near !== null) {
        const expected = near === null ? `${POLICY_KIND} or ${CLUSTER_POLICY_KIND}` : near[1] === undefined ? POLICY_KIND : CLUSTER_POLICY_KIND;
        issues.push(issueAt(sd, ["kind"], `expected kind ${expected}, found ${JSON.stringify(kind ?? null)}`));
      }
      continue;
    }
    const policy = compilePolicy(sd, issues);
    if (policy === undefined) continue;
    const earlier = seen.get(policy.id);
    if (earlier !== undefined) {
      issues.push(issueAt(sd, ["metadata", "name"], `policy ${policy.id} is already defined at ${earlier.source}:${earlier.line}`));
      continue;
    }
    seen.set(policy.id, policy);
    policies.push(policy);
  }
  return { policies, issues };
}

/** `path` resolved against the directory of `source` (POSIX separators; absolute paths kept). */
export function resolveBeside(source: string, path: string): string {
  if (path.startsWith("/")) return path;
  const slash = source.lastIndexOf("/");
  return slash < 0 ? path : `${source.slice(0, slash + 1)}${path}`;
}

/**
 * Read, parse and compile policy files (every document must be a policy).
 *
 * @param onUnreadable called with (index, message) when a file cannot be read
 */
export function compilePolicyFiles(
  paths: readonly string[],
  readFile: (path: string) => string,
  onUnreadable: (index: number, message: string) => void,
): { policies: CompiledPolicy[]; issues: ConfigIssue[]; docs: SourceDocument[] } {
  const issues: ConfigIssue[] = [];
  const docs: SourceDocument[] = [];
  paths.forEach((path, i) => {
    let text: string;
    try {
      text = readFile(path);
    } catch (err) {
      onUnreadable(i, `cannot read ${path}: ${(err as Error).message}`);
      return;
    }
    try {
      docs.push(...parseYamlDocuments(text, path));
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      issues.push(...err.issues);
    }
  });
  const compiled = compilePolicies(docs, { policiesOnly: true });
  return { policies: compiled.policies, issues: [...issues, ...compiled.issues], docs };
}

/**
 * Build `BridgeConfig.policy` from the config document's `policy:` section
 * and the policies of the source and of `policy.files`.
 *
 * Without a `policy:` section and without policies, the bridge fails closed:
 * the result denies every read (`defaultAction` Deny, `implicit: true`) and
 * the entry points log so at start ({@link IMPLICIT_DENY_NOTE}). Running
 * open takes an explicit `policy: { defaultAction: Allow }` (the local
 * demo's setting). Policies without a `policy:` section are refused, so
 * that the default for callers no policy covers is always stated.
 *
 * @param bridgeDoc the (already validated) BridgeConfig document
 * @param others the source's other documents
 * @throws ConfigError listing every problem with file, line and field
 */
export function loadPolicyConfig(
  bridgeDoc: SourceDocument,
  others: readonly SourceDocument[],
  options: PolicyLoadOptions = {},
): PolicyConfig {
  const raw = (bridgeDoc.value as { policy?: unknown }).policy;
  const compiled = compilePolicies(others);
  const issues = [...compiled.issues];
  const policies = [...compiled.policies];
  if (raw === undefined) {
    if (policies.length === 0 && issues.length === 0) {
      return { defaultAction: "Deny", localIdentity: ANONYMOUS, files: [], policies: new PolicySet([], "Deny", IMPLICIT_DENY_NOTE), implicit: true };
    }
    const first = others.find(isPolicyDocument);
    issues.push({
      source: first?.source ?? bridgeDoc.source,
      line: first !== undefined ? locate(first, []).line : 1,
      column: 1,
      path: "",
      message: "ExternalMetricPolicy objects need a policy section in the BridgeConfig: set policy.defaultAction (Deny for clusters)",
    });
    throw new ConfigError(issues);
  }
  const settings = policySettingsSchema.safeParse(raw);
  if (!settings.success) throw new ConfigError([...zodIssues(bridgeDoc, settings.error, ["policy"]), ...issues]);
  const files = settings.data.files.map((f) => resolveBeside(bridgeDoc.source, f));
  if (files.length > 0) {
    if (options.readFile === undefined) {
      issues.push(
        issueAt(
          bridgeDoc,
          ["policy", "files"],
          "this entry point cannot read files; put the ExternalMetricPolicy documents in the config source instead",
        ),
      );
    } else {
      const fromFiles = compilePolicyFiles(files, options.readFile, (i, message) =>
        issues.push(issueAt(bridgeDoc, ["policy", "files", i], message)),
      );
      issues.push(...fromFiles.issues);
      const ids = new Map(policies.map((p) => [p.id, p]));
      for (const p of fromFiles.policies) {
        const earlier = ids.get(p.id);
        if (earlier !== undefined) {
          issues.push({
            source: p.source,
            line: p.line,
            column: 1,
            path: "metadata.name",
            message: `policy ${p.id} is already defined at ${earlier.source}:${earlier.line}`,
          });
          continue;
        }
        ids.set(p.id, p);
        policies.push(p);
      }
    }
  }
  if (issues.length > 0) throw new ConfigError(issues);
  const identity = settings.data.localIdentity;
  return {
    defaultAction: settings.data.defaultAction,
    localIdentity:
      identity === undefined
        ? ANONYMOUS
        : { user: identity.user, groups: identity.groups, extra: identity.extra, ...(identity.uid !== undefined ? { uid: identity.uid } : {}) },
    files,
    policies: new PolicySet(policies, settings.data.defaultAction),
  };
}
