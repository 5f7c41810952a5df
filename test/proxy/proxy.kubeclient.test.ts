/**
 * The proxy's Kubernetes API client (shared/proxy/kube/, our own thin
 * client over `node:https` since issue 11 P5) against the fake Kubernetes
 * API over real TLS:
 *
 * - one keep-alive connection pool for every call (client-node 2.0.1, used
 *   before, built a new undici Agent per request, kubernetes-client/javascript#2893:
 *   30 sequential SubjectAccessReviews made 30 TLS handshakes);
 * - every review has a deadline that cancels its HTTP request: a hanging API
 *   server costs about 2 s and its connection is closed;
 * - the token file is re-read once its period passed (bound ServiceAccount
 *   tokens rotate; client-go `transport/token_source.go`);
 * - list+watch re-lists after a 410 Gone and resumes (client-go `tools/cache/reflector.go`);
 * - kubeconfig files: client certificate data over real TLS, and a clear
 *   error for what the client does not support (exec plugins, auth providers, proxies).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { watchAuthenticationConfig } from "../../shared/proxy/authn/authn-config.ts";
import type { LogRecord } from "../../shared/proxy/log.ts";
import { registerAPIService, REGISTRATION_DEADLINE_MS } from "../../shared/proxy/tls/registration.ts";
import {
  ApiError,
  apiStatus,
  KUBE_API_TIMEOUT_MS,
  kubeConfigFor,
  loadKubeConfig,
  microTime,
  type ConfigMap,
  type KubeClient,
  type KubeObject,
} from "../../shared/proxy/kube/client.ts";
import { Informer } from "../../shared/proxy/kube/informer.ts";
import { subjectAccessReviewer } from "../../shared/proxy/authz/subject-access-review.ts";
import { tokenReviewer } from "../../shared/proxy/authn/token-review.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { eventually } from "./proxy.harness.ts";

let fake: FakeKubeApiServer;
const configs: KubeClient[] = [];
let dir: string;
function kubeConfig(): KubeClient {
  const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
  configs.push(kc);
  return kc;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "emb-kubeclient-"));
  fake = await startFakeKubeApiServer();
  fake.authorize = () => ({ allowed: true });
  fake.tokens.set("good", { username: "jane" });
}, 30_000);
afterAll(async () => {
  await Promise.all(configs.map((kc) => kc.close()));
  await fake?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Write a kubeconfig for the fake with `user` as the user entry. */
function writeKubeconfig(name: string, user: Record<string, unknown>, cluster: Record<string, unknown> = {}): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "fake", cluster: { server: fake.url, "certificate-authority-data": Buffer.from(fake.caPem).toString("base64"), ...cluster } }],
      users: [{ name: "u", user }],
      contexts: [{ name: "fake", context: { cluster: "fake", user: "u" } }],
      "current-context": "fake",
    }),
  );
  return file;
}

