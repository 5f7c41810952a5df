/**
 * Label selector containment: is every label set a request selector Q
 * matches also matched by a policy selector S (Q ⊆ S)?
 *
 * Semantics are apimachinery's `Requirement.Matches`
 * (`k8s.io/apimachinery/pkg/labels/selector.go`, mirrored by
 * `shared/k8s/selector.ts` `matchesLabels`), over label sets whose values are
 * ANY strings:
 *
 * - `k in V` / `k=v` / `k==v`: k present with a value in V;
 * - `k notin V` / `k!=v`: k absent, or present with a value not in V;
 * - `k`: k present; `!k`: k absent;
 * - `k>n` / `k<n`: k present with a value Go's `strconv.ParseInt(v, 10, 64)`
 *   accepts, above / below n (so `k>1` does not match a set without k, nor
 *   `k=abc`).
 *
 * Why any strings and not only valid label values: it is the conservative
 * choice. Q ⊆ S over all strings implies Q ⊆ S over valid label values, so
 * this never allows more than the narrower reading would; the readings
 * differ only on oddities such as `k<0` (no valid label value is a negative
 * integer, but `-1` is a string) or a selector that lists every
 * leading-zero spelling of a number. Every integer has infinitely many
 * spellings (`7`, `07`, `+7`, …), so a finite list never covers one.
 *
 * Method: both selectors are conjunctions, so Q ⊆ S iff Q is unsatisfiable
 * or Q implies every requirement of S. Keys are independent, so Q implies a
 * requirement on k iff the set of states Q allows for k (absent, or one of a
 * set of strings) lies inside the requirement's set. {@link keyDomain}
 * computes that set exactly; `test/policy/subset.property.test.ts` checks the result
 * against brute force over label universes rich enough to be exact.
 */
import type { Requirement, Selector } from "../k8s/selector.ts";

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * `strconv.ParseInt(s, 10, 64)` as `Requirement.Matches` uses it: optional
 * sign, decimal digits, within int64; undefined otherwise.
 */
export function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n >= INT64_MIN && n <= INT64_MAX ? n : undefined;
}

/**
 * The string values a selector allows for one key:
 * - `none`: no value (the key must be absent, if allowed at all);
 * - `set`: exactly these values (non-empty);
 * - `ints`: every string that parses as an integer in [min, max]
 *   (min ≤ max), except the finitely many in `excluded` — always infinite;
 * - `any`: every string except those in `excluded` — always infinite.
 */
export type ValueDomain =
  | { kind: "none" }
  | { kind: "set"; values: ReadonlySet<string> }
  | { kind: "ints"; min: bigint; max: bigint; excluded: ReadonlySet<string> }
  | { kind: "any"; excluded: ReadonlySet<string> };

/** What a selector allows for one key: absence, and which values. */
export interface KeyDomain {
  absent: boolean;
  values: ValueDomain;
}

/** The domain of a key no requirement mentions: anything. */
const UNCONSTRAINED: KeyDomain = Object.freeze({ absent: true, values: Object.freeze({ kind: "any", excluded: new Set<string>() }) });

/**
 * The exact set of states the given requirements (all on one key) allow.
 * Requirements whose bound is not an int64 (impossible after validation)
 * match nothing, as in apimachinery.
 */
export function keyDomain(requirements: readonly Requirement[]): KeyDomain {
  let absent = true;
  let forbidden = false; // a `!k`
  let inSet: Set<string> | undefined;
  const excluded = new Set<string>();
  let numeric = false;
  let min = INT64_MIN;
  let max = INT64_MAX;
  let empty = false;
  for (const r of requirements) {
    switch (r.operator) {
      case "in":
      case "=":
      case "==": {
        absent = false;
        const values = new Set(r.values);
        inSet = inSet === undefined ? values : new Set([...inSet].filter((v) => values.has(v)));
        break;
      }
      case "notin":
      case "!=":
        for (const v of r.values) excluded.add(v);
        break;
      case "exists":
        absent = false;
        break;
      case "!":
        forbidden = true;
        break;
      case "gt":
      case "lt": {
        absent = false;
        numeric = true;
        const bound = r.values.length === 1 ? parseInt64(r.values[0]!) : undefined;
        if (bound === undefined) empty = true;
        else if (r.operator === "gt") min = bound + 1n > min ? bound + 1n : min;
        else max = bound - 1n < max ? bound - 1n : max;
        break;
      }
      default:
        absent = false;
        empty = true;
    }
  }
  if (forbidden || empty) return { absent: absent && !empty, values: { kind: "none" } };
  const inRange = (v: string) => {
    if (!numeric) return true;
    const n = parseInt64(v);
    return n !== undefined && n >= min && n <= max;
  };
  if (inSet !== undefined) {
    const values = new Set([...inSet].filter((v) => !excluded.has(v) && inRange(v)));
    return { absent, values: values.size > 0 ? { kind: "set", values } : { kind: "none" } };
  }
  if (numeric) return { absent, values: min <= max ? { kind: "ints", min, max, excluded } : { kind: "none" } };
  return { absent, values: { kind: "any", excluded } };
}

