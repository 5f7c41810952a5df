/**
 * Refresh-ahead of the `prometheus` provider (`shared/providers/refresh-ahead.ts`,
 * `shared/cache/refresh-ahead.ts`) through the real bridge app against the
 * fake Prometheus HTTP API (`../fakes/prometheus-api.ts`): the HPA
 * controller's blocking workers read one series at a time, and the series
 * read recently are reloaded together shortly before they expire, as one
 * value query and one timestamp query; a failed refresh is never a value.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { PrometheusProvider } from "../../shared/providers/prometheus/index.ts";
import { buildBridge, type Bridge, OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const NOW = 1_800_000_000_000;
const QUEUES = ["a", "b", "c"];

function config(url: string, refreshAhead: boolean | undefined): string {
  return `
${OPEN_CONFIG_HEAD}providers:
  prom: { type: prometheus, url: ${url}, timeoutSeconds: 2${refreshAhead === undefined ? "" : `, refreshAhead: ${refreshAhead}`} }
metrics:
  - { name: ready, provider: prom, query: { series: queue_ready, selectorLabels: { queue: queue } } }
`;
}

describe("prometheus provider: refresh-ahead", () => {
  let fake: FakePrometheus;
  const clock = { now: NOW };
  const bridges: Bridge[] = [];
  beforeAll(async () => {
    fake = await startFakePrometheus(() => clock.now);
  });
  afterAll(async () => fake?.close());
  afterEach(() => {
    for (const b of bridges.splice(0)) for (const p of b.providers.values()) p.close?.();
    clock.now = NOW;
    fake.requests.length = 0;
    fake.respond = undefined;
  });

  function bridgeFor(text: string) {
    fake.series = QUEUES.map((q, i) => ({ labels: { __name__: "queue_ready", queue: q }, value: String(i + 1), timeMs: NOW - 5_000 }));
    const bridge = buildBridge(text, "test.yaml", { env: {}, now: () => clock.now }, { log: () => {} });
    bridges.push(bridge);
    return { bridge, provider: bridge.providers.get("prom") as PrometheusProvider };
  }

  /** Read `queues` one after another, each awaited (a blocking sync worker), at `at` ms after NOW. */
  async function pass(bridge: Bridge, at: number, queues: readonly string[] = QUEUES): Promise<string[]> {
    clock.now = NOW + at;
    const values: string[] = [];
    for (const q of queues) {
      const res = await bridge.app.request(`${NS}/ready?labelSelector=${encodeURIComponent(`queue=${q}`)}`);
      const body = (await res.json()) as { items?: { value: string }[] };
      values.push(res.status === 200 ? body.items![0]!.value : `status ${res.status}`);
    }
    return values;
  }

  const settled = async (provider: PrometheusProvider) => {
    for (let waited = 0; provider.cache.inflight > 0 && waited < 2_000; waited += 10) await new Promise((r) => setTimeout(r, 10));
  };

  it("sequential reads of recently read series cost one value query and one timestamp query per round (0.9 × TTL); every read after the first is a hit", async () => {
    const { bridge, provider } = bridgeFor(config(fake.url, true));
    expect(await pass(bridge, 0)).toEqual(["1", "2", "3"]); // 3 misses, one at a time: 3 query pairs
    expect(fake.requests).toHaveLength(6);
    for (let at = 4_500; at <= 40_500; at += 4_500) {
      expect(await pass(bridge, at)).toEqual(["1", "2", "3"]);
      await settled(provider);
    }
    // rounds at 9, 18, 27 and 36 s, each one pair for the three series
    const rounds = fake.requests.slice(6).map((r) => r.query);
    expect(rounds).toEqual(
      Array.from({ length: 4 }, () => ['sum by (queue) (queue_ready{queue=~"a|b|c"})', 'min by (queue) (timestamp(queue_ready{queue=~"a|b|c"}))']).flat(),
    );
    expect(provider.cache.stats.loads - provider.cache.stats.refreshes).toBe(3); // no read after the first pass missed
  });

  it("without refresh-ahead (refreshAhead: false) every expiry is a miss of its own, one query pair per series", async () => {
    const { bridge } = bridgeFor(config(fake.url, false));
    for (let at = 0; at <= 40_500; at += 4_500) expect(await pass(bridge, at)).toEqual(["1", "2", "3"]);
    // loads at 0, 13.5 (> 10 s TTL), 27 and 40.5 s: 4 × 3 series × 2 queries
    expect(fake.requests).toHaveLength(24);
  });

  it("a failed refresh is never a value: the old one is served only within its TTL, then reads fail with a Status", async () => {
    const { bridge, provider } = bridgeFor(config(fake.url, true));
    await pass(bridge, 0, ["a"]);
    await pass(bridge, 3_000, ["a"]);
    fake.respond = () => ({ status: 503, body: { status: "error", errorType: "unavailable", error: "TSDB not ready" } });
    expect(await pass(bridge, 9_000, ["a"])).toEqual(["1"]); // starts the round, which fails
    await settled(provider);
    expect(provider.cache.stats.refreshFailures).toBe(1);
    expect(await pass(bridge, 9_900, ["a"])).toEqual(["1"]); // stored at 0 s: within its 10 s TTL
    expect(await pass(bridge, 10_100, ["a"])).toEqual(["status 503"]); // expired: a load, which fails
    // the first load, the round's, the load at 10.1 s (its failure cancels the other query of its pair)
    expect(provider.cache.stats).toMatchObject({ loads: 3, refreshes: 1, refreshFailures: 1 });
  });
});
