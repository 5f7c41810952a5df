/**
 * The batched-series provider skeleton (`shared/providers/series.ts`) over a
 * fake backend: label resolution, coalescing, batching, per-series failures,
 * whole-call failures through the backend's `error` hook with back-off,
 * splitting, cancellation, staleness and `onEmpty`. Plus the wording SQS
 * keeps as the skeleton's one-label case, and the typed `transports`.
 */
import { describe, expect, it } from "vitest";
import { parseSelector } from "../../shared/k8s/selector.ts";
import { serviceUnavailable, StatusError } from "../../shared/k8s/status.ts";
import { sqsModule } from "../../shared/providers/aws-sqs/index.ts";
import { transportFactoryOf } from "../../shared/providers/gcp-monitoring/index.ts";
import type { MappedLabel } from "../../shared/providers/label-mapping.ts";
import { emptyOutcome, SeriesProvider, type OnEmpty, type Outcome, type Reading, type SeriesBackend, type SeriesItem } from "../../shared/providers/series.ts";
import type { MetricRule, RuntimeEnv } from "../../shared/providers/types.ts";

interface FakeQuery {
  onEmpty: OnEmpty;
}
interface FakeItem extends SeriesItem {
  queue: string;
  onEmpty: OnEmpty;
}

/** Thrown by the fake for a whole call it refuses because of one item ("bad"). */
class InvalidCall extends Error {}

const T0 = 1_800_000_000_000;

/**
 * A provider over a fake backend whose series are queues: "empty" has no
 * value, "broken" fails alone, "bad" makes the whole call invalid, "hang"
 * never answers until its signal aborts, "throttle" fails the whole call.
 */
function fake(options: { labels?: MappedLabel[]; maxBatchSize?: number } = {}) {
  const clock = { now: T0 };
  const calls: string[][] = [];
  const signals: AbortSignal[] = [];
  const backend: SeriesBackend<FakeQuery, FakeItem> = {
    labels: () => options.labels ?? [{ label: "queue" }],
    item: (rule, labels) => ({ key: JSON.stringify([labels.queue, rule.query.onEmpty]), queue: labels.queue!, onEmpty: rule.query.onEmpty }),
    describe: (_rule, items) => `fake read of ${items.map((i) => i.queue).join(", ")}`,
    batching: { maxBatchSize: options.maxBatchSize ?? 3, splitOnError: (err) => err instanceof InvalidCall },
    async read(items, signal): Promise<Outcome<Reading>[]> {
      calls.push(items.map((i) => i.queue));
      signals.push(signal);
      if (items.some((i) => i.queue === "hang")) {
        await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
      }
      if (items.some((i) => i.queue === "bad")) throw new InvalidCall("one query is invalid");
      if (items.some((i) => i.queue === "throttle")) throw new Error("Rate exceeded");
      return items.map((i) =>
        i.queue === "broken"
          ? { ok: false, error: serviceUnavailable(`fake: ${i.queue} failed`) }
          : i.queue === "empty"
            ? emptyOutcome(i.onEmpty, `fake: no value for ${i.queue}`, "fake-series", clock.now)
            : { ok: true, value: { value: { mantissa: BigInt(i.queue.length), exponent: 0 }, timestamp: clock.now, windowSeconds: 60 } },
      );
    },
    error: (err, item) =>
      err instanceof InvalidCall
        ? new StatusError(500, `fake: ${item.queue} is an invalid query`)
        : serviceUnavailable(`fake: read of ${item.queue} throttled: ${(err as Error).message}`, 7),
  };
  const rule: MetricRule<FakeQuery> = {
    name: "depth",
    key: "depth",
    provider: "fake",
    maxAgeSeconds: 30,
    cacheTTLSeconds: 10,
    query: { onEmpty: "unavailable" },
  };
  const provider = new SeriesProvider("fake", "fake", { env: {}, now: () => clock.now }, backend);
  const query = (selector: string, signal = new AbortController().signal, r = rule, noData?: "fail" | "omit") =>
    provider.query({ rule: r, selector: parseSelector(selector), namespace: "default", signal, ...(noData ? { noData } : {}) });
  const settle = (p: Promise<unknown>) =>
    p.then(
      (series) => ({ series }),
      (err: StatusError) => ({ code: err.code, message: err.message, retryAfterSeconds: err.retryAfterSeconds }),
    );
  return { provider, rule, clock, calls, signals, query, settle };
}

