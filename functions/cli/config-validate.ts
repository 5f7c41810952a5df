/**
 * `config validate FILE…`: each FILE is a BridgeConfig source (with its
 * ExternalMetricPolicy documents and `policy.files`) or a ProxyConfig,
 * told apart by the documents' `kind`, and validated by the loader the
 * component itself runs — `loadConfig` (`shared/config/config.ts`) or
 * `loadProxyConfig` (`shared/proxy/config.ts`) — so the messages are the
 * ones the bridge or the proxy would print at start. An `inProcess`
 * backend's `bridgeConfig` file is validated too when it can be read here
 * (the proxy loads it; an in-cluster path such as `/etc/…` usually cannot
 * be, which is a note, not an error).
 * The providers' advice about valid metric rules (a `prometheus` rule's
 * `onEmpty.value`, a template range longer than `maxAgeSeconds`:
 * {@link ruleWarnings}) is printed as `warning:` lines and changes no exit
 * status. A FILE holding no YAML document (only comments, as
 * `infra/worker/bridge.yaml` ships) is no config rather than an invalid one,
 * as the Worker build reads it ({@link EMPTY_CONFIG_NOTE}). Exit 0 when every FILE is valid, 2 otherwise. A BridgeConfig is checked,
 * and its problems printed, by `../config-check.ts`, as the Worker and
 * Lambda builds do: same messages, same exit status.
 */
import type { BridgeConfig } from "../../shared/config/config.ts";
import { ConfigError, issueAt, parseYamlDocuments, type ConfigIssue, type SourceDocument } from "../../shared/config/yaml.ts";
import { lintRules } from "../../shared/providers/registry.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { checkBridgeDocuments, INVALID_CONFIG_EXIT, printConfigIssues, unreadableIssue } from "../config-check.ts";
import { EXIT, plural, printJson, type Io, type OutputFormat } from "./io.ts";
import { readText, STDIN } from "./workspace.ts";

/** What a text holding no YAML document means to each runtime (`config validate` prints it; the Worker build agrees: `infra/worker/build.ts`). */
export const EMPTY_CONFIG_NOTE =
  "a Worker built with it bundles no config and reads its BRIDGE_CONFIG binding; the Node server and the Lambda function refuse it as their config";

/** Options of {@link configValidate}. */
export interface ValidateOptions {
  output: OutputFormat;
}

/** The outcome for one FILE. */
export interface ValidatedFile {
  file: string;
  /** `BridgeConfig`, `ProxyConfig`, or undefined when neither was found (valid only when the text holds no document at all) */
  kind?: string;
  valid: boolean;
  issues: ConfigIssue[];
  /** advice about valid metric rules (`ruleWarnings`): printed, never a failure */
  warnings: ConfigIssue[];
  /** e.g. the bridge's provider and metric counts */
  summary?: string;
  /** what was not checked, and why */
  notes: string[];
}

/**
 * The providers' advice about a valid config's metric rules
 * (`ProviderModule.lintRule`, `lintRules` in `shared/providers/registry.ts`;
 * e.g. a `prometheus` rule's `onEmpty.value`), each located at its field
 * in the BridgeConfig document. The providers' implementations must be
 * loaded (`loadProviderModules`); a rule whose provider's is not gets none.
 *
 * @param documents the config source's documents as parsed; the one of kind BridgeConfig locates the fields
 */
export function ruleWarnings(config: BridgeConfig, documents: readonly SourceDocument[]): ConfigIssue[] {
  const bridge = documents.find((d) => (d.value as { kind?: unknown } | null)?.kind === "BridgeConfig");
  if (bridge === undefined) return [];
  return lintRules(config.providers, [...config.metrics, ...config.customMetrics]).map((f) => issueAt(bridge, ["metrics", f.index, ...f.path], f.message));
}

