/**
 * "Validate a config, print its problems, exit 2", the one way every tool
 * does it: the admin CLI's `config validate` (`./cli/config-validate.ts`),
 * `infra/worker/build.ts` (`--check`, `--config`) and
 * `infra/lambda/build.ts --config`. The config is validated by the loader
 * the runtime itself runs (`loadConfig`, `shared/config/config.ts`), so the
 * messages are the ones the bridge would answer with; each problem is one
 * `file:line:column: path: message` line on stderr (`formatIssue`), and the
 * exit status is {@link INVALID_CONFIG_EXIT}.
 *
 * The text is parsed once: the parsed documents come back with the result
 * (the Worker build bundles them as JSON).
 */
import { readFileSync } from "node:fs";
import { loadConfigDocuments, type BridgeConfig } from "../shared/config/config.ts";
import { ConfigError, formatIssue, parseYamlDocuments, type ConfigIssue, type SourceDocument } from "../shared/config/yaml.ts";
import type { PolicyLoadOptions } from "../shared/policy/load.ts";

/** Exit status of a tool given an invalid or unreadable config (the admin CLI's usage status, `EXIT.USAGE`). */
export const INVALID_CONFIG_EXIT = 2;

/** A config text checked by {@link checkBridgeConfig}. */
export interface ConfigCheck {
  /** the name in messages */
  source: string;
  /** the YAML documents of the text, in order (empty: the text holds none); undefined when it cannot be read or does not parse */
  documents?: SourceDocument[];
  /** the validated config; undefined when {@link issues} is not empty */
  config?: BridgeConfig;
  /** every problem, located; empty when the config is valid */
  issues: ConfigIssue[];
}

/**
 * Validate documents already parsed as a BridgeConfig source, as the
 * runtime loads it.
 *
 * @param options `readFile` for `policy.files`; without it (the Worker and
 *   Lambda, which read no files) a config listing files is refused
 * @throws only what is not a ConfigError (a bug), never for an invalid config
 */
export function checkBridgeDocuments(documents: SourceDocument[], source: string, options: PolicyLoadOptions = {}): ConfigCheck {
  try {
    return { source, documents, config: loadConfigDocuments(documents, source, options).config, issues: [] };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { source, documents, issues: err.issues };
  }
}

/**
 * Parse `text` (once) and validate it as a BridgeConfig source. A text with
 * no document is invalid too ("expected exactly one document with kind:
 * BridgeConfig, found 0"); a caller to which that means "no config" looks at
 * `documents?.length === 0` first.
 *
 * @param source the name in messages (a path, `<stdin>`)
 */
export function checkBridgeConfig(text: string, source: string, options: PolicyLoadOptions = {}): ConfigCheck {
  let documents: SourceDocument[];
  try {
    documents = parseYamlDocuments(text, source);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { source, issues: err.issues };
  }
  return checkBridgeDocuments(documents, source, options);
}

/** The problem of a file that cannot be read, located at its first line. */
export function unreadableIssue(source: string, err: unknown): ConfigIssue {
  return { source, line: 1, column: 1, path: "", message: `cannot read: ${(err as Error).message}` };
}

/**
 * Read the file `path` and check it ({@link checkBridgeConfig}); an
 * unreadable file is one issue ({@link unreadableIssue}).
 *
 * @param source the name in messages, default `path`
 */
export function checkBridgeConfigFile(path: string, options: PolicyLoadOptions & { source?: string } = {}): ConfigCheck {
  const { source = path, ...load } = options;
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    return { source, issues: [unreadableIssue(source, err)] };
  }
  return checkBridgeConfig(text, source, load);
}

/**
 * Print every issue, one `formatIssue` line each, and return
 * {@link INVALID_CONFIG_EXIT}.
 *
 * @param err where a line goes; default stderr
 */
export function printConfigIssues(issues: readonly ConfigIssue[], err: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): number {
  for (const issue of issues) err(formatIssue(issue));
  return INVALID_CONFIG_EXIT;
}
