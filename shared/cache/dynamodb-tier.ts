/**
 * The shared read tier on DynamoDB (issue 28; the contract:
 * `./shared-tier.ts`): one item per series in a table the operator made
 * (partition key `k`, string; DynamoDB TTL on `ttl`), read and written with
 * the AWS SDK v3 client. Node server and Lambda only; loaded lazily
 * (`./runtime-tier.ts`), so a config without `sharedCache:` never loads the
 * DynamoDB client.
 *
 * The item of a series:
 *
 * | attribute | type | what |
 * |---|---|---|
 * | `k` | S | `<provider>#<SHA-256 of tierKey, base64url>`: bounded, whatever the series key's length |
 * | `r` | S | the reading, JSON `{"v": value as decimal text, "t": timestamp ms, "w"?: windowSeconds}` |
 * | `storedAt` | N | when the reading was stored, ms since epoch |
 * | `ttl` | N | epoch seconds after which DynamoDB may delete the item (its TTL attribute; deletion is lazy, so reads never rely on it) |
 * | `leaseUntil` | N | while a load is under way: when its lease ends, ms |
 * | `holder` | S | the tier instance holding the lease (a random id per process and provider) |
 *
 * One read ({@link DynamoDbTier.read}):
 *
 * 1. `GetItem` (ConsistentRead): a reading stored within `ttlMs` →
 *    `tier-hit`;
 * 2. else, when no live lease is on the item, a conditional `UpdateItem`
 *    takes the lease (`attribute_not_exists(leaseUntil) OR leaseUntil <
 *    :now`, and no reading stored within `ttlMs`): the winner calls
 *    `load`, then `PutItem`s the reading (which clears the lease) →
 *    `tier-load`; a failed load clears the lease and stores nothing (the
 *    failure is the caller's, never a value; every instance reads again);
 * 3. the others poll (`GetItem` every ~50 ms, jittered ±50 %) until a fresh
 *    reading (`tier-wait`), the lease ends (then they try to take it), or
 *    their wait budget ({@link MAX_WAIT_MS}) ends (then `direct`).
 *
 * Every call has the config's `timeoutMs` (and the read's signal); any tier
 * error or timeout — unreachable, throttled, no table, no permission — makes
 * the read `direct`: the instance calls `load` itself and the reading is
 * not stored. A reading that cannot be parsed is treated as absent (then
 * overwritten). The tier keeps nothing in memory but its client: the
 * provider's coalescing cache fronts it, so one instance asks the tier once
 * per series per `cacheTTLSeconds`.
 *
 * DynamoDB API: `GetItem`, `UpdateItem` (ConditionExpression; a failed
 * condition is `ConditionalCheckFailedException`), `PutItem` —
 * https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/.
 */
