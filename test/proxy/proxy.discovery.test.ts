/**
 * Discovery answered from state the proxy holds, and readiness that depends
 * only on the proxy itself (issue 10, item 1): through the real proxy over
 * TLS, with real backends (echo bridges, a TCP server that accepts and never
 * answers, a closed port).
 *
 * kube-aggregator probes `GET /apis/external.metrics.k8s.io/v1beta1` with a
 * 5 s timeout and marks the APIService `Available=False FailedDiscoveryCheck`
 * on any non-2xx (`pkg/controllers/status/remote/remote_available_controller.go`);
 * namespace deletion and `kubectl api-resources` then fail for the whole
 * cluster. So this path must never wait on, or fail with, a backend.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { PROBE_CALLER } from "../../shared/proxy/forward/forward.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { startHangingServer } from "../helpers/hanging-server.ts";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";

let pki: Pki;
let fake: FakeKubeApiServer;
const cleanup: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  [pki, fake] = await Promise.all([createPki(), startFakeKubeApiServer()]);
  fake.authorize = () => ({ allowed: true });
}, 60_000);

afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f().catch(() => {});
});

afterAll(async () => {
  await fake?.close();
});

/** A user as kube-apiserver's front proxy names it (group system:masters: authorized without a SubjectAccessReview). */
const as = (user: string) => ({ cert: pki.frontProxy, headers: { "X-Remote-User": user, "X-Remote-Group": "system:masters" } });
const masters = () => ({ cert: pki.frontProxy, headers: { "X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters" } });
const names = (body: { resources: { name: string }[] }) => body.resources.map((r) => r.name);

/** A URL on 127.0.0.1 where nothing listens (connections are refused). */
async function refusedUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

async function harness(proxyConfig: string, extra: Parameters<typeof startHarness>[0]["extra"] = {}, register = false): Promise<Harness> {
  const h = await startHarness({ pki, fake, proxyConfig, register, extra: { readinessIntervalMs: 100_000, ...extra } });
  cleanup.push(() => h.close());
  return h;
}

async function echo(metrics: string[]): Promise<EchoBackend> {
  const b = await startEchoBackend(metrics);
  cleanup.push(() => b.close());
  return b;
}

async function gauge(h: Harness, name: string): Promise<Record<string, number>> {
  const metric = await h.proxy.metrics.registry.getSingleMetric(name)!.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels["backend"] ?? ""), v.value]));
}

