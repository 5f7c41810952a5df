/**
 * Converting a `metav1.LabelSelector` to a selector, after
 * `metav1.LabelSelectorAsSelector` in k8s.io/apimachinery (v0.37.2)
 * `pkg/apis/meta/v1/helpers.go`.
 */

import { goQuote } from "./quote.ts";
import { makeRequirement, requirementError } from "./requirement.ts";
import { goSortByKey, goStringCompare } from "./sort.ts";
import { EVERYTHING, NOTHING, SelectorError, type LabelSelector, type Operator, type Requirement, type Selector } from "./types.ts";

const LABEL_SELECTOR_OPERATORS: ReadonlyMap<string, Operator> = new Map<string, Operator>([
  ["In", "in"],
  ["NotIn", "notin"],
  ["Exists", "exists"],
  ["DoesNotExist", "!"],
]);

/** `labels.NewRequirement` as `LabelSelectorAsSelector` calls it; throws SelectorError. */
function checkedRequirement(key: string, operator: Operator, values: readonly string[] | null): Requirement {
  const error = requirementError(key, operator, values);
  if (error !== undefined) throw new SelectorError(error);
  return makeRequirement(key, operator, values ?? []);
}

/**
 * Converts a `metav1.LabelSelector` like `metav1.LabelSelectorAsSelector`
 * (`pkg/apis/meta/v1/helpers.go`):
 *
 * - `null`/`undefined` (Go: nil) → `NOTHING` (matches no labels);
 * - no matchLabels and no matchExpressions (Go: empty) → `EVERYTHING`;
 * - otherwise one `=` requirement per matchLabels entry, then one per
 *   expression, sorted by key. `In`/`NotIn` values are sorted but keep
 *   duplicates, as Go keeps them (`k in (a,a)`).
 *
 * Throws `SelectorError` with apimachinery's message: for an unknown
 * operator (`"Foo" is not a valid label selector operator`), or from
 * `NewRequirement` (invalid key or value, `In`/`NotIn` without values,
 * `Exists`/`DoesNotExist` with values). Go checks matchLabels in random map
 * order; here they go in key order, so the first invalid entry by key is the
 * one reported. Non-string keys, values or operators (possible in untyped
 * input) are rejected too.
 */
export function fromLabelSelector(ls: LabelSelector | null | undefined): Selector {
  if (ls === null || ls === undefined) return NOTHING;
  const matchLabels = ls.matchLabels ?? {};
  const matchExpressions = ls.matchExpressions ?? [];
  const labelKeys = Object.keys(matchLabels).sort(goStringCompare);
  if (labelKeys.length + matchExpressions.length === 0) return EVERYTHING;

  const requirements: Requirement[] = [];
  for (const key of labelKeys) {
    const value: unknown = matchLabels[key];
    if (typeof value !== "string") throw new SelectorError(`matchLabels[${key}]: value must be a string`);
    requirements.push(checkedRequirement(key, "=", [value]));
  }
  matchExpressions.forEach((expr, i) => {
    const operator = LABEL_SELECTOR_OPERATORS.get(expr.operator);
    if (operator === undefined) {
      throw new SelectorError(`${goQuote(String(expr.operator))} is not a valid label selector operator`);
    }
    const values: unknown = expr.values ?? [];
    if (typeof expr.key !== "string" || !Array.isArray(values) || !values.every((v) => typeof v === "string")) {
      throw new SelectorError(`matchExpressions[${i}]: key and values must be strings`);
    }
    // Go copies with append([]string(nil), values...): no values is a nil slice.
    requirements.push(checkedRequirement(expr.key, operator, values.length === 0 ? null : values));
  });
  goSortByKey(requirements);
  return { requirements: Object.freeze(requirements) };
}
