/**
 * The policy CRDs (infra/helm/external-metrics-bridge/files/crds/) and API objects
 * of both kinds (shared/policy/objects.ts):
 *
 * - the CRDs describe every field (`kubectl explain`), have the same spec
 *   schema, and refuse what shared/policy/schema.ts refuses: a table of
 *   objects is validated by kubeconform against the CRDs' own
 *   openAPIV3Schema (infra/tools/crd-schemas.ts) and by the loader, and both
 *   must agree; the two rules JSON Schema cannot state are CEL rules in the
 *   CRD whose messages are the loader's;
 * - every example policy in infra/examples/policies validates against the
 *   CRDs and compiles from its API-object form as it does from the file;
 * - invalid objects get `Accepted=False` with the right reason, the rule
 *   index and no file path; the file loader accepts
 *   `kind: ClusterExternalMetricPolicy`.
 *
 * (The real API server's view of the CRDs is test/e2e/k8s.policy.e2e.test.ts.)
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError, formatIssue, parseYamlDocuments } from "../../shared/config/yaml.ts";
import { HPA_CONTROLLER } from "../../shared/identity.ts";
import { parseSelector } from "../../shared/k8s/selector.ts";
import { PolicySet } from "../../shared/policy/evaluate.ts";
import { compilePolicies } from "../../shared/policy/load.ts";
import { acceptedCondition, compilePolicyObject, setCondition, type Condition } from "../../shared/policy/objects.ts";
import { MAX_PATTERN_LENGTH } from "../../shared/policy/regex.ts";
import { CLUSTER_POLICY_KIND, POLICY_API_VERSION, POLICY_KIND, POLICY_LIMITS } from "../../shared/policy/schema.ts";
import { writeCrdSchemas } from "../../infra/tools/crd-schemas.ts";
import { isGroupResource } from "../../shared/k8s/request-path.ts";
import { ensureSchemas, ensureTool, kubeconform, ROOT } from "../../infra/tools/validate.ts";

const CRD_DIR = join(ROOT, "infra/helm/external-metrics-bridge/files/crds");
const CRD_FILES = readdirSync(CRD_DIR).map((f) => join(CRD_DIR, f));
const EXAMPLES = join(ROOT, "infra/examples/policies");

type Schema = { description?: string; type?: string; properties?: Record<string, Schema>; items?: Schema; additionalProperties?: Schema | boolean; [k: string]: any };
type Crd = { metadata: { name: string }; spec: any };

const crds: Crd[] = CRD_FILES.flatMap((f) => parseAllDocuments(readFileSync(f, "utf8")).map((d) => (d as any).toJS() as Crd));
const crd = (kind: string) => crds.find((c) => c.spec.names.kind === kind)!;
const rootSchema = (kind: string): Schema => crd(kind).spec.versions[0].schema.openAPIV3Schema;

let schemaDir: string;
let schemaLocation: string;

beforeAll(() => {
  ensureTool("kubeconform");
  ensureSchemas();
  schemaDir = mkdtempSync(join(tmpdir(), "emb-crd-schemas-"));
  schemaLocation = writeCrdSchemas(CRD_FILES, schemaDir);
}, 30 * 60_000);
afterAll(() => rmSync(schemaDir, { recursive: true, force: true }));

/** kubeconform of objects against the CRDs' schemas: name → valid? (and its message). */
function viaCrd(objects: object[]): Map<string, { valid: boolean; msg: string }> {
  const result = kubeconform(["-"], objects.map((o) => stringify(o)).join("---\n"), [schemaLocation]);
  const out = new Map<string, { valid: boolean; msg: string }>();
  for (const r of result.resources) {
    expect(r.status, `${r.name}: ${r.msg}`).toMatch(/^status(Valid|Invalid)$/);
    out.set(r.name, { valid: r.status === "statusValid", msg: r.msg });
  }
  return out;
}

