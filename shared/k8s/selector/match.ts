/**
 * Matching a label set, after `Requirement.Matches` and
 * `internalSelector.Matches` in k8s.io/apimachinery (v0.37.2)
 * `pkg/labels/selector.go`.
 */

import type { Requirement, Selector } from "./types.ts";
import { parseGoInt64 } from "./validation.ts";

/** Values of a requirement above which {@link hasValue} looks them up in a Set (a custom.metrics Pods read's `pod in (<1,000 pods>)`). */
const SET_LOOKUP_ABOVE = 8;

/** The value sets of long requirements, made once per (frozen, shared) requirement object. */
const valueSets = new WeakMap<Requirement, ReadonlySet<string>>();

/** Whether `value` is one of `r.values`: a scan for a few values, a Set lookup for many (the same answer, O(1) a label set). */
function hasValue(r: Requirement, value: string | undefined): boolean {
  if (r.values.length <= SET_LOOKUP_ABOVE) return r.values.some((v) => v === value);
  let set = valueSets.get(r);
  if (set === undefined) valueSets.set(r, (set = new Set(r.values)));
  return value !== undefined && set.has(value);
}

function requirementMatches(r: Requirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, r.key);
  const value = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case "in":
    case "=":
    case "==":
      return has && hasValue(r, value);
    case "notin":
    case "!=":
      return !has || !hasValue(r, value);
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