describe("one keep-alive connection pool", () => {
  it("sends 30 sequential SubjectAccessReviews over at most 2 TLS connections (the library alone: 30)", async () => {
    const review = subjectAccessReviewer(kubeConfig());
    const before = fake.tlsConnections();
    for (let i = 0; i < 30; i++) expect((await review({ user: `u${i}`, nonResourceAttributes: { path: "/apis", verb: "get" } })).allowed).toBe(true);
    expect(fake.tlsConnections() - before).toBeLessThanOrEqual(2);
  });

  it("shares the pool between reviews and the other calls made through the same client", async () => {
    const kc = kubeConfig();
    const sar = subjectAccessReviewer(kc);
    const tokens = tokenReviewer(kc);
    fake.setConfigMap("kube-system", "probe", { a: "b" });
    const before = fake.tlsConnections();
    for (let i = 0; i < 10; i++) {
      await sar({ user: `v${i}` });
      expect((await tokens("good")).authenticated).toBe(true);
      expect((await kc.get<ConfigMap>("/api/v1/namespaces/kube-system/configmaps/probe")).data).toEqual({ a: "b" });
    }
    // 30 calls of three kinds: one pool, at most 2 connections.
    expect(fake.tlsConnections() - before).toBeLessThanOrEqual(2);
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
      // One attempt that ends at the deadline.
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

  it("cancels an APIService registration the API server does not answer at its deadline, connection closed", async () => {
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

describe("errors", () => {
  it("carries the HTTP status and the metav1.Status the API server answered", async () => {
    const err = await kubeConfig()
      .get("/api/v1/namespaces/kube-system/configmaps/absent")
      .then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(apiStatus(err)).toBe(404);
    expect((err as ApiError).status).toMatchObject({ kind: "Status", reason: "NotFound", code: 404 });
    expect(apiStatus(new Error("network"))).toBeUndefined();
  });

  it("formats a Lease's MicroTime with six fractional digits (RFC3339Micro)", () => {
    expect(microTime(Date.parse("2030-01-02T03:04:05.678Z"))).toBe("2030-01-02T03:04:05.678000Z");
  });
});

describe("bearer token file", () => {
  it("re-reads the token file once the period passed, so a rotated ServiceAccount token is sent", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "first-token\n");
    fake.clientTokens.add("first-token");
    fake.clientTokens.add("second-token");
    let now = 1_000_000;
    const kc = loadKubeConfig(writeKubeconfig("token-file.yaml", { tokenFile }), { now: () => now });
    configs.push(kc);
    const review = subjectAccessReviewer(kc);
    const sent = () => fake.credentials.at(-1);
    await review({ user: "a" });
    expect(sent()).toBe("first-token");
    writeFileSync(tokenFile, "second-token\n");
    now += 30_000; // within the minute: the cached token
    await review({ user: "b" });
    expect(sent()).toBe("first-token");
    now += 30_000; // a minute after the read: the file is read again
    await review({ user: "c" });
    expect(sent()).toBe("second-token");
  });

  it("re-reads the token file at once after a 401 (client-go ResetTokenOlderThan)", async () => {
    const tokenFile = join(dir, "token-401");
    writeFileSync(tokenFile, "revoked-token");
    fake.clientTokens.add("fresh-token");
    const kc = loadKubeConfig(writeKubeconfig("token-401.yaml", { tokenFile }), { now: () => 5 });
    configs.push(kc);
    const review = subjectAccessReviewer(kc);
    await expect(review({ user: "a" })).rejects.toSatisfy((e) => apiStatus(e) === 401);
    writeFileSync(tokenFile, "fresh-token");
    expect((await review({ user: "b" })).allowed).toBe(true);
    expect(fake.credentials.at(-1)).toBe("fresh-token");
  });
});

describe("kubeconfig", () => {
  it("authenticates with client-certificate-data and client-key-data over real TLS", async () => {
    const { certPem, keyPem } = await fake.issueClientCertificate("system:serviceaccount:emb:proxy");
    const kc = loadKubeConfig(
      writeKubeconfig("cert.yaml", { "client-certificate-data": Buffer.from(certPem).toString("base64"), "client-key-data": Buffer.from(keyPem).toString("base64") }),
    );
    configs.push(kc);
    expect((await subjectAccessReviewer(kc)({ user: "x" })).allowed).toBe(true);
    expect(fake.credentials.at(-1)).toBe("cert:system:serviceaccount:emb:proxy");
  });

  it("reads client-certificate / client-key / certificate-authority files relative to the kubeconfig", async () => {
    const { certPem, keyPem } = await fake.issueClientCertificate("file-user");
    writeFileSync(join(dir, "client.crt"), certPem);
    writeFileSync(join(dir, "client.key"), keyPem);
    writeFileSync(join(dir, "ca.crt"), fake.caPem);
    const kc = loadKubeConfig(
      writeKubeconfig("files.yaml", { "client-certificate": "client.crt", "client-key": "client.key" }, { "certificate-authority-data": undefined, "certificate-authority": "ca.crt" }),
    );
    configs.push(kc);
    expect((await subjectAccessReviewer(kc)({ user: "x" })).allowed).toBe(true);
    expect(fake.credentials.at(-1)).toBe("cert:file-user");
  });

  it("refuses a server certificate its CA does not sign (no CA given), and accepts it with insecure-skip-tls-verify", async () => {
    const strict = loadKubeConfig(writeKubeconfig("no-ca.yaml", { token: fake.token }, { "certificate-authority-data": undefined }));
    const loose = loadKubeConfig(writeKubeconfig("insecure.yaml", { token: fake.token }, { "certificate-authority-data": undefined, "insecure-skip-tls-verify": true }));
    configs.push(strict, loose);
    await expect(subjectAccessReviewer(strict)({ user: "x" })).rejects.toThrow(/certificate/);
    expect((await subjectAccessReviewer(loose)({ user: "x" })).allowed).toBe(true);
  });

  it("names the unsupported field: exec plugins, auth providers, proxy-url", () => {
    const exec = writeKubeconfig("exec.yaml", { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "aws", args: ["eks", "get-token"] } });
    expect(() => loadKubeConfig(exec)).toThrow(/users\[\]\.user\.exec is not supported/);
    const provider = writeKubeconfig("auth-provider.yaml", { "auth-provider": { name: "oidc" } });
    expect(() => loadKubeConfig(provider)).toThrow(/users\[\]\.user\.auth-provider is not supported/);
    const proxied = writeKubeconfig("proxy.yaml", { token: "t" }, { "proxy-url": "http://127.0.0.1:3128" });
    expect(() => loadKubeConfig(proxied)).toThrow(/proxy-url is not supported/);
    expect(() => loadKubeConfig(`${exec}:${proxied}`)).toThrow(/a list of kubeconfig files .* is not supported/);
  });
});

describe("list + watch", () => {
  it("re-lists after a 410 Gone ERROR event and resumes watching from the new list", async () => {
    fake.setConfigMap("kube-system", "gone-probe", { v: "1" });
    const seen: string[] = [];
    const errors: Error[] = [];
    const informer = new Informer<ConfigMap>(kubeConfig(), {
      path: "/api/v1/namespaces/kube-system/configmaps",
      fieldSelector: "metadata.name=gone-probe",
      onAdd: (o) => void seen.push(`add:${o.data?.["v"]}`),
      onUpdate: (o) => void seen.push(`update:${o.data?.["v"]}`),
      onDelete: (o) => void seen.push(`delete:${o.data?.["v"]}`),
      onError: (e) => void errors.push(e),
    });
    informer.start();
    try {
      await eventually(() => seen.includes("add:1") && fake.watchers() > 0 && informer.stats.watches === 1, 3_000, "listed and watching");
      fake.setConfigMap("kube-system", "gone-probe", { v: "2" });
      await eventually(() => seen.includes("update:2"), 3_000, "the watch event");
      const marks = fake.listsAndWatches.filter((r) => r.resource === "configmaps").length;
      fake.expireWatches();
      await eventually(() => informer.stats.gone === 1 && informer.stats.lists === 2 && informer.stats.watches === 2, 3_000, "a new list and watch");
      const after = fake.listsAndWatches.filter((r) => r.resource === "configmaps").slice(marks);
      expect(after.map((r) => r.watch)).toEqual([false, true]); // list, then watch
      expect(after[1]!.resourceVersion).not.toBe("");
      // resumed: later changes arrive over the new watch
      await eventually(() => fake.watchers() > 0, 3_000, "the new watch to open");
      fake.setConfigMap("kube-system", "gone-probe", { v: "3" });
      await eventually(() => seen.includes("update:3"), 3_000, "the event after the re-list");
      expect(errors).toEqual([]); // a single 410 re-lists at once, no back-off
    } finally {
      await informer.stop();
    }
  });

  it("re-opens a watch the server ended from the last resourceVersion, without a list", async () => {
    fake.setConfigMap("kube-system", "end-probe", { v: "1" });
    const seen: string[] = [];
    const informer = new Informer<ConfigMap>(kubeConfig(), {
      path: "/api/v1/namespaces/kube-system/configmaps",
      fieldSelector: "metadata.name=end-probe",
      onAdd: (o) => void seen.push(`add:${o.data?.["v"]}`),
      onUpdate: (o) => void seen.push(`update:${o.data?.["v"]}`),
    });
    informer.start();
    try {
      await eventually(() => seen.includes("add:1") && informer.stats.watches === 1 && fake.watchers() > 0, 3_000, "listed and watching");
      fake.setConfigMap("kube-system", "end-probe", { v: "2" });
      await eventually(() => seen.includes("update:2"), 3_000, "the watch event");
      const rv = (await kubeConfig().get<ConfigMap>("/api/v1/namespaces/kube-system/configmaps/end-probe")).metadata?.resourceVersion;
      const marks = fake.listsAndWatches.length;
      fake.endWatches();
      await eventually(() => informer.stats.watches === 2, 3_000, "the watch to re-open");
      expect(informer.stats.lists).toBe(1);
      const reopened = fake.listsAndWatches.slice(marks).filter((r) => r.resource === "configmaps");
      expect(reopened).toEqual([{ resource: "configmaps", watch: true, resourceVersion: rv }]);
    } finally {
      await informer.stop();
    }
  });

  it("lists page by page (limit/continue), each page a consistent snapshot, and transforms every object on receipt, watch events too", async () => {
    for (let i = 0; i < 5; i++) {
      fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: `page-${i}`, namespace: "paging", annotations: { big: "x".repeat(10_000) } } as any, spec: { rules: [] } });
    }
    const added: KubeObject[] = [];
    const informer = new Informer<KubeObject>(kubeConfig(), {
      path: "/apis/external-metrics-bridge.io/v1alpha1/namespaces/paging/externalmetricpolicies",
      pageSize: 2,
      transform: (o) => ({ metadata: { name: o.metadata?.name, namespace: o.metadata?.namespace, resourceVersion: o.metadata?.resourceVersion } }),
      onAdd: (o) => void added.push(o),
      onUpdate: (o) => void added.push(o),
    });
    const marks = fake.listsAndWatches.length;
    // A change between the pages is not seen by this list (the snapshot), only by the watch that follows.
    fake.onPolicyListPage = (page) => {
      if (page.continue !== undefined && !fake.policies.has("ExternalMetricPolicy/paging/page-9")) {
        fake.applyPolicy({ kind: "ExternalMetricPolicy", metadata: { name: "page-9", namespace: "paging", annotations: { big: "y" } } as any, spec: { rules: [] } });
      }
    };
    informer.start();
    try {
      await eventually(() => added.length === 6, 3_000, "five listed, one watched");
      const pages = fake.listsAndWatches.slice(marks).filter((r) => r.resource === "externalmetricpolicies" && !r.watch);
      expect(pages.map((r) => r.limit)).toEqual([2, 2, 2]);
      expect(pages.map((r) => r.continue !== undefined)).toEqual([false, true, true]);
      expect(informer.stats.pages).toBe(3);
      expect(added.slice(0, 5).map((o) => o.metadata?.name)).toEqual(["page-0", "page-1", "page-2", "page-3", "page-4"]);
      expect(added[5]!.metadata?.name).toBe("page-9");
      expect(added.every((o) => o.metadata?.annotations === undefined && Object.keys(o).join() === "metadata")).toBe(true);
    } finally {
      fake.onPolicyListPage = undefined;
      await informer.stop();
      for (const name of [...fake.policies.keys()].filter((k) => k.includes("/paging/"))) fake.deletePolicy("ExternalMetricPolicy", "paging", name.split("/")[2]!);
    }
  });

  it("stops: the open watch is closed", async () => {
    const informer = new Informer<ConfigMap>(kubeConfig(), { path: "/api/v1/namespaces/kube-system/configmaps", fieldSelector: "metadata.name=stop-probe" });
    informer.start();
    await eventually(() => informer.stats.watches === 1, 3_000, "watching");
    await new Promise((r) => setTimeout(r, 200)); // the watch request reached the fake
    const open = fake.watchers();
    await informer.stop();
    await eventually(() => fake.watchers() === open - 1, 3_000, "the watch to close");
  });
});
