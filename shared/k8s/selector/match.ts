/**
 * Matching a label set, after `Requirement.Matches` and
 * `internalSelector.Matches` in k8s.io/apimachinery (v0.37.2)
 * `pkg/labels/selector.go`.
 */

import type { Requirement, Selector } from "./types.ts";
import { parseGoInt64 } from "./validation.ts";

function requirementMatches(r: Requirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case "in":
    case "=":
    case "==":
      return has && r.values.some((v) => v === value);
    case "notin":
    case "!=":
      return !has || !r.values.some((v) => v === value);
    case "exists":
      return has;
    case "!":
      return !has;
    case "gt":
    case "lt": {
      if (!has || r.values.length !== 1) return false;
      const actual = parseGoInt64(value);
      const bound = parseGoInt64(r.values[0]);
      if (actual === undefined || bound === undefined) return false;
      return r.operator === "gt" ? actual > bound : actual < bound;
    }
    default:
      return false;
  }
}

/**
 * Whether a label set satisfies every requirement (`Selector.Matches`,
 * `pkg/labels/selector.go`). `in`/`=`/`==` need the key with one of the
 * values; `notin`/`!=` also match when the key is absent; `gt`/`lt` need the
 * key with a value Go's `strconv.ParseInt` accepts (else no match).
 * `EVERYTHING` matches anything, `NOTHING` nothing. Only own properties of
 * `labels` count. Never throws.
 */
export function matchesLabels(sel: Selector, labels: Readonly<Record<string, string>>): boolean {
  if (sel.nothing === true) return false;
  return sel.requirements.every((r) => requirementMatches(r, labels));
}
