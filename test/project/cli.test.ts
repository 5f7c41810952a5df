/**
 * The admin CLI as a process (`functions/cli.ts`, the package's `bin`), run
 * on the documented examples (infra/examples/policies/) and on fixtures
 * with known problems. Checks output and exit codes: 0 yes, 1 no, 2 cannot run.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { ROOT } from "../helpers/worker.ts";

const exec = promisify(execFile);
const EX = "infra/examples/policies";
const FX = "test/fixtures/policy";
const FXC = "test/fixtures/cli";

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

/** Run the CLI with `input` on its standard input. */
function cliWithStdin(input: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, "functions/cli.ts"), ...args], { cwd: ROOT });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe("policy lint", () => {
  it("passes the worked examples (the config and the policy files it lists)", async () => {
    const r = await cli("policy", "lint", "--config", `${EX}/bridge.yaml`);
    expect(r).toMatchObject({ code: 0, stdout: "4 policies, 0 errors, 0 warnings\n" });
    // a glob over the directory: the config found among the files, its policy files read once, other kinds noted
    const all = await cli("policy", "lint", ...["bridge", "cluster-guardrails", "hpa-team-a", "policy-tests", "team-a", "team-b"].map((f) => `${EX}/${f}.yaml`));
    expect(all.code).toBe(0);
    expect(all.stdout).toContain(`note: ${EX}/policy-tests.yaml:4: skipped: kind ExternalMetricPolicyTest is not a policy\n`);
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

  it("warns about shadowed rules, unknown metric names, empty selectors and cluster-wide Allow defaults; warnings alone exit 0 unless --strict", async () => {
    const r = await cli("policy", "lint", "--config", `${EX}/bridge.yaml`, `${FX}/suspicious.yaml`, "-o", "json");
    expect(r.code).toBe(0); // as helm lint and promtool: warnings are not failures…
    expect((await cli("policy", "lint", "--strict", "--config", `${EX}/bridge.yaml`, `${FX}/suspicious.yaml`)).code).toBe(1); // …unless asked
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
        // with the config: the backend query the bridge would send (the rule's provider's plan)
        "  query: CloudWatch GetMetricData, newest datapoint in the last 300 s, for metric teamb_checkout_latency_p99 (TeamB/Checkout Latency p99/60s ServiceName=checkout)",
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

describe("issue 12: exit codes, --version, stdin, plurals", () => {
  it("an unreadable --config or FILE exits 2 (as the help promises), on stderr; a policy with errors exits 1", async () => {
    const r = await cli("policy", "lint", "--config", "/nonexistent.yaml");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("/nonexistent.yaml:1:1: cannot read: ENOENT");
    expect((await cli("policy", "lint", `${FX}/does-not-exist.yaml`)).code).toBe(2);
    expect(JSON.parse((await cli("policy", "lint", "/nonexistent.yaml", "-o", "json")).stdout)).toMatchObject({ error: "unreadable input" });
    const errors = await cli("policy", "lint", `${FX}/broken.yaml`);
    expect(errors.code).toBe(1);
  });

  it("--help documents the exit codes, --strict and stdin", async () => {
    const { stdout } = await cli("policy", "lint", "--help");
    expect(stdout).toContain("--strict");
    expect(stdout).toContain("warnings alone too, unless --strict");
    expect(stdout).toContain('FILE "-" reads standard input');
    expect(stdout).toContain("--kubeconfig <file>");
  });

  it("--version prints package.json's version", async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    for (const flag of ["--version", "-V"]) expect(await cli(flag)).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  it("- reads the policies from standard input (named <stdin> in messages); singular counts", async () => {
    const ok = await cliWithStdin(readFileSync(join(ROOT, EX, "team-a.yaml"), "utf8"), "policy", "lint", "-");
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain("1 policy, 0 errors, 0 warnings\n");
    const broken = await cliWithStdin(
      "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ExternalMetricPolicy\nmetadata: { name: x, namespace: a }\nspec:\n  rules:\n    - { metric: \"queue_(a\", deny: true }\n",
      "policy", "lint", "-",
    );
    expect(broken.code).toBe(1);
    // RE2JS compiles case-insensitive patterns as "(?i)" + pattern; the message quotes what the admin wrote
    expect(broken.stdout).toContain("<stdin>:6:17: error: spec.rules[0].metric: invalid RE2 pattern: error parsing regexp: missing closing ): `queue_(a`\n");
    expect(broken.stdout).not.toContain("(?i)");
    expect(broken.stdout).toContain("0 policies, 1 error, 0 warnings\n");
    // the config from stdin too
    const config = await cliWithStdin(readFileSync(join(ROOT, "infra/examples/demo.yaml"), "utf8"), "check-hpa", "--config", "-", "infra/examples/hpa.yaml");
    expect(config.code).toBe(0);
    expect(config.stdout).toContain("1 external metric, 1 ok, 0 failing");
  });
});

describe("issue 12: the API form of policies", () => {
  it("reads kubectl get emp,cemp -A -o yaml (a List of both kinds, with status and server metadata), with lines in messages", async () => {
    const r = await cli("policy", "lint", `${FXC}/cluster-policies.yaml`, "-o", "json");
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out.policies).toEqual(["hpa-controller-queues", "team-a/queues"]);
    expect(out.notes).not.toContain(expect.stringContaining("skipped"));
    expect(out.findings).toMatchObject([
      { severity: "error", source: `${FXC}/cluster-policies.yaml`, line: 40, path: "spec.rules[0].metric", message: "invalid RE2 pattern: error parsing regexp: missing closing ): `queue_(a`" },
    ]);
  });

  it("policy explain evaluates them (from stdin too): the cluster policy and the namespace one both apply in team-a", async () => {
    const allow = await cli("policy", "explain", "--config", `${EX}/bridge.yaml`, `${FXC}/cluster-policies.yaml`, "-n", "team-a", "-m", "queue_messages_ready", "-l", "queue=team-a-jobs");
    // broken.yaml-like errors in the input are "could not run" for explain
    expect(allow.code).toBe(2);
    expect(allow.stderr).toContain(`${FXC}/cluster-policies.yaml:40:19: spec.rules[0].metric: invalid RE2 pattern`);
    const text = readFileSync(join(ROOT, FXC, "cluster-policies.yaml"), "utf8");
    const valid = text.slice(0, text.indexOf("  - apiVersion: external-metrics-bridge.io/v1alpha1\n    kind: ExternalMetricPolicy\n    metadata: { name: broken"));
    const ok = await cliWithStdin(valid, "policy", "explain", "-", "-n", "team-a", "-m", "queue_messages_ready", "-l", "queue=team-a-jobs", "-o", "json");
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout).verdicts.map((v: any) => [v.policy, v.decision, v.source])).toEqual([
      ["hpa-controller-queues", "Allow", "<stdin>"],
      ["team-a/queues", "Allow", "<stdin>"],
    ]);
    const denied = await cliWithStdin(valid, "policy", "explain", "-", "-n", "team-a", "-m", "queue_messages_ready", "-l", "queue=team-b-orders");
    expect(denied.code).toBe(1);
    expect(denied.stdout).toContain("denied by team-a/queues rules[0]");
  });
});

describe("issue 12: new lint checks", () => {
  it("warns on a selector that only excludes values (notin, !=, !key) and on a requirement the metric rule cannot map", async () => {
    const r = await cli("policy", "lint", "--config", `${EX}/bridge.yaml`, `${FXC}/lint-grants.yaml`, "-o", "json");
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ errors: 0, warnings: 4 });
    expect(out.findings.map((f: any) => [f.line, f.path, f.message])).toEqual([
      [
        7,
        "spec.rules[0].selector",
        'selector "queue notin (team-b-orders)" only excludes values, so it grants every other series of the metrics it matches, including series created later; name the allowed values (key in (a,b)) instead',
      ],
      [
        9,
        "spec.rules[1].selector",
        'requirement "env=prod" is on a label the metric rule cannot map (queue_messages_delayed): every read this rule allows of it is answered 400, so it grants nothing there ' +
          '(metric queue_messages_delayed: selector requirement "env=prod" cannot be mapped: this rule understands only the label "queue")',
      ],
      [20, "spec.rules[0].selector", expect.stringMatching(/^selector "!region,service!=payments" only excludes values/)],
      [20, "spec.rules[0].selector", expect.stringMatching(/^requirement "!region" is on a label the metric rule cannot map \(teamb_checkout_errors\)/)],
    ]);
    // the CloudWatch rule maps "service": rules[2] is fine; --strict fails on the warnings
    expect((await cli("policy", "lint", "--strict", "--config", `${EX}/bridge.yaml`, `${FXC}/lint-grants.yaml`)).code).toBe(1);
  });
});

describe("issue 12: check-hpa and autoscaling/v1", () => {
  it("skips an autoscaling/v1 HPA with a note and checks the others in the same file", async () => {
    const r = await cli("check-hpa", "--config", `${EX}/bridge.yaml`, `${FXC}/hpa-v1-and-v2.yaml`);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      `note: team-a/cpu-only (${FXC}/hpa-v1-and-v2.yaml:3): autoscaling/v1 has no External metrics (only targetCPUUtilizationPercentage): skipped; write autoscaling/v2 to use this bridge's metrics\n`,
    );
    expect(r.stdout).toContain("1 external metric, 1 ok, 0 failing");
    const json = JSON.parse((await cli("check-hpa", "--config", `${EX}/bridge.yaml`, `${FXC}/hpa-v1-and-v2.yaml`, "-o", "json")).stdout);
    expect(json.skipped).toMatchObject([{ hpa: "team-a/cpu-only", line: 3 }]);
    expect(json.checks).toMatchObject([{ hpa: "team-a/jobs-worker", ok: true }]);
  });
});

describe("issue 12: config validate", () => {
  it("valid BridgeConfigs and ProxyConfigs exit 0, each named with its kind", async () => {
    const r = await cli("config", "validate", `${EX}/bridge.yaml`, "infra/examples/demo.yaml", "infra/examples/proxy-inprocess.yaml");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${EX}/bridge.yaml: valid BridgeConfig (2 providers, 4 metric rules, 4 policies)\n`);
    expect(r.stdout).toContain("infra/examples/proxy-inprocess.yaml: valid ProxyConfig");
    expect(r.stdout).toContain("backends[0].bridgeConfig /etc/external-metrics-bridge/config/bridge.yaml not checked");
  });

  it("an invalid config exits 2 with the loader's own messages (bridge and proxy), a file of neither kind too", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cli-validate-"));
    const bridge = join(dir, "bridge.yaml");
    writeFileSync(bridge, "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: BridgeConfig\nproviders: {}\nmetrics: []\nbogus: 1\n");
    const proxy = join(dir, "proxy.yaml");
    writeFileSync(proxy, "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ProxyConfig\nbackends: 3\n");
    const other = join(dir, "other.yaml");
    writeFileSync(other, "kind: ConfigMap\n");
    const r = await cli("config", "validate", bridge, proxy, other, `${EX}/bridge.yaml`);
    expect(r.code).toBe(2);
    const loaderMessage = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        return (err as Error).message;
      }
      return "";
    };
    expect(r.stderr).toContain(loaderMessage(() => loadConfig(readFileSync(bridge, "utf8"), bridge)));
    expect(r.stderr).toContain(loaderMessage(() => loadProxyConfig(readFileSync(proxy, "utf8"), proxy)));
    expect(r.stderr).toContain(`${other}:1:1: no document with kind: BridgeConfig or kind: ProxyConfig`);
    expect(r.stderr).toContain("3 invalid files of 4");
    const piped = await cliWithStdin("kind: BridgeConfig\n  bad: [", "config", "validate", "-");
    expect(piped.code).toBe(2);
    expect(piped.stderr).toContain("<stdin>:");
  });
});

// prometheus rules (test/fixtures/cli/prometheus*.yaml): check-hpa maps an HPA's selector as the
// provider does and shows its PromQL, policy explain shows the PromQL the bridge would send,
// config validate and policy lint --config warn about rules that are valid but probably wrong.
const PROM_CONFIG = "test/fixtures/cli/prometheus.yaml";
const PROM_HPAS = "test/fixtures/cli/prometheus-hpa.yaml";
const PROM_POLICY = "test/fixtures/cli/prometheus-policy.yaml";

const ONEMPTY = /^metrics\[1\]\.query\.onEmpty: onEmpty\.value "0" is served whenever Prometheus answers no series for a label set: also when the exporter is down, .* keep it only when the exporter drops a series exactly when its value is 0 \(e\.g\. an empty queue\), else use unavailable \(the default\)$/;
const RANGE = /^metrics\[2\]\.query\.template: template line 2, column 48: the range \[5m\] \(300 s\) is longer than maxAgeSeconds \(60 s\): the value may be computed from samples up to 300 s old/;
const LOOKBACK = /^metrics\[3\]\.query\.lookbackSeconds: lookbackSeconds \(600 s\) is longer than maxAgeSeconds \(60 s\)/;

describe("check-hpa on prometheus rules", () => {
  it("maps each HPA selector as the provider does: the PromQL it would send, values quoted for RE2 then PromQL, allow-listed values mapped, unmappable labels and unlisted values refused", async () => {
    const r = await cli("check-hpa", "--config", PROM_CONFIG, PROM_HPAS, "-o", "json");
    expect(r.code).toBe(1); // two of the four reads would fail
    const checks = JSON.parse(r.stdout).checks as { hpa: string; metric: string; selector: string; query?: string; problems: string[]; ok: boolean }[];
    expect(checks.map((c) => [c.hpa, c.metric, c.ok])).toEqual([
      ["shop/orders-worker", "rabbitmq_messages_ready", true],
      ["shop/orders-worker", "celery_queue_length", true],
      ["shop/billing", "kafka_consumer_lag", false],
      ["shop/billing", "celery_queue_length", false],
    ]);
    // `in (a.b)` becomes the RE2 `a\.b`, written in a PromQL string as `a\\.b`: it never matches `aXb`
    const both = 'rabbitmq_queue_messages_ready{job="rabbitmq",queue=~"a\\\\.b|orders"}';
    expect(checks[0]!.query).toBe(
      `Prometheus instant query at http://prometheus.monitoring.svc:9090 (lookback_delta 120s): sum by (queue) (${both}), with the samples' time from min by (queue) (timestamp(${both}))`,
    );
    // the allow-list maps the selector value emails to the Prometheus value emails-high
    expect(checks[1]!.query).toContain('sum by (queue_name) (celery_queue_length{queue_name="emails-high"})');
    expect(checks[2]!.problems).toEqual(['400: metric kafka_consumer_lag: selector requirement "env=prod" cannot be mapped: this rule understands only the labels "queue"']);
    expect(checks[3]!.problems).toEqual(['404: metric celery_queue_length: queue "payments" is not served by this rule']);
  });
});

