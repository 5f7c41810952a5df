/**
 * The shared read tier's integration point (shared/providers/series.ts,
 * shared/providers/registry.ts), with a recording tier in front of the real
 * aws-cloudwatch provider and the CloudWatch fake: which reads reach the
 * tier (local misses and refresh-ahead loads, never local hits), with what
 * key, and how a provider instance's config digest separates configs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SharedCacheConfig, SharedTier, TierRequest } from "../../shared/cache/shared-tier.ts";
import { loadConfig } from "../../shared/config/config.ts";
import type { CloudWatchProvider } from "../../shared/providers/aws-cloudwatch/index.ts";
import { configDigest } from "../../shared/providers/registry.ts";
import { startCloudWatchFake, type CloudWatchFake } from "../fakes/cloudwatch.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const NOW = 1_800_000_000_000;

function config(endpoint: string, provider = "    sharedCache: { type: dynamodb, table: recorded, region: us-east-1 }"): string {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: 600, cacheTTLSeconds: 10 }
providers:
  cw:
    type: aws-cloudwatch
    region: us-east-1
    endpoint: ${endpoint}
    credentials: { source: static, accessKeyId: AKIDTEST, secretAccessKey: test }
    timeoutSeconds: 0.5
    maxAttempts: 1
${provider}
metrics:
  - name: sqs_visible
    provider: cw
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName } }
`;
}

/** A tier that loads every read itself (as a lease holder would) and records the requests. */
function recordingTier(): SharedTier & { requests: TierRequest[]; made: { provider: string; config: SharedCacheConfig; digest: string }[] } {
  const requests: TierRequest[] = [];
  return {
    type: "dynamodb",
    requests,
    made: [],
    async read(request) {
      requests.push(request);
      return { reading: await request.load(request.signal), source: "tier-load" };
    },
  };
}

async function read(bridge: Bridge, queue: string) {
  const res = await bridge.app.request(`${NS}/sqs_visible?labelSelector=${encodeURIComponent(`queue=${queue}`)}`);
  return { status: res.status, body: (await res.json()) as any };
}

describe("the shared read tier's integration point", () => {
  let cw: CloudWatchFake;
  beforeAll(async () => {
    cw = await startCloudWatchFake();
    cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: "jobs" } }, [{ at: NOW - 90_000, value: 8 }]);
  });
  afterAll(async () => cw?.close());

  function build(text: string) {
    const clock = { now: NOW };
    const tier = recordingTier();
    const bridge = buildBridge(
      text,
      "test.yaml",
      {
        env: {},
        now: () => clock.now,
        longLived: true,
        sharedTier: (provider, cfg, digest) => {
          tier.made.push({ provider, config: cfg, digest });
          return tier;
        },
      },
      { log: () => {} },
    );
    return { bridge, clock, tier, provider: bridge.providers.get("cw") as CloudWatchProvider };
  }

  it("a local miss and each refresh-ahead load go through the tier, keyed by provider, config digest and series; a local hit does not", async () => {
    const { bridge, clock, tier, provider } = build(config(cw.endpoint));
    expect(tier.made).toHaveLength(1);
    expect(tier.made[0]).toMatchObject({ provider: "cw", config: { type: "dynamodb", table: "recorded", timeoutMs: 250, leaseMs: 3000 } });
    expect(tier.made[0]!.digest).toMatch(/^[0-9a-f]{32}$/);
    expect((await read(bridge, "jobs")).body.items[0].value).toBe("8");
    expect(tier.requests).toHaveLength(1);
    const [request] = tier.requests;
    expect(request!.key.split("\u0000").slice(0, 2)).toEqual(["cw", tier.made[0]!.digest]);
    expect(request!.ttlMs).toBe(10_000);
    expect(request!.series).toMatchObject({ provider: "cw", ruleIndex: 0, labels: { queue: "jobs" }, namespace: "default" });
    clock.now += 5_000;
    expect((await read(bridge, "jobs")).status).toBe(200); // a local hit
    expect(tier.requests).toHaveLength(1);
    clock.now += 4_500; // past 0.9 × TTL: the refresh-ahead round loads the series again, through the tier
    expect((await read(bridge, "jobs")).status).toBe(200);
    for (let i = 0; i < 200 && provider.cache.inflight > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(provider.cache.stats.refreshes).toBe(1);
    expect(tier.requests).toHaveLength(2);
    expect(tier.requests[1]!.key).toBe(request!.key);
    provider.close();
  });

  it("a rule with cacheTTLSeconds: 0 never touches the tier", async () => {
    const { bridge, tier } = build(config(cw.endpoint).replace("cacheTTLSeconds: 10", "cacheTTLSeconds: 0"));
    expect((await read(bridge, "jobs")).body.items[0].value).toBe("8");
    expect(tier.requests).toHaveLength(0);
  });

  it("without a runtime tier (the CLI tools) sharedCache: is ignored", async () => {
    const bridge = buildBridge(config(cw.endpoint), "test.yaml", { env: {}, now: () => NOW }, { log: () => {} });
    expect((await read(bridge, "jobs")).body.items[0].value).toBe("8");
  });

  it("the config digest: the same for one config however written, different for any other setting", () => {
    const digest = (text: string) => configDigest(loadConfig(text, "t.yaml").config.providers["cw"]!);
    const base = digest(config(cw.endpoint));
    const reordered = config(cw.endpoint).replace("    timeoutSeconds: 0.5\n    maxAttempts: 1\n", "    maxAttempts: 1\n    timeoutSeconds: 0.5\n");
    expect(reordered).not.toBe(config(cw.endpoint));
    expect(digest(reordered)).toBe(base);
    // key order never matters (a module's parse may build its object in any order)
    expect(configDigest({ type: "t", config: { a: 1, b: { c: 2, d: [3] } } })).toBe(configDigest({ type: "t", config: { b: { d: [3], c: 2 }, a: 1 } }));
    expect(digest(config(cw.endpoint).replace("timeoutSeconds: 0.5", "timeoutSeconds: 1"))).not.toBe(base);
    expect(digest(config("http://127.0.0.1:1"))).not.toBe(base);
    expect(digest(config(cw.endpoint, "    sharedCache: { type: dynamodb, table: other, region: us-east-1 }"))).not.toBe(base);
  });
});
