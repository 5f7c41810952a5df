/**
 * The app's own guards, independent of any backend: what it does with the
 * series a provider returns (staleness, emptiness, magnitude, windows) and
 * with the authenticate/authorize hooks. The provider here is a test double
 * that returns exactly what each case needs; real providers are tested
 * through their SDKs elsewhere.
 */
import { describe, expect, it } from "vitest";
import { REQUEST_DEADLINE_MS, type BridgeOptions } from "../../shared/app.ts";
import { createApp } from "../helpers/bridge.ts";
import { BACKEND_LOAD_TIMEOUT_MS } from "../../shared/deadline.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { parseDecimal } from "../../shared/k8s/quantity.ts";
import { forbidden, unauthorized } from "../../shared/k8s/status.ts";
import type { Provider, QueryRequest, Series } from "../../shared/providers/types.ts";

const NOW = Date.parse("2026-11-21T10:00:00Z");
const URL_BASE = "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/depth?labelSelector=queue%3Dq";

function appWith(series: (request: QueryRequest) => Series[] | Promise<Series[]>, extra: Partial<BridgeOptions> = {}) {
  const { config } = loadConfig(
    `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers: { p: { type: aws-sqs, region: us-east-1 } }
metrics: [{ name: depth, provider: p, maxAgeSeconds: 60 }]
`,
    "t.yaml",
  );
  let calls = 0;
  const provider: Provider = {
    name: "p",
    type: "test-double",
    plan: () => "test",
    query: async (request) => {
      calls++;
      return series(request);
    },
  };
  const app = createApp({ config, providers: new Map([["p", provider]]), runtime: { env: {}, now: () => NOW }, log: () => {}, ...extra });
  return { app, calls: () => calls };
}

async function get(app: ReturnType<typeof createApp>, url = URL_BASE, init?: RequestInit) {
  const res = await app.request(url, init);
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

describe("what the app does with provider series", () => {
  it("passes timestamp (RFC 3339, whole seconds) and window through", async () => {
    const { app } = appWith(() => [{ labels: { queue: "q" }, value: parseDecimal("1.5"), timestamp: NOW - 30_400, windowSeconds: 60 }]);
    const { body } = await get(app);
    expect(body.items).toEqual([
      { metricName: "depth", metricLabels: { queue: "q" }, timestamp: "2026-11-21T09:59:29Z", window: 60, value: "1500m" },
    ]);
  });

  it("refuses a value older than maxAgeSeconds with 503 — never serves it", async () => {
    const { app } = appWith(() => [{ labels: { queue: "q" }, value: parseDecimal("7"), timestamp: NOW - 61_000 }]);
    const res = await get(app);
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/older than maxAgeSeconds/);
    expect(res.headers.get("retry-after")).not.toBeNull();
  });

  it("refuses an empty answer with 503 — never an empty success", async () => {
    const { app } = appWith(() => []);
    const res = await get(app);
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ kind: "Status", reason: "ServiceUnavailable" });
  });

  it("refuses a value the HPA would misread (MilliValue overflow) with 500", async () => {
    const { app } = appWith(() => [{ labels: { queue: "q" }, value: parseDecimal("1e16"), timestamp: NOW }]);
    const res = await get(app);
    expect(res.status).toBe(500);
    expect(res.body.message).toMatch(/cannot be read back exactly by the HPA/);
  });

  it("refuses a value whose canonical Quantity apimachinery misreads (19+ digits: sign flips) with 500", async () => {
    const { app } = appWith(() => [{ labels: { queue: "q" }, value: parseDecimal("-1563536821837.1743"), timestamp: NOW }]);
    const res = await get(app);
    expect(res.status).toBe(500);
    expect(res.body.message).toMatch(/-1563536821837174300u has more than 18 digits/);
  });

  it("turns a provider that never answers into 503 at the request deadline", async () => {
    const { app } = appWith(() => new Promise<Series[]>(() => {}), { deadlineMs: 50 });
    const res = await get(app);
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/did not answer within 50 ms/);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  it("the budget: a 3 s request deadline, and cache loads no longer than it", () => {
    expect(REQUEST_DEADLINE_MS).toBe(3000);
    expect(BACKEND_LOAD_TIMEOUT_MS).toBeLessThanOrEqual(REQUEST_DEADLINE_MS);
  });

  it("gives the provider a signal that aborts at the deadline (TimeoutError)", async () => {
    const seen: AbortSignal[] = [];
    const { app } = appWith(
      (request) => {
        seen.push(request.signal);
        return new Promise<Series[]>((_, reject) => request.signal.addEventListener("abort", () => reject(request.signal.reason)));
      },
      { deadlineMs: 50 },
    );
    const res = await get(app);
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/did not answer within 50 ms/);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.aborted).toBe(true);
    expect((seen[0]!.reason as DOMException).name).toBe("TimeoutError");
  });

  it("aborts the provider's signal when the client goes away, long before the deadline", async () => {
    const seen: AbortSignal[] = [];
    const { app } = appWith(
      (request) => {
        seen.push(request.signal);
        return new Promise<Series[]>((_, reject) => request.signal.addEventListener("abort", () => reject(request.signal.reason)));
      },
      { deadlineMs: 60_000 },
    );
    const client = new AbortController();
    const pending = app.request(URL_BASE, { signal: client.signal });
    await new Promise((r) => setTimeout(r, 20));
    expect(seen[0]!.aborted).toBe(false);
    client.abort(new DOMException("client gone", "AbortError"));
    const res = await pending;
    expect(seen[0]!.aborted).toBe(true);
    expect(res.status).toBe(503);
    expect(((await res.json()) as any).message).toMatch(/client went away/);
  });

  it("aborts the provider's signal once the answer is made (nothing left running for a finished request)", async () => {
    let signal: AbortSignal | undefined;
    const { app } = appWith((request) => {
      signal = request.signal;
      return [{ labels: { queue: "q" }, value: parseDecimal("1"), timestamp: NOW }];
    });
    expect((await get(app)).status).toBe(200);
    expect(signal!.aborted).toBe(true);
  });

  it("turns an unexpected exception into a 500 Status without a stack", async () => {
    const { app } = appWith(() => {
      throw new TypeError("boom");
    });
    const res = await get(app);
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ kind: "Status", reason: "InternalError", message: "internal error: boom" });
  });
});