describe("policy explain on prometheus rules", () => {
  it("shows the value and timestamp queries the bridge would send, from the provider's own query builder", async () => {
    const r = await cli("policy", "explain", "--config", PROM_CONFIG, "-n", "shop", "-m", "rabbitmq_messages_ready", "-l", "queue in (orders,emails)");
    expect(r.code).toBe(0);
    const sel = 'rabbitmq_queue_messages_ready{job="rabbitmq",queue=~"emails|orders"}';
    expect(r.stdout).toContain(
      `\n  query: Prometheus instant query at http://prometheus.monitoring.svc:9090 (lookback_delta 120s): sum by (queue) (${sel}), with the samples' time from min by (queue) (timestamp(${sel}))\n`,
    );
    const json = JSON.parse((await cli("policy", "explain", "--config", PROM_CONFIG, "-n", "shop", "-m", "http_request_rate", "-l", "service=api", "-o", "json")).stdout);
    expect(json).toMatchObject({ decision: "Allow", notes: [] });
    expect(json.query).toBe(
      'Prometheus instant query at http://prometheus.monitoring.svc:9090 (lookback_delta 60s): sum by (service) (sum by (service) (\n  rate(http_requests_total{service="api"}[5m])\n)\n), stamped with the evaluation time',
    );
  });

  it("a selector the rule cannot map: no query, a note with the provider's 400, exit 1 even though the policies allow", async () => {
    const r = await cli("policy", "explain", "--config", PROM_CONFIG, "-n", "shop", "-m", "kafka_consumer_lag", "-l", "queue=orders,env=prod");
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^Allow: /);
    expect(r.stdout).not.toContain("  query: ");
    expect(r.stdout).toContain(
      'note: the provider refuses this selector, so the read fails whatever the policies decide: 400: metric kafka_consumer_lag: selector requirement "env=prod" cannot be mapped',
    );
  });
});

