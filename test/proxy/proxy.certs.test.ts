/**
 * The serving certificate shared through one Secret by several proxy
 * replicas, against the fake Kubernetes API over real TLS: every replica
 * follows the Secret (watch) and reloads what it serves; one Lease elects the
 * only writer of the Secret and the APIService; renewal keeps the CA; a CA
 * rotation publishes old + new CA in `caBundle` before switching.
 */
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServingCA, certificatesFromPem, issueServingCertificate, signedBy } from "../../shared/proxy/tls/certs.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { LeaderElector } from "../../shared/proxy/tls/lease.ts";
import { startSecretServing, type RotationSettings, type SecretServing } from "../../shared/proxy/tls/rotation.ts";
import type { LogRecord } from "../../shared/proxy/log.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";

const NS = "emb";
const SECRET = "proxy-tls";
const SERVICE = { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy" };
const API = "v1beta1.external.metrics.k8s.io";

let pki: Pki;
let backend: EchoBackend;
beforeAll(async () => {
  [pki, backend] = await Promise.all([createPki(), startEchoBackend(["m"])]);
});
afterAll(async () => {
  await backend.close();
});

/** The DER of the certificate a TLS server presents. */
function served(port: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false, servername: "localhost" }, () => {
      const raw = socket.getPeerCertificate().raw;
      socket.end();
      resolve(raw);
    });
    socket.on("error", reject);
  });
}

/** Whether a TLS client trusting only `caPem` (as the aggregator trusts caBundle) accepts the server. */
function verifies(port: number, caPem: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: "127.0.0.1", port, ca: caPem, servername: `${SERVICE.name}.${SERVICE.namespace}.svc` }, () => {
      socket.end();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
  });
}

const der = (pem: string) => Buffer.from(certificatesFromPem(pem)[0]!.rawData);
const secretData = (fake: FakeKubeApiServer) => {
  const data = (fake.getSecret(NS, SECRET) as unknown as { data: Record<string, string> } | undefined)?.data ?? {};
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]));
};
const caBundleOf = (fake: FakeKubeApiServer) => {
  const api = fake.apiServices.get(API) as unknown as { spec: { caBundle: string } } | undefined;
  return api === undefined ? undefined : Buffer.from(api.spec.caBundle, "base64").toString("utf8");
};

/** One proxy replica: its own ServiceAccount token, elector, Secret follower and HTTPS server. */
interface Replica {
  token: string;
  elector?: LeaderElector;
  serving: SecretServing;
  harness: Harness;
  logs: LogRecord[];
  stop(): Promise<void>;
}

async function startReplica(
  fake: FakeKubeApiServer,
  options: { elect?: boolean; rotation?: RotationSettings; resyncIntervalMs?: number; register?: boolean } = {},
): Promise<Replica> {
  const token = `replica-${crypto.randomUUID()}`;
  fake.clientTokens.add(token);
  const kc = kubeConfigFor(fake.url, fake.caPem, token);
  const logs: LogRecord[] = [];
  const log = (r: LogRecord) => void logs.push(r);
  const elector =
    options.elect === false
      ? undefined
      : new LeaderElector({ kc, namespace: NS, name: SECRET, identity: token, leaseDurationSeconds: 2, renewDeadlineMs: 1500, retryPeriodMs: 200, log });
  const serving = startSecretServing({
    kc,
    secret: { namespace: NS, name: SECRET },
    service: SERVICE,
    ...(elector ? { elector } : {}),
    ...(options.rotation ? { rotation: options.rotation } : {}),
    log,
    checkIntervalMs: 200,
    resyncIntervalMs: options.resyncIntervalMs ?? 600_000,
  });
  elector?.start();
  const material = await serving.ready(10_000);
  const harness = await startHarness({
    pki,
    fake,
    proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]]),
    extra: {
      serving: material,
      readinessIntervalMs: 200,
      ...(options.register !== false
        ? {
            registration: {
              kc,
              target: { service: { ...SERVICE, port: 443 } },
              intervalMs: 100,
              ...(elector ? { isLeader: () => elector.isLeader() } : {}),
            },
          }
        : {}),
    },
  });
  serving.onChange((next) => harness.proxy.setServing(next));
  return {
    token,
    ...(elector ? { elector } : {}),
    serving,
    harness,
    logs,
    stop: async () => {
      await Promise.all([elector?.stop(), serving.stop(), harness.close()]);
    },
  };
}