/** A warning as printed: `file:line:column: warning: path: message` (as `policy lint` prints its findings). */
export function formatWarning(w: ConfigIssue): string {
  return `${w.source}:${w.line}:${w.column}: warning: ${w.path ? `${w.path}: ` : ""}${w.message}`;
}

/**
 * Validate one config text.
 *
 * @param source the name in messages (a path, `<stdin>`)
 */
export function validateConfigText(text: string, source: string): ValidatedFile {
  const out: ValidatedFile = { file: source, valid: false, issues: [], warnings: [], notes: [] };
  try {
    const documents = parseYamlDocuments(text, source);
    const kinds = new Set(documents.map((d) => (d.value as { kind?: unknown } | null)?.kind));
    if (documents.length === 0) {
      // as the Worker build reads infra/worker/bridge.yaml as shipped (infra/worker/build.ts): no config, not an invalid one
      out.summary = `no YAML document (empty, or only comments): nothing to validate (${EMPTY_CONFIG_NOTE})`;
    } else if (kinds.has("BridgeConfig")) {
      out.kind = "BridgeConfig";
      const { config, issues } = checkBridgeDocuments(documents, source, { readFile: readText });
      out.issues.push(...issues);
      if (config !== undefined) {
        out.warnings.push(...ruleWarnings(config, documents));
        out.summary = `${plural(Object.keys(config.providers).length, "provider")}, ${plural(config.metrics.length + config.customMetrics.length, "metric rule")}, ${plural(config.policy?.policies.policies.length ?? 0, "policy", "policies")}`;
      }
    } else if (kinds.has("ProxyConfig")) {
      out.kind = "ProxyConfig";
      const proxy = loadProxyConfig(text, source);
      const backends = proxy.backends;
      out.summary = plural(backends.length, "backend");
      for (const [i, b] of backends.entries()) {
        if (b.bridgeConfig === undefined) continue;
        const file = b.bridgeConfig; // read as the proxy reads it (shared/proxy/forward/in-process.ts): relative to the working directory
        let inner: string;
        try {
          inner = readText(file);
        } catch (err) {
          out.notes.push(`backends[${i}].bridgeConfig ${file} not checked: ${(err as Error).message} (validate it with config validate FILE where it can be read)`);
          continue;
        }
        const v = validateConfigText(inner, file);
        out.issues.push(...v.issues);
        out.warnings.push(...v.warnings);
      }
    } else {
      out.issues.push({ source, line: 1, column: 1, path: "", message: "no document with kind: BridgeConfig or kind: ProxyConfig" });
    }
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    out.issues.push(...err.issues);
  }
  out.valid = out.issues.length === 0;
  return out;
}

/** Run `config validate`; returns the exit code (0 every file valid, warnings or not; 2 otherwise). */
export function configValidate(files: readonly string[], options: ValidateOptions, io: Io): number {
  const results: ValidatedFile[] = files.map((file) => {
    const source = file === STDIN ? "<stdin>" : file;
    let text: string;
    try {
      text = readText(file);
    } catch (err) {
      return { file: source, valid: false, notes: [], warnings: [], issues: [unreadableIssue(source, err)] };
    }
    return validateConfigText(text, source);
  });
  const invalid = results.filter((r) => !r.valid).length;
  if (options.output === "json") printJson(io, { valid: invalid === 0, files: results });
  else {
    for (const r of results) {
      if (r.valid && r.kind === undefined) io.out(`${r.file}: ${r.summary}`);
      else if (r.valid) io.out(`${r.file}: valid ${r.kind}${r.summary !== undefined ? ` (${r.summary})` : ""}`);
      else printConfigIssues(r.issues, io.err);
      for (const w of r.warnings) io.out(formatWarning(w));
      for (const n of r.notes) io.out(`note: ${r.file}: ${n}`);
    }
    if (invalid > 0) io.err(`${plural(invalid, "invalid file")} of ${files.length}`);
  }
  return invalid === 0 ? EXIT.OK : INVALID_CONFIG_EXIT;
}
