/**
 * The proxy's per-request shortcuts keep behaviour and stay bounded:
 * the Authorizer's memo of prepared requests (attributes, review spec and
 * cache key per caller, method and target) holds no decision — an allowed
 * answer still expires after its TTL and a new SubjectAccessReview is sent —
 * and is bounded by entries and bytes; the Forwarder's route memo answers
 * as the routes do and is bounded (least recently used dropped first); every kind of answer the app builds
 * (values, discovery, Status errors of intake, authentication,
 * authorization and routing, probes, /metrics) carries X-Request-Id, from
 * one plain header object.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkRequestSize, MAX_REQUEST_TARGET_BYTES, MAX_SELECTOR_LENGTH } from "../../shared/proxy/app.ts";
import { Authorizer, REQUEST_MEMO_BOUNDS, requestMemoEntryBytes, type SubjectAccessReviewSpec } from "../../shared/proxy/authz/authorize.ts";
import type { Backend } from "../../shared/proxy/forward/backend-contract.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { Forwarder, ROUTE_MEMO_BOUNDS } from "../../shared/proxy/forward/forward.ts";
import { createMetrics } from "../../shared/proxy/metrics.ts";
import { createPki, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";
import { EXTERNAL_METRICS_API } from "../../shared/values/request.ts";

const caller = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts", "system:authenticated"], extra: {} };
const url = (i: number | string) => new URL(`https://proxy/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Dq${i}`);

describe("Authorizer.authorizeRequest", () => {
  it("sends the same review as authorize(), re-uses it within the TTL and reviews again after it (the memo holds no decision)", async () => {
    let now = 1_000_000;
    const reviews: SubjectAccessReviewSpec[] = [];
    const az = new Authorizer({ review: async (spec) => (reviews.push(spec), { allowed: true }), now: () => now, allowedTtlMs: 20_000 });
    await az.authorizeRequest(caller, "GET", url(1));
    await az.authorizeRequest(caller, "GET", url(1));
    expect(reviews).toHaveLength(1);
    expect(reviews[0]).toMatchObject({
      user: caller.user,
      resourceAttributes: { namespace: "team-a", verb: "list", group: "external.metrics.k8s.io", resource: "queue_messages_ready", labelSelector: { requirements: [{ key: "queue", operator: "In", values: ["q1"] }] } },
    });
    now += 20_001;
    await az.authorizeRequest(caller, "GET", url(1));
    expect(reviews).toHaveLength(2);
  });

  it("denies with apiserver's message for another caller of the same target (the caller is part of the memo key)", async () => {
    const az = new Authorizer({ review: async (spec) => ({ allowed: spec.user === caller.user }) });
    await az.authorizeRequest(caller, "GET", url(2));
    await expect(az.authorizeRequest({ ...caller, user: "mallory" }, "GET", url(2))).rejects.toMatchObject({ code: 403, message: expect.stringContaining('User "mallory" cannot list resource "queue_messages_ready"') });
  });

  it("keeps the memo within its entry bound", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    for (let i = 0; i < REQUEST_MEMO_BOUNDS.maxEntries + 50; i++) await az.authorizeRequest(caller, "GET", url(i));
    const stats = az.requestMemoStats();
    expect(stats.entries).toBe(REQUEST_MEMO_BOUNDS.maxEntries);
    expect(stats.bytes).toBeLessThanOrEqual(REQUEST_MEMO_BOUNDS.maxBytes);
  });

  it("keeps the memo within its byte bound with long targets: an entry counts its key's text (the request itself, not a digest)", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    const long = "x".repeat(4000);
    for (let i = 0; i < 2_000; i++) await az.authorizeRequest(caller, "GET", url(`${i}${long}`));
    const stats = az.requestMemoStats();
    expect(stats.bytes).toBeLessThanOrEqual(REQUEST_MEMO_BOUNDS.maxBytes);
    expect(stats.entries).toBeLessThan(2_000);
    // As many HPA series (short selectors) as the entry bound fit within the bytes.
    const hpaKey = `12345\u0000GET\u0000${url(12345).pathname}${url(12345).search}`;
    expect(REQUEST_MEMO_BOUNDS.maxEntries * requestMemoEntryBytes(hpaKey, {})).toBeLessThanOrEqual(REQUEST_MEMO_BOUNDS.maxBytes);
  });
});

describe("Forwarder route memo", () => {
  const config = loadProxyConfig(
    `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  a: { url: "http://127.0.0.1:1" }
  k: { url: "http://127.0.0.1:2", type: passthrough }
routes:
  - { metric: "queue_.*", backend: a }
passthrough: k
cache: { ttlSeconds: 0 }
`,
    "proxy.yaml",
  );
  const backend = (name: string, seen: string[]): Backend => ({
    name,
    config: config.backends.find((b) => b.name === name)!,
    timeoutMs: 1000,
    get: async (r) => {
      seen.push(`${name} ${r.pathAndQuery}`);
      return { status: 404, headers: {}, body: Buffer.from(JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", message: "no", code: 404 })) };
    },
    close: () => {},
  });

  it("routes as the patterns do, remembered per metric and bounded", async () => {
    const seen: string[] = [];
    const f = new Forwarder({ config, clients: new Map([["a", backend("a", seen)], ["k", backend("k", seen)]]), metrics: createMetrics(false), log: () => {} });
    const read = (metric: string) => f.values({ caller, requestId: "r", pathAndQuery: `/m/${metric}`, parts: { api: EXTERNAL_METRICS_API, namespace: "ns", metric, labelSelector: "" } }, { key: metric, requested: metric }).catch(() => undefined);
    for (let i = 0; i < 2; i++) {
      await read("queue_depth");
      await read("other_thing");
    }
    expect(seen).toEqual(["a /m/queue_depth", "k /m/other_thing", "a /m/queue_depth", "k /m/other_thing"]);
    for (let i = 0; i < ROUTE_MEMO_BOUNDS.maxEntries + 10; i++) await read(`queue_${i}`);
    expect(f.routeMemo.entries).toBe(ROUTE_MEMO_BOUNDS.maxEntries); // least recently used dropped one by one, not cleared when full
    expect(f.routeMemo.bytes).toBeLessThanOrEqual(ROUTE_MEMO_BOUNDS.maxBytes);
    expect(seen.at(-1)).toBe(`a /m/queue_${ROUTE_MEMO_BOUNDS.maxEntries + 9}`);
  });
});

describe("real proxy over TLS: X-Request-Id on every answer, cache sizes at /metrics", () => {
  let pki: Pki;
  let backend: EchoBackend;
  let h: Harness;
  beforeAll(async () => {
    [pki, backend] = await Promise.all([createPki(), startEchoBackend(["queue_messages_ready"])]);
    h = await startHarness({ pki, proxyConfig: proxyConfigText({ echo: backend.url }, [["queue_.*", "echo"]]) });
    h.fake.authorize = (spec) => ({ allowed: spec.user !== "mallory" });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await backend?.close();
  });

  const as = (user: string, extra: Record<string, string> = {}) => ({ cert: pki.frontProxy, headers: { "X-Remote-User": user, ...extra } });
  const NS = `${V1}/namespaces/default`;

  it("exports the size of each bounded cache at /metrics (entries and the bytes counted against its bound)", async () => {
    for (let i = 0; i < 5; i++) expect((await h.get(`${NS}/queue_messages_ready?labelSelector=queue%3Dsized${i}`, as("jane"))).status).toBe(200);
    const text = (await h.get("/metrics", as("jane"))).text;
    const read = (name: string) =>
      Object.fromEntries([...text.matchAll(new RegExp(`^emb_proxy_${name}\\{cache="([a-z-]+)"\\} (\\d+)$`, "gm"))].map((m) => [m[1]!, Number(m[2])]));
    const entries = read("cache_entries");
    const bytes = read("cache_bytes");
    const values = h.proxy.forwarder.valuesCache;
    expect(entries["values"]).toBe(values.size);
    expect(bytes["values"]).toBe(values.bytes);
    expect(entries["values"]).toBeGreaterThanOrEqual(5);
    expect(entries["request-memo"]).toBe(h.proxy.authorizer.requestMemoStats().entries);
    expect(entries["authorization"]).toBe(h.proxy.authorizer.cacheStats().authenticated.entries);
    expect(Object.keys(entries).sort()).toEqual(["authorization", "authorization-anonymous", "request-memo", "route-memo", "token-review", "values"]);
    expect(Object.keys(bytes).sort()).toEqual(Object.keys(entries).sort());
  });

  it("echoes an offered id (X-Request-Id, else Audit-Id) and makes one otherwise, on each kind of answer", async () => {
    const cases: [string, Parameters<Harness["get"]>[1], number][] = [
      [`${NS}/queue_messages_ready?labelSelector=queue%3Da`, as("jane"), 200],
      [V1, as("jane"), 200],
      ["/apis", as("jane"), 200],
      [`${NS}/queue_messages_ready?labelSelector=a&labelSelector=b`, as("jane"), 400],
      [`${NS}/queue_messages_ready`, { headers: { Authorization: "Bearer nope" } }, 401],
      [`${NS}/queue_messages_ready`, as("mallory"), 403],
      [`${NS}/unrouted_metric`, as("jane"), 404],
      ["/healthz", {}, 200],
      ["/readyz", {}, 200],
      ["/metrics", as("jane"), 200],
    ];
    for (const [path, options, code] of cases) {
      const offered = `rid-${code}-${path.length}`;
      const withId = await h.get(path, { ...options, headers: { ...options?.headers, "X-Request-Id": offered } });
      expect(withId.status, `${path}: ${withId.text}`).toBe(code);
      expect(withId.headers["x-request-id"], path).toBe(offered);
      const audit = await h.get(path, { ...options, headers: { ...options?.headers, "Audit-Id": `${offered}-audit` } });
      expect(audit.headers["x-request-id"], path).toBe(`${offered}-audit`);
      const none = await h.get(path, options);
      expect(none.headers["x-request-id"], path).toMatch(/^[0-9a-f-]{36}$/);
      expect(none.headers["content-type"], path).toBeDefined();
    }
  });
});

describe("checkRequestSize's shortcut for the HPA's one-selector query", () => {
  /** The rule without the shortcut: every selector parsed. */
  const reference = (target: string): string | undefined => {
    if (Buffer.byteLength(target) > MAX_REQUEST_TARGET_BYTES) return "too long";
    const q = target.indexOf("?");
    if (q < 0) return undefined;
    const selectors = new URLSearchParams(target.slice(q + 1)).getAll("labelSelector");
    if (selectors.length > 1) return "more than one";
    return (selectors[0]?.length ?? 0) > MAX_SELECTOR_LENGTH ? "too long" : undefined;
  };
  const outcome = (target: string) => {
    try {
      checkRequestSize(target);
      return undefined;
    } catch (err) {
      return (err as Error).message.includes("only once") ? "more than one" : "too long";
    }
  };

  it("decides as the full parse does, at and around the length limit and for other query shapes", () => {
    const p = "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/m";
    const targets = [
      `${p}?labelSelector=${"a".repeat(MAX_SELECTOR_LENGTH)}`,
      `${p}?labelSelector=${"a".repeat(MAX_SELECTOR_LENGTH + 1)}`,
      `${p}?labelSelector=${"%41".repeat(MAX_SELECTOR_LENGTH)}`,
      `${p}?labelSelector=${"%41".repeat(MAX_SELECTOR_LENGTH + 1)}`,
      `${p}?labelSelector=${"%C3%A9".repeat(MAX_SELECTOR_LENGTH)}`,
      `${p}?labelSelector=${"%C3%A9".repeat(2000)}`,
      `${p}?labelSelector=a&labelSelector=b`,
      `${p}?label%53elector=a&labelSelector=b`,
      `${p}?labelSelector=a&x=1`,
      `${p}?x=1&labelSelector=${"a".repeat(MAX_SELECTOR_LENGTH + 1)}`,
      `${p}?labelSelector`,
      `${p}?labelSelector=`,
      `${p}?`,
      p,
    ];
    for (const t of targets) expect(outcome(t), t.slice(0, 120)).toBe(reference(t));
  });
});
