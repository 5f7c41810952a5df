/**
 * Proxy authentication over real TLS with generated CAs, against the fake
 * Kubernetes API (ConfigMap watch, TokenReview, SubjectAccessReview): the
 * delegated chain of apiserver (front proxy → client certificate → token →
 * anonymous) with its outcomes. The identity that authentication produced is
 * observed twice: in the SubjectAccessReview the proxy sends, and in the
 * signed identity the backend verified.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Authenticator, TOKEN_CACHE_BOUNDS, TOKEN_REVIEW_TIMEOUT_MS } from "../../shared/proxy/authn/authenticate.ts";
import type { SubjectAccessReviewSpec } from "../../shared/proxy/authz/authorize.ts";
import { x509 } from "../../shared/proxy/tls/x509.ts";
import { authenticationData, createPki, eventually, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";

let seq = 0;
/**
 * A values path with a selector never used before: the SubjectAccessReview
 * cache (10 s, keyed by the attributes, selector included) cannot answer
 * it, so every request shows its identity in a fresh review.
 */
function values(): string {
  return `${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Dq${++seq}`;
}

let pki: Pki;
let backend: EchoBackend;
let h: Harness;

/** The identity of the last SubjectAccessReview (what authentication produced). */
function lastReview(): SubjectAccessReviewSpec {
  const all = h.fake.reviews.subjectAccessReviews;
  expect(all.length).toBeGreaterThan(0);
  return all.at(-1)!;
}

beforeAll(async () => {
  pki = await createPki();
  backend = await startEchoBackend(["queue_messages_ready"]);
  h = await startHarness({ pki, proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]], "cache: { ttlSeconds: 0 }") });
  h.fake.authorize = () => ({ allowed: true });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await backend?.close();
});

