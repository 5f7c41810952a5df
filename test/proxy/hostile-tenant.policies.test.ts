/**
 * Issue 23, items 4 and 5, as a hostile tenant (a namespace admin who may
 * write ExternalMetricPolicies in their own namespace, with the admission
 * webhook down or bypassed) would try them: the real proxy over TLS, with
 * kube-apiserver's front-proxy client certificate, against the fake
 * Kubernetes API speaking the real wire protocol (list with limit/continue,
 * watch, status subresource, events.k8s.io Events).
 *
 * - An invalid edit must not widen access: the last valid generation stays
 *   in force (status, metric, Event); a new invalid object denies its scope.
 * - One namespace's objects must fail only that namespace: per-namespace
 *   limits, the cluster-wide total refusing the biggest namespaces first,
 *   paginated lists that drop annotations on receipt, and a watch that cannot
 *   resync within its bound fails closed (503 naming why; /readyz stays up).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { ClusterPolicies, type ClusterPoliciesOptions, type PolicyCompileResult } from "../../shared/proxy/policy/policies.ts";
import { compilePolicyObject } from "../../shared/policy/objects.ts";
import type { LogRecord } from "../../shared/proxy/log.ts";
import type { Caller } from "../../shared/identity.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki, type Reply, HPA_FRONT_PROXY as HPA } from "./proxy.harness.ts";

let pki: Pki;
let backend: EchoBackend;

beforeAll(async () => {
  pki = await createPki();
  backend = await startEchoBackend(["queue_messages_ready", "secret_depth"]);
});
afterAll(async () => {
  await backend?.close();
});

/** A proxy with the cluster policy layer on (whenNoneApply Defer), against `fake`. */
async function proxyWith(fake: FakeKubeApiServer, extra: Partial<Omit<ClusterPoliciesOptions, "kc" | "log" | "metrics" | "whenNoneApply">> = {}): Promise<Harness> {
  fake.authorize = () => ({ allowed: true, reason: "fake RBAC allows everything" });
  const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
  return startHarness({
    pki,
    fake,
    proxyConfig: proxyConfigText({ fns: backend.url }, [[".*", "fns"]], "clusterPolicies: { enabled: true, whenNoneApply: Defer }"),
    extra: { clusterPolicies: { kc, debounceMs: 20, statusResyncMs: 100, backoffMs: 50, ...extra } },
  });
}

function read(h: Harness, namespace: string, metric: string, selector = ""): Promise<Reply> {
  const q = selector === "" ? "" : `?labelSelector=${encodeURIComponent(selector)}`;
  return h.get(`${V1}/namespaces/${namespace}/${metric}${q}`, { cert: pki.frontProxy, headers: HPA });
}

async function metrics(h: Harness): Promise<string> {
  return (await h.get("/metrics", { cert: pki.frontProxy, headers: HPA })).text;
}

/** A guardrail: queue metrics of any series, never secret_*. */
const GUARDRAIL = {
  kind: "ClusterExternalMetricPolicy" as const,
  metadata: { name: "guardrail" },
  spec: { rules: [{ metric: "secret_.*", deny: true }, { metric: "queue_.*", selector: {} }], defaultAction: "Deny" },
};

/** team-a may read only its own queue. */
const NARROW = {
  kind: "ExternalMetricPolicy" as const,
  metadata: { name: "narrow", namespace: "team-a" },
  spec: { rules: [{ metric: "queue_.*", selector: { matchLabels: { queue: "team-a-jobs" } } }], defaultAction: "Deny" },
};

/** Both kinds listed and watched, and the rebuild after it done (debounce 20 ms). */
/**
 * Both kinds listed and watched, and the first rebuild in force: its compiles
 * run in a worker thread (policy-worker.ts), so the set is swapped in some
 * time after the lists; `team-a`'s read (allowed in the suites that call this)
 * answering 200 says it is.
 */
async function listed(fake: FakeKubeApiServer, h: Harness): Promise<void> {
  await eventually(() => new Set(fake.listsAndWatches.filter((l) => l.watch && l.resource.endsWith("policies")).map((l) => l.resource)).size === 2, 5000, "both kinds listed and watched");
  await eventually(async () => (await read(h, "team-a", "queue_messages_ready")).status === 200, 10_000, "the first policy set in force");
}

