/**
 * Selector containment (shared/policy/subset.ts) against brute force.
 *
 * The brute force enumerates every label set over two keys, each absent or
 * holding one value of UNIVERSE, and compares `matchesLabels` (apimachinery's
 * `Requirement.Matches`, mirrored). UNIVERSE is rich enough for the check to
 * be exact for selectors built from VALUES and BOUNDS: two values behave
 * alike under every such requirement when they are the same literal or
 * (both not literals and) have the same integer class relative to the bounds
 * (not an integer, < 0, 0, 1, 2, 3, > 3) — and UNIVERSE holds every literal
 * plus a non-literal representative of each class. So "Q ⊆ S over UNIVERSE"
 * is "Q ⊆ S over all label sets": agreement means no false allow and no
 * false deny.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fcRuns } from "../helpers/fc.ts";
import { matchesLabels, newRequirement, NOTHING, type Requirement, type Selector } from "../../shared/k8s/selector.ts";
import { isSatisfiable, selectorSubset } from "../../shared/policy/subset.ts";

const KEYS = ["k", "j"] as const;
const VALUES = ["a", "b", "0", "1", "2", "3", "01"];
const BOUNDS = ["0", "1", "2", "3"];
/** one non-literal per class: not an integer, < 0, > 3, and other spellings of 0..3 */
const FRESH = ["zz", "-1", "4", "00", "001", "002", "003"];
const UNIVERSE = [...VALUES, ...FRESH];

/** every label set over KEYS × (absent | UNIVERSE): 15 × 15 = 225 */
const LABEL_SETS: Record<string, string>[] = (() => {
  const states = [undefined, ...UNIVERSE];
  const out: Record<string, string>[] = [];
  for (const a of states) {
    for (const b of states) {
      const labels: Record<string, string> = {};
      if (a !== undefined) labels[KEYS[0]] = a;
      if (b !== undefined) labels[KEYS[1]] = b;
      out.push(labels);
    }
  }
  return out;
})();

function bruteSubset(q: Selector, s: Selector): boolean {
  return LABEL_SETS.every((l) => !matchesLabels(q, l) || matchesLabels(s, l));
}
function bruteSatisfiable(q: Selector): boolean {
  return LABEL_SETS.some((l) => matchesLabels(q, l));
}
function sel(requirements: Requirement[]): Selector {
  return { requirements };
}

const key = fc.constantFrom(...KEYS);
const value = fc.constantFrom(...VALUES);
const requirement: fc.Arbitrary<Requirement> = fc.oneof(
  fc
    .tuple(key, fc.constantFrom("in", "notin" as const), fc.uniqueArray(value, { minLength: 1, maxLength: 3 }))
    .map(([k, op, vs]) => newRequirement(k, op, vs)),
  fc.tuple(key, fc.constantFrom("=", "==", "!=" as const), value).map(([k, op, v]) => newRequirement(k, op, [v])),
  fc.tuple(key, fc.constantFrom("exists", "!" as const)).map(([k, op]) => newRequirement(k, op, [])),
  fc.tuple(key, fc.constantFrom("gt", "lt" as const), fc.constantFrom(...BOUNDS)).map(([k, op, n]) => newRequirement(k, op, [n])),
);
const selector: fc.Arbitrary<Selector> = fc.oneof(
  { weight: 20, arbitrary: fc.array(requirement, { maxLength: 4 }).map(sel) },
  { weight: 1, arbitrary: fc.constant(NOTHING) },
);

/** A requirement every label set matching `r` also matches (or a random one, sometimes). */
function weaken(r: Requirement): fc.Arbitrary<Requirement> {
  const extra = fc.uniqueArray(value, { maxLength: 2 });
  switch (r.operator) {
    case "in":
    case "=":
    case "==":
      return fc.oneof(
        extra.map((vs) => newRequirement(r.key, "in", [...new Set([...r.values, ...vs])])),
        fc.constant(newRequirement(r.key, "exists", [])),
      );
    case "notin":
    case "!=":
      return fc.subarray([...r.values], { minLength: 1 }).map((vs) => newRequirement(r.key, "notin", vs));
    case "!":
      return fc.oneof(value.map((v) => newRequirement(r.key, "!=", [v])), fc.constant(r));
    case "gt":
    case "lt": {
      const n = Number(r.values[0]);
      const looser = r.operator === "gt" ? Math.max(0, n - 1) : n + 1;
      return fc.oneof(
        fc.constant(newRequirement(r.key, r.operator, [String(looser)])),
        fc.constant(newRequirement(r.key, "exists", [])),
        fc.constant(r),
      );
    }
    default:
      return fc.constant(r);
  }
}

/** (Q, S) where S is mostly implied by Q: exercises the "subset" answers. */
const nearPair: fc.Arbitrary<[Selector, Selector]> = fc
  .array(requirement, { minLength: 1, maxLength: 4 })
  .chain((qs) =>
    fc
      .tuple(
        fc.subarray(qs).chain((kept): fc.Arbitrary<Requirement[]> => (kept.length === 0 ? fc.constant([]) : fc.tuple(...kept.map(weaken)))),
        fc.array(requirement, { maxLength: 1 }),
      )
      .map(([weak, noise]) => [sel(qs), sel([...weak, ...noise])] as [Selector, Selector]),
  );

describe("selector containment equals brute force", () => {
  it("on random pairs and on near pairs, both answers well represented", () => {
    const seen = { subset: 0, notSubset: 0 };
    const check = ([q, s]: [Selector, Selector]) => {
      const expected = bruteSubset(q, s);
      const actual = selectorSubset(q, s);
      expect(actual.subset).toBe(expected);
      seen[expected ? "subset" : "notSubset"]++;
    };
    fc.assert(fc.property(fc.tuple(selector, selector), check), fcRuns(3000));
    fc.assert(fc.property(nearPair, check), fcRuns(3000, 20261124));
    // both directions were really exercised (no false allow, no false deny)
    expect(seen.subset).toBeGreaterThan(1000);
    expect(seen.notSubset).toBeGreaterThan(1000);
  });

  it("satisfiability equals brute force", () => {
    let unsat = 0;
    fc.assert(
      fc.property(selector, (q) => {
        const expected = bruteSatisfiable(q);
        expect(isSatisfiable(q)).toBe(expected);
        if (!expected) unsat++;
      }),
      fcRuns(3000),
    );
    expect(unsat).toBeGreaterThan(100);
  });

  it("names the first requirement of S that Q does not imply", () => {
    fc.assert(
      fc.property(fc.oneof(fc.tuple(selector, selector), nearPair), ([q, s]) => {
        const result = selectorSubset(q, s);
        if (result.subset || s.nothing === true) return;
        const missing = result.missing!;
        const index = s.requirements.indexOf(missing);
        expect(index).toBeGreaterThanOrEqual(0);
        expect(bruteSubset(q, sel([missing]))).toBe(false);
        for (const earlier of s.requirements.slice(0, index)) expect(bruteSubset(q, sel([earlier]))).toBe(true);
      }),
      fcRuns(2000),
    );
  });
});
