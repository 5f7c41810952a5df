/**
 * Every shell command the docs quote (README.md, docs/**\/*.md,
 * infra/helm/**\/README.md; extraction rules: test/docs/commands.ts) is
 * either run here, as a user types it, or found in {@link NOT_RUN}, a
 * reviewed list of commands that need a cluster, a cloud account, an
 * editor or a long run, each with its reason. A new quoted command that is
 * neither fails "every quoted command is run or listed".
 *
 * How a command is run ({@link RULES}, first match):
 * - `as-is`: the command line itself through `bash -c`, in the repository
 *   or in a scratch directory holding the files it names, with its
 *   documented exit status (and its quoted heredoc on stdin);
 * - `help`: a command that would deploy, build for minutes or need a
 *   cluster runs as its `--help` variant (`npm run X -- … --help`,
 *   `npx node F … --help`, a CLI subcommand's own help): it must exit 0
 *   and list every `--option` the quoted command uses;
 * - `check`: a Worker build runs as `--check` (validates the config it
 *   would bundle, no wrangler);
 * - `demo`: `npm start`, `npm run queue -- …` and the README's `curl`
 *   against a demo this suite starts on free ports, the documented way to
 *   move them (`PORT`, `SQS_PORT`; the curl line's 8080 replaced).
 *
 * The environment is the user's as the docs assume it: the PATH without
 * the project's `node_modules/.bin`, so `node` is whatever the machine has
 * (Node 20 on this one: `node FILE.ts` fails there, which is why the docs
 * write `npx node FILE.ts` and `npm run …`); only 127.0.0.1 is reached.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SAR_ALLOWED_TTL_MS, SAR_DENIED_TTL_MS } from "../../shared/proxy/authz/authorize.ts";
import { docFiles, quotedCommands, type QuotedCommand } from "../docs/commands.ts";
import { freePort } from "../helpers/ports.ts";

const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/** The user's PATH: this checkout's `node_modules/.bin` (which vitest and npm scripts put first) removed. */
const USER_PATH = (process.env["PATH"] ?? "")
  .split(delimiter)
  .filter((dir) => !dir.includes("node_modules/.bin") && !dir.includes("node_modules/node/bin"))
  .join(delimiter);
const ENV: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !k.startsWith("npm_") && k !== "INIT_CWD" && k !== "NODE_OPTIONS" && !k.startsWith("VITEST") && k !== "BRIDGE_SIGNING_KEYS"),
);
ENV["PATH"] = USER_PATH;
ENV["WRANGLER_SEND_METRICS"] = "false";

/** How a quoted command is checked. */
type Rule =
  | { run: "as-is"; code: number; cwd?: "repo" | "workspace"; why?: string }
  | { run: "help" }
  | { run: "check" }
  | { run: "demo" }
  | { listed: string };

/**
 * Commands not run, each with why: they need a Kubernetes cluster, a cloud
 * account, an editor, or minutes of CPU (each of those is exercised by a
 * suite named in the reason where one exists). Matched against the whole
 * normalised command.
 */
