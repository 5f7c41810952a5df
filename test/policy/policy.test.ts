/**
 * ExternalMetricPolicy: loading (schema errors with file:line:field),
 * patterns (RE2, hostile inputs), evaluation as ../shared/POLICY.md says.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CONFIG_API_VERSION, loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue } from "../../shared/config/yaml.ts";
import { ANONYMOUS, HPA_CONTROLLER, type Caller } from "../../shared/identity.ts";
import { parseSelector } from "../../shared/k8s/selector.ts";
import type { PolicySet } from "../../shared/policy/evaluate.ts";
import { compileMetricPattern, PatternError } from "../../shared/policy/regex.ts";
import { POLICY_API_VERSION } from "../../shared/policy/schema.ts";

const readFile = (p: string) => readFileSync(p, "utf8");
const EXAMPLE = "infra/examples/policies/bridge.yaml";

const BRIDGE = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { sqs: { type: aws-sqs, region: us-east-1 } }
metrics:
  - { name: queue_messages_ready, provider: sqs }
  - { name: queue_messages_delayed, provider: sqs }
  - { name: Team/Queue_Depth, provider: sqs }
`;

/** A config source: the bridge document with a policy section, then `docs`. */
function source(policySection: string, ...docs: string[]): string {
  return [BRIDGE + policySection, ...docs].join("---\n");
}

function policy(name: string, spec: string, namespace?: string): string {
  return `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: ${name}${namespace !== undefined ? `, namespace: ${namespace}` : ""} }
spec:
${spec}
`;
}

function policiesOf(text: string): PolicySet {
  const set = loadConfig(text, "p.yaml").config.policy?.policies;
  if (set === undefined) throw new Error("no policies");
  return set;
}

function issuesOf(text: string, options = {}, name = "p.yaml"): string[] {
  try {
    loadConfig(text, name, options);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.map(formatIssue);
  }
  throw new Error("accepted");
}

function decide(set: PolicySet, namespace: string, metric: string, selector: string, caller: Caller = HPA_CONTROLLER) {
  return set.evaluate({ caller, namespace, metric, selector: parseSelector(selector) });
}

