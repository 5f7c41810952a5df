/**
 * The proxy's per-request memos after the issue 11 review:
 * - the Authorizer's memo of prepared requests is keyed by the request's own
 *   text (method, path + query, caller JSON), exact about the caller, and
 *   bounded by entries and bytes (a BoundedMap, shared/cache/bounded-map.ts);
 * - with the cluster policy layer on, a read's `labelSelector` is parsed
 *   once: request-info.ts parses it, the authorizer's memo keeps it (the
 *   same frozen object on every read of the request), and the cluster policy
 *   layer (policies.ts, against the fake Kubernetes API) evaluates that
 *   object instead of parsing the URL again (its own selector memo stays
 *   empty).
 * What these memos save (a digest, a parse per read) is measured by the
 * benchmarks (test/bench/http-overhead.ts, "proxy → bridge (cached)"; with
 * the cluster policy layer on, test/bench/hostile.ts), not counted here.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Caller } from "../../shared/identity.ts";
import { Authorizer, CALLER_NUMBER_BOUNDS, REQUEST_MEMO_BOUNDS } from "../../shared/proxy/authz/authorize.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { ClusterPolicies } from "../../shared/proxy/policy/policies.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";

const HPA = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts", "system:authenticated"], extra: {} };
const V1 = "https://proxy/apis/external.metrics.k8s.io/v1beta1";
const url = (selector: string, ns = "team-a") => new URL(`${V1}/namespaces/${ns}/queue_messages_ready?labelSelector=${encodeURIComponent(selector)}`);

describe("Authorizer memo", () => {
  it("a request read again is the remembered one: one entry, one review, answered from the decision cache after", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    expect(await az.authorizeRequest(HPA, "GET", url("queue=a"))).toMatchObject({ allowed: true, by: "review" });
    for (let i = 0; i < 5; i++) expect(await az.authorizeRequest(HPA, "GET", url("queue=a"))).toMatchObject({ allowed: true, by: "cache" });
    expect(az.stats).toMatchObject({ reviews: 1, cacheHits: 5 });
    expect(az.requestMemoStats().entries).toBe(1);
  });

  it("is exact about the caller: identities differing only in groups, uid or extra never share an entry", async () => {
    const seen: string[] = [];
    const az = new Authorizer({ review: async (spec) => (seen.push(JSON.stringify([spec.groups, spec.uid, spec.extra])), { allowed: true }) });
    const callers: Caller[] = [
      HPA,
      { ...HPA, groups: ["system:serviceaccounts,system:authenticated"] },
      { ...HPA, uid: "1" },
      { ...HPA, extra: { scopes: ["a"] } },
      { ...HPA, extra: { scopes: ["a", "b"] } },
      { ...HPA, extra: { "scopes\u0000": ["a"] } },
    ];
    for (const c of callers) await az.authorizeRequest(c, "GET", url("queue=a"));
    expect(new Set(seen).size).toBe(callers.length);
    expect(az.requestMemoStats().entries).toBe(callers.length);
  });

  it("numbers callers in a bounded map: past its bound an identity gets a new number, never another's; a huge identity bypasses the memo", async () => {
    const az = new Authorizer({ review: async (spec) => ({ allowed: spec.user!.endsWith("-ok") }) });
    const who = (i: number): Caller => ({ user: `user-${i}-${i % 2 === 0 ? "ok" : "no"}`, groups: ["system:authenticated"], extra: {} });
    for (let i = 0; i < CALLER_NUMBER_BOUNDS.maxEntries + 100; i++) {
      const outcome = await az.authorizeRequest(who(i), "GET", url("queue=a")).then(() => "allow", () => "deny");
      expect(outcome).toBe(i % 2 === 0 ? "allow" : "deny");
    }
    for (const i of [0, 1, 2, 3]) {
      const outcome = await az.authorizeRequest(who(i), "GET", url("queue=a")).then(() => "allow", () => "deny");
      expect(outcome).toBe(i % 2 === 0 ? "allow" : "deny");
    }
    const huge: Caller = { user: "huge-ok", groups: ["system:authenticated"], extra: { blob: ["x".repeat(CALLER_NUMBER_BOUNDS.maxBytes)] } };
    const entries = az.requestMemoStats().entries;
    for (let i = 0; i < 3; i++) await az.authorizeRequest(huge, "GET", url("queue=a"));
    expect(az.requestMemoStats().entries).toBe(entries); // nothing added for it
  });

  it("counts each entry's key text in bytes and stays within maxBytes when targets are long", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    const long = "x".repeat(4_000);
    for (let i = 0; i < 2_500; i++) await az.authorizeRequest(HPA, "GET", url(`queue=${i}${long}`));
    const stats = az.requestMemoStats();
    expect(stats.bytes).toBeLessThanOrEqual(REQUEST_MEMO_BOUNDS.maxBytes);
    expect(stats.bytes).toBeGreaterThan(REQUEST_MEMO_BOUNDS.maxBytes - 10_000);
    expect(stats.entries).toBeLessThan(1_000); // ~4.3 KB each: the byte bound, not the entry bound, holds them
  });

  it("carries the parsed labelSelector only when asked, the same object on every read of the request", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    expect((await az.authorizeRequest(HPA, "GET", url("queue=a"))).selector).toBeUndefined();
    const first = await az.authorizeRequest(HPA, "GET", url("queue=a"), undefined, true);
    expect(first.selector?.requirements).toEqual([{ key: "queue", operator: "=", values: ["a"] }]);
    expect(Object.isFrozen(first.selector)).toBe(true);
    const again = await az.authorizeRequest(HPA, "GET", url("queue=a"), undefined, true);
    expect(again.selector).toBe(first.selector); // the remembered parse, not a new one
    // Nothing usable to carry: a selector that does not parse, or two of them.
    expect((await az.authorizeRequest(HPA, "GET", url("a in ("), undefined, true)).selector).toBeUndefined();
    const two = new URL(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Da&labelSelector=queue%3Db`);
    expect((await az.authorizeRequest(HPA, "GET", two, undefined, true)).selector).toBeUndefined();
    // Absent: everything.
    expect((await az.authorizeRequest(HPA, "GET", new URL(`${V1}/namespaces/team-a/queue_messages_ready`), undefined, true)).selector?.requirements).toEqual([]);
  });

  it("with a fieldSelector too: the review names the object and carries both selectors; the decision carries the label selector", async () => {
    const specs: unknown[] = [];
    const az = new Authorizer({ review: async (spec) => (specs.push(spec.resourceAttributes), { allowed: true }) });
    const decision = await az.authorizeRequest(HPA, "GET", new URL(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Da&fieldSelector=metadata.name%3Dx`), undefined, true);
    expect(decision.selector?.requirements).toEqual([{ key: "queue", operator: "=", values: ["a"] }]);
    expect(specs).toEqual([
      expect.objectContaining({
        name: "x",
        fieldSelector: { requirements: [{ key: "metadata.name", operator: "In", values: ["x"] }] },
        labelSelector: { requirements: [{ key: "queue", operator: "In", values: ["a"] }] },
      }),
    ]);
  });
});

describe("cluster policy layer with the authorizer's parsed selector", () => {
  let fake: FakeKubeApiServer;
  let policies: ClusterPolicies;
  beforeAll(async () => {
    fake = await startFakeKubeApiServer();
    fake.applyPolicy({
      kind: "ClusterExternalMetricPolicy",
      metadata: { name: "team-a-only" },
      spec: { rules: [{ metric: "queue_.*", selector: { matchLabels: { queue: "a" } } }], defaultAction: "Deny" },
    });
    policies = new ClusterPolicies({ kc: kubeConfigFor(fake.url, fake.caPem, fake.token), whenNoneApply: "Deny", log: () => {}, debounceMs: 10, backoffMs: 50 });
    policies.start();
    const until = Date.now() + 5_000;
    while (!policies.ready() && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(policies.ready()).toBe(true);
  });
  afterAll(async () => {
    await policies?.stop();
    await fake?.close();
  });

  it("a read's selector is parsed once for both layers (the layer never reads the URL), and kept when read again", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    const read = async (selector: string) => {
      const u = url(selector);
      const decision = await az.authorizeRequest(HPA, "GET", u, undefined, true);
      return { decision, verdict: await policies.authorize({ caller: HPA, namespace: "team-a", metric: "queue_messages_ready", url: u, selector: decision.selector }) };
    };
    const first = await read("queue=a");
    expect(first.verdict).toBe("allow");
    const again = await read("queue=a");
    expect(again.verdict).toBe("allow");
    expect(again.decision.selector).toBe(first.decision.selector); // the same parse, kept with the request
    await expect(read("queue=b")).rejects.toMatchObject({ code: 403 });
    expect(policies.selectorMemo.entries).toBe(0); // the URL was never read by the layer
  });

  it("evaluates the selector it is given, not the URL's; without one it reads the URL (400 when it does not parse)", async () => {
    const given = { caller: HPA, namespace: "team-a", metric: "queue_messages_ready" };
    const parsedA = (await new Authorizer({ review: async () => ({ allowed: true }) }).authorizeRequest(HPA, "GET", url("queue=a"), undefined, true)).selector;
    expect(policies.authorize({ ...given, url: url("queue=b"), selector: parsedA })).toBe("allow");
    expect(() => policies.authorize({ ...given, url: url("queue=b") })).toThrow(expect.objectContaining({ code: 403 }));
    expect(() => policies.authorize({ ...given, url: url("a in (") })).toThrow(expect.objectContaining({ code: 400 }));
    expect(policies.selectorMemo.entries).toBe(1); // queue=b, remembered within the memo's byte bound
  });
});