const NOT_RUN: [RegExp, string][] = [
  [/^kubectl\b/, "needs a Kubernetes cluster (test/e2e/*.e2e.test.ts run the equivalent reads against a real control plane)"],
  [/^helm (install|upgrade)\b/, "installs into a Kubernetes cluster (the chart's render is checked by test/project/infra*.test.ts with helm and kubeconform)"],
  [/^gcloud\b/, "needs a Google Cloud project"],
  [/^aws\b/, "needs an AWS account"],
  [/^npx (wrangler|serverless)\b(?! deploy --dry-run)|^cp bridge\.yaml infra\/worker\/bridge\.yaml && npx wrangler deploy$/, "deploys to (or logs in to) Cloudflare or AWS: needs an account"],
  [/^npx wrangler deploy --dry-run --outdir dist\/worker$|^npm run build:worker$/, "wrangler's Worker build (≈ 20 s of CPU): test/setup/worker-bundle.ts builds the same bundle for the integration suites"],
  [/^curl -s "https:\/\//, "reaches a deployed Worker or Lambda Function URL: needs a cloud account"],
  [/^\$EDITOR /, "opens an editor"],
  [/^npm ci\b(?! &&)|^npm ci --ignore-scripts$/, "reinstalls node_modules (a fresh clone's first step; .ci/run runs it)"],
  [/^npm ci && npm test$|^npm test$|^npx vitest run\b|^EMB_K8S_\w+=\S+ npx vitest run\b/, "the test suites themselves (minutes to tens of minutes on 2 cores)"],
  [/^npm ci && npm start$/, "npm ci reinstalls node_modules; npm start is run by the demo checks below"],
  [/^(?:[A-Z_]+=\S+ )*npm run bench\b/, "a benchmark (minutes of CPU, measured against its own baseline: docs/benchmarks.md)"],
  [/^docker (build|push)\b/, "needs a Docker engine and a registry (this machine has neither; infra/Dockerfile's build context is checked by test/project/infra.test.ts)"],
  [/^helm package infra\/helm\/external-metrics-bridge --destination dist\/chart$/, "packages the chart into the work tree (test/project/chart.package.test.ts packages it into a temporary directory, lints and renders the package)"],
  [/^npm run (infra:render|providers:render|chart:render)$/, "rewrites tracked files (test/project/infra.test.ts and the provider-table tests check they are up to date)"],
  [/^npm run infra:validate$/, "helm and kubeconform over the chart and manifests (≈ 1 min; test/project/infra.test.ts runs it)"],
  [/^npm run build:proxy$|^npm run build:node$|^npm run build:lambda$/, "an esbuild build of an artifact (test/runtimes/build.test.ts builds and runs each)"],
  [/^npx node infra\/lambda\/build\.ts$/, "an esbuild build of the Lambda artifact (test/runtimes/build.test.ts builds and runs it)"],
  [/^bash test\/k8s\/(v1\.30\/)?build\.sh$|^npx node test\/k8s\/start\.ts$/, "builds or starts a Kubernetes control plane (11–17 min cold)"],
  [/^npx node test\/docs\/provider-outputs\.ts\b/, "regenerates the provider pages' example outputs against fakes and a real Prometheus build (minutes cold)"],
  [/^node dist\/node\/node\.mjs --config bridge\.yaml$/, "the bundle on the server it was shipped to (needs npm run build:node first); its refusal on Node < 24 is test/runtimes/node-version.runtimes.test.ts"],
  [/^npm run …$|^npx node …$|^npm run cli --$|^npx node dist\/node\/node\.mjs …$|^npx node functions\/cli\.ts$|^npx node functions\/node\.ts$|^npm run (serve|queue)$/, "a fragment in running text naming an entry point, not a command line (each entry point's own commands are run)"],
];

/** How each runnable command is checked (first match), before {@link NOT_RUN}. */
const RULES: [RegExp, Rule][] = [
  // demo: npm start, the queue commands and the README's curl
  [/^npm start$|^npm run queue -- (add|drain|purge|depth)\b|^SQS_PORT=… npm run queue -- add 25$|^curl -s 'http:\/\/127\.0\.0\.1:8080\//, { run: "demo" }],
  // --help of every entry point, as quoted
  [/^(npm start|npm run [\w:]+) -- --help$|^npx node \S+\.ts --help$|^npm run proxy -- --help$/, { run: "as-is", code: 0 }],
  // the worked policy examples (docs/policy.md): clean lint and tests; the explain and check-hpa examples show a denial
  [/^npm run cli -- policy (lint|test) infra\/examples\/policies\/|^npm run cli -- policy lint --config infra\/examples\/policies\/bridge\.yaml$/, { run: "as-is", code: 0 }],
  [/^npm run cli -- (check-hpa|policy explain) --config infra\/examples\/policies\/bridge\.yaml\b/, { run: "as-is", code: 1, why: "team-a's HPA on team-b's queue is denied, as the page explains" }],
  [/^npm run cli -- policy explain --config infra\/examples\/policies\/custom\/bridge\.yaml .*--resource pods$/, { run: "as-is", code: 0 }],
  // the README's CLI lines, in a directory of the user's own files (the example ones under the README's names)
  [/^npm run cli -- policy lint --config bridge\.yaml policies\/\*\.yaml$|^npm run cli -- policy test policy-tests\.yaml$|^npm run cli -- config validate bridge\.yaml proxy\.yaml$/, { run: "as-is", code: 0, cwd: "workspace" }],
  [/^npm run cli -- (policy explain --config bridge\.yaml --namespace team-a --metric queue_messages_ready --selector queue=team-b-orders|check-hpa --config bridge\.yaml hpa\.yaml)$/, { run: "as-is", code: 1, cwd: "workspace", why: "a read of another team's queue: Deny" }],
  // docs/providers/prometheus.md: the CLI on the example, stdin heredocs included
  [/^npx node functions\/cli\.ts config validate -$/, { run: "as-is", code: 2, why: "the page's example of a template the config loader refuses" }],
  [/^npx node functions\/cli\.ts check-hpa --config infra\/examples\/prometheus\.yaml -$|^npx node functions\/cli\.ts config validate infra\/examples\/prometheus\.yaml$/, { run: "as-is", code: 0 }],
  [/^npx node functions\/cli\.ts policy explain --config infra\/examples\/prometheus\.yaml\b/, { run: "as-is", code: 0 }],
  // the Worker's shipped config file: no document, which config validate and the build agree is no config
  [/^npm run cli -- config validate infra\/worker\/bridge\.yaml$/, { run: "as-is", code: 0 }],
  // Worker builds: validate what they would bundle, without wrangler
  [/^npx node infra\/worker\/build\.ts( --config \S+| --providers [\w,-]+)?( --json)?$/, { run: "check" }],
  // commands that deploy, build for minutes or need a cluster or cloud: their --help lists every option they use
  [/^(?:[A-Z_]+=\S+ )*(npm run (serve|build:lambda|build:node|cli|proxy) -- |npx node (functions|infra)\/\S+\.ts )/, { run: "help" }],
];

/** The rule of a command: {@link RULES}, else {@link NOT_RUN}, else undefined (unreviewed). */
function ruleOf(command: string): Rule | undefined {
  for (const [pattern, rule] of RULES) if (pattern.test(command)) return rule;
  for (const [pattern, why] of NOT_RUN) if (pattern.test(command)) return { listed: why };
  return undefined;
}

/** `items` grouped by `key`, groups in first-seen order (Map.groupBy, which the project's lib setting does not declare). */
function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

const QUOTED: QuotedCommand[] = docFiles(ROOT).flatMap((file) => quotedCommands(ROOT, file));
/** One entry per distinct command (and stdin), with every place it is quoted. */
const UNIQUE = [...groupBy(QUOTED, (c) => `${c.command}\u0000${c.stdin ?? ""}`).values()].map((group) => ({ ...group[0]!, where: group.map((c) => c.where).join(", ") }));

interface Result {
  code: number | null;
  out: string;
}

/** Run `command` with `bash -c` as the user would (see the module note), bounded in time. */
function sh(command: string, options: { cwd: string; stdin?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", command], { cwd: options.cwd, env: { ...ENV, INIT_CWD: undefined, ...options.env }, stdio: ["pipe", "pipe", "pipe"], detached: true });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => {
      process.kill(-child.pid!, "SIGKILL");
      reject(new Error(`${command}: no exit within ${options.timeoutMs ?? 60_000} ms; output:\n${out}`));
    }, options.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
    child.stdin.end(options.stdin ?? "");
  });
}

