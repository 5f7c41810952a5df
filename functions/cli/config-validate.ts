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
 * Exit 0 when every FILE is valid, 2 otherwise. A BridgeConfig is checked,
 * and its problems printed, by `../config-check.ts`, as the Worker and
 * Lambda builds do: same messages, same exit status.
 */
import { ConfigError, parseYamlDocuments, type ConfigIssue } from "../../shared/config/yaml.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { checkBridgeDocuments, INVALID_CONFIG_EXIT, printConfigIssues, unreadableIssue } from "../config-check.ts";
import { EXIT, plural, printJson, type Io, type OutputFormat } from "./io.ts";
import { readText, STDIN } from "./workspace.ts";

/** Options of {@link configValidate}. */
export interface ValidateOptions {
  output: OutputFormat;
}

/** The outcome for one FILE. */
export interface ValidatedFile {
  file: string;
  /** `BridgeConfig`, `ProxyConfig`, or undefined when neither was found */
  kind?: string;
  valid: boolean;
  issues: ConfigIssue[];
  /** e.g. the bridge's provider and metric counts */
  summary?: string;
  /** what was not checked, and why */
  notes: string[];
}

/**
 * Validate one config text.
 *
 * @param source the name in messages (a path, `<stdin>`)
 */
export function validateConfigText(text: string, source: string): ValidatedFile {
  const out: ValidatedFile = { file: source, valid: false, issues: [], notes: [] };
  try {
    const documents = parseYamlDocuments(text, source);
    const kinds = new Set(documents.map((d) => (d.value as { kind?: unknown } | null)?.kind));
    if (kinds.has("BridgeConfig")) {
      out.kind = "BridgeConfig";
      const { config, issues } = checkBridgeDocuments(documents, source, { readFile: readText });
      out.issues.push(...issues);
      if (config !== undefined) {
        out.summary = `${plural(Object.keys(config.providers).length, "provider")}, ${plural(config.metrics.length, "metric rule")}, ${plural(config.policy?.policies.policies.length ?? 0, "policy", "policies")}`;
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

/** Run `config validate`; returns the exit code (0 every file valid, 2 otherwise). */
export function configValidate(files: readonly string[], options: ValidateOptions, io: Io): number {
  const results: ValidatedFile[] = files.map((file) => {
    const source = file === STDIN ? "<stdin>" : file;
    let text: string;
    try {
      text = readText(file);
    } catch (err) {
      return { file: source, valid: false, notes: [], issues: [unreadableIssue(source, err)] };
    }
    return validateConfigText(text, source);
  });
  const invalid = results.filter((r) => !r.valid).length;
  if (options.output === "json") printJson(io, { valid: invalid === 0, files: results });
  else {
    for (const r of results) {
      if (r.valid) io.out(`${r.file}: valid ${r.kind}${r.summary !== undefined ? ` (${r.summary})` : ""}`);
      else printConfigIssues(r.issues, io.err);
      for (const n of r.notes) io.out(`note: ${r.file}: ${n}`);
    }
    if (invalid > 0) io.err(`${plural(invalid, "invalid file")} of ${files.length}`);
  }
  return invalid === 0 ? EXIT.OK : INVALID_CONFIG_EXIT;
}
