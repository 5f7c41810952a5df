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
 *
 * The same graph holds the layout of the proxy (shared/proxy/): its
 * composition roots (server.ts, which wires every part, and app.ts, the
 * request pipeline server.ts builds) are imported by no file of shared/
 * other than the one above them ({@link COMPOSITION_ROOTS}; the entries in
 * functions/ and the tests may), and its rooms (the sub-folders: authn/,
 * authz/, tls/, kube/, forward/, policy/, admission/) import one another in
 * one direction, so a room never reaches back into what composes it.
 */
import { describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const TSC = join(ROOT, "node_modules", ".bin", "tsc");

let explained: Map<string, Set<string>> | undefined;

/** `from → to` edges between files of the program, paths relative to the repository (the compiler runs once per test file). */
function importGraph(): Map<string, Set<string>> {
  return (explained ??= compilerGraph());
}

/** The graph as `tsc --explainFiles` prints it. */
function compilerGraph(): Map<string, Set<string>> {
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

/**
 * The proxy's composition roots and the only files of shared/ allowed to
 * import each: the entries (functions/) and tests import them, the rooms
 * never do.
 */
const COMPOSITION_ROOTS: ReadonlyMap<string, readonly string[]> = new Map([
  ["shared/proxy/server.ts", []],
  ["shared/proxy/app.ts", ["shared/proxy/server.ts"]],
]);

/** `from → to` for each import of a composition root by a file of shared/ not allowed to import it. */
function importsOfRoots(graph: Map<string, Set<string>>): string[] {
  const found: string[] = [];
  for (const [from, edges] of graph) {
    if (!from.startsWith("shared/")) continue;
    for (const to of edges) {
      const allowed = COMPOSITION_ROOTS.get(to);
      if (allowed !== undefined && !allowed.includes(from)) found.push(`${from} → ${to}`);
    }
  }
  return found.sort();
}

/** The room of a file of the proxy: its sub-folder of shared/proxy/ (undefined for the files at its top and any other file). */
function roomOf(file: string): string | undefined {
  return /^shared\/proxy\/([^/]+)\//.exec(file)?.[1];
}

/** Room → rooms it imports (a room importing itself is not an edge). */
function roomGraph(graph: Map<string, Set<string>>): Map<string, Set<string>> {
  const rooms = new Map<string, Set<string>>();
  for (const [from, edges] of graph) {
    const a = roomOf(from);
    if (a === undefined) continue;
    for (const to of edges) {
      const b = roomOf(to);
      if (b === undefined || b === a) continue;
      let out = rooms.get(a);
      if (out === undefined) rooms.set(a, (out = new Set()));
      out.add(b);
    }
  }
  return rooms;
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

  it("finds an import of a composition root and a loop of rooms when there is one (the checks themselves)", () => {
    const g = new Map([
      ["shared/proxy/server.ts", new Set(["shared/proxy/app.ts", "shared/proxy/authn/authenticate.ts"])],
      ["shared/proxy/authn/authenticate.ts", new Set(["shared/proxy/app.ts", "shared/proxy/tls/pem.ts"])],
      ["shared/proxy/tls/pem.ts", new Set(["shared/proxy/server.ts", "shared/proxy/authn/client-cert.ts"])],
      ["functions/proxy/main.ts", new Set(["shared/proxy/server.ts"])],
    ]);
    expect(importsOfRoots(g)).toEqual(["shared/proxy/authn/authenticate.ts → shared/proxy/app.ts", "shared/proxy/tls/pem.ts → shared/proxy/server.ts"]);
    expect(cycles(roomGraph(g), () => true)).toEqual([["authn", "tls"]]);
  });

  it("keeps the proxy's composition roots (server.ts, app.ts) imported by no room, and its rooms in one direction", () => {
    const graph = importGraph();
    expect(importsOfRoots(graph), "each line: a file of shared/ that imports a composition root").toEqual([]);
    const rooms = roomGraph(graph);
    expect(rooms.size, "the proxy's rooms import one another").toBeGreaterThan(3);
    expect(cycles(rooms, () => true).map((c) => c.join(" → ")), "each line: rooms of shared/proxy/ that import each other in a loop").toEqual([]);
  }, 120_000);
});