const accepted = (fake: FakeKubeApiServer, key: string) => (fake.policies.get(key) as any)?.status?.conditions?.find((c: { type: string }) => c.type === "Accepted");

describe("an invalid edit does not widen access", () => {
  let fake: FakeKubeApiServer;
  let h: Harness;
  beforeAll(async () => {
    fake = await startFakeKubeApiServer();
    fake.applyPolicy(GUARDRAIL);
    fake.applyPolicy(NARROW);
    h = await proxyWith(fake);
    await eventually(() => h.proxy.clusterPolicies?.summary().accepted === 2, 5000, "both policies in force");
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
  });

  it("a guardrail edited into a bad label key keeps its previous generation in force (Accepted=False says so; metric; Event)", async () => {
    expect((await read(h, "team-b", "secret_depth")).status).toBe(403);
    fake.applyPolicy({ ...GUARDRAIL, spec: { rules: [{ metric: "secret_.*", deny: true }, { metric: "queue_.*", selector: { matchLabels: { "bad key!": "x" } } }], defaultAction: "Deny" } });
    await eventually(() => accepted(fake, "ClusterExternalMetricPolicy//guardrail")?.status === "False", 3000, "Accepted=False written");
    const denied = await read(h, "team-b", "secret_depth");
    expect(denied.status, "the edit must not open what generation 1 denied").toBe(403);
    expect(denied.json().message).toContain("ClusterExternalMetricPolicy guardrail: policy guardrail rules[0]");
    const condition = accepted(fake, "ClusterExternalMetricPolicy//guardrail");
    expect(condition).toMatchObject({ status: "False", reason: "InvalidSelector", observedGeneration: 2 });
    expect(condition.message).toContain("spec.rules[1].selector");
    expect(condition.message).toContain("generation 2 is not enforced: generation 1 stays in force until this one is fixed");
    const m = await metrics(h);
    expect(m).toMatch(/emb_proxy_cluster_policies\{state="stale"\} 1/);
    expect(m).toMatch(/emb_proxy_cluster_policy_refused_edits_total 1/);
    await eventually(() => fake.events.some((e) => (e.event as any).regarding?.name === "guardrail"), 3000, "an Event about the guardrail");
    const event = fake.events.find((e) => (e.event as any).regarding?.name === "guardrail")!.event as any;
    expect(event).toMatchObject({
      type: "Warning",
      reason: "InvalidSelector",
      action: "KeepPreviousGeneration",
      reportingController: "external-metrics-bridge.io/proxy",
      regarding: { kind: "ClusterExternalMetricPolicy", name: "guardrail", apiVersion: "external-metrics-bridge.io/v1alpha1" },
      metadata: { namespace: "default" },
    });
    expect(event.note).toContain("generation 1 stays in force");
    // Fixed: the new generation is in force.
    fake.applyPolicy({ ...GUARDRAIL, spec: { rules: [{ metric: "secret_.*", deny: true }, { metric: "queue_.*", selector: {} }], defaultAction: "Allow" } });
    await eventually(() => accepted(fake, "ClusterExternalMetricPolicy//guardrail")?.status === "True", 3000, "Accepted=True again");
    expect((await read(h, "team-b", "secret_depth")).status).toBe(403);
    expect(await metrics(h)).toMatch(/emb_proxy_cluster_policies\{state="stale"\} 0/);
  });

  it("a namespace policy edited into pattern `(x` keeps denying what it denied, once per generation in Events", async () => {
    expect((await read(h, "team-a", "queue_messages_ready", "queue=payments")).status).toBe(403);
    fake.applyPolicy({ ...NARROW, spec: { rules: [{ metric: "(x", selector: {} }], defaultAction: "Allow" } });
    await eventually(() => accepted(fake, "ExternalMetricPolicy/team-a/narrow")?.status === "False", 3000, "Accepted=False written");
    const denied = await read(h, "team-a", "queue_messages_ready", "queue=payments");
    expect(denied.status, "the edit must not open what generation 1 denied").toBe(403);
    expect(denied.json().message).toContain('allows only selector "queue=team-a-jobs"');
    expect((await read(h, "team-a", "queue_messages_ready", "queue=team-a-jobs")).status).toBe(200);
    expect(accepted(fake, "ExternalMetricPolicy/team-a/narrow")).toMatchObject({ reason: "InvalidPattern", observedGeneration: 2 });
    await eventually(() => fake.events.some((e) => (e.event as any).regarding?.name === "narrow"), 3000, "an Event about team-a/narrow");
    await new Promise((r) => setTimeout(r, 400)); // several status rounds: one Event per refused generation
    const events = fake.events.filter((e) => (e.event as any).regarding?.name === "narrow");
    expect(events).toHaveLength(1);
    expect(events[0]!.event).toMatchObject({ metadata: { namespace: "team-a" }, regarding: { namespace: "team-a" }, reason: "InvalidPattern" });
    expect(h.logs.some((l) => String(l.msg).includes("ExternalMetricPolicy team-a/narrow generation 2 is invalid and not enforced; generation 1 stays in force"))).toBe(true);
    // Deleting it is the admin's right: the read is allowed again.
    fake.deletePolicy("ExternalMetricPolicy", "team-a", "narrow");
    await eventually(async () => (await read(h, "team-a", "queue_messages_ready", "queue=payments")).status === 200, 3000, "allowed after the delete");
  });

  it("a new invalid object denies every read in its scope, whatever subjects it names, until fixed or deleted", async () => {
    // It names someone else as subject: an object that does not compile cannot be trusted to say whom it applies to.
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "sneaky", namespace: "team-s" }, spec: { subjects: { users: ["nobody"] }, rules: [{ metric: "(x", deny: true }] } });
    await eventually(async () => (await read(h, "team-s", "queue_messages_ready")).status === 403, 3000, "team-s denied");
    const denied = (await read(h, "team-s", "queue_messages_ready")).json();
    expect(denied).toMatchObject({ kind: "Status", code: 403, reason: "Forbidden" });
    expect(denied.message).toContain("ExternalMetricPolicy team-s/sneaky is invalid (spec.rules[0].metric");
    expect(denied.message).toContain('denies every values read in namespace "team-s" until it is fixed or deleted');
    expect((await read(h, "team-b", "queue_messages_ready")).status).toBe(200);
    expect(await metrics(h)).toMatch(/emb_proxy_cluster_policies\{state="invalid"\} 1/);
    await eventually(() => fake.events.some((e) => (e.event as any).regarding?.name === "sneaky" && (e.event as any).action === "DenyNamespace"), 3000, "an Event about team-s/sneaky");

    // A new invalid guardrail denies every read in the cluster.
    fake.applyPolicy({ kind: "ClusterExternalMetricPolicy", metadata: { name: "broken-guard" }, spec: { rules: [{ metric: "queue_.*", selector: { matchLabels: { "-bad": "x" } } }] } });
    await eventually(async () => (await read(h, "team-b", "queue_messages_ready")).status === 403, 3000, "every namespace denied");
    expect((await read(h, "team-b", "queue_messages_ready")).json().message).toContain("ClusterExternalMetricPolicy broken-guard is invalid");
    expect((await read(h, "team-b", "queue_messages_ready")).json().message).toContain("denies every values read in the cluster");
    fake.deletePolicy("ClusterExternalMetricPolicy", undefined, "broken-guard");

    // Fixed: it applies as written (to its subjects only).
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "sneaky", namespace: "team-s" }, spec: { subjects: { users: ["nobody"] }, rules: [{ metric: "x", deny: true }] } });
    await eventually(async () => (await read(h, "team-s", "queue_messages_ready")).status === 200, 3000, "team-s allowed once fixed");
    expect((await read(h, "team-b", "queue_messages_ready")).status).toBe(200);
    fake.deletePolicy("ExternalMetricPolicy", "team-s", "sneaky");
  });
});

