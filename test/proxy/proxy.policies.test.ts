/**
 * The proxy's cluster policy layer (shared/proxy/policy/policies.ts) through the
 * real proxy: HTTPS with kube-apiserver's front-proxy client certificate,
 * the fake Kubernetes API serving ExternalMetricPolicy and
 * ClusterExternalMetricPolicy objects (list, watch, status subresource), a
 * signed bridge-shaped backend behind it.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import {
  authenticationData,
  call,
  createPki,
  eventually,
  KEYS,
  proxyConfigText,
  startEchoBackend,
  startHarness,
  V1,
  writeFakeKubeconfig,
  type EchoBackend,
  type Harness,
  type Pki,
  type Reply,
  HPA_FRONT_PROXY as HPA,
} from "./proxy.harness.ts";
import { freePort } from "../helpers/ports.ts";

let pki: Pki;
let backend: EchoBackend;

beforeAll(async () => {
  pki = await createPki();
  backend = await startEchoBackend(["queue_messages_ready", "secret_depth"]);
});
afterAll(async () => {
  await backend?.close();
});

/** A proxy with the cluster policy layer on, against `fake`. */
async function proxyWith(
  fake: FakeKubeApiServer,
  whenNoneApply: "Defer" | "Deny",
  extra: { isLeader?: () => boolean; token?: string; limits?: { maxObjects?: number; maxSpecBytes?: number; maxRules?: number } } = {},
): Promise<Harness> {
  const token = extra.token ?? fake.token;
  if (token !== fake.token) fake.clientTokens.add(token);
  const kc = kubeConfigFor(fake.url, fake.caPem, token);
  return startHarness({
    pki,
    fake,
    proxyConfig: proxyConfigText({ fns: backend.url }, [[".*", "fns"]], `clusterPolicies: { enabled: true, whenNoneApply: ${whenNoneApply} }`),
    extra: { clusterPolicies: { kc, debounceMs: 20, statusResyncMs: 100, backoffMs: 50, ...(extra.isLeader ? { isLeader: extra.isLeader } : {}), ...(extra.limits ? { limits: extra.limits } : {}) } },
  });
}

function read(h: Harness, namespace: string, metric: string, selector = ""): Promise<Reply> {
  const q = selector === "" ? "" : `?labelSelector=${encodeURIComponent(selector)}`;
  return h.get(`${V1}/namespaces/${namespace}/${metric}${q}`, { cert: pki.frontProxy, headers: HPA });
}

/** A cluster guardrail: queue metrics of any series, never secret_*. */
const GUARDRAIL = {
  kind: "ClusterExternalMetricPolicy" as const,
  metadata: { name: "guardrail" },
  spec: { rules: [{ metric: "secret_.*", deny: true }, { metric: "queue_.*", selector: {} }], defaultAction: "Deny" },
};