/** A new directory inside the checkout (under the ignored `.cache/`), where `npm run` finds the package as in a user's subdirectory. */
function scratch(): string {
  mkdirSync(join(ROOT, ".cache"), { recursive: true });
  return mkdtempSync(join(ROOT, ".cache", "docs-commands-"));
}

/**
 * A scratch directory laid out as the README's CLI lines assume a user's
 * repository: the worked policy examples (infra/examples/policies/) as
 * bridge.yaml (its policy.files pointing into policies/), policies/*.yaml,
 * policy-tests.yaml and hpa.yaml, and a proxy.yaml.
 */
function workspace(): string {
  const dir = scratch();
  const ex = join(ROOT, "infra/examples/policies");
  mkdirSync(join(dir, "policies"));
  const policies = ["cluster-guardrails.yaml", "team-a.yaml", "team-b.yaml"];
  for (const f of policies) cpSync(join(ex, f), join(dir, "policies", f));
  let bridge = readFileSync(join(ex, "bridge.yaml"), "utf8");
  for (const f of policies) bridge = bridge.replace(`    - ${f}\n`, `    - policies/${f}\n`);
  writeFileSync(join(dir, "bridge.yaml"), bridge);
  cpSync(join(ex, "policy-tests.yaml"), join(dir, "policy-tests.yaml"));
  cpSync(join(ex, "hpa-team-a.yaml"), join(dir, "hpa.yaml"));
  cpSync(join(ROOT, "infra/examples/proxy-inprocess.yaml"), join(dir, "proxy.yaml"));
  return dir;
}