describe("front proxy (requestheader)", () => {
  it("trusts X-Remote-* from a front-proxy certificate: every group value, extra keys lowercased and percent-decoded", async () => {
    const res = await h.get(values(), {
      cert: pki.frontProxy,
      headers: {
        "X-Remote-User": "jane",
        "X-Remote-Uid": "uid-123",
        "X-Remote-Group": ["team-a", "b,c"],
        "X-Remote-Extra-Scopes": ["read", "write"],
        "X-Remote-Extra-Acme.com%2fTeam": "blue",
      },
    });
    expect(res.status, res.text).toBe(200);
    const expected = {
      user: "jane",
      uid: "uid-123",
      groups: ["team-a", "b,c", "system:authenticated"],
      extra: { scopes: ["read", "write"], "acme.com/team": ["blue"] },
    };
    expect(lastReview()).toMatchObject(expected);
    // The backend verified the same identity from the signed headers.
    expect(backend.callers.at(-1)).toEqual(expected);
    expect(res.json().items[0].metricLabels).toEqual({ caller: "jane" });
  });

  it("keeps extra keys that name Object.prototype members as plain data", async () => {
    const res = await h.get(values(), {
      cert: pki.frontProxy,
      headers: { "X-Remote-User": "jane", "X-Remote-Extra-Constructor": "c", "X-Remote-Extra-__proto__": "p", "X-Remote-Extra-toString": "t" },
    });
    expect(res.status, res.text).toBe(200);
    const extra = backend.callers.at(-1)!.extra;
    expect(Object.keys(extra).sort()).toEqual(["__proto__", "constructor", "tostring"]);
    expect(Object.getOwnPropertyDescriptor(extra, "__proto__")?.value).toEqual(["p"]);
    expect(Object.getOwnPropertyDescriptor(extra, "constructor")?.value).toEqual(["c"]);
  });

  it("ignores the headers on a connection without a client certificate (anonymous)", async () => {
    await h.get(values(), { headers: { "X-Remote-User": "jane", "X-Remote-Group": "system:masters" } });
    expect(lastReview()).toMatchObject({ user: "system:anonymous", groups: ["system:unauthenticated"] });
  });

  it("refuses the headers from a certificate of another CA with 401 (a failed credential is not anonymous)", async () => {
    const impostor = await pki.issue(pki.otherCA, { commonName: "front-proxy-client", usages: ["clientAuth"] });
    const before = h.fake.reviews.subjectAccessReviews.length;
    const res = await h.get(values(), { cert: impostor, headers: { "X-Remote-User": "jane" } });
    expect(res.status).toBe(401);
    expect(res.json()).toMatchObject({ kind: "Status", status: "Failure", reason: "Unauthorized", code: 401, message: "Unauthorized" });
    expect(h.fake.reviews.subjectAccessReviews.length).toBe(before);
    const logged = h.logs.find((l) => l.msg === "request" && l.code === 401);
    expect(String(logged?.["cause"])).toMatch(/unknown authority/);
  });

  it("refuses a front-proxy CA certificate whose extended key usage excludes clientAuth", async () => {
    const serverOnly = await pki.issue(pki.frontProxyCA, { commonName: "front-proxy-client", usages: ["serverAuth"] });
    const res = await h.get(values(), { cert: serverOnly, headers: { "X-Remote-User": "jane" } });
    expect(res.status).toBe(401);
  });

  it("accepts a certificate without an extended key usage extension (Go treats it as any usage)", async () => {
    const noEku = await pki.issue(pki.frontProxyCA, { commonName: "front-proxy-client" });
    const res = await h.get(values(), { cert: noEku, headers: { "X-Remote-User": "jane" } });
    expect(res.status, res.text).toBe(200);
    expect(lastReview().user).toBe("jane");
  });

  it("refuses a CN that is not in requestheader-allowed-names", async () => {
    const other = await pki.issue(pki.frontProxyCA, { commonName: "intruder", usages: ["clientAuth"] });
    const res = await h.get(values(), { cert: other, headers: { "X-Remote-User": "jane" } });
    expect(res.status).toBe(401);
  });

  it("refuses an expired front-proxy certificate", async () => {
    const expired = await pki.issue(pki.frontProxyCA, {
      commonName: "front-proxy-client",
      usages: ["clientAuth"],
      notBefore: new Date(Date.now() - 10 * 86400_000),
      validDays: 2,
    });
    const res = await h.get(values(), { cert: expired, headers: { "X-Remote-User": "jane" } });
    expect(res.status).toBe(401);
  });

  it("without a username header, falls through to client-certificate authentication (which fails for a front-proxy cert)", async () => {
    const res = await h.get(values(), { cert: pki.frontProxy, headers: { "X-Remote-Group": "system:masters" } });
    expect(res.status).toBe(401);
  });

  it("a failed certificate still lets a valid bearer token authenticate", async () => {
    h.fake.tokens.set("token-bob", { username: "bob", groups: ["devs"] });
    const impostor = await pki.issue(pki.otherCA, { commonName: "front-proxy-client", usages: ["clientAuth"] });
    const res = await h.get(values(), { cert: impostor, headers: { "X-Remote-User": "jane", Authorization: "Bearer token-bob" } });
    expect(res.status, res.text).toBe(200);
    expect(lastReview()).toMatchObject({ user: "bob", groups: ["devs", "system:authenticated"] });
  });
});

