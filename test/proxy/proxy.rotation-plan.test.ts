/**
 * The Lease holder's rotation plan (shared/proxy/tls/rotation.ts
 * `reconcileSecret`) stepped second by second on a controlled clock through a
 * whole CA rotation: the steps keep their overlap, and the certificate in the
 * Secret always verifies with its `ca.crt` (what the APIService publishes).
 *
 * Found on the real aggregator (test/e2e/k8s.rotation.e2e.test.ts): a certificate
 * not yet due for renewal when the CA rotation starts, but with less than an
 * overlap left after step (a), forced step (b) early — 4.6 s after the new CA
 * reached caBundle instead of the 8 s overlap — because (a) drops the old CA's
 * key, so nothing could renew it from the old CA any more.
 */
import { X509Certificate } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createServingCA, issueServingCertificate } from "../../shared/proxy/tls/certs.ts";
import { ApiError, type KubeClient, type Secret } from "../../shared/proxy/kube/client.ts";
import { CA_BUNDLE_CHANGED_AT, SERVING_CHANGED_AT, reconcileSecret, type RotationStep } from "../../shared/proxy/tls/rotation.ts";

const SERVICE = { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy" };
const TARGET = { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy-tls" };
const SETTINGS = { certValiditySeconds: 30, caValiditySeconds: 90, overlapSeconds: 10 };
const T0 = Date.parse("2030-01-01T00:00:00Z");

/** The three KubeClient calls reconcileSecret makes (get, replace, create), over one stored Secret (absent: undefined). */
function fakeCore(initial: Secret | undefined): { core: KubeClient; secret: () => Secret } {
  let stored = structuredClone(initial);
  let rv = 1;
  const core = {
    get: async () => {
      if (stored === undefined) throw new ApiError(404, { kind: "Status", status: "Failure", reason: "NotFound", code: 404 }, "GET secret");
      return structuredClone(stored);
    },
    replace: async (_path: string, body: Secret) => {
      stored = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      return stored;
    },
    create: async (_path: string, body: Secret) => {
      if (stored !== undefined) throw new Error("the Secret exists");
      if (body.metadata?.resourceVersion !== undefined) throw new Error("a create carries no resourceVersion");
      stored = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      return stored;
    },
  };
  return { core: core as unknown as KubeClient, secret: () => stored! };
}

const b64 = (s: string) => Buffer.from(s).toString("base64");
const unb64 = (s: string | undefined) => Buffer.from(s ?? "", "base64").toString();
const pemBlocks = (pem: string) => (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((b) => new X509Certificate(b));

afterEach(() => {
  vi.useRealTimers();
});

describe("CA rotation plan on a controlled clock", () => {
  it("renews a certificate that would expire during the overlap from the old CA before adding the new one; every step waits the overlap", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    // CA made at T0 (due for rotation with a third of its life left, ~T0+57 s);
    // the certificate renewed at T0+45 s, expiring at T0+75 s: not due at
    // T0+58 s (17 s left of 33), but it would not last until an overlap after step (a).
    vi.setSystemTime(T0);
    const ca = await createServingCA(SERVICE.name, SERVICE.namespace, SETTINGS.caValiditySeconds);
    vi.setSystemTime(T0 + 45_000);
    const leaf = await issueServingCertificate(ca, SERVICE.name, SERVICE.namespace, SETTINGS.certValiditySeconds);
    const { core, secret } = fakeCore({
      apiVersion: "v1",
      kind: "Secret",
      type: "kubernetes.io/tls",
      metadata: {
        ...TARGET,
        resourceVersion: "1",
        annotations: { [CA_BUNDLE_CHANGED_AT]: new Date(T0).toISOString(), [SERVING_CHANGED_AT]: new Date(T0).toISOString() },
      },
      data: { "tls.crt": b64(leaf.certPem), "tls.key": b64(leaf.keyPem), "ca.crt": b64(ca.certPem), "ca.key": b64(ca.keyPem) },
    });

    const steps: { at: number; step: RotationStep["kind"] }[] = [];
    const broken: string[] = [];
    for (let t = 50; t <= 110; t++) {
      const now = T0 + t * 1000;
      vi.setSystemTime(now);
      const step = await reconcileSecret(core, TARGET, SERVICE, SETTINGS, () => {}, now);
      if (step.kind !== "none") steps.push({ at: t, step: step.kind });
      // What every replica serves and what the APIService publishes, a moment later.
      const data = secret().data!;
      const served = new X509Certificate(unb64(data["tls.crt"]));
      const bundle = pemBlocks(unb64(data["ca.crt"]));
      const valid = (c: X509Certificate) => Date.parse(c.validFrom) <= now && now < Date.parse(c.validTo);
      if (!valid(served) || !bundle.some((c) => valid(c) && served.checkIssued(c) && served.verify(c.publicKey))) broken.push(`${t}s`);
    }

    const first = (kind: RotationStep["kind"]) => steps.find((s) => s.step === kind)?.at;
    const [reissue, add, sw, drop] = [first("reissue"), first("add-ca"), first("switch"), first("drop-old-ca")];
    expect(steps.map((s) => s.step).slice(0, 4), JSON.stringify(steps)).toEqual(["reissue", "add-ca", "switch", "drop-old-ca"]);
    expect(reissue!).toBeLessThanOrEqual(add!);
    // each step of the rotation at least an overlap after the previous one
    expect(sw! - add!, JSON.stringify(steps)).toBeGreaterThanOrEqual(SETTINGS.overlapSeconds);
    expect(drop! - sw!, JSON.stringify(steps)).toBeGreaterThanOrEqual(SETTINGS.overlapSeconds);
    // the renewal came from the old CA (its key was still there), and nothing ever stopped verifying
    expect(broken).toEqual([]);
  });
});

describe("a lost Secret when the CA this replica holds has no key: a new CA is unavoidable", () => {
  it("publishes the new CA beside the old one and switches the served certificate only an overlap later; a client of the old caBundle keeps verifying until then", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(T0);
    const ca = await createServingCA(SERVICE.name, SERVICE.namespace, SETTINGS.caValiditySeconds);
    const leaf = await issueServingCertificate(ca, SERVICE.name, SERVICE.namespace, SETTINGS.certValiditySeconds);
    // What a replica served and holds: certificate, key and ca.crt, but ca.key was already gone from it.
    const held: Secret = {
      apiVersion: "v1",
      kind: "Secret",
      type: "kubernetes.io/tls",
      metadata: { ...TARGET, uid: "old-uid", resourceVersion: "7", annotations: { [CA_BUNDLE_CHANGED_AT]: new Date(T0).toISOString(), [SERVING_CHANGED_AT]: new Date(T0).toISOString() } },
      data: { "tls.crt": b64(leaf.certPem), "tls.key": b64(leaf.keyPem), "ca.crt": b64(ca.certPem) },
    };
    const { core, secret } = fakeCore(undefined); // deleted
    const oldCA = new X509Certificate(ca.certPem);
    const steps: { at: number; step: RotationStep["kind"] }[] = [];
    const brokenForOldClients: string[] = [];
    let switched: number | undefined;
    for (let t = 1; t <= 20; t++) {
      const now = T0 + t * 1000;
      vi.setSystemTime(now);
      const step = await reconcileSecret(core, TARGET, SERVICE, SETTINGS, () => {}, now, held);
      if (step.kind !== "none") steps.push({ at: t, step: step.kind });
      const served = new X509Certificate(unb64(secret().data!["tls.crt"]));
      if (step.kind === "switch") switched = t;
      // Until the switch, a client that still trusts only the old caBundle verifies what is served.
      if (switched === undefined && !(served.checkIssued(oldCA) && served.verify(oldCA.publicKey))) brokenForOldClients.push(`${t}s`);
      const bundle = pemBlocks(unb64(secret().data!["ca.crt"]));
      if (!bundle.some((c) => served.checkIssued(c) && served.verify(c.publicKey))) brokenForOldClients.push(`${t}s: not in ca.crt`);
    }
    expect(steps[0], JSON.stringify(steps)).toEqual({ at: 1, step: "add-ca" });
    expect(switched, JSON.stringify(steps)).toBeDefined();
    expect(switched! - 1).toBeGreaterThanOrEqual(SETTINGS.overlapSeconds);
    expect(brokenForOldClients).toEqual([]);
    expect(secret().metadata?.uid).toBeUndefined();
  });
});