/**
 * The `--help` command of a quoted entry-point command, and the long
 * options it must list: `npm run X -- [SUB…] ARGS` → `npm run X -- [SUB…]
 * --help`; `npx node F [SUB…] ARGS` → `npx node F [SUB…] --help` (SUB: the
 * admin CLI's subcommands).
 */
function helpVariant(command: string): { help: string; options: string[] } {
  const bare = command.replace(/^(?:[A-Z_]+=\S+ )+/, "");
  const m = /^(npm run [\w:]+ --|npx node \S+\.ts)(?: (.*))?$/.exec(bare)!;
  const args = (m[2] ?? "").split(" ");
  const subs: string[] = [];
  while (args.length > 0 && ["policy", "lint", "explain", "test", "check-hpa", "config", "validate"].includes(args[0]!)) subs.push(args.shift()!);
  const options = [...new Set(args.filter((a) => /^--[a-z]/.test(a)).map((a) => a.split("=")[0]!))];
  return { help: [m[1], ...subs, "--help"].join(" "), options };
}

describe("the commands the docs quote", () => {
  let ws: string;
  beforeAll(() => {
    ws = workspace();
  });
  afterAll(() => rmSync(ws, { recursive: true, force: true }));

  it("finds them (README, docs/, the chart README; code blocks and inline)", () => {
    expect(UNIQUE.length).toBeGreaterThan(100);
    const files = new Set(QUOTED.map((c) => c.where.split(":")[0]));
    for (const f of ["README.md", "docs/deploy.md", "docs/proxy.md", "docs/policy.md", "docs/providers/prometheus.md", "infra/helm/external-metrics-bridge/README.md"]) expect(files).toContain(f);
  });

  it("every quoted command is run or listed with a reason", () => {
    const unreviewed = UNIQUE.filter((c) => ruleOf(c.command) === undefined).map((c) => `${c.where}: ${c.command}`);
    expect(unreviewed, "add each to RULES (run it) or NOT_RUN (with why) in this file").toEqual([]);
  });

  it("every reviewed entry still matches a quoted command (no stale entries)", () => {
    const stale = [...RULES.map(([p]) => p), ...NOT_RUN.map(([p]) => p)].filter((p) => !UNIQUE.some((c) => p.test(c.command)));
    expect(stale.map(String)).toEqual([]);
  });

  it("no command runs a .ts file with a bare node (fails on Node < 22.18 with ERR_UNKNOWN_FILE_EXTENSION): npx node or npm run", () => {
    const bare = UNIQUE.filter((c) => /(^|[|&;]\s*)(?:[A-Z_]+=\S+ )*node \S+\.ts\b/.test(c.command)).map((c) => `${c.where}: ${c.command}`);
    expect(bare).toEqual([]);
  });

  const asIs = UNIQUE.filter((c) => (ruleOf(c.command) as { run?: string } | undefined)?.run === "as-is");
  it.each(asIs.map((c) => [c.command, c] as const))("runs %s as documented", async (_c, quoted) => {
    const rule = ruleOf(quoted.command) as Extract<Rule, { run: "as-is" }>;
    const r = await sh(quoted.command, { cwd: rule.cwd === "workspace" ? ws : ROOT, ...(quoted.stdin !== undefined ? { stdin: quoted.stdin } : {}) });
    expect(r.code, `${quoted.where}: ${quoted.command}${rule.why ? ` (${rule.why})` : ""}\n${r.out}`).toBe(rule.code);
  });

  const helps = UNIQUE.filter((c) => (ruleOf(c.command) as { run?: string } | undefined)?.run === "help");
  const byHelp = groupBy(helps, (c) => helpVariant(c.command).help);
  it.each([...byHelp].map(([help, cs]) => [help, cs] as const))("%s lists the options the docs use", async (help, cs) => {
    const r = await sh(help, { cwd: ROOT });
    expect(r.code, `${help}\n${r.out}`).toBe(0);
    for (const c of cs) for (const option of helpVariant(c.command).options) expect(r.out, `${c.where}: ${c.command} uses ${option}`).toContain(option);
  });

  const checks = UNIQUE.filter((c) => (ruleOf(c.command) as { run?: string } | undefined)?.run === "check");
  it.each(checks.map((c) => [c.command, c] as const))("%s: the config it would bundle is valid (--check)", async (command, quoted) => {
    // --config bridge.yaml names the user's own config: a Worker's (no policy.files), infra/examples/aws-sqs.yaml
    const run = command.replace(/ --json$/, "").replace(/ --providers \S+/, "").replace("--config bridge.yaml", "--config infra/examples/aws-sqs.yaml");
    const r = await sh(`${run} --check`, { cwd: ROOT });
    expect(r.code, `${quoted.where}\n${r.out}`).toBe(0);
  });
});

