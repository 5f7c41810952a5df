/**
 * The provider contract: how a metric rule becomes backend reads.
 *
 * The whole extension point, in the manner of custom-metrics-apiserver's
 * `pkg/provider/interfaces.go`: a provider module declares the schema of its
 * provider instances and of its rules' `query` section, and builds a
 * {@link Provider} that answers one resolved rule plus one parsed selector
 * with a list of series. A provider's optional parts — answering from its
 * cache without I/O (`peek`), stopping its background work (`close`), its
 * cache's outcomes for the exporter (`cache.stats`) — are part of the
 * contract here, so no caller needs to guess at them. New providers are
 * added to `provider-list.ts` without touching the others.
 */
import type { ZodMiniType } from "zod/mini";
import type { CacheStats } from "../cache/coalescing.ts";
import type { Decimal } from "../k8s/quantity.ts";
import type { Selector } from "../k8s/selector.ts";
import type { BridgeMetrics } from "../observability/metrics.ts";
import type { LogRecord } from "../observability/log.ts";
import type { SharedCacheConfig, SharedTier } from "../cache/shared-tier.ts";

/**
 * One time series as a backend reported it.
 * - `labels`: the complete label set identifying the series (becomes
 *   `metricLabels`).
 * - `value`: the exact decimal value (never a float rounded by us).
 * - `timestamp`: ms since epoch at which the backend observed the value.
 * - `windowSeconds`: set when the value aggregates `[timestamp − window, timestamp]`.
 */
export interface Series {
  labels: Record<string, string>;
  value: Decimal;
  timestamp: number;
  windowSeconds?: number;
}

/** A metric rule after config validation, with its provider-specific query. */
export interface MetricRule<Q = unknown> {
  /** the configured name (as written in the config) */
  name: string;
  /** lowercased lookup key, `|` and `\|` already turned into `/` */
  key: string;
  /** name of the provider instance in `providers:` */
  provider: string;
  /** longest age of a served value, seconds; cached values older are never served */
  maxAgeSeconds: number;
  /** how long a read is re-used, seconds (≤ maxAgeSeconds) */
  cacheTTLSeconds: number;
  /** human description for discovery and CLI output */
  description?: string;
  /** its index in the config file's `metrics:` list (External and custom rules are kept in two lists) */
  index?: number;
  /** the provider-specific query, validated by the provider module's schema */
  query: Q;
  /**
   * the Kubernetes object the metric describes: a custom.metrics.k8s.io
   * rule (Pods and Object metrics, docs/architecture.md "A custom read");
   * absent: an External metric rule
   */
  describes?: MetricDescribes;
}

/**
 * What a custom metric rule describes, and how the described object becomes
 * a label of the provider's query. The bridge turns a custom read into the
 * rule's own selector mapping: `objectLabel=<the object's identifier>` (for
 * a Pods read `objectLabel in (<pod names>)`), plus `namespaceLabel=<ns>`
 * when set, plus the read's `metricLabelSelector`.
 */
export interface MetricDescribes {
  /** the group resource as clients write it: `pods`, `namespaces` (the `metrics` pseudo-resource), `ingresses.networking.k8s.io` */
  resource: string;
  /** the selector label that carries the object's identifier (one of the rule's mapped labels, e.g. `pod`, `queue`) */
  objectLabel: string;
  /** the selector label that carries the read's namespace, when the series are labelled with it */
  namespaceLabel?: string;
  /** where the identifier comes from: the object's name (default), a label, an annotation, or a field under `status` */
  identifier: { from: "name" } | { from: "label" | "annotation"; key: string } | { from: "status"; path: readonly string[] };
  /** RE2 patterns the identifier must match whole, case-sensitively (compiled: shared/policy/regex.ts `compileIdentifierPattern`); absent: any */
  allow?: readonly { source: string; matches(identifier: string): boolean }[];
}

/** What a provider plans from: one rule, one selector, one namespace. */
export interface PlanRequest<Q = unknown> {
  rule: MetricRule<Q>;
  /** the parsed `labelSelector` (empty when the request sent none) */
  selector: Selector;
  /** the request namespace */
  namespace: string;
  /**
   * A label set the backend has no data for (the rule's `onEmpty` is not a
   * value): `fail` the read (default; an External read, whose items the HPA
   * sums) or `omit` it from the answer (a custom.metrics Pods read: a pod
   * without an item is "missing" to the HPA, which never reads it as 0,
   * k8s.io/kubernetes `pkg/controller/podautoscaler/replica_calculator.go`).
   * Any other failure fails the read either way.
   */
  noData?: "fail" | "omit";
  /**
   * Most series the selector may name (default `MAX_SERIES_PER_REQUEST`,
   * 100, `./label-mapping.ts`): a custom.metrics Pods read names one series
   * per pod, up to `MAX_PODS_PER_READ` (1,000: shared/values/custom-read.ts),
   * which the proxy resolved and signed; the series are then batched by the
   * provider's `maxBatchSize` as any others.
   */
  maxSeries?: number;
}