describe("loading", () => {
  it("uses the project's own API group", () => {
    expect(POLICY_API_VERSION).toBe(CONFIG_API_VERSION);
  });

  it("loads the worked examples, policies from policy.files beside the config", () => {
    const { config } = loadConfig(readFile(EXAMPLE), EXAMPLE, { readFile });
    expect(config.policy?.defaultAction).toBe("Deny");
    expect(config.policy?.localIdentity).toEqual(ANONYMOUS);
    expect(config.policy?.policies.policies.map((p) => `${p.id} ${p.source}:${p.line}`)).toEqual([
      "no-anonymous-reads infra/examples/policies/cluster-guardrails.yaml:6",
      "team-a/queues infra/examples/policies/team-a.yaml:4",
      "team-b/team-b infra/examples/policies/team-b.yaml:4",
      "team-b/ci-reads-errors-only infra/examples/policies/team-b.yaml:24",
    ]);
  });

  it("without a policy section and without policies, fails closed: every read is denied, and the message says how to open it", () => {
    const policy = loadConfig(BRIDGE, "p.yaml").config.policy!;
    expect(policy).toMatchObject({ defaultAction: "Deny", implicit: true, localIdentity: ANONYMOUS, files: [] });
    const decision = policy.policies.evaluate({ caller: HPA_CONTROLLER, namespace: "team-a", metric: "queue_messages_ready", selector: parseSelector("queue=a") });
    expect(decision.decision).toBe("Deny");
    expect(decision.message).toMatch(/no policy section, so every read is denied.*policy: \{ defaultAction: Allow \}/);
    // stating the default is what opens it
    expect(loadConfig(`${BRIDGE}policy: { defaultAction: Allow }\n`, "p.yaml").config.policy).toMatchObject({ defaultAction: "Allow" });
    expect(loadConfig(`${BRIDGE}policy: { defaultAction: Allow }\n`, "p.yaml").config.policy?.implicit).toBeUndefined();
  });

  it("refuses policies without a policy section, so the default is always stated", () => {
    expect(issuesOf([BRIDGE, policy("a", "  rules: []")].join("---\n"))).toEqual([
      "p.yaml:9:1: ExternalMetricPolicy objects need a policy section in the BridgeConfig: set policy.defaultAction (Deny for clusters)",
    ]);
  });

  it("names file, line and field of schema errors", () => {
    const text = source(
      "policy: { defaultAction: Deny }\n",
      policy(
        "bad",
        `  subjects: {}
  rules:
    - metric: "a"
      selector: { matchLabels: { queue: a } }
      deny: true
    - metric: "b"
    - metric: "c"
      selector: { matchExpressions: [{ key: queue, operator: Gt, values: ["1"] }] }
    - metric: "d"
      deny: false
      extra: 1
    - metric: "e"
      selector: { matchLabel: { queue: a } }
  defaultAction: Maybe`,
        "Team_A",
      ),
    );
    expect(issuesOf(text)).toEqual([
      "p.yaml:12:35: metadata.namespace: must be a DNS-1123 label (a namespace name)",
      "p.yaml:14:13: spec.subjects: list at least one user, group or service account (omit subjects to apply the policy to every caller)",
      "p.yaml:16:7: spec.rules[0]: a rule has exactly one of selector (what it allows; {} allows every series) or deny: true",
      "p.yaml:19:7: spec.rules[1]: a rule has exactly one of selector (what it allows; {} allows every series) or deny: true",
      'p.yaml:21:62: spec.rules[2].selector.matchExpressions[0].operator: Invalid option: expected one of "In"|"NotIn"|"Exists"|"DoesNotExist"',
      "p.yaml:23:13: spec.rules[3].deny: Invalid input: expected true",
      "p.yaml:24:7: spec.rules[3].extra: unknown field",
      "p.yaml:26:19: spec.rules[4].selector.matchLabel: unknown field",
      'p.yaml:27:18: spec.defaultAction: Invalid option: expected one of "Allow"|"Deny"',
    ]);
  });

  it("refuses unsupported pattern syntax and invalid selectors at load time, with the line", () => {
    const text = source(
      "policy: { defaultAction: Deny }\n",
      policy(
        "bad",
        String.raw`  rules:
    - metric: "(queue)_\\1"
      selector: "queue in (a"
    - metric: "(?=queue)queue_.*"
      selector: { matchExpressions: [{ key: queue, operator: In }] }
    - metric: "(?<!team_)queue"
      deny: true
    - metric: "["
      selector: { matchLabels: { "bad key!": a } }`,
      ),
    );
    expect(issuesOf(text)).toEqual([
      "p.yaml:15:15: spec.rules[0].metric: backreferences (\\1 … \\9) are not supported: policy patterns use RE2 syntax, which matches in linear time (error parsing regexp: invalid escape sequence: `\\1`)",
      "p.yaml:16:17: spec.rules[0].selector: invalid selector: unable to parse requirement: found '', expected: ',' or ')'",
      "p.yaml:17:15: spec.rules[1].metric: lookaround ((?=…), (?!…), (?<=…), (?<!…)) are not supported: policy patterns use RE2 syntax, which matches in linear time (error parsing regexp: invalid or unsupported Perl syntax: `(?=`)",
      "p.yaml:18:17: spec.rules[1].selector: invalid selector: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
      "p.yaml:19:15: spec.rules[2].metric: lookaround ((?=…), (?!…), (?<=…), (?<!…)) are not supported: policy patterns use RE2 syntax, which matches in linear time (error parsing regexp: invalid named capture: `(?<!team_)queue`)",
      "p.yaml:21:15: spec.rules[3].metric: invalid RE2 pattern: error parsing regexp: missing closing ]: `[`",
      expect.stringMatching(/^p\.yaml:22:17: spec\.rules\[3\]\.selector: invalid selector: key: Invalid value: "bad key!": name part must consist of/),
    ]);
  });

  it("refuses duplicate policies, misspelt kinds, and a bad policy section", () => {
    const dup = source("policy: { defaultAction: Deny }\n", policy("a", "  rules: []", "x"), policy("a", "  rules: []", "x"));
    expect(issuesOf(dup)).toEqual(["p.yaml:18:19: metadata.name: policy x/a is already defined at p.yaml:10"]);
    const misspelt = source("policy: { defaultAction: Deny }\n", policy("a", "  rules: []").replace("ExternalMetricPolicy", "ExternalMetricsPolicy"));
    expect(issuesOf(misspelt)).toEqual(['p.yaml:11:7: kind: expected kind ExternalMetricPolicy, found "ExternalMetricsPolicy"']);
    expect(issuesOf(source("policy: { defaultAction: allow, localIdentity: { groups: [a] } }\n"))).toEqual([
      'p.yaml:8:26: policy.defaultAction: Invalid option: expected one of "Allow"|"Deny"',
      "p.yaml:8:48: policy.localIdentity.user: Invalid input: expected string, received undefined",
    ]);
  });

  describe("policy.files", () => {
    const dir = mkdtempSync(join(tmpdir(), "policy-files-"));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const config = join(dir, "bridge.yaml");
    writeFileSync(config, source("policy: { defaultAction: Deny, files: [team.yaml, missing.yaml] }\n"));
    writeFileSync(join(dir, "team.yaml"), policy("team", "  rules: [{ metric: x, deny: tru }]", "team"));

    it("are read beside the config, and every problem is named", () => {
      expect(issuesOf(readFile(config), { readFile }, config).map((i) => i.replaceAll(dir, "DIR"))).toEqual([
        "DIR/bridge.yaml:8:51: policy.files[1]: cannot read DIR/missing.yaml: ENOENT: no such file or directory, open 'DIR/missing.yaml'",
        "DIR/team.yaml:5:30: spec.rules[0].deny: Invalid input: expected true",
      ]);
      writeFileSync(config, source("policy: { defaultAction: Deny, files: [team.yaml] }\n"));
      writeFileSync(join(dir, "team.yaml"), policy("team", "  rules: [{ metric: x, deny: true }]", "team"));
      const loaded = loadConfig(readFile(config), config, { readFile }).config.policy;
      expect(loaded?.files).toEqual([join(dir, "team.yaml")]);
      expect(loaded?.policies.policies.map((p) => p.id)).toEqual(["team/team"]);
    });

    it("are refused where the entry point cannot read files (the policies would not be enforced)", () => {
      expect(issuesOf(readFile(config), {}, config).map((i) => i.replaceAll(dir, "DIR"))).toEqual([
        "DIR/bridge.yaml:8:39: policy.files: this entry point cannot read files; put the ExternalMetricPolicy documents in the config source instead",
      ]);
    });
  });
});

