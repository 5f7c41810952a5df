/**
 * A Worker entry for the Durable Object tier's tests
 * (`test/runtimes/tier-do.worker.test.ts`), built by wrangler with the
 * repository's wrangler.toml (its aliases and rules) in place of `main`.
 *
 * It exports the real Durable Object class (`functions/worker.ts`
 * `SeriesTier`) and answers `POST /tier-read` `{ metric, labels, namespace }`
 * by calling the isolate's tier exactly as a provider's local cache miss
 * does (`SharedTier.read` with the series' `TierRequest`, `load` reading
 * the backend through this isolate's own provider): `{ source, value,
 * timestamp, counts }`, or `{ code, message, counts }` for a Status.
 * There is no local cache in front of the tier here, so every request
 * reaches the tier. Anything else goes to the real Worker.
 */
import worker, { SeriesTier } from "../../functions/worker.ts";
import { ruleCacheTtlMs } from "../../shared/cache/coalescing.ts";
import { configTextDigest, DurableObjectTier, newTierCounts } from "../../shared/cache/durable-object-tier.ts";
import { tierKey } from "../../shared/cache/shared-tier.ts";
import { loadConfig, type BridgeConfig } from "../../shared/config/config.ts";
import { formatDecimal } from "../../shared/k8s/quantity.ts";
import { fromLabelSelector } from "../../shared/k8s/selector.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { buildProviders, loadProviderModules } from "../../shared/providers/registry.ts";
import type { Provider } from "../../shared/providers/types.ts";

export { SeriesTier };

const counts = newTierCounts();
let env: Record<string, unknown> = {};
let built: Promise<{ config: BridgeConfig; providers: Map<string, Provider>; digest: string; tiers: Map<string, DurableObjectTier> }> | undefined;

function build(text: string) {
  built ??= (async () => {
    const { config } = loadConfig(text, "<binding:BRIDGE_CONFIG>");
    const strings: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) if (typeof v === "string") strings[k] = v;
    await loadProviderModules(config.providers);
    const providers = buildProviders(config.providers, { env: strings, now: () => Date.now(), longLived: false });
    const digest = await configTextDigest(text);
    const tiers = new Map<string, DurableObjectTier>();
    for (const [name, p] of Object.entries(config.providers)) {
      if (p.sharedCache?.type !== "durableObject") continue;
      tiers.set(name, new DurableObjectTier({ provider: name, config: p.sharedCache, configDigest: digest, bindings: () => env, log: (r) => console.log(JSON.stringify(r)), counts }));
    }
    return { config, providers, digest, tiers };
  })();
  return built;
}

export default {
  async fetch(request: Request, workerEnv: Record<string, unknown>, ctx: unknown): Promise<Response> {
    env = workerEnv;
    if (new URL(request.url).pathname !== "/tier-read") return worker.fetch(request, workerEnv, ctx as never);
    const { metric, labels, namespace } = (await request.json()) as { metric: string; labels: Record<string, string>; namespace: string };
    const { config, providers, digest, tiers } = await build(workerEnv["BRIDGE_CONFIG"] as string);
    const rule = config.metrics.find((r) => r.name === metric)!;
    const provider = providers.get(rule.provider)!;
    const tier = tiers.get(rule.provider)!;
    const uncached = { ...rule, cacheTTLSeconds: 0 };
    const signal = AbortSignal.timeout(3000);
    try {
      const { reading, source } = await tier.read({
        key: tierKey(rule.provider, digest, `${rule.index}\u0000${namespace}\u0000${JSON.stringify(labels)}`),
        ttlMs: ruleCacheTtlMs(rule),
        series: { provider: rule.provider, ruleIndex: rule.index!, labels, namespace },
        load: async (s) => {
          const [series] = await provider.query({ rule: uncached, selector: fromLabelSelector({ matchLabels: labels }), namespace, signal: s });
          return { value: series!.value, timestamp: series!.timestamp };
        },
        signal,
      });
      return Response.json({ source, value: formatDecimal(reading.value), timestamp: reading.timestamp, counts });
    } catch (err) {
      if (err instanceof StatusError) return Response.json({ code: err.code, message: err.message, counts });
      return Response.json({ error: String((err as Error)?.message ?? err), counts }, { status: 500 });
    }
  },
};