import { createHash, randomUUID } from "node:crypto";
import { DynamoDBClient, GetItemCommand, PutItemCommand, UpdateItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { callSignal } from "../deadline.ts";
import { formatDecimal, parseDecimal } from "../k8s/quantity.ts";
import { awsClientOptions } from "../providers/aws/common.ts";
import type { Reading } from "../providers/series.ts";
import type { RuntimeEnv } from "../providers/types.ts";
import type { SharedCacheConfig, SharedTier, TierOutcome, TierRequest } from "./shared-tier.ts";

/** The `dynamodb` variant of a `sharedCache:`. */
export type DynamoDbTierConfig = Extract<SharedCacheConfig, { type: "dynamodb" }>;

/** Longest a reader waits for another instance's load before reading directly, ms: leaves half the 3 s read budget to its own read. */
export const MAX_WAIT_MS = 1500;

/** Mean pause between two polls of a waiting reader, ms (jittered ±50 %). */
export const POLL_STEP_MS = 50;

/** Longest stored reading, characters of its JSON (a decimal of up to 1,000 digits, shared/k8s/quantity.ts, fits): a larger one is not stored. */
export const MAX_READING_CHARS = 4096;

/** Seconds an item outlives its freshness before DynamoDB's TTL may delete it. */
const TTL_MARGIN_SECONDS = 60;

/** What {@link DynamoDbTier} is built from. */
export interface DynamoDbTierOptions {
  /** the provider instance (the first part of every item key) */
  provider: string;
  config: DynamoDbTierConfig;
  /** the DynamoDB client (built by the caller: region, endpoint, credentials; `maxAttempts: 1`) */
  client: DynamoDBClient;
  /** clock, ms since epoch */
  now: () => number;
  /** longest wait for another instance's load, ms (default {@link MAX_WAIT_MS}) */
  maxWaitMs?: number;
}

/** The tier failed (any DynamoDB error or timeout): the read goes `direct`. */
class TierFault extends Error {
  override name = "TierFault";
}

/** A shared read tier on one DynamoDB table (see the module doc). */
export class DynamoDbTier implements SharedTier {
  readonly type = "dynamodb" as const;
  readonly #o: DynamoDbTierOptions;
  readonly #holder = randomUUID();
  readonly #maxWaitMs: number;
  #closed = false;

  constructor(options: DynamoDbTierOptions) {
    this.#o = options;
    this.#maxWaitMs = options.maxWaitMs ?? MAX_WAIT_MS;
  }

  /** The item key of a tier key: `<provider>#<SHA-256 base64url>` (at most ~300 bytes, DynamoDB allows 2,048). */
  itemKey(key: string): string {
    return `${this.#o.provider}#${createHash("sha256").update(key).digest("base64url")}`;
  }

  async read(request: TierRequest): Promise<TierOutcome> {
    const k = this.itemKey(request.key);
    const waitUntil = this.#o.now() + this.#maxWaitMs;
    let waited = false;
    try {
      for (;;) {
        const item = await this.#get(k, request.signal);
        const now = this.#o.now();
        const stored = freshReading(item, now, request.ttlMs);
        if (stored !== undefined) return { reading: stored, source: waited ? "tier-wait" : "tier-hit" };
        const leaseUntil = numberOf(item?.["leaseUntil"]);
        if (leaseUntil === undefined || leaseUntil < now) {
          if (await this.#takeLease(k, now, request.ttlMs, request.signal)) return await this.#loadAsHolder(k, request);
        }
        // another instance loads: wait for its reading, its lease's end, or our budget's
        if (this.#o.now() >= waitUntil) return await direct(request, `waited ${this.#maxWaitMs} ms for another instance's load`);
        waited = true;
        await sleep(POLL_STEP_MS * (0.5 + Math.random()), request.signal);
      }
    } catch (err) {
      if (!(err instanceof TierFault)) throw err;
      return await direct(request, err.message);
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#o.client.destroy();
  }

  /** The lease holder's part: load, store the reading (clearing the lease), or clear the lease on failure. */
  async #loadAsHolder(k: string, request: TierRequest): Promise<TierOutcome> {
    let reading: Reading;
    try {
      reading = await request.load(request.signal);
    } catch (err) {
      // never stored: release the lease so that the next reader loads at once (best effort; it ends by itself at leaseUntil)
      await this.#release(k).catch(() => {});
      throw err;
    }
    const r = encodeReading(reading);
    if (r.length > MAX_READING_CHARS) {
      await this.#release(k).catch(() => {});
      return { reading, source: "direct", reason: `reading of ${r.length} characters not stored (at most ${MAX_READING_CHARS})` };
    }
    try {
      await this.#put(k, r, request.ttlMs);
    } catch (err) {
      // the reading is right, only not shared: the others load it themselves (their lease wait ends with the lease)
      return { reading, source: "direct", reason: (err as Error).message };
    }
    return { reading, source: "tier-load" };
  }

  /** One DynamoDB call under the tier's deadline and the read's signal; a failure or timeout becomes a {@link TierFault} (the read's own abort is rethrown as it is). */
  async #call<T>(what: string, signal: AbortSignal | undefined, send: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    if (this.#closed) throw new TierFault("the tier is closed");
    const bound = callSignal(signal, this.#o.config.timeoutMs);
    try {
      return await send(bound.signal);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if ((err as { name?: string }).name === "ConditionalCheckFailedException") throw err;
      const text = bound.signal.aborted ? `did not answer within ${this.#o.config.timeoutMs} ms` : `${(err as { name?: string }).name ?? "Error"}: ${(err as Error).message}`;
      throw new TierFault(`DynamoDB ${what} on table ${this.#o.config.table} failed: ${text}`);
    } finally {
      bound.dispose();
    }
  }

  async #get(k: string, signal: AbortSignal): Promise<Record<string, AttributeValue> | undefined> {
    const out = await this.#call("GetItem", signal, (abortSignal) =>
      this.#o.client.send(new GetItemCommand({ TableName: this.#o.config.table, Key: { k: { S: k } }, ConsistentRead: true }), { abortSignal }),
    );
    return out.Item;
  }

  /** Take the lease of `k` unless another instance holds a live one or a reading fresh for `ttlMs` is stored; whether it was taken. */
  async #takeLease(k: string, now: number, ttlMs: number, signal: AbortSignal): Promise<boolean> {
    const leaseUntil = now + this.#o.config.leaseMs;
    try {
      await this.#call("UpdateItem", signal, (abortSignal) =>
        this.#o.client.send(
          new UpdateItemCommand({
            TableName: this.#o.config.table,
            Key: { k: { S: k } },
            UpdateExpression: "SET leaseUntil = :until, holder = :me, #ttl = if_not_exists(#ttl, :ttl)",
            ConditionExpression: "(attribute_not_exists(leaseUntil) OR leaseUntil < :now) AND (attribute_not_exists(storedAt) OR storedAt < :fresh)",
            ExpressionAttributeNames: { "#ttl": "ttl" },
            ExpressionAttributeValues: {
              ":until": { N: String(leaseUntil) },
              ":me": { S: this.#holder },
              ":ttl": { N: String(Math.ceil(leaseUntil / 1000) + TTL_MARGIN_SECONDS) },
              ":now": { N: String(now) },
              ":fresh": { N: String(now - ttlMs) },
            },
          }),
          { abortSignal },
        ),
      );
      return true;
    } catch (err) {
      if ((err as { name?: string }).name === "ConditionalCheckFailedException") return false;
      throw err;
    }
  }

  /** Store the reading `r` of `k` (clearing the lease: the item is replaced whole). */
  async #put(k: string, r: string, ttlMs: number): Promise<void> {
    const storedAt = this.#o.now();
    await this.#call("PutItem", undefined, (abortSignal) =>
      this.#o.client.send(
        new PutItemCommand({
          TableName: this.#o.config.table,
          Item: {
            k: { S: k },
            r: { S: r },
            storedAt: { N: String(storedAt) },
            ttl: { N: String(Math.ceil((storedAt + ttlMs) / 1000) + TTL_MARGIN_SECONDS) },
          },
        }),
        { abortSignal },
      ),
    );
  }

  /** Clear this instance's lease of `k` (when the load failed or its reading was not stored). */
  async #release(k: string): Promise<void> {
    try {
      await this.#call("UpdateItem", undefined, (abortSignal) =>
        this.#o.client.send(
          new UpdateItemCommand({
            TableName: this.#o.config.table,
            Key: { k: { S: k } },
            UpdateExpression: "REMOVE leaseUntil, holder",
            ConditionExpression: "holder = :me",
            ExpressionAttributeValues: { ":me": { S: this.#holder } },
          }),
          { abortSignal },
        ),
      );
    } catch (err) {
      if ((err as { name?: string }).name !== "ConditionalCheckFailedException") throw err;
    }
  }
}