describe("config validate and policy lint on prometheus rules", () => {
  it("config validate: valid, exit 0, with a located warning for onEmpty.value, a template range and a lookbackSeconds longer than maxAgeSeconds", async () => {
    const r = await cli("config", "validate", PROM_CONFIG, "-o", "json");
    expect(r.code).toBe(0);
    const file = JSON.parse(r.stdout).files[0];
    expect(file).toMatchObject({ valid: true, issues: [] });
    const warnings = file.warnings as { line: number; column: number; path: string; message: string }[];
    expect(warnings.map((w) => `${w.line}:${w.column}`)).toEqual(["24:16", "29:17", "41:24"]);
    const lines = warnings.map((w) => `${w.path}: ${w.message}`);
    expect(lines[0]).toMatch(ONEMPTY);
    expect(lines[1]).toMatch(RANGE);
    expect(lines[2]).toMatch(LOOKBACK);
    expect(lines).toHaveLength(3);
    const text = await cli("config", "validate", PROM_CONFIG);
    expect(text.stdout.split("\n")[1]).toMatch(/^test\/fixtures\/cli\/prometheus\.yaml:24:16: warning: metrics\[1\]\.query\.onEmpty: onEmpty\.value "0"/);
  });

  it("no warning for the same rules written as advised (range within maxAgeSeconds, no lookbackSeconds, no onEmpty value)", async () => {
    const fixed = readFileSync(join(ROOT, PROM_CONFIG), "utf8")
      .replace('      onEmpty: { value: "0" }\n', "")
      .replace("[5m]", "[1m]")
      .replace("      lookbackSeconds: 600\n", "");
    const path = join(mkdtempSync(join(tmpdir(), "emb-prom-cli-")), "fixed.yaml");
    writeFileSync(path, fixed);
    const r = await cli("config", "validate", path, "-o", "json");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).files[0]).toMatchObject({ valid: true, warnings: [] });
  });

  it("policy lint --config: the same warnings beside the policy's own (a requirement on a label the prometheus rule cannot map); --strict fails on them", async () => {
    const r = await cli("policy", "lint", "--config", PROM_CONFIG, PROM_POLICY, "-o", "json");
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ errors: 0, warnings: 4 });
    const lines = (out.findings as { source: string; path: string; message: string }[]).map((f) => `${f.path}: ${f.message}`);
    expect(lines.filter((l) => ONEMPTY.test(l) || RANGE.test(l) || LOOKBACK.test(l))).toHaveLength(3);
    expect(lines).toContainEqual(expect.stringMatching(/^spec\.rules\[0\]\.selector: requirement "env=prod" is on a label the metric rule cannot map \(kafka_consumer_lag\)/));
    expect((await cli("policy", "lint", "--strict", "--config", PROM_CONFIG)).code).toBe(1);
  });
});