/** What a provider receives for one request. */
export interface QueryRequest<Q = unknown> extends PlanRequest<Q> {
  /**
   * Cancellation of this read. The values read (`shared/values/read.ts`) aborts it at the
   * bridge's request deadline (`REQUEST_DEADLINE_MS`, 3 s, `shared/deadline.ts`;
   * reason: a `TimeoutError` DOMException) and when the client goes away
   * (the incoming request's own signal; its reason). A provider passes it
   * to every backend call — AWS SDK v3 `client.send(command, { abortSignal })`,
   * `fetch(url, { signal })`, gax call options — and, where reads are
   * coalesced, to `CoalescingCache.get(key, ttl, load, { signal })` so that a
   * load nobody waits for any more is cancelled. Its own per-call limit
   * (`timeoutSeconds`) is combined with it (`callSignal`), never extends past it.
   */
  signal: AbortSignal;
}

/**
 * A configured provider instance.
 *
 * `query` resolves to at least one series, or throws a StatusError:
 * 400 when the selector cannot be mapped exactly (naming the requirement),
 * 404 when the series' object does not exist (e.g. a queue), 503 with
 * `Retry-After` when the backend failed, timed out, was throttled (the
 * cloud's own hint, clamped to [1 s, 30 s]; 1 s for other failures) or
 * answered something that must not be served (a negative depth, pagination
 * cut at the provider's page limit), 500 for credential or permission
 * faults. It never resolves to an empty list and never invents a value (no 0
 * for a failed read). When `request.signal` aborts, it rejects promptly
 * (with the signal's reason or a 503) and leaves no backend call running
 * that nobody waits for.
 */
export interface Provider<Q = unknown> {
  /** instance name from the config */
  readonly name: string;
  /** module type, e.g. `aws-sqs` */
  readonly type: string;
  /**
   * Check that `selector` can be mapped exactly for `rule`, without any
   * backend call. Throws StatusError 400 naming the unmappable requirement.
   * Returns a human description of the backend query (for CLI `check-hpa`).
   */
  plan(request: PlanRequest<Q>): string;
  /**
   * Read the series the request identifies. See the interface doc for
   * errors. The series' `labels` may be frozen objects shared between reads
   * (`SeriesProvider`): read them, never change them.
   */
  query(request: QueryRequest<Q>): Promise<Series[]>;
  /**
   * The series {@link query} would resolve to right now, when every one of
   * them is a fresh cache hit; undefined when any needs a load (then the app
   * calls `query` with its deadline). Synchronous, no I/O: never starts a
   * backend call. On a hit the app serves the answer at once — no deadline
   * timer, no AbortController, no race (issue 11 P1). The series' `labels`
   * may be frozen objects shared by every hit (read them, never change
   * them); the app keeps a built answer while the same label objects and
   * `Decimal` values come back. Absent: every read goes through `query`.
   * `SeriesProvider.peek` (`./series.ts`).
   *
   * @throws StatusError 400/404 exactly as `query` would (label resolution)
   */
  peek?(request: PlanRequest<Q>): Series[] | undefined;
  /**
   * Stop the instance's background work (e.g. CloudWatch refresh-ahead: its
   * timer and refreshes in flight), when the process stops serving with it
   * (the Node server's and the proxy's in-process bridge's close). Idempotent;
   * reads keep working, without the background work. Absent: nothing runs
   * in the background.
   */
  close?(): void;
  /**
   * The instance's read cache, of which the Node exporter reads `stats` — its
   * outcomes since the instance was built, a live view — at scrape time
   * (`emb_bridge_cache_requests_total`, `shared/observability/prometheus.ts`).
   * `SeriesProvider.cache`, a `CoalescingCache` (`../cache/coalescing.ts`). Absent: the
   * provider has no cache to report.
   */
  readonly cache?: { readonly stats: ProviderCacheStats };
  /**
   * Read through the shared read tier `tier` from now on (issue 28): each
   * local cache miss — reads and refresh-ahead alike — asks the tier, which
   * answers a reading the fleet stored or has one instance load it
   * (`SeriesProvider`, `./series.ts`). Called once, by `buildProviders`
   * (`./registry.ts`), before any read. `options.configDigest` goes into
   * every tier key (`tierKey`); `options.log` (default: the shared logger on
   * the console at `LOG_LEVEL`) gets the rate-limited warning that reads
   * went `direct` because the tier failed. The provider closes the tier on
   * {@link close}. Absent: the provider cannot use a tier (a `sharedCache:`
   * for it is refused at load).
   */
  useTier?(tier: SharedTier, options: TierOptions): void;
}

/** What {@link Provider.useTier} needs besides the tier. */
export interface TierOptions {
  /** digest of the provider instance's config (`configDigest`, `./registry.ts`), part of every tier key */
  configDigest: string;
  /** where the rate-limited "tier failed, read directly" warning goes; absent: the console logger at `LOG_LEVEL` */
  log?: (record: LogRecord) => void;
}