describe("one Secret, followed by every replica", () => {
  it("serves the Secret's certificate as it is — even near expiry — and reloads it when the Secret changes, without writing anything", async () => {
    const fake = await startFakeKubeApiServer();
    // A certificate 10 days from expiry: the previous code replaced it with a new CA at start (30-day rule).
    const ca = await createServingCA(SERVICE.name, SERVICE.namespace, 3650 * 86400);
    const first = await issueServingCertificate(ca, SERVICE.name, SERVICE.namespace, 10 * 86400);
    const b64 = (t: string) => Buffer.from(t).toString("base64");
    fake.setSecret(NS, SECRET, { data: { "tls.crt": b64(first.certPem), "tls.key": b64(first.keyPem), "ca.crt": b64(ca.certPem) } });
    const r = await startReplica(fake, { elect: false, register: false });
    try {
      expect(await served(r.harness.proxy.port)).toEqual(der(first.certPem));
      // Someone (an operator, another replica's writer) replaces the certificate: picked up through the watch
      // (the periodic re-read is 10 minutes away in this test).
      const second = await issueServingCertificate(ca, SERVICE.name, SERVICE.namespace, 30 * 86400);
      fake.setSecret(NS, SECRET, { data: { "tls.crt": b64(second.certPem), "tls.key": b64(second.keyPem), "ca.crt": b64(ca.certPem) } });
      await eventually(async () => (await served(r.harness.proxy.port)).equals(der(second.certPem)), 5000, "the new certificate is served");
      // An unusable update (key of another certificate) is refused; the current certificate stays.
      fake.setSecret(NS, SECRET, { data: { "tls.crt": b64(first.certPem), "tls.key": b64(second.keyPem), "ca.crt": b64(ca.certPem) } });
      await eventually(() => r.logs.some((l) => l.msg.includes("not usable") && String(l["problem"]).includes("not the key")), 5000, "refusal logged");
      expect(await served(r.harness.proxy.port)).toEqual(der(second.certPem));
      expect(fake.writes.filter((w) => w.resource !== "leases")).toEqual([]);
    } finally {
      await r.stop();
      await fake.close();
    }
  });

  it("lists again after the watch fails, and still sees a change made meanwhile", async () => {
    const fake = await startFakeKubeApiServer();
    const ca = await createServingCA(SERVICE.name, SERVICE.namespace, 3650 * 86400);
    const one = await issueServingCertificate(ca, SERVICE.name, SERVICE.namespace, 365 * 86400);
    const two = await issueServingCertificate(ca, SERVICE.name, SERVICE.namespace, 365 * 86400);
    const b64 = (t: string) => Buffer.from(t).toString("base64");
    fake.setSecret(NS, SECRET, { data: { "tls.crt": b64(one.certPem), "tls.key": b64(one.keyPem), "ca.crt": b64(ca.certPem) } });
    const r = await startReplica(fake, { elect: false, register: false });
    try {
      // Watches fail (500) from now on; the open ones end. The change below reaches no watch.
      fake.failing.add("secrets-watch");
      fake.endWatches();
      fake.setSecret(NS, SECRET, { data: { "tls.crt": b64(two.certPem), "tls.key": b64(two.keyPem), "ca.crt": b64(ca.certPem) } });
      await eventually(async () => (await served(r.harness.proxy.port)).equals(der(two.certPem)), 8000, "the change is seen by listing again");
      expect(r.logs.some((l) => l.msg.includes("watch of the serving certificate Secret failed"))).toBe(true);
    } finally {
      await r.stop();
      await fake.close();
    }
  });
});