describe("cluster policies in the proxy", () => {
  let fake: FakeKubeApiServer;
  let h: Harness;
  beforeAll(async () => {
    fake = await startFakeKubeApiServer();
    fake.authorize = () => ({ allowed: true, reason: "fake RBAC allows everything" });
    fake.applyPolicy(GUARDRAIL);
    h = await proxyWith(fake, "Deny");
    await eventually(() => h.proxy.clusterPolicies?.ready() === true, 5000, "the policies listed");
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
  });

  it("forwards a read a cluster policy allows, and a namespace policy's deny takes effect within 2 s of its watch event, deleting it restores", async () => {
    const allowed = await read(h, "team-a", "queue_messages_ready", "queue=other");
    expect(allowed.status).toBe(200);
    expect(allowed.json().items[0].value).toBe("42");

    const applied = Date.now();
    fake.applyPolicy({
      kind: "ExternalMetricPolicy",
      metadata: { name: "narrow", namespace: "team-a" },
      spec: { rules: [{ metric: "queue_.*", selector: { matchLabels: { queue: "team-a-jobs" } } }], defaultAction: "Deny" },
    });
    let denied: Reply | undefined;
    while (Date.now() - applied < 2000) {
      const r = await read(h, "team-a", "queue_messages_ready", "queue=other");
      if (r.status === 403) {
        denied = r;
        break;
      }
    }
    expect(denied, "denied within 2 s of the apply").toBeDefined();
    const status = denied!.json();
    expect(status).toMatchObject({ kind: "Status", status: "Failure", reason: "Forbidden", code: 403 });
    expect(status.message).toContain("cluster policy layer");
    expect(status.message).toContain("ExternalMetricPolicy team-a/narrow");
    expect(status.message).toContain("rules[0]");
    expect(status.message).toContain('does not imply "queue=team-a-jobs"');
    expect(denied!.headers["retry-after"]).toBeUndefined();
    // The selector the namespace policy allows still reads; other namespaces are untouched.
    expect((await read(h, "team-a", "queue_messages_ready", "queue=team-a-jobs")).status).toBe(200);
    expect((await read(h, "team-b", "queue_messages_ready", "queue=other")).status).toBe(200);

    const deleted = Date.now();
    fake.deletePolicy("ExternalMetricPolicy", "team-a", "narrow");
    let restored = false;
    while (!restored && Date.now() - deleted < 2000) restored = (await read(h, "team-a", "queue_messages_ready", "queue=other")).status === 200;
    expect(restored, "allowed again within 2 s of the delete").toBe(true);
  });

  it("a namespace policy cannot widen what a cluster policy denies", async () => {
    const before = backend.requests.length;
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "wide", namespace: "team-w" }, spec: { rules: [{ metric: ".*", selector: {} }], defaultAction: "Allow" } });
    await eventually(() => h.proxy.clusterPolicies!.current().policies.some((p) => p.id === "team-w/wide"), 2000, "the namespace policy in force");
    const r = await read(h, "team-w", "secret_depth");
    expect(r.status).toBe(403);
    expect(r.json().message).toContain("ClusterExternalMetricPolicy guardrail: policy guardrail rules[0]");
    expect(r.json().message).toContain("deny rule");
    expect(backend.requests.length, "a denied read is not forwarded").toBe(before);
    fake.deletePolicy("ExternalMetricPolicy", "team-w", "wide");
  });

  it("re-lists after a 410 Gone watch and keeps following changes", async () => {
    const lists = () => fake.listsAndWatches.filter((l) => l.resource === "externalmetricpolicies" && !l.watch).length;
    const before = lists();
    fake.expireWatches();
    await eventually(() => lists() > before, 3000, "a re-list");
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "after-gone", namespace: "team-g" }, spec: { rules: [{ metric: ".*", deny: true }] } });
    await eventually(async () => (await read(h, "team-g", "queue_messages_ready")).status === 403, 2000, "the change after the re-list in force");
    expect((await read(h, "team-a", "queue_messages_ready")).status).toBe(200);
    fake.deletePolicy("ExternalMetricPolicy", "team-g", "after-gone");
  });

  it("with whenNoneApply Deny a read no policy applies to is refused; with Defer it is left to the backend", async () => {
    fake.applyPolicy({ kind: "ClusterExternalMetricPolicy", metadata: { name: "only-jane" }, spec: { subjects: { users: ["jane"] }, rules: [{ metric: ".*", deny: true }] } });
    fake.deletePolicy("ClusterExternalMetricPolicy", undefined, "guardrail");
    await eventually(() => h.proxy.clusterPolicies!.current().policies.every((p) => p.id !== "guardrail"), 2000, "the guardrail gone");
    const denied = await read(h, "team-a", "queue_messages_ready");
    expect(denied.status).toBe(403);
    expect(denied.json().message).toContain("whenNoneApply is Deny");

    const deferring = await proxyWith(fake, "Defer");
    try {
      await eventually(() => deferring.proxy.clusterPolicies?.ready() === true, 5000, "the second proxy listed");
      const before = backend.requests.length;
      const deferred = await read(deferring, "team-a", "queue_messages_ready");
      expect(deferred.status).toBe(200);
      expect(backend.requests.length).toBe(before + 1);
      const metrics = (await deferring.get("/metrics", { cert: pki.frontProxy, headers: HPA })).text;
      expect(metrics).toMatch(/emb_proxy_policy_decisions_total\{layer="cluster",decision="defer"\} 1/);
    } finally {
      await deferring.close();
      fake.applyPolicy(GUARDRAIL);
      fake.deletePolicy("ClusterExternalMetricPolicy", undefined, "only-jane");
    }
    const metrics = (await h.get("/metrics", { cert: pki.frontProxy, headers: HPA })).text;
    expect(metrics).toMatch(/emb_proxy_policy_decisions_total\{layer="cluster",decision="deny"\} [1-9]/);
    expect(metrics).toMatch(/emb_proxy_denials_total\{source="cluster-policy"\} [1-9]/);
  });
});