describe("freshness header (the bridge ↔ proxy contract)", () => {
  const cases: [string, number[], string][] = [
    ["one fresh item", [0], "private, max-age=60"],
    ["an item 30.4 s old", [30_400], "private, max-age=29"],
    ["the oldest item decides", [1_000, 45_000, 10_000], "private, max-age=15"],
    ["exactly maxAgeSeconds old", [60_000], "private, max-age=0"],
    ["a timestamp in the future counts as fresh", [-5_000], "private, max-age=60"],
  ];
  it.each(cases)("%s → %s", async (_name, ages, header) => {
    const { app } = appWith(() => ages.map((age, i) => ({ labels: { queue: `q${i}` }, value: parseDecimal("1"), timestamp: NOW - age })));
    const res = await get(app);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe(header);
  });

  it("errors and discovery are no-store", async () => {
    const { app } = appWith(() => []);
    expect((await get(app)).headers.get("cache-control")).toBe("no-store");
    for (const url of ["/apis", "/apis/external.metrics.k8s.io", "/apis/external.metrics.k8s.io/v1beta1", "/apis/nope"]) {
      expect((await app.request(url)).headers.get("cache-control")).toBe("no-store");
    }
  });
});

describe("X-Request-Id", () => {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
  it("echoes a well-formed id (the proxy's rule: 1–128 of [A-Za-z0-9._:-])", async () => {
    const { app } = appWith(() => [{ labels: { queue: "q" }, value: parseDecimal("1"), timestamp: NOW }]);
    for (const id of ["abc-123", "a.b:c_d-e", "x".repeat(128)]) {
      expect((await app.request(URL_BASE, { headers: { "x-request-id": id } })).headers.get("x-request-id")).toBe(id);
    }
  });

  it("replaces anything else with a fresh UUID, and logs that one (50 KB no longer come back)", async () => {
    const logged: unknown[] = [];
    const { app } = appWith(() => [{ labels: { queue: "q" }, value: parseDecimal("1"), timestamp: NOW }], { log: (r) => logged.push(r.requestId) });
    for (const id of ["x".repeat(50_000), "x".repeat(129), "has space", "semi;colon", "\u00e9t\u00e9", ""]) {
      const res = await app.request(URL_BASE, { headers: { "x-request-id": id } });
      const echoed = res.headers.get("x-request-id")!;
      expect(echoed).toMatch(UUID);
      expect(logged.at(-1)).toBe(echoed);
    }
  });
});

describe("authenticate and authorize hooks", () => {
  it("a 401 from authenticate refuses every /apis path but not health probes", async () => {
    const { app, calls } = appWith(() => [], {
      authenticate: () => {
        throw unauthorized("request signature missing");
      },
    });
    for (const url of [URL_BASE, "/apis/external.metrics.k8s.io/v1beta1", "/apis"]) {
      const res = await get(app, url);
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ kind: "Status", reason: "Unauthorized" });
    }
    expect((await app.request("/healthz")).status).toBe(200);
    expect(calls()).toBe(0);
  });

  it("authorize sees caller, namespace, metric and selector, and a 403 stops the backend call", async () => {
    const seen: unknown[] = [];
    const { app, calls } = appWith(() => [{ labels: { queue: "q" }, value: parseDecimal("1"), timestamp: NOW }], {
      authenticate: () => ({ user: "jane", groups: ["team-a"], extra: {} }),
      authorize: (r) => {
        seen.push({ user: r.caller.user, namespace: r.namespace, metric: r.metric, selector: r.selector.requirements.map((q) => q.key) });
        throw forbidden("denied by test");
      },
    });
    const res = await get(app, "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/DEPTH?labelSelector=queue%3Dq");
    expect(res.status).toBe(403);
    expect(seen).toEqual([{ user: "jane", namespace: "team-a", metric: "depth", selector: ["queue"] }]);
    expect(calls()).toBe(0);
  });
});
