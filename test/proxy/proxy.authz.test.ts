/**
 * Proxy authorization: the attributes kube-apiserver computes
 * (RequestInfoFactory, GetAuthorizerAttributes, the webhook authorizer's
 * SubjectAccessReview), the delegated authorizer's rules (always-allowed
 * paths and group, 20 s allow / 10 s deny cache keyed by a hash and bounded by
 * entries and bytes, a 2 s review deadline) and per-metric RBAC end to end over
 * TLS against the fake Kubernetes API.
 */
import https from "node:https";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Authorizer, reviewSpec, SAR_ANONYMOUS_CACHE_BOUNDS, SAR_TIMEOUT_MS, type SubjectAccessReviewSpec } from "../../shared/proxy/authz/authorize.ts";
import { requestInfo } from "../../shared/proxy/request-info.ts";
import type { Caller } from "../../shared/identity.ts";
import { MAX_SELECTOR_LENGTH } from "../../shared/k8s/selector.ts";
import { rbac } from "../fakes/kube-apiserver.ts";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";

/** Let promise callbacks and I/O callbacks queued so far run (a background review's outcome lands). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const HPA: Caller = {
  user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
  groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
  extra: {},
};

function info(path: string, method = "GET") {
  return requestInfo(method, new URL(`https://proxy.invalid${path}`));
}

describe("request attributes (apiserver RequestInfoFactory)", () => {
  it("reads a values GET as `list` of the metric resource in the namespace", () => {
    const i = info(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Djobs`);
    expect(i).toMatchObject({
      isResourceRequest: true,
      verb: "list",
      apiGroup: "external.metrics.k8s.io",
      apiVersion: "v1beta1",
      namespace: "team-a",
      resource: "queue_messages_ready",
      subresource: "",
      name: "",
    });
    expect(i.labelRequirements).toEqual([{ key: "queue", operator: "=", values: ["jobs"] }]);
    expect(info(`${V1}/namespaces/team-a/queue_messages_ready`, "HEAD").verb).toBe("list");
  });

  it.each([
    ["/apis", "get"],
    ["/apis/external.metrics.k8s.io", "get"],
    [V1, "get"],
    [`${V1}/`, "get"],
    ["/metrics", "get"],
    ["/openapi/v2", "get"],
  ])("reads %s as a non-resource request", (path, verb) => {
    const i = info(path);
    expect(i.isResourceRequest).toBe(false);
    expect(i.verb).toBe(verb);
    expect(i.path).toBe(path);
  });

  it("follows the special cases of the factory", () => {
    expect(info(`${V1}/namespaces/ns/m?watch=true`).verb).toBe("watch");
    expect(info(`${V1}/namespaces/ns/m?watch=0`).verb).toBe("list");
    expect(info(`${V1}/namespaces/ns/m?watch=`).verb).toBe("watch"); // Convert_Slice_string_To_bool
    expect(info(`${V1}/namespaces/ns/m/extra`)).toMatchObject({ verb: "get", resource: "m", name: "extra" });
    expect(info(`${V1}/namespaces/ns/m/extra/more`)).toMatchObject({ resource: "m", name: "extra", subresource: "more" });
    // "status" and "finalize" after a namespace are namespace subresources.
    expect(info(`${V1}/namespaces/ns/status`)).toMatchObject({ resource: "namespaces", name: "ns", subresource: "status", verb: "get" });
    expect(info(`${V1}/namespaces/ns`)).toMatchObject({ resource: "namespaces", name: "ns", namespace: "ns", verb: "get" });
    expect(info(`${V1}/m`)).toMatchObject({ resource: "m", namespace: "", verb: "list" });
    expect(info(`${V1}/watch/namespaces/ns/m`)).toMatchObject({ verb: "watch", resource: "m", namespace: "ns" });
    expect(info(`${V1}/namespaces/ns/m`, "DELETE").verb).toBe("deletecollection");
    expect(info(`${V1}/namespaces/ns/m`, "POST").verb).toBe("create");
    // The path is percent-decoded before it is split, as Go's URL.Path is.
    expect(info(`${V1}/namespaces/ns/a%2Fb`)).toMatchObject({ resource: "a", name: "b", verb: "get" });
    expect(info(`${V1}/namespaces/ns/team%7Cdepth`).resource).toBe("team|depth");
  });

  it("reads the custom.metrics.k8s.io paths as requestinfo.go does (resource, name, the metric as subresource)", () => {
    const C2 = "/apis/custom.metrics.k8s.io/v1beta2";
    // a Pods read (the HPA sends `*` as %2A): name "*", verb get (a name: not a list), subresource the metric
    expect(info(`${C2}/namespaces/team/pods/%2A/http_requests?labelSelector=app%3Dweb`)).toMatchObject({
      isResourceRequest: true, verb: "get", apiGroup: "custom.metrics.k8s.io", apiVersion: "v1beta2", namespace: "team", resource: "pods", name: "*", subresource: "http_requests",
    });
    // get carries no selectors: the labelSelector is not a review attribute
    expect(info(`${C2}/namespaces/team/pods/%2A/http_requests?labelSelector=app%3Dweb`).labelRequirements).toEqual([]);
    expect(info(`${C2}/namespaces/team/pods/*/http_requests`)).toMatchObject({ resource: "pods", name: "*", subresource: "http_requests" });
    // an Object read of a grouped resource: the resource as written, group suffix included
    expect(info(`/apis/custom.metrics.k8s.io/v1beta1/namespaces/team/ingresses.networking.k8s.io/web/rps`)).toMatchObject({
      verb: "get", apiVersion: "v1beta1", namespace: "team", resource: "ingresses.networking.k8s.io", name: "web", subresource: "rps",
    });
    // a namespace read: the `metrics` pseudo-resource, the metric as name
    expect(info(`${C2}/namespaces/team/metrics/queue_depth`)).toMatchObject({ verb: "get", namespace: "team", resource: "metrics", name: "queue_depth", subresource: "" });
    // a cluster-scoped object
    expect(info(`${C2}/nodes/node-1/cpu_load`)).toMatchObject({ verb: "get", namespace: "", resource: "nodes", name: "node-1", subresource: "cpu_load" });
    // discovery of a version is a non-resource get
    expect(info(C2)).toMatchObject({ isResourceRequest: false, verb: "get", path: C2 });
  });

  it("takes a name from fieldSelector=metadata.name only when the list options decode", () => {
    expect(info(`${V1}/namespaces/ns/m?fieldSelector=metadata.name%3Dx`)).toMatchObject({ verb: "list", name: "x" });
    expect(info(`${V1}/namespaces/ns/m?fieldSelector=metadata.name%3Dx&labelSelector=%3D%3D`).name).toBe("");
    expect(info(`${V1}/namespaces/ns/m?fieldSelector=metadata.name%3Da%2Fb`).name).toBe("");
  });

  it("maps label selectors to SubjectAccessReview requirements like the webhook authorizer", () => {
    const i = info(`${V1}/namespaces/ns/m?labelSelector=${encodeURIComponent("b in (y,x),a!=1,c,!d,e>3,f==z")}`);
    const spec = reviewSpec(HPA, i);
    expect(spec.resourceAttributes).toEqual({
      namespace: "ns",
      verb: "list",
      group: "external.metrics.k8s.io",
      version: "v1beta1",
      resource: "m",
      labelSelector: {
        requirements: [
          { key: "a", operator: "NotIn", values: ["1"] },
          { key: "b", operator: "In", values: ["x", "y"] },
          { key: "c", operator: "Exists" },
          { key: "d", operator: "DoesNotExist" },
          // e>3 is dropped: the check is only broader
          { key: "f", operator: "In", values: ["z"] },
        ],
      },
    });
    // An unparseable selector authorizes the unrestricted action.
    expect(reviewSpec(HPA, info(`${V1}/namespaces/ns/m?labelSelector=a%20in%20(`)).resourceAttributes).not.toHaveProperty("labelSelector");
    // A non-resource review names path and verb.
    expect(reviewSpec(HPA, info(V1))).toEqual({ user: HPA.user, groups: HPA.groups, nonResourceAttributes: { path: V1, verb: "get" } });
  });
});

describe("the delegated authorizer", () => {
  function counting(decide: (spec: SubjectAccessReviewSpec) => boolean) {
    const specs: SubjectAccessReviewSpec[] = [];
    let now = 1_000_000;
    const authorizer = new Authorizer({
      review: async (spec) => {
        specs.push(spec);
        return { allowed: decide(spec) };
      },
      now: () => now,
    });
    return { authorizer, specs, tick: (ms: number) => (now += ms) };
  }

  it("caches allowed answers 20 s (longer than the HPA's 15 s period) and denied answers 10 s", async () => {
    const { authorizer, specs, tick } = counting((s) => s.resourceAttributes?.resource === "allowed");
    const ok = info(`${V1}/namespaces/ns/allowed`);
    const no = info(`${V1}/namespaces/ns/denied`);
    expect((await authorizer.decide(HPA, ok)).allowed).toBe(true);
    expect((await authorizer.decide(HPA, no)).allowed).toBe(false);
    tick(9_000);
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "cache" });
    expect(await authorizer.decide(HPA, no)).toMatchObject({ allowed: false, by: "cache" });
    expect(specs).toHaveLength(2);
    tick(1_500); // 10.5 s: the denial is re-reviewed, the allowance is not
    expect(await authorizer.decide(HPA, no)).toMatchObject({ allowed: false, by: "review" });
    expect(specs).toHaveLength(3);
    tick(5_000); // 15.5 s: the HPA's next read still hits, and (past half the TTL) renews the allowance in the background
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "cache" });
    await settle();
    expect(specs).toHaveLength(4);
    tick(5_000); // 20.5 s: the renewed answer is 5 s old
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "cache" });
    expect(specs).toHaveLength(4);
    tick(16_000); // 36.5 s: unread for 16 s, the renewed answer is 21 s old
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "review" });
    expect(specs).toHaveLength(5);
    // Another caller is another key.
    await authorizer.decide({ ...HPA, user: "other" }, ok);
    expect(specs).toHaveLength(6);
  });

  it("renews an allowance read past half its TTL without making the read wait, and never uses one older than the TTL", async () => {
    let now = 0;
    const pending: { spec: SubjectAccessReviewSpec; resolve(s: { allowed: boolean }): void; reject(e: Error): void }[] = [];
    let immediate = true;
    const triggers: string[] = [];
    const authorizer = new Authorizer({
      review: (spec) =>
        immediate ? Promise.resolve({ allowed: true }) : new Promise((resolve, reject) => pending.push({ spec, resolve, reject })),
      now: () => now,
      onReview: (trigger) => triggers.push(trigger),
    });
    const ok = info(`${V1}/namespaces/ns/allowed`);
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "review" });
    expect(authorizer.stats.reviews).toBe(1);
    immediate = false; // kube-apiserver now answers only when the test says so
    now = 9_999; // before half the TTL: a plain hit
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "cache" });
    expect(pending).toHaveLength(0);
    now = 10_000; // half the TTL: answered at once from the cache, the next review goes out in the background
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "cache" });
    expect(pending).toHaveLength(1);
    expect(pending[0]!.spec).toMatchObject({ user: HPA.user, resourceAttributes: { resource: "allowed", verb: "list" } });
    now = 12_000; // one renewal at a time
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "cache" });
    expect(pending).toHaveLength(1);
    // The renewal fails: nothing is stored, the old answer stays until its own TTL.
    pending.shift()!.reject(new Error("connection refused"));
    await settle();
    now = 19_000; // the next read renews again; that one never answers
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "cache" });
    expect(pending).toHaveLength(1);
    now = 20_001; // past the TTL of the only answer kube-apiserver gave: not used; the read joins the review in flight
    let answered = false;
    const late = authorizer.decide(HPA, ok).then((d) => ((answered = true), d));
    await settle();
    expect(answered).toBe(false);
    // RBAC changed: the review in flight says no, and that is what the read gets.
    pending.shift()!.resolve({ allowed: false });
    expect(await late).toMatchObject({ allowed: false, by: "cache" });
    // A denial is not renewed: after 10 s it is reviewed again, on the read.
    now = 25_000;
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: false, by: "cache" });
    expect(pending).toHaveLength(0);
    // Each review sent, by what sent it (emb_proxy_subjectaccessreviews_total{trigger}); the read at 20.001 s joined one.
    expect(triggers).toEqual(["read", "renewal", "renewal"]);
    expect(authorizer.stats).toMatchObject({ reviews: 3, renewals: 2 });
  });

  it("says how each decision was reached even when other reads are answered while it waits", async () => {
    let release!: () => void;
    let hold = false;
    const authorizer = new Authorizer({
      review: async () => {
        if (hold) await new Promise<void>((r) => (release = r));
        return { allowed: true };
      },
    });
    const ok = info(`${V1}/namespaces/ns/allowed`);
    const other = info(`${V1}/namespaces/ns/other`);
    await authorizer.decide(HPA, ok);
    hold = true;
    const waiting = authorizer.decide(HPA, other); // a review in flight
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ by: "cache" }); // answered meanwhile
    release();
    expect(await waiting).toMatchObject({ allowed: true, by: "review" });
    expect(authorizer.stats).toMatchObject({ reviews: 2, cacheHits: 1 });
  });

  it("takes its TTLs from options (the --authorization-webhook-cache-*-ttl flags)", async () => {
    const specs: SubjectAccessReviewSpec[] = [];
    let now = 0;
    const authorizer = new Authorizer({
      review: async (spec) => (specs.push(spec), { allowed: spec.resourceAttributes?.resource === "allowed" }),
      now: () => now,
      allowedTtlMs: 3_000,
      deniedTtlMs: 1_000,
    });
    const ok = info(`${V1}/namespaces/ns/allowed`);
    const no = info(`${V1}/namespaces/ns/denied`);
    await authorizer.decide(HPA, ok);
    await authorizer.decide(HPA, no);
    now += 1_400; // (before half the allowed TTL: no renewal)
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ by: "cache" });
    expect(await authorizer.decide(HPA, no)).toMatchObject({ by: "review" });
    now += 2_000;
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ by: "review" });
  });

  it("keys the cache by a hash of the spec: a 4 KB selector (the longest accepted) leaves a few hundred bytes", async () => {
    const { authorizer } = counting(() => false);
    const values = Array.from({ length: 500 }, (_, i) => `v${String(i).padStart(6, "0")}`).join(",");
    const text = `k in (${values})`;
    expect(text.length).toBeLessThanOrEqual(MAX_SELECTOR_LENGTH);
    const big = info(`${V1}/namespaces/ns/m?labelSelector=${encodeURIComponent(text)}`);
    expect(JSON.stringify(reviewSpec(HPA, big)).length).toBeGreaterThan(5_000);
    await authorizer.decide(HPA, big);
    const stats = authorizer.cacheStats().authenticated;
    expect(stats.entries).toBe(1);
    expect(stats.bytes).toBeLessThan(1_000);
    expect(await authorizer.decide(HPA, big)).toMatchObject({ by: "cache" });
  });

  it("gives up on a review at its deadline: 500, and identical requests share that one review and deadline", async () => {
    const signals: AbortSignal[] = [];
    const authorizer = new Authorizer({
      // never answers and ignores its signal: the deadline must still hold
      review: (_spec, signal) => (signals.push(signal!), new Promise(() => {})),
      timeoutMs: 100,
    });
    const i = info(`${V1}/namespaces/ns/m?labelSelector=q%3Dslow`);
    const results = await Promise.allSettled([authorizer.authorize(HPA, i), authorizer.authorize(HPA, i), authorizer.authorize(HPA, i)]);
    for (const r of results) {
      expect(r.status).toBe("rejected");
      expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 500, message: expect.stringContaining("did not answer within 100 ms") });
    }
    expect(signals).toHaveLength(1);
    expect(signals[0]!.aborted).toBe(true); // the request was told to cancel
    // Not cached: the next read reviews again.
    await authorizer.authorize(HPA, i).catch(() => {});
    expect(signals).toHaveLength(2);
  });

  it("gives uncacheable attributes the same deadline", async () => {
    const signals: AbortSignal[] = [];
    const triggers: string[] = [];
    const authorizer = new Authorizer({ review: (_spec, signal) => (signals.push(signal!), new Promise(() => {})), timeoutMs: 100, onReview: (t) => triggers.push(t) });
    const long = info(`${V1}/namespaces/ns/${"m".repeat(10_001)}`);
    await expect(authorizer.authorize(HPA, long)).rejects.toMatchObject({ code: 500 });
    expect(signals[0]!.aborted).toBe(true);
    expect(triggers).toEqual(["read"]);
    // A caller already gone: no review is sent, and none is counted.
    await expect(authorizer.authorize(HPA, long, AbortSignal.abort())).rejects.toMatchObject({ code: 500 });
    expect(signals).toHaveLength(1);
    expect(triggers).toEqual(["read"]);
  });

  it("always allows the probe paths and system:masters without a review", async () => {
    const { authorizer, specs } = counting(() => false);
    for (const path of ["/healthz", "/readyz", "/livez"]) expect(await authorizer.decide(HPA, info(path))).toMatchObject({ allowed: true, by: "path" });
    const masters = { user: "system:kube-aggregator", groups: ["system:masters"], extra: {} };
    expect(await authorizer.decide(masters, info(`${V1}/namespaces/ns/m`))).toMatchObject({ allowed: true, by: "group" });
    expect(specs).toHaveLength(0);
  });

  it("denies when a review says both allowed and denied", async () => {
    const authorizer = new Authorizer({ review: async () => ({ allowed: true, denied: true }) });
    expect((await authorizer.decide(HPA, info(V1))).allowed).toBe(false);
  });

  it("answers 500 when the review cannot be made, without caching the failure", async () => {
    let fail = true;
    const authorizer = new Authorizer({
      review: async () => {
        if (fail) throw new Error("connection refused");
        return { allowed: true };
      },
    });
    await expect(authorizer.authorize(HPA, info(V1))).rejects.toMatchObject({ code: 500 });
    fail = false;
    await expect(authorizer.authorize(HPA, info(V1))).resolves.toMatchObject({ allowed: true });
  });
});

describe("per-metric RBAC through the proxy", () => {
  let pki: Pki;
  let backend: EchoBackend;
  let h: Harness;
  const TEAM_A_SA = "system:serviceaccount:team-a:reader";

  beforeAll(async () => {
    pki = await createPki();
    backend = await startEchoBackend(["queue_messages_ready", "queue_messages_backlog"]);
    h = await startHarness({ pki, proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]], "cache: { ttlSeconds: 0 }") });
    // The example Role of infra/: team-a's reader may read only its own metric, in its namespace.
    h.fake.authorize = rbac([
      { users: [TEAM_A_SA], namespace: "team-a", verbs: ["get", "list"], apiGroups: ["external.metrics.k8s.io"], resources: ["queue_messages_ready"] },
      { groups: ["system:authenticated"], verbs: ["get"], nonResourceURLs: ["/apis", "/apis/*", V1] },
    ]);
    h.fake.tokens.set("team-a-token", { username: TEAM_A_SA, groups: ["system:serviceaccounts", "system:serviceaccounts:team-a"] });
  }, 60_000);

  afterAll(async () => {
    await h?.close();
    await backend?.close();
  });

  const asTeamA = { headers: { Authorization: "Bearer team-a-token" } };

  it("sends the SubjectAccessReview kube-apiserver would send", async () => {
    const res = await h.get(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Djobs`, asTeamA);
    expect(res.status, res.text).toBe(200);
    expect(h.fake.reviews.subjectAccessReviews.at(-1)).toEqual({
      user: TEAM_A_SA,
      groups: ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"],
      resourceAttributes: {
        namespace: "team-a",
        verb: "list",
        group: "external.metrics.k8s.io",
        version: "v1beta1",
        resource: "queue_messages_ready",
        labelSelector: { requirements: [{ key: "queue", operator: "In", values: ["jobs"] }] },
      },
    });
  });

  it("forbids another metric and another namespace with apiserver's Forbidden Status", async () => {
    const calls = backend.requests.length;
    const other = await h.get(`${V1}/namespaces/team-a/queue_messages_backlog`, asTeamA);
    expect(other.status).toBe(403);
    expect(other.json()).toMatchObject({
      kind: "Status",
      reason: "Forbidden",
      code: 403,
      message:
        'queue_messages_backlog.external.metrics.k8s.io is forbidden: User "system:serviceaccount:team-a:reader" cannot list resource "queue_messages_backlog" in API group "external.metrics.k8s.io" in the namespace "team-a": no RBAC rule matched (fake)',
      details: { group: "external.metrics.k8s.io", kind: "queue_messages_backlog" },
    });
    expect((await h.get(`${V1}/namespaces/team-b/queue_messages_ready`, asTeamA)).status).toBe(403);
    expect(backend.requests.length).toBe(calls); // denied before any backend call
  });

  it("authorizes discovery as a non-resource get", async () => {
    const res = await h.get(V1, asTeamA);
    expect(res.status, res.text).toBe(200);
    expect(h.fake.reviews.subjectAccessReviews.at(-1)).toMatchObject({ nonResourceAttributes: { path: V1, verb: "get" } });
    expect((await h.get(V1)).status).toBe(403); // anonymous: system:unauthenticated has no rule
  });

  it("lets system:masters (the aggregator's availability check) through without a review", async () => {
    const reviews = h.fake.reviews.subjectAccessReviews.length;
    const res = await h.get(V1, { cert: pki.frontProxy, headers: { "X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters" } });
    expect(res.status, res.text).toBe(200);
    expect(h.fake.reviews.subjectAccessReviews.length).toBe(reviews);
  });

  it("serves the probes without authentication or review", async () => {
    const reviews = h.fake.reviews.subjectAccessReviews.length;
    for (const path of ["/healthz", "/livez", "/readyz"]) expect((await h.get(path, { headers: { Authorization: "Bearer nope" } })).status).toBe(200);
    expect(h.fake.reviews.subjectAccessReviews.length).toBe(reviews);
  });

  it("answers 500 when SubjectAccessReviews fail", async () => {
    h.fake.failing.add("subjectaccessreviews");
    try {
      const res = await h.get(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Dfresh`, asTeamA);
      expect(res.status).toBe(500);
      expect(res.json()).toMatchObject({ kind: "Status", reason: "InternalError" });
    } finally {
      h.fake.failing.delete("subjectaccessreviews");
    }
  });

  it("answers 500 InternalError in about 2 s when kube-apiserver does not answer the review, and cancels it", async () => {
    h.fake.hanging.add("subjectaccessreviews");
    try {
      const hung = { ...h.fake.hung };
      const started = Date.now();
      const res = await h.get(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Dhanging`, asTeamA);
      const took = Date.now() - started;
      expect(res.status, res.text).toBe(500);
      expect(res.json()).toMatchObject({ kind: "Status", reason: "InternalError", code: 500 });
      expect(took).toBeGreaterThanOrEqual(SAR_TIMEOUT_MS - 50);
      expect(took).toBeLessThan(SAR_TIMEOUT_MS + 3_000); // not undici's 300 s
      expect(h.fake.hung.started - hung.started).toBe(1);
      await eventually(() => h.fake.hung.closedByClient - hung.closedByClient === 1, 3_000, "the hanging SubjectAccessReview connection to close");
    } finally {
      h.fake.hanging.delete("subjectaccessreviews");
    }
  });

  it("cancels the review when the client goes away before kube-apiserver answers", async () => {
    h.fake.hanging.add("subjectaccessreviews");
    try {
      const hung = { ...h.fake.hung };
      const req = https.get(`${h.proxy.url}${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Dleaving`, {
        ca: h.serving.caPem!,
        agent: false,
        headers: asTeamA.headers,
      });
      req.on("error", () => {});
      await eventually(() => h.fake.hung.started > hung.started, 1_500, "the review to reach the API server");
      const left = Date.now();
      req.destroy();
      // Cancelled with the client, well before the 2 s deadline would have.
      await eventually(() => h.fake.hung.closedByClient > hung.closedByClient, 1_500, "the review's connection to close");
      expect(Date.now() - left).toBeLessThan(SAR_TIMEOUT_MS);
    } finally {
      h.fake.hanging.delete("subjectaccessreviews");
    }
  });

  it("keeps 5,000 distinct anonymous requests with ~3 KB selectors within the anonymous cache's bounds, without evicting the HPA's decisions", async () => {
    expect((await h.get(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Dflood-kept`, asTeamA)).status).toBe(200);
    const reviewsBefore = h.fake.reviews.subjectAccessReviews.length;
    const authenticatedBefore = h.proxy.authorizer.cacheStats().authenticated;
    const agent = new https.Agent({ keepAlive: true, maxSockets: 8, ca: h.serving.caPem! });
    // valid selectors (label values are at most 63 characters): 50 values × 60 characters ≈ 3 KB, distinct per request
    const selectorOf = (n: number) => `k in (${Array.from({ length: 50 }, (_, i) => `${String(n).padStart(6, "0")}-${String(i).padStart(2, "0")}-${"x".repeat(50)}`).join(",")})`;
    expect(selectorOf(0).length).toBeGreaterThan(3_000);
    let next = 0;
    const statuses = new Map<number, number>();
    const worker = async () => {
      while (next < 5_000) {
        const n = next++;
        const selector = encodeURIComponent(selectorOf(n));
        const status = await new Promise<number>((resolve, reject) => {
          const req = https.get(`${h.proxy.url}${V1}/namespaces/flood/m?labelSelector=${selector}`, { agent }, (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode ?? 0));
          });
          req.on("error", reject);
        });
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    };
    try {
      await Promise.all(Array.from({ length: 8 }, worker));
    } finally {
      agent.destroy();
    }
    expect(Object.fromEntries(statuses)).toEqual({ 403: 5_000 }); // anonymous has no rule
    expect(h.fake.reviews.subjectAccessReviews.length - reviewsBefore).toBe(5_000);
    const { anonymous, authenticated } = h.proxy.authorizer.cacheStats();
    expect(anonymous.entries).toBeLessThanOrEqual(SAR_ANONYMOUS_CACHE_BOUNDS.maxEntries);
    expect(anonymous.bytes).toBeLessThanOrEqual(SAR_ANONYMOUS_CACHE_BOUNDS.maxBytes);
    // keyed by hash: far below what 5,000 × 3 KB keys would hold (~30 MB as UTF-16)
    expect(anonymous.bytes).toBeLessThan(2_000 * 1_024);
    console.log(`anonymous SAR cache after 5,000 distinct ~3 KB selectors: ${anonymous.entries} entries, ${anonymous.bytes} bytes (bound ${anonymous.maxBytes})`);
    // The authenticated callers' decisions (the HPA's) were neither evicted nor crowded: their cache is untouched.
    expect(authenticated).toEqual(authenticatedBefore);
  }, 120_000);

  it("requires authorization for /metrics", async () => {
    expect((await h.get("/metrics", asTeamA)).status).toBe(403);
    h.fake.tokens.set("prometheus", { username: "system:serviceaccount:monitoring:prometheus" });
    h.fake.authorize = rbac([{ users: ["system:serviceaccount:monitoring:prometheus"], verbs: ["get"], nonResourceURLs: ["/metrics"] }]);
    const res = await h.get("/metrics", { headers: { Authorization: "Bearer prometheus" } });
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/emb_proxy_requests_total/);
  });
});