describe("status write-back and invalid objects", () => {
  it("a new invalid object denies its namespace (403 naming it), and only the leader writes Accepted=False with the reason, once", async () => {
    const fake = await startFakeKubeApiServer();
    fake.authorize = () => ({ allowed: true });
    fake.applyPolicy(GUARDRAIL);
    fake.applyPolicy({
      kind: "ExternalMetricPolicy",
      metadata: { name: "broken", namespace: "team-a" },
      spec: { rules: [{ metric: "queue_(", deny: true }], defaultAction: "Deny" },
    });
    let leading = false;
    const follower = await proxyWith(fake, "Deny", { token: "follower-token", isLeader: () => false });
    const leader = await proxyWith(fake, "Deny", { token: "leader-token", isLeader: () => leading });
    try {
      await eventually(() => leader.proxy.clusterPolicies?.summary().invalid.length === 1 && follower.proxy.clusterPolicies?.ready() === true, 5000, "compiled");
      // Never valid: it cannot say whom it applies to, so it denies every read in its namespace; other namespaces are untouched.
      const denied = await read(leader, "team-a", "queue_messages_ready");
      expect(denied.status).toBe(403);
      expect(denied.json().message).toContain("ExternalMetricPolicy team-a/broken is invalid (spec.rules[0].metric");
      expect(denied.json().message).toContain('denies every values read in namespace "team-a" until it is fixed or deleted');
      expect((await read(leader, "team-b", "queue_messages_ready")).status).toBe(200);
      const m = (await leader.get("/metrics", { cert: pki.frontProxy, headers: HPA })).text;
      expect(m).toMatch(/emb_proxy_cluster_policies\{state="invalid"\} 1/);
      expect(m).toMatch(/emb_proxy_cluster_policies\{state="accepted"\} 1/);
      expect(leader.logs.some((l) => String(l.msg).includes("ExternalMetricPolicy team-a/broken is invalid"))).toBe(true);
      await new Promise((r) => setTimeout(r, 300)); // several status rounds
      expect(fake.writes.filter((w) => w.resource.endsWith("/status"))).toEqual([]);

      leading = true;
      await eventually(() => fake.writes.filter((w) => w.resource.endsWith("/status")).length === 2, 3000, "both statuses written");
      expect(new Set(fake.writes.filter((w) => w.resource.endsWith("/status")).map((w) => w.by))).toEqual(new Set(["leader-token"]));
      const broken = fake.policies.get("ExternalMetricPolicy/team-a/broken") as any;
      expect(broken.status.observedGeneration).toBe(1);
      expect(broken.status.conditions).toHaveLength(1);
      expect(broken.status.conditions[0]).toMatchObject({ type: "Accepted", status: "False", reason: "InvalidPattern", observedGeneration: 1 });
      expect(broken.status.conditions[0].message).toContain("spec.rules[0].metric");
      const guard = fake.policies.get("ClusterExternalMetricPolicy//guardrail") as any;
      expect(guard.status.conditions[0]).toMatchObject({ type: "Accepted", status: "True", reason: "Valid", observedGeneration: 1 });

      // Written only when it changes: further rounds write nothing.
      await new Promise((r) => setTimeout(r, 400));
      expect(fake.writes.filter((w) => w.resource.endsWith("/status")).length).toBe(2);

      // Fixed: the policy is enforced and its status turns True at the new generation.
      fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "broken", namespace: "team-a" }, spec: { rules: [{ metric: "queue_.*", deny: true }], defaultAction: "Deny" } });
      await eventually(() => (fake.policies.get("ExternalMetricPolicy/team-a/broken") as any).status.conditions[0].status === "True", 3000, "status True");
      expect((fake.policies.get("ExternalMetricPolicy/team-a/broken") as any).status).toMatchObject({ observedGeneration: 2 });
      expect((await read(leader, "team-a", "queue_messages_ready")).status).toBe(403);
    } finally {
      await follower.close();
      await leader.close();
      await fake.close();
    }
  });
});

