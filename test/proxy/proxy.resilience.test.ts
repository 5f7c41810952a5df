/**
 * The proxy's short cache and coalescing (keyed per caller, after
 * authorization), backend failures (timeouts, refused signatures, malformed
 * or empty answers), graceful shutdown, APIService self-registration, the
 * shared serving-certificate Secret, /metrics, JSON logs with the request id
 * carried to the backend, and config validation.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { kubeConfigFor, type KubeClient } from "../../shared/proxy/kube/client.ts";
import { clusterPolicySettings } from "../../shared/proxy/server.ts";
import { loadServingMaterial } from "../../shared/proxy/tls/tls.ts";
import { certificatesFromPem } from "../../shared/proxy/tls/certs.ts";
import { x509 } from "../../shared/proxy/tls/x509.ts";
import { ConfigError } from "../../shared/config/yaml.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { call, createPki, eventually, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";
import { fixtureKey } from "../helpers/keys.ts";

const NS = `${V1}/namespaces/default`;
let pki: Pki;
let fake: FakeKubeApiServer;

beforeAll(async () => {
  [pki, fake] = await Promise.all([createPki(), startFakeKubeApiServer()]);
  fake.authorize = (spec) => ({ allowed: spec.user !== "mallory" });
  fake.tokens.set("alice", { username: "alice" });
  fake.tokens.set("bob", { username: "bob" });
  fake.tokens.set("mallory", { username: "mallory" });
}, 60_000);

afterAll(async () => {
  await fake?.close();
});

const as = (token: string) => ({ headers: { Authorization: `Bearer ${token}` } });

describe("cache and coalescing", () => {
  let backend: EchoBackend;
  let h: Harness;
  let clockOffset = 0;

  beforeAll(async () => {
    backend = await startEchoBackend(["m"]);
    h = await startHarness({
      pki,
      fake,
      proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]], "cache: { ttlSeconds: 2 }"),
      extra: { now: () => Date.now() + clockOffset },
    });
  }, 60_000);

  afterAll(async () => {
    await h?.close();
    await backend?.close();
  });

  it("shares one backend call among identical concurrent reads of a caller, then re-uses it within the TTL", async () => {
    backend.delayMs = 1000;
    const path = `${NS}/m?labelSelector=q%3D1`;
    const before = backend.requests.length;
    const answers = await Promise.all(Array.from({ length: 5 }, () => h.get(path, as("alice"))));
    backend.delayMs = 0;
    for (const a of answers) expect(a.status, a.text).toBe(200);
    expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    expect(backend.requests.length - before).toBe(1);
    expect((await h.get(path, as("alice"))).status).toBe(200);
    expect(backend.requests.length - before).toBe(1); // hit
    clockOffset += 2_500; // past the 2 s TTL
    expect((await h.get(path, as("alice"))).status).toBe(200);
    expect(backend.requests.length - before).toBe(2);
    const metric = await h.proxy.metrics.registry.getSingleMetric("emb_proxy_cache_requests_total")!.get();
    const count = (result: string) => metric.values.find((v) => v.labels["result"] === result)?.value ?? 0;
    expect(count("miss")).toBe(2);
    expect(count("coalesced")).toBeGreaterThanOrEqual(1); // on a loaded machine a late request may be a hit instead
    expect(count("coalesced") + count("hit")).toBe(5);
  });

  it("keys the cache by caller: each caller gets an answer made for it", async () => {
    const path = `${NS}/m?labelSelector=q%3D2`;
    const before = backend.requests.length;
    backend.delayMs = 100;
    const [alice, bob] = await Promise.all([h.get(path, as("alice")), h.get(path, as("bob"))]);
    backend.delayMs = 0;
    expect(backend.requests.length - before).toBe(2);
    expect(alice.json().items[0].metricLabels).toEqual({ caller: "alice" });
    expect(bob.json().items[0].metricLabels).toEqual({ caller: "bob" });
  });

  it("authorizes before the cache: a denied caller never receives a cached answer", async () => {
    const path = `${NS}/m?labelSelector=q%3D3`;
    expect((await h.get(path, as("alice"))).status).toBe(200);
    const before = backend.requests.length;
    const res = await h.get(path, as("mallory"));
    expect(res.status).toBe(403);
    expect(res.text).not.toContain("42");
    expect(backend.requests.length).toBe(before);
  });

  it("keeps a failure for the backend's back-off (no Retry-After to the caller), then asks again", async () => {
    let failures = 1;
    backend.answer = () =>
      failures-- > 0
        ? [503, JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "SQS throttled", reason: "ServiceUnavailable", code: 503, details: { retryAfterSeconds: 7 } })]
        : undefined;
    try {
      const path = `${NS}/m?labelSelector=q%3D4`;
      const before = backend.requests.length;
      const first = await h.get(path, as("alice"));
      expect(first.status).toBe(503);
      expect(first.headers["retry-after"]).toBeUndefined();
      expect(first.json()).toMatchObject({ message: "SQS throttled", details: { retryAfterSeconds: 7 } });
      const second = await h.get(path, as("alice"));
      expect(second.status).toBe(503); // the stored failure: the backend is not asked within its 7 s back-off
      expect(backend.requests.length - before).toBe(1);
      clockOffset += 7_500;
      const third = await h.get(path, as("alice"));
      expect(third.status).toBe(200);
      expect(backend.requests.length - before).toBe(2);
    } finally {
      backend.answer = undefined;
    }
  });
});

describe("backend failures", () => {
  let backend: EchoBackend;
  let h: Harness;

  beforeAll(async () => {
    backend = await startEchoBackend(["m"]);
    h = await startHarness({
      pki,
      fake,
      proxyConfig: `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  echo: { url: "${backend.url}", timeoutSeconds: 0.5 }
routes: [{ metric: ".*", backend: echo }]
cache: { ttlSeconds: 0 }
`,
    });
  }, 60_000);

  afterAll(async () => {
    await h?.close();
    await backend?.close();
  });

  it("answers 503 without Retry-After when the backend does not answer within its timeout", async () => {
    backend.delayMs = 4000;
    // Ordering, not a wall-clock budget: the answer must come before the backend's would have.
    let backendAnswered = false;
    const backendAnswer = setTimeout(() => (backendAnswered = true), backend.delayMs);
    const res = await h.get(`${NS}/m`, as("alice"));
    clearTimeout(backendAnswer);
    backend.delayMs = 0;
    expect(backendAnswered, "the proxy waited for the backend instead of its own 500 ms timeout").toBe(false);
    expect(res.status).toBe(503);
    expect(res.headers["retry-after"]).toBeUndefined(); // one attempt for client-go
    expect(res.json().message).toMatch(/backend echo did not answer within 500 ms/);
  });

  it.each([
    ["a non-Status error page", 502, "<html>Bad gateway</html>", /answered HTTP 502 without a metav1.Status/],
    ["a 200 with no items", 200, JSON.stringify({ kind: "ExternalMetricValueList", apiVersion: "external.metrics.k8s.io/v1beta1", metadata: {}, items: [] }), /no items/],
    ["a 200 that is not a value list", 200, "{}", /without an ExternalMetricValueList/],
  ])("answers 503 for %s (a failed or empty read is never a value)", async (what, code, body, message) => {
    backend.answer = (path) => (path === V1 ? undefined : [code, body]);
    try {
      // A series of its own: a failed read of a series is kept 1 s as back-off.
      const res = await h.get(`${NS}/m?labelSelector=${encodeURIComponent(`case=${what.replace(/[^a-z0-9]/gi, "")}`)}`, as("alice"));
      expect(res.status).toBe(503);
      expect(res.json()).toMatchObject({ kind: "Status", reason: "ServiceUnavailable" });
      expect(res.json().message).toMatch(message);
    } finally {
      backend.answer = undefined;
    }
  });

  it("answers 500 (not the caller's 401) when a bridge refuses the proxy's signature", async () => {
    const strangers = `k9:${fixtureKey(99).toString("base64")}`;
    const h2 = await startHarness({ pki, fake, keys: strangers, proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]]) });
    try {
      const res = await h2.get(`${NS}/m`, as("alice"));
      expect(res.status).toBe(500);
      expect(res.json().message).toMatch(/refused the proxy's request signature.*unknown key id "k9".*BRIDGE_SIGNING_KEYS/);
    } finally {
      await h2.close();
    }
  });
});

describe("graceful shutdown", () => {
  it("turns unready, lets in-flight requests finish, then refuses new connections", async () => {
    const backend = await startEchoBackend(["m"]);
    const h = await startHarness({
      pki,
      fake,
      proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]]),
      extra: { shutdownDelayMs: 300, drainTimeoutMs: 5000 },
    });
    try {
      backend.delayMs = 900;
      const inflight = h.get(`${NS}/m`, as("alice"));
      await eventually(() => backend.requests.length > 0, 2000, "the request reached the backend");
      const closing = h.proxy.close();
      const ready = await h.get("/readyz");
      expect(ready.status).toBe(503);
      expect(ready.text).toMatch(/shutting down/);
      const res = await inflight;
      expect(res.status, res.text).toBe(200);
      await closing;
      await expect(h.get("/healthz")).rejects.toMatchObject({ code: "ECONNREFUSED" });
    } finally {
      await h.close();
      await backend.close();
    }
  });
});

describe("APIService self-registration", () => {
  it("registers once the proxy itself is ready, even while no backend answers, with a caBundle that verifies the serving certificate, and takes over an existing APIService", async () => {
    const backend = await startEchoBackend(["m"]);
    await backend.close(); // not answering yet
    const own = await startFakeKubeApiServer();
    const h = await startHarness({
      pki,
      fake: own,
      register: true,
      proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]], "discovery: { ttlSeconds: 0 }"),
      extra: { readinessIntervalMs: 100_000 },
    });
    const live = await startEchoBackend(["m"]);
    try {
      // Readiness and registration are the proxy's own state: discovery is
      // served from what the proxy holds, so a backend outage cannot make the
      // APIService unavailable.
      expect(h.proxy.notReady()).toEqual([]);
      expect((await h.get("/readyz")).status).toBe(200);
      expect(own.apiServiceWrites).toEqual([{ method: "POST", name: "v1beta1.external.metrics.k8s.io" }]);
      await h.close();
      own.apiServices.clear();
      own.apiServiceWrites.length = 0;

      // Now with a backend that answers (and a short re-assert interval).
      const h2 = await startHarness({
        pki,
        fake: own,
        register: true,
        proxyConfig: proxyConfigText({ echo: live.url }, [[".*", "echo"]]),
      });
      try {
        const api = own.apiServices.get("v1beta1.external.metrics.k8s.io") as { spec: Record<string, unknown> } | undefined;
        expect(api?.spec).toEqual({
          group: "external.metrics.k8s.io",
          version: "v1beta1",
          service: { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy", port: 443 },
          caBundle: Buffer.from(h2.serving.caPem!).toString("base64"),
          insecureSkipTLSVerify: false,
          groupPriorityMinimum: 100,
          versionPriority: 100,
        });
        // The aggregator's view: TLS to the proxy trusting only the caBundle.
        const caFromApiService = Buffer.from(api!.spec["caBundle"] as string, "base64").toString("utf8");
        const res = await call(`${h2.proxy.url}/healthz`, caFromApiService);
        expect(res.status).toBe(200);
        // The serving certificate names the Service as the aggregator dials it.
        const leaf = certificatesFromPem(h2.serving.certPem)[0]!;
        const san = leaf.getExtension(x509.SubjectAlternativeNameExtension)!;
        expect(san.names.items.map((n) => n.value)).toContain("external-metrics-bridge-proxy.external-metrics-bridge.svc");
        expect(own.apiServiceWrites).toEqual([{ method: "POST", name: "v1beta1.external.metrics.k8s.io" }]);
      } finally {
        await h2.close();
      }

      // Someone else's APIService for the group (an adapter registered before): taken over, metadata kept.
      own.apiServices.set("v1beta1.external.metrics.k8s.io", {
        apiVersion: "apiregistration.k8s.io/v1",
        kind: "APIService",
        metadata: { name: "v1beta1.external.metrics.k8s.io", resourceVersion: "5", labels: { owner: "keda" } },
        spec: { group: "external.metrics.k8s.io", version: "v1beta1", service: { namespace: "keda", name: "keda-operator-metrics-apiserver", port: 443 }, caBundle: "eA==", groupPriorityMinimum: 100, versionPriority: 100 },
      });
      const h4 = await startHarness({ pki, fake: own, register: true, proxyConfig: proxyConfigText({ echo: live.url }, [[".*", "echo"]]) });
      try {
        const api = own.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { metadata: { labels: Record<string, string> }; spec: { service: { name: string } } };
        expect(api.spec.service.name).toBe("external-metrics-bridge-proxy");
        expect(api.metadata.labels).toEqual({ owner: "keda" });
        expect(own.apiServiceWrites.at(-1)).toEqual({ method: "PUT", name: "v1beta1.external.metrics.k8s.io" });
      } finally {
        await h4.close();
      }
    } finally {
      await live.close();
      await own.close();
    }
  });

  it("re-asserts the registration when someone changes it", async () => {
    const live = await startEchoBackend(["m"]);
    const own = await startFakeKubeApiServer();
    const kc = kubeConfigFor(own.url, own.caPem, own.token);
    const h = await startHarness({
      pki,
      fake: own,
      proxyConfig: proxyConfigText({ echo: live.url }, [[".*", "echo"]]),
      extra: {
        registration: { kc, target: { service: { namespace: "emb", name: "proxy", port: 443 } }, intervalMs: 100 },
      },
    });
    try {
      const api = own.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string } };
      const good = api.spec.caBundle;
      own.apiServices.set("v1beta1.external.metrics.k8s.io", { ...(api as object), spec: { ...api.spec, caBundle: "" } } as never);
      await eventually(() => (own.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string } }).spec.caBundle === good, 3000, "caBundle restored");
    } finally {
      await h.close();
      await live.close();
      await own.close();
    }
  });
});

describe("serving certificate Secret shared by replicas", () => {
  it("the first replica creates it, the next reads the same one; a certificate for another Service is replaced", async () => {
    const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
    const source = { kind: "secret" as const, namespace: "emb", name: "proxy-tls" };
    const service = { namespace: "emb", name: "proxy" };
    const [one, two] = await Promise.all([
      loadServingMaterial(source, service, { kc, log: () => {} }),
      loadServingMaterial(source, service, { kc, log: () => {} }),
    ]);
    expect(two).toEqual(one);
    const secret = fake.getSecret("emb", "proxy-tls") as unknown as { type: string; data: Record<string, string> };
    expect(secret.type).toBe("kubernetes.io/tls");
    expect(Object.keys(secret.data).sort()).toEqual(["ca.crt", "ca.key", "tls.crt", "tls.key"]); // ca.key: the writer renews from the same CA (rotation.ts)
    const three = await loadServingMaterial(source, service, { kc, log: () => {} });
    expect(three).toEqual(one);
    const moved = await loadServingMaterial(source, { namespace: "emb", name: "renamed" }, { kc, log: () => {} });
    expect(moved.certPem).not.toEqual(one.certPem);
    const leaf = certificatesFromPem(moved.certPem)[0]!;
    expect(leaf.getExtension(x509.SubjectAlternativeNameExtension)!.names.items.map((n) => n.value)).toContain("renamed.emb.svc");
  });
});

describe("observability", () => {
  it("exposes request, backend, cache, authentication and authorization metrics; logs JSON with the request id the backend received", async () => {
    const backend = await startEchoBackend(["queue_messages_ready"]);
    const h = await startHarness({ pki, fake, proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]]) });
    try {
      expect((await h.get(V1, as("alice"))).status).toBe(200); // discovery: learns the metric names
      const res = await h.get(`${NS}/queue_messages_ready`, { headers: { Authorization: "Bearer alice", "X-Request-Id": "req-from-client-1" } });
      expect(res.status).toBe(200);
      expect(res.headers["x-request-id"]).toBe("req-from-client-1");
      expect(backend.requests.at(-1)!.requestId).toBe("req-from-client-1");
      const bad = await h.get(`${NS}/random_${crypto.randomUUID().slice(0, 8)}`, { headers: { Authorization: "Bearer alice", "X-Request-Id": "bad id\twith tab" } });
      expect(bad.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
      expect((await h.get(`${NS}/m`, as("mallory"))).status).toBe(403);

      const text = await h.proxy.metrics.registry.metrics();
      expect(text).toMatch(/emb_proxy_requests_total\{code="200",kind="values",metric="queue_messages_ready"\} 1/);
      expect(text).toMatch(/emb_proxy_requests_total\{code="200",kind="values",metric="other"\} 1/); // unknown names are bounded
      expect(text).toMatch(/emb_proxy_requests_total\{code="403",kind="other",metric=""\} 1/);
      expect(text).toMatch(/emb_proxy_backend_requests_total\{backend="echo",code="200"\}/);
      expect(text).toMatch(/emb_proxy_request_duration_seconds_bucket\{le="0.5",kind="values"\}/);
      expect(text).toMatch(/emb_proxy_cache_requests_total\{result="miss"\}/);
      expect(text).toMatch(/emb_proxy_denials_total\{source="rbac"\} 1/);
      expect(text).toMatch(/emb_proxy_authentications_total\{method="token"\}/);
      expect(text).toMatch(/emb_proxy_authorization_decisions_total\{by="review",decision="allow"\}/);
      // Every read above waited for its own review (distinct requests, nothing renewed yet).
      expect(text).toMatch(/emb_proxy_subjectaccessreviews_total\{trigger="read"\} [1-9]/);
      expect(text).not.toMatch(/emb_proxy_subjectaccessreviews_total\{trigger="renewal"\}/);
      expect(text).toMatch(/emb_proxy_ready 1/);

      const line = h.logs.find((l) => l.msg === "request" && l["requestId"] === "req-from-client-1");
      expect(line).toMatchObject({ level: "info", method: "GET", code: 200, user: "alice", authn: "token", metric: "queue_messages_ready", backend: "echo", cache: "miss" });
      expect(typeof line!["durationMs"]).toBe("number");
      expect(() => JSON.stringify(line)).not.toThrow();
    } finally {
      await h.close();
      await backend.close();
    }
  });
});

describe("config", () => {
  const head = "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ProxyConfig\n";
  function issues(text: string) {
    try {
      loadProxyConfig(text, "proxy.yaml");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).issues.map((i) => `${i.line}:${i.path}: ${i.message}`);
    }
    throw new Error("accepted");
  }

  it("names every problem with its line and field", () => {
    expect(
      issues(`${head}backends:
  a: { url: "https://a.example", timeoutSeconds: 5 }
  k: { url: "https://k.example", type: passthrough }
routes:
  - { metric: "queue_(", backend: a }
  - { metric: "x", backend: nope }
passthrough: a
`),
    ).toEqual([`4:backends.a.timeoutSeconds: Too big: expected number to be <=4.5`]);
    expect(
      issues(`${head}backends:
  a: { url: "https://a.example" }
routes:
  - { metric: "queue_(", backend: a }
  - { metric: "x", backend: nope }
passthrough: a
`),
    ).toEqual([
      expect.stringMatching(/^6:routes\[0\]\.metric: invalid RE2 pattern: .*missing closing \)/),
      "7:routes[1].backend: no backend named \"nope\" in backends",
      '8:passthrough: backend "a" has type bridge; the pass-through backend must have type passthrough',
    ]);
  });

  it("reads clusterPolicies.limits and resyncTimeoutSeconds, naming a bad field with its line", () => {
    const backends = `backends: { a: { url: "https://a" } }\nroutes: [{ metric: ".*", backend: a }]\n`;
    const plain = loadProxyConfig(`${head}${backends}clusterPolicies: { enabled: true }\n`, "p.yaml");
    expect(plain.clusterPolicies).toEqual({ enabled: true, whenNoneApply: "Defer" });
    const set = loadProxyConfig(
      `${head}${backends}clusterPolicies:
  enabled: true
  limits: { maxObjects: 5000, maxSpecBytes: 4194304, maxRules: 50000, maxNamespaceObjects: 2, maxNamespaceSpecBytes: 65536, maxNamespaceRules: 100 }
  resyncTimeoutSeconds: 90
`,
      "p.yaml",
    );
    expect(set.clusterPolicies).toEqual({
      enabled: true,
      whenNoneApply: "Defer",
      limits: { maxObjects: 5000, maxSpecBytes: 4194304, maxRules: 50000, maxNamespaceObjects: 2, maxNamespaceSpecBytes: 65536, maxNamespaceRules: 100 },
      resyncTimeoutSeconds: 90,
    });
    expect(
      issues(`${head}${backends}clusterPolicies:
  enabled: true
  limits:
    maxNamespaceObjects: 0
    maxNamespaceRules: 1.5
    maxSpecByte: 10
  resyncTimeoutSeconds: -1
`),
    ).toEqual([
      "8:clusterPolicies.limits.maxNamespaceObjects: Too small: expected number to be >0",
      "9:clusterPolicies.limits.maxNamespaceRules: Invalid input: expected int, received number",
      "10:clusterPolicies.limits.maxSpecByte: unknown field",
      "11:clusterPolicies.resyncTimeoutSeconds: Too small: expected number to be >0",
    ]);
  });

  it("passes the ProxyConfig's policy settings to the policy layer under the caller's own, field by field", () => {
    const kc = {} as KubeClient;
    expect(clusterPolicySettings({ enabled: true, whenNoneApply: "Defer", limits: { maxNamespaceObjects: 2, maxRules: 10 }, resyncTimeoutSeconds: 90 }, { kc })).toEqual({
      kc,
      limits: { maxNamespaceObjects: 2, maxRules: 10 },
      resyncTimeoutMs: 90_000,
    });
    expect(
      clusterPolicySettings({ enabled: true, whenNoneApply: "Defer", limits: { maxNamespaceObjects: 2, maxRules: 10 }, resyncTimeoutSeconds: 90 }, { kc, limits: { maxRules: 7 }, resyncTimeoutMs: 500 }),
    ).toEqual({ kc, limits: { maxNamespaceObjects: 2, maxRules: 7 }, resyncTimeoutMs: 500 });
    expect(clusterPolicySettings({ enabled: true, whenNoneApply: "Defer" }, { kc })).toEqual({ kc });
  });

  it("compiles routes as whole-name, case-insensitive RE2 patterns", () => {
    const config = loadProxyConfig(`${head}backends: { a: { url: "https://a" }, b: { url: "https://b" } }\nroutes: [{ metric: "queue_.*", backend: a }, { metric: "gcp/.*", backend: b }]\n`, "p.yaml");
    expect(config.routes[0]!.pattern.matches("queue_ready")).toBe(true);
    expect(config.routes[0]!.pattern.matches("my_queue_ready")).toBe(false);
    expect(config.routes[1]!.pattern.matches("gcp/pubsub")).toBe(true);
  });
});
