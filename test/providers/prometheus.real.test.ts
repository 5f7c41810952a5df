/**
 * The `prometheus` provider (generic flavour) through the real bridge app
 * against two REAL servers of the Prometheus HTTP API, Prometheus v3.16.0 and
 * VictoriaMetrics v1.151.0 (test/helpers/prometheus.ts: both built from Go
 * modules, scraping an exporter this test controls every second), so the
 * provider depends on no one server's quirks: the
 * served value is the exported one stamped with the sample's own time;
 * `in (…)` values reach Prometheus as exact matchers (`a.b` never matches
 * `aXb`); values in Go's float format become exact Quantities (or a refusal,
 * never a rounding); NaN, an unknown queue and a stopped Prometheus are
 * Status errors, never a value; a template rule with `irate()` works; two
 * reads arriving together cost Prometheus one value query and one age query
 * (counted by the server itself: `prometheus_http_requests_total`, `vm_http_requests_total`); basic
 * auth is checked by the server's own web config.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBridge, type Bridge, OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import {
  PROMETHEUS_BUILD_TIMEOUT_MS,
  prometheusBinary,
  startExporter,
  startPrometheus,
  startVictoriaMetrics,
  victoriaMetricsBinary,
  type ExportedSample,
  type Exporter,
  type PrometheusOptions,
  type PrometheusServer,
} from "../helpers/prometheus.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");

/**
 * The time of queue a's sample: 20 s before the server starts, whole
 * seconds, exported as the sample's own timestamp. Set once the server is
 * built (a cold build takes minutes: a time taken at import would be
 * minutes old by the first read).
 */
let SAMPLE_TS = 0;

/** The time of queue old's sample: 90 s before the suite starts, older than the `queue_ready_fresh` rule's maxAgeSeconds (60). */
let OLD_TS = 0;

/** What the exporter serves at every scrape: gauges per queue, and counters growing 5/s (a) and 2/s (b) stamped with whole seconds. */
function samples(): ExportedSample[] {
  const second = Math.floor(Date.now() / 1000);
  const gauge = (queue: string, value: number, timestampMs?: number): ExportedSample => ({ name: "emb_queue_ready", labels: { queue }, value, timestampMs });
  return [
    gauge("a", 3, SAMPLE_TS),
    gauge("old", 6, OLD_TS),
    gauge("b", 4),
    gauge("a.b", 5),
    gauge("aXb", 7),
    gauge("a+b", 11),
    gauge("aab", 13),
    gauge("big", 1e21),
    gauge("tiny", 1e-7),
    gauge("tenth", 0.1),
    gauge("nan", NaN),
    { name: "emb_jobs_total", labels: { queue: "a" }, value: 5 * second, timestampMs: second * 1000 },
    { name: "emb_jobs_total", labels: { queue: "b" }, value: 2 * second, timestampMs: second * 1000 },
  ];
}

function config(url: string, provider = ""): string {
  return `
${OPEN_CONFIG_HEAD}providers:
  prom:
    type: prometheus
    url: ${url}
    timeoutSeconds: 2
${provider}
metrics:
  - name: queue_ready
    provider: prom
    query: { series: emb_queue_ready, labels: { job: exporter }, selectorLabels: { queue: queue } }
  - name: queue_ready_or_zero
    provider: prom
    query: { series: emb_queue_ready, selectorLabels: { queue: queue }, onEmpty: { value: "0" } }
  - name: queue_ready_fresh
    provider: prom
    maxAgeSeconds: 60
    query: { series: emb_queue_ready, selectorLabels: { queue: queue } }
  - name: queue_by_alias
    provider: prom
    query: { series: emb_queue_ready, selectorLabels: { queue: { label: queue, values: { plus: "a+b", b: b } } } }
  - name: queue_ready_template
    provider: prom
    maxAgeSeconds: 60
    query: { template: 'max by (queue) (emb_queue_ready{<<.LabelMatchers>>})', selectorLabels: { queue: queue } }
  - name: jobs_per_second
    provider: prom
    query:
      template: 'sum by (queue) (irate(emb_jobs_total{<<.LabelMatchers>>}[1m]))'
      selectorLabels: { queue: queue }
`;
}