describe("one namespace's blast radius is that namespace", () => {
  it("51 policies in one namespace (cluster-wide limit 50) fail that namespace's reads only (503 naming the limit)", async () => {
    const fake = await startFakeKubeApiServer();
    fake.applyPolicy(GUARDRAIL);
    for (let i = 0; i < 51; i++) fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: `p${i}`, namespace: "team-evil" }, spec: { rules: [{ metric: "nothing_.*", deny: true }] } });
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "mine", namespace: "team-a" }, spec: { rules: [{ metric: "queue_.*", selector: {} }] } });
    const h = await proxyWith(fake, { limits: { maxObjects: 50 } });
    try {
      await listed(fake, h);
      expect((await read(h, "team-a", "queue_messages_ready")).status).toBe(200);
      expect((await read(h, "team-b", "queue_messages_ready")).status).toBe(200);
      expect((await read(h, "team-b", "secret_depth")).status, "the guardrail stays in force").toBe(403);
      const evil = await read(h, "team-evil", "queue_messages_ready");
      expect(evil.status).toBe(503);
      expect(evil.headers["retry-after"]).toBeUndefined();
      expect(evil.json().message).toContain('cannot decide reads in namespace "team-evil"');
      expect(evil.json().message).toContain("cluster-wide limit of 50 policy objects");
      expect(await metrics(h)).toMatch(/emb_proxy_cluster_policies\{state="over-limit"\} 51/);
    } finally {
      await h.close();
      await fake.close();
    }
  });

  it("a namespace past its own limits (objects, spec bytes, rules) fails alone, and recovers when objects are deleted", async () => {
    const fake = await startFakeKubeApiServer();
    fake.applyPolicy(GUARDRAIL);
    for (let i = 0; i < 4; i++) fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: `p${i}`, namespace: "team-many" }, spec: { rules: [{ metric: "nothing_.*", deny: true }], defaultAction: "Allow" } });
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "big", namespace: "team-big" }, spec: { rules: [{ metric: `nothing_${"x".repeat(3000)}`, deny: true }] } });
    const rules = Array.from({ length: 9 }, (_, i) => ({ metric: `r${i}`, deny: true }));
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "rules", namespace: "team-rules" }, spec: { rules } });
    const h = await proxyWith(fake, { limits: { maxNamespaceObjects: 3, maxNamespaceSpecBytes: 2048, maxNamespaceRules: 8 } });
    try {
      await listed(fake, h);
      const many = await read(h, "team-many", "queue_messages_ready");
      expect(many.status).toBe(503);
      expect(many.json().message).toContain('4 ExternalMetricPolicy objects in namespace "team-many" exceed the limit of 3 objects');
      expect((await read(h, "team-big", "queue_messages_ready")).json().message).toMatch(/take \d+ bytes, over the limit of 2048/);
      expect((await read(h, "team-rules", "queue_messages_ready")).json().message).toContain("have 9 rules, over the limit of 8");
      expect((await read(h, "team-a", "queue_messages_ready")).status).toBe(200);
      expect((await read(h, "team-a", "secret_depth")).status).toBe(403);
      expect(h.logs.filter((l) => l.level === "error" && String(l.msg).includes('namespace "team-many" are refused'))).toHaveLength(1);
      fake.deletePolicy("ExternalMetricPolicy", "team-many", "p0");
      await eventually(async () => (await read(h, "team-many", "queue_messages_ready")).status === 200, 3000, "team-many back within its limit");
      expect(h.logs.some((l) => String(l.msg).includes('namespace "team-many" is back within the limits'))).toBe(true);
    } finally {
      await h.close();
      await fake.close();
    }
  });

  it("12 policies with 1.4 MB annotations (a 17 MB list) do not keep a fresh proxy unready, and annotations are not kept", async () => {
    // kube-apiserver caps annotations at 256 KiB in all, but a spec or managedFields can be as large:
    // what matters is a list bigger than one answer may be, and fields the layer does not need.
    const fake = await startFakeKubeApiServer();
    fake.applyPolicy(GUARDRAIL);
    const note = "x".repeat(1_400_000);
    for (let i = 0; i < 12; i++) {
      fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: `fat${i}`, namespace: "team-fat", annotations: { note } } as any, spec: { rules: [{ metric: "nothing_.*", deny: true }] } });
    }
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "narrow", namespace: "team-a" }, spec: NARROW.spec });
    const h = await proxyWith(fake);
    try {
      await eventually(async () => (await read(h, "team-a", "queue_messages_ready", "queue=team-a-jobs")).status === 200, 10_000, "ready with every policy listed");
      expect((await read(h, "team-a", "queue_messages_ready", "queue=payments")).status).toBe(403);
      const lists = fake.listsAndWatches.filter((l) => l.resource === "externalmetricpolicies" && !l.watch);
      expect(lists[0]?.limit, "paginated").toBe(500);
      expect(Math.min(...lists.map((l) => l.limit ?? Infinity)), "a page over 16 MiB is asked again with fewer items").toBeLessThan(12);
      expect(lists.some((l) => l.continue !== undefined), "continued").toBe(true);
      expect(h.proxy.clusterPolicies!.heldBytes(), "annotations dropped on receipt").toBeLessThan(20_000);
      // Watch events are stripped too.
      fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "fat-late", namespace: "team-fat", annotations: { note } } as any, spec: { rules: [{ metric: "nothing_.*", deny: true }] } });
      await eventually(() => h.proxy.clusterPolicies!.summary().accepted === 15, 3000, "the watched object in force");
      expect(h.proxy.clusterPolicies!.heldBytes()).toBeLessThan(20_000);
    } finally {
      await h.close();
      await fake.close();
    }
  }, 30_000);

  it("a watch that cannot resync within its bound fails closed: reads 503 naming why, /readyz up, a gauge and an error line; recovery on the next list", async () => {
    const fake = await startFakeKubeApiServer();
    fake.applyPolicy(GUARDRAIL);
    const h = await proxyWith(fake, { resyncTimeoutMs: 1500 });
    try {
      await eventually(async () => (await read(h, "team-a", "queue_messages_ready")).status === 200, 5000, "ready");
      fake.failing.add("externalmetricpolicies");
      fake.endWatches();
      // Within the bound the policies last read stay in force.
      await eventually(() => h.logs.some((l) => String(l.msg).includes("list or watch of ExternalMetricPolicy failed")), 3000, "the failure seen");
      expect((await read(h, "team-a", "queue_messages_ready")).status).toBe(200);
      await eventually(async () => (await read(h, "team-a", "queue_messages_ready")).status === 503, 5000, "refused past the bound");
      const r = await read(h, "team-a", "queue_messages_ready");
      expect(r.headers["retry-after"]).toBeUndefined();
      expect(r.json().message).toMatch(/the list and watch of ExternalMetricPolicy have failed for \d+ s, longer than the 2 s the proxy keeps enforcing policies it cannot refresh \(last error: .*HTTP 500/);
      expect((await h.get("/readyz")).status).toBe(200);
      expect((await h.get(V1, { cert: pki.frontProxy, headers: HPA })).status, "discovery answers").toBe(200);
      await eventually(() => h.logs.some((l) => l.level === "error" && String(l.msg).includes("the list and watch of ExternalMetricPolicy have failed")), 3000, "the error line");
      expect(await metrics(h)).toMatch(/emb_proxy_cluster_policy_watch_unsynced\{kind="ExternalMetricPolicy"\} 1/);
      fake.failing.delete("externalmetricpolicies");
      await eventually(async () => (await read(h, "team-a", "queue_messages_ready")).status === 200, 5000, "reads again after a list");
      expect(await metrics(h)).toMatch(/emb_proxy_cluster_policy_watch_unsynced\{kind="ExternalMetricPolicy"\} 0/);
    } finally {
      await h.close();
      await fake.close();
    }
  });

  it("a list whose continue token expires mid-way starts again from the first page and misses nothing", async () => {
    const fake = await startFakeKubeApiServer();
    for (let i = 0; i < 5; i++) fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: `p${i}`, namespace: `team-${i}` }, spec: { rules: [{ metric: "queue_.*", deny: true }] } });
    let expired = false;
    fake.onPolicyListPage = (page) => {
      if (page.resource === "externalmetricpolicies" && page.continue !== undefined && !expired) {
        expired = true;
        fake.expireContinueTokens();
      }
    };
    const h = await proxyWith(fake, { listPageSize: 2 });
    try {
      await eventually(() => h.proxy.clusterPolicies?.ready() === true, 5000, "listed");
      for (let i = 0; i < 5; i++) expect((await read(h, `team-${i}`, "queue_messages_ready")).status).toBe(403);
      const lists = fake.listsAndWatches.filter((l) => l.resource === "externalmetricpolicies" && !l.watch);
      expect(lists.filter((l) => l.continue === undefined).length, "started again from the first page").toBe(2);
      expect(lists.every((l) => l.limit === 2)).toBe(true);
      expect(expired).toBe(true);
    } finally {
      await h.close();
      await fake.close();
    }
  });
});