describe("before the policies are known", () => {
  it("refuses values reads with 503 (no Retry-After, not a value) while the CRDs are missing; discovery answers; installed CRDs are picked up", async () => {
    const fake = await startFakeKubeApiServer();
    fake.authorize = () => ({ allowed: true });
    fake.policyCrdsInstalled = false;
    const h = await proxyWith(fake, "Defer");
    try {
      await eventually(() => h.logs.some((l) => l.level === "error" && String(l.msg).includes("install the CRDs")), 3000, "the missing CRDs logged");
      const r = await read(h, "team-a", "queue_messages_ready");
      expect(r.status).toBe(503);
      expect(r.headers["retry-after"]).toBeUndefined();
      expect(r.json()).toMatchObject({ kind: "Status", code: 503, reason: "ServiceUnavailable" });
      expect(r.json().message).toContain("CRDs installed");
      expect(r.json()).not.toHaveProperty("items");
      expect((await h.get(V1, { cert: pki.frontProxy, headers: HPA })).status).toBe(200);
      expect((await h.get("/readyz")).status).toBe(200);
      await new Promise((r) => setTimeout(r, 300)); // retried with back-off, logged once
      expect(h.logs.filter((l) => String(l.msg).includes("install the CRDs")).length).toBe(2); // once per kind

      fake.policyCrdsInstalled = true;
      fake.applyPolicy(GUARDRAIL);
      await eventually(async () => (await read(h, "team-a", "queue_messages_ready")).status === 200, 5000, "reads after the CRDs appear");
    } finally {
      await h.close();
      await fake.close();
    }
  });

  it("refuses values reads with 503 without Retry-After until the first list completes", async () => {
    const fake = await startFakeKubeApiServer();
    fake.authorize = () => ({ allowed: true });
    fake.failing.add("clusterexternalmetricpolicies");
    const h = await proxyWith(fake, "Defer");
    try {
      await eventually(() => h.logs.some((l) => String(l.msg).includes("list or watch of ClusterExternalMetricPolicy failed")), 3000, "a list tried");
      const before = backend.requests.length;
      const r = await read(h, "team-a", "queue_messages_ready");
      expect(r.status).toBe(503);
      expect(r.headers["retry-after"]).toBeUndefined();
      expect(r.json().message).toContain("have not been listed yet");
      expect(backend.requests.length, "not forwarded").toBe(before);
      fake.failing.delete("clusterexternalmetricpolicies");
      await eventually(async () => (await read(h, "team-a", "queue_messages_ready")).status === 200, 5000, "ready after the list");
    } finally {
      await h.close();
      await fake.close();
    }
  });

  it("refuses values reads (503) rather than enforcing a subset when the policies exceed the layer's limits: a namespace's own, or all of them for cluster-scoped ones", async () => {
    const fake = await startFakeKubeApiServer();
    fake.authorize = () => ({ allowed: true });
    fake.applyPolicy(GUARDRAIL);
    fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "a", namespace: "team-a" }, spec: { rules: [{ metric: "queue_.*", deny: true }] } });
    const h = await proxyWith(fake, "Defer", { limits: { maxObjects: 1 } });
    try {
      // All objects together pass the cluster-wide limit: the namespace with the most is refused, whole.
      await eventually(() => h.logs.some((l) => String(l.msg).includes('values reads in namespace "team-a" are refused')), 3000, "the limit logged");
      // the first rebuild's compiles (a worker thread) may still be running when the limit is logged: reads are refused meanwhile too
      await eventually(async () => String((await read(h, "team-a", "queue_messages_ready")).json().message).includes("limit"), 5000, "the limit in force");
      const r = await read(h, "team-a", "queue_messages_ready");
      expect(r.status).toBe(503);
      expect(r.headers["retry-after"]).toBeUndefined();
      expect(r.json().message).toContain("cluster-wide limit of 1 policy objects");
      expect((await read(h, "team-b", "queue_messages_ready")).status).toBe(200);
      // The cluster-scoped objects alone past it: no subset is picked, every read is refused.
      fake.applyPolicy({ kind: "ClusterExternalMetricPolicy", metadata: { name: "second" }, spec: { rules: [{ metric: "secret_.*", deny: true }] } });
      await eventually(async () => (await read(h, "team-b", "queue_messages_ready")).status === 503, 3000, "every namespace refused");
      expect((await read(h, "team-b", "queue_messages_ready")).json().message).toContain("2 cluster-scoped policy objects (ClusterExternalMetricPolicy) exceed the limit of 1 objects");
      fake.deletePolicy("ClusterExternalMetricPolicy", undefined, "second");
      fake.deletePolicy("ExternalMetricPolicy", "team-a", "a");
      await eventually(async () => (await read(h, "team-a", "queue_messages_ready")).status === 200, 3000, "within the limit again");
    } finally {
      await h.close();
      await fake.close();
    }
  });
});