/**
 * The two implementations of the Prometheus HTTP API the suite runs against,
 * and where they differ (each difference was seen against the real server):
 * - VictoriaMetrics drops NaN samples at ingestion, so an exported NaN is no
 *   series (still a 503, never a value);
 * - VictoriaMetrics ignores `lookback_delta` and reads `max_lookback` (the
 *   generic flavour sends both), with the same effect;
 * - VictoriaMetrics writes values in plain decimals (`0.0000001`,
 *   `1000000000000000000000`), Prometheus in Go's `%g` (`1e-07`, `1e+21`).
 */
interface ServerKind {
  name: string;
  binary(): string;
  start(options: PrometheusOptions): Promise<PrometheusServer>;
  /** the 503 message of an exported NaN */
  nan: RegExp;
}

const SERVERS: ServerKind[] = [
  { name: "Prometheus v3.16.0", binary: prometheusBinary, start: startPrometheus, nan: /the value is NaN/ },
  { name: "VictoriaMetrics v1.151.0", binary: victoriaMetricsBinary, start: startVictoriaMetrics, nan: /no series in the answer/ },
];

function bridgeFor(url: string, provider = "", env: Record<string, string> = {}): Bridge {
  return buildBridge(config(url, provider), "test.yaml", { env, now: () => Date.now() }, { log: () => {} });
}

async function read(bridge: Bridge, metric: string, selector: string) {
  const res = await bridge.app.fetch(new Request(`http://bridge${NS}/${metric}?labelSelector=${encodeURIComponent(selector)}`));
  return { status: res.status, body: (await res.json()) as any };
}

/** [queue, value] of each item of a 200 answer. */
const values = (body: any): [string, string][] => body.items.map((i: any) => [i.metricLabels.queue, i.value]);

