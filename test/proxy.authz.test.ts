/**
 * Proxy authorization: the attributes kube-apiserver computes
 * (RequestInfoFactory, GetAuthorizerAttributes, the webhook authorizer's
 * SubjectAccessReview), the delegated authorizer's rules (always-allowed
 * paths and group, 10 s allow/deny cache) and per-metric RBAC end to end over
 * TLS against the fake Kubernetes API.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Authorizer, reviewSpec, type SubjectAccessReviewSpec } from "../shared/proxy/authorize.ts";
import { requestInfo } from "../shared/proxy/request-info.ts";
import type { Caller } from "../shared/identity.ts";
import { rbac } from "./fakes/kube-apiserver.ts";
import { createPki, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";

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

  it("caches allow and deny answers for 10 s", async () => {
    const { authorizer, specs, tick } = counting((s) => s.resourceAttributes?.resource === "allowed");
    const ok = info(`${V1}/namespaces/ns/allowed`);
    const no = info(`${V1}/namespaces/ns/denied`);
    expect((await authorizer.decide(HPA, ok)).allowed).toBe(true);
    expect((await authorizer.decide(HPA, no)).allowed).toBe(false);
    tick(9_000);
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "cache" });
    expect(await authorizer.decide(HPA, no)).toMatchObject({ allowed: false, by: "cache" });
    expect(specs).toHaveLength(2);
    tick(1_500);
    expect(await authorizer.decide(HPA, ok)).toMatchObject({ allowed: true, by: "review" });
    expect(specs).toHaveLength(3);
    // Another caller is another key.
    await authorizer.decide({ ...HPA, user: "other" }, ok);
    expect(specs).toHaveLength(4);
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

  it("requires authorization for /metrics", async () => {
    expect((await h.get("/metrics", asTeamA)).status).toBe(403);
    h.fake.tokens.set("prometheus", { username: "system:serviceaccount:monitoring:prometheus" });
    h.fake.authorize = rbac([{ users: ["system:serviceaccount:monitoring:prometheus"], verbs: ["get"], nonResourceURLs: ["/metrics"] }]);
    const res = await h.get("/metrics", { headers: { Authorization: "Bearer prometheus" } });
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/emb_proxy_requests_total/);
  });
});