describe("the compile hook", () => {
  const caller: Caller = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: [], extra: {} };
  const decide = (p: ClusterPolicies, namespace: string, metric = "queue_messages_ready") => {
    try {
      return p.authorize({ caller, namespace, metric, url: new URL(`https://x${V1}/namespaces/${namespace}/${metric}`) });
    } catch (err) {
      return (err as { code?: number }).code;
    }
  };

  it("is awaited, reads stay on the previous set meanwhile, and a rejection or a timeout fails closed", async () => {
    const fake = await startFakeKubeApiServer();
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "p", namespace: "team-a" }, spec: { rules: [{ metric: "queue_.*", selector: {} }] } });
    let gate: (() => void) | undefined;
    let mode: "sync" | "gated" | "reject" | "hang" = "sync";
    const compile = async (obj: unknown): Promise<PolicyCompileResult> => {
      if (mode === "gated") await new Promise<void>((r) => (gate = r));
      if (mode === "reject") throw new Error("worker crashed");
      if (mode === "hang") return new Promise<PolicyCompileResult>(() => {});
      return compilePolicyObject(obj);
    };
    const logs: LogRecord[] = [];
    const p = new ClusterPolicies({ kc: kubeConfigFor(fake.url, fake.caPem, fake.token), log: (r) => void logs.push(r), debounceMs: 10, backoffMs: 50, compile, compileTimeoutMs: 300 });
    p.start();
    try {
      await eventually(() => p.ready(), 5000, "ready");
      expect(decide(p, "team-a")).toBe("allow");
      // A slow compile: the previous set decides until it settles.
      mode = "gated";
      fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "p", namespace: "team-a" }, spec: { rules: [{ metric: "queue_.*", deny: true }] } });
      await eventually(() => gate !== undefined, 3000, "the compile started");
      expect(decide(p, "team-a")).toBe("allow");
      mode = "sync";
      gate!();
      await eventually(() => decide(p, "team-a") === 403, 3000, "the new generation in force");
      // A rejection: invalid; the previous (valid) generation stays in force.
      mode = "reject";
      fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "p", namespace: "team-a" }, spec: { rules: [{ metric: "queue_.*", selector: {} }] } });
      await eventually(() => p.summary().invalid.length === 1, 3000, "the rejected compile seen");
      expect(p.summary().invalid[0]).toMatchObject({ id: "ExternalMetricPolicy team-a/p", inForce: 2 });
      expect(p.summary().invalid[0]!.message).toContain("worker crashed");
      expect(decide(p, "team-a")).toBe(403);
      // A compile that never settles, for an object never seen valid: past the timeout it denies its namespace.
      mode = "hang";
      fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "q", namespace: "team-h" }, spec: { rules: [{ metric: "x", deny: true }] } });
      await eventually(() => decide(p, "team-h") === 403, 3000, "team-h denied after the compile timeout");
      expect(p.summary().invalid.find((i) => i.id === "ExternalMetricPolicy team-h/q")?.message).toContain("did not finish within 300 ms");
      expect(decide(p, "team-b")).toBe("defer");
    } finally {
      await p.stop();
      await fake.close();
    }
  });
});