const TEAM_A = {
  apiVersion: POLICY_API_VERSION,
  kind: POLICY_KIND,
  metadata: { name: "queues", namespace: "team-a", generation: 4, uid: "0b1c", resourceVersion: "77", managedFields: [{ manager: "kubectl" }] },
  spec: {
    subjects: { serviceAccounts: ["kube-system/horizontal-pod-autoscaler"], groups: ["team-a"] },
    rules: [
      { metric: "queue_messages_(ready|delayed)", selector: { matchExpressions: [{ key: "queue", operator: "In", values: ["team-a-jobs"] }] } },
      { metric: "teamb_.*", deny: true, description: "not ours" },
      { metric: "other", selector: { matchLabels: { queue: "x" } } },
    ],
    defaultAction: "Deny",
  },
};

function withSpec(patch: (spec: any) => void, name: string, base: any = TEAM_A): any {
  const o = structuredClone(base);
  o.metadata.name = name;
  patch(o.spec);
  return o;
}

describe("the CRDs", () => {
  it("are ExternalMetricPolicy (namespaced, emp) and ClusterExternalMetricPolicy (cluster, cemp) in external-metrics-bridge.io/v1alpha1, with status subresource and printer columns", () => {
    expect(crds.map((c) => c.metadata.name).sort()).toEqual([
      "clusterexternalmetricpolicies.external-metrics-bridge.io",
      "externalmetricpolicies.external-metrics-bridge.io",
    ]);
    for (const [kind, scope, plural, short] of [
      [POLICY_KIND, "Namespaced", "externalmetricpolicies", "emp"],
      [CLUSTER_POLICY_KIND, "Cluster", "clusterexternalmetricpolicies", "cemp"],
    ] as const) {
      const c = crd(kind);
      expect(`${c.spec.group}/${c.spec.versions[0].name}`).toBe(POLICY_API_VERSION);
      expect(c.spec).toMatchObject({ scope, names: { kind, plural, shortNames: [short] } });
      expect(c.spec.versions).toHaveLength(1);
      expect(c.spec.versions[0]).toMatchObject({ served: true, storage: true, subresources: { status: {} } });
      expect(c.spec.versions[0].additionalPrinterColumns.map((p: any) => `${p.name} ${p.jsonPath}`)).toEqual([
        "Default .spec.defaultAction",
        'Accepted .status.conditions[?(@.type=="Accepted")].status',
        'Reason .status.conditions[?(@.type=="Accepted")].reason',
        "Age .metadata.creationTimestamp",
      ]);
    }
    expect(rootSchema(CLUSTER_POLICY_KIND).properties!["spec"]).toEqual(rootSchema(POLICY_KIND).properties!["spec"]);
    expect(rootSchema(CLUSTER_POLICY_KIND).properties!["status"]).toEqual(rootSchema(POLICY_KIND).properties!["status"]);
  });

  it("describe every field, so kubectl explain is useful", () => {
    const missing: string[] = [];
    const walk = (s: Schema, path: string) => {
      for (const [k, v] of Object.entries(s.properties ?? {})) {
        const p = `${path}.${k}`;
        if (k === "metadata" && !path.includes(".")) continue; // ObjectMeta: the API server publishes its own description
        if (!v.description || v.description.length < 10) missing.push(p);
        walk(v, p);
      }
      if (s.items) walk(s.items, `${path}[]`);
    };
    for (const kind of [POLICY_KIND, CLUSTER_POLICY_KIND]) walk(rootSchema(kind), kind);
    expect(missing).toEqual([]);
  });

  it("state the loader's bounds and enums", () => {
    const spec = rootSchema(POLICY_KIND).properties!["spec"]!;
    const rule = spec.properties!["rules"]!.items!;
    expect(rule.properties!["metric"]).toMatchObject({ minLength: 1, maxLength: MAX_PATTERN_LENGTH });
    expect(rule.required).toEqual(["metric"]);
    expect(spec.properties!["rules"]!.maxItems).toBe(POLICY_LIMITS.rules);
    expect(spec.properties!["defaultAction"]).toMatchObject({ enum: ["Allow", "Deny"], default: "Deny" });
    const sel = rule.properties!["selector"]!;
    expect(sel.properties!["matchExpressions"]!.items!.properties!["operator"]!.enum).toEqual(["In", "NotIn", "Exists", "DoesNotExist"]);
    expect(sel.properties!["matchExpressions"]!.maxItems).toBe(POLICY_LIMITS.selectorTerms);
    expect(sel.properties!["matchLabels"]!.maxProperties).toBe(POLICY_LIMITS.selectorTerms);
    for (const list of ["users", "groups", "serviceAccounts"]) expect(spec.properties!["subjects"]!.properties![list]!.maxItems).toBe(POLICY_LIMITS.subjects);
    expect(rule.properties!["resources"]).toMatchObject({ type: "array", minItems: 1, maxItems: POLICY_LIMITS.resources, "x-kubernetes-list-type": "set" });
    expect(rule.properties!["resources"]!.items).toMatchObject({ type: "string", maxLength: POLICY_LIMITS.resource });
    // the CRD's pattern is the path parser's isGroupResource
    const pattern = new RegExp(rule.properties!["resources"]!.items!["pattern"]);
    for (const r of ["external", "pods", "ingresses.networking.k8s.io", "Pods", "a/b", "-x", "x.", "", "queues.sqs.services.k8s.aws"]) {
      expect(pattern.test(r), r).toBe(isGroupResource(r));
    }
    for (const kind of [POLICY_KIND, CLUSTER_POLICY_KIND]) {
      expect(rootSchema(kind).properties!["spec"]!.properties!["rules"]!.items!.properties!["resources"]).toEqual(rule.properties!["resources"]);
    }
  });

  it("have a Condition list keyed by type and observedGeneration in status", () => {
    const status = rootSchema(POLICY_KIND).properties!["status"]!;
    expect(status.properties!["observedGeneration"]).toMatchObject({ type: "integer", format: "int64" });
    const conditions = status.properties!["conditions"]!;
    expect(conditions).toMatchObject({ "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"] });
    expect(conditions.items!.required).toEqual(["type", "status", "reason", "message", "lastTransitionTime"]);
  });

  // Objects both validators see: [name, patch, whether valid]. Valid ones must compile; invalid ones must be refused by both.
  // (One deliberate difference: the loader also takes a selector string, which files may use; a structural schema cannot.)
  const cases: [string, (s: any) => void, boolean][] = [
    ["as-is", () => {}, true],
    ["empty-spec", (s) => { for (const k of Object.keys(s)) delete s[k]; }, true],
    ["longest-pattern", (s) => { s.rules[0].metric = "a".repeat(MAX_PATTERN_LENGTH); }, true],
    ["most-rules", (s) => { s.rules = Array.from({ length: POLICY_LIMITS.rules }, (_, i) => ({ metric: `m${i}`, deny: true })); }, true],
    ["pattern-too-long", (s) => { s.rules[0].metric = "a".repeat(MAX_PATTERN_LENGTH + 1); }, false],
    ["empty-pattern", (s) => { s.rules[0].metric = ""; }, false],
    ["no-metric", (s) => { delete s.rules[0].metric; }, false],
    ["too-many-rules", (s) => { s.rules = Array.from({ length: POLICY_LIMITS.rules + 1 }, (_, i) => ({ metric: `m${i}`, deny: true })); }, false],
    ["bad-default", (s) => { s.defaultAction = "Maybe"; }, false],
    ["bad-operator", (s) => { s.rules[0].selector.matchExpressions[0].operator = "Equals"; }, false],
    ["expression-without-key", (s) => { delete s.rules[0].selector.matchExpressions[0].key; }, false],
    ["unknown-rule-field", (s) => { s.rules[0].selectr = {}; }, false],
    ["unknown-spec-field", (s) => { s.default = "Deny"; }, false],
    ["unknown-selector-field", (s) => { s.rules[0].selector.matchLabel = { a: "b" }; }, false],
    ["deny-false", (s) => { s.rules[1].deny = false; }, false],
    ["bad-service-account", (s) => { s.subjects.serviceAccounts = ["no-slash"]; }, false],
    ["empty-user", (s) => { s.subjects.users = [""]; }, false],
    ["too-many-groups", (s) => { s.subjects.groups = Array.from({ length: POLICY_LIMITS.subjects + 1 }, (_, i) => `g${i}`); }, false],
    ["too-many-values", (s) => { s.rules[0].selector.matchExpressions[0].values = Array.from({ length: POLICY_LIMITS.values + 1 }, (_, i) => `v${i}`); }, false],
    ["long-description", (s) => { s.rules[1].description = "x".repeat(POLICY_LIMITS.description + 1); }, false],
    // resources: (issue 26)
    ["resources", (s) => { s.rules[0].resources = ["external", "pods", "namespaces", "ingresses.networking.k8s.io"]; }, true],
    ["most-resources", (s) => { s.rules[0].resources = Array.from({ length: POLICY_LIMITS.resources }, (_, i) => `r${i}.example.com`); }, true],
    ["longest-resource", (s) => { s.rules[0].resources = [`${"r".repeat(63)}.${"g".repeat(63)}.${"g".repeat(63)}.${"g".repeat(63)}.${"g".repeat(61)}`]; }, true],
    ["too-many-resources", (s) => { s.rules[0].resources = Array.from({ length: POLICY_LIMITS.resources + 1 }, (_, i) => `r${i}`); }, false],
    ["hostile-resources", (s) => { s.rules[0].resources = Array.from({ length: 10_000 }, (_, i) => `r${i}`); }, false],
    ["no-resources", (s) => { s.rules[0].resources = []; }, false],
    ["duplicate-resource", (s) => { s.rules[0].resources = ["pods", "external", "pods"]; }, false],
    ["uppercase-resource", (s) => { s.rules[0].resources = ["Pods"]; }, false],
    ["kind-not-resource", (s) => { s.rules[0].resources = ["Ingress.networking.k8s.io"]; }, false],
    ["slash-resource", (s) => { s.rules[0].resources = ["networking.k8s.io/ingresses"]; }, false],
    ["resource-too-long", (s) => { s.rules[0].resources = [`r.${"g".repeat(POLICY_LIMITS.resource)}`]; }, false],
    ["resource-not-string", (s) => { s.rules[0].resources = [1]; }, false],
    ["resources-not-list", (s) => { s.rules[0].resources = "pods"; }, false],
  ];

  it("refuse what the loader refuses, and accept what it accepts (kubeconform with the CRDs' schemas)", () => {
    const objects = cases.map(([name, patch]) => withSpec(patch, name));
    const crdView = viaCrd(objects);
    const disagreements: string[] = [];
    cases.forEach(([name, , valid], i) => {
      const loader = compilePolicyObject(objects[i]);
      const byCrd = crdView.get(name);
      if (byCrd === undefined) throw new Error(`kubeconform did not report ${name}`);
      if (byCrd.valid !== valid) disagreements.push(`${name}: CRD says ${byCrd.valid ? "valid" : `invalid (${byCrd.msg})`}`);
      if ((loader.policy !== undefined) !== valid) disagreements.push(`${name}: loader says ${loader.conditions[0]!.message}`);
    });
    expect(disagreements).toEqual([]);
  });

  it("state as CEL rules, with the loader's messages, what JSON Schema cannot: selector xor deny, and non-empty subjects", () => {
    const spec = rootSchema(POLICY_KIND).properties!["spec"]!;
    const ruleCel = spec.properties!["rules"]!.items!["x-kubernetes-validations"];
    const subjectsCel = spec.properties!["subjects"]!["x-kubernetes-validations"];
    const both = compilePolicyObject(withSpec((s) => { s.rules[0].deny = true; }, "both"));
    const neither = compilePolicyObject(withSpec((s) => { delete s.rules[1].deny; }, "neither"));
    const noSubjects = compilePolicyObject(withSpec((s) => { s.subjects = { users: [] }; }, "nobody"));
    expect(both.conditions[0]!.message).toBe(`spec.rules[0]: ${ruleCel[0].message}`);
    expect(neither.conditions[0]!.message).toBe(`spec.rules[1]: ${ruleCel[0].message}`);
    expect(ruleCel[0].rule).toBe("has(self.selector) != has(self.deny)");
    expect(noSubjects.conditions[0]!.message).toBe(`spec.subjects: ${subjectsCel[0].message}`);
    expect(subjectsCel[0].rule).toMatch(/size\(self\.users\).*size\(self\.groups\).*size\(self\.serviceAccounts\).*> 0/);
  });
});