/** Whether a key domain allows no state at all. */
function isEmpty(d: KeyDomain): boolean {
  return !d.absent && d.values.kind === "none";
}

/** Whether the value domain contains `v`. */
function containsValue(values: ValueDomain, v: string): boolean {
  switch (values.kind) {
    case "none":
      return false;
    case "set":
      return values.values.has(v);
    case "ints": {
      if (values.excluded.has(v)) return false;
      const n = parseInt64(v);
      return n !== undefined && n >= values.min && n <= values.max;
    }
    case "any":
      return !values.excluded.has(v);
  }
}

/**
 * Whether every state of a (non-empty) key domain satisfies `s`, a
 * requirement on that key. See the table in `../shared/POLICY.md`.
 */
export function domainImplies(d: KeyDomain, s: Requirement): boolean {
  if (isEmpty(d)) return true;
  const { values } = d;
  switch (s.operator) {
    case "in":
    case "=":
    case "==": {
      // absence is outside V; `ints` and `any` are infinite, V is finite
      if (d.absent || values.kind !== "set") return false;
      return [...values.values].every((v) => s.values.includes(v));
    }
    case "notin":
    case "!=":
      return s.values.every((v) => !containsValue(values, v));
    case "exists":
      return !d.absent;
    case "!":
      return values.kind === "none";
    case "gt":
    case "lt": {
      const bound = s.values.length === 1 ? parseInt64(s.values[0]!) : undefined;
      if (bound === undefined || d.absent) return false;
      const ok = (n: bigint) => (s.operator === "gt" ? n > bound : n < bound);
      switch (values.kind) {
        case "none":
          return true;
        case "set":
          return [...values.values].every((v) => {
            const n = parseInt64(v);
            return n !== undefined && ok(n);
          });
        case "ints":
          // every integer in [min, max] keeps a spelling outside `excluded`
          return s.operator === "gt" ? values.min > bound : values.max < bound;
        case "any":
          return false;
      }
      return false;
    }
    default:
      return false;
  }
}

/** Requirements grouped by key. */
function byKey(sel: Selector): Map<string, Requirement[]> {
  const out = new Map<string, Requirement[]>();
  for (const r of sel.requirements) {
    const list = out.get(r.key);
    if (list === undefined) out.set(r.key, [r]);
    else list.push(r);
  }
  return out;
}

/**
 * A request selector prepared for repeated containment checks (one request
 * is checked against several policies): its per-key domains, computed once.
 */
export class PreparedSelector {
  readonly selector: Selector;
  readonly satisfiable: boolean;
  readonly #domains: Map<string, KeyDomain>;

  constructor(selector: Selector) {
    this.selector = selector;
    this.#domains = new Map();
    let satisfiable = selector.nothing !== true;
    for (const [key, reqs] of byKey(selector)) {
      const d = keyDomain(reqs);
      this.#domains.set(key, d);
      if (isEmpty(d)) satisfiable = false;
    }
    this.satisfiable = satisfiable;
  }

  /** What the selector allows for `key`. */
  domain(key: string): KeyDomain {
    return this.#domains.get(key) ?? UNCONSTRAINED;
  }
}

/** The answer of {@link selectorSubset}. */
export type SubsetResult =
  | { subset: true }
  /** `missing`: the first requirement of S (in S's order) that Q does not imply; undefined when S matches nothing */
  | { subset: false; missing: Requirement | undefined };

/**
 * Whether request selector `q` is a subset of policy selector `s`: every
 * label set `q` matches is matched by `s`.
 *
 * - an unsatisfiable `q` (`k=a,k=b`, `k>5,k<3`, `labels.Nothing()`) is a
 *   subset of anything;
 * - an empty `q` matches everything and is a subset only of an empty `s`;
 * - `s` = `labels.Nothing()` contains only unsatisfiable `q`.
 *
 * Pure, never throws; O(|q| + |s| · values).
 */
export function selectorSubset(q: Selector | PreparedSelector, s: Selector): SubsetResult {
  const prepared = q instanceof PreparedSelector ? q : new PreparedSelector(q);
  if (!prepared.satisfiable) return { subset: true };
  if (s.nothing === true) return { subset: false, missing: undefined };
  for (const r of s.requirements) {
    if (!domainImplies(prepared.domain(r.key), r)) return { subset: false, missing: r };
  }
  return { subset: true };
}

/** Whether some label set matches `sel`. */
export function isSatisfiable(sel: Selector): boolean {
  return new PreparedSelector(sel).satisfiable;
}
