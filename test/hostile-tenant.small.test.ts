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
import { kubeConfigFor } from "../shared/proxy/kube.ts";
import { LeaderElector } from "../shared/proxy/lease.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "./fakes/kube-apiserver.ts";
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
