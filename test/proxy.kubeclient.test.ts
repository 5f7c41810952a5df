/**
 * The proxy's Kubernetes API client (shared/proxy/kube.ts) against the fake
 * Kubernetes API over real TLS, through the real `@kubernetes/client-node`:
 *
 * - one keep-alive connection pool for every call. client-node 2.0.1 builds a
 *   new undici Agent per request (kubernetes-client/javascript#2893): measured
 *   here before the fix, 30 sequential SubjectAccessReviews made 30 TLS
 *   handshakes and left 30 connections open; with `PooledKubeConfig`, 2 at
 *   most (undici opens a second connection when the next request is
 *   dispatched in the same tick the first response ends; later ones reuse);
 * - every review has a deadline that cancels its HTTP request: a hanging API
 *   server costs about 2 s and its connection is closed, not left for undici's
 *   300 s default.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CoreV1Api } from "@kubernetes/client-node";
import { watchAuthenticationConfig } from "../shared/proxy/authn-config.ts";
import type { LogRecord } from "../shared/proxy/log.ts";
import { registerAPIService, REGISTRATION_DEADLINE_MS } from "../shared/proxy/registration.ts";
import { KUBE_API_TIMEOUT_MS, kubeConfigFor, subjectAccessReviewer, tokenReviewer, type PooledKubeConfig } from "../shared/proxy/kube.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "./fakes/kube-apiserver.ts";
import { eventually } from "./proxy.harness.ts";

let fake: FakeKubeApiServer;
const configs: PooledKubeConfig[] = [];
function kubeConfig(): PooledKubeConfig {
  const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
  configs.push(kc);
  return kc;
}

beforeAll(async () => {
  fake = await startFakeKubeApiServer();
  fake.authorize = () => ({ allowed: true });
  fake.tokens.set("good", { username: "jane" });
}, 30_000);
afterAll(async () => {
  await Promise.all(configs.map((kc) => kc.close()));
  await fake?.close();
});

describe("one keep-alive connection pool", () => {
  it("sends 30 sequential SubjectAccessReviews over at most 2 TLS connections (the library alone: 30)", async () => {
    const review = subjectAccessReviewer(kubeConfig());
    const before = fake.tlsConnections();
    for (let i = 0; i < 30; i++) expect((await review({ user: `u${i}`, nonResourceAttributes: { path: "/apis", verb: "get" } })).allowed).toBe(true);
    expect(fake.tlsConnections() - before).toBeLessThanOrEqual(2);
  });

  it("shares the pool between reviews and the other API classes made from the same KubeConfig", async () => {
    const kc = kubeConfig();
    const sar = subjectAccessReviewer(kc);
    const tokens = tokenReviewer(kc);
    const core = kc.makeApiClient(CoreV1Api);
    fake.setConfigMap("kube-system", "probe", { a: "b" });
    const before = fake.tlsConnections();
    for (let i = 0; i < 10; i++) {
      await sar({ user: `v${i}` });
      expect((await tokens("good")).authenticated).toBe(true);
      expect((await core.readNamespacedConfigMap({ namespace: "kube-system", name: "probe" })).data).toEqual({ a: "b" });
    }
    // 30 calls of three API classes: one pool, at most 2 connections.
    expect(fake.tlsConnections() - before).toBeLessThanOrEqual(2);
    expect(kc.poolStats.pools).toBe(1);
  });

  it("bounds the connections of concurrent reviews", async () => {
    const review = subjectAccessReviewer(kubeConfig());
    const before = fake.tlsConnections();
    await Promise.all(Array.from({ length: 100 }, (_, i) => review({ user: `c${i}` })));
    const opened = fake.tlsConnections() - before;
    expect(opened).toBeGreaterThan(0);
    expect(opened).toBeLessThanOrEqual(32);
  });
});

describe("deadlines", () => {
  it("cancels a SubjectAccessReview the API server does not answer: about 2 s, connection closed", async () => {
    fake.hanging.add("subjectaccessreviews");
    try {
      const review = subjectAccessReviewer(kubeConfig());
      const hung = { ...fake.hung };
      const started = Date.now();
      const error = await review({ user: "slow" }).then(
        () => undefined,
        (err: unknown) => err as Error,
      );
      const took = Date.now() - started;
      expect(error?.name).toBe("TimeoutError");
      // One attempt that ends at the deadline, not undici's 300 s.
      expect(took).toBeGreaterThanOrEqual(KUBE_API_TIMEOUT_MS - 50);
      expect(took).toBeLessThan(KUBE_API_TIMEOUT_MS + 3_000);
      expect(fake.hung.started - hung.started).toBe(1);
      // The HTTP request was cancelled: its connection is closed.
      await eventually(() => fake.hung.closedByClient - hung.closedByClient === 1, 3_000, "the hanging connection to close");
    } finally {
      fake.hanging.delete("subjectaccessreviews");
    }
  });

  it("cancels a TokenReview when the caller's signal aborts before the deadline", async () => {
    fake.hanging.add("tokenreviews");
    try {
      const review = tokenReviewer(kubeConfig(), { timeoutMs: 60_000 });
      const hung = { ...fake.hung };
      const controller = new AbortController();
      const pending = review("good", controller.signal);
      await eventually(() => fake.hung.started > hung.started, 3_000, "the review to reach the API server");
      controller.abort(new Error("client went away"));
      await expect(pending).rejects.toThrow("client went away");
      await eventually(() => fake.hung.closedByClient - hung.closedByClient === 1, 3_000, "the hanging connection to close");
    } finally {
      fake.hanging.delete("tokenreviews");
    }
  });

  it("cancels an APIService registration the API server does not answer at its deadline (was: undici's 300 s), connection closed", async () => {
    fake.hanging.add("apiservices");
    try {
      const hung = { ...fake.hung };
      const started = Date.now();
      const error = await registerAPIService(kubeConfig(), { service: { namespace: "ns", name: "proxy", port: 443 }, caPem: fake.caPem }).then(
        () => undefined,
        (err: unknown) => err as Error,
      );
      expect(error?.name).toBe("TimeoutError");
      expect(Date.now() - started).toBeGreaterThanOrEqual(REGISTRATION_DEADLINE_MS - 50);
      expect(fake.hung.started - hung.started).toBe(1);
      await eventually(() => fake.hung.closedByClient - hung.closedByClient === 1, 3_000, "the hanging connection to close");
    } finally {
      fake.hanging.delete("apiservices");
    }
  }, 15_000);

  it("keeps serving over the pool after a cancelled request", async () => {
    const kc = kubeConfig();
    fake.hanging.add("subjectaccessreviews");
    const review = subjectAccessReviewer(kc, { timeoutMs: 200 });
    await expect(review({ user: "slow" })).rejects.toMatchObject({ name: "TimeoutError" });
    fake.hanging.delete("subjectaccessreviews");
    expect((await review({ user: "fast" })).allowed).toBe(true);
  });
});

describe("the authentication ConfigMap informer", () => {
  it("cancels a list kube-apiserver does not answer and retries it, instead of staying unloaded for good", async () => {
    fake.setConfigMap("kube-system", "extension-apiserver-authentication", {});
    fake.hanging.add("configmaps");
    const hung = { ...fake.hung };
    const logs: LogRecord[] = [];
    const source = watchAuthenticationConfig(kubeConfig(), (r) => void logs.push(r), { listTimeoutMs: 300 });
    try {
      await eventually(() => fake.hung.started > hung.started, 3_000, "the list to reach the API server");
      fake.hanging.delete("configmaps");
      // cancelled at its deadline (connection closed), then retried after the 1 s back-off
      await eventually(() => fake.hung.closedByClient > hung.closedByClient, 3_000, "the hanging list to be cancelled");
      await eventually(() => source.current() !== undefined, 5_000, "the ConfigMap to load");
      expect(logs.some((r) => r.level === "warn" && String(r.msg).includes("retrying"))).toBe(true);
    } finally {
      fake.hanging.delete("configmaps");
      await source.stop();
    }
  });
});