describe("the example policies", () => {
  // the top directory and custom/ (the custom metrics example), as paths relative to EXAMPLES
  const files = [...readdirSync(EXAMPLES), ...readdirSync(join(EXAMPLES, "custom")).map((f) => `custom/${f}`)].filter((f) => f.endsWith(".yaml"));
  const docs = files
    .flatMap((f) => parseYamlDocuments(readFileSync(join(EXAMPLES, f), "utf8"), join("infra/examples/policies", f)))
    .filter((sd) => [POLICY_KIND, CLUSTER_POLICY_KIND].includes((sd.value as any).kind));

  it("include a cluster guardrail and namespace policies, each kubectl-appliable (a namespaced kind names its namespace)", () => {
    const kinds = docs.map((sd) => `${(sd.value as any).kind} ${(sd.value as any).metadata.namespace ?? ""}`.trim());
    expect(kinds).toContain(CLUSTER_POLICY_KIND);
    expect(kinds).toContain(`${POLICY_KIND} team-a`);
    for (const sd of docs) if ((sd.value as any).kind === POLICY_KIND) expect((sd.value as any).metadata.namespace, sd.source).toBeTruthy();
  });

  it("validate against the CRDs' schemas (kubeconform, strict)", () => {
    const result = kubeconform(
      files.filter((f) => !/(^|\/)(bridge|policy-tests)\.yaml$/.test(f) && !f.startsWith("hpa-")).map((f) => join(EXAMPLES, f)),
      undefined,
      [schemaLocation],
    );
    const checked = result.resources.filter((r) => r.kind !== "");
    expect(checked.map((r) => `${r.kind}/${r.name}`).sort()).toEqual(docs.map((sd) => `${(sd.value as any).kind}/${(sd.value as any).metadata.name}`).sort());
    expect(checked.filter((r) => r.status !== "statusValid")).toEqual([]);
    expect(result.ok).toBe(true);
  });

  it("compile from their API-object form (as the API server returns them) exactly as from the files, Accepted", () => {
    const fromFiles = compilePolicies(docs);
    expect(fromFiles.issues).toEqual([]);
    for (const file of fromFiles.policies) {
      const sd = docs.find((d) => (d.value as any).metadata.name === file.name && ((d.value as any).metadata.namespace ?? undefined) === file.namespace)!;
      const apiObject = { ...(sd.value as object), metadata: { ...(sd.value as any).metadata, generation: 1, uid: "u" }, status: {} };
      const { policy, conditions, issues } = compilePolicyObject(apiObject);
      expect(issues).toEqual([]);
      expect(conditions).toMatchObject([{ type: "Accepted", status: "True", reason: "Valid", observedGeneration: 1 }]);
      const shape = (p: typeof file) => ({
        id: p.id,
        namespace: p.namespace,
        defaultAction: p.defaultAction,
        subjects: p.subjects,
        rules: p.rules.map((r) => [r.index, r.pattern.source, r.resources, r.selectorText]),
      });
      expect(shape(policy!)).toEqual(shape(file));
      expect(policy!.source).toBe(file.namespace === undefined ? `${CLUSTER_POLICY_KIND}/${file.name}` : `${POLICY_KIND}/${file.namespace}/${file.name}`);
    }
  });
});

