/**
 * kubeconform schemas for custom resources, generated from the
 * CustomResourceDefinitions themselves (what kubeconform's own
 * `scripts/openapi2jsonschema.py` does for CRDs): each served version's
 * `schema.openAPIV3Schema`, in kubeconform's file layout
 * (`<kind>-<group prefix>-<version>.json`, `k8s-schemas.ts`
 * {@link schemaFileName}), strict like the API server with field validation
 * `Strict` (kubectl's default): every object schema that lists `properties`
 * gets `additionalProperties: false` unless it has
 * `x-kubernetes-preserve-unknown-fields`, a list with
 * `x-kubernetes-list-type: set` gets `uniqueItems: true` (the API server
 * refuses duplicates in it), and `apiVersion`/`kind` must be the CRD's. What JSON Schema cannot check is not checked here:
 * `x-kubernetes-validations` (CEL) rules, which only the API server
 * evaluates.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { schemaFileName } from "./k8s-schemas.ts";

type Schema = Record<string, unknown>;

interface Crd {
  kind: string;
  spec: { group: string; names: { kind: string }; versions: { name: string; served: boolean; schema?: { openAPIV3Schema: Schema } }[] };
}

function strict(schema: Schema): Schema {
  const out: Schema = { ...schema };
  const props = schema["properties"] as Record<string, Schema> | undefined;
  if (props !== undefined) {
    out["properties"] = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, strict(v)]));
    if (schema["additionalProperties"] === undefined && schema["x-kubernetes-preserve-unknown-fields"] !== true) out["additionalProperties"] = false;
  }
  const items = schema["items"] as Schema | undefined;
  if (items !== undefined) out["items"] = strict(items);
  // a set list: the API server refuses duplicates (structural schemas may not say uniqueItems themselves)
  if (schema["x-kubernetes-list-type"] === "set") out["uniqueItems"] = true;
  const extra = schema["additionalProperties"];
  if (typeof extra === "object" && extra !== null) out["additionalProperties"] = strict(extra as Schema);
  return out;
}

/**
 * Write one JSON Schema per served version of every CRD in `crdFiles`.
 *
 * @param crdFiles YAML files holding CustomResourceDefinitions (other kinds are skipped)
 * @param outDir directory to write into (created)
 * @returns a `-schema-location` template for kubeconform
 * @throws Error when a served version has no schema
 */
export function writeCrdSchemas(crdFiles: readonly string[], outDir: string): string {
  mkdirSync(outDir, { recursive: true });
  for (const file of crdFiles) {
    for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
      const crd = (Array.isArray(doc) ? null : doc.toJS()) as Crd | null;
      if (crd?.kind !== "CustomResourceDefinition") continue;
      for (const v of crd.spec.versions.filter((x) => x.served)) {
        const root = v.schema?.openAPIV3Schema;
        if (root === undefined) throw new Error(`${file}: ${crd.spec.names.kind} ${v.name} has no openAPIV3Schema`);
        const schema = strict(root);
        const props = { ...(schema["properties"] as Record<string, Schema>) };
        props["apiVersion"] = { ...props["apiVersion"], enum: [`${crd.spec.group}/${v.name}`] };
        props["kind"] = { ...props["kind"], enum: [crd.spec.names.kind] };
        schema["properties"] = props;
        schema["required"] = [...new Set(["apiVersion", "kind", "metadata", ...((schema["required"] as string[] | undefined) ?? [])])];
        writeFileSync(join(outDir, schemaFileName(crd.spec.group, v.name, crd.spec.names.kind)), JSON.stringify(schema));
      }
    }
  }
  return join(outDir, "{{ .ResourceKind }}{{ .KindSuffix }}.json");
}
