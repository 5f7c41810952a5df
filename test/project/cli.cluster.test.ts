/**
 * The admin CLI reading a live cluster (`--kubeconfig FILE [--context NAME]`):
 * the CLI process lists ExternalMetricPolicy and ClusterExternalMetricPolicy
 * objects over real TLS from the fake API server (test/fakes/kube-apiserver.ts)
 * with the proxy's Kubernetes client and compiles them with
 * compilePolicyObject, as the proxy does.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { listAll, POLICY_COLLECTIONS } from "../../functions/cli/cluster.ts";
import { kubeConfigFor, type KubeObject } from "../../shared/proxy/kube/client.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { ROOT } from "../helpers/worker.ts";

const exec = promisify(execFile);
const EX = "infra/examples/policies";

let fake: FakeKubeApiServer;
let dir: string;
let kubeconfig: string;

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

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "emb-cli-cluster-"));
  fake = await startFakeKubeApiServer();
  // current-context points nowhere (port 1): only --context fake reaches the fake
  kubeconfig = join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "fake", cluster: { server: fake.url, "certificate-authority-data": Buffer.from(fake.caPem).toString("base64") } },
        { name: "nowhere", cluster: { server: "https://127.0.0.1:1" } },
      ],
      users: [{ name: "admin", user: { token: fake.token } }],
      contexts: [
        { name: "fake", context: { cluster: "fake", user: "admin" } },
        { name: "nowhere", context: { cluster: "nowhere", user: "admin" } },
      ],
      "current-context": "nowhere",
    }),
  );
  fake.applyPolicy({
    kind: "ClusterExternalMetricPolicy",
    metadata: { name: "hpa-controller-queues" },
    spec: {
      subjects: { serviceAccounts: ["kube-system/horizontal-pod-autoscaler"] },
      rules: [{ metric: "queue_messages_.*", selector: { matchExpressions: [{ key: "queue", operator: "Exists" }] } }],
      defaultAction: "Deny",
    },
  });
  fake.applyPolicy({
    kind: "ExternalMetricPolicy",
    metadata: { name: "queues", namespace: "team-a" },
    spec: {
      rules: [
        { metric: "queue_messages_ready", selector: { matchExpressions: [{ key: "queue", operator: "In", values: ["team-a-jobs"] }] } },
        { metric: ".*", deny: true },
      ],
      defaultAction: "Deny",
    },
  });
  fake.applyPolicy({
    kind: "ExternalMetricPolicy",
    metadata: { name: "broken", namespace: "team-b" },
    spec: { rules: [{ metric: "queue_(a", deny: true }], defaultAction: "Deny" },
  });
}, 30_000);

afterAll(async () => {
  await fake?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("--kubeconfig", () => {
  it("policy lint lists both kinds from the API server; a broken object is an error named kind/namespace/name, without a file", async () => {
    const before = fake.listsAndWatches.length;
    const r = await cli("policy", "lint", "--kubeconfig", kubeconfig, "--context", "fake");
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      "ExternalMetricPolicy/team-b/broken: error: spec.rules[0].metric: invalid RE2 pattern: error parsing regexp: missing closing ): `queue_(a`\n",
    );
    expect(r.stdout).toContain("2 policies, 1 error, 0 warnings\n");
    // read-only: two lists (paginated, as the proxy lists), no watch, no write
    expect(fake.listsAndWatches.slice(before).map((l) => `${l.resource} ${l.watch} ${l.limit}`).sort()).toEqual([
      "clusterexternalmetricpolicies false 500",
      "externalmetricpolicies false 500",
    ]);
    expect(fake.writes.filter((w) => w.resource.includes("policies"))).toEqual([]);
  });

  it("policy explain decides with the cluster's policies (the broken one left out with a note, as the proxy does)", async () => {
    const allow = await cli("policy", "explain", "--kubeconfig", kubeconfig, "--context", "fake", "-n", "team-a", "-m", "queue_messages_ready", "-l", "queue=team-a-jobs", "-o", "json");
    expect(allow.code).toBe(0);
    expect(JSON.parse(allow.stdout).verdicts.map((v: any) => [v.policy, v.decision, v.source])).toEqual([
      ["hpa-controller-queues", "Allow", "ClusterExternalMetricPolicy/hpa-controller-queues"],
      ["team-a/queues", "Allow", "ExternalMetricPolicy/team-a/queues"],
    ]);
    expect(JSON.parse(allow.stdout).notes).toEqual([expect.stringContaining("only the cluster's policies were evaluated")]);
    expect(allow.stderr).toContain("note: ExternalMetricPolicy/team-b/broken: left out, as the proxy does (not Accepted): spec.rules[0].metric: invalid RE2 pattern");
    const deny = await cli("policy", "explain", "--kubeconfig", kubeconfig, "--context", "fake", "-n", "team-a", "-m", "queue_messages_delayed", "-l", "queue=team-a-jobs");
    expect(deny.code).toBe(1);
    expect(deny.stdout).toContain("denied by team-a/queues rules[1]");
    // objects have no file lines: a verdict names the object alone
    expect(deny.stdout).toContain(' is a deny rule (ExternalMetricPolicy/team-a/queues)\n');
    expect(deny.stdout).toContain("(ClusterExternalMetricPolicy/hpa-controller-queues)\n");
  });

  it("with --config, two layers as in a cluster: a cluster Deny decides; a cluster Allow still needs the bridge's policies (or its defaultAction)", async () => {
    const args = ["policy", "explain", "--config", `${EX}/bridge.yaml`, "--kubeconfig", kubeconfig, "--context", "fake"];
    // no bridge policy applies to the HPA controller in team-c: the cluster allows, the bridge's defaultAction (Deny) decides
    const byDefault = await cli(...args, "-n", "team-c", "-m", "queue_messages_ready", "-l", "queue=team-c-jobs");
    expect(byDefault.code).toBe(1);
    expect(byDefault.stdout).toContain(
      "the cluster policies allow it (hpa-controller-queues rules[0]), then no ExternalMetricPolicy applies to user \"system:serviceaccount:kube-system:horizontal-pod-autoscaler\" in namespace \"team-c\", and the bridge's policy.defaultAction is Deny",
    );
    // the cluster's team-a/queues denies queue_messages_delayed, whatever the bridge's team-a/queues (a file) says
    const clusterDeny = await cli(...args, "-n", "team-a", "-m", "queue_messages_delayed", "-l", "queue=team-a-jobs", "-o", "json");
    expect(clusterDeny.code).toBe(1);
    expect(JSON.parse(clusterDeny.stdout)).toMatchObject({ decision: "Deny", deniedBy: { policy: "team-a/queues", rule: 1, source: "ExternalMetricPolicy/team-a/queues" } });
    expect(JSON.parse(clusterDeny.stdout).message).toMatch(/^cluster policy: policy team-a\/queues rules\[1\]/);
    // both allow: every verdict of both layers
    const allow = await cli(...args, "-n", "team-a", "-m", "queue_messages_ready", "-l", "queue=team-a-jobs", "-o", "json");
    expect(allow.code).toBe(0);
    expect(JSON.parse(allow.stdout).message).toBe("allowed by every applicable policy: cluster hpa-controller-queues rules[0], team-a/queues rules[0]; bridge team-a/queues rules[0]");
  });

  it("check-hpa evaluates the HPAs against the cluster's policies and the bridge config", async () => {
    const r = await cli("check-hpa", "--kubeconfig", kubeconfig, "--context", "fake", "--config", "infra/examples/demo.yaml", `${EX}/hpa-team-a.yaml`, "-o", "json");
    const { checks } = JSON.parse(r.stdout);
    expect(checks.map((c: any) => [c.hpa, c.decision?.decision, c.decision?.deniedBy?.policy])).toEqual([
      ["team-a/jobs-worker", "Allow", undefined],
      ["team-a/orders-worker", "Deny", "team-a/queues"],
    ]);
  });

  it("check-hpa without FILEs checks the cluster's autoscaling/v2 HPAs (all namespaces, or -n), against both layers: the config's policies and the cluster's", async () => {
    const hpa = (namespace: string, name: string, queue: string) => ({
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name, namespace, uid: crypto.randomUUID(), resourceVersion: "1" },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name },
        maxReplicas: 3,
        metrics: [{ type: "External", external: { metric: { name: "queue_messages_ready", selector: { matchLabels: { queue } } }, target: { type: "Value", value: "1" } } }],
      },
    });
    fake.hpas.set("team-a/jobs-worker", hpa("team-a", "jobs-worker", "team-a-jobs"));
    fake.hpas.set("team-a/orders-worker", hpa("team-a", "orders-worker", "team-b-orders"));
    fake.hpas.set("team-b/orders", hpa("team-b", "orders", "team-b-orders"));
    const r = await cli("check-hpa", "--config", `${EX}/bridge.yaml`, "--kubeconfig", kubeconfig, "--context", "fake", "-o", "json");
    expect(r.code).toBe(1);
    const { checks } = JSON.parse(r.stdout);
    expect(checks.map((c: any) => [c.hpa, c.source, c.line, c.decision.decision, c.decision.deniedBy?.policy ?? null])).toEqual([
      ["team-a/jobs-worker", "HorizontalPodAutoscaler/team-a/jobs-worker", 0, "Allow", null],
      ["team-a/orders-worker", "HorizontalPodAutoscaler/team-a/orders-worker", 0, "Deny", "team-a/queues"],
      ["team-b/orders", "HorizontalPodAutoscaler/team-b/orders", 0, "Allow", null], // team-b reads its own queue
    ]);
    // both layers decide: the config's team-a/queues (a file) and the cluster's team-a/queues (an object) both allow
    expect(checks[0].decision.verdicts.map((v: any) => v.source)).toEqual(
      expect.arrayContaining([`${EX}/team-a.yaml`, "ExternalMetricPolicy/team-a/queues", "ClusterExternalMetricPolicy/hpa-controller-queues"]),
    );
    const human = await cli("check-hpa", "--config", `${EX}/bridge.yaml`, "--kubeconfig", kubeconfig, "--context", "fake", "-n", "team-a");
    expect(human.stdout).toContain("team-a/jobs-worker spec.metrics[0] (HorizontalPodAutoscaler/team-a/jobs-worker)\n");
    expect(human.stdout).toContain("2 external metrics, 1 ok, 1 failing");
    expect(fake.listsAndWatches.filter((l) => l.resource === "horizontalpodautoscalers")).toHaveLength(2);
    expect((await cli("check-hpa", "--config", `${EX}/bridge.yaml`)).code).toBe(2); // neither FILEs nor --kubeconfig
  });

  it("lists page by page (limit and continue), starting again from the first page when a continue token expires mid-way", async () => {
    for (let i = 0; i < 5; i++) fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: `paged${i}`, namespace: `team-p${i}` }, spec: { rules: [{ metric: "queue_.*", deny: true }] } });
    const client = kubeConfigFor(fake.url, fake.caPem, fake.token);
    let expired = false;
    fake.onPolicyListPage = (page) => {
      if (page.continue !== undefined && !expired) {
        expired = true;
        fake.expireContinueTokens();
      }
    };
    try {
      const before = fake.listsAndWatches.length;
      const items = await listAll<KubeObject>(client, POLICY_COLLECTIONS[1].path, 2);
      const names = items.map((o) => `${o.metadata?.namespace}/${o.metadata?.name}`);
      expect(names).toHaveLength(new Set(names).size);
      expect(names).toEqual(expect.arrayContaining(["team-a/queues", "team-b/broken", ...[0, 1, 2, 3, 4].map((i) => `team-p${i}/paged${i}`)]));
      expect(names).toHaveLength(7);
      const pages = fake.listsAndWatches.slice(before);
      expect(pages.every((l) => l.resource === "externalmetricpolicies" && l.limit === 2)).toBe(true);
      expect(pages.filter((l) => l.continue === undefined), "started again from the first page").toHaveLength(2);
      expect(pages.length).toBeGreaterThanOrEqual(6); // 3 pages after the restart, and at least 2 before it
      expect(expired).toBe(true);
    } finally {
      delete fake.onPolicyListPage;
      for (let i = 0; i < 5; i++) fake.deletePolicy("ExternalMetricPolicy", `team-p${i}`, `paged${i}`);
      await client.close();
    }
  });

  it("exit 2 with the reason when the cluster cannot be read: CRDs not installed, unreachable, unknown context, --context alone", async () => {
    fake.policyCrdsInstalled = false;
    try {
      const r = await cli("policy", "lint", "--kubeconfig", kubeconfig, "--context", "fake");
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("does not serve external-metrics-bridge.io/v1alpha1 ClusterExternalMetricPolicy (404): install the CRDs");
    } finally {
      fake.policyCrdsInstalled = true;
    }
    const unreachable = await cli("policy", "lint", "--kubeconfig", kubeconfig); // current-context: port 1
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toMatch(/policy lint: listing ClusterExternalMetricPolicy from https:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/);
    const unknown = await cli("policy", "lint", "--kubeconfig", kubeconfig, "--context", "nope");
    expect(unknown).toMatchObject({ code: 2, stderr: expect.stringContaining('contexts "nope" is not defined') });
    expect((await cli("policy", "lint", "--context", "fake", `${EX}/team-a.yaml`)).code).toBe(2);
  });
});
