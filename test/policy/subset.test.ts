/**
 * The containment table of ../shared/POLICY.md, row by row, on selectors as
 * an HPA or an admin writes them.
 */
import { describe, expect, it } from "vitest";
import { fromLabelSelector, NOTHING, parseSelector, requirementToString } from "../../shared/k8s/selector.ts";
import { isSatisfiable, selectorSubset } from "../../shared/policy/subset.ts";

function subset(q: string, s: string): boolean {
  return selectorSubset(parseSelector(q), parseSelector(s)).subset;
}
function missing(q: string, s: string): string | undefined {
  const r = selectorSubset(parseSelector(q), parseSelector(s));
  return r.subset || r.missing === undefined ? undefined : requirementToString(r.missing);
}

describe("Q ⊆ S, the POLICY.md table", () => {
  it.each([
    // k in V: Q restricts k to a finite set inside V
    ["k=a", "k in (a,b)", true],
    ["k in (a,b)", "k in (a,b,c)", true],
    ["k in (a,c),k in (a,b)", "k in (a,b)", true], // intersection {a}
    ["k in (a,z),k!=z", "k in (a,b)", true],
    ["k in (a,z)", "k in (a,b)", false],
    ["k", "k in (a,b)", false],
    ["k notin (z)", "k in (a,b)", false],
    ["k>1", "k in (2,3)", false], // infinitely many integers (and spellings)
    ["k>1,k<3", "k in (2)", false], // 2, 02, 002, +2 …
    ["", "k in (a)", false],
    // k notin V
    ["k notin (a,b,c)", "k notin (a,b)", true],
    ["!k", "k notin (a)", true],
    ["k in (c,d)", "k notin (a,b)", true],
    ["k notin (a)", "k notin (a,b)", false],
    ["k", "k notin (a)", false],
    ["k>1", "k notin (a,0)", true], // a is not an integer, 0 is not above 1
    ["k>1", "k notin (5)", false],
    ["k>1,k!=5", "k notin (5)", true],
    // exists
    ["k=a", "k", true],
    ["k in (a,b)", "k", true],
    ["k>3", "k", true],
    ["k!=a", "k", false],
    ["", "k", false],
    // !k
    ["!k", "!k", true],
    ["k notin (a)", "!k", false],
    ["k=a", "!k", false],
    // = and != as in {v} / notin {v}
    ["k==a", "k=a", true],
    ["k notin (a,b)", "k!=a", true],
    ["k!=b", "k!=a", false],
    // k>n / k<n: Q restricts k to integers all above / below n
    ["k>5", "k>3", true],
    ["k>3", "k>3", true],
    ["k>2", "k>3", false],
    ["k in (4,5,007)", "k>3", true],
    ["k in (4,x)", "k>3", false],
    ["k=4", "k<5", true],
    ["k<3", "k<4", true],
    ["k<4", "k<3", false],
    ["k", "k>0", false],
    ["k!=1", "k>0", false], // absent is allowed by Q, not by S
    // several requirements: Q must imply each one
    ["k=a,j=b", "k=a", true],
    ["k=a", "k=a,j=b", false],
    ["k=a,j in (b,c)", "j,k in (a,z)", true],
  ])("%j ⊆ %j is %s", (q, s, expected) => {
    expect(subset(q, s)).toBe(expected);
  });

  it("an unsatisfiable Q is a subset of anything", () => {
    for (const q of ["k=a,k=b", "k,!k", "k>5,k<3", "k>3,k<4", "k=a,k>1", "k in (a),k notin (a)", "k>9223372036854775807"]) {
      expect(isSatisfiable(parseSelector(q))).toBe(false);
      expect(subset(q, "j=x,!k")).toBe(true);
    }
    expect(selectorSubset(NOTHING, parseSelector("k=a")).subset).toBe(true);
  });

  it("an empty Q is a subset only of an empty S; S = Nothing contains only unsatisfiable Q", () => {
    expect(subset("", "")).toBe(true);
    expect(selectorSubset(parseSelector(""), fromLabelSelector({})).subset).toBe(true);
    for (const s of ["k", "!k", "k notin (a)", "k>0"]) expect(subset("", s)).toBe(false);
    expect(selectorSubset(parseSelector("k=a"), NOTHING)).toEqual({ subset: false, missing: undefined });
    expect(selectorSubset(parseSelector("k=a,k=b"), NOTHING).subset).toBe(true);
  });

  it("gt/lt need the key with an integer value; != matches a set without the key", () => {
    // a label set without k: `k>1` does not match it, `k!=v` does
    expect(subset("!k", "k>1")).toBe(false);
    expect(subset("!k", "k!=v")).toBe(true);
    // values are any strings: `k<0` matches "-1" although no label value is negative
    expect(isSatisfiable(parseSelector("k<0"))).toBe(true);
    expect(subset("k<0", "k in (x)")).toBe(false);
  });

  it("names the requirement of S that Q does not imply", () => {
    expect(missing("queue=c", "queue in (a,b)")).toBe("queue in (a,b)");
    expect(missing("queue=a", "queue in (a,b),tier=gold")).toBe("tier=gold");
    expect(missing("queue=a,tier=gold", "queue in (a,b),tier=gold")).toBeUndefined();
  });

  it("policy selectors written as metav1.LabelSelector mean the same", () => {
    const s = fromLabelSelector({ matchLabels: { team: "a" }, matchExpressions: [{ key: "queue", operator: "In", values: ["x", "y"] }] });
    expect(selectorSubset(parseSelector("team=a,queue=x"), s).subset).toBe(true);
    expect(selectorSubset(parseSelector("queue=x"), s).subset).toBe(false);
  });
});
