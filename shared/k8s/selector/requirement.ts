/**
 * Building one validated requirement, after `labels.NewRequirement` in
 * k8s.io/apimachinery (v0.37.2) `pkg/labels/selector.go`: the checks, their
 * order and their aggregated message (`field.ErrorList.ToAggregate()`), with
 * the nil `*field.Path` that `labels.Parse` and `LabelSelectorAsSelector`
 * pass.
 */

import { goJSONString, goJSONStrings, goQuote } from "./quote.ts";
import { goStringCompare } from "./sort.ts";
import { SelectorError, type Operator, type Requirement } from "./types.ts";
import { aggregateMessage, invalidFieldError, labelKeyErrors, labelValueErrors, parseGoInt64 } from "./validation.ts";

const ALL_OPERATORS: readonly Operator[] = ["in", "notin", "=", "==", "!=", "gt", "lt", "exists", "!"];

/**
 * The checks of `labels.NewRequirement` with a nil field path: the key, the
 * number of values for the operator, that `gt`/`lt` values are integers, and
 * every value. Returns the aggregated message, or undefined when valid.
 * `values === null` stands for a Go nil slice (shown as `null`, not `[]`).
 */
export function requirementError(key: string, operator: string, values: readonly string[] | null): string | undefined {
  const vals = values ?? [];
  const errs: string[] = [];
  const keyErrs = labelKeyErrors(key);
  if (keyErrs.length > 0) errs.push(invalidFieldError("key", key, keyErrs.join("; ")));
  const valuesJSON = { json: goJSONStrings(values) };
  switch (operator) {
    case "in":
    case "notin":
      if (vals.length === 0) {
        errs.push(invalidFieldError("values", valuesJSON, "for 'in', 'notin' operators, values set can't be empty"));
      }
      break;
    case "=":
    case "==":
    case "!=":
      if (vals.length !== 1) {
        errs.push(invalidFieldError("values", valuesJSON, "exact-match compatibility requires one single value"));
      }
      break;
    case "exists":
    case "!":
      if (vals.length !== 0) {
        errs.push(invalidFieldError("values", valuesJSON, "values set must be empty for exists and does not exist"));
      }
      break;
    case "gt":
    case "lt":
      if (vals.length !== 1) {
        errs.push(invalidFieldError("values", valuesJSON, "for 'Gt', 'Lt' operators, exactly one value is required"));
      }
      vals.forEach((v, i) => {
        if (parseGoInt64(v) === undefined) {
          errs.push(invalidFieldError(`values[${i}]`, v, "for 'Gt', 'Lt' operators, the value must be an integer"));
        }
      });
      break;
    default: {
      // field.NotSupported: the bad value is a selection.Operator, which Go prints as JSON.
      const supported = ALL_OPERATORS.map((op) => goQuote(op)).join(", ");
      errs.push(`operator: Unsupported value: ${goJSONString(operator)}: supported values: ${supported}`);
    }
  }
  vals.forEach((v, i) => {
    const valueErrs = labelValueErrors(v);
    if (valueErrs.length > 0) errs.push(invalidFieldError(`values[${i}][${key}]`, v, valueErrs.join("; ")));
  });
  return errs.length > 0 ? aggregateMessage(errs) : undefined;
}

/** A frozen Requirement from checked parts; `in`/`notin` values sorted (duplicates kept). */
export function makeRequirement(key: string, operator: Operator, values: readonly string[]): Requirement {
  const stored = operator === "in" || operator === "notin" ? [...values].sort(goStringCompare) : [...values];
  return Object.freeze({ key, operator, values: Object.freeze(stored) });
}

/**
 * Builds one validated requirement, like `labels.NewRequirement`
 * (`pkg/labels/selector.go`): `in`/`notin` need at least one value, `=`,
 * `==`, `!=` exactly one, `exists`/`!` none, `gt`/`lt` exactly one integer
 * (Go `strconv.ParseInt` base 10); the key must pass `validateLabelKey` and
 * every value `validateLabelValue`. `in`/`notin` values come back sorted
 * (duplicates kept, as Go keeps them).
 *
 * Throws `SelectorError` with apimachinery's aggregated message, e.g.
 * `values[0][x]: Invalid value: "a b": a valid label must be ...`.
 */
export function newRequirement(key: string, operator: Operator, values: readonly string[]): Requirement {
  const error = requirementError(key, operator, values);
  if (error !== undefined) throw new SelectorError(error);
  return makeRequirement(key, operator, values);
}
