/**
 * A JSON-only stand-in for the `yaml` package, bundled into a Worker built
 * with its config converted to JSON at build time (`infra/worker/build.ts
 * --json`, wrangler `--alias yaml:…`). It implements exactly what the
 * bridge uses of `yaml` (`shared/config/yaml.ts`, `functions/worker.ts`):
 * `parseAllDocuments`, `LineCounter` and the node guards, over JSON text,
 * so the YAML parser (≈ 100 KiB, 31 KiB gzip) is not in the script.
 *
 * Documents: a JSON array is a list of documents (the YAML stream's
 * documents in order; a BridgeConfig is never an array), any other JSON
 * value is one document, blank text is none. Positions are not tracked:
 * a validation message names the field path at line 1, column 1 — the
 * bundled config was validated with line numbers at build time. Text that is
 * not JSON (e.g. a YAML `BRIDGE_CONFIG` secret) is one error saying this
 * Worker reads JSON only.
 */

/** What the bridge reads of a parsed document (`yaml`'s `Document.Parsed`). */
export interface JsonDocument {
  errors: { pos: [number, number]; message: string }[];
  /** the value; `null` for an empty document (never produced here) */
  contents: unknown;
  toJS(options?: unknown): unknown;
}

/** The message for text that is not JSON. */
export const NOT_JSON =
  "this Worker was built with its config as JSON (infra/worker/build.ts --json): it has no YAML parser, so BRIDGE_CONFIG must be JSON (a BridgeConfig object, or an array of documents); rebuild without --json to read YAML";

/** `yaml`'s `LineCounter`: every offset is line 1, column 1 here. */
export class LineCounter {
  linePos(_offset: number): { line: number; col: number } {
    return { line: 1, col: 1 };
  }
}

/** The documents of a JSON text (see the file comment). */
export function parseAllDocuments(text: string, _options?: unknown): JsonDocument[] {
  if (text.trim() === "") return [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return [{ errors: [{ pos: [0, 0], message: `${NOT_JSON} (${(err as Error).message})` }], contents: undefined, toJS: () => undefined }];
  }
  const values = Array.isArray(value) ? value : [value];
  return values.map((v) => ({ errors: [], contents: v, toJS: () => structuredClone(v) }));
}

/** Node guards of `yaml`: there are no YAML nodes here, so `locate` stays at the document's start. */
export const isMap = (_node: unknown): boolean => false;
export const isPair = (_node: unknown): boolean => false;
export const isScalar = (_node: unknown): boolean => false;
export const isSeq = (_node: unknown): boolean => false;