describe("client certificates (client-ca-file)", () => {
  it("authenticates CN as user and O as groups, with the certificate's credential id", async () => {
    const alice = await pki.issue(pki.clientCA, { commonName: "alice", organizations: ["team-a", "devs"], usages: ["clientAuth"] });
    const res = await h.get(values(), { cert: alice });
    expect(res.status, res.text).toBe(200);
    const der = Buffer.from(new x509.X509Certificate(alice.certPem).rawData);
    expect(lastReview()).toMatchObject({
      user: "alice",
      groups: ["team-a", "devs", "system:authenticated"],
      extra: { "authentication.kubernetes.io/credential-id": [`X509SHA256=${createHash("sha256").update(der).digest("hex")}`] },
    });
  });

  it("ignores identity headers sent with a plain client certificate", async () => {
    const alice = await pki.issue(pki.clientCA, { commonName: "alice", usages: ["clientAuth"] });
    await h.get(values(), { cert: alice, headers: { "X-Remote-User": "root", "X-Remote-Group": "system:masters" } });
    expect(lastReview()).toMatchObject({ user: "alice", groups: ["system:authenticated"] });
  });

  it("verifies a chain through an intermediate CA the client sends", async () => {
    const intermediate = await pki.issue(pki.clientCA, { commonName: "team-intermediate", isCA: true });
    const carol = await pki.issue(intermediate, { commonName: "carol", usages: ["clientAuth"] });
    const res = await h.get(values(), { cert: carol, chain: [intermediate] });
    expect(res.status, res.text).toBe(200);
    expect(lastReview().user).toBe("carol");
    // Without the intermediate the chain does not reach the pool.
    expect((await h.get(values(), { cert: carol })).status).toBe(401);
  });

  it("refuses a chain through an intermediate that is not a CA", async () => {
    const notCA = await pki.issue(pki.clientCA, { commonName: "leafy", usages: ["clientAuth"] });
    const dave = await pki.issue(notCA, { commonName: "dave", usages: ["clientAuth"] });
    expect((await h.get(values(), { cert: dave, chain: [notCA] })).status).toBe(401);
  });
});

describe("bearer tokens (TokenReview)", () => {
  it("authenticates through TokenReview and re-uses the answer for 10 s", async () => {
    h.fake.tokens.set("token-hpa", {
      username: "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
      uid: "sa-uid",
      groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system"],
      extra: { "authentication.kubernetes.io/pod-name": ["kcm-0"] },
    });
    const before = h.fake.reviews.tokenReviews.filter((t) => t === "token-hpa").length;
    for (let i = 0; i < 3; i++) {
      const res = await h.get(values(), { headers: { Authorization: "Bearer token-hpa" } });
      expect(res.status, res.text).toBe(200);
    }
    expect(h.fake.reviews.tokenReviews.filter((t) => t === "token-hpa").length - before).toBe(1);
    expect(lastReview()).toMatchObject({
      user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
      uid: "sa-uid",
      groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
      extra: { "authentication.kubernetes.io/pod-name": ["kcm-0"] },
    });
  });

  it("refuses an invalid token with 401 (not anonymous)", async () => {
    const res = await h.get(values(), { headers: { Authorization: "Bearer nope" } });
    expect(res.status).toBe(401);
  });

  it("treats a non-bearer Authorization header as no credential", async () => {
    await h.get(values(), { headers: { Authorization: "Basic YTpi" } });
    expect(lastReview().user).toBe("system:anonymous");
  });

  it("refuses a token kube-apiserver does not review within 2 s with 401, and cancels the review", async () => {
    h.fake.tokens.set("token-slow", { username: "slow" });
    h.fake.hanging.add("tokenreviews");
    try {
      const hung = { ...h.fake.hung };
      const started = Date.now();
      // two identical requests share one review and its deadline
      const [a, b] = await Promise.all([
        h.get(values(), { headers: { Authorization: "Bearer token-slow" } }),
        h.get(values(), { headers: { Authorization: "Bearer token-slow" } }),
      ]);
      const took = Date.now() - started;
      expect(a.status, a.text).toBe(401);
      expect(b.status, b.text).toBe(401);
      expect(a.json()).toMatchObject({ kind: "Status", reason: "Unauthorized", code: 401 });
      expect(took).toBeGreaterThanOrEqual(TOKEN_REVIEW_TIMEOUT_MS - 50);
      expect(took).toBeLessThan(TOKEN_REVIEW_TIMEOUT_MS + 3_000); // not undici's 300 s
      expect(h.fake.hung.started - hung.started).toBe(1);
      await eventually(() => h.fake.hung.closedByClient - hung.closedByClient === 1, 3_000, "the hanging TokenReview connection to close");
    } finally {
      h.fake.hanging.delete("tokenreviews");
    }
    // The failure is not cached: the token works as soon as kube-apiserver answers.
    expect((await h.get(values(), { headers: { Authorization: "Bearer token-slow" } })).status).toBe(200);
  });

  it("keys the token cache by the token's hash and bounds it by entries and bytes", async () => {
    const long = `t${"x".repeat(20_000)}`;
    h.fake.tokens.set(long, { username: "long-token-user" });
    const before = h.proxy.authenticator.tokenCacheStats();
    expect((await h.get(values(), { headers: { Authorization: `Bearer ${long}` } })).status).toBe(200);
    const after = h.proxy.authenticator.tokenCacheStats();
    expect(after.entries - before.entries).toBe(1);
    expect(after.bytes - before.bytes).toBeLessThan(1_000); // not the 40 KB of the token as a key
    expect(after.maxEntries).toBe(TOKEN_CACHE_BOUNDS.maxEntries);
    expect(after.maxBytes).toBe(TOKEN_CACHE_BOUNDS.maxBytes);
  });
});