describe("discovery from held state", () => {
  it("answers at once while a backend hangs: the answer arrives while the proxy still waits on the hanging backend", async () => {
    const good = await echo(["queue_messages_ready"]);
    const hang = await startHangingServer();
    cleanup.push(() => hang.close());
    const h = await harness(
      proxyConfigText({ good: good.url, hang: hang.url }, [
        ["queue_.*", "good"],
        ["stuck_.*", "hang"],
      ], "discovery: { ttlSeconds: 0 }"),
    );
    const timeouts = async () =>
      (await h.proxy.metrics.backendErrors.get()).values.find((v) => v.labels["backend"] === "hang" && v.labels["kind"] === "timeout")?.value ?? 0;
    // ttlSeconds 0: this read starts a refresh, which calls the hanging backend…
    const [accepted, timedOut] = [hang.accepted, await timeouts()];
    const res = await h.get(V1, masters());
    // …and the answer did not wait for it: the proxy had not given up on the hanging call (2 s timeout) when it answered.
    expect(await timeouts()).toBe(timedOut);
    expect(res.status, res.text).toBe(200);
    await eventually(() => hang.accepted > accepted, 2000, "the refresh's call to the hanging backend");
    expect(hang.open).toBeGreaterThan(0);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(names(res.json())).toEqual(["queue_messages_ready"]);
  }, 30_000);

  it("serves the placeholder (200, ready, registered) before any backend has answered", async () => {
    const own = await startFakeKubeApiServer();
    cleanup.push(() => own.close());
    const h = await startHarness({
      pki,
      fake: own,
      register: true,
      proxyConfig: proxyConfigText({ down: await refusedUrl() }, [[".*", "down"]]),
      extra: { readinessIntervalMs: 100_000 },
    });
    cleanup.push(() => h.close());
    own.authorize = () => ({ allowed: true });
    const res = await h.get(V1, masters());
    expect(res.status, res.text).toBe(200);
    expect(res.json()).toEqual({
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion: "external.metrics.k8s.io/v1beta1",
      resources: [{ name: "externalmetrics", singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] }],
    });
    const ready = await h.get("/readyz");
    expect(ready.status, ready.text).toBe(200);
    expect(own.apiServices.has("v1beta1.external.metrics.k8s.io")).toBe(true);
    expect(await gauge(h, "emb_proxy_backend_up")).toEqual({ down: 0 });
    expect(await gauge(h, "emb_proxy_ready")).toEqual({ "": 1 });
  }, 30_000);

  it("keeps a failed backend's resources until it answers again; logs each health change once", async () => {
    const a = await echo(["queue_messages_ready"]);
    const b = await echo(["gcp|pubsub_backlog", "gcp|pubsub_oldest"]);
    const h = await harness(proxyConfigText({ a: a.url, b: b.url }, [
      ["queue_.*", "a"],
      ["gcp/.*", "b"],
    ]));
    const list = async () => names((await h.get(V1, as("alice"))).json());
    expect(await list()).toEqual(["gcp|pubsub_backlog", "gcp|pubsub_oldest", "queue_messages_ready"]);
    expect(await gauge(h, "emb_proxy_backend_up")).toEqual({ a: 1, b: 1 });

    b.answer = (path) => (path === V1 ? [500, "<html>upstream error</html>"] : undefined);
    for (let i = 0; i < 3; i++) await h.proxy.checkReadiness();
    expect(await list()).toEqual(["gcp|pubsub_backlog", "gcp|pubsub_oldest", "queue_messages_ready"]);
    expect(await gauge(h, "emb_proxy_backend_up")).toEqual({ a: 1, b: 0 });
    expect(await h.proxy.checkReadiness()).toBe(true);
    expect((await h.get("/readyz")).status).toBe(200);

    // A backend's new list replaces its old one once it answers again.
    b.answer = undefined;
    b.metrics = ["gcp|pubsub_backlog"];
    await h.proxy.checkReadiness();
    expect(await list()).toEqual(["gcp|pubsub_backlog", "queue_messages_ready"]);
    expect(await gauge(h, "emb_proxy_backend_up")).toEqual({ a: 1, b: 1 });

    const health = h.logs.filter((l) => l["backend"] === "b" && String(l.msg).startsWith("backend ") && l.msg !== "backend call failed");
    expect(health.map((l) => [l.level, l.msg])).toEqual([
      ["info", "backend answers discovery"],
      ["warn", "backend does not answer discovery; discovery keeps what it last listed"],
      ["info", "backend answers discovery again"],
    ]);
    expect(health[1]).toMatchObject({ keptResources: 2, error: expect.stringMatching(/answered HTTP 500/) });
    // …and not one failure line per probe.
    expect(h.logs.filter((l) => l.msg === "backend call failed" || String(l.msg).includes("partial"))).toEqual([]);
  }, 30_000);

  it("keeps the whole list when every backend is down, and stays ready", async () => {
    const a = await echo(["queue_messages_ready"]);
    const h = await harness(proxyConfigText({ a: a.url }, [[".*", "a"]]));
    expect(names((await h.get(V1, masters())).json())).toEqual(["queue_messages_ready"]);
    await a.close();
    expect(await h.proxy.checkReadiness()).toBe(true);
    const res = await h.get(V1, masters());
    expect(res.status, res.text).toBe(200);
    expect(names(res.json())).toEqual(["queue_messages_ready"]);
    expect((await h.get("/readyz")).text).toBe("ok");
    expect(h.proxy.notReady()).toEqual([]);
  }, 30_000);

  it("gives every caller the same answer, asking backends only with the proxy's own identity", async () => {
    const a = await echo(["queue_messages_ready"]);
    const h = await harness(proxyConfigText({ a: a.url }, [[".*", "a"]], "discovery: { ttlSeconds: 0 }"));
    const answers = [await h.get(V1, as("alice")), await h.get(V1, as("bob")), await h.get(V1, masters())];
    for (const r of answers) expect(r.status, r.text).toBe(200);
    expect(new Set(answers.map((r) => r.text)).size).toBe(1);
    await h.proxy.checkReadiness();
    const discoveryCallers = a.requests.flatMap((r, i) => (r.path === V1 ? [a.callers[i]?.user] : []));
    expect(discoveryCallers.length).toBeGreaterThan(0);
    expect(new Set(discoveryCallers)).toEqual(new Set([PROBE_CALLER.user]));
  }, 30_000);

  it("refreshes in the background at most once per discovery.ttlSeconds, one refresh for concurrent reads", async () => {
    let offset = 0;
    const a = await echo(["queue_messages_ready"]);
    const h = await harness(proxyConfigText({ a: a.url }, [[".*", "a"]], "discovery: { ttlSeconds: 5 }"), { now: () => Date.now() + offset });
    const calls = () => a.requests.filter((r) => r.path === V1).length;
    const atStart = calls(); // the start-up readiness round asked once
    expect(atStart).toBe(1);
    for (let i = 0; i < 5; i++) expect((await h.get(V1, as("alice"))).status).toBe(200);
    expect(calls()).toBe(atStart); // within the TTL: no backend call
    offset += 6_000;
    a.delayMs = 300;
    const reads = await Promise.all(Array.from({ length: 5 }, () => h.get(V1, as("alice"))));
    for (const r of reads) expect(r.status).toBe(200);
    await eventually(() => calls() > atStart, 2000, "the background refresh");
    await new Promise((r) => setTimeout(r, 600)); // the refresh (300 ms) is over
    expect(calls()).toBe(atStart + 1);
  }, 30_000);
});