describe("issue 26: resources: and custom reads", () => {
  const CX = "infra/examples/policies/custom";

  it("policy explain --resource pods: the rule naming the resource decides; the headline names it; JSON carries it", async () => {
    const r = await cli("policy", "explain", "--config", `${CX}/bridge.yaml`, "-n", "team-a", "-m", "http_requests_per_second", "--resource", "pods");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Allow: "http_requests_per_second" on pods in namespace "team-a" with metricLabelSelector "" (every series)\n');
    expect(r.stdout).toContain('Allow policy team-a/web rules[0] (metric "http_requests_per_second", resource "pods") allows selector "" (every series)');
    const json = JSON.parse((await cli("policy", "explain", "--config", `${CX}/bridge.yaml`, "-n", "team-a", "-m", "http_requests_per_second", "-r", "ingresses.networking.k8s.io", "-o", "json")).stdout);
    expect(json).toMatchObject({ decision: "Allow", request: { resource: "ingresses.networking.k8s.io", namespace: "team-a" }, verdicts: [{ rule: 0, reason: "selector-subset" }] });
    // the default is external: the same metric as an External read is denied (the config defines none; no rule for it)
    const ext = await cli("policy", "explain", "--config", `${CX}/bridge.yaml`, "-n", "team-a", "-m", "http_requests_per_second");
    expect(ext.code).toBe(1);
    expect(ext.stdout).toContain('note: the config defines no metric "http_requests_per_second"');
  });

  it("policy explain: a resource no rule names is denied (fail closed), a bad --resource is a usage error", async () => {
    const r = await cli("policy", "explain", "--config", `${CX}/bridge.yaml`, "-n", "team-a", "-m", "http_requests_per_second", "--resource", "services");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('policy team-a/web has no rule for metric "http_requests_per_second" on resource "services": a custom read needs a rule naming its resource');
    expect(r.stdout).toContain("  denied by team-a/web (no rule for services)\n");
    expect(r.stdout).toContain('note: the config defines no custom metric "http_requests_per_second" for services (describes.resource)');
    // a cluster-scoped object: namespace "", only cluster-scoped policies apply (team-a's does not)
    const node = await cli("policy", "explain", "--config", `${CX}/bridge.yaml`, "-n", "", "-m", "node_load", "--resource", "nodes");
    expect(node.code).toBe(1);
    expect(node.stdout).toContain('Deny: "node_load" on nodes of a cluster-scoped object with metricLabelSelector "" (every series)\n');
    expect(node.stdout).toContain("no ExternalMetricPolicy applies to user \"system:serviceaccount:kube-system:horizontal-pod-autoscaler\" reading nodes for a cluster-scoped object, and the bridge's policy.defaultAction is Deny");
    const bad = await cli("policy", "explain", "--config", `${CX}/bridge.yaml`, "-n", "team-a", "-m", "x", "--resource", "Pods");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('policy explain: --resource "Pods" is not external or a lowercase group resource');
  });

  it("policy test: cases carry resource:, a bad one is refused with its field", async () => {
    const r = await cli("policy", "test", `${CX}/policy-tests.yaml`);
    expect(r).toMatchObject({ code: 0 });
    expect(r.stdout).toContain("5 cases, 5 passed, 0 failed");
    const dir = mkdtempSync(join(tmpdir(), "emb-cli-"));
    const table = join(dir, "t.yaml");
    writeFileSync(
      table,
      readFileSync(join(ROOT, `${CX}/policy-tests.yaml`), "utf8").replace("config: bridge.yaml", `config: ${join(ROOT, CX, "bridge.yaml")}`).replace("resource: services", "resource: Services"),
    );
    const bad = await cli("policy", "test", table);
    expect(bad.code).toBe(2);
    expect(bad.stderr + bad.stdout).toMatch(/cases\[2\]\.resource: resource "Services" is not external or a lowercase group resource/);
  });

  it("policy lint: refuses a duplicate entry; warns of a resource no rule of the config serves and shadowing per resource", async () => {
    const r = await cli("policy", "lint", "--config", `${CX}/bridge.yaml`, `${FX}/resources-lint.yaml`);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("spec.rules[1]: rule never decides: every metric it matches (http_requests_per_second) is matched first by rules[0]");
    expect(r.stdout).toContain('spec.rules[2].resources[0]: resource "services": no metric rule of the bridge config describes it (describes.resource), so the rule grants nothing there');
    expect(r.stdout).toContain("spec.rules[2].resources[1]: resource external: the bridge config defines no External metric");
    expect(r.stdout).not.toContain("spec.rules[3]"); // ingresses: not shadowed by the pods rules
    expect(r.stdout).toContain("2 policies, 0 errors, 3 warnings");
    const dup = await cliWithStdin(
      "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ExternalMetricPolicy\nmetadata: { name: d, namespace: team-a }\nspec:\n  rules:\n    - { metric: m, resources: [pods, external, pods], selector: {} }\n",
      "policy", "lint", "-",
    );
    expect(dup.code).toBe(1);
    expect(dup.stdout).toContain('error: spec.rules[0].resources[2]: duplicate resource "pods"');
  });

  it("check-hpa: Pods and Object metrics are decided with their resource; a resource no rule names fails", async () => {
    const r = await cli("check-hpa", "--config", `${CX}/bridge.yaml`, `${FX}/hpa-custom.yaml`, "-o", "json");
    expect(r.code).toBe(1);
    const { checks } = JSON.parse(r.stdout);
    expect(checks.map((c: any) => [c.path, c.type, c.resource, c.ok])).toEqual([
      ["spec.metrics[0]", "Pods", "pods", true],
      ["spec.metrics[1]", "Object", "ingresses.networking.k8s.io", true],
      ["spec.metrics[2]", "Object", "services", false],
    ]);
    expect(checks[2].problems).toEqual(['404: custom metric "http_requests_per_second" for services is not defined by this bridge', "403 Forbidden: denied by team-a/web (no rule for services)"]);
    const text = await cli("check-hpa", "--config", `${CX}/bridge.yaml`, `${FX}/hpa-custom.yaml`);
    expect(text.stdout).toContain("request: GET custom.metrics.k8s.io …/namespaces/team-a/pods/*/http_requests_per_second (resource pods) metricLabelSelector");
    expect(text.stdout).toContain("3 metrics, 2 ok, 1 failing");
  });
});
