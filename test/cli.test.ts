/**
 * The admin CLI as a process (`functions/cli.ts`, the package's `bin`), run
 * on the documented examples (infra/examples/policies/) and on fixtures
 * with known problems. Checks output and exit codes: 0 yes, 1 no, 2 cannot run.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ROOT } from "./helpers/worker.ts";

const exec = promisify(execFile);
const EX = "infra/examples/policies";
const FX = "test/fixtures/policy";

/** Run the CLI; resolves with exit code and output (never rejects on a non-zero exit). */
async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [join(ROOT, "functions/cli.ts"), ...args], { cwd: ROOT });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof e.code !== "number") throw err;
    return { code: e.code, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

describe("policy lint", () => {
  it("passes the worked examples (the config and the policy files it lists)", async () => {
    const r = await cli("policy", "lint", "--config", `${EX}/bridge.yaml`);
    expect(r).toMatchObject({ code: 0, stdout: "4 policies, 0 errors, 0 warnings\n" });
    // a glob over the directory: the config found among the files, its policy files read once, other kinds noted
    const all = await cli("policy", "lint", ...["bridge", "cluster-guardrails", "hpa-team-a", "policy-tests", "team-a", "team-b"].map((f) => `${EX}/${f}.yaml`));
    expect(all.code).toBe(0);
    expect(all.stdout).toContain(`note: ${EX}/policy-tests.yaml:4: skipped: kind ExternalMetricPolicyTest is not ExternalMetricPolicy\n`);
    expect(all.stdout).toContain("4 policies, 0 errors, 0 warnings\n");
  });

  it("reports every load error with file:line:column and field, exit 1", async () => {
    const r = await cli("policy", "lint", `${FX}/broken.yaml`);
    expect(r.code).toBe(1);
    expect(r.stdout.split("\n").filter((l) => l.includes(": error: "))).toEqual([
      `${FX}/broken.yaml:9:15: error: spec.rules[0].metric: lookaround ((?=…), (?!…), (?<=…), (?<!…)) are not supported: policy patterns use RE2 syntax, which matches in linear time (error parsing regexp: invalid or unsupported Perl syntax: \`(?!\`)`,
      `${FX}/broken.yaml:11:7: error: spec.rules[1]: a rule has exactly one of selector (what it allows; {} allows every series) or deny: true`,
      `${FX}/broken.yaml:12:7: error: spec.rules[1].selectr: unknown field`,
      `${FX}/broken.yaml:13:18: error: spec.defaultAction: Invalid option: expected one of "Allow"|"Deny"`,
      `${FX}/broken.yaml:23:17: error: spec.rules[0].selector: invalid selector: unable to parse requirement: found '', expected: ',', or identifier`,
    ]);
  });

  it("warns about shadowed rules, unknown metric names, empty selectors and cluster-wide Allow defaults", async () => {
    const r = await cli("policy", "lint", "--config", `${EX}/bridge.yaml`, `${FX}/suspicious.yaml`, "-o", "json");
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ errors: 0, warnings: 5 });
    expect(out.findings.map((f: any) => `${f.line} ${f.policy} ${f.path}: ${f.message.slice(0, 40)}`)).toEqual([
      "11 team-a/suspicious spec.rules[1]: rule never decides: every metric it matc",
      "13 team-a/suspicious spec.rules[2].metric: pattern \"queue_mesages_delayed\" matches ",
      "15 team-a/suspicious spec.rules[3].selector: selector matches no label set, so the ru",
      "19 everyone-everywhere spec.defaultAction: a cluster-scoped policy without subjects",
      "25 everyone-everywhere spec.rules[0].metric: pattern \"secret_.*\" matches no metric th",
    ]);
    expect((await cli("policy", "lint", "--config", `${EX}/bridge.yaml`, `${FX}/suspicious.yaml`, "--allow-warnings")).code).toBe(0);
    // without the config, only what needs no metric list
    const bare = await cli("policy", "lint", `${FX}/suspicious.yaml`);
    expect(bare.stdout).toContain("2 policies, 0 errors, 2 warnings");
    expect(bare.stdout).toContain("note: no bridge config (--config FILE)");
  });
});

describe("policy explain", () => {
  it("Allow, exit 0, with the policy and rule (JSON)", async () => {
    const r = await cli("policy", "explain", "--config", `${EX}/bridge.yaml`, "-n", "team-a", "-m", "queue_messages_ready", "-l", "queue=team-a-jobs", "-o", "json");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      decision: "Allow",
      request: { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", namespace: "team-a", selector: "queue=team-a-jobs" },
      verdicts: [{ policy: "team-a/queues", rule: 0, reason: "selector-subset", source: `${EX}/team-a.yaml`, line: 4 }],
    });
  });

  it("Deny, exit 1, every applicable policy's verdict", async () => {
    const r = await cli(
      "policy", "explain", "--config", `${EX}/bridge.yaml`, "-n", "team-b", "-m", "teamb_checkout_latency_p99",
      "-l", "service=checkout", "--service-account", "team-b/ci",
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toBe(
      [
        'Deny: "teamb_checkout_latency_p99" in namespace "team-b" with selector "service=checkout"',
        '  caller: user "system:serviceaccount:team-b:ci", groups [system:serviceaccounts, system:serviceaccounts:team-b, system:authenticated]',
        "  applicable policies (2), every one must allow:",
        `    Allow policy team-b/team-b rules[0] (metric "teamb_.*") allows selector "service in (checkout,payments)", which contains the request's selector "service=checkout" (${EX}/team-b.yaml:4)`,
        `    Deny  policy team-b/ci-reads-errors-only has no rule for metric "teamb_checkout_latency_p99" and its defaultAction is Deny (${EX}/team-b.yaml:24)`,
        "  denied by team-b/ci-reads-errors-only (its defaultAction)",
        "",
      ].join("\n"),
    );
  });

  it("takes policy files without a config, and says when the config does not define the metric", async () => {
    const bare = await cli("policy", "explain", `${EX}/team-a.yaml`, "-n", "team-a", "-m", "queue_messages_ready", "-l", "queue in (team-a-jobs,team-a-mail)", "--user", "jane", "--group", "devs");
    expect(bare.code).toBe(0);
    expect(bare.stdout).toContain('caller: user "jane", groups [devs]');
    const unknown = await cli("policy", "explain", "--config", `${EX}/bridge.yaml`, "-n", "team-a", "-m", "nope");
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toContain('note: the config defines no metric "nope": the bridge answers 404 before any policy is evaluated');
  });

  it("exit 2 on bad arguments", async () => {
    expect((await cli("policy", "explain", "-n", "team-a", "-m", "x", "-l", "queue in (")).code).toBe(2);
    expect((await cli("policy", "explain", "-n", "team-a")).code).toBe(2); // --metric missing
    expect((await cli("policy", "explain", "-n", "a", "-m", "x", "--user", "u", "--service-account", "a/b")).code).toBe(2);
  });
});

