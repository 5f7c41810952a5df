/**
 * The Node server's exporter of the bridge's counters
 * (`./metrics.ts` {@link BridgeMetrics}): a prom-client registry whose
 * `emb_bridge_*` families read the counters at scrape time (nothing from
 * prom-client runs on a read), plus Node's process metrics
 * (`emb_bridge_process_*`, `emb_bridge_nodejs_*`) and
 * `emb_bridge_build_info{version,node}`.
 *
 * Served by `functions/node.ts` on its own listener (`--metrics-port`, bound
 * to `--metrics-host`, default 127.0.0.1), never on the API port: the
 * bridge's API port may be reachable from outside the cluster (a load
 * balancer in front of it), its metrics must not be (docs/deploy.md
 * "Metrics"). Node only (prom-client); never imported by the Worker.
 */
import { readFileSync } from "node:fs";
import { collectDefaultMetrics, Registry, type MetricValue } from "prom-client";
import type { Provider } from "../providers/types.ts";
import { LATENCY_BUCKETS, type BridgeMetrics, type Count, type Family, type Histogram } from "./metrics.ts";

const PREFIX = "emb_bridge_";

/** package.json's version, put in by esbuild's `define` in every Node bundle (infra/build-common.ts `VERSION_DEFINE`, infra/proxy/build.ts). */
declare const __EMB_VERSION__: string | undefined;

/**
 * The bridge's and the proxy's version, as their `build_info` reports it:
 * package.json's `version` — in a bundle the string esbuild defined at build
 * time (no file is read); run from source (`npm run …`, tests), read from
 * the repository's package.json when this module loads.
 *
 * @throws Error at load, from source only, when package.json cannot be read
 */
export const BRIDGE_VERSION: string = typeof __EMB_VERSION__ === "string" ? __EMB_VERSION__ : sourceVersion();

/** package.json's version, read beside the sources (`shared/observability/` → the repository root). */
function sourceVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

/** What the exporter reads of a provider: its name and its cache's outcomes (`Provider.cache`, `../providers/types.ts`; a provider without a cache is left out). */
export type ProviderCache = Pick<Provider, "name" | "cache">;

/** A metric for prom-client's registry whose values are made at scrape time. */
function collected(name: string, help: string, type: "counter" | "gauge" | "histogram", values: () => MetricValue<string>[]) {
  return {
    name,
    help,
    type,
    aggregator: "sum" as const,
    get: () => ({ name, help, type, aggregator: "sum", values: values() }),
    reset: () => {},
  };
}

function counterValues(family: Family<Count>): MetricValue<string>[] {
  return [...family.entries.values()].map(({ labels, value }) => ({ labels, value: value.n }));
}

function histogramValues(name: string, family: Family<Histogram>): MetricValue<string>[] {
  const out: MetricValue<string>[] = [];
  for (const { labels, value } of family.entries.values()) {
    let cumulative = 0;
    LATENCY_BUCKETS.forEach((le, i) => {
      cumulative += value.counts[i]!;
      out.push({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: cumulative } as MetricValue<string>);
    });
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: "+Inf" }, value: value.count } as MetricValue<string>);
    out.push({ metricName: `${name}_sum`, labels, value: value.sum } as MetricValue<string>);
    out.push({ metricName: `${name}_count`, labels, value: value.count } as MetricValue<string>);
  }
  return out;
}

/**
 * A registry exporting `metrics` (names in `./metrics.ts`) and the cache
 * outcomes of `providers()` (`emb_bridge_cache_requests_total{provider,result}`
 * from each provider's `cache.stats`, `ProviderCacheStats`: hit, failure_hit,
 * coalesced, miss = loads started for a read). What `functions/node.ts` serves on `--metrics-port`.
 *
 * @param now clock, ms since the epoch (the served value's age)
 * @param processMetrics add Node's process metrics (default true)
 */
export function bridgeRegistry(
  metrics: BridgeMetrics,
  providers: () => Iterable<ProviderCache>,
  now: () => number = Date.now,
  processMetrics = true,
): Registry {
  const registry = new Registry();
  if (processMetrics) collectDefaultMetrics({ register: registry, prefix: PREFIX });
  registerBridgeMetrics(registry, metrics, providers, now);
  return registry;
}