describe("compilePolicyObject", () => {
  const NOW = new Date("2026-11-23T10:11:12.345Z");

  it("a valid namespaced object: the policy in its namespace, Accepted True for its generation", () => {
    const r = compilePolicyObject(TEAM_A, NOW);
    expect(r.issues).toEqual([]);
    expect(r.policy).toMatchObject({ id: "team-a/queues", namespace: "team-a", name: "queues", defaultAction: "Deny" });
    expect(r.conditions).toEqual([
      { type: "Accepted", status: "True", reason: "Valid", message: "the policy compiled and is enforced", observedGeneration: 4, lastTransitionTime: "2026-11-23T10:11:12Z" },
    ]);
  });

  it("a ClusterExternalMetricPolicy is cluster-scoped; with a namespace it is InvalidSpec", () => {
    const cluster = { ...TEAM_A, kind: CLUSTER_POLICY_KIND, metadata: { name: "guard", generation: 2 } };
    expect(compilePolicyObject(cluster).policy).toMatchObject({ id: "guard", namespace: undefined });
    const r = compilePolicyObject({ ...cluster, metadata: { name: "guard", namespace: "team-a", generation: 2 } }, NOW);
    expect(r.policy).toBeUndefined();
    expect(r.conditions[0]).toMatchObject({ status: "False", reason: "InvalidSpec", observedGeneration: 2 });
    expect(r.conditions[0]!.message).toBe("metadata.namespace: a ClusterExternalMetricPolicy is cluster-scoped: remove metadata.namespace (or use kind ExternalMetricPolicy)");
  });

  it("a pattern RE2 does not compile: InvalidPattern naming the rule index, RE2's message without the internal (?i), no file path", () => {
    const r = compilePolicyObject(withSpec((s) => { s.rules[2].metric = "(queue_.*"; }, "bad-pattern"), NOW);
    expect(r.policy).toBeUndefined();
    expect(r.conditions[0]).toMatchObject({ type: "Accepted", status: "False", reason: "InvalidPattern", observedGeneration: 4 });
    expect(r.conditions[0]!.message).toBe("spec.rules[2].metric: invalid RE2 pattern: error parsing regexp: missing closing ): `(queue_.*`");
    expect(r.issues.map(formatIssue)).toEqual(["ExternalMetricPolicy/team-a/bad-pattern:1:1: spec.rules[2].metric: invalid RE2 pattern: error parsing regexp: missing closing ): `(queue_.*`"].map((s) => expect.stringContaining(s.split(": ").slice(1).join(": "))));
    const look = compilePolicyObject(withSpec((s) => { s.rules[0].metric = "queue(?!_dead)"; }, "lookahead"));
    expect(look.conditions[0]).toMatchObject({ reason: "InvalidPattern", message: expect.stringMatching(/^spec\.rules\[0\]\.metric: lookaround .* are not supported: policy patterns use RE2 syntax/) });
    for (const c of [...r.conditions, ...look.conditions]) {
      expect(c.message).not.toContain("(?i)");
      expect(c.message).not.toMatch(/\.ya?ml|\/work\//);
    }
  });

  it("a selector that does not parse: InvalidSelector with apimachinery's message and the rule index", () => {
    const badKey = compilePolicyObject(withSpec((s) => { s.rules[2].selector = { matchLabels: { "bad key": "x" } }; }, "bad-key"));
    expect(badKey.conditions[0]).toMatchObject({ status: "False", reason: "InvalidSelector" });
    expect(badKey.conditions[0]!.message).toMatch(/^spec\.rules\[2\]\.selector: invalid selector: key: Invalid value: "bad key": name part must consist of/);
    const noValues = compilePolicyObject(withSpec((s) => { s.rules[0].selector.matchExpressions[0].values = []; }, "no-values"));
    expect(noValues.conditions[0]).toMatchObject({ reason: "InvalidSelector", message: expect.stringMatching(/^spec\.rules\[0\]\.selector: invalid selector: values: .*can't be empty/) });
  });

  it("every problem is in the message; the first decides the reason; malformed input never throws", () => {
    const r = compilePolicyObject(withSpec((s) => { s.rules[0].metric = "(a"; s.rules[2].selector = { matchLabels: { "-x": "y" } }; }, "two"));
    expect(r.issues.map((i) => i.path)).toEqual(["spec.rules[0].metric", "spec.rules[2].selector"]);
    expect(r.conditions[0]!.reason).toBe("InvalidPattern");
    expect(r.conditions[0]!.message.split("; ")).toHaveLength(2);
    for (const junk of [null, 42, "x", [], {}, { kind: CLUSTER_POLICY_KIND }]) {
      const j = compilePolicyObject(junk);
      expect(j.policy).toBeUndefined();
      expect(j.conditions[0]).toMatchObject({ type: "Accepted", status: "False", reason: "InvalidSpec" });
      expect(j.conditions[0]).not.toHaveProperty("observedGeneration");
    }
  });

  it("a team's namespace policy cannot widen what a cluster policy allows (every applicable policy must allow)", () => {
    const guard = compilePolicyObject({
      apiVersion: POLICY_API_VERSION,
      kind: CLUSTER_POLICY_KIND,
      metadata: { name: "hpa-one-queue-at-a-time" },
      spec: {
        subjects: { serviceAccounts: ["kube-system/horizontal-pod-autoscaler"] },
        rules: [{ metric: "queue_.*", selector: { matchExpressions: [{ key: "queue", operator: "In", values: ["team-a-jobs", "team-b-orders"] }] } }],
        defaultAction: "Deny",
      },
    }).policy!;
    const wide = compilePolicyObject({ ...TEAM_A, spec: { rules: [{ metric: ".*", selector: {} }], defaultAction: "Allow" } }).policy!;
    const set = new PolicySet([guard, wide], "Deny");
    const read = (selector: string, metric = "queue_messages_ready") => set.evaluate({ caller: HPA_CONTROLLER, namespace: "team-a", metric, selector: parseSelector(selector) });
    expect(read("queue=team-a-jobs").decision).toBe("Allow");
    expect(read("queue=secret-queue")).toMatchObject({ decision: "Deny" });
    expect(read("queue=secret-queue").message).toContain("hpa-one-queue-at-a-time");
    expect(read("").decision).toBe("Deny");
    expect(read("x=y", "billing_total").decision).toBe("Deny");
  });
});

describe("Accepted condition updates (meta.SetStatusCondition semantics)", () => {
  const t0 = new Date("2026-01-01T00:00:00Z");
  const t1 = new Date("2026-01-01T00:05:00Z");
  const bad = acceptedCondition([{ source: "x", line: 1, column: 1, path: "spec.rules[0].metric", message: "nope" }], 1, t0);

  it("keeps lastTransitionTime while the status stays, reports no change for the same condition", () => {
    const first = setCondition(undefined, bad);
    expect(first).toEqual({ conditions: [bad], changed: true });
    const again = setCondition(first.conditions, acceptedCondition([{ source: "x", line: 1, column: 1, path: "spec.rules[0].metric", message: "nope" }], 1, t1));
    expect(again.changed).toBe(false);
    expect(again.conditions[0]!.lastTransitionTime).toBe("2026-01-01T00:00:00Z");
    const otherMessage = setCondition(first.conditions, acceptedCondition([{ source: "x", line: 1, column: 1, path: "spec.rules[1].metric", message: "nope" }], 2, t1));
    expect(otherMessage.changed).toBe(true);
    expect(otherMessage.conditions[0]).toMatchObject({ lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 2, message: "spec.rules[1].metric: nope" });
  });

  it("moves lastTransitionTime when the status changes, and leaves other condition types alone", () => {
    const other: Condition = { type: "Enforced", status: "True", reason: "Leader", message: "", lastTransitionTime: "2025-01-01T00:00:00Z" };
    const fixed = setCondition([other, bad], acceptedCondition([], 2, t1));
    expect(fixed.changed).toBe(true);
    expect(fixed.conditions).toEqual([other, { type: "Accepted", status: "True", reason: "Valid", message: "the policy compiled and is enforced", observedGeneration: 2, lastTransitionTime: "2026-01-01T00:05:00Z" }]);
  });

  it("cuts a huge message to the CRD's maxLength", () => {
    const many = Array.from({ length: 2000 }, (_, i) => ({ source: "x", line: 1, column: 1, path: `spec.rules[${i}].metric`, message: "x".repeat(40) }));
    expect(acceptedCondition(many, 1).message.length).toBe(32768);
  });
});

describe("policy files", () => {
  const BRIDGE = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { sqs: { type: aws-sqs, region: us-east-1 } }
metrics:
  - { name: queue_messages_ready, provider: sqs }
policy: { defaultAction: Deny }
`;
  const cluster = (metadata: string) => `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ClusterExternalMetricPolicy
metadata: ${metadata}
spec:
  subjects: { groups: [system:unauthenticated] }
  rules: []
`;
  const issues = (text: string) => {
    try {
      loadConfig(text, "p.yaml");
      return [];
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return err.issues.map(formatIssue);
    }
  };

  it("accept kind ClusterExternalMetricPolicy documents as cluster-scoped policies", () => {
    const policies = loadConfig(`${BRIDGE}---\n${cluster("{ name: no-anonymous }")}`, "p.yaml").config.policy!.policies.policies;
    expect(policies.map((p) => [p.id, p.namespace, `${p.source}:${p.line}`])).toEqual([["no-anonymous", undefined, "p.yaml:8"]]);
  });

  it("refuse a namespace on it, a clash with a namespace-less ExternalMetricPolicy of the same name, and a misspelt kind, with file:line", () => {
    expect(issues(`${BRIDGE}---\n${cluster("{ name: c, namespace: team-a }")}`)).toEqual([
      "p.yaml:10:33: metadata.namespace: a ClusterExternalMetricPolicy is cluster-scoped: remove metadata.namespace (or use kind ExternalMetricPolicy)",
    ]);
    const legacy = `apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ExternalMetricPolicy\nmetadata: { name: c }\nspec: {}\n`;
    expect(issues(`${BRIDGE}---\n${cluster("{ name: c }")}---\n${legacy}`)).toEqual(["p.yaml:17:19: metadata.name: policy c is already defined at p.yaml:8"]);
    expect(issues(`${BRIDGE}---\n${cluster("{ name: c }").replace("ClusterExternalMetricPolicy", "ClusterExternalMetricsPolicy")}`)).toEqual([
      'p.yaml:9:7: kind: expected kind ClusterExternalMetricPolicy, found "ClusterExternalMetricsPolicy"',
    ]);
  });
});

describe("the custom metrics example", () => {
  it("is among the checked examples, its rule naming pods and ingresses", () => {
    const { policies, issues } = compilePolicies(parseYamlDocuments(readFileSync(join(EXAMPLES, "custom/team-a.yaml"), "utf8"), "custom/team-a.yaml"));
    expect(issues).toEqual([]);
    expect(policies.map((p) => [p.id, p.rules.map((r) => r.resources)])).toEqual([["team-a/web", [["pods", "ingresses.networking.k8s.io"]]]]);
  });
});
