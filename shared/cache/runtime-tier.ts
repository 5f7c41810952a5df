/**
 * The shared read tier of the Node server and Lambda (issue 28): the
 * `RuntimeEnv.sharedTier` they pass (shared/providers/types.ts), which
 * `buildProviders` calls for each provider instance with a `sharedCache:`.
 *
 * - `type: dynamodb` → a {@link LazyTier} over `./dynamodb-tier.ts`, whose
 *   module (and the DynamoDB client) is imported on the first read, so a
 *   config without a DynamoDB tier never loads them (a chunk of its own in
 *   the Lambda artifact and the Node bundle);
 * - `type: durableObject` → refused at load: Durable Objects exist on
 *   Cloudflare Workers only.
 *
 * No `node:` import here: the module is small and runtime-neutral; the
 * DynamoDB module it loads is Node-only.
 */
import type { RuntimeEnv } from "../providers/types.ts";
import type { SharedCacheConfig, SharedTier, TierOutcome, TierRequest } from "./shared-tier.ts";

/**
 * The `RuntimeEnv.sharedTier` of the Node server and Lambda.
 *
 * @param runtime its `env` (region, `environment` credentials) and clock
 * @returns a factory that throws, naming the provider, for a
 *   `durableObject` tier, or a `dynamodb` tier without a region (neither
 *   `sharedCache.region` nor `AWS_REGION`/`AWS_DEFAULT_REGION`)
 */
export function nodeSharedTier(runtime: Pick<RuntimeEnv, "env" | "now">): NonNullable<RuntimeEnv["sharedTier"]> {
  return (provider: string, config: SharedCacheConfig): SharedTier => {
    if (config.type !== "dynamodb") {
      throw new Error(
        `provider ${provider}: sharedCache type ${config.type} is served by the Cloudflare Worker only (a Durable Object namespace); on the Node server and Lambda use sharedCache type dynamodb (docs/shared-cache.md)`,
      );
    }
    const region = config.region ?? (runtime.env["AWS_REGION"] || undefined) ?? (runtime.env["AWS_DEFAULT_REGION"] || undefined);
    if (region === undefined) throw new Error(`provider ${provider}: sharedCache (dynamodb, table ${config.table}) needs a region: set sharedCache.region, or AWS_REGION in the environment`);
    return new LazyTier("dynamodb", async () => (await import("./dynamodb-tier.ts")).createDynamoDbTier(provider, config, region, runtime));
  };
}

/**
 * A tier whose implementation is built on its first read (a dynamic
 * `import()`): until then nothing of it is loaded. A failed build is not
 * kept (the next read tries again); meanwhile reads go `direct`, with the
 * build's error as their reason.
 */
export class LazyTier implements SharedTier {
  readonly type: SharedCacheConfig["type"];
  readonly #build: () => Promise<SharedTier>;
  #tier: Promise<SharedTier> | undefined;
  #closed = false;

  constructor(type: SharedCacheConfig["type"], build: () => Promise<SharedTier>) {
    this.type = type;
    this.#build = build;
  }

  async read(request: TierRequest): Promise<TierOutcome> {
    let tier: SharedTier;
    try {
      if (this.#closed) throw new Error("the tier is closed");
      const pending = (this.#tier ??= this.#build());
      try {
        tier = await pending;
      } catch (err) {
        if (this.#tier === pending) this.#tier = undefined;
        throw err;
      }
    } catch (err) {
      return { reading: await request.load(request.signal), source: "direct", reason: `the ${this.type} tier could not be built: ${(err as Error).message}` };
    }
    return tier.read(request);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    void this.#tier?.then((tier) => tier.close?.()).catch(() => {});
  }
}