describe.each(SERVERS)("against a real $name", (server) => {
  let exporter: Exporter;
  let prom: PrometheusServer;

  beforeAll(async () => {
    const binary = server.binary();
    SAMPLE_TS = Math.floor((Date.now() - 20_000) / 1000) * 1000;
    OLD_TS = SAMPLE_TS - 70_000;
    exporter = await startExporter();
    exporter.set(samples, { emb_jobs_total: "counter" });
    prom = await server.start({ binary, targets: [exporter.target] });
    await prom.waitForSeries('emb_queue_ready{queue="tenth"}');
  }, PROMETHEUS_BUILD_TIMEOUT_MS + 120_000);

  afterAll(async () => {
    await prom?.stop();
    await exporter?.close();
  });

  describe("prometheus provider against a real Prometheus", () => {
    it("serves the exported value stamped with the sample's own timestamp, not the time of the read", async () => {
      const a = await read(bridgeFor(prom.url), "queue_ready", "queue=a");
      expect(a.status).toBe(200);
      expect(a.body.items).toEqual([{ metricName: "queue_ready", metricLabels: { queue: "a" }, timestamp: iso(SAMPLE_TS), value: "3" }]);
    });

    it("does not select a sample older than the rule's maxAgeSeconds (sent as lookback_delta): 503, never the old value", async () => {
      const bridge = bridgeFor(prom.url);
      const lenient = await read(bridge, "queue_ready", "queue=old");
      expect(lenient.body.items).toEqual([{ metricName: "queue_ready", metricLabels: { queue: "old" }, timestamp: iso(OLD_TS), value: "6" }]);
      const strict = await read(bridge, "queue_ready_fresh", "queue=old");
      expect(strict.status).toBe(503);
      expect(strict.body.items).toBeUndefined();
      expect(strict.body.message).toMatch(/no series in the answer \(lookback_delta 60s\)/);
      expect(values((await read(bridge, "queue_ready_fresh", "queue=a")).body)).toEqual([["a", "3"]]);
    });

    it("bounds a template rule (no age query: the answer carries the evaluation time) by its maxAgeSeconds on the server itself", async () => {
      const bridge = bridgeFor(prom.url);
      const fresh = await read(bridge, "queue_ready_template", "queue=a");
      expect(values(fresh.body)).toEqual([["a", "3"]]);
      // the 90 s old sample must not be selected at all: nothing afterwards could tell its age
      const old = await read(bridge, "queue_ready_template", "queue=old");
      expect(old.status).toBe(503);
      expect(old.body.items).toBeUndefined();
      expect(old.body.message).toMatch(/no series in the answer \(lookback_delta 60s\)/);
    });

    it("reads queue in (a, b) as exactly a and b, and never confuses a.b with aXb", async () => {
      const bridge = bridgeFor(prom.url);
      const ab = await read(bridge, "queue_ready", "queue in (a, b)");
      expect(ab.status).toBe(200);
      expect(values(ab.body)).toEqual([["a", "3"], ["b", "4"]]);
      expect(ab.body.items.reduce((sum: number, i: any) => sum + Number(i.value), 0)).toBe(7);
      const dot = await read(bridge, "queue_ready", "queue in (a.b)");
      expect(values(dot.body)).toEqual([["a.b", "5"]]);
      const both = await read(bridge, "queue_ready", "queue in (a.b, aXb)");
      expect(values(both.body)).toEqual([["a.b", "5"], ["aXb", "7"]]);
      // a.b alone, when only aXb exists, is empty and not aXb's value
      const onlyX = await read(bridge, "queue_ready_or_zero", "queue in (a.c, aXb)");
      expect(values(onlyX.body)).toEqual([["a.c", "0"], ["aXb", "7"]]);
    });

    it("quotes a mapped value for RE2 (a+b is the literal a+b, not the pattern that matches aab)", async () => {
      // the answer is split back by exact label values, so an unquoted . would only over-select; an unquoted + under-selects
      const r = await read(bridgeFor(prom.url), "queue_by_alias", "queue in (plus, b)");
      expect(r.status).toBe(200);
      expect(values(r.body)).toEqual([["b", "4"], ["plus", "11"]]);
    });

    it("turns Go's float text into exact Quantities (1e-07 → 100n, 0.1 → 100m) and refuses 1e+21 rather than rounding it", async () => {
      const bridge = bridgeFor(prom.url);
      expect(values((await read(bridge, "queue_ready", "queue=tiny")).body)).toEqual([["tiny", "100n"]]);
      expect(values((await read(bridge, "queue_ready", "queue=tenth")).body)).toEqual([["tenth", "100m"]]);
      const big = await read(bridge, "queue_ready", "queue=big");
      expect(big.status).toBe(500);
      expect(big.body.items).toBeUndefined();
      expect(big.body.message).toMatch(/1000000000000000000000 .*cannot be read back exactly/);
    });

    it("answers 503 for an exported NaN, never a value", async () => {
      const nan = await read(bridgeFor(prom.url), "queue_ready", "queue=nan");
      expect(nan.status).toBe(503);
      expect(nan.body.items).toBeUndefined();
      expect(nan.body.message).toMatch(server.nan);
    });

    it("answers an unknown queue with the rule's onEmpty: 503 by default, the configured value otherwise", async () => {
      const bridge = bridgeFor(prom.url);
      const missing = await read(bridge, "queue_ready", "queue=nope");
      expect(missing.status).toBe(503);
      expect(missing.body.items).toBeUndefined();
      expect(missing.body.message).toMatch(/no series in the answer/);
      expect(values((await read(bridge, "queue_ready_or_zero", "queue=nope")).body)).toEqual([["nope", "0"]]);
    });

    it("evaluates a template rule (irate over a counter) per queue, stamped with the evaluation time", async () => {
      // irate over the last two samples: whole-second timestamps and 5/s, 2/s increments make it exact
      await prom.waitForSeries('irate(emb_jobs_total{queue="b"}[1m])', { value: "2", timeoutMs: 20_000 });
      const before = Date.now();
      const r = await read(bridgeFor(prom.url), "jobs_per_second", "queue in (a, b)");
      expect(r.status).toBe(200);
      expect(values(r.body)).toEqual([["a", "5"], ["b", "2"]]);
      const stamp = Date.parse(r.body.items[0].timestamp);
      expect(stamp).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
      expect(stamp).toBeLessThanOrEqual(Date.now());
    });

    it("sends two reads arriving together as one value query and one age query (Prometheus' own request count)", async () => {
      const bridge = bridgeFor(prom.url);
      const before = await prom.requests();
      const [a, b] = await Promise.all([read(bridge, "queue_ready", "queue=a"), read(bridge, "queue_ready", "queue=b")]);
      expect((await prom.requests()) - before).toBe(2);
      expect(values(a.body)).toEqual([["a", "3"]]);
      expect(values(b.body)).toEqual([["b", "4"]]);
      expect(a.body.items[0].timestamp).toBe(iso(SAMPLE_TS));
    });
  });

  describe("a stopped Prometheus", () => {
    it("is a 503, never a value (not even a rule's onEmpty value)", async () => {
      const own = await server.start({ targets: [exporter.target] });
      try {
        await own.waitForSeries('emb_queue_ready{queue="b"}');
        expect(values((await read(bridgeFor(own.url), "queue_ready", "queue=b")).body)).toEqual([["b", "4"]]);
      } finally {
        await own.stop();
      }
      const bridge = bridgeFor(own.url);
      for (const metric of ["queue_ready", "queue_ready_or_zero"]) {
        const after = await read(bridge, metric, "queue=b");
        expect(after.status).toBe(503);
        expect(after.body.items).toBeUndefined();
        expect(after.body.message).toMatch(/provider prom: .* backend unreachable/);
      }
    });
  });

  describe("a Prometheus behind basic auth (exporter-toolkit's web config)", () => {
    // bcrypt (cost 4) of the password below, made once with golang.org/x/crypto/bcrypt GenerateFromPassword
    const basicAuth = { username: "bridge", password: "p@ss:wörd", bcryptHash: "$2a$04$D6ri7dPs7fJ3xPmThsvIPefqKTnmXd6CytC85tyg.nlUfFinOzzJS" };
    const withAuth = "    auth: { basicAuth: { usernameEnv: PROM_USER, passwordEnv: PROM_PASSWORD } }";
    let guarded: PrometheusServer;
    beforeAll(async () => {
      guarded = await server.start({ targets: [exporter.target], basicAuth });
      await guarded.waitForSeries('emb_queue_ready{queue="b"}');
    }, 120_000);
    afterAll(async () => guarded?.stop());

    it("is read with the configured credentials (a password with ':' and non-ASCII, UTF-8 as RFC 7617 says)", async () => {
      const ok = await read(bridgeFor(guarded.url, withAuth, { PROM_USER: "bridge", PROM_PASSWORD: "p@ss:wörd" }), "queue_ready", "queue=b");
      expect(ok.status).toBe(200);
      expect(values(ok.body)).toEqual([["b", "4"]]);
    });

    it("refuses a wrong password or none with a 500 that says to check auth, never a value", async () => {
      const wrong = await read(bridgeFor(guarded.url, withAuth, { PROM_USER: "bridge", PROM_PASSWORD: "p@ss:word" }), "queue_ready_or_zero", "queue=b");
      const none = await read(bridgeFor(guarded.url), "queue_ready_or_zero", "queue=b");
      for (const r of [wrong, none]) {
        expect(r.status).toBe(500);
        expect(r.body.items).toBeUndefined();
        expect(r.body.message).toMatch(/refused the bridge's credentials; check the provider's auth .*HTTP 401/);
      }
    });
  });
});
