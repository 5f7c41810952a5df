/**
 * No import cycles in `shared/` (issue 24): the library's files import
 * one another in one direction, so each can be read, tested and moved with
 * what it imports and nothing that imports it.
 *
 * The import graph is the TypeScript compiler's own: `tsc --explainFiles`
 * (the project's `typescript`, tsconfig.json) prints, for every file of the
 * program, each import that brought it in (`Imported via "./x.ts" from file
 * 'shared/y.ts'`), type-only imports included, as the compiler resolved
 * them. This test only reads those lines into a graph and finds its strongly
 * connected components (Tarjan's algorithm); a component of more than one
 * file, or a file importing itself, is a cycle.
 */
import { describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const TSC = join(ROOT, "node_modules", ".bin", "tsc");

/** `from → to` edges between files of the program, paths relative to the repository. */
function importGraph(): Map<string, Set<string>> {
  const out = execFileSync(TSC, ["-p", "tsconfig.json", "--explainFiles", "--noEmit"], { cwd: ROOT, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  const graph = new Map<string, Set<string>>();
  let current: string | undefined;
  for (const line of out.split("\n")) {
    if (line.length > 0 && !line.startsWith(" ")) {
      current = line.trim();
      continue;
    }
    const m = /^\s+Imported via .* from file '([^']+)'/.exec(line);
    if (m === null || current === undefined) continue;
    const from = m[1]!;
    let edges = graph.get(from);
    if (edges === undefined) graph.set(from, (edges = new Set()));
    edges.add(current);
  }
  return graph;
}

/** Strongly connected components with more than one file, or a file that imports itself. */
function cycles(graph: Map<string, Set<string>>, keep: (file: string) => boolean): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const strongConnect = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!keep(w)) continue;
      if (!index.has(w)) {
        strongConnect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)?.has(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (keep(v) && !index.has(v)) strongConnect(v);
  return found;
}

describe("the import graph of shared/", () => {
  it("finds a cycle when there is one (the check itself)", () => {
    const g = new Map([
      ["a", new Set(["b"])],
      ["b", new Set(["c"])],
      ["c", new Set(["a"])],
      ["d", new Set(["d"])],
      ["e", new Set(["a"])],
    ]);
    expect(cycles(g, () => true)).toEqual([["a", "b", "c"], ["d"]]);
  });

  it("has no import cycles (type-only imports included)", () => {
    const graph = importGraph();
    const shared = [...graph.keys()].filter((f) => f.startsWith("shared/"));
    expect(shared.length, "the compiler's explanation names shared/ files").toBeGreaterThan(50);
    const found = cycles(graph, (f) => f.startsWith("shared/"));
    expect(found.map((c) => c.join(" → ")), "each line: files that import each other in a loop").toEqual([]);
  }, 120_000);
});