describe("metric patterns (RE2)", () => {
  it("match the whole lookup key, case-insensitively", () => {
    const p = compileMetricPattern("Queue_messages_(ready|delayed)");
    expect(p.matches("queue_messages_ready")).toBe(true);
    expect(p.matches("queue_messages_delayed")).toBe(true);
    expect(p.matches("queue_messages_ready_total")).toBe(false);
    expect(p.matches("my_queue_messages_ready")).toBe(false);
    expect(compileMetricPattern("a|bc").matches("abc")).toBe(false);
    expect(compileMetricPattern("team/.*").matches("team/queue_depth")).toBe(true);
  });

  it("run in linear time on hostile patterns and long names (a backtracking engine would not finish)", () => {
    const hostile: [string, string, boolean][] = [
      ["(a+)+$", `${"a".repeat(100_000)}!`, false],
      ["(a|aa)*c", "a".repeat(100_000), false],
      ["(x+x+)+y", "x".repeat(100_000), false],
      ["(.*a){20}", "a".repeat(50_000), true],
      ["(\\w+\\s?)*$", `${"word ".repeat(20_000)}!`, false],
    ];
    for (const [pattern, input, expected] of hostile) expect(compileMetricPattern(pattern).matches(input)).toBe(expected);
  });

  it("refuse oversized patterns and programs", () => {
    expect(() => compileMetricPattern("a".repeat(1025))).toThrow(new PatternError("pattern is longer than 1024 characters"));
    expect(() => compileMetricPattern("(abc){1000}(abc){1000}")).toThrow(/too costly: 6000 units, more than 2048/);
    expect(() => compileMetricPattern("a{1001}")).toThrow(/invalid repeat count/);
  });
});