describe("the proxy process (functions/proxy/main.ts)", () => {
  it("turns the layer on from the ProxyConfig, logs whenNoneApply at start, enforces, and the Lease holder writes status", async () => {
    const fake = await startFakeKubeApiServer();
    fake.authorize = () => ({ allowed: true });
    fake.setConfigMap("kube-system", "extension-apiserver-authentication", authenticationData(pki));
    fake.applyPolicy(GUARDRAIL);
    const dir = mkdtempSync(join(tmpdir(), "emb-policies-"));
    const config = join(dir, "proxy.yaml");
    writeFileSync(config, proxyConfigText({ fns: backend.url }, [[".*", "fns"]], "clusterPolicies: { enabled: true, whenNoneApply: Deny }"));
    const port = await freePort();
    const lines: string[] = [];
    const child = spawn(
      process.execPath,
      [
        fileURLToPath(new URL("../../functions/proxy/main.ts", import.meta.url)),
        ...["--config", config, "--kubeconfig", writeFakeKubeconfig(join(dir, "kubeconfig.yaml"), fake)],
        ...["--bind-address", "127.0.0.1", "--secure-port", String(port), "--shutdown-delay-seconds", "0", "--readiness-interval-seconds", "1"],
        ...["--tls-secret", "emb/proxy-tls", "--service-namespace", "emb"],
      ],
      { env: { ...process.env, BRIDGE_SIGNING_KEYS: KEYS, KUBERNETES_SERVICE_HOST: "" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    for (const stream of [child.stdout!, child.stderr!]) stream.on("data", (chunk: Buffer) => lines.push(...chunk.toString("utf8").split("\n").filter(Boolean)));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await eventually(() => fake.apiServices.has("v1beta1.external.metrics.k8s.io"), 30_000, "APIService registered");
      const ca = Buffer.from((fake.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string } }).spec.caBundle, "base64").toString("utf8");
      const get = (path: string) => call(`https://127.0.0.1:${port}${path}`, ca, { cert: pki.frontProxy, headers: HPA });
      await eventually(async () => (await get(`${V1}/namespaces/team-a/queue_messages_ready`)).status === 200, 10_000, "an allowed read");
      const denied = await get(`${V1}/namespaces/team-a/secret_depth`);
      expect(denied.status).toBe(403);
      expect(denied.json().message).toContain("ClusterExternalMetricPolicy guardrail");
      await eventually(() => (fake.policies.get("ClusterExternalMetricPolicy//guardrail") as any).status?.conditions?.[0]?.status === "True", 10_000, "status written");
      expect(fake.writes.filter((w) => w.resource.endsWith("/status")).length).toBe(1);
      expect(lines.some((l) => l.includes("whenNoneApply: Deny"))).toBe(true);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
      await fake.close();
    }
  }, 60_000);
});