describe("one writer elected by a Lease", () => {
  it("two replicas: one creates the Secret, both serve it, only the Lease holder writes the Secret and the APIService; the other takes over when it stops", async () => {
    const fake = await startFakeKubeApiServer();
    const [a, b] = await Promise.all([startReplica(fake), startReplica(fake)]);
    let stopped: Replica | undefined;
    try {
      const leader = a.elector!.isLeader() ? a : b;
      const other = leader === a ? b : a;
      expect(other.elector!.isLeader()).toBe(false);
      const lease = fake.leases.get(`${NS}/${SECRET}`) as unknown as { spec: { holderIdentity: string; leaseDurationSeconds: number; renewTime: string } };
      expect(lease.spec.holderIdentity).toBe(leader.token);
      expect(lease.spec.leaseDurationSeconds).toBe(2);
      await eventually(() => caBundleOf(fake) !== undefined, 5000, "APIService registered");
      const data = secretData(fake);
      expect(Object.keys(data).sort()).toEqual(["ca.crt", "ca.key", "tls.crt", "tls.key"]);
      expect(caBundleOf(fake)).toBe(data["ca.crt"]);
      // Both replicas serve the Secret's certificate, and the aggregator's caBundle verifies both.
      for (const r of [a, b]) {
        expect(await served(r.harness.proxy.port)).toEqual(der(data["tls.crt"]!));
        expect(await verifies(r.harness.proxy.port, caBundleOf(fake)!)).toBe(true);
      }
      // Many re-assert rounds (100 ms): caBundle never flips, nobody rewrites it.
      await new Promise((r) => setTimeout(r, 1500));
      const writers = (resource: string) => new Set(fake.writes.filter((w) => w.resource === resource).map((w) => w.by));
      expect(writers("secrets")).toEqual(new Set([leader.token]));
      expect(writers("apiservices")).toEqual(new Set([leader.token]));
      expect(fake.writes.filter((w) => w.resource === "apiservices")).toHaveLength(1);
      expect(fake.writes.filter((w) => w.resource === "secrets")).toHaveLength(1);
      expect(writers("leases")).toEqual(new Set([leader.token]));

      // The holder stops (releases the Lease): the other takes over and is the one that writes now.
      stopped = leader;
      await leader.stop();
      await eventually(() => other.elector!.isLeader(), 5000, "the other replica leads");
      fake.apiServices.delete(API); // someone deletes the APIService
      await eventually(() => caBundleOf(fake) !== undefined, 5000, "re-registered by the new leader");
      expect(fake.writes.filter((w) => w.resource === "apiservices").at(-1)!.by).toBe(other.token);
      expect(caBundleOf(fake)).toBe(data["ca.crt"]);
    } finally {
      await Promise.all([a, b].filter((r) => r !== stopped).map((r) => r.stop()));
      await fake.close();
    }
  });

  it("a holder that cannot renew stops acting before the Lease expires, and another one takes it only after it expired", async () => {
    const fake = await startFakeKubeApiServer();
    const kcs = [0, 1].map(() => {
      const token = `c-${crypto.randomUUID()}`;
      fake.clientTokens.add(token);
      return kubeConfigFor(fake.url, fake.caPem, token);
    });
    const opts = { namespace: NS, name: "lease", leaseDurationSeconds: 2, renewDeadlineMs: 1000, retryPeriodMs: 100, log: () => {} };
    const one = new LeaderElector({ ...opts, kc: kcs[0]!, identity: "one" });
    const two = new LeaderElector({ ...opts, kc: kcs[1]!, identity: "two" });
    try {
      expect(await one.tryNow()).toBe(true);
      expect(await two.tryNow()).toBe(false);
      fake.failing.add("leases");
      const cut = Date.now();
      await eventually(() => !one.isLeader(), 3000, "the cut-off holder stops leading");
      fake.failing.delete("leases");
      // "two" saw the record at its first try; it must wait a full lease duration from then.
      while (!(await two.tryNow())) await new Promise((r) => setTimeout(r, 100));
      expect(Date.now() - cut).toBeGreaterThanOrEqual(1500);
      expect((fake.leases.get(`${NS}/lease`) as unknown as { spec: { holderIdentity: string; leaseTransitions: number } }).spec).toMatchObject({ holderIdentity: "two", leaseTransitions: 1 });
      expect(await one.tryNow()).toBe(false);
    } finally {
      await Promise.all([one.stop(), two.stop()]);
      await fake.close();
    }
  });
});

