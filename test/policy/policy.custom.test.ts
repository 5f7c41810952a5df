/**
 * ExternalMetricPolicy `resources:` and custom.metrics.k8s.io reads (issue
 * 26, contract C1): the loader's bounds, evaluation (the first rule matching
 * metric AND resource decides; a custom read without a rule naming its
 * resource is denied whatever the policy's defaultAction; the subset check
 * on the metricLabelSelector; cluster-scoped objects), the bridge's
 * `authorizeCustom` hook in front of a real custom read against a REAL
 * Prometheus, and the proxy's cluster policy layer (policies compiled in its
 * worker from the fake Kubernetes API) with a resource, including an invalid
 * `resources` edit that keeps the last valid generation.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue } from "../../shared/config/yaml.ts";
import { HPA_CONTROLLER, type Caller } from "../../shared/identity.ts";
import { customMetricsRead, parseRequestPath } from "../../shared/k8s/request-path.ts";
import { parseSelector } from "../../shared/k8s/selector.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { customPolicyAuthorizer, policyAuthorizer, policyHooks } from "../../shared/policy/authorize.ts";
import type { PolicySet } from "../../shared/policy/evaluate.ts";
import { POLICY_LIMITS } from "../../shared/policy/schema.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { ClusterPolicies, ClusterPolicyDenied } from "../../shared/proxy/policy/policies.ts";
import { createOffThreadCompiler, type OffThreadCompiler } from "../../shared/proxy/policy/policy-worker.ts";
import { createCustomValuesReader } from "../../shared/values/custom-read.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { buildBridge } from "../helpers/bridge.ts";
import { PROMETHEUS_BUILD_TIMEOUT_MS, prometheusBinary, startExporter, startPrometheus, type Exporter, type PrometheusServer } from "../helpers/prometheus.ts";

const BRIDGE = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { sqs: { type: aws-sqs, region: us-east-1 } }
metrics:
  - { name: queue_messages_ready, provider: sqs }
`;

function policy(name: string, spec: string, namespace?: string): string {
  return `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: ${name}${namespace !== undefined ? `, namespace: ${namespace}` : ""} }
spec:
${spec}
`;
}

function policiesOf(defaultAction: "Allow" | "Deny", ...docs: string[]): PolicySet {
  const set = loadConfig([`${BRIDGE}policy: { defaultAction: ${defaultAction} }\n`, ...docs].join("---\n"), "p.yaml").config.policy?.policies;
  if (set === undefined) throw new Error("no policies");
  return set;
}

function issuesOf(...docs: string[]): string[] {
  try {
    loadConfig([`${BRIDGE}policy: { defaultAction: Deny }\n`, ...docs].join("---\n"), "p.yaml");
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.map(formatIssue);
  }
  throw new Error("accepted");
}

function decide(set: PolicySet, resource: string | undefined, metric: string, selector = "", namespace = "team-a", caller: Caller = HPA_CONTROLLER) {
  return set.evaluate({ caller, namespace, metric, selector: parseSelector(selector), ...(resource !== undefined ? { resource } : {}) }, { complete: true });
}

// team-a may read http_requests_per_second on pods and on ingresses in its namespace (docs/policy.md's example)
const TEAM_A = policy(
  "team-a",
  `  subjects: { serviceAccounts: [kube-system/horizontal-pod-autoscaler] }
  rules:
    - metric: queue_messages_ready
      selector: { matchLabels: { queue: team-a-jobs } }
    - metric: http_requests_per_second
      resources: [pods, ingresses.networking.k8s.io]
      selector: {}
  defaultAction: Allow`,
  "team-a",
);

describe("loading resources:", () => {
  it("absent means [external]; entries are kept as written", () => {
    const set = policiesOf("Deny", TEAM_A);
    expect(set.policies[0]!.rules.map((r) => r.resources)).toEqual([["external"], ["pods", "ingresses.networking.k8s.io"]]);
  });

  it("refuses a bad, duplicate, uppercase, empty or oversized list, naming the rule and the entry (file:line:field)", () => {
    const rules = (resources: string) => policy("p", `  rules:\n    - { metric: m, deny: true }\n    - { metric: x, selector: {}, resources: ${resources} }`, "team-a");
    expect(issuesOf(rules("[pods, Pods]"))).toEqual([
      expect.stringMatching(/^p\.yaml:\d+:\d+: spec\.rules\[1\]\.resources\[1\]: "Pods" is not a resource: write external .* lowercase group resource/),
    ]);
    expect(issuesOf(rules("[pods, external, pods]"))).toEqual([expect.stringMatching(/spec\.rules\[1\]\.resources\[2\]: duplicate resource "pods"$/)]);
    expect(issuesOf(rules("[]"))).toEqual([expect.stringMatching(/spec\.rules\[1\]\.resources: resources has 0 entries: list 1 to 16/)]);
    expect(issuesOf(rules("pods"))).toEqual([expect.stringMatching(/spec\.rules\[1\]\.resources: resources must be a list/)]);
    expect(issuesOf(rules("[networking.k8s.io/ingresses]"))).toEqual([expect.stringMatching(/resources\[0\]: "networking\.k8s\.io\/ingresses" is not a resource/)]);
    expect(issuesOf(rules("[Ingress]"))).toHaveLength(1);
  });

  it("hostile input: 10,000 entries are one issue (the count, checked first); a 100,000-character entry is refused, shown cut", () => {
    const many = Array.from({ length: 10_000 }, (_, i) => `r${i}`).join(", ");
    const started = performance.now();
    const issues = issuesOf(policy("p", `  rules:\n    - { metric: x, selector: {}, resources: [${many}] }`, "team-a"));
    expect(issues).toEqual([expect.stringMatching(/spec\.rules\[0\]\.resources: resources has 10000 entries: list 1 to 16 \(omit it for \[external\]\)$/)]);
    expect(performance.now() - started).toBeLessThan(5_000);
    const long = `r.${"g".repeat(100_000)}`;
    const [one] = issuesOf(policy("p", `  rules:\n    - { metric: x, selector: {}, resources: [${long}] }`, "team-a"));
    expect(one).toMatch(/resources\[0\]: "r\.g{78}…" is not a resource: .*at most 317 characters/);
    expect(one!.length).toBeLessThan(500);
    // the longest allowed: a DNS label plural and a 253-character group
    const longest = `${"r".repeat(63)}.${"g".repeat(63)}.${"g".repeat(63)}.${"g".repeat(63)}.${"g".repeat(61)}`;
    expect(longest.length).toBe(POLICY_LIMITS.resource);
    expect(policiesOf("Deny", policy("p", `  rules:\n    - { metric: x, selector: {}, resources: [${longest}] }`, "team-a")).policies[0]!.rules[0]!.resources).toEqual([longest]);
  });
});

describe("evaluation with a resource", () => {
  const set = policiesOf("Deny", TEAM_A);

  it("an old policy reads exactly as before for External reads (resource absent or external)", () => {
    const old = policiesOf("Deny", policy("team-a", `  rules:\n    - metric: queue_messages_ready\n      selector: { matchLabels: { queue: team-a-jobs } }\n  defaultAction: Allow`, "team-a"));
    for (const resource of [undefined, "external"]) {
      const allowed = decide(old, resource, "queue_messages_ready", "queue=team-a-jobs");
      expect(allowed).toMatchObject({ decision: "Allow", message: "allowed by every applicable policy: team-a/team-a rules[0]" });
      const denied = decide(old, resource, "queue_messages_ready", "queue=team-b");
      expect(denied.deniedBy?.explanation).toBe(
        `policy team-a/team-a rules[0] (metric "queue_messages_ready") allows only selector "queue=team-a-jobs", and the request's selector "queue=team-b" does not imply "queue=team-a-jobs"`,
      );
      // no rule: the policy's defaultAction (Allow) decides an External read, as always
      expect(decide(old, resource, "other_metric")).toMatchObject({
        decision: "Allow",
        verdicts: [{ reason: "default-action", explanation: 'policy team-a/team-a has no rule for metric "other_metric" and its defaultAction is Allow' }],
      });
    }
  });

  it("the policy's defaultAction Allow does not allow a custom read: no rule naming the resource → Deny (no-rule-for-resource)", () => {
    const d = decide(set, "services", "http_requests_per_second");
    expect(d.decision).toBe("Deny");
    expect(d.deniedBy).toMatchObject({ policy: "team-a/team-a", reason: "no-rule-for-resource", decision: "Deny" });
    expect(d.deniedBy!.rule).toBeUndefined();
    expect(d.message).toBe(
      'policy team-a/team-a has no rule for metric "http_requests_per_second" on resource "services": a custom read needs a rule naming its resource in resources ' +
        "(the policy's defaultAction Allow decides External reads only)",
    );
    // a rule for the External metric of the same name does not cover a custom read of it
    expect(decide(set, "pods", "queue_messages_ready", "queue=team-a-jobs").deniedBy?.reason).toBe("no-rule-for-resource");
  });

  it("a rule naming the resource decides it, its explanation names the resource; a rule for custom resources leaves External reads alone", () => {
    for (const resource of ["pods", "ingresses.networking.k8s.io"]) {
      const d = decide(set, resource, "http_requests_per_second", "verb=GET");
      expect(d).toMatchObject({ decision: "Allow", verdicts: [{ reason: "selector-subset", rule: 1 }] });
      expect(d.verdicts[0]!.explanation).toBe(
        `policy team-a/team-a rules[1] (metric "http_requests_per_second", resource "${resource}") allows selector "" (every series), which contains the request's selector "verb=GET"`,
      );
    }
    // External read of http_requests_per_second: the custom rule does not match; defaultAction Allow decides, as before
    expect(decide(set, undefined, "http_requests_per_second").verdicts[0]).toMatchObject({ reason: "default-action", decision: "Allow" });
  });

  it("the first rule matching metric AND resource decides: a deny rule for pods denies pods only", () => {
    const s = policiesOf(
      "Deny",
      policy(
        "p",
        `  rules:
    - { metric: "http_.*", resources: [pods], deny: true }
    - { metric: ".*", resources: [external, pods, services], selector: {} }
    - { metric: ".*", deny: true }
  defaultAction: Deny`,
        "team-a",
      ),
    );
    expect(decide(s, "pods", "http_requests").deniedBy).toMatchObject({ rule: 0, reason: "deny-rule", explanation: 'policy team-a/p rules[0] (metric "http_.*", resource "pods") is a deny rule' });
    expect(decide(s, "services", "http_requests")).toMatchObject({ decision: "Allow", verdicts: [{ rule: 1 }] });
    expect(decide(s, undefined, "http_requests")).toMatchObject({ decision: "Allow", verdicts: [{ rule: 1 }] });
    expect(decide(s, "pods", "cpu")).toMatchObject({ decision: "Allow", verdicts: [{ rule: 1 }] });
    expect(decide(s, "ingresses.networking.k8s.io", "cpu").deniedBy).toMatchObject({ reason: "no-rule-for-resource" });
    // exact and lowercase: a resource is not a pattern
    expect(decide(s, "podsx", "cpu").deniedBy).toMatchObject({ reason: "no-rule-for-resource" });
    expect(decide(s, "Pods", "cpu").deniedBy).toMatchObject({ reason: "no-rule-for-resource" });
  });

  it("the subset check runs on the metricLabelSelector", () => {
    const s = policiesOf(
      "Deny",
      policy("p", `  rules:\n    - { metric: http_requests, resources: [pods], selector: { matchExpressions: [{ key: verb, operator: In, values: [GET, HEAD] }] } }`, "team-a"),
    );
    expect(decide(s, "pods", "http_requests", "verb=GET").decision).toBe("Allow");
    expect(decide(s, "pods", "http_requests", "verb in (GET,HEAD),code=200").decision).toBe("Allow");
    const every = decide(s, "pods", "http_requests", "");
    expect(every.deniedBy).toMatchObject({ reason: "selector-not-subset", missing: "verb in (GET,HEAD)" });
    expect(every.message).toContain('(metric "http_requests", resource "pods") allows only selector "verb in (GET,HEAD)"');
    expect(decide(s, "pods", "http_requests", "verb=POST").decision).toBe("Deny");
  });

  it("cluster-scoped objects (namespace \"\"): only cluster-scoped policies apply; none → the bridge's defaultAction", () => {
    const cluster = policy("nodes", `  rules:\n    - { metric: node_load, resources: [nodes], selector: {} }`);
    const s = policiesOf("Deny", TEAM_A, cluster);
    expect(s.applicable(HPA_CONTROLLER, "").map((p) => p.id)).toEqual(["nodes"]);
    expect(decide(s, "nodes", "node_load", "", "")).toMatchObject({ decision: "Allow", verdicts: [{ policy: "nodes", rule: 0 }] });
    expect(decide(s, "nodes", "other", "", "").deniedBy).toMatchObject({ policy: "nodes", reason: "no-rule-for-resource" });
    const noCluster = policiesOf("Deny", TEAM_A);
    expect(decide(noCluster, "nodes", "node_load", "", "")).toMatchObject({ decision: "Deny", byDefault: true });
    expect(decide(noCluster, "nodes", "node_load", "", "").message).toMatch(/^no ExternalMetricPolicy applies to user "system:serviceaccount:kube-system:horizontal-pod-autoscaler" reading nodes for a cluster-scoped object, and the bridge's policy.defaultAction is Deny/);
    // running open (explicit Allow, logged at start): a custom read no policy covers is allowed, as an External one
    expect(decide(policiesOf("Allow", TEAM_A), "nodes", "node_load", "", "").decision).toBe("Allow");
  });

  it("every applicable policy must allow through a rule naming the resource: a cluster policy without one denies a namespace's read", () => {
    const guard = policy("guard", `  rules:\n    - { metric: ".*", selector: {} }\n  defaultAction: Allow`);
    const s = policiesOf("Deny", guard, TEAM_A);
    const d = decide(s, "pods", "http_requests_per_second");
    expect(d.decision).toBe("Deny");
    expect(d.verdicts.map((v) => [v.policy, v.reason])).toEqual([
      ["guard", "no-rule-for-resource"],
      ["team-a/team-a", "selector-subset"],
    ]);
  });

  it("resources: [\"*\"] covers every custom resource and never external: a cluster policy can grant one resource and leave the rest to the namespaces' policies", () => {
    const hpa = policy(
      "hpa",
      `  subjects: { serviceAccounts: [kube-system/horizontal-pod-autoscaler] }
  rules:
    - { metric: node_load, resources: [nodes], selector: { matchLabels: { zone: a } } }
    - { metric: ".*", resources: ["*"], selector: {} }
  defaultAction: Allow`,
    );
    const s = policiesOf("Deny", hpa, TEAM_A);
    // the namespace's policy still decides its pods; the cluster policy's catch-all only steps aside
    expect(decide(s, "pods", "http_requests_per_second")).toMatchObject({ decision: "Allow", verdicts: [{ policy: "hpa", rule: 1 }, { policy: "team-a/team-a", rule: 1 }] });
    expect(decide(s, "services", "http_requests_per_second").deniedBy).toMatchObject({ policy: "team-a/team-a", reason: "no-rule-for-resource" });
    // the first matching rule decides: nodes/node_load is held to zone=a
    expect(decide(s, "nodes", "node_load", "zone=b", "").deniedBy).toMatchObject({ policy: "hpa", rule: 0, reason: "selector-not-subset" });
    // * is not external: an External read falls to the cluster policy's defaultAction, as before
    expect(decide(s, undefined, "queue_messages_ready", "queue=team-a-jobs").verdicts[0]).toMatchObject({ policy: "hpa", reason: "default-action" });
    const denyAll = policiesOf("Deny", policy("no-custom", `  rules:\n    - { metric: ".*", resources: ["*"], deny: true }\n  defaultAction: Allow`));
    expect(decide(denyAll, "pods", "anything").deniedBy).toMatchObject({ reason: "deny-rule" });
    expect(decide(denyAll, undefined, "anything", "", "team-a").byDefault).toBe(false);
    expect(decide(denyAll, undefined, "anything", "", "team-a").decision).toBe("Allow");
    expect(issuesOf(policy("x", `  rules:\n    - { metric: a, resources: ["*", "*"], selector: {} }`))).toEqual([expect.stringMatching(/resources\[1\]: duplicate resource "\*"/)]);
    expect(issuesOf(policy("x", `  rules:\n    - { metric: a, resources: ["p*"], selector: {} }`))).toEqual([expect.stringMatching(/"p\*" is not a resource: .*or \* \(every custom metrics resource\)/)]);
  });

  it("the first-rule memo is keyed by resource and metric and stays bounded: decisions hold past its clearing", () => {
    const s = policiesOf("Deny", TEAM_A);
    const first = decide(s, "pods", "http_requests_per_second");
    for (let i = 0; i < 10_000; i++) decide(s, `r${i}`, `m${i % 7}`);
    expect(decide(s, "pods", "http_requests_per_second")).toEqual(first);
    const stats = s.memoStats(s.policies[0]!);
    expect(stats.entries).toBeLessThanOrEqual(4096);
    expect(stats.bytes).toBeLessThanOrEqual(512 * 1024);
    // long, caller-chosen names and resources (the proxy evaluates what callers send): bounded in bytes, decisions unchanged
    for (let i = 0; i < 2_000; i++) expect(decide(s, `${"r".repeat(300)}${i}`, `${"m".repeat(1_000)}${i}`).decision).toBe("Deny");
    expect(s.memoStats(s.policies[0]!).bytes).toBeLessThanOrEqual(512 * 1024);
    expect(decide(s, "pods", "x".repeat(100_000)).decision).toBe("Deny");
    expect(decide(s, "services", "http_requests_per_second").decision).toBe("Deny");
    expect(decide(s, undefined, "queue_messages_ready", "queue=team-a-jobs").decision).toBe("Allow");
  });
});

describe("the bridge's hooks", () => {
  const read = { caller: HPA_CONTROLLER, namespace: "team-a", metric: "http_requests_per_second", selector: parseSelector(""), rule: undefined as never };

  it("customPolicyAuthorizer: returns on Allow, throws 403 worded as NewForbidden with group custom.metrics.k8s.io and kind the resource", () => {
    const authorize = customPolicyAuthorizer(policiesOf("Deny", TEAM_A));
    expect(authorize({ ...read, resource: "pods" })).toBeUndefined();
    let err: unknown;
    try {
      authorize({ ...read, resource: "services" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StatusError);
    const status = (err as StatusError).toStatus();
    expect(status).toMatchObject({ code: 403, reason: "Forbidden", details: { name: "http_requests_per_second", group: "custom.metrics.k8s.io", kind: "services" } });
    expect(status.message).toBe(
      'services.custom.metrics.k8s.io "http_requests_per_second" is forbidden: user "system:serviceaccount:kube-system:horizontal-pod-autoscaler" ' +
        'may not read it in namespace "team-a": policy team-a/team-a has no rule for metric "http_requests_per_second" on resource "services": ' +
        "a custom read needs a rule naming its resource in resources (the policy's defaultAction Allow decides External reads only)",
    );
    // the External authorizer is unchanged
    expect(() => policyAuthorizer(policiesOf("Deny", TEAM_A))({ ...read, metric: "queue_messages_ready", selector: parseSelector("queue=x") } as never)).toThrow(/^externalmetrics\.external\.metrics\.k8s\.io "queue_messages_ready" is forbidden/);
  });

  it("policyHooks: a config without a policy section denies every custom read; with one, its policies decide", () => {
    const none = loadConfig(BRIDGE, "b.yaml").config;
    expect(() => policyHooks({ ...none, policy: undefined }).authorizeCustom({ ...read, resource: "pods" })).toThrow(/is forbidden: .*the BridgeConfig has no policy section/);
    expect(() => policyHooks(none).authorizeCustom({ ...read, resource: "pods" })).toThrow(/pods\.custom\.metrics\.k8s\.io .* is forbidden/);
    const withPolicies = loadConfig([`${BRIDGE}policy: { defaultAction: Deny }\n`, TEAM_A].join("---\n"), "p.yaml").config;
    expect(policyHooks(withPolicies).authorizeCustom({ ...read, resource: "pods" })).toBeUndefined();
    expect(() => policyHooks(withPolicies).authorizeCustom({ ...read, resource: "pods", namespace: "team-b" })).toThrow(/policy\.defaultAction is Deny/);
  });
});

describe("a custom read behind the policy hook (real Prometheus)", () => {
  let exporter: Exporter;
  let prom: PrometheusServer;
  beforeAll(async () => {
    const binary = prometheusBinary();
    exporter = await startExporter([
      { name: "emb_http_rps", labels: { namespace: "team-a", pod: "web-1", verb: "GET" }, value: 5 },
      { name: "emb_http_rps", labels: { namespace: "team-a", pod: "web-1", verb: "POST" }, value: 1 },
    ]);
    prom = await startPrometheus({ binary, targets: [exporter.target] });
    await prom.waitForSeries("emb_http_rps");
  }, PROMETHEUS_BUILD_TIMEOUT_MS + 120_000);
  afterAll(async () => {
    await prom?.stop();
    await exporter?.close();
  });

  const configText = (url: string) => `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { prom: { type: prometheus, url: ${url}, timeoutSeconds: 2 } }
policy: { defaultAction: Deny }
metrics:
  - name: http_requests_per_second
    provider: prom
    describes: { resource: pods, objectLabel: pod, namespaceLabel: namespace }
    query: { series: emb_http_rps, selectorLabels: { pod: pod, namespace: namespace, verb: { label: verb, values: { GET: GET, POST: POST } } } }
---
${policy(
  "team-a",
  `  rules:
    - metric: http_requests_per_second
      resources: [pods]
      selector: { matchLabels: { verb: GET } }
  defaultAction: Allow`,
  "team-a",
)}`;

  async function readPods(namespace: string, metricLabelSelector: string) {
    const bridge = buildBridge(configText(prom.url), "c.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
    const reader = createCustomValuesReader({ config: bridge.config, providers: bridge.providers, now: () => Date.now(), authorize: policyHooks(bridge.config).authorizeCustom });
    const target = customMetricsRead(parseRequestPath(`/apis/custom.metrics.k8s.io/v1beta2/namespaces/${namespace}/pods/%2A/http_requests_per_second`))!;
    const outcome = await reader({ target, metricLabelSelector, objects: { pods: ["web-1"] }, caller: HPA_CONTROLLER, requestId: "r" });
    return outcome instanceof StatusError ? { status: outcome.code, body: outcome.toStatus() as any } : { status: 200, body: JSON.parse(outcome.text) };
  }

  it("allowed within the rule's selector: the pod's value", async () => {
    const r = await readPods("team-a", "verb=GET");
    expect(r.status).toBe(200);
    expect(r.body.items.map((i: any) => [i.describedObject.name, i.value])).toEqual([["web-1", "5"]]);
  });

  it("denied outside it (403 naming the rule and the missing requirement), and in a namespace no policy covers (the bridge's Deny)", async () => {
    const post = await readPods("team-a", "verb=POST");
    expect(post.status).toBe(403);
    expect(post.body.details).toEqual({ name: "http_requests_per_second", group: "custom.metrics.k8s.io", kind: "pods" });
    expect(post.body.message).toContain('rules[0] (metric "http_requests_per_second", resource "pods") allows only selector "verb=GET"');
    const every = await readPods("team-a", "");
    expect(every.status).toBe(403);
    const other = await readPods("team-b", "verb=GET");
    expect(other.status).toBe(403);
    expect(other.body.message).toMatch(/no ExternalMetricPolicy applies .* in namespace "team-b", and the bridge's policy.defaultAction is Deny/);
  });
});

describe("the proxy's cluster policy layer with a resource (policies compiled in its worker thread, as the proxy runs it)", () => {
  let fake: FakeKubeApiServer;
  let layer: ClusterPolicies;
  let compiler: OffThreadCompiler;
  const HPA = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts", "system:authenticated"], extra: {} };
  const CUSTOM = "https://proxy/apis/custom.metrics.k8s.io/v1beta2";

  beforeAll(async () => {
    fake = await startFakeKubeApiServer();
    fake.applyPolicy({
      kind: "ExternalMetricPolicy",
      metadata: { name: "team-a", namespace: "team-a" },
      spec: {
        rules: [
          { metric: "http_requests_per_second", resources: ["pods", "ingresses.networking.k8s.io"], selector: { matchLabels: { verb: "GET" } } },
          { metric: "queue_.*", selector: {} },
        ],
        defaultAction: "Allow",
      },
    });
    compiler = createOffThreadCompiler();
    layer = new ClusterPolicies({ kc: kubeConfigFor(fake.url, fake.caPem, fake.token), whenNoneApply: "Deny", log: () => {}, debounceMs: 10, backoffMs: 50, compile: compiler.compile });
    layer.start();
    const until = Date.now() + 10_000;
    while (!layer.ready() && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(layer.ready()).toBe(true);
  });
  afterAll(async () => {
    await layer?.stop();
    await compiler?.close();
    await fake?.close();
  });

  const ask = (resource: string | undefined, metric: string, query: string, namespace = "team-a") => {
    const path = resource === undefined ? `https://proxy/apis/external.metrics.k8s.io/v1beta1/namespaces/${namespace}/${metric}` : `${CUSTOM}/namespaces/${namespace}/${resource}/x/${metric}`;
    try {
      return layer.authorize({ caller: HPA, namespace, metric, url: new URL(`${path}?${query}`), resource });
    } catch (err) {
      if (err instanceof StatusError) return err;
      throw err;
    }
  };

  it("decides a custom read by its resource and the URL's metricLabelSelector (not the pods' labelSelector)", () => {
    expect(ask("pods", "http_requests_per_second", "labelSelector=app%3Dweb&metricLabelSelector=verb%3DGET")).toBe("allow");
    expect(ask("ingresses.networking.k8s.io", "http_requests_per_second", "metricLabelSelector=verb%3DGET")).toBe("allow");
    const post = ask("pods", "http_requests_per_second", "labelSelector=verb%3DGET&metricLabelSelector=verb%3DPOST");
    expect(post).toBeInstanceOf(ClusterPolicyDenied);
    expect((post as StatusError).toStatus()).toMatchObject({
      code: 403,
      details: { name: "http_requests_per_second", group: "custom.metrics.k8s.io", kind: "pods" },
      message: expect.stringMatching(/^pods\.custom\.metrics\.k8s\.io "http_requests_per_second" is forbidden: .*denied by the cluster policy layer: ExternalMetricPolicy team-a\/team-a: .*resource "pods"/),
    });
  });

  it("fails closed for a custom read without a rule naming its resource (defaultAction Allow notwithstanding), External reads unchanged", () => {
    const svc = ask("services", "http_requests_per_second", "metricLabelSelector=verb%3DGET");
    expect((svc as StatusError).toStatus().message).toContain('has no rule for metric "http_requests_per_second" on resource "services"');
    expect(ask(undefined, "queue_depth", "labelSelector=queue%3Da")).toBe("allow");
    expect(ask(undefined, "http_requests_per_second", "")).toBe("allow"); // the policy's defaultAction Allow, External only
    // a metricLabelSelector that does not parse: 400 naming the parameter
    expect((ask("pods", "http_requests_per_second", "metricLabelSelector=a%20in%20(") as StatusError).toStatus()).toMatchObject({ code: 400, message: expect.stringMatching(/^invalid metricLabelSelector/) });
    expect((ask("pods", "http_requests_per_second", "metricLabelSelector=a&metricLabelSelector=b") as StatusError).code).toBe(400);
  });

  it("cluster-scoped objects: no namespace policy applies; none at all → whenNoneApply Deny, naming the scope", () => {
    const node = ask("nodes", "node_load", "", "");
    expect((node as StatusError).toStatus().message).toMatch(/^nodes\.custom\.metrics\.k8s\.io "node_load" is forbidden: .*no ClusterExternalMetricPolicy or ExternalMetricPolicy for a cluster-scoped object applies/);
  });

  it("an invalid resources edit keeps the last valid generation in force (and is reported), as other invalid edits", async () => {
    fake.applyPolicy({
      kind: "ExternalMetricPolicy",
      metadata: { name: "team-a", namespace: "team-a" },
      spec: { rules: [{ metric: "http_requests_per_second", resources: ["Pods", "pods", "pods"], selector: {} }], defaultAction: "Allow" },
    });
    const until = Date.now() + 10_000;
    while (layer.summary().invalid.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(layer.summary().invalid).toEqual([{ id: expect.stringContaining("team-a/team-a"), message: expect.stringMatching(/spec\.rules\[0\]\.resources\[0\]: "Pods" is not a resource/), inForce: 1 }]);
    // still generation 1: verb=POST stays denied (the invalid edit would have allowed every series)
    expect(ask("pods", "http_requests_per_second", "metricLabelSelector=verb%3DPOST")).toBeInstanceOf(ClusterPolicyDenied);
    expect(ask("pods", "http_requests_per_second", "metricLabelSelector=verb%3DGET")).toBe("allow");
  });
});
