/**
 * The Node server's bundle (`npm run build:node`, infra/node/build.ts) on a
 * Node.js older than the one it is built for: it must refuse with one line
 * naming both versions and exit 2, not print nothing and exit 0 (on Node 20
 * `import.meta.main` is undefined, so the entry's start test was false).
 * The old Node is the first `node` on the machine's PATH outside this
 * checkout's node_modules whose major is below REQUIRED_NODE_MAJOR
 * (`which -a node`; Node 20 at /usr/bin/node on the development machine).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REQUIRED_NODE_MAJOR } from "../../functions/script-args.ts";
import { buildNodeServer } from "../../infra/node/build.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

/** The machine's Node binaries (not this checkout's), with their versions. */
function machineNodes(): { path: string; version: string }[] {
  const out = spawnSync("bash", ["-c", "which -a node"], { encoding: "utf8" }).stdout;
  return [...new Set(out.split("\n").filter((p) => p !== "" && !p.includes("node_modules")))].map((path) => ({
    path,
    version: execFileSync(path, ["--version"], { encoding: "utf8" }).trim(),
  }));
}

describe("the Node server bundle on an older Node", () => {
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "emb-node-bundle-"));
    await buildNodeServer({ outdir: dir });
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("refuses with the version it runs on and the one it needs, exit 2", () => {
    const old = machineNodes().find((n) => Number(n.version.slice(1).split(".")[0]) < REQUIRED_NODE_MAJOR);
    expect(old, `a node older than ${REQUIRED_NODE_MAJOR} on this machine's PATH (found: ${JSON.stringify(machineNodes())})`).toBeDefined();
    const r = spawnSync(old!.path, [join(dir, "node.mjs"), "--config", join(ROOT, "infra/examples/demo.yaml")], { encoding: "utf8", timeout: 20_000 });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr.trim()).toMatch(new RegExp(`^external-metrics-bridge cannot run on Node\\.js ${old!.version.replaceAll(".", "\\.")}: it needs Node\\.js ${REQUIRED_NODE_MAJOR} or later`));
  });

  it("starts on the Node it is built for (--help, exit 0)", () => {
    const r = spawnSync(process.execPath, [join(dir, "node.mjs"), "--help"], { encoding: "utf8", timeout: 20_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("--config");
  });
});
