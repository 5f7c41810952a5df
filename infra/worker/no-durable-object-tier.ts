/**
 * Stand-in for `shared/cache/durable-object-tier.ts` in a Worker built for
 * a config that uses no `sharedCache: { type: durableObject }`
 * (`infra/worker/build.ts --config FILE`: alias
 * `../shared/cache/durable-object-tier.ts`), so such a script does not carry
 * the shared read tier (≈ 3 KiB gzip). The `SeriesTier` class wrangler.toml
 * binds must still be exported: here it answers every call 503 (an isolate
 * reading through it would read directly). A config that does name the tier
 * (a `BRIDGE_CONFIG` binding other than the config built for) is refused
 * when the Worker loads it, with this message.
 */
import type { SharedTier } from "../../shared/cache/shared-tier.ts";

/** The message of a config naming the tier in a build without it. */
export const NOT_BUILT = "sharedCache type durableObject is not in this build (built for a config without it); build the Worker with that config, or with every provider (docs/deploy.md, \"Bundle size\")";

/** Not used without the tier: the digest of nothing. */
export async function configTextDigest(_text: string): Promise<string> {
  return "";
}

/** Refuses: the tier is not in this build. @throws Error {@link NOT_BUILT} */
export class DurableObjectTier implements Partial<SharedTier> {
  constructor(_options: unknown) {
    throw new Error(NOT_BUILT);
  }
}

/** What the Worker's `SeriesTier` extends: an object that serves nothing. */
export class SeriesTierObject {
  constructor(_state: unknown, _env: unknown, _source: unknown) {}
  async fetch(_request: Request): Promise<Response> {
    return new Response(JSON.stringify({ error: NOT_BUILT }), { status: 503, headers: { "content-type": "application/json" } });
  }
  async alarm(): Promise<void> {}
}

export type DurableObjectStateLike = unknown;
