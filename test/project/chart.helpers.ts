/**
 * Rendering and checking the proxy chart in tests: `helm template` through the
 * repository's pinned helm (infra/tools/validate.ts), the rendered objects,
 * and strict kubeconform against the Kubernetes 1.37 schemas. Shared by
 * test/project/infra.chart.test.ts and test/project/chart.*.test.ts.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { ensureSchemas, ensureTool, helmTemplate, kubeconform } from "../../infra/tools/validate.ts";

/** Build (first time: minutes) or find helm, kubeconform and the Kubernetes schemas; for a `beforeAll` with a long timeout. */
export function ensureChartTools(): void {
  ensureTool("helm");
  ensureTool("kubeconform");
  ensureSchemas();
}

/** The release namespace of every render. */
export const NS = "external-metrics-bridge";

/** A rendered Kubernetes object. */
export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> }; [k: string]: any };

/** The objects of a multi-document YAML text (empty documents dropped). */
export function objects(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/** The first object of `kind` (and `name`). @throws Error listing what there is when none matches */
export function find(list: K8sObject[], kind: string, name?: string): K8sObject {
  const found = list.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (!found) throw new Error(`no ${kind}${name ? ` ${name}` : ""} in ${list.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")}`);
  return found;
}

/** `helm template` with `--set`/`--set-json`/`--values` arguments; the rendered objects. @throws Error with helm's message */
export function render(...args: string[]): K8sObject[] {
  return objects(helmTemplate(args));
}

/** helm's error message for a render that must fail. @throws Error when it renders */
export function renderError(...args: string[]): string {
  try {
    helmTemplate(args);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`helm template ${args.join(" ")} rendered`);
}

/** A values file (YAML) in a fresh temporary directory; its path. */
export function valuesFile(values: unknown): string {
  const file = join(mkdtempSync(join(tmpdir(), "emb-chart-values-")), "values.yaml");
  writeFileSync(file, stringify(values));
  return file;
}

/** API groups whose schemas are not available offline (Prometheus Operator, cert-manager): left out of {@link expectValid}. */
export const UNCHECKED_GROUPS = ["monitoring.coreos.com/", "cert-manager.io/"];

/** kubeconform (strict) of objects: every one valid, kinds of {@link UNCHECKED_GROUPS} left out. */
export function expectValid(list: K8sObject[]): void {
  const checked = list.filter((o) => !UNCHECKED_GROUPS.some((g) => o.apiVersion.startsWith(g)));
  const result = kubeconform(["-"], checked.map((o) => JSON.stringify(o)).join("\n---\n"));
  expect(result.ok, JSON.stringify(result.resources.filter((r) => r.status !== "statusValid"), null, 2)).toBe(true);
  expect(result.resources.filter((r) => r.status === "statusValid")).toHaveLength(checked.length);
}

/** The proxy container of the rendered Deployment. */
export const container = (list: K8sObject[]) => find(list, "Deployment").spec.template.spec.containers[0];
/** The pod spec of the rendered Deployment. */
export const podSpec = (list: K8sObject[]) => find(list, "Deployment").spec.template.spec;