describe("SeriesProvider (the batched-series skeleton) over a fake backend", () => {
  it("one series per label set, identical reads coalesced, reads batched up to maxBatchSize", async () => {
    const { provider, calls, query } = fake();
    const [many, one] = await Promise.all([query("queue in (a,bb,ccc,dddd)"), query("queue=a")]);
    expect(many.map((s) => [s.labels, s.value.mantissa])).toEqual([
      [{ queue: "a" }, 1n],
      [{ queue: "bb" }, 2n],
      [{ queue: "ccc" }, 3n],
      [{ queue: "dddd" }, 4n],
    ]);
    expect(one).toEqual([{ labels: { queue: "a" }, value: { mantissa: 1n, exponent: 0 }, timestamp: T0, windowSeconds: 60 }]);
    expect(calls).toEqual([["a", "bb", "ccc"], ["dddd"]]);
    expect(provider.cache.stats).toMatchObject({ loads: 4, coalesced: 1 });
    expect(provider.batcher.stats).toMatchObject({ calls: 2, items: 4 });
    expect(provider.plan({ rule: fake().rule, selector: parseSelector("queue in (x,y)"), namespace: "default" })).toBe("fake read of x, y");
  });

  it("staleness: a reading is re-used for cacheTTLSeconds, never past maxAgeSeconds", async () => {
    const { calls, query, clock, rule } = fake();
    await query("queue=a");
    clock.now += 10_000;
    await query("queue=a");
    expect(calls).toHaveLength(1);
    clock.now += 1;
    await query("queue=a");
    expect(calls).toHaveLength(2);
    const capped = { ...rule, cacheTTLSeconds: 10, maxAgeSeconds: 2 };
    clock.now += 2_001;
    await query("queue=a", undefined, capped);
    expect(calls).toHaveLength(3);
  });

  it("a series that fails fails the request (never a partial answer); the series read beside it is unharmed", async () => {
    const { query, settle, calls } = fake();
    const [both, alone] = await Promise.all([settle(query("queue in (a,broken)")), settle(query("queue=bb"))]);
    expect(both).toEqual({ code: 503, message: "fake: broken failed", retryAfterSeconds: 1 });
    expect(alone).toMatchObject({ series: [{ labels: { queue: "bb" } }] });
    expect(calls).toEqual([["a", "broken", "bb"]]);
  });

  it("a whole-call failure becomes the backend's Status and is backed off for its hint: not asked again meanwhile", async () => {
    const { query, settle, calls, clock } = fake();
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await settle(query("queue=throttle")));
    expect(answers).toEqual(Array(3).fill({ code: 503, message: "fake: read of throttle throttled: Rate exceeded", retryAfterSeconds: 7 }));
    expect(calls).toHaveLength(1);
    clock.now += 7_000;
    await settle(query("queue=throttle"));
    expect(calls).toHaveLength(2);
  });

  it("a call refused for one item is split until that item stands alone; the others are answered", async () => {
    const { query, settle, calls, provider } = fake({ maxBatchSize: 4 });
    const [bad, good] = await Promise.all([settle(query("queue=bad")), settle(query("queue in (a,bb,ccc)"))]);
    expect(bad).toMatchObject({ code: 500, message: "fake: bad is an invalid query" });
    expect(good).toMatchObject({ series: [{ labels: { queue: "a" } }, { labels: { queue: "bb" } }, { labels: { queue: "ccc" } }] });
    expect(calls[0]).toEqual(["bad", "a", "bb", "ccc"]);
    expect(provider.batcher.stats.splits).toBeGreaterThan(0);
  });

  it("cancellation: the request's signal rejects the read at once and aborts the backend call nobody waits for; nothing is cached", async () => {
    const { query, calls, signals, provider } = fake();
    const controller = new AbortController();
    const pending = query("queue=hang", controller.signal);
    await new Promise((r) => setTimeout(r, 5));
    expect(calls).toEqual([["hang"]]);
    expect(signals[0]!.aborted).toBe(false);
    const reason = new DOMException("the bridge deadline passed", "TimeoutError");
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(signals[0]!.aborted).toBe(true);
    expect(provider.cache.stats.abandoned).toBe(1);
    expect(provider.cache.size).toBe(0);
  });

  it("onEmpty: 503 (1 s back-off), 404 with the backend's kind, or the value the rule wrote, stamped with the read time", async () => {
    const { query, settle, rule } = fake();
    expect(await settle(query("queue=empty"))).toEqual({ code: 503, message: "fake: no value for empty", retryAfterSeconds: 1 });
    const notFound = await query("queue=empty", undefined, { ...rule, query: { onEmpty: "notFound" } }).catch((e: StatusError) => e);
    expect(notFound).toMatchObject({ code: 404, details: { kind: "fake-series" } });
    const written = await fake().query("queue=empty", undefined, { ...rule, query: { onEmpty: { value: "0.5" } } });
    expect(written).toEqual([{ labels: { queue: "empty" }, value: { mantissa: 5n, exponent: -1 }, timestamp: T0 }]);
  });

  it("noData: omit leaves out a series without data (a pod the HPA then counts as missing), never a 0; any other failure still fails the read", async () => {
    const { query, settle, calls, rule } = fake();
    const read = await query("queue in (a,empty,cc)", undefined, rule, "omit");
    expect(read.map((s) => [s.labels.queue, s.value])).toEqual([
      ["a", { mantissa: 1n, exponent: 0 }],
      ["cc", { mantissa: 2n, exponent: 0 }],
    ]);
    // the same empty series, re-used from the cache, is still left out; all empty is an empty list
    expect(await query("queue=empty", undefined, rule, "omit")).toEqual([]);
    expect(calls).toEqual([["a", "cc", "empty"]]);
    // without omit, the same read fails (External: the HPA sums every series)
    expect(await settle(query("queue in (a,empty)"))).toEqual({ code: 503, message: "fake: no value for empty", retryAfterSeconds: 1 });
    // a failed series, a whole-call failure and a 404 onEmpty's... only "no data" is omitted
    expect(await settle(query("queue in (a,broken)", undefined, rule, "omit"))).toMatchObject({ code: 503, message: "fake: broken failed" });
    expect(await settle(query("queue in (a,throttle)", undefined, rule, "omit"))).toMatchObject({ code: 503, retryAfterSeconds: 7 });
    expect(await query("queue=empty", undefined, { ...rule, query: { onEmpty: "notFound" } }, "omit")).toEqual([]);
    // a rule whose onEmpty is a value serves it, omitted or not: the admin wrote it
    expect((await fake().query("queue=empty", undefined, { ...rule, query: { onEmpty: { value: "0.5" } } }, "omit")).length).toBe(1);
  });

  it("label resolution happens before any backend call: 400 naming the requirement, 404 outside the allow-list", async () => {
    const { query, settle, calls } = fake({ labels: [{ label: "queue", values: ["a", "bb"] }] });
    expect(await settle(query("env=prod"))).toMatchObject({
      code: 400,
      message: 'metric depth: selector requirement "env=prod" cannot be mapped: this rule understands only the labels "queue"',
    });
    expect(await settle(query("queue=zz"))).toMatchObject({ code: 404, message: 'metric depth: queue "zz" is not served by this rule' });
    expect(await settle(query(""))).toMatchObject({ series: [{ labels: { queue: "a" } }, { labels: { queue: "bb" } }] });
    expect(calls).toEqual([["a", "bb"]]);
  });
});

