/**
 * The proxy's per-request memos after the issue 11 review:
 * - the Authorizer's memo of prepared requests is keyed by the request's own
 *   text (method, path + query, caller JSON), not a sha256 per read, and
 *   bounded by entries and bytes (a BoundedMap, shared/cache.ts);
 * - with the cluster policy layer on, a read's `labelSelector` is parsed
 *   once: request-info.ts parses it, the authorizer's memo keeps it, and the
 *   cluster policy layer (policies.ts, against the fake Kubernetes API)
 *   evaluates that object instead of parsing the URL again.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";

const counts = vi.hoisted(() => ({ hash: 0, parseSelector: 0 }));
vi.mock("node:crypto", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:crypto")>();
  return { ...real, hash: (...args: Parameters<typeof real.hash>) => (counts.hash++, real.hash(...args)) };
});
vi.mock("../shared/k8s/selector.ts", async (importOriginal) => {
  const real = await importOriginal<typeof import("../shared/k8s/selector.ts")>();
  return { ...real, parseSelector: (...args: Parameters<typeof real.parseSelector>) => (counts.parseSelector++, real.parseSelector(...args)) };
});

const { Authorizer, CALLER_NUMBER_BOUNDS, REQUEST_MEMO_BOUNDS } = await import("../shared/proxy/authz/authorize.ts");
const { ClusterPolicies } = await import("../shared/proxy/policy/policies.ts");
const { kubeConfigFor } = await import("../shared/proxy/kube/client.ts");
const { startFakeKubeApiServer } = await import("./fakes/kube-apiserver.ts");
type FakeKubeApiServer = Awaited<ReturnType<typeof startFakeKubeApiServer>>;
type Caller = import("../shared/identity.ts").Caller;

const HPA = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts", "system:authenticated"], extra: {} };
const V1 = "https://proxy/apis/external.metrics.k8s.io/v1beta1";
const url = (selector: string, ns = "team-a") => new URL(`${V1}/namespaces/${ns}/queue_messages_ready?labelSelector=${encodeURIComponent(selector)}`);

beforeEach(() => {
  counts.hash = 0;
  counts.parseSelector = 0;
});

describe("Authorizer memo", () => {
  it("a remembered request takes no digest (only the first read hashes, for the decision cache key)", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    await az.authorizeRequest(HPA, "GET", url("queue=a"));
    expect(counts.hash).toBe(1);
    for (let i = 0; i < 5; i++) await az.authorizeRequest(HPA, "GET", url("queue=a"));
    expect(counts.hash).toBe(1);
    expect(az.stats).toMatchObject({ reviews: 1, cacheHits: 5 });
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
    const before = counts.parseSelector;
    const again = await az.authorizeRequest(HPA, "GET", url("queue=a"), undefined, true);
    expect(again.selector).toBe(first.selector);
    expect(counts.parseSelector).toBe(before); // not parsed again
    // Nothing usable to carry: a selector that does not parse, or two of them.
    expect((await az.authorizeRequest(HPA, "GET", url("a in ("), undefined, true)).selector).toBeUndefined();
    const two = new URL(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Da&labelSelector=queue%3Db`);
    expect((await az.authorizeRequest(HPA, "GET", two, undefined, true)).selector).toBeUndefined();
    // Absent: everything.
    expect((await az.authorizeRequest(HPA, "GET", new URL(`${V1}/namespaces/team-a/queue_messages_ready`), undefined, true)).selector?.requirements).toEqual([]);
  });

  it("parses a selector once even with a fieldSelector (request-info parsed it twice)", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    await az.authorizeRequest(HPA, "GET", new URL(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Da&fieldSelector=metadata.name%3Dx`));
    expect(counts.parseSelector).toBe(1);
  });
});

describe("cluster policy layer with the authorizer's parsed selector", () => {
  let fake: FakeKubeApiServer;
  let policies: InstanceType<typeof ClusterPolicies>;
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

  it("a read's selector is parsed once for both layers, and not at all when read again", async () => {
    const az = new Authorizer({ review: async () => ({ allowed: true }) });
    const read = async (selector: string) => {
      const u = url(selector);
      const decision = await az.authorizeRequest(HPA, "GET", u, undefined, true);
      return policies.authorize({ caller: HPA, namespace: "team-a", metric: "queue_messages_ready", url: u, selector: decision.selector });
    };
    expect(await read("queue=a")).toBe("allow");
    expect(counts.parseSelector).toBe(1);
    expect(await read("queue=a")).toBe("allow");
    expect(counts.parseSelector).toBe(1);
    await expect(read("queue=b")).rejects.toMatchObject({ code: 403 });
    expect(counts.parseSelector).toBe(2);
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
