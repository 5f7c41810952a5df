/**
 * Issue 23 follow-up: the cluster policy layer's bounds set by an operator in
 * the ProxyConfig (`clusterPolicies.limits`, `clusterPolicies.resyncTimeoutSeconds`,
 * shared/proxy/config.ts), not by a caller of `startProxy`. The real proxy
 * over TLS with kube-apiserver's front-proxy client certificate, against the
 * fake Kubernetes API speaking the real wire protocol.
 *
 * - A tenant writing more policies into its namespace than the operator's
 *   `maxNamespaceObjects` closes only that namespace (503 naming the limit);
 *   another namespace keeps reading.
 * - An operator's `resyncTimeoutSeconds` bounds how long policies that cannot
 *   be refreshed stay in force.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki, type Reply, HPA_FRONT_PROXY as HPA } from "./proxy.harness.ts";

let pki: Pki;
let backend: EchoBackend;

beforeAll(async () => {
  pki = await createPki();
  backend = await startEchoBackend(["queue_messages_ready"]);
});
afterAll(async () => {
  await backend?.close();
});

/** A proxy whose ProxyConfig carries `clusterPolicies` (YAML lines under it) and whose caller sets nothing but the client and test timings. */
async function proxyWith(fake: FakeKubeApiServer, clusterPolicies: string): Promise<Harness> {
  fake.authorize = () => ({ allowed: true, reason: "fake RBAC allows everything" });
  const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
  return startHarness({
    pki,
    fake,
    proxyConfig: proxyConfigText({ fns: backend.url }, [[".*", "fns"]], `clusterPolicies:\n  enabled: true\n  whenNoneApply: Defer\n${clusterPolicies}`),
    extra: { clusterPolicies: { kc, debounceMs: 20, statusResyncMs: 100, backoffMs: 50 } },
  });
}

function read(h: Harness, namespace: string, metric = "queue_messages_ready"): Promise<Reply> {
  return h.get(`${V1}/namespaces/${namespace}/${metric}`, { cert: pki.frontProxy, headers: HPA });
}

/** A policy that allows every metric of its namespace (so a 503 can only be the limit). */
function allowAll(namespace: string, name: string) {
  return { kind: "ExternalMetricPolicy" as const, metadata: { name, namespace }, spec: { rules: [{ metric: "nothing_.*", deny: true }], defaultAction: "Allow" } };
}

describe("the ProxyConfig's clusterPolicies.limits", () => {
  let fake: FakeKubeApiServer;
  let h: Harness;
  beforeAll(async () => {
    fake = await startFakeKubeApiServer();
    for (let i = 0; i < 3; i++) fake.applyPolicy(allowAll("team-many", `p${i}`));
    fake.applyPolicy(allowAll("team-a", "only"));
    h = await proxyWith(fake, "  limits: { maxNamespaceObjects: 2 }\n");
    await eventually(() => h.proxy.clusterPolicies?.ready() === true, 5000, "the policies listed");
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
  });

  it("maxNamespaceObjects: 2 refuses a namespace with 3 policies (503 naming the limit) while another namespace reads", async () => {
    // Until the first rebuild is in force a read may get the layer's "not listed yet" 503: wait for the limit's.
    const LIMIT = '3 ExternalMetricPolicy objects in namespace "team-many" exceed the limit of 2 objects';
    await eventually(async () => String((await read(h, "team-many")).json().message).includes(LIMIT), 10_000, "team-many refused for its limit");
    const many = await read(h, "team-many");
    expect(many.status).toBe(503);
    expect(many.json()).toMatchObject({ kind: "Status", code: 503 });
    expect(many.json().message).toContain('cannot decide reads in namespace "team-many"');
    expect((await read(h, "team-a")).status).toBe(200);
    fake.deletePolicy("ExternalMetricPolicy", "team-many", "p0");
    await eventually(async () => (await read(h, "team-many")).status === 200, 5000, "team-many back within its limit");
  });
});

describe("the ProxyConfig's clusterPolicies.resyncTimeoutSeconds", () => {
  it("resyncTimeoutSeconds: 1 refuses reads (503 naming the bound) once the watch has failed for longer", async () => {
    const fake = await startFakeKubeApiServer();
    fake.applyPolicy(allowAll("team-a", "only"));
    const h = await proxyWith(fake, "  resyncTimeoutSeconds: 1\n");
    try {
      await eventually(async () => (await read(h, "team-a")).status === 200, 5000, "ready");
      fake.failing.add("externalmetricpolicies");
      fake.endWatches();
      // The default bound is 5 minutes: a refusal within 15 s can only come from the configured second.
      const BOUND = /the list and watch of ExternalMetricPolicy have failed for \d+ s, longer than the 1 s the proxy keeps enforcing policies it cannot refresh/;
      await eventually(async () => BOUND.test(String((await read(h, "team-a")).json().message)), 15_000, "refused past the configured bound");
      expect((await read(h, "team-a")).status).toBe(503);
      fake.failing.delete("externalmetricpolicies");
      await eventually(async () => (await read(h, "team-a")).status === 200, 10_000, "reads again after a list");
    } finally {
      await h.close();
      await fake.close();
    }
  }, 40_000);
});