describe("renewal", () => {
  it("renews the serving certificate from the same CA: caBundle does not change, every replica serves the new certificate", async () => {
    const fake = await startFakeKubeApiServer();
    const rotation = { certValiditySeconds: 4, caValiditySeconds: 3600, overlapSeconds: 1 };
    const [a, b] = await Promise.all([startReplica(fake, { rotation }), startReplica(fake, { rotation })]);
    try {
      await eventually(() => caBundleOf(fake) !== undefined, 5000, "APIService registered");
      const before = secretData(fake);
      await eventually(() => secretData(fake)["tls.crt"] !== before["tls.crt"], 8000, "certificate renewed");
      const after = secretData(fake);
      expect(after["ca.crt"]).toBe(before["ca.crt"]);
      expect(after["ca.key"]).toBe(before["ca.key"]);
      const ca = certificatesFromPem(after["ca.crt"]!)[0]!;
      expect(await signedBy(certificatesFromPem(after["tls.crt"]!)[0]!, ca)).toBe(true);
      for (const r of [a, b]) await eventually(async () => (await served(r.harness.proxy.port)).equals(der(after["tls.crt"]!)), 5000, "reloaded");
      expect(caBundleOf(fake)).toBe(before["ca.crt"]);
      expect(fake.writes.filter((w) => w.resource === "apiservices")).toHaveLength(1);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
      await fake.close();
    }
  });

  it("the writer publishes the caBundle it wrote without waiting for its own watch (a lagging watch cannot make the next step come before caBundle has the new CA)", async () => {
    const fake = await startFakeKubeApiServer();
    const a = await startReplica(fake);
    try {
      await eventually(() => caBundleOf(fake) !== undefined, 5000, "APIService registered");
      const release = fake.holdSecretEvents();
      try {
        // An administrator removes ca.key: the writer starts a CA rotation, step (a) (ca.crt = old + new).
        const stored = fake.getSecret(NS, SECRET) as unknown as { data: Record<string, string>; metadata: Record<string, unknown> };
        const { ["ca.key"]: _dropped, ...data } = stored.data;
        fake.setSecret(NS, SECRET, { data, metadata: stored.metadata });
        await eventually(() => certificatesFromPem(secretData(fake)["ca.crt"]!).length === 2, 5000, "the writer adds a CA");
        await eventually(() => caBundleOf(fake) === secretData(fake)["ca.crt"], 3000, "the APIService carries old + new while the watch still lags");
      } finally {
        release();
      }
    } finally {
      await a.stop();
      await fake.close();
    }
  });

  it("rotates the CA with overlap: caBundle goes old → old+new → new, and what any replica serves always verifies with the published caBundle", async () => {
    const fake = await startFakeKubeApiServer();
    // An overlap of 2 s: what a replica has to load the new certificate before the old CA leaves caBundle
    // (1 s was missed on a loaded machine; in production it is 600 s).
    const rotation = { certValiditySeconds: 6, caValiditySeconds: 18, overlapSeconds: 2 };
    const [a, b] = await Promise.all([startReplica(fake, { rotation }), startReplica(fake, { rotation })]);
    try {
      await eventually(() => caBundleOf(fake) !== undefined, 5000, "APIService registered");
      const bundles: string[] = [];
      let failures = 0;
      const deadline = Date.now() + 40_000;
      while (Date.now() < deadline) {
        const bundle = caBundleOf(fake)!;
        if (bundles.at(-1) !== bundle) bundles.push(bundle);
        for (const r of [a, b]) if (!(await verifies(r.harness.proxy.port, bundle))) failures++;
        if (bundles.length >= 3 && certificatesFromPem(bundle).length === 1) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const cas = bundles.map((pem) => certificatesFromPem(pem).map((c) => c.serialNumber));
      expect(cas).toHaveLength(3);
      const [oldCA] = cas[0]!;
      expect(cas[1]).toHaveLength(2);
      expect(cas[1]![0]).toBe(oldCA);
      const newCA = cas[1]![1];
      expect(cas[2]).toEqual([newCA]);
      expect(failures).toBe(0);
      // The serving certificate now comes from the new CA, on both replicas.
      const leaf = secretData(fake)["tls.crt"]!;
      expect(await signedBy(certificatesFromPem(leaf)[0]!, certificatesFromPem(bundles[2]!)[0]!)).toBe(true);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
      await fake.close();
    }
  }, 60_000);
});

describe("Secret loss (issue 23: a deleted or corrupted Secret must not cut off clients of the published caBundle)", () => {
  /**
   * Connect to every replica with only `caPem` trusted, over and over, while
   * `act` runs and for `afterMs` after; @returns how many handshakes failed of how many.
   */
  async function continuity(replicas: Replica[], caPem: string, act: () => void | Promise<void>, until: () => boolean, afterMs: number): Promise<{ failed: number; total: number }> {
    let failed = 0;
    let total = 0;
    await act();
    const deadline = Date.now() + 15_000;
    let settledAt: number | undefined;
    while (Date.now() < deadline) {
      for (const r of replicas) {
        total++;
        if (!(await verifies(r.harness.proxy.port, caPem))) failed++;
      }
      if (settledAt === undefined && until()) settledAt = Date.now();
      if (settledAt !== undefined && Date.now() - settledAt >= afterMs) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    if (settledAt === undefined) throw new Error("no certificate was written into the Secret again");
    return { failed, total };
  }

  for (const how of ["deleted", "corrupted"] as const) {
    it(`a ${how} Secret is written again with the CA and certificate the replicas hold: caBundle never changes, every handshake with the old caBundle succeeds`, async () => {
      const fake = await startFakeKubeApiServer();
      const [a, b] = await Promise.all([startReplica(fake), startReplica(fake)]);
      try {
        await eventually(() => caBundleOf(fake) !== undefined, 5000, "APIService registered");
        const before = secretData(fake);
        const bundle = caBundleOf(fake)!;
        const { failed, total } = await continuity(
          [a, b],
          bundle,
          () => {
            if (how === "deleted") fake.deleteSecret(NS, SECRET);
            else fake.setSecret(NS, SECRET, { data: { "tls.crt": Buffer.from("garbage").toString("base64"), "ca.crt": "", "ca.key": Buffer.from("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").toString("base64") } });
          },
          () => secretData(fake)["tls.crt"]?.includes("BEGIN CERTIFICATE") === true,
          1500,
        );
        expect(failed, `${failed} of ${total} handshakes failed`).toBe(0);
        expect(total).toBeGreaterThan(10);
        const after = secretData(fake);
        for (const k of ["tls.crt", "tls.key", "ca.crt", "ca.key"]) expect(after[k], k).toBe(before[k]);
        expect(caBundleOf(fake)).toBe(bundle);
        for (const r of [a, b]) expect((await served(r.harness.proxy.port)).equals(der(before["tls.crt"]!))).toBe(true);
        const writer = [a, b].find((r) => r.logs.some((l) => l.msg === "serving certificate Secret updated" && l.step === "restore"));
        expect(writer, "one replica restored the Secret").toBeDefined();
      } finally {
        await Promise.all([a.stop(), b.stop()]);
        await fake.close();
      }
    });
  }
});
