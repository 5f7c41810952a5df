/**
 * The canonical string of a requirement and a selector, after
 * `Requirement.String` and `internalSelector.String` in k8s.io/apimachinery
 * (v0.37.2) `pkg/labels/selector.go`.
 */

import { goStringCompare } from "./sort.ts";
import type { Operator, Requirement, Selector } from "./types.ts";

const OPERATOR_TEXT: Readonly<Record<Operator, string>> = {
  "=": "=",
  "==": "==",
  "!=": "!=",
  in: " in ",
  notin: " notin ",
  gt: ">",
  lt: "<",
  exists: "",
  "!": "",
};

/**
 * One requirement in apimachinery's canonical form (`Requirement.String`,
 * `pkg/labels/selector.go`): `key`, `!key`, `key=v`, `key==v`, `key!=v`,
 * `key in (a,b)`, `key notin (a,b)`, `key>n`, `key<n`. Values of
 * `in`/`notin` are printed sorted; an empty value prints as nothing
 * (`key=`, `key in ()`). Never throws.
 */
export function requirementToString(r: Requirement): string {
  const head = `${r.operator === "!" ? "!" : ""}${r.key}${OPERATOR_TEXT[r.operator] ?? ""}`;
  if (r.operator === "exists" || r.operator === "!") return head;
  const values = r.values.length === 1 ? (r.values[0] ?? "") : [...r.values].sort(goStringCompare).join(",");
  return r.operator === "in" || r.operator === "notin" ? `${head}(${values})` : `${head}${values}`;
}

/**
 * The canonical string of a selector (`labels.Selector.String()`,
 * `pkg/labels/selector.go`): the requirements' strings joined by `,`, in the
 * selector's order (already sorted by key when it came from `parseSelector`
 * or `fromLabelSelector`). `EVERYTHING` and `NOTHING` both give `""`, as in
 * Go. Parsing the result gives back an equal selector. Never throws.
 */
export function selectorToString(sel: Selector): string {
  if (sel.nothing === true) return "";
  return sel.requirements.map(requirementToString).join(",");
}
