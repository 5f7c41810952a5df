/**
 * The builds refuse a config the runtime would refuse (issue 12): `npm run
 * build:lambda -- --config FILE` validates FILE as the Lambda handler loads
 * it, and `npm run build:worker` (plain wrangler) first runs
 * `infra/worker/build.ts --check` on the config it would bundle
 * (`infra/worker/bridge.yaml`). Before, a broken YAML was packaged and the
 * build exited 0.
 */
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../helpers/worker.ts";

const exec = promisify(execFile);
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), "emb-build-config-"));
  dirs.push(d);
  return d;
}

async function run(file: string, args: string[], cwd = ROOT): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(file, args, { cwd, maxBuffer: 16 << 20 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof e.code !== "number") throw err;
    return { code: e.code, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** A BridgeConfig with two mistakes the loader names by line. */
const BROKEN = "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: BridgeConfig\nproviders: {}\nmetrics: []\nbogus: 1\n";
const BROKEN_MESSAGES = ["bridge.yaml:4:10: metrics: at least one metric rule is required", "bridge.yaml:5:1: bogus: unknown field"];

/** npm as the test was started with (npm_execpath), else the one on PATH. */
function npm(args: string[], cwd: string) {
  const cli = process.env["npm_execpath"];
  return cli !== undefined && cli !== "" ? run(process.execPath, [cli, ...args], cwd) : run("npm", args, cwd);
}

describe("build:lambda --config", () => {
  it("an invalid config fails the build (exit 2, the loader's messages) and nothing is written", async () => {
    const d = scratch();
    const config = join(d, "bridge.yaml");
    writeFileSync(config, BROKEN);
    const outdir = join(d, "out");
    const r = await run(process.execPath, [join(ROOT, "infra/lambda/build.ts"), "--outdir", outdir, "--config", config]);
    expect(r.code).toBe(2);
    for (const m of BROKEN_MESSAGES) expect(r.stderr).toContain(m);
    expect(existsSync(outdir)).toBe(false);
  });

  it("a config listing policy.files is refused too: the Lambda handler reads no files", async () => {
    const d = scratch();
    const config = join(d, "bridge.yaml");
    copyFileSync(join(ROOT, "infra/examples/policies/bridge.yaml"), config);
    const r = await run(process.execPath, [join(ROOT, "infra/lambda/build.ts"), "--outdir", join(d, "out"), "--config", config]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("policy.files: this entry point cannot read files");
  });
});

describe("build:worker", () => {
  it("npm run build:worker refuses an invalid infra/worker/bridge.yaml before wrangler runs (prebuild:worker)", async () => {
    // a copy of the project whose bundled config is broken: package.json, wrangler.toml,
    // infra/worker/build.ts, infra/build-common.ts and infra/tools/provider-tables.ts copied (the
    // scripts find the project from their own path), the rest linked
    const d = scratch();
    for (const f of ["shared", "functions", "node_modules"]) symlinkSync(join(ROOT, f), join(d, f));
    mkdirSync(join(d, "infra/worker"), { recursive: true });
    mkdirSync(join(d, "infra/tools"), { recursive: true });
    for (const f of ["package.json", "wrangler.toml", "infra/worker/build.ts", "infra/build-common.ts", "infra/tools/provider-tables.ts"]) copyFileSync(join(ROOT, f), join(d, f));
    writeFileSync(join(d, "infra/worker/bridge.yaml"), BROKEN);
    const r = await npm(["run", "build:worker"], d);
    expect(r.code).not.toBe(0);
    for (const m of BROKEN_MESSAGES) expect(r.stderr).toContain(`infra/worker/bridge.yaml${m.slice("bridge.yaml".length)}`);
    expect(existsSync(join(d, "dist/worker"))).toBe(false); // wrangler never ran
  });

  it("the check passes on the shipped (empty) bridge.yaml and on a valid config", async () => {
    const shipped = await run(process.execPath, [join(ROOT, "infra/worker/build.ts"), "--check"]);
    expect(shipped).toMatchObject({ code: 0, stdout: "infra/worker/bridge.yaml: no config bundled (the Worker reads its BRIDGE_CONFIG binding)\n" });
    const demo = await run(process.execPath, [join(ROOT, "infra/worker/build.ts"), "--check", "--config", join(ROOT, "infra/examples/demo.yaml")]);
    expect(demo).toMatchObject({ code: 0, stdout: "infra/examples/demo.yaml: valid BridgeConfig (providers aws-sqs)\n" });
  });
});

describe("one config check for every tool (functions/config-check.ts): same messages, exit 2", () => {
  const worker = (...args: string[]) => run(process.execPath, [join(ROOT, "infra/worker/build.ts"), ...args]);
  const lambda = (d: string, config: string) => run(process.execPath, [join(ROOT, "infra/lambda/build.ts"), "--outdir", join(d, "out"), "--config", config]);
  const cli = (config: string) => run(process.execPath, [join(ROOT, "functions/cli.ts"), "config", "validate", config]);

  it("an invalid config: the Worker check, the Worker build, the Lambda build and config validate print the same lines", async () => {
    const d = scratch();
    const config = join(d, "bridge.yaml");
    writeFileSync(config, BROKEN);
    const expected = BROKEN_MESSAGES.map((m) => `${d}/${m}`);
    const results = await Promise.all([worker("--check", "--config", config), worker("--config", config, "--outdir", join(d, "w")), lambda(d, config), cli(config)]);
    for (const r of results) {
      expect(r.code).toBe(2);
      expect(r.stderr.split("\n").filter((l) => l.startsWith(d))).toEqual(expected);
    }
    expect(existsSync(join(d, "w"))).toBe(false);
    expect(existsSync(join(d, "out"))).toBe(false);
  });

  it("an unreadable config is one located line 'cannot read: …' in each (the builds printed a bare ENOENT before)", async () => {
    const d = scratch();
    const missing = join(d, "missing.yaml");
    const results = await Promise.all([worker("--check", "--config", missing), worker("--config", missing, "--outdir", join(d, "w")), lambda(d, missing), cli(missing)]);
    for (const r of results) {
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^${missing.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:1:1: cannot read: ENOENT`, "m"));
    }
  });
});

describe("the Worker and Node builds take their arguments as the Lambda build does (commander, callerPath)", () => {
  it.each([
    ["infra/worker/build.ts", ["Usage: node infra/worker/build.ts", "--providers <types>", "--config <file>", "--json", "--check", "--outdir <dir>", "wrangler-args"]],
    ["infra/node/build.ts", ["Usage: npm run build:node --", "--outdir <dir>"]],
  ])("node %s --help lists the options and exits 0", async (script, expected) => {
    const r = await run(process.execPath, [join(ROOT, script), "--help"]);
    expect(r.code).toBe(0);
    for (const text of expected) expect(r.stdout).toContain(text);
  });

  it("an unknown option is a usage error (exit 2) pointing at --help", async () => {
    for (const script of ["infra/worker/build.ts", "infra/node/build.ts"]) {
      const r = await run(process.execPath, [join(ROOT, script), "--no-such-option"]);
      expect(r.code, script).toBe(2);
      expect(r.stderr).toContain("(add --help for the options)");
    }
  });

  it("under an npm script, a relative --config is the file in the directory npm was run from (INIT_CWD), not the project's", async () => {
    const d = scratch();
    writeFileSync(join(d, "mine.yaml"), readFileSync(join(ROOT, "infra/examples/demo.yaml"), "utf8"));
    // as npm runs a script: the working directory is the project, INIT_CWD where npm was typed
    const env = { ...process.env, npm_lifecycle_event: "prebuild:worker", INIT_CWD: d };
    const r = await exec(process.execPath, [join(ROOT, "infra/worker/build.ts"), "--check", "--config", "mine.yaml"], { cwd: ROOT, env });
    expect(r.stdout).toContain("valid BridgeConfig (providers aws-sqs)");
    expect(r.stdout).toContain(relative(ROOT, join(d, "mine.yaml"))); // shown relative to the project root (wherever the clone is)
  });
});
