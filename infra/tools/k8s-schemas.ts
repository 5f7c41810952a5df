/**
 * JSON Schemas for kubeconform, generated offline from the Kubernetes
 * OpenAPI v2 document (`api/openapi-spec/swagger.json` of the
 * `k8s.io/kubernetes` module, fetched through the Go module proxy).
 *
 * kubeconform normally downloads the schemas of yannh/kubernetes-json-schema,
 * which are the same document cut per kind (openapi2jsonschema). This does
 * the same cut locally, in kubeconform's file layout
 * (`<kind><-group><-version>.json`, kubeconform `pkg/registry/registry.go`
 * `schemaPath`), with the conventions of those schemas:
 *
 * - one file per `x-kubernetes-group-version-kind` of a definition, the
 *   definitions it references (transitively) embedded under `definitions`
 *   so every `$ref` (`#/definitions/<name>`) resolves inside the file;
 * - strict: every object schema that lists `properties` gets
 *   `additionalProperties: false`, so unknown fields fail;
 * - `IntOrString` accepts a string or an integer, `Quantity` a string or a
 *   number (what the API server accepts).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

type Schema = Record<string, unknown>;
interface Swagger {
  definitions: Record<string, Schema>;
}

const REF = "#/definitions/";
const INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/** kubeconform's file name for a kind: `deployment-apps-v1.json`, `service-v1.json`. */
export function schemaFileName(group: string, version: string, kind: string): string {
  const suffix = group === "" ? `-${version.toLowerCase()}` : `-${group.split(".")[0]!.toLowerCase()}-${version.toLowerCase()}`;
  return `${kind.toLowerCase()}${suffix}.json`;
}

/**
 * Write the schemas of every kind in `swaggerPath` into `outDir`.
 *
 * @returns the number of files written
 * @throws Error when the document has no definitions
 */
export function writeKubeconformSchemas(swaggerPath: string, outDir: string): number {
  const swagger = JSON.parse(readFileSync(swaggerPath, "utf8")) as Swagger;
  if (!swagger.definitions) throw new Error(`${swaggerPath}: not an OpenAPI v2 document with definitions`);
  const definitions = Object.fromEntries(Object.entries(swagger.definitions).map(([name, schema]) => [name, adapt(name, schema)]));
  mkdirSync(outDir, { recursive: true });
  let written = 0;
  for (const [name, schema] of Object.entries(definitions)) {
    const gvks = swagger.definitions[name]!["x-kubernetes-group-version-kind"] as { group: string; version: string; kind: string }[] | undefined;
    if (!gvks) continue;
    const closure: Record<string, Schema> = {};
    collect(schema, definitions, closure);
    for (const gvk of gvks) {
      const file = join(outDir, schemaFileName(gvk.group, gvk.version, gvk.kind));
      // Several definitions carry the shared kinds (e.g. DeleteOptions, WatchEvent) for many versions; the first one wins.
      if (existsSync(file) && gvks.length > 1) continue;
      writeFileSync(file, JSON.stringify({ ...schema, definitions: closure }));
      written++;
    }
  }
  return written;
}

/** The kubeconform variant of one definition. */
function adapt(name: string, schema: Schema): Schema {
  if (name === INT_OR_STRING) return { description: schema["description"], oneOf: [{ type: "string" }, { type: "integer" }] };
  if (name === QUANTITY) return { description: schema["description"], oneOf: [{ type: "string" }, { type: "number" }] };
  return strict(structuredClone(schema));
}

function strict(node: unknown): Schema {
  if (Array.isArray(node)) return node.map(strict) as unknown as Schema;
  if (node === null || typeof node !== "object") return node as Schema;
  const out: Schema = {};
  for (const [k, v] of Object.entries(node as Schema)) out[k] = k === "properties" ? mapValues(v as Schema, strict) : strict(v);
  if ("properties" in out && !("additionalProperties" in out)) out["additionalProperties"] = false;
  return out;
}

function mapValues(obj: Schema, fn: (v: unknown) => unknown): Schema {
  return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, fn(v)]));
}

/** Add every definition `node` references (transitively) to `into`. */
function collect(node: unknown, definitions: Record<string, Schema>, into: Record<string, Schema>): void {
  if (Array.isArray(node)) {
    for (const item of node) collect(item, definitions, into);
    return;
  }
  if (node === null || typeof node !== "object") return;
  for (const [k, v] of Object.entries(node as Schema)) {
    if (k === "$ref" && typeof v === "string" && v.startsWith(REF)) {
      const name = v.slice(REF.length);
      if (into[name] !== undefined) continue;
      const target = definitions[name];
      if (target === undefined) throw new Error(`unresolved $ref ${v}`);
      into[name] = target;
      collect(target, definitions, into);
    } else collect(v, definitions, into);
  }
}
