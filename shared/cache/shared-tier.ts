/**
 * The shared read tier (issue 28): one cloud call per series for a whole
 * fleet of bridge instances — Worker isolates, Lambda execution
 * environments, Node replicas — on a store the platform already runs.
 *
 * Where it sits: behind each provider instance's coalescing cache and in
 * front of its batcher (`../providers/series.ts` `SeriesProvider`): a local
 * cache miss asks the tier for the series, keyed by {@link tierKey} (the
 * provider instance, its config and the series' own key — never a caller,
 * since policy has decided before any read). The tier answers a stored
 * reading no older than the rule's `cacheTTLSeconds`, or has exactly one
 * instance of the fleet load it (a lease, or the Durable Object that holds
 * it) while the others wait for that load.
 *
 * What it never does: turn a failure into a value (a failed load is not
 * stored as a reading; a reader whose load failed gets that StatusError),
 * or serve past `maxAgeSeconds` (every reader checks the reading's own
 * timestamp as for a local read, shared/values/answer.ts). When the tier
 * itself is unreachable, slow (its own deadline, inside the 3 s read
 * budget) or refuses, the instance reads the cloud directly and says so
 * ({@link TierOutcome.source} `direct`, counted and logged).
 *
 * Implementations: `dynamodb` (Lambda and Node: a conditional-write lease
 * per series and a TTL'd item) and `durableObject` (Workers: a Durable
 * Object per provider instance and shard that holds the cache, the batcher
 * and refresh-ahead driven by alarms). Config: a provider's `sharedCache:`
 * ({@link sharedCacheSchema}).
 */
import * as z from "../config/zod.ts";
import type { Decimal } from "../k8s/quantity.ts";

/**
 * One series' value as the tier stores and answers it: the provider's
 * `Reading` (`../providers/series.ts`, a `Series` without its labels),
 * written out here so that this contract imports nothing of the providers
 * (which import it).
 */
export interface Reading {
  /** the exact decimal value */
  value: Decimal;
  /** ms since epoch at which the backend observed the value */
  timestamp: number;
  /** set when the value aggregates `[timestamp − window, timestamp]` */
  windowSeconds?: number;
}

/** Longest tier deadline, ms: a tier call must leave most of the 3 s read budget (shared/deadline.ts) to a direct read. */
export const MAX_TIER_TIMEOUT_MS = 1000;

/** Where the DynamoDB tier's client gets credentials: an AWS provider's `credentials:` sources (shared/providers/aws/common.ts `awsCredentialsSchema`) without `assumeRole` — the table is the bridge's, never a namespace's. */
export const tierCredentialsSchema = z.discriminatedUnion("source", [
  z.strictObject({ source: z.literal("default") }),
  z.strictObject({ source: z.literal("environment") }),
  z.strictObject({
    source: z.literal("static"),
    accessKeyId: z.string().check(z.minLength(1)),
    secretAccessKey: z.string().check(z.minLength(1)),
    sessionToken: z.optional(z.string().check(z.minLength(1))),
  }),
]);

/**
 * A provider instance's `sharedCache:` (opt-in; absent: none, each instance
 * reads the cloud itself, as before):
 *
 * - `{ type: dynamodb, table, region?, endpoint?, credentials?, timeoutMs?, leaseMs? }`:
 *   a DynamoDB table (partition key `k`, string; TTL attribute `ttl`) — on
 *   Lambda and the Node server; a Worker refuses it at load. `region`
 *   default: `AWS_REGION` (then `AWS_DEFAULT_REGION`) of the environment;
 *   `credentials` as an AWS provider's without `assumeRole`
 *   (shared/providers/aws/common.ts; default: the SDK's default chain);
 * - `{ type: durableObject, binding?, shards?, timeoutMs? }`: the Worker's
 *   Durable Object namespace `binding` (default `SERIES_TIER`), `shards`
 *   objects per provider instance (series hashed over them) — on Workers
 *   only; Lambda and Node refuse it at load.
 *
 * `timeoutMs`: the deadline of one tier call (default 250 ms, at most
 * {@link MAX_TIER_TIMEOUT_MS}); past it the instance reads the cloud directly.
 */