describe("the demo commands, against a demo on free ports", () => {
  let demo: ChildProcess;
  let port: number;
  let sqsPort: number;
  let banner = "";
  const demoCommands = UNIQUE.filter((c) => (ruleOf(c.command) as { run?: string } | undefined)?.run === "demo");

  beforeAll(async () => {
    [port, sqsPort] = [await freePort(), await freePort()];
    demo = spawn("bash", ["-c", "npm start"], { cwd: ROOT, env: { ...ENV, PORT: String(port), SQS_PORT: String(sqsPort) }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`npm start did not print its banner:\n${banner}`)), 60_000);
      const on = (d: Buffer) => {
        banner += d.toString();
        if (banner.includes("Ctrl-C stops")) {
          clearTimeout(timer);
          resolve();
        }
      };
      demo.stdout!.on("data", on);
      demo.stderr!.on("data", on);
    });
  });
  afterAll(async () => {
    if (demo?.pid !== undefined && demo.exitCode === null) {
      const exited = new Promise((resolve) => demo.once("exit", resolve));
      process.kill(-demo.pid, "SIGTERM");
      await exited;
    }
  });

  it("npm start prints curl lines for its ports, none with trailing blanks", () => {
    const curls = banner.split("\n").filter((l) => l.trim().startsWith("curl "));
    expect(curls.length).toBeGreaterThan(0);
    for (const l of curls) expect(l, JSON.stringify(l)).toBe(l.trimEnd());
    expect(curls[0]).toContain(`127.0.0.1:${port}`);
  });

  it.each(demoCommands.filter((c) => c.command !== "npm start").map((c) => [c.command, c] as const))("%s", async (command, quoted) => {
    // the documented way to reach a demo on other ports: SQS_PORT for the queue commands, the printed address for curl
    const run = command.replace(/^SQS_PORT=… /, "").replace("127.0.0.1:8080", `127.0.0.1:${port}`);
    const r = await sh(run, { cwd: ROOT, env: { SQS_PORT: String(sqsPort) }, timeoutMs: 30_000 });
    expect(r.code, `${quoted.where}\n${r.out}`).toBe(0);
    if (command.startsWith("curl")) expect(JSON.parse(r.out)).toMatchObject({ kind: "ExternalMetricValueList", items: [{ metricLabels: { queue: "worker_tasks" } }] });
  });
});