/** The tier failed: read directly (the reading is not stored). */
async function direct(request: TierRequest, reason: string): Promise<TierOutcome> {
  return { reading: await request.load(request.signal), source: "direct", reason };
}

/** The reading's item text: `{"v","t","w"?}`. */
export function encodeReading(reading: Reading): string {
  return JSON.stringify({ v: formatDecimal(reading.value), t: reading.timestamp, ...(reading.windowSeconds !== undefined ? { w: reading.windowSeconds } : {}) });
}

/** The reading of an item's text, or undefined when it is not one (then treated as absent). */
export function decodeReading(text: string): Reading | undefined {
  if (text.length > MAX_READING_CHARS) return undefined;
  try {
    const r = JSON.parse(text) as { v?: unknown; t?: unknown; w?: unknown };
    if (typeof r.v !== "string" || typeof r.t !== "number" || !Number.isFinite(r.t)) return undefined;
    if (r.w !== undefined && (typeof r.w !== "number" || !Number.isFinite(r.w) || r.w < 0)) return undefined;
    return { value: parseDecimal(r.v), timestamp: r.t, ...(r.w !== undefined ? { windowSeconds: r.w } : {}) };
  } catch {
    return undefined;
  }
}

/** The item's reading when it was stored within `ttlMs` of `now` (and not in the future by more than that), else undefined. */
function freshReading(item: Record<string, AttributeValue> | undefined, now: number, ttlMs: number): Reading | undefined {
  const storedAt = numberOf(item?.["storedAt"]);
  const text = item?.["r"]?.S;
  if (storedAt === undefined || text === undefined) return undefined;
  if (now - storedAt > ttlMs || storedAt - now > ttlMs) return undefined;
  return decodeReading(text);
}

function numberOf(value: AttributeValue | undefined): number | undefined {
  if (value?.N === undefined) return undefined;
  const n = Number(value.N);
  return Number.isFinite(n) ? n : undefined;
}

/** Resolve after `ms`, or reject with the signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * A {@link DynamoDbTier} with its own client: `region`, `endpoint` and
 * `credentials` of the config (credentials as an AWS provider's, built by
 * shared/providers/aws/common.ts `awsClientOptions`: the SDK's default
 * chain, the runtime's `AWS_*` variables, or static keys), one attempt per
 * call (the tier's deadline is short; a failure reads directly).
 *
 * @param region the region to use (the config's, else the environment's: `./runtime-tier.ts`)
 */
export function createDynamoDbTier(provider: string, config: DynamoDbTierConfig, region: string, runtime: Pick<RuntimeEnv, "env" | "now">): DynamoDbTier {
  const options = awsClientOptions(
    `${provider} (sharedCache)`,
    {
      region,
      ...(config.endpoint !== undefined ? { endpoint: config.endpoint } : {}),
      credentials: config.credentials,
      maxAttempts: 1,
      timeoutSeconds: config.timeoutMs / 1000,
    },
    { env: runtime.env, now: runtime.now },
  );
  return new DynamoDbTier({ provider, config, client: new DynamoDBClient(options), now: runtime.now });
}