describe("evaluation (POLICY.md)", () => {
  const text = source(
    "policy: { defaultAction: Deny }\n",
    policy(
      "guard",
      `  subjects: { groups: [contractors] }
  rules:
    - { metric: "team/.*", deny: true }
  defaultAction: Allow`,
    ),
    policy(
      "queues",
      `  rules:
    - metric: "queue_messages_ready"
      selector: { matchExpressions: [{ key: queue, operator: In, values: [a-jobs, a-mail] }] }
    - metric: "queue_.*"
      selector: "queue=a-jobs,tier!=gold"
    - metric: ".*"
      selector: {}
  defaultAction: Deny`,
      "team-a",
    ),
    policy(
      "jane",
      `  subjects: { users: [jane], serviceAccounts: [team-a/ci] }
  rules:
    - { metric: "queue_messages_ready", selector: "queue=a-jobs" }
  defaultAction: Deny`,
      "team-a",
    ),
  );
  const set = policiesOf(text);
  const jane: Caller = { user: "jane", groups: ["contractors"], extra: {} };
  const ci: Caller = { user: "system:serviceaccount:team-a:ci", groups: [], extra: {} };

  it("the first rule whose metric matches decides, by selector containment", () => {
    expect(decide(set, "team-a", "queue_messages_ready", "queue in (a-jobs,a-mail)").decision).toBe("Allow");
    const d = decide(set, "team-a", "queue_messages_ready", "queue in (a-jobs,b-jobs)");
    expect(d.deniedBy).toMatchObject({ policy: "team-a/queues", rule: 0, reason: "selector-not-subset", missing: "queue in (a-jobs,a-mail)" });
    // rules[1] would allow a-jobs only without tier=gold; rules[2] (".*") is never reached for queue_ metrics
    expect(decide(set, "team-a", "queue_messages_delayed", "queue=a-jobs").deniedBy).toMatchObject({ rule: 1, missing: "tier!=gold" });
    expect(decide(set, "team-a", "queue_messages_delayed", "queue=a-jobs,tier=silver").decision).toBe("Allow");
    expect(decide(set, "team-a", "team/queue_depth", "").decision).toBe("Allow"); // rules[2], selector {} = everything
  });

  it("applies cluster-scoped and namespace policies whose subjects match; all must allow", () => {
    // jane: guard (cluster, group contractors) + queues + jane
    const janeReads = decide(set, "team-a", "queue_messages_ready", "queue=a-mail", jane);
    expect(janeReads.deniedBy).toMatchObject({ policy: "team-a/jane", rule: 0, missing: "queue=a-jobs" });
    expect(decide(set, "team-a", "queue_messages_ready", "queue=a-jobs", jane).decision).toBe("Allow");
    const guarded = set.evaluate({ caller: jane, namespace: "team-a", metric: "team/queue_depth", selector: parseSelector("") }, { complete: true });
    expect(guarded.verdicts.map((v) => `${v.policy} ${v.decision}`)).toEqual(["guard Deny", "team-a/queues Allow", "team-a/jane Deny"]);
    expect(guarded.deniedBy).toMatchObject({ policy: "guard", rule: 0, reason: "deny-rule" });
    expect(guarded.message).toBe('policy guard rules[0] (metric "team/.*") is a deny rule');
    // the service account is matched by its user name
    expect(decide(set, "team-a", "queue_messages_delayed", "queue=a-jobs,tier=x", ci).deniedBy).toMatchObject({
      policy: "team-a/jane",
      reason: "default-action",
      explanation: 'policy team-a/jane has no rule for metric "queue_messages_delayed" and its defaultAction is Deny',
    });
  });

  it("with no applicable policy, the bridge's default decides", () => {
    const d = decide(set, "team-b", "queue_messages_ready", "queue=a-jobs");
    expect(d).toMatchObject({ decision: "Deny", byDefault: true, verdicts: [] });
    expect(d.message).toBe(
      'no ExternalMetricPolicy applies to user "system:serviceaccount:kube-system:horizontal-pod-autoscaler" in namespace "team-b", and the bridge\'s policy.defaultAction is Deny',
    );
    const open = policiesOf(text.replace("policy: { defaultAction: Deny }", "policy: { defaultAction: Allow }"));
    expect(decide(open, "team-b", "queue_messages_ready", "").decision).toBe("Allow");
    // a cluster policy applies in every namespace, to its subjects only
    expect(decide(open, "team-b", "team/queue_depth", "", jane).deniedBy?.policy).toBe("guard");
    expect(decide(open, "team-b", "team/queue_depth", "", HPA_CONTROLLER).decision).toBe("Allow");
  });

  it("an unsatisfiable request selector is contained in anything; an empty one only in an empty selector", () => {
    expect(decide(set, "team-a", "queue_messages_ready", "queue=x,queue=y").decision).toBe("Allow");
    expect(decide(set, "team-a", "queue_messages_ready", "").deniedBy?.explanation).toBe(
      'policy team-a/queues rules[0] (metric "queue_messages_ready") allows only selector "queue in (a-jobs,a-mail)", ' +
        'and the request\'s selector "" (every series) does not imply "queue in (a-jobs,a-mail)"',
    );
  });
});