/**
 * Add the bridge's `emb_bridge_*` families (build_info, requests, latencies,
 * backend errors and throttles, cache outcomes, served values, policy
 * decisions; not Node's process metrics) to an existing registry, read from
 * `metrics` and `providers()` at scrape time. The in-cluster proxy uses it
 * to export an in-process bridge's metrics on its own `/metrics`
 * (`shared/proxy/forward/in-process.ts`).
 *
 * @throws Error (prom-client) when `registry` already holds one of these names: call once per registry
 */
export function registerBridgeMetrics(
  registry: Registry,
  metrics: BridgeMetrics,
  providers: () => Iterable<ProviderCache>,
  now: () => number = Date.now,
): void {
  const add = (metric: ReturnType<typeof collected>) => registry.registerMetric(metric as never);
  add(
    collected(`${PREFIX}build_info`, "The bridge's version and Node's, as labels; the value is 1.", "gauge", () => [
      { labels: { version: BRIDGE_VERSION, node: process.version }, value: 1 },
    ]),
  );
  add(collected(`${PREFIX}requests_total`, "Requests answered, by kind (values, custom, discovery, probe, other) and HTTP code.", "counter", () => counterValues(metrics.requests)));
  add(
    collected(`${PREFIX}request_duration_seconds`, "Time to answer a request, seconds.", "histogram", () =>
      histogramValues(`${PREFIX}request_duration_seconds`, metrics.requestDuration),
    ),
  );
  add(
    collected(`${PREFIX}backend_request_duration_seconds`, "Backend (cloud API) call latency, seconds; a batched call counts once.", "histogram", () =>
      histogramValues(`${PREFIX}backend_request_duration_seconds`, metrics.backendDuration),
    ),
  );
  add(
    collected(
      `${PREFIX}backend_errors_total`,
      "Series reads that failed, by provider, HTTP code of the answer and error kind (timeout, throttled, credentials, permission, unreachable, …).",
      "counter",
      () => counterValues(metrics.backendErrors),
    ),
  );
  add(
    collected(
      `${PREFIX}tier_reads_total`,
      "Local cache misses read through the shared read tier, by provider and source (tier-hit, tier-load, tier-wait, direct: the tier failed and the cloud was read directly).",
      "counter",
      () => counterValues(metrics.tierReads),
    ),
  );
  add(collected(`${PREFIX}backend_throttles_total`, "Series reads the backend throttled, by provider.", "counter", () => counterValues(metrics.backendThrottles)));
  add(
    collected(`${PREFIX}cache_requests_total`, "Series reads by provider and cache outcome (hit, failure_hit, coalesced, miss).", "counter", () => {
      // Providers of the same name (two in-process bridges in one proxy, each with its `sqs`) add up: one series per label pair.
      const sums = new Map<string, MetricValue<string>>();
      for (const provider of providers()) {
        const stats = provider.cache?.stats;
        if (stats === undefined) continue;
        for (const [result, value] of [
          ["hit", stats.hits],
          ["failure_hit", stats.failureHits],
          ["coalesced", stats.coalesced],
          ["miss", stats.loads - stats.refreshes],
        ] as const) {
          const key = `${provider.name}\u0001${result}`;
          const cell = sums.get(key);
          if (cell === undefined) sums.set(key, { labels: { provider: provider.name, result }, value });
          else cell.value += value;
        }
      }
      return [...sums.values()];
    }),
  );
  add(
    collected(`${PREFIX}metric_value`, "The last value served per metric rule: the sum of its items (what the HPA compares with its target).", "gauge", () =>
      [...metrics.served.entries.values()].map(({ labels, value }) => ({ labels, value: value.value })),
    ),
  );
  add(
    collected(`${PREFIX}metric_value_age_seconds`, "Age now of the oldest item of the last value served per metric rule, seconds.", "gauge", () =>
      [...metrics.served.entries.values()].map(({ labels, value }) => ({ labels, value: (now() - value.oldestMs) / 1000 })),
    ),
  );
  add(
    collected(`${PREFIX}policy_decisions_total`, "Values reads decided by the bridge's policy layer, by decision (allow, deny).", "counter", () =>
      counterValues(metrics.policy),
    ),
  );
}