describe("what the docs state, against the code", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");

  it("the README's SubjectAccessReview cache durations are the proxy's (shared/proxy/authz/authorize.ts)", () => {
    const m = /SubjectAccessReview[\s\S]{0,200}?cached\s+(\d+)\s+s\s+when\s+allowed[\s\S]{0,120}?(\d+)\s+s\s+when\s+denied/.exec(readme);
    expect(m, "the README states both durations").not.toBeNull();
    expect([Number(m![1]) * 1000, Number(m![2]) * 1000]).toEqual([SAR_ALLOWED_TTL_MS, SAR_DENIED_TTL_MS]);
  });

  it("every 'Kubernetes X.Y or later' in README.md and docs/ is Chart.yaml's kubeVersion floor", () => {
    const floor = /kubeVersion:\s*">=(\d+\.\d+)/.exec(readFileSync(join(ROOT, "infra/helm/external-metrics-bridge/Chart.yaml"), "utf8"))![1];
    const pages = docFiles(ROOT).filter((f) => !f.startsWith("infra/"));
    const claims = pages.flatMap((f) => [...readFileSync(join(ROOT, f), "utf8").matchAll(/Kubernetes (\d+\.\d+)(?:\+| or later| or newer)/g)].map((m) => `${f}: ${m[0]}`));
    for (const claim of claims) expect(claim).toContain(`Kubernetes ${floor}`);
  });

  it("the README's example config error is what a misspelt attribute prints (the CLI as quoted, and the bridge at start)", async () => {
    const quoted = /\n {4}(bridge\.yaml:\d+:\d+: metrics\[0\]\.query\.attribute: .*)\n/.exec(readme)?.[1];
    expect(quoted, "the README quotes the error").toBeDefined();
    const section = readme.slice(readme.indexOf("## Configuration reference"));
    const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    expect(yaml).toContain("attribute: ApproximateNumberOfMessages\n");
    const dir = scratch();
    try {
      writeFileSync(join(dir, "bridge.yaml"), yaml.replace("attribute: ApproximateNumberOfMessages\n", "attribute: ApproximateNumberOfMessage\n"));
      const cli = await sh("npm run cli -- config validate bridge.yaml", { cwd: dir });
      expect(cli.code).toBe(2);
      expect(cli.out.split("\n")).toContain(quoted);
      const serve = await sh("BRIDGE_SIGNING_KEYS=k1:$(openssl rand -base64 32) npm run serve -- --config bridge.yaml --port 0", { cwd: dir, timeoutMs: 30_000 });
      expect(serve.code).toBe(2);
      expect(serve.out.split("\n")).toContain(`${dir}/${quoted}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the machine's node is what the docs assume for this check: the commands above ran without the project's node first on PATH", () => {
    const r = spawnSync("bash", ["-c", "command -v node; npx node --version"], { env: ENV, cwd: ROOT, encoding: "utf8" });
    expect(r.stdout).not.toContain("node_modules");
    expect(r.stdout).toMatch(/v2[4-9]\./); // npx node: the project's Node 24
  });
});