export const sharedCacheSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("dynamodb"),
    table: z.string().check(z.regex(/^[A-Za-z0-9_.-]{3,255}$/, "a DynamoDB table name: 3-255 of A-Z a-z 0-9 _ . -")),
    region: z.optional(z.string().check(z.minLength(1))),
    endpoint: z.optional(z.url()),
    credentials: z._default(tierCredentialsSchema, { source: "default" }),
    timeoutMs: z._default(z.number().check(z.int(), z.minimum(10), z.maximum(MAX_TIER_TIMEOUT_MS)), 250),
    /** how long a lease holder may take to store the reading before another instance may take over, ms (default 3000: one read deadline) */
    leaseMs: z._default(z.number().check(z.int(), z.minimum(100), z.maximum(10_000)), 3000),
  }),
  z.strictObject({
    type: z.literal("durableObject"),
    binding: z._default(z.string().check(z.regex(/^[A-Z][A-Z0-9_]*$/, "a Worker binding name (A-Z, 0-9, _)")), "SERIES_TIER"),
    shards: z._default(z.number().check(z.int(), z.minimum(1), z.maximum(256)), 16),
    timeoutMs: z._default(z.number().check(z.int(), z.minimum(10), z.maximum(MAX_TIER_TIMEOUT_MS)), 250),
  }),
]);

/** A validated `sharedCache:`. */
export type SharedCacheConfig = z.infer<typeof sharedCacheSchema>;

/** Where a reading came from: stored in the tier, loaded by this instance for the fleet, or read directly because the tier failed. */
export type TierSource = "tier-hit" | "tier-load" | "tier-wait" | "direct";

/** A tier read's result: the reading and where it came from. */
export interface TierOutcome {
  reading: Reading;
  source: TierSource;
  /** with `direct`: why the tier failed (an error text, no secret), for the instance's warning */
  reason?: string;
}

/**
 * What the Durable Object tier needs to run the same read itself (the
 * DynamoDB tier ignores it: the caller's `load` reads): the provider
 * instance, the rule's position in the config, the series' labels and the
 * namespace (the identity of per-namespace credentials).
 */
export interface TierSeries {
  provider: string;
  /** `MetricRule.index`: the rule's position in the config's `metrics:` */
  ruleIndex: number;
  labels: Readonly<Record<string, string>>;
  namespace: string;
}

/** One read through the tier. */
export interface TierRequest {
  /** {@link tierKey} of the series */
  key: string;
  /** how old a stored reading may be to be served, ms (the rule's `cacheTTLSeconds`) */
  ttlMs: number;
  /** the series, for a tier that reads itself */
  series: TierSeries;
  /** read the cloud (the provider's batcher): for a lease holder, and for the direct fallback */
  load: (signal: AbortSignal) => Promise<Reading>;
  /** aborts when no reader waits any more */
  signal: AbortSignal;
}

/** A shared read tier (see the module doc). */
export interface SharedTier {
  readonly type: SharedCacheConfig["type"];
  /**
   * Read a series through the tier. Never resolves a failed load as a value.
   *
   * @returns the reading and its source (`direct` when the tier failed and
   *   `load` was called by this instance)
   * @throws StatusError the load's own failure (whoever loaded it)
   */
  read(request: TierRequest): Promise<TierOutcome>;
  /** stop background work and close clients; idempotent */
  close?(): void;
}

/**
 * The tier key of a series: the provider instance's name, a digest of its
 * config (so two configs sharing a table or namespace never share a key),
 * and the series' key (which carries the identity of per-namespace
 * credentials, and no caller).
 */
export function tierKey(provider: string, configDigest: string, seriesKey: string): string {
  return `${provider}\u0000${configDigest}\u0000${seriesKey}`;
}
