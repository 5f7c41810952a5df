/**
 * The gcp-monitoring provider served by the real bridge app over its
 * default transport (REST over fetch, JWT bearer grant at the OAuth fake)
 * against the REST fake: batching and coalescing proven by the requests the
 * fake recorded, caching, failure isolation, selector mapping, `onEmpty`,
 * tokens (one exchange, renewal, refusal) and credential failures.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildBridge, type Bridge, OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import type { MonitoringProvider } from "../../shared/providers/gcp-monitoring/index.ts";
import { makeServiceAccount } from "../fakes/google-key.ts";
import { startGoogleFakes, type GoogleFakes } from "../fakes/google.ts";
import { parseFilter } from "../fakes/monitoring-filter.ts";
import type { StoredSeries } from "../fakes/monitoring-store.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const NOW = 1_800_000_000_000;
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");
const BACKLOG = "pubsub.googleapis.com/subscription/num_undelivered_messages";

function subscription(id: string, value: string, agoSeconds = 60): StoredSeries {
  return {
    metricType: BACKLOG,
    resourceType: "pubsub_subscription",
    resourceLabels: { project_id: "test-project", subscription_id: id },
    points: [{ end: NOW - agoSeconds * 1000, value: { int64Value: value } }],
  };
}

function config(endpoint: string, extraRules = "", provider = "", credentials = "{ source: environment }") {
  return `
${OPEN_CONFIG_HEAD}providers:
  gcp:
    type: gcp-monitoring
    project: test-project
    endpoint: ${endpoint}
    credentials: ${credentials}
    timeoutSeconds: 0.5
${provider}
metrics:
  - name: pubsub_backlog
    provider: gcp
    query:
      metricType: ${BACKLOG}
      resourceType: pubsub_subscription
      selectorLabels: { subscription: resource.labels.subscription_id }
${extraRules}
`;
}

describe("gcp-monitoring provider over REST against the fakes", () => {
  let fakes: GoogleFakes;
  const clock = { now: NOW };
  beforeAll(async () => {
    fakes = await startGoogleFakes(() => clock.now);
  });
  afterAll(async () => fakes?.close());
  afterEach(() => {
    clock.now = NOW;
    fakes.store.series = [];
    fakes.store.requests.length = 0;
    fakes.store.behaviour = "normal";
    fakes.oauth.failWith = undefined;
  });

  function bridgeFor(text: string, env: Record<string, string> = { GOOGLE_SERVICE_ACCOUNT_JSON: fakes.account.text }) {
    const bridge = buildBridge(text, "test.yaml", { env, now: () => clock.now }, { log: () => {} });
    return { bridge, provider: bridge.providers.get("gcp") as MonitoringProvider };
  }

  async function read(bridge: Bridge, metric: string, selector: string) {
    const res = await bridge.app.request(`${NS}/${metric}${selector ? `?labelSelector=${encodeURIComponent(selector)}` : ""}`);
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  }

  it("reads the newest point with its own end time", async () => {
    fakes.store.series = [
      { ...subscription("orders", "12", 130), points: [{ end: NOW - 130_000, value: { int64Value: "12" } }, { end: NOW - 70_000, value: { int64Value: "17" } }] },
    ];
    const { bridge } = bridgeFor(config(fakes.rest.endpoint));
    const a = await read(bridge, "pubsub_backlog", "subscription=orders");
    expect(a.body.items).toEqual([{ metricName: "pubsub_backlog", metricLabels: { subscription: "orders" }, timestamp: iso(NOW - 70_000), value: "17" }]);
    const [request] = fakes.store.requests;
    expect(request).toMatchObject({ name: "projects/test-project", startMs: NOW - 300_000, endMs: NOW, view: "FULL", transport: "rest", caller: fakes.account.json.client_email });
    expect(request!.filter).toBe(
      `metric.type = "${BACKLOG}" AND resource.type = "pubsub_subscription" AND (resource.labels.subscription_id = "orders")`,
    );
  });

  it("sends N concurrent reads of different series as one ListTimeSeries call", async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `sub-${i}`);
    fakes.store.series = ids.map((id, i) => subscription(id, String(i)));
    const { bridge, provider } = bridgeFor(config(fakes.rest.endpoint));
    const answers = await Promise.all(ids.map((id) => read(bridge, "pubsub_backlog", `subscription=${id}`)));
    answers.forEach((a, i) => expect(a.body.items[0].value).toBe(String(i)));
    expect(fakes.store.requests).toHaveLength(1);
    const filter = parseFilter(fakes.store.requests[0]!.filter);
    expect(filter.kind === "and" && filter.items.at(-1)).toMatchObject({ kind: "or" });
    expect(provider.batcher.stats).toMatchObject({ calls: 1, items: 30 });
  });

  it("never selects more than maxSeriesPerCall series per call, and keeps different queries apart", async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `s${i}`);
    fakes.store.series = ids.map((id) => subscription(id, "1"));
    const rules = `
  - name: pubsub_backlog_mean
    provider: gcp
    query:
      metricType: ${BACKLOG}
      resourceType: pubsub_subscription
      selectorLabels: { subscription: resource.labels.subscription_id }
      aligner: ALIGN_MEAN
`;
    const { bridge } = bridgeFor(config(fakes.rest.endpoint, rules, "    maxSeriesPerCall: 5"));
    const answers = await Promise.all([
      ...ids.map((id) => read(bridge, "pubsub_backlog", `subscription=${id}`)),
      read(bridge, "pubsub_backlog_mean", "subscription in (s1,s2)"),
    ]);
    for (const a of answers) expect(a.status).toBe(200);
    const plain = fakes.store.requests.filter((r) => r.aggregation === undefined);
    const aligned = fakes.store.requests.filter((r) => r.aggregation !== undefined);
    expect(plain.map((r) => (r.filter.match(/subscription_id =/g) ?? []).length)).toEqual([5, 5, 2]);
    expect(aligned).toHaveLength(1);
    expect(aligned[0]!.aggregation).toEqual({ alignmentPeriodSeconds: 60, perSeriesAligner: "ALIGN_MEAN" });
    expect(answers.at(-1)!.body.items.map((i: any) => i.window)).toEqual([60, 60]);
  });

  it("coalesces identical concurrent reads and re-uses a read for cacheTTLSeconds", async () => {
    fakes.store.series = [subscription("orders", "5")];
    const { bridge } = bridgeFor(config(fakes.rest.endpoint));
    const answers = await Promise.all(Array.from({ length: 20 }, () => read(bridge, "pubsub_backlog", "subscription=orders")));
    for (const a of answers) expect(a.body.items[0].value).toBe("5");
    expect(fakes.store.requests).toHaveLength(1);
    fakes.store.series = [subscription("orders", "6", 1)];
    clock.now += 9_000;
    expect((await read(bridge, "pubsub_backlog", "subscription=orders")).body.items[0].value).toBe("5");
    clock.now += 2_000;
    const fresh = await read(bridge, "pubsub_backlog", "subscription=orders");
    expect(fresh.body.items[0]).toMatchObject({ value: "6", timestamp: iso(NOW - 1_000) });
    expect(fakes.store.requests).toHaveLength(2);
  });

  it("a selector naming several series succeeds only if all do; the empty one fails only its own reads", async () => {
    fakes.store.series = [subscription("orders", "5"), subscription("emails", "2")];
    const { bridge } = bridgeFor(config(fakes.rest.endpoint));
    const [withMissing, orders, both] = await Promise.all([
      read(bridge, "pubsub_backlog", "subscription in (orders,absent)"),
      read(bridge, "pubsub_backlog", "subscription=orders"),
      read(bridge, "pubsub_backlog", "subscription in (orders,emails)"),
    ]);
    expect(fakes.store.requests).toHaveLength(1);
    expect(withMissing.status).toBe(503);
    expect(withMissing.body.message).toMatch(/subscription_id = "absent".*no point in the last 300 s; no value is reported/);
    expect(orders.body.items[0].value).toBe("5");
    expect(both.body.items.map((i: any) => i.value)).toEqual(["2", "5"]);
  });

  it("an answer cut at the page limit (20 pages) is a 503 naming the limit, never the rule's onEmpty value", async () => {
    fakes.store.series = [subscription("orders", "5")];
    fakes.store.endlessPages = true;
    try {
      const { bridge } = bridgeFor(
        config(
          fakes.rest.endpoint,
          `
  - name: zero_when_empty
    provider: gcp
    query: { metricType: ${BACKLOG}, selectorLabels: { subscription: resource.labels.subscription_id }, onEmpty: { value: "0" } }
`,
        ),
      );
      const res = await read(bridge, "zero_when_empty", "subscription=orders");
      expect(res.status).toBe(503);
      expect(res.body.message).toMatch(/cut at the page limit \(20 pages\); no value is reported/);
      expect(res.body.items).toBeUndefined();
      expect(fakes.store.requests).toHaveLength(20);
    } finally {
      fakes.store.endlessPages = false;
    }
  });

  it("a point whose endTime is not a real date (2026-02-30, which Date.parse takes as 2 March) is a 503 for its series, never a value — not even the rule's onEmpty value", async () => {
    // Read at 2 March 00:01 UTC: a lenient parse would put "30 February" a minute ago, inside the window.
    clock.now = Date.parse("2026-03-02T00:01:00Z");
    for (const endText of ["2026-02-30T00:00:00Z", "2026-03-02T24:00:00Z", "2026-03-02T00:00:60Z", "2026-03-02 00:00:00Z", "2026-03-02T00:00:00"]) {
      fakes.store.series = [
        { ...subscription("orders", "5"), points: [{ end: clock.now - 60_000, endText, value: { int64Value: "5" } }] },
        { ...subscription("billing", "7"), points: [{ end: clock.now - 60_000, value: { int64Value: "7" } }] },
      ];
      const { bridge } = bridgeFor(
        config(
          fakes.rest.endpoint,
          `
  - name: zero_when_empty
    provider: gcp
    query: { metricType: ${BACKLOG}, selectorLabels: { subscription: resource.labels.subscription_id }, onEmpty: { value: "0" } }
`,
        ),
      );
      for (const metric of ["pubsub_backlog", "zero_when_empty"]) {
        const [bad, good] = await Promise.all([read(bridge, metric, "subscription=orders"), read(bridge, metric, "subscription=billing")]);
        expect(bad.status, `${endText} ${metric}: ${JSON.stringify(bad.body)}`).toBe(503);
        expect(bad.body.message).toMatch(/a point whose interval is not a valid RFC 3339 time; no value is reported/);
        expect(bad.body.items).toBeUndefined();
        // The other series of the same call is unaffected.
        expect(good.status).toBe(200);
        expect(good.body.items[0].value).toBe("7");
      }
    }
  });

  it("onEmpty notFound and a written value; a selector it cannot map is 400 before any call", async () => {
    const rules = `
  - name: backlog_or_404
    provider: gcp
    query: { metricType: ${BACKLOG}, selectorLabels: { subscription: resource.labels.subscription_id }, onEmpty: notFound }
  - name: backlog_or_zero
    provider: gcp
    query: { metricType: ${BACKLOG}, selectorLabels: { subscription: resource.labels.subscription_id }, onEmpty: { value: "0" } }
  - name: allowed_only
    provider: gcp
    query:
      metricType: ${BACKLOG}
      selectorLabels: { subscription: { field: resource.labels.subscription_id, values: { orders: prod-orders } } }
`;
    fakes.store.series = [subscription("prod-orders", "8")];
    const { bridge } = bridgeFor(config(fakes.rest.endpoint, rules));
    expect((await read(bridge, "backlog_or_404", "subscription=none")).status).toBe(404);
    const zero = await read(bridge, "backlog_or_zero", "subscription=none");
    expect(zero.body.items).toEqual([{ metricName: "backlog_or_zero", metricLabels: { subscription: "none" }, timestamp: iso(NOW), value: "0" }]);
    expect((await read(bridge, "allowed_only", "")).body.items).toMatchObject([{ metricLabels: { subscription: "orders" }, value: "8" }]);
    expect((await read(bridge, "allowed_only", "subscription=emails")).status).toBe(404);
    const calls = fakes.store.requests.length;
    const unmapped = await read(bridge, "pubsub_backlog", "subscription=orders,team=a");
    expect(unmapped.status).toBe(400);
    expect(unmapped.body.message).toMatch(/requirement "team=a" cannot be mapped: this rule understands only the labels "subscription"/);
    expect((await read(bridge, "pubsub_backlog", "")).status).toBe(400);
    expect(fakes.store.requests.length).toBe(calls);
  });

  it("exchanges one token for many calls, renews it before expiry and once after a 401", async () => {
    fakes.store.series = [subscription("orders", "5")];
    const { bridge } = bridgeFor(config(fakes.rest.endpoint).replace("cacheTTLSeconds: 10", "cacheTTLSeconds: 0"));
    const before = fakes.oauth.requests.length;
    for (let i = 0; i < 5; i++) expect((await read(bridge, "pubsub_backlog", "subscription=orders")).status).toBe(200);
    expect(fakes.oauth.requests.length - before).toBe(1);
    expect(fakes.oauth.requests.at(-1)!.claims).toMatchObject({
      iss: fakes.account.json.client_email,
      aud: fakes.oauth.tokenUri,
      scope: "https://www.googleapis.com/auth/monitoring.read",
      kid: fakes.account.json.private_key_id,
    });
    clock.now += 3600_000 - 30_000; // inside the last minute of the token's life
    expect((await read(bridge, "pubsub_backlog", "subscription=orders")).status).toBe(503); // data is old now …
    expect(fakes.oauth.requests.length - before).toBe(2); // … but a new token was fetched first
    clock.now = NOW;
    fakes.oauth.revokeAll(); // the API now answers 401 to the cached token: one new exchange, then success
    expect((await read(bridge, "pubsub_backlog", "subscription=orders")).status).toBe(200);
    expect(fakes.oauth.requests.length - before).toBe(3);
    fakes.oauth.revokeAll();
    fakes.oauth.failWith = 400; // … and when no new token can be had, a 500 naming the provider
    const refused = await read(bridge, "pubsub_backlog", "subscription=orders");
    expect(refused.status).toBe(500);
    expect(refused.body.message).toMatch(/provider gcp: getting an access token .* refused the service account/);
  });

  it("credential failures are 500 naming the provider, never a value and never the secret", async () => {
    fakes.store.series = [subscription("orders", "5")];
    const text = config(fakes.rest.endpoint);
    const missing = await read(bridgeFor(text, {}).bridge, "pubsub_backlog", "subscription=orders");
    expect(missing.status).toBe(500);
    expect(missing.body.message).toMatch(/provider gcp: credentials.source is "environment" but GOOGLE_SERVICE_ACCOUNT_JSON is not set/);
    const garbage = await read(bridgeFor(text, { GOOGLE_SERVICE_ACCOUNT_JSON: "{not json SECRET-MATERIAL" }).bridge, "pubsub_backlog", "subscription=orders");
    expect(garbage.status).toBe(500);
    expect(garbage.body.message).toMatch(/does not hold JSON/);
    expect(garbage.body.message).not.toMatch(/SECRET-MATERIAL/);
    const notKey = await read(bridgeFor(text, { GOOGLE_SERVICE_ACCOUNT_JSON: JSON.stringify({ type: "authorized_user", private_key: "SECRET-MATERIAL" }) }).bridge, "pubsub_backlog", "subscription=orders");
    expect(notKey.status).toBe(500);
    expect(notKey.body.message).toMatch(/is not a service-account key/);
    expect(notKey.body.message).not.toMatch(/SECRET-MATERIAL/);
    const stranger = makeServiceAccount(fakes.oauth.tokenUri, "stranger@test-project.iam.gserviceaccount.com");
    const refused = await read(bridgeFor(text, { GOOGLE_SERVICE_ACCOUNT_JSON: stranger.text }).bridge, "pubsub_backlog", "subscription=orders");
    expect(refused.status).toBe(500);
    expect(refused.body.message).toMatch(/provider gcp: getting an access token for stranger@.*refused the service account \(invalid_grant/);
    fakes.oauth.failWith = 503;
    const outage = await read(bridgeFor(text).bridge, "pubsub_backlog", "subscription=orders");
    expect(outage.status).toBe(503);
    expect(outage.headers.get("retry-after")).not.toBeNull();
    const adc = await read(bridgeFor(config(fakes.rest.endpoint, "", "", "{ source: default }")).bridge, "pubsub_backlog", "subscription=orders");
    expect(adc.status).toBe(500);
    expect(adc.body.message).toMatch(/Application Default Credentials.*credentials: \{ source: environment/);
    for (const x of [missing, garbage, notKey, refused, outage, adc]) expect(x.body.items).toBeUndefined();
    expect(fakes.store.requests).toHaveLength(0);
  });

  it("a backend that hangs is a 503 timeout", async () => {
    fakes.store.series = [subscription("orders", "5")];
    fakes.store.behaviour = "hang";
    const { bridge } = bridgeFor(config(fakes.rest.endpoint));
    const a = await read(bridge, "pubsub_backlog", "subscription=orders");
    expect(a.status).toBe(503);
    expect(a.body.message).toMatch(/provider gcp: ListTimeSeries .* timed out/);
  });

  it("describes its plan without a backend call", () => {
    const { bridge, provider } = bridgeFor(config(fakes.rest.endpoint));
    const rule = bridge.config.metrics[0] as any;
    expect(provider.plan({ rule, selector: { requirements: [{ key: "subscription", operator: "=", values: ["orders"] }] }, namespace: "default" })).toBe(
      `Cloud Monitoring ListTimeSeries, newest point in the last 300 s, for metric pubsub_backlog (projects/test-project ` +
        `metric.type = "${BACKLOG}" AND resource.type = "pubsub_subscription" AND (resource.labels.subscription_id = "orders"))`,
    );
    expect(fakes.store.requests).toHaveLength(0);
  });
});
