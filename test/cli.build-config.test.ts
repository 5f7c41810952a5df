/**
 * The builds refuse a config the runtime would refuse (issue 12): `npm run
 * build:lambda -- --config FILE` validates FILE as the Lambda handler loads
 * it, and `npm run build:worker` (plain wrangler) first runs
 * `infra/worker/build.ts --check` on the config it would bundle
 * (`infra/worker/bridge.yaml`). Before, a broken YAML was packaged and the
 * build exited 0.
 */
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "./helpers/worker.ts";

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
    // a copy of the project whose bundled config is broken: package.json, wrangler.toml and
    // infra/worker/build.ts copied (the script finds the project from its own path), the rest linked
    const d = scratch();
    for (const f of ["shared", "functions", "node_modules"]) symlinkSync(join(ROOT, f), join(d, f));
    mkdirSync(join(d, "infra/worker"), { recursive: true });
    for (const f of ["package.json", "wrangler.toml", "infra/worker/build.ts"]) copyFileSync(join(ROOT, f), join(d, f));
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
