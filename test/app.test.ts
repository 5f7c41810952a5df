/**
 * The app's own guards, independent of any backend: what it does with the
 * series a provider returns (staleness, emptiness, magnitude, windows) and
 * with the authenticate/authorize hooks. The provider here is a test double
 * that returns exactly what each case needs; real providers are tested
 * through their SDKs elsewhere.
 */
import { describe, expect, it } from "vitest";
import { createApp, type BridgeOptions } from "../shared/app.ts";
import { loadConfig } from "../shared/config/config.ts";
import { parseDecimal } from "../shared/k8s/quantity.ts";
import { forbidden, unauthorized } from "../shared/k8s/status.ts";
import type { Provider, Series } from "../shared/providers/types.ts";

const NOW = Date.parse("2026-11-21T10:00:00Z");
const URL_BASE = "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/depth?labelSelector=queue%3Dq";

function appWith(series: () => Series[] | Promise<Series[]>, extra: Partial<BridgeOptions> = {}) {
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
    query: async () => {
      calls++;
      return series();
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
    expect(res.body.message).toMatch(/too large for the HPA/);
  });

  it("turns a provider that never answers into 503 at the request deadline", async () => {
    const { app } = appWith(() => new Promise<Series[]>(() => {}), { deadlineMs: 50 });
    const res = await get(app);
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/did not answer within 50 ms/);
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
