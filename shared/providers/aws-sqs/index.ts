/**
 * The `aws-sqs` provider: queue depth from Amazon SQS.
 *
 * A rule picks queues through one selector label (default `queue`) and
 * reports one series per queue: the sum of the configured queue attributes
 * read with `GetQueueAttributes`, after resolving the queue's URL with
 * `GetQueueUrl` (Amazon SQS API Reference,
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_GetQueueAttributes.html).
 *
 * SQS attributes are approximate and carry no timestamp of their own; the
 * series timestamp is the moment the read completed, so a cached value shows
 * its true age.
 */
import { GetQueueAttributesCommand, GetQueueUrlCommand, SQSClient, type QueueAttributeName } from "@aws-sdk/client-sqs";
import { CoalescingCache } from "../../cache/coalescing.ts";
import { BACKEND_LOAD_TIMEOUT_MS, withCallSignal } from "../../deadline.ts";
import { addDecimals, parseDecimal, type Decimal } from "../../k8s/quantity.ts";
import { badRequest, notFound, serviceUnavailable, type StatusError } from "../../k8s/status.ts";
import { AwsClients } from "../aws/clients.ts";
import { awsErrorToStatus, awsProviderSchema, type AwsProviderConfig } from "../aws/common.ts";
import { backendFailureTtlMs } from "../backoff.ts";
import type { SeriesNoun } from "../label-mapping.ts";
import { SeriesProvider, type Outcome, type Reading, type SeriesBackend, type SeriesItem } from "../series.ts";
import type { MetricRule, ProviderModule, RuntimeEnv } from "../types.ts";
import { SQS_ATTRIBUTES, sqsQuerySchema, type SqsQuery } from "./schema.ts";

export { SQS_ATTRIBUTES, sqsQuerySchema, type SqsQuery };

/** How long a resolved queue URL is re-used, ms. */
const QUEUE_URL_TTL_MS = 10 * 60_000;