describe("policy test", () => {
  it("the example table passes, exit 0", async () => {
    const r = await cli("policy", "test", `${EX}/policy-tests.yaml`);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("  PASS  team A may not read team B's queue\n");
    expect(r.stdout.trim().split("\n").at(-1)).toBe("13 cases, 13 passed, 0 failed");
  });

  it("a wrong expectation fails with the reason and exit 1 (JSON too)", async () => {
    const r = await cli("policy", "test", `${FX}/failing-tests.yaml`);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`  FAIL  wrong on purpose (${FX}/failing-tests.yaml:13)\n        expected Allow, got Deny: policy team-a/queues rules[0]`);
    expect(r.stdout).toContain("expected denial by team-a/queues rules[0], got: policy team-a/queues rules[1] (metric \".*\") is a deny rule");
    const json = JSON.parse((await cli("policy", "test", `${FX}/failing-tests.yaml`, "-o", "json")).stdout);
    expect(json).toMatchObject({ passed: 1, failed: 2 });
    expect(json.tables[0].cases.map((c: any) => c.pass)).toEqual([true, false, false]);
  });

  it("exit 2 when a table or its inputs do not load", async () => {
    const r = await cli("policy", "test", `${FX}/broken.yaml`);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${FX}/broken.yaml:1:1: no ExternalMetricPolicyTest document`);
    expect((await cli("policy", "test", `${FX}/does-not-exist.yaml`)).code).toBe(2);
  });
});

describe("check-hpa", () => {
  it("resolves each External metric to its rule, backend query and the HPA controller's decision", async () => {
    const r = await cli("check-hpa", "--config", `${EX}/bridge.yaml`, `${EX}/hpa-team-a.yaml`, "-o", "json");
    expect(r.code).toBe(1);
    const { checks, caller } = JSON.parse(r.stdout);
    expect(caller).toBe("system:serviceaccount:kube-system:horizontal-pod-autoscaler");
    expect(checks).toMatchObject([
      {
        hpa: "team-a/jobs-worker",
        path: "spec.metrics[0]",
        selector: "queue=team-a-jobs",
        rule: { name: "queue_messages_ready", provider: "sqs" },
        query: "SQS GetQueueAttributes ApproximateNumberOfMessages on queue team-a-jobs",
        decision: { decision: "Allow" },
        ok: true,
      },
      {
        hpa: "team-a/orders-worker",
        path: "spec.metrics[1]",
        selector: "queue=team-b-orders",
        decision: { decision: "Deny", deniedBy: { policy: "team-a/queues", rule: 0 } },
        problems: ["403 Forbidden: denied by team-a/queues rules[0]"],
        ok: false,
      },
    ]);
  });

  it("reports undefined metrics and selectors the rule cannot map; reads kind: List", async () => {
    const r = await cli("check-hpa", "--config", `${EX}/bridge.yaml`, `${FX}/hpas.yaml`);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('problem: 404: external metric "queue_mesages_ready" is not defined by this bridge');
    expect(r.stdout).toContain('problem: 400: metric queue_messages_ready: selector requirement "env=prod" cannot be mapped');
    expect(r.stdout).toContain("3 external metrics, 1 ok, 2 failing");
  });

  it("the repository's demo HPA passes against the demo config (defaultAction Allow), exit 0", async () => {
    const r = await cli("check-hpa", "--config", "infra/examples/demo.yaml", "infra/examples/hpa.yaml");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("query:   SQS GetQueueAttributes ApproximateNumberOfMessages on queue worker_tasks");
  });
});

describe("the command line itself", () => {
  it("runs as an executable (shebang), documents exit codes in --help, and exits 2 on usage errors", async () => {
    const { stdout } = await exec(join(ROOT, "functions/cli.ts"), ["--help"], {
      cwd: ROOT,
      env: { ...process.env, PATH: `${join(ROOT, "node_modules/.bin")}:${process.env["PATH"] ?? ""}` },
    });
    expect(stdout).toContain("Usage: external-metrics-bridge");
    expect(stdout).toContain("2  the command could not run");
    expect((await cli()).code).toBe(2);
    expect((await cli("frobnicate")).code).toBe(2);
    expect((await cli("check-hpa", `${EX}/hpa-team-a.yaml`)).code).toBe(2); // no config
  });
});