describe("aws-sqs as the skeleton's one-label case keeps its own wording", () => {
  const provider = sqsModule.create("sqs", sqsModule.providerSchema.parse({ region: "us-east-1" }), { env: {}, now: () => T0 });
  const rule = (query: object): MetricRule<any> => ({
    name: "depth",
    key: "depth",
    provider: "sqs",
    maxAgeSeconds: 30,
    cacheTTLSeconds: 10,
    query: sqsModule.querySchema.parse(query),
  });
  const plan = (selector: string, query: object = {}) => {
    try {
      return provider.plan({ rule: rule(query), selector: parseSelector(selector), namespace: "default" });
    } catch (err) {
      return { code: (err as StatusError).code, message: (err as StatusError).message, kind: (err as StatusError).details?.kind };
    }
  };

  it("the messages name queues, exactly as before the skeleton", () => {
    expect(plan("env=prod")).toMatchObject({
      code: 400,
      message: 'metric depth: selector requirement "env=prod" cannot be mapped: this rule understands only the label "queue"',
    });
    expect(plan("")).toMatchObject({
      code: 400,
      message: "metric depth: the selector must name the queues with queue=NAME or queue in (A,B); this rule has no queues allow-list to choose from",
    });
    expect(plan("queue in (a),queue notin (a)")).toMatchObject({ code: 400, message: expect.stringMatching(/^metric depth: selector ".*" matches no queue$/) });
    expect(plan("queue=c", { queues: ["a", "b"] })).toEqual({ code: 404, message: 'metric depth: queue "c" is not served by this rule', kind: "queue" });
    const many = Array.from({ length: 101 }, (_, i) => `q${i}`).join(",");
    expect(plan(`queue in (${many})`)).toMatchObject({ code: 400, message: "metric depth: selector names 101 queues; at most 100 per request" });
    expect(plan("queue in (a,b)", { queueNameTemplate: "prod-{queue}" })).toBe(
      "SQS GetQueueAttributes ApproximateNumberOfMessages on queues prod-a, prod-b",
    );
  });
});

describe("RuntimeEnv.transports is typed", () => {
  it("only a MonitoringTransportFactory under gcp-monitoring compiles; an untyped caller's mistake is still refused", () => {
    // @ts-expect-error — not a transport factory (tsc refuses it since transports is typed)
    const wrong: RuntimeEnv = { env: {}, now: () => T0, transports: { "gcp-monitoring": 42 } };
    expect(() => transportFactoryOf(wrong)).toThrow(/must be a transport factory/);
    // @ts-expect-error — no provider type of that name takes a transport
    const unknown: RuntimeEnv = { env: {}, now: () => T0, transports: { "gcp-monitorin": () => ({}) } };
    expect(transportFactoryOf(unknown)({ providerName: "g", config: {} as never, runtime: unknown }).kind).toBe("rest");
  });
});