describe("following the ConfigMap", () => {
  it("applies a rotated front-proxy CA and a changed allowed-names list", async () => {
    const newCA = await pki.issue(pki.frontProxyCA, { commonName: "unused" }); // keep a reference to the old pool
    void newCA;
    const rotated = await createPki();
    h.fake.setConfigMap("kube-system", "extension-apiserver-authentication", authenticationData({ ...pki, frontProxyCA: rotated.frontProxyCA }));
    await eventually(async () => (await h.get(values(), { cert: pki.frontProxy, headers: { "X-Remote-User": "jane" } })).status === 401, 10_000, "old front proxy refused");
    const fresh = await pki.issue(rotated.frontProxyCA, { commonName: "front-proxy-client", usages: ["clientAuth"] });
    expect((await h.get(values(), { cert: fresh, headers: { "X-Remote-User": "jane" } })).status).toBe(200);
    expect(lastReview().user).toBe("jane");

    // An empty allowed-names list accepts any verified CN.
    h.fake.setConfigMap(
      "kube-system",
      "extension-apiserver-authentication",
      authenticationData({ ...pki, frontProxyCA: rotated.frontProxyCA }, { "requestheader-allowed-names": "" }),
    );
    const anyName = await pki.issue(rotated.frontProxyCA, { commonName: "aggregator-2", usages: ["clientAuth"] });
    await eventually(async () => (await h.get(values(), { cert: anyName, headers: { "X-Remote-User": "kim" } })).status === 200, 10_000, "any CN accepted");
    expect(lastReview().user).toBe("kim");
  });

  it("turns certificate authentication off when the ConfigMap is deleted (fail closed)", async () => {
    h.fake.deleteConfigMap("kube-system", "extension-apiserver-authentication");
    const alice = await pki.issue(pki.clientCA, { commonName: "alice", usages: ["clientAuth"] });
    await eventually(
      async () => {
        await h.get(values(), { cert: alice });
        return lastReview().user === "system:anonymous";
      },
      10_000,
      "certificates ignored",
    );
    h.fake.setConfigMap("kube-system", "extension-apiserver-authentication", authenticationData(pki));
    await eventually(
      async () => {
        await h.get(values(), { cert: alice });
        return lastReview().user === "alice";
      },
      10_000,
      "certificates honoured again",
    );
  });

  it("answers 503 while the ConfigMap has not been read", async () => {
    const auth = new Authenticator({ config: { current: () => undefined, stop: async () => {} } });
    await expect(auth.authenticate({ rawHeaders: [] })).rejects.toMatchObject({ code: 503 });
  });
});