/** SQS queue names: 1–80 of `[A-Za-z0-9_-]`, FIFO queues end in `.fifo` (CreateQueue reference). */
const SQS_QUEUE_NAME = /^(?:[A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$/;

/** The attributes of a query as a sorted, de-duplicated list. */
function attributesOf(query: SqsQuery): QueueAttributeName[] {
  const list = typeof query.attribute === "string" ? [query.attribute] : query.attribute;
  return [...new Set(list)].sort() as QueueAttributeName[];
}

/** How label-resolution messages name an SQS series: "matches no queue", "queue=NAME". */
export const QUEUE_NOUN: SeriesNoun = { one: "queue", many: "queues", placeholder: "NAME" };

/** The SQS queue name for a label value, or 400 when the template yields an invalid name. */
export function queueName(rule: MetricRule<SqsQuery>, labelValue: string): string {
  const name = rule.query.queueNameTemplate.replaceAll("{queue}", labelValue);
  if (!SQS_QUEUE_NAME.test(name)) {
    throw badRequest(
      `metric ${rule.name}: "${name}" (from ${rule.query.queueLabel}="${labelValue}") is not a valid SQS queue name`,
    );
  }
  return name;
}

/**
 * The queue name and owner account of a queue URL label value
 * (`queueIdentifier: url`): `http(s)://{host}/{12-digit account}/{queue name}`,
 * the form `GetQueueUrl` returns (Amazon SQS Developer Guide, "Queue and
 * message identifiers"), without credentials, query or fragment. The host is
 * not trusted here: {@link SqsBackend} resolves (name, account) with
 * `GetQueueUrl` through the provider's own endpoint and serves the queue only
 * when SQS returns exactly this URL, so a URL can never send a request
 * elsewhere.
 *
 * @throws StatusError 400 naming the rule when the value is not such a URL
 */
export function queueOfUrl(rule: MetricRule<SqsQuery>, labelValue: string): { name: string; owner: string } {
  const refuse = (why: string) =>
    badRequest(`metric ${rule.name}: ${JSON.stringify(labelValue.slice(0, 300))} (from ${rule.query.queueLabel}) is not an SQS queue URL: ${why}`);
  let url: URL;
  try {
    url = new URL(labelValue);
  } catch {
    throw refuse("not a URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw refuse("not http(s)");
  if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "" || labelValue.includes("?") || labelValue.includes("#")) {
    throw refuse("credentials, a query or a fragment");
  }
  const match = /^\/(\d{12})\/([^/]+)$/.exec(url.pathname);
  if (match === null || !SQS_QUEUE_NAME.test(match[2]!)) throw refuse("the path is not /{12-digit account}/{queue name}");
  return { name: match[2]!, owner: match[1]! };
}

/** One queue's read: what the series skeleton caches and hands to {@link SqsBackend.read}. */
interface QueueRead extends SeriesItem {
  /** the SQS queue name (from `queueNameTemplate`, or the URL's) */
  name: string;
  owner: string | undefined;
  attributes: QueueAttributeName[];
  /** `queueIdentifier: url`: the URL the read named; served only when GetQueueUrl returns exactly it */
  url?: string;
}

/**
 * The SQS part of an `aws-sqs` provider (`../series.ts` does label
 * resolution, cache and coalescing): one queue per call (SQS has no batched
 * read of several queues' attributes), its URL resolved first through its
 * own cache.
 */
class SqsBackend implements SeriesBackend<SqsQuery, QueueRead> {
  readonly noun = QUEUE_NOUN;
  readonly batching = { maxBatchSize: 1 };
  /** the clients by identity (`../aws/clients.ts`): one per namespace role with `credentials.assumeRole` */
  readonly clients: AwsClients<SQSClient>;
  readonly identity?: (namespace: string) => string;
  /** queue URLs by `identity|name|owner`, re-used for 10 minutes, forgotten when SQS says the queue is gone */
  readonly urls: CoalescingCache<string>;
  private readonly name: string;
  private readonly timeoutMs: number;
  private readonly runtime: RuntimeEnv;

  constructor(name: string, config: AwsProviderConfig, runtime: RuntimeEnv) {
    this.name = name;
    this.runtime = runtime;
    this.timeoutMs = config.timeoutSeconds * 1000;
    this.clients = new AwsClients(name, config, runtime, (options) => new SQSClient(options));
    if (this.clients.perNamespace) this.identity = (namespace) => this.clients.identity(namespace)!;
    this.urls = new CoalescingCache({ now: runtime.now, loadTimeoutMs: BACKEND_LOAD_TIMEOUT_MS, failureTtlMs: backendFailureTtlMs });
  }

  labels(rule: MetricRule<SqsQuery>) {
    const { queueLabel, queues } = rule.query;
    return [queues === undefined ? { label: queueLabel } : { label: queueLabel, values: queues }];
  }

  item(rule: MetricRule<SqsQuery>, labels: Readonly<Record<string, string>>): QueueRead {
    const value = labels[rule.query.queueLabel]!;
    const attributes = attributesOf(rule.query);
    if (rule.query.queueIdentifier === "url") {
      const { name, owner } = queueOfUrl(rule, value);
      return { key: `${name}|${owner}|${attributes.join(",")}|${value}`, name, owner, attributes, url: value };
    }
    const name = queueName(rule, value);
    const owner = rule.query.queueOwnerAWSAccountId;
    return { key: `${name}|${owner ?? ""}|${attributes.join(",")}`, name, owner, attributes };
  }

  describe(rule: MetricRule<SqsQuery>, items: readonly QueueRead[]): string {
    const names = items.map((i) => i.name);
    return `SQS GetQueueAttributes ${attributesOf(rule.query).join("+")} on queue${names.length > 1 ? "s" : ""} ${names.join(", ")}`;
  }

  async read(items: readonly QueueRead[], signal: AbortSignal): Promise<Outcome<Reading>[]> {
    return Promise.all(items.map(async (item) => ({ ok: true as const, value: await this.readQueue(item, signal) })));
  }

  /** {@link read} rejects with StatusErrors only, but for its load signal's own abort reason (nobody waits for it then). */
  error(err: unknown, item: QueueRead): StatusError {
    return awsErrorToStatus(this.name, `GetQueueAttributes for queue "${item.name}"`, err);
  }

  /** Resolve a queue URL (cached, coalesced). 404 when the queue does not exist. */
  private async queueUrl(item: QueueRead, signal: AbortSignal): Promise<string> {
    const { name, owner } = item;
    return this.urls.get(urlKey(item), QUEUE_URL_TTL_MS, async (loadSignal) => {
      try {
        const command = new GetQueueUrlCommand({ QueueName: name, ...(owner !== undefined ? { QueueOwnerAWSAccountId: owner } : {}) });
        const client = this.clients.get(item.identity);
        const out = await withCallSignal(loadSignal, this.timeoutMs, (abortSignal) => client.send(command, { abortSignal }));
        if (!out.QueueUrl) throw serviceUnavailable(`provider ${this.name}: GetQueueUrl returned no QueueUrl for "${name}"`);
        return out.QueueUrl;
      } catch (err) {
        if (isQueueMissing(err)) throw queueNotFound(name);
        throw awsErrorToStatus(this.name, `GetQueueUrl for queue "${name}"`, err);
      }
    }, { signal }).value;
  }

  /** Read and sum the attributes of one queue. `signal`: the skeleton's load signal. */
  private async readQueue(item: QueueRead, signal: AbortSignal): Promise<Reading> {
    const { name, attributes } = item;
    const url = await this.queueUrl(item, signal);
    if (item.url !== undefined && item.url !== url) {
      throw notFound(`SQS queue URL ${JSON.stringify(item.url)} is not a queue this provider reads (GetQueueUrl for "${name}" of account ${item.owner} returned ${JSON.stringify(url)})`, { name: item.url, kind: "queue" });
    }
    let out;
    try {
      const command = new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: attributes });
      const client = this.clients.get(item.identity);
      out = await withCallSignal(signal, this.timeoutMs, (abortSignal) => client.send(command, { abortSignal }));
    } catch (err) {
      if (isQueueMissing(err)) {
        this.urls.delete(urlKey(item));
        throw queueNotFound(name);
      }
      throw awsErrorToStatus(this.name, `GetQueueAttributes for queue "${name}"`, err);
    }
    const timestamp = this.runtime.now();
    let sum: Decimal = { mantissa: 0n, exponent: 0 };
    for (const attribute of attributes) {
      const text = out.Attributes?.[attribute];
      if (text === undefined) {
        throw serviceUnavailable(`provider ${this.name}: GetQueueAttributes returned no ${attribute} for queue "${name}"`);
      }
      let value: Decimal;
      try {
        value = parseDecimal(text);
      } catch {
        throw serviceUnavailable(
          `provider ${this.name}: GetQueueAttributes returned ${attribute}=${JSON.stringify(text)} for queue "${name}", not a number`,
        );
      }
      if (value.mantissa < 0n) {
        throw serviceUnavailable(
          `provider ${this.name}: GetQueueAttributes returned ${attribute}=${text} for queue "${name}": ` +
            `a queue depth is never negative; no value is reported`,
        );
      }
      sum = addDecimals(sum, value);
    }
    return { value: sum, timestamp };
  }
}

/**
 * An SQS provider instance: the series skeleton (`../series.ts`) with one
 * label and batches of one. Queues of one request are read concurrently;
 * identical reads in flight are coalesced and re-used for the rule's
 * `cacheTTLSeconds` (never longer than `maxAgeSeconds`). Queue URLs are
 * cached for 10 minutes and forgotten when SQS says the queue is gone.
 *
 * Deadlines: `GetQueueUrl` and `GetQueueAttributes` run inside one coalesced
 * load and each get `{ abortSignal }` = its signal (aborted at 3 s, or when
 * no request waits any more) combined with `timeoutSeconds`; the two
 * sequential calls together never outlive the request that needs them.
 * A failed read (503) is re-used for the backend's back-off hint
 * (`../backoff.ts`): a throttled queue is not asked again by every read.
 *
 * A negative `ApproximateNumberOf…` is not a depth: 503 naming the
 * attribute, never a value.
 */
export class SqsProvider extends SeriesProvider<SqsQuery, QueueRead> {
  readonly client: SQSClient;
  readonly urls: CoalescingCache<string>;

  constructor(name: string, config: AwsProviderConfig, runtime: RuntimeEnv) {
    const backend = new SqsBackend(name, config, runtime);
    super("aws-sqs", name, runtime, backend);
    this.client = backend.clients.get(undefined);
    this.urls = backend.urls;
  }
}

/** The queue-URL cache key of a read: its identity's, so a URL one identity resolved never serves another. */
function urlKey(item: QueueRead): string {
  return `${item.identity ?? ""}|${item.name}|${item.owner ?? ""}`;
}

function isQueueMissing(err: unknown): boolean {
  const e = err as { name?: string; Code?: string };
  return (
    e?.name === "QueueDoesNotExist" ||
    e?.name === "AWS.SimpleQueueService.NonExistentQueue" ||
    e?.Code === "AWS.SimpleQueueService.NonExistentQueue"
  );
}

function queueNotFound(name: string) {
  return notFound(`SQS queue "${name}" does not exist`, { name, kind: "queue" });
}

/** The `aws-sqs` provider module. */
export const sqsModule: ProviderModule<AwsProviderConfig, SqsQuery> = {
  type: "aws-sqs",
  providerSchema: awsProviderSchema,
  querySchema: sqsQuerySchema,
  create: (name, config, runtime) => new SqsProvider(name, config, runtime),
};

/** This module under the name every provider folder's `index.ts` exports it (the provider tables import it by this name: `../provider-list.ts`). */
export { sqsModule as providerModule };