/**
 * A provider's cache outcomes, counters since the instance was built
 * (`CacheStats` of `../cache/coalescing.ts`, which `SeriesProvider` reports whole):
 * `hits` (reads answered from a fresh stored value), `failureHits` (from a
 * stored failure), `coalesced` (reads that joined a load in flight),
 * `loads` (backend loads started) and `refreshes` (the refresh-ahead and
 * renewal loads among them). The exporter's `miss` is `loads − refreshes`.
 */
export type ProviderCacheStats = Readonly<Pick<CacheStats, "hits" | "failureHits" | "coalesced" | "loads" | "refreshes">>;

/**
 * How providers reach their backends, chosen by the entry point, keyed by
 * module `type`; a module uses its own default for an absent key.
 *
 * Empty here: the generic contract names no provider. A provider that takes
 * a transport declares its own key and type in its folder, by augmenting
 * this interface (`declare module "../types.ts"`), and reads its entry
 * itself — `gcp-monitoring`: `./gcp-monitoring/transport.ts`. The compiler
 * then refuses a wrong value or an unknown key, as if it were listed here.
 */
export interface ProviderTransports {}

/**
 * Runtime bindings a provider may use: an environment bag (process.env on
 * Node and Lambda, Worker vars and secrets on Cloudflare) and a clock.
 */
export interface RuntimeEnv {
  env: Readonly<Record<string, string | undefined>>;
  now: () => number;
  /** the entry point's choice of transports, see {@link ProviderTransports} */
  transports?: Readonly<ProviderTransports>;
  /** where backend calls and failures are counted (`shared/observability/metrics.ts`); absent: not counted */
  metrics?: BridgeMetrics;
  /**
   * whether this process may keep work running between requests (e.g.
   * CloudWatch refresh-ahead timers): the Node server and the proxy's
   * in-process bridge pass true, Lambda and the Worker false; absent: guessed
   * (`refresh-ahead.ts` `longLivedProcess`)
   */
  longLived?: boolean;
  /**
   * The entry point's shared read tier (issue 28, `../cache/shared-tier.ts`)
   * for a provider instance with a `sharedCache:`: called once per such
   * instance by `buildProviders` (`./registry.ts`) with the instance's name,
   * its validated `sharedCache:` and a digest of the instance's config
   * (`configDigest`, `./registry.ts`: two configs never share a tier key).
   * Synchronous and without I/O (a tier loads its client lazily, on its
   * first read). Node and Lambda build a DynamoDB tier
   * (`../cache/dynamodb-tier-factory.ts`), the Worker a Durable Object one.
   *
   * @returns the tier, or undefined for none (the instance then reads as without `sharedCache:`)
   * @throws Error naming the provider when this runtime cannot serve that
   *   `type` (a `durableObject` tier on Node or Lambda): the config is refused at load
   * Absent: `sharedCache:` is ignored (the CLI tools, which read nothing).
   */
  sharedTier?: (provider: string, config: SharedCacheConfig, configDigest: string) => SharedTier | undefined;
}

/** A provider implementation: schemas plus a factory. */
export interface ProviderModule<P = unknown, Q = unknown> {
  /** the `type:` value that selects this module in `providers:` */
  readonly type: string;
  /** schema of a provider instance (without `type`) */
  readonly providerSchema: ZodMiniType<P>;
  /** schema of a rule's `query:` section for this provider type */
  readonly querySchema: ZodMiniType<Q>;
  /** build an instance; must not do network I/O */
  create(name: string, config: P, runtime: RuntimeEnv): Provider<Q>;
  /**
   * Checks of a rule that need the implementation and so cannot live in the
   * small, statically imported `querySchema` (e.g. a full parse of a
   * `prometheus` query template with the PromQL grammar). Run at start-up,
   * before serving, for every rule of the provider's instances
   * (`checkRules`, `./registry.ts`, from `shared/bridge.ts` `fromConfig`).
   * No I/O. Absent: the schema checks everything.
   *
   * @throws Error whose message names the rule and the problem
   */
  checkRule?(rule: MetricRule<Q>): void;
  /**
   * Advice about a rule that is valid and served as written but is probably
   * not what its author meant (e.g. a value written for an empty answer).
   * Never refuses a rule: the admin tools show each finding as a warning
   * (`config validate`, `policy lint --config`: `lintRules`, `./registry.ts`).
   * No I/O. Absent: no advice.
   *
   * @returns one finding per problem: `path` is the field inside the rule
   *   (e.g. `["query", "onEmpty"]`), `message` says what happens and when it is right
   */
  lintRule?(rule: MetricRule<Q>): RuleFinding[];
}

/** A {@link ProviderModule.lintRule} finding: a field of the rule and what is probably wrong with it. */
export interface RuleFinding {
  /** field path inside the rule, e.g. `["query", "template"]` */
  path: PropertyKey[];
  message: string;
}
